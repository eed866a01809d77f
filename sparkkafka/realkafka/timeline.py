"""A scenario's timeline on the wall clock against a RealCluster: each event at its `at` (ms after the
start), in (time, file position) order, as Kafka's own tools and signals do it.

| event | on real Kafka |
| --- | --- |
| produce | confluent-kafka producer thread (rate_per_sec x duration_ms, or `records` at once), acks as given |
| crash | SIGKILL of the broker's JVM |
| restart | the same JVM command again (same id, port, log dirs) |
| shutdown | SIGTERM: Kafka's controlled shutdown |
| pause | SIGSTOP, SIGCONT `duration_ms` later |
| isolate | blackhole routes between the two groups' network namespaces (netns.py), removed `duration_ms` later |
| heal | every isolation's routes removed |
| reassign | kafka.admin.ReassignPartitionsCommand --execute [--throttle] (KIP-455; log dirs, KIP-113, as paths) |
| elect_leaders | kafka.admin.LeaderElectionCommand |
| delete_topic | kafka.admin.TopicCommand --delete |
| create_topic | kafka.admin.TopicCommand --create --replica-assignment (the emulator run's assignment, replay.py) |
| set_config | kafka.admin.ConfigCommand --alter --entity-type topics|brokers (--add-config, --delete-config) |
| fail_log_dir | the dir replaced by a file (LogDirFailureTest); the broker notices at its next IO on it |
| controller_failover | /controller deleted through ZooKeeper (ControllerIntegrationTest) |

Any other event is refused (NotYetSupportedError naming it) before anything starts, and so is `isolate`
where network namespaces cannot be made (netns.unavailable).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import NotYetSupportedError
from . import netns
from .cluster import RealCluster
from .tools import SteadyProducer, alter_config, create_topic, delete_topic, reassign, run_tool

SUPPORTED = ("produce", "crash", "restart", "shutdown", "pause", "isolate", "heal", "reassign", "elect_leaders",
             "delete_topic", "create_topic", "set_config", "fail_log_dir", "controller_failover")

# Why an event kind the emulator runs is not driven on real Kafka yet (docs/fidelity.md): none left.
WHY_NOT: dict[str, str] = {}


THROTTLED_REPLICAS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
THROTTLE_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                  "replica.alter.log.dirs.io.max.bytes.per.second")


def in_run_order(scenario) -> list:
    """The timeline's events in the order they run: by time, then file position."""
    return sorted(scenario.timeline, key=lambda e: (e.time_ms(scenario.round_ms), e.index))


def all_topics(scenario) -> list:
    """The scenario's topics, then those its create_topic events make, in timeline order (TopicSpecs)."""
    return [*scenario.topics, *(e.args["topic"] for e in in_run_order(scenario) if e.type == "create_topic")]


def _check_deleted_configs(scenario) -> None:
    """A set_config's null value deletes an override; kafka-configs refuses to delete one the entity does
    not have (ConfigCommand.alterConfig: "Invalid config(s): k"), where the emulator does nothing. Refused
    here, before anything starts, rather than mid-run: the overrides are the topics' `config` and the
    earlier set_config events' (a broker's `cluster.config` is static, in server.properties)."""
    overrides: dict[tuple[str, str], set[str]] = {("topics", t.name): set(t.config) for t in scenario.topics}
    rates = False  # a throttled reassignment set the rates on brokers this check does not follow
    for e in in_run_order(scenario):
        if e.type == "create_topic":
            overrides[("topics", e.args["topic"].name)] = set(e.args["topic"].config)
        elif e.type == "reassign" and (e.args.get("throttle") is not None or e.args.get("log_dirs_throttle")):
            # ReassignPartitionsCommand sets the throttled replica lists on the moved topics, the rates on
            # the brokers of the moved replicas
            if e.args.get("throttle") is not None:
                for p in e.args["plan"]["partitions"]:
                    overrides.setdefault(("topics", p["topic"]), set()).update(THROTTLED_REPLICAS)
            rates = True
        elif e.type == "set_config":
            have = overrides.setdefault((e.args["entity"], str(e.args["name"])), set())
            maybe = set(THROTTLE_RATES) if rates and e.args["entity"] == "brokers" else set()
            absent = [k for k, v in e.args["config"].items() if v is None and k not in have | maybe]
            if absent:
                raise NotYetSupportedError(f"timeline[{e.index}].set_config.config", e.args["config"],
                                           f"kafka-configs refuses to delete an override the entity does not "
                                           f"have (Invalid config(s): {','.join(absent)})")
            have |= {k for k, v in e.args["config"].items() if v is not None}
            have -= {k for k, v in e.args["config"].items() if v is None}


def check_supported(scenario) -> None:
    """Refuse, before any process starts, what the real-Kafka side cannot drive yet."""
    for e in scenario.timeline:
        if e.type not in SUPPORTED:
            raise NotYetSupportedError(f"timeline[{e.index}].{e.type}", e.args,
                                       f"replay --on-kafka does not drive '{e.type}' events yet "
                                       f"(supported: {', '.join(SUPPORTED)})"
                                       + (f": {WHY_NOT[e.type]}" if e.type in WHY_NOT else ""))
        if e.type == "produce" and e.args.get("key") is not None:
            raise NotYetSupportedError(f"timeline[{e.index}].produce.key", e.args["key"],
                                       "replay --on-kafka does not send keyed records yet")
        if e.type == "crash" and e.args.get("power_loss"):
            raise NotYetSupportedError(f"timeline[{e.index}].crash.power_loss", True,
                                       "a power loss (unflushed data lost) cannot be done to a local process")
        if e.type == "reassign" and e.args.get("via") == "zookeeper":
            raise NotYetSupportedError(f"timeline[{e.index}].reassign.via", "zookeeper",
                                       "replay --on-kafka reassigns through the AdminClient only")
    _check_deleted_configs(scenario)
    isolate = next((e for e in scenario.timeline if e.type == "isolate"), None)
    if isolate is not None:
        if len(scenario.brokers) >= netns.MAX_NODES:
            raise NotYetSupportedError(f"timeline[{isolate.index}].isolate", isolate.args,
                                       f"replay --on-kafka runs at most {netns.MAX_NODES - 1} brokers in network "
                                       f"namespaces (one /24 of {netns.RANGE} per replay)")
        reason = netns.unavailable()
        if reason is not None:
            raise NotYetSupportedError(f"timeline[{isolate.index}].isolate", isolate.args,
                                       "replay --on-kafka cuts brokers apart with Linux network namespaces, one "
                                       f"per JVM, which this machine does not allow: {reason}")
    for t in scenario.topics:
        if t.state is not None:
            raise NotYetSupportedError(f"topics[{t.name}].state", "...",
                                       "replay --on-kafka starts from empty topics only")


def _acks(value) -> str:
    return "all" if value in (-1, "all") else str(value)


@dataclass
class Timeline:
    """Runs a scenario's events; `started` is the wall-clock origin (time.monotonic) of `at: 0`."""

    scenario: object
    cluster: RealCluster
    workdir: Path
    producers: list[SteadyProducer] = field(default_factory=list)
    done: list[tuple[int, str, str]] = field(default_factory=list)  # (ms after start, event, tool output)
    started: float = 0.0
    # (its `at`, broker, ms after start its JVM started) of each restart: the JVM starts later when the
    # timeline was held (a shutdown waits for its JVM to exit, a tool for its run)
    restarted: list[tuple[int, int, int]] = field(default_factory=list)
    _resume: list[tuple[int, int]] = field(default_factory=list)  # (due ms, broker) of paused brokers
    # network partitions in force: (brokers, cut off from, due ms or None until a heal), as the emulator's
    isolations: list[tuple[frozenset[int], frozenset[int], int | None]] = field(default_factory=list)

    def create_topics(self) -> None:
        for t in self.scenario.topics:
            self._create(t)

    def _create(self, t) -> str:
        """kafka-topics --create of a TopicSpec, with its assignment when it has one."""
        return create_topic(self.cluster, t.name, t.partitions, t.replication_factor, t.assignment, t.config)

    def partitions(self, topic: str) -> list[int]:
        spec = [t for t in all_topics(self.scenario) if t.name == topic][-1]
        return sorted(spec.assignment) if spec.assignment else list(range(spec.partitions))

    def now_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def run(self, until_ms: int, tick=None, at_end=None) -> None:
        """Every event at its time, paused brokers resumed on theirs, until `until_ms` (from `started`, set
        now unless the caller set it); `tick()` is called between waits, `at_end()` once at `until_ms`,
        before the producers stop. A tool's JVM (a reassignment: ~6 s here) delays the events after it by
        its run time."""
        events = in_run_order(self.scenario)
        self.started = self.started or time.monotonic()
        i = 0
        while True:
            now = self.now_ms()
            for due, b in [r for r in self._resume if r[0] <= now]:
                self.cluster.resume(b)
                self._resume.remove((due, b))
            if any(end is not None and end <= now for _, _, end in self.isolations):
                self._set_isolations([i for i in self.isolations if i[2] is None or i[2] > now])
            while i < len(events) and events[i].time_ms(self.scenario.round_ms) <= now:
                self.apply(events[i])
                i += 1
            if now >= until_ms:
                if at_end is not None:
                    at_end()
                break
            if tick is not None:
                tick()
            time.sleep(0.02)
        for _, b in self._resume:
            self.cluster.resume(b)
        for p in self.producers:
            p.stop()

    def apply(self, e) -> None:
        a, c, out = e.args, self.cluster, ""
        if e.type == "produce":
            parts = self.partitions(a["topic"]) if a["partition"] == "all" else [int(a["partition"])]
            self.producers.append(SteadyProducer(c, a["topic"], parts, a.get("rate_per_sec"),
                                                 int(a.get("duration_ms") or 0), _acks(a["acks"]),
                                                 int(a["value_bytes"]), a.get("records")).start())
        elif e.type == "crash":
            c.crash(a["broker"])
        elif e.type == "restart":
            c.restart(a["broker"])
            self.restarted.append((e.time_ms(self.scenario.round_ms), a["broker"], self.now_ms()))
        elif e.type == "shutdown":
            c.shutdown(a["broker"] if isinstance(a, dict) and "broker" in a else a)
        elif e.type == "pause":
            c.pause(a["broker"])
            self._resume.append((self.now_ms() + int(a["duration_ms"]), a["broker"]))
        elif e.type == "isolate":
            # `from: controller` is the controller of the event's time (driver/timeline.py does the same)
            other = [c.controller()] if a["from"] == "controller" else a["from"]
            end = self.now_ms() + int(a["duration_ms"]) if a.get("duration_ms") else None
            self._set_isolations([*self.isolations, (frozenset(a["brokers"]), frozenset(other) - {-1}, end)])
        elif e.type == "heal":
            self._set_isolations([])
        elif e.type == "reassign":
            out = reassign(c, self._real_plan(a["plan"]), a.get("throttle"), self.workdir, a.get("log_dirs_throttle"))
        elif e.type == "elect_leaders":
            out = self._elect(a)
        elif e.type == "delete_topic":
            out = delete_topic(c, a if isinstance(a, str) else a["topic"])
        elif e.type == "create_topic":
            out = self._create(a["topic"])
        elif e.type == "set_config":
            out = alter_config(c, a["entity"], a["name"], a["config"])
        elif e.type == "fail_log_dir":
            c.fail_log_dir(a["broker"], a["log_dir"])
        elif e.type == "controller_failover":
            out = f"/controller of broker {c.controller_failover()} deleted"
        self.done.append((self.now_ms(), e.type, out))

    def _set_isolations(self, isolations: list[tuple[frozenset[int], frozenset[int], int | None]]) -> None:
        """The isolations in force now, their routes set (a heal with none cuts nothing)."""
        self.isolations = isolations
        if self.cluster.net is not None:
            self.cluster.isolate(netns.cut_pairs((a, o) for a, o, _ in isolations))

    def _real_plan(self, plan: dict) -> dict:
        """The plan with each named log dir (KIP-113) as the real broker's path for it."""
        def real(e: dict) -> list[str]:
            return [self.cluster.real_dir(b, d) for b, d in zip(e["replicas"], e["log_dirs"], strict=True)]

        parts = [{**e, "log_dirs": real(e)} if e.get("log_dirs") else e for e in plan["partitions"]]
        return {**plan, "partitions": parts}

    def election_args(self, a: dict) -> list[str]:
        """kafka-leader-election's arguments for an elect_leaders event: `--election-type PREFERRED|UNCLEAN`
        and the event's (topic, partition) pairs in a `--path-to-json-file` ({"partitions": [{"topic",
        "partition"}]}, LeaderElectionCommand's format), or `--all-topic-partitions` without them."""
        args = ["--bootstrap-server", self.cluster.bootstrap, "--election-type",
                str(a.get("election_type", "preferred")).upper()]
        parts = a.get("partitions")
        if parts:
            path = self.workdir / f"elect-{time.monotonic_ns()}.json"
            path.write_text(json.dumps({"partitions": [{"topic": t, "partition": int(p)} for t, p in parts]}))
            args += ["--path-to-json-file", str(path)]
        else:
            args += ["--all-topic-partitions"]
        return args

    def _elect(self, a: dict) -> str:
        return run_tool(self.cluster, "kafka.admin.LeaderElectionCommand", *self.election_args(a))
