"""A scenario's timeline on the wall clock against a RealCluster: each event at its `at` (ms after the
start), in (time, file position) order, as Kafka's own tools and signals do it.

| event | on real Kafka |
| --- | --- |
| produce | confluent-kafka producer thread (rate_per_sec x duration_ms, or `records` at once), acks as given |
| crash | SIGKILL of the broker's JVM |
| restart | the same JVM command again (same id, port, log dirs) |
| shutdown | SIGTERM: Kafka's controlled shutdown |
| pause | SIGSTOP, SIGCONT `duration_ms` later |
| reassign | kafka.admin.ReassignPartitionsCommand --execute [--throttle] (KIP-455; log dirs, KIP-113, as paths) |
| elect_leaders | kafka.admin.LeaderElectionCommand |
| delete_topic | kafka.admin.TopicCommand --delete |

Any other event is refused (NotYetSupportedError naming it) before anything starts.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import NotYetSupportedError
from .cluster import RealCluster
from .tools import SteadyProducer, create_topic, reassign, run_tool

SUPPORTED = ("produce", "crash", "restart", "shutdown", "pause", "reassign", "elect_leaders", "delete_topic")

# Why each event kind the emulator runs is not driven on real Kafka yet (docs/fidelity.md).
WHY_NOT = {
    "isolate": "the broker JVMs, ZooKeeper and the clients all talk over one loopback interface: cutting two "
               "groups of brokers apart (and a broker from ZooKeeper when `from` is the controller) needs "
               "per-connection packet filtering between ports, which replay has no robust way to do",
    "heal": "it ends an `isolate`, which is not driven",
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
        elif e.type == "reassign":
            out = reassign(c, self._real_plan(a["plan"]), a.get("throttle"), self.workdir, a.get("log_dirs_throttle"))
        elif e.type == "elect_leaders":
            out = self._elect(a)
        elif e.type == "delete_topic":
            out = run_tool(c, "kafka.admin.TopicCommand", "--bootstrap-server", c.bootstrap, "--delete",
                           "--topic", a if isinstance(a, str) else a["topic"])
        self.done.append((self.now_ms(), e.type, out))

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
