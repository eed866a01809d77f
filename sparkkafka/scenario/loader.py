"""Scenario YAML -> validated, normalised `Scenario` (docs/scenario-format.md).

Every problem raises `ScenarioError(field, value, message)`; `field` is the dotted/indexed path of the
offending value (`timeline[3].crash.broker`, `topics[0].replication_factor`). Validation is two steps, both
done before anything is created or Spark starts:

1. `schema.validate`: the document's shape as typed pydantic models (keys, strict types, the bounds of
   every number that sizes work, the rules inside one mapping).
2. `_Sequence`: what needs more than one mapping, in one pass over those models in the order the run meets
   them (the topics, then the timeline by time, then file position): a broker the cluster has, a topic that
   exists at that point (created by an earlier create_topic, not deleted by an earlier delete_topic), a
   partition the topic has, a log dir the brokers have, an assignment as AdminZkClient checks it, an imported
   state against its assignment, racks for every broker or none, and the brokers' up/down state (crash,
   shutdown and pause need the broker up, restart needs it down). It builds the frozen model.py objects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from sparkkafka.errors import NotYetSupportedError
from sparkkafka.protocol.config import EMULATOR_DEFAULTS, EmulatorSettings, broker_config
from sparkkafka.scenario import events as _kafka_kinds  # noqa: F401 - Kafka's event kinds registered
from sparkkafka.scenario import schema
from sparkkafka.scenario.event_kind import KINDS, child, refuse
from sparkkafka.scenario.model import Event, PartitionStateSpec, ReplicaLogSpec, Scenario, TopicSpec
from sparkkafka.scenario.schema import (  # noqa: F401 - the bounds, as users of this module read them
    INT_MAX,
    MAX_BROKERS,
    MAX_PARTITIONS,
    MAX_RECORDS,
    MAX_TIME_MS,
    MAX_VALUE_BYTES,
    _default_of,
    unknown_message,
)

# Valid events (and "crash.power_loss") whose behaviour is not implemented yet. They are fully
# validated, then rejected with NotYetSupportedError; remove a name here once it is implemented.
NOT_YET_SUPPORTED: set[str] = set()

DEFAULT_TAIL_MS = 10000  # without `run`: stop this long after the last event (and its duration)


_err, _at = refuse, child


class _Sequence:
    """The checks between mappings, in run order; `topics` grows with create_topic, shrinks with delete_topic."""

    def __init__(self, brokers: tuple[int, ...], log_dirs: tuple[str, ...], defaults: dict[str, Any],
                 record_bytes: int, running: bool) -> None:
        self.brokers, self.log_dirs, self.defaults = brokers, log_dirs, defaults
        self.record_bytes = record_bytes  # cluster.emulator.initial.record.bytes
        self.rows = 0  # records the imported logs become so far (initial_logs.py writes one row each)
        self.topics: dict[str, TopicSpec] = {}
        self.live: set[str] = set()
        self.partitions = 0  # of the live topics: at most MAX_PARTITIONS in the cluster
        self.down: set[int] | None = None if running else set()  # brokers down at this point; None: not tracked
        # Brokers whose state the timeline cannot know: a failed log dir may stop its broker (all its dirs
        # failed, or inter.broker.protocol.version < 1.0: protocol/log_dir_failure.py).
        self.unknown: set[int] = set()

    # --- what a value refers to

    def broker(self, b: int, path: str) -> int:
        return b if b in self.brokers else _err(path, b, unknown_message("broker", b, self.brokers))

    def topic(self, name: str, path: str) -> TopicSpec:
        if name not in self.topics:
            _err(path, name, f"Topic '{name}' does not exist (neither in topics nor created by an "
                             "earlier create_topic event)")
        if name not in self.live:
            _err(path, name, f"Topic '{name}' does not exist at this point of the timeline: an earlier "
                             "delete_topic event deleted it")
        return self.topics[name]

    def partition(self, p: int, path: str, spec: TopicSpec) -> int:
        return p if p < spec.partitions else _err(path, p, f"topic '{spec.name}' has {spec.partitions} partition(s)")

    def log_dir(self, d: str, path: str, any_ok: bool = False) -> str:
        allowed = self.log_dirs + (("any",) if any_ok else ())
        return d if d in allowed else _err(path, d, unknown_message("log dir", d, allowed))

    def broker_state(self, b: int, path: str, kind: str) -> None:
        """The timeline as a sequence: crash/shutdown/pause need the broker up, restart needs it down."""
        if self.down is None or b in self.unknown:
            return
        if kind == "restart":
            if b not in self.down:
                _err(path, b, f"broker {b} is running at this point of the timeline: only a crashed or shut "
                              "down broker can restart")
            self.down.discard(b)
        elif b in self.down:
            _err(path, b, f"broker {b} is already down at this point of the timeline (an earlier crash or "
                          f"shutdown, with no restart since): it cannot {kind}")
        elif kind in ("crash", "shutdown"):
            self.down.add(b)

    # --- topics

    def create(self, spec: TopicSpec, path: str) -> TopicSpec:
        if spec.name in self.live:
            _err(_at(path, "name"), spec.name, f"Topic '{spec.name}' already exists.")
        self.partitions += spec.partitions
        if self.partitions > MAX_PARTITIONS:
            _err(_at(path, "partitions"), spec.partitions, f"the cluster's topics have {self.partitions} partitions "
                 f"with this one: at most {MAX_PARTITIONS} (the emulator's limit per cluster)")
        self.topics[spec.name] = spec
        self.live.add(spec.name)
        return spec

    def topic_spec(self, t: schema.Topic, path: str, same_rf: bool = True) -> TopicSpec:
        """`same_rf` False: the assignment may differ in size per partition (a running cluster's, reassignments
        in flight, as an imported state's may)."""
        parts, rf = t.partitions, t.replication_factor
        assignment = None
        if t.assignment is not None:
            assignment = self.assignment(t.assignment, _at(path, "assignment"), parts, rf,
                                         same_rf and t.state is None)
            parts, rf = len(assignment), len(assignment[0])
        else:
            parts = parts or self.defaults["num.partitions"]
            if parts > MAX_PARTITIONS:
                _err(_at(path, "partitions"), parts, f"must be <= {MAX_PARTITIONS} (the emulator's limit per topic)")
            rf = rf or self.defaults["default.replication.factor"]
            if rf > len(self.brokers):
                _err(_at(path, "replication_factor"), rf,
                     f"Replication factor: {rf} larger than available brokers: {len(self.brokers)}.")
        state = None if t.state is None else self.state(t.state, _at(path, "state"), assignment)
        return TopicSpec(t.name, parts, rf, assignment, t.config.given() if t.config else {}, t.id, state)

    def assignment(self, a: dict[int, list[int]], path: str, partitions: int | None, rf: int | None,
                   same_rf: bool) -> dict[int, tuple[int, ...]]:
        """partition -> replicas, checked as AdminZkClient does (ids 0..N-1, same non-zero RF, no dups)."""
        for p, reps in a.items():
            for j, b in enumerate(reps):
                self.broker(b, f"{path}[{p}][{j}]")
        n = partitions or len(a)
        if len(a) != n or sorted(a) != list(range(n)):
            _err(path, sorted(a), f"partition ids must be consecutive from 0 to {n - 1}"
                                  + (f" (partitions: {partitions})" if partitions else ""))
        want = rf or len(a[0])
        for p, reps in a.items() if same_rf else ():
            if len(reps) != want:
                _err(_at(path, p), list(reps), f"has {len(reps)} replicas, expected {want}: "
                                               "all partitions should have the same number of replicas")
        return {p: tuple(a[p]) for p in sorted(a)}

    def state(self, st: dict[int, schema.PartitionState], path: str,
              assignment: dict[int, tuple[int, ...]]) -> dict[int, PartitionStateSpec]:
        """An imported topic's partitions at the start, checked against the assignment as the controller's
        context would hold them (ISR, leader, adding and removing within the replicas)."""
        if sorted(st) != sorted(assignment):
            _err(path, sorted(st), f"expected a state for each partition of the assignment, {sorted(assignment)}")
        return {p: self.partition_state(st[p], _at(path, p), assignment[p]) for p in sorted(st)}

    def partition_state(self, s: schema.PartitionState, path: str, replicas: tuple[int, ...]) -> PartitionStateSpec:
        def member(b: int, p: str) -> None:
            if b not in replicas:
                _err(p, b, f"broker {b} is not among the partition's replicas {list(replicas)}")

        isr, adding, removing = tuple(s.isr), tuple(s.adding or ()), tuple(s.removing or ())
        for k, ids in (("isr", isr), ("adding", adding), ("removing", removing)):
            for j, b in enumerate(ids):
                member(b, f"{path}.{k}[{j}]")
        if s.leader != -1:
            member(s.leader, f"{path}.leader")
        if len(adding) == len(replicas):
            _err(f"{path}.adding", list(adding), "every replica is being added")
        logs: dict[int, ReplicaLogSpec] = {}
        for b, log in (s.logs or {}).items():
            lpath = f"{path}.logs[{b}]"
            if b not in replicas:
                _err(lpath, b, unknown_message("replica", b, replicas))
            logs[b] = self.replica_log(log, lpath)
        return PartitionStateSpec(s.leader, isr, adding, removing, logs)

    def replica_log(self, log: schema.ReplicaLog, path: str) -> ReplicaLogSpec:
        d = self.log_dir(log.dir, f"{path}.dir")
        self.imported_rows(log.bytes, f"{path}.bytes")
        if log.future is None:
            return ReplicaLogSpec(d, log.bytes)
        self.imported_rows(log.future.bytes, f"{path}.future.bytes")
        return ReplicaLogSpec(d, log.bytes, self.log_dir(log.future.dir, f"{path}.future.dir"), log.future.bytes)

    def imported_rows(self, size: int, path: str) -> None:
        """A log of `size` bytes becomes records of initial.record.bytes (initial_logs.py): at most MAX_RECORDS
        in all, so that an import cannot ask for more rows than a run can write."""
        self.rows += -(-size // self.record_bytes)
        if self.rows > MAX_RECORDS:
            _err(path, size, f"the imported logs become {self.rows} records of initial.record.bytes "
                             f"{self.record_bytes} by here: at most {MAX_RECORDS} (give a larger "
                             "cluster.emulator.initial.record.bytes)")

    def delete(self, name: str) -> str:
        self.live.discard(name)
        self.partitions -= self.topics[name].partitions
        return name

    def brokers_of(self, ids: list[int], path: str) -> tuple[int, ...]:
        return tuple(self.broker(b, f"{path}[{j}]") for j, b in enumerate(ids))

    refuse = staticmethod(refuse)


def _timeline(entries: list[schema.EntryBase], seq: _Sequence, round_ms: int) -> tuple[Event, ...]:
    """The events checked in the order they run (time, then file position), kept in file order."""
    order = sorted(range(len(entries)), key=lambda i: (entries[i].at if entries[i].at is not None
                                                       else entries[i].round * round_ms, i))
    events: dict[int, Event] = {}
    for i in order:
        e = entries[i]
        kind = e.kind
        events[i] = Event(i, e.at, e.round, kind, KINDS[kind].check(seq, getattr(e, kind), f"timeline[{i}].{kind}"))
    return tuple(events[i] for i in range(len(entries)))


def _check_supported(events: tuple[Event, ...], raw: Any) -> None:
    """Reject, in file order, the first valid event whose behaviour is in NOT_YET_SUPPORTED."""
    for e in events:
        power_loss = e.type == "crash" and e.args["power_loss"]
        feature = "crash.power_loss" if power_loss else e.type
        if feature in NOT_YET_SUPPORTED:
            value = True if power_loss else raw[e.index][e.type]
            raise NotYetSupportedError(f"timeline[{e.index}].{feature}", value,
                                       f"{feature} is not yet supported by this version of sparkkafka")


def _racks(racks: dict[int, str] | None, brokers: tuple[int, ...]) -> dict[int, str] | None:
    """broker -> rack, for every broker or none (Kafka's rack-aware assignment needs all)."""
    for b, rack in (racks or {}).items():
        if b not in brokers:
            _err(f"cluster.racks[{b}]", rack, unknown_message("broker", b, brokers))
    missing = [b for b in brokers if b not in racks] if racks else []
    if missing:
        _err("cluster.racks", missing, "Not all brokers have rack information (these have none)")
    return dict(racks) if racks else None


def _run(run: schema.Run | None, timeline: tuple[Event, ...], round_ms: int) -> tuple[int | None, int | None]:
    """(until_ms, until_round); without `run`, DEFAULT_TAIL_MS after the last event ends."""
    if run is None:
        ends = (e.time_ms(round_ms) + (e.args.get("duration_ms") or 0) for e in timeline)
        return max(ends, default=0) + DEFAULT_TAIL_MS, None
    if run.until_round is not None and run.until_round * round_ms > MAX_TIME_MS:
        _err("run.until_round", run.until_round, f"must be <= {MAX_TIME_MS // round_ms} (a run spans at most "
                                                 f"{MAX_TIME_MS} emulated ms, a week)")
    return run.until_ms, run.until_round


# ---------------------------------------------------------------------------------------------
# Entry points


def parse_scenario(data: Any, name: str = "scenario", base_dir: str | Path | None = None,
                   running: bool = False) -> Scenario:
    """Validate and normalise a scenario mapping; `base_dir` resolves relative reassignment plan paths.
    `running`: `topics` are a running cluster's current ones (an event checked against a run, Timeline.event_of):
    their assignments may differ in size per partition, as reassignments in flight leave them, there may be
    none left (all deleted), and the brokers' up/down state is the run's, not the timeline's."""
    doc = schema.validate(data, None if base_dir is None else Path(base_dir))
    c = doc.cluster
    brokers = tuple(c.brokers) if isinstance(c.brokers, list) else tuple(range(c.brokers))
    log_dirs = tuple(c.log_dirs) if c.log_dirs else ("d0",)
    config = c.config.given() if c.config else {}
    emulator = {**EMULATOR_DEFAULTS, **(c.emulator.given() if c.emulator else {})}
    settings = EmulatorSettings.of(emulator)
    racks = _racks(c.racks, brokers)
    seq = _Sequence(brokers, log_dirs, broker_config(config), settings.initial_record_bytes, running)
    topics = tuple(seq.create(seq.topic_spec(t, f"topics[{i}]", same_rf=not running), f"topics[{i}]")
                   for i, t in enumerate(doc.topics))
    timeline = _timeline(doc.timeline or [], seq, settings.round_ms)
    if not topics and not running and not any(e.type == "create_topic" for e in timeline):
        _err("topics", [], "at least one topic is required (unless the timeline creates one)")
    until_ms, until_round = _run(doc.run, timeline, settings.round_ms)
    _check_supported(timeline, data.get("timeline"))
    return Scenario(name=doc.name or name, seed=doc.seed, brokers=brokers, racks=racks, log_dirs=log_dirs,
                    config=config, emulator=emulator, topics=topics, timeline=timeline, until_ms=until_ms,
                    until_round=until_round)


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml's parser when PyYAML has it: 10x faster
    """SafeLoader that rejects duplicate keys (PyYAML silently keeps the last one)."""


def _mapping(loader: _Loader, node: yaml.MappingNode) -> dict:
    seen: list = []
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise yaml.constructor.ConstructorError("while constructing a mapping", node.start_mark,
                                                    f"found duplicate key {key!r}", key_node.start_mark)
        seen.append(key)
    return loader.construct_mapping(node, deep=True)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def load_scenario(path: str | Path) -> Scenario:
    """Read a YAML scenario file; the name defaults to the file's stem, plan paths resolve next to it."""
    p = Path(path)
    try:
        data = yaml.load(p.read_text(encoding="utf-8"), Loader=_Loader)
    except (OSError, UnicodeDecodeError) as exc:
        _err("<file>", str(path), f"cannot read the scenario file: {exc}")
    except yaml.YAMLError as exc:
        _err("<file>", str(path), f"not valid YAML: {exc}")
    return parse_scenario(data, name=p.stem, base_dir=p.parent)
