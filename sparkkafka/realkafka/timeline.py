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
from .tools import SteadyProducer, create_topic, reassign, run_tool

SUPPORTED = ("produce", "crash", "restart", "shutdown", "pause", "isolate", "heal", "reassign", "elect_leaders",
             "delete_topic")

# Why each event kind the emulator runs is not driven on real Kafka yet (docs/fidelity.md).
WHY_NOT = {
    "fail_log_dir": "not driven yet (Kafka's own LogDirFailureTest replaces the dir by a file)",
    "controller_failover": "not driven yet (deleting /controller through ZooKeeper's client)",
    "create_topic": "not driven yet",
    "set_config": "not driven yet",
}


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
            create_topic(self.cluster, t.name, t.partitions, t.replication_factor,
                         {p: list(r) for p, r in t.assignment.items()} if t.assignment else None, t.config)

    def partitions(self, topic: str) -> list[int]:
        spec = next(t for t in self.scenario.topics if t.name == topic)
        return sorted(spec.assignment) if spec.assignment else list(range(spec.partitions))

    def now_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def run(self, until_ms: int, tick=None, at_end=None) -> None:
        """Every event at its time, paused brokers resumed on theirs, until `until_ms` (from `started`, set
        now unless the caller set it); `tick()` is called between waits, `at_end()` once at `until_ms`,
        before the producers stop. A tool's JVM (a reassignment: ~6 s here) delays the events after it by
        its run time."""
        events = sorted(self.scenario.timeline, key=lambda e: (e.time_ms(self.scenario.round_ms), e.index))
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
            out = run_tool(c, "kafka.admin.TopicCommand", "--bootstrap-server", c.bootstrap, "--delete",
                           "--topic", a if isinstance(a, str) else a["topic"])
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

    def _elect(self, a: dict) -> str:
        args = ["--bootstrap-server", self.cluster.bootstrap, "--election-type",
                str(a.get("election_type", "preferred")).upper()]
        parts = a.get("partitions")
        if parts:
            path = self.workdir / f"elect-{time.monotonic_ns()}.json"
            path.write_text(json.dumps({"partitions": [{"topic": p["topic"], "partition": p["partition"]}
                                                       for p in parts]}))
            args += ["--path-to-json-file", str(path)]
        else:
            args += ["--all-topic-partitions"]
        return run_tool(self.cluster, "kafka.admin.LeaderElectionCommand", *args)
