"""Scenario YAML -> validated, normalised `Scenario` (contract section 1).

Every problem raises `ScenarioError(field, value, message)`; `field` is the dotted/indexed path of
the offending value (`timeline[3].crash.broker`, `topics[0].replication_factor`). Events are
validated in the order they run (time, then file position), so a topic created by an earlier
`create_topic` may be referenced by later events.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import yaml

from sparkkafka.errors import NotYetSupportedError, ScenarioError
from sparkkafka.protocol.config import (
    BROKER_DEFAULTS,
    EMULATOR_DEFAULTS,
    ENGINES,
    LONG_MAX,
    TOPIC_CONFIGS,
    TOPIC_DEFAULTS,
    broker_config,
    profile_of,
)
from sparkkafka.protocol.rules import unknown_version_message
from sparkkafka.scenario.model import Event, PartitionStateSpec, ReplicaLogSpec, Scenario, TopicSpec

# Valid events (and "crash.power_loss") whose behaviour is not implemented yet. They are fully
# validated, then rejected with NotYetSupportedError; remove a name here once it is implemented.
NOT_YET_SUPPORTED: set[str] = set()

DEFAULT_TAIL_MS = 10000  # without `run`: stop this long after the last event (and its duration)
IBP = "inter.broker.protocol.version"
_TOP_KEYS = ("name", "seed", "cluster", "topics", "timeline", "run")
_CLUSTER_KEYS = ("brokers", "racks", "log_dirs", "config", "emulator")
_TOPIC_KEYS = ("name", "id", "partitions", "replication_factor", "assignment", "config", "state")
_STATE_KEYS = ("leader", "isr", "adding", "removing", "logs")
_TOPIC_ID = re.compile(r"[A-Za-z0-9_-]{22}")
_TIME_KEYS = ("at", "round")
# Lower bounds of int configs (Kafka's validators); every other int config is >= 0.
_CONFIG_MIN = {
    "min.insync.replicas": 1, "num.partitions": 1, "default.replication.factor": 1,
    "num.replica.fetchers": 1, "num.replica.alter.log.dirs.threads": 1,
    "replication.quota.window.num": 1, "replication.quota.window.size.seconds": 1,
    "log.flush.interval.messages": 1, "retention.ms": -1, "segment.bytes": 14,
}
_READ_ONLY = {IBP}  # static broker configs that set_config may not change
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_THROTTLED = re.compile(r"\*|\s*\d+\s*:\s*\d+\s*(,\s*\d+\s*:\s*\d+\s*)*|")
_INT_STR = re.compile(r"-?\d+", re.ASCII)
INT_MAX = 2**31 - 1  # Kafka's broker ids, partition ids and counts are Java ints
# What one emulated cluster may hold (the emulator's limits, far above what a round can carry): a bare
# `cluster.brokers: N` and a topic's partition count above these are refused, not expanded.
MAX_BROKERS = 10_000
MAX_PARTITIONS = 1_000_000
# Bounds on what sizes a run's work, so that a mistyped number is refused before any directory or Spark
# job exists instead of running without end: emulated time (a week, Kafka's default log.retention.hours),
# records one produce event sends (each is a row of produce_results), and a record's size (the log
# table's value_bytes is a Java int, as Kafka's record sizes are).
MAX_TIME_MS = 7 * 24 * 3600 * 1000
MAX_RECORDS = 100_000_000
MAX_VALUE_BYTES = INT_MAX
_ACKS = ("all", "-1", "0", "1")  # the producer's ConfigDef for acks (ProducerConfig: ValidString.in)


# ---------------------------------------------------------------------------------------------
# Generic checks: one helper per kind of check.


def _err(path: str, value: Any, message: str) -> NoReturn:
    raise ScenarioError(path or "<scenario>", value, message)


def _at(path: str, key: Any) -> str:
    """Child path: `a.b` for a name, `a[3]` for an index or an integer key."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def _unknown(path: str, value: Any, what: str, key: Any, allowed: Iterable[Any]) -> NoReturn:
    names = [str(a) for a in allowed]
    close = difflib.get_close_matches(key, names, n=1) if isinstance(key, str) else []
    hint = f"did you mean {close[0]!r}?" if close else f"expected one of: {', '.join(names) or 'nothing'}"
    _err(path, value, f"unknown {what} {key!r}; {hint}")


def _keys(value: Any, path: str, allowed: Iterable[Any], required: Iterable[str] = (),
          what: str = "key") -> dict:
    """A mapping (null = empty) with no key outside `allowed` and every `required` key non-null."""
    if value is None:
        value = {}
    if not isinstance(value, dict):
        _err(path, value, "expected a mapping")
    allowed = tuple(allowed)
    for k, v in value.items():
        if k not in allowed:
            _unknown(_at(path, k), v, what, k, allowed)
    for k in required:
        if value.get(k) is None:
            _err(_at(path, k), None, "required")
    return value


def _int(v: Any, path: str, lo: int = 0, hi: int = LONG_MAX) -> int:
    """An integer (a bool is not one) in [lo, hi]."""
    if isinstance(v, bool) or not isinstance(v, int):
        _err(path, v, "expected an integer" + (", not a boolean" if isinstance(v, bool) else ""))
    if not lo <= v <= hi:
        _err(path, v, f"must be >= {lo}" if v < lo else f"must be <= {hi}")
    return v


def _id(v: Any, path: str) -> int:
    """A non-negative integer id; as a mapping key it may also be a digit string (JSON input)."""
    return int(v) if isinstance(v, str) and _INT_STR.fullmatch(v) and v[0] != "-" else _int(v, path)


def _num(v: Any, path: str) -> float:
    """A finite number > 0."""
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
        _err(path, v, "expected a number > 0")
    return float(v)


def _bool(v: Any, path: str) -> bool:
    if not isinstance(v, bool):
        _err(path, v, "expected true or false")
    return v


def _str(v: Any, path: str, choices: Iterable[str] | None = None, what: str = "value",
         empty: bool = False) -> str:
    """A string (non-empty unless `empty`), one of `choices` if given."""
    if not isinstance(v, str) or not (v or empty):
        _err(path, v, "expected a non-empty string" if not empty else "expected a string")
    if choices is not None and v not in choices:
        _unknown(path, v, what, v, choices)
    return v


def _seq(v: Any, path: str, item: Callable[[Any, str], Any], *, what: str = "entry",
         unique: bool = True, key: Callable[[Any], Any] = lambda x: x, scalar_ok: bool = False,
         nonempty: bool = True) -> tuple:
    """A list (a bare scalar too if `scalar_ok`) of `item(x, path[j])`, distinct by `key` if `unique`."""
    if scalar_ok and not isinstance(v, list | dict):
        v = [v]
    if not isinstance(v, list) or (nonempty and not v):
        _err(path, v, "expected a non-empty list" if nonempty else "expected a list")
    out = tuple(item(x, _at(path, j)) for j, x in enumerate(v))
    seen: set = set()
    for j, x in enumerate(out if unique else ()):
        if key(x) in seen:
            _err(_at(path, j), v[j], f"duplicate {what} {key(x)!r}")
        seen.add(key(x))
    return out


def _get(m: dict, name: str, path: str, fn: Callable[..., Any], default: Any = None, **kw: Any) -> Any:
    """`fn(m[name], path.name, **kw)`, or `default` if the key is absent or null."""
    v = m.get(name)
    return default if v is None else fn(v, _at(path, name), **kw)


def _shorthand(v: Any, name: str) -> Any:
    """`crash: 1` means `crash: {broker: 1}`."""
    return v if isinstance(v, dict) else {name: v}


# ---------------------------------------------------------------------------------------------
# Configs


def _default_of(name: str) -> Any:
    if name in BROKER_DEFAULTS:
        return BROKER_DEFAULTS[name]
    base = TOPIC_CONFIGS[name]
    return BROKER_DEFAULTS[base] if base else TOPIC_DEFAULTS[name]


def _config_value(v: Any, path: str, name: str, deletable: bool) -> Any:
    """A config value of its default's type; null only to delete it (set_config) or where the default is."""
    default = _default_of(name)
    if v is None:
        if not (deletable or default is None):
            _err(path, v, "expected a value")
        return None
    if name == IBP:
        text = str(v) if isinstance(v, str | int | float) and not isinstance(v, bool) else ""
        if profile_of(text) is None:
            _err(path, v, unknown_version_message())
        return text
    out = _typed(v, path, default, lo=_CONFIG_MIN.get(name, 0))
    if name.endswith("throttled.replicas") and not _THROTTLED.fullmatch(out):
        _err(path, v, "must be '*' or a list of [partitionId]:[brokerId],[partitionId]:[brokerId],...")
    return out


def _typed(v: Any, path: str, default: Any, lo: int) -> Any:
    """A value of the default's type: bool, string (may be empty) or int >= lo (default None = int)."""
    if isinstance(default, bool):
        return _bool(v, path)
    if isinstance(default, str):
        return _str(v, path, empty=True)
    return _int(v, path, lo=lo)


def _config(v: Any, path: str, names: Iterable[str], deletable: bool = False) -> dict[str, Any]:
    """Kafka config overrides restricted to `names` (BROKER_DEFAULTS or TOPIC_CONFIGS)."""
    m = _keys(v, path, names, what="config")
    return {k: _config_value(x, _at(path, k), k, deletable) for k, x in m.items()}


# ---------------------------------------------------------------------------------------------
# Cluster-dependent checks


@dataclass
class _Ctx:
    """What events are checked against; `topics` grows with create_topic in run order."""

    brokers: tuple[int, ...]
    log_dirs: tuple[str, ...]
    defaults: dict[str, Any]
    base_dir: Path | None
    topics: dict[str, TopicSpec] = field(default_factory=dict)
    live: set[str] = field(default_factory=set)
    down: set[int] | None = field(default_factory=set)  # brokers down at this point; None: not tracked
    # Brokers whose state the timeline cannot know: a failed log dir may stop its broker (all its dirs
    # failed, or inter.broker.protocol.version < 1.0: protocol/log_dir_failure.py).
    unknown: set[int] = field(default_factory=set)

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

    def broker(self, v: Any, path: str) -> int:
        b = _int(v, path)
        if b not in self.brokers:
            _unknown(path, v, "broker", b, self.brokers)
        return b

    def topic(self, v: Any, path: str) -> TopicSpec:
        name = _str(v, path)
        if name not in self.topics:
            _err(path, v, f"Topic '{name}' does not exist (neither in topics nor created by an "
                          "earlier create_topic event)")
        if name not in self.live:
            _err(path, v, f"Topic '{name}' does not exist at this point of the timeline: an earlier "
                          "delete_topic event deleted it")
        return self.topics[name]

    def partition(self, v: Any, path: str, spec: TopicSpec) -> int:
        p = _int(v, path)
        if p >= spec.partitions:
            _err(path, v, f"topic '{spec.name}' has {spec.partitions} partition(s)")
        return p

    def log_dir(self, v: Any, path: str, any_ok: bool = False) -> str:
        return _str(v, path, self.log_dirs + (("any",) if any_ok else ()), what="log dir")

    def create(self, spec: TopicSpec, path: str) -> TopicSpec:
        if spec.name in self.live:
            _err(_at(path, "name"), spec.name, f"Topic '{spec.name}' already exists.")
        self.topics[spec.name] = spec
        self.live.add(spec.name)
        return spec

    def read_json(self, v: str, path: str) -> Any:
        p = Path(v)
        if not p.is_absolute() and self.base_dir is not None:
            p = Path(self.base_dir) / p
        try:
            return json.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            _err(path, v, f"cannot read the reassignment JSON {str(p)!r}: {exc}")


def _assignment(v: Any, path: str, ctx: _Ctx, partitions: int | None,
                rf: int | None, same_rf: bool = True) -> dict[int, tuple[int, ...]]:
    """partition -> replicas, checked as AdminZkClient does (ids 0..N-1, same non-zero RF, no dups); an
    imported cluster's (`same_rf` False) may differ per partition, as reassignments leave them."""
    if not isinstance(v, dict) or not v:
        _err(path, v, "expected a non-empty mapping partition -> list of broker ids")
    out = {_id(p, _at(path, p)): _seq(r, _at(path, p), ctx.broker, what="broker") for p, r in v.items()}
    n = partitions or len(out)
    if len(out) != n or sorted(out) != list(range(n)):
        _err(path, sorted(out), f"partition ids must be consecutive from 0 to {n - 1}"
                                + (f" (partitions: {partitions})" if partitions else ""))
    want = rf or len(out[0])
    for p, reps in out.items() if same_rf else ():
        if len(reps) != want:
            _err(_at(path, p), list(reps), f"has {len(reps)} replicas, expected {want}: "
                                           "all partitions should have the same number of replicas")
    return dict(sorted(out.items()))


def _topic_spec(v: Any, path: str, ctx: _Ctx, same_rf: bool = True) -> TopicSpec:
    """A `topics` entry (or create_topic event); missing counts come from num.partitions/default.replication.factor.
    `same_rf` False: the assignment may differ in size per partition (a running cluster's, reassignments in flight)."""
    m = _keys(v, path, _TOPIC_KEYS, ("name",))
    name = _str(m["name"], _at(path, "name"))
    if not _TOPIC_NAME.fullmatch(name) or name in (".", ".."):
        _err(_at(path, "name"), name, "Topic name is illegal: at most 249 characters among ASCII "
                                      "alphanumerics, '.', '_' and '-', and not '.' or '..'")
    parts = _get(m, "partitions", path, _int, lo=1, hi=MAX_PARTITIONS)
    rf = _get(m, "replication_factor", path, _int, lo=1)
    imported = m.get("state") is not None
    if imported and m.get("assignment") is None:
        _err(_at(path, "assignment"), None, "required with state (the replicas the state describes)")
    assignment = _get(m, "assignment", path, _assignment, ctx=ctx, partitions=parts, rf=rf, same_rf=same_rf and not imported)
    if assignment:
        parts, rf = len(assignment), len(assignment[0])
    else:
        parts = parts or ctx.defaults["num.partitions"]
        if parts > MAX_PARTITIONS:
            _err(_at(path, "partitions"), parts, f"must be <= {MAX_PARTITIONS} (the emulator's limit per topic)")
        rf = rf or ctx.defaults["default.replication.factor"]
        if rf > len(ctx.brokers):
            _err(_at(path, "replication_factor"), rf,
                 f"Replication factor: {rf} larger than available brokers: {len(ctx.brokers)}.")
    config = _get(m, "config", path, _config, {}, names=TOPIC_CONFIGS)
    tid = _get(m, "id", path, _str)
    if tid is not None and (not _TOPIC_ID.fullmatch(tid) or tid == "A" * 22):
        _err(_at(path, "id"), tid, "expected Kafka's Uuid text: 22 characters of URL-safe base64, not all zeros")
    state = _get(m, "state", path, _state, ctx=ctx, assignment=assignment)
    return TopicSpec(name, parts, rf, assignment, config, tid, state)


def _state(v: Any, path: str, ctx: _Ctx, assignment: dict[int, tuple[int, ...]]) -> dict[int, PartitionStateSpec]:
    """An imported topic's partitions at the start: partition -> {leader, isr, adding, removing, logs}, checked
    against the assignment as the controller's context would hold them (leader in ISR, ISR within replicas)."""
    if not isinstance(v, dict):
        _err(path, v, "expected a mapping partition -> {leader, isr, adding, removing, logs}")
    out = {_id(p, _at(path, p)): x for p, x in v.items()}
    if sorted(out) != sorted(assignment):
        _err(path, sorted(out), f"expected a state for each partition of the assignment, {sorted(assignment)}")
    return {p: _partition_state(out[p], _at(path, p), ctx, assignment[p]) for p in sorted(out)}


def _partition_state(v: Any, path: str, ctx: _Ctx, replicas: tuple[int, ...]) -> PartitionStateSpec:
    m = _keys(v, path, _STATE_KEYS, ("leader", "isr"))

    def member(x: Any, p: str) -> int:
        b = _int(x, p)
        if b not in replicas:
            _err(p, x, f"broker {b} is not among the partition's replicas {list(replicas)}")
        return b

    ids = {k: _get(m, k, path, _seq, (), item=member, what="broker", nonempty=False)
           for k in ("isr", "adding", "removing")}
    leader = m["leader"]
    leader = -1 if leader in ("none", -1) else member(leader, _at(path, "leader"))
    if leader != -1 and leader not in ids["isr"]:
        _err(_at(path, "leader"), leader, f"the leader is not in the ISR {list(ids['isr'])}")
    both = set(ids["adding"]) & set(ids["removing"])
    if both:
        _err(_at(path, "removing"), m["removing"], f"broker(s) {sorted(both)} both added and removed")
    if len(ids["adding"]) == len(replicas):
        _err(_at(path, "adding"), m["adding"], "every replica is being added")
    logs = _keys(m.get("logs"), _at(path, "logs"), list(replicas) + [str(b) for b in replicas], what="replica")
    return PartitionStateSpec(leader, ids["isr"], ids["adding"], ids["removing"],
                              {int(b): _replica_log(x, _at(_at(path, "logs"), int(b)), ctx) for b, x in logs.items()})


def _replica_log(v: Any, path: str, ctx: _Ctx) -> ReplicaLogSpec:
    m = _keys(v, path, ("dir", "bytes", "future"), ("dir", "bytes"))
    log_dir, size = ctx.log_dir(m["dir"], _at(path, "dir")), _int(m["bytes"], _at(path, "bytes"))
    if m.get("future") is None:
        return ReplicaLogSpec(log_dir, size)
    fpath = _at(path, "future")
    f = _keys(m["future"], fpath, ("dir", "bytes"), ("dir", "bytes"))
    fdir = ctx.log_dir(f["dir"], _at(fpath, "dir"))
    if fdir == log_dir:
        _err(_at(fpath, "dir"), fdir, "a future log (KIP-113 move) must be in another dir than the current log")
    return ReplicaLogSpec(log_dir, size, fdir, _int(f["bytes"], _at(fpath, "bytes")))


# ---------------------------------------------------------------------------------------------
# Events: one parser per type, (raw value, path, ctx) -> normalised args.


def _acks(v: Any, path: str) -> int:
    """0, 1, all or -1 (-> -1), as the Java producer's `acks` config accepts: anything else is a
    ConfigException there, so a scenario cannot send it."""
    text = str(v).strip() if isinstance(v, str | int) and not isinstance(v, bool) else None
    if text not in _ACKS:
        _err(path, v, f"Invalid value {v} for configuration acks: String must be one of: {', '.join(_ACKS)}")
    return -1 if text == "all" else int(text)


def _ev_produce(v: Any, path: str, ctx: _Ctx) -> dict:
    m = _keys(v, path, ("topic", "partition", "records", "rate_per_sec", "duration_ms", "acks",
                        "value_bytes", "key"), ("topic",))
    spec = ctx.topic(m["topic"], _at(path, "topic"))
    partition = _get(m, "partition", path, lambda x, p: x if x == "all" else ctx.partition(x, p, spec), "all")
    records = _get(m, "records", path, _int, lo=1, hi=MAX_RECORDS)
    rate = _get(m, "rate_per_sec", path, _num)
    duration = _get(m, "duration_ms", path, _int, lo=1, hi=MAX_TIME_MS)
    if (records is None) == (rate is None and duration is None):
        _err(path, v, "give either records or rate_per_sec with duration_ms")
    if (rate is None) != (duration is None):
        missing, given = ("duration_ms", "rate_per_sec") if duration is None else ("rate_per_sec", "duration_ms")
        _err(_at(path, missing), None, f"required together with {given}")
    if rate is not None and rate * duration / 1000 > MAX_RECORDS:
        _err(_at(path, "rate_per_sec"), v["rate_per_sec"], f"sends {rate * duration / 1000:.0f} records over "
             f"duration_ms {duration}: at most {MAX_RECORDS} records per produce event")
    return {"topic": spec.name, "partition": partition, "records": records, "rate_per_sec": rate,
            "duration_ms": duration, "acks": _get(m, "acks", path, _acks, 1),
            "value_bytes": _get(m, "value_bytes", path, _int, 100, hi=MAX_VALUE_BYTES), "key": _get(m, "key", path, _str)}


def _ev_crash(v: Any, path: str, ctx: _Ctx) -> dict:
    m = _keys(_shorthand(v, "broker"), path, ("broker", "power_loss"), ("broker",))
    out = {"broker": ctx.broker(m["broker"], _at(path, "broker")),
           "power_loss": _get(m, "power_loss", path, _bool, False)}
    ctx.broker_state(out["broker"], _at(path, "broker") if isinstance(v, dict) else path, "crash")
    return out


def _ev_broker(v: Any, path: str, ctx: _Ctx) -> dict:
    m = _keys(_shorthand(v, "broker"), path, ("broker",), ("broker",))
    b = ctx.broker(m["broker"], _at(path, "broker"))
    ctx.broker_state(b, _at(path, "broker") if isinstance(v, dict) else path, path.rsplit(".", 1)[-1])
    return {"broker": b}


def _ev_pause(v: Any, path: str, ctx: _Ctx) -> dict:
    m = _keys(v, path, ("broker", "duration_ms"), ("broker", "duration_ms"))
    ctx.broker_state(ctx.broker(m["broker"], _at(path, "broker")), _at(path, "broker"), "pause")
    return {"broker": ctx.broker(m["broker"], _at(path, "broker")),
            "duration_ms": _int(m["duration_ms"], _at(path, "duration_ms"), lo=1, hi=MAX_TIME_MS)}


def _ev_isolate(v: Any, path: str, ctx: _Ctx) -> dict:
    m = _keys(v, path, ("brokers", "from", "duration_ms"), ("brokers",))
    group = _seq(m["brokers"], _at(path, "brokers"), ctx.broker, what="broker", scalar_ok=True)
    other, fpath = m.get("from"), _at(path, "from")
    if other is None:
        other = tuple(b for b in ctx.brokers if b not in group)
        if not other:
            _err(_at(path, "brokers"), m["brokers"], "covers every broker: nothing left to isolate "
                                                     "them from (give `from: controller`?)")
    elif other != "controller":
        if isinstance(other, str):
            _err(fpath, other, "expected a list of broker ids or 'controller'")
        other = _seq(other, fpath, ctx.broker, what="broker", scalar_ok=True)
        both = sorted(set(group) & set(other))
        if both:
            _err(fpath, m["from"], f"broker(s) {both} are on both sides")
    return {"brokers": group, "from": other, "duration_ms": _get(m, "duration_ms", path, _int, lo=1, hi=MAX_TIME_MS)}


def _ev_empty(v: Any, path: str, ctx: _Ctx) -> dict:
    return dict(_keys(v, path, ()))


def _ev_fail_log_dir(v: Any, path: str, ctx: _Ctx) -> dict:
    m = _keys(v, path, ("broker", "log_dir"), ("broker", "log_dir"))
    ctx.unknown.add(ctx.broker(m["broker"], _at(path, "broker")))
    return {"broker": ctx.broker(m["broker"], _at(path, "broker")),
            "log_dir": ctx.log_dir(m["log_dir"], _at(path, "log_dir"))}


def _ev_create_topic(v: Any, path: str, ctx: _Ctx) -> dict:
    if isinstance(v, dict) and v.get("state") is not None:
        _err(_at(path, "state"), v["state"], "a created topic starts empty: state is for the scenario's topics")
    return {"topic": ctx.create(_topic_spec(v, path, ctx), path)}


def _ev_delete_topic(v: Any, path: str, ctx: _Ctx) -> dict:
    m = _keys(_shorthand(v, "topic"), path, ("topic",), ("topic",))
    name = ctx.topic(m["topic"], _at(path, "topic")).name
    ctx.live.discard(name)
    return {"topic": name}


def _plan_entry(v: Any, path: str, ctx: _Ctx) -> dict:
    m = _keys(v, path, ("topic", "partition", "replicas", "log_dirs"), ("topic", "partition", "replicas"))
    spec = ctx.topic(m["topic"], _at(path, "topic"))
    replicas = _seq(m["replicas"], _at(path, "replicas"), ctx.broker, what="broker")
    dirs = _get(m, "log_dirs", path, _seq, ("any",) * len(replicas), unique=False,
                item=lambda x, p: ctx.log_dir(x, p, any_ok=True))
    if len(dirs) != len(replicas):
        _err(_at(path, "log_dirs"), m["log_dirs"], f"has {len(dirs)} entries but replicas has {len(replicas)}")
    return {"topic": spec.name, "partition": ctx.partition(m["partition"], _at(path, "partition"), spec),
            "replicas": list(replicas), "log_dirs": list(dirs)}


def _plan(v: Any, path: str, ctx: _Ctx) -> dict:
    """Kafka's reassignment JSON (inline or a file path), checked as kafka-reassign-partitions does."""
    if isinstance(v, str):
        v = ctx.read_json(v, path)
    m = _keys(v, path, ("version", "partitions"), ("partitions",))
    if m["partitions"] == []:
        _err(_at(path, "partitions"), [], "Partition reassignment list cannot be empty")
    if _get(m, "version", path, _int, 1) != 1:
        _err(_at(path, "version"), m["version"], "Not supported version field value")
    parts = _seq(m["partitions"], _at(path, "partitions"), lambda x, p: _plan_entry(x, p, ctx),
                 what="partition", key=lambda e: (e["topic"], e["partition"]))
    return {"version": 1, "partitions": list(parts)}


def _ev_reassign(v: Any, path: str, ctx: _Ctx) -> dict:
    m = _keys(v, path, ("plan", "throttle", "log_dirs_throttle", "via"), ("plan",))
    return {"plan": _plan(m["plan"], _at(path, "plan"), ctx),
            "throttle": _get(m, "throttle", path, _int, lo=1),
            "log_dirs_throttle": _get(m, "log_dirs_throttle", path, _int, lo=1),
            # api: AlterPartitionReassignments, as the 2.8 tool; zookeeper: /admin/reassign_partitions
            "via": _get(m, "via", path, lambda x, p: _str(x, p, ("api", "zookeeper"), what="reassignment path"), "api")}


def _topic_partition(v: Any, path: str, ctx: _Ctx) -> tuple[str, int]:
    m = _keys(v, path, ("topic", "partition"), ("topic", "partition"))
    spec = ctx.topic(m["topic"], _at(path, "topic"))
    return spec.name, ctx.partition(m["partition"], _at(path, "partition"), spec)


def _ev_elect_leaders(v: Any, path: str, ctx: _Ctx) -> dict:
    m = _keys(v, path, ("election_type", "partitions"), ("election_type",))
    kind = m["election_type"]
    kind = _str(kind.lower() if isinstance(kind, str) else kind, _at(path, "election_type"),
                ("preferred", "unclean"), what="election type")
    parts = _get(m, "partitions", path, _seq, what="partition",
                 item=lambda x, p: _topic_partition(x, p, ctx))
    return {"election_type": kind, "partitions": parts}


def _ev_set_config(v: Any, path: str, ctx: _Ctx) -> dict:
    m = _keys(v, path, ("entity", "name", "config"), ("entity", "name", "config"))
    entity = _str(m["entity"], _at(path, "entity"), ("brokers", "topics"), what="entity type")
    npath, cpath = _at(path, "name"), _at(path, "config")
    if entity == "brokers":
        name = "default" if m["name"] == "default" else ctx.broker(m["name"], npath)
        config = _config(m["config"], cpath, BROKER_DEFAULTS, deletable=True)
    else:
        name = ctx.topic(m["name"], npath).name
        config = _config(m["config"], cpath, TOPIC_CONFIGS, deletable=True)
    if not config:
        _err(cpath, m["config"], "expected at least one config")
    for k in config.keys() & _READ_ONLY:
        _err(_at(cpath, k), config[k], f"Cannot update these configs dynamically: Set({k})")
    return {"entity": entity, "name": name, "config": config}


_EVENTS: dict[str, Callable[[Any, str, _Ctx], dict]] = {
    "produce": _ev_produce,
    "crash": _ev_crash,
    "restart": _ev_broker,
    "shutdown": _ev_broker,
    "pause": _ev_pause,
    "isolate": _ev_isolate,
    "heal": _ev_empty,
    "fail_log_dir": _ev_fail_log_dir,
    "controller_failover": _ev_empty,
    "create_topic": _ev_create_topic,
    "delete_topic": _ev_delete_topic,
    "reassign": _ev_reassign,
    "elect_leaders": _ev_elect_leaders,
    "set_config": _ev_set_config,
}


def _entry_head(x: Any, path: str) -> tuple[int | None, int | None, str, Any]:
    """(at_ms, round, event type, raw args) of one timeline entry, shape only."""
    m = _keys(x, path, _TIME_KEYS + tuple(_EVENTS))
    times = [k for k in _TIME_KEYS if k in m]
    if len(times) != 1:
        _err(path, {k: m[k] for k in times}, "give exactly one of at (ms) or round")
    t = _int(m[times[0]], _at(path, times[0]), hi=MAX_TIME_MS)
    events = [k for k in m if k in _EVENTS]
    if len(events) != 1:
        _err(path, events, f"give exactly one event per entry, one of: {', '.join(_EVENTS)}")
    at, rnd = (t, None) if times[0] == "at" else (None, t)
    return at, rnd, events[0], m[events[0]]


def _timeline(v: Any, ctx: _Ctx, round_ms: int) -> tuple[Event, ...]:
    heads = _seq([] if v is None else v, "timeline", _entry_head, unique=False, nonempty=False)
    order = sorted(range(len(heads)), key=lambda i: (heads[i][0] if heads[i][0] is not None
                                                     else heads[i][1] * round_ms, i))
    events: dict[int, Event] = {}
    for i in order:
        at, rnd, kind, raw = heads[i]
        events[i] = Event(i, at, rnd, kind, _EVENTS[kind](raw, f"timeline[{i}].{kind}", ctx))
    return tuple(events[i] for i in range(len(heads)))


def _check_supported(events: tuple[Event, ...], raw: Any) -> None:
    """Reject, in file order, the first valid event whose behaviour is in NOT_YET_SUPPORTED."""
    for e in events:
        power_loss = e.type == "crash" and e.args["power_loss"]
        feature = "crash.power_loss" if power_loss else e.type
        if feature in NOT_YET_SUPPORTED:
            value = True if power_loss else raw[e.index][e.type]
            raise NotYetSupportedError(f"timeline[{e.index}].{feature}", value,
                                       f"{feature} is not yet supported by this version of sparkkafka")


# ---------------------------------------------------------------------------------------------
# Entry points


def parse_scenario(data: Any, name: str = "scenario", base_dir: str | Path | None = None,
                   running: bool = False) -> Scenario:
    """Validate and normalise a scenario mapping; `base_dir` resolves relative reassignment plan paths.
    `running`: `topics` are a running cluster's current ones (an event checked against a run, Timeline.event_of):
    their assignments may differ in size per partition, as reassignments in flight leave them, and there may be
    none left (all deleted)."""
    m = _keys(data, "", _TOP_KEYS, ("cluster", "topics"))
    name, seed = _get(m, "name", "", _str, name), _get(m, "seed", "", _int, 0)
    c = _keys(m["cluster"], "cluster", _CLUSTER_KEYS, ("brokers",))
    b = c["brokers"]
    brokers = (_seq(b, "cluster.brokers", lambda x, p: _int(x, p, hi=INT_MAX), what="broker id")
               if isinstance(b, list) else tuple(range(_int(b, "cluster.brokers", lo=1, hi=MAX_BROKERS))))
    log_dirs = _get(c, "log_dirs", "cluster", _seq, ("d0",), item=_str, what="log dir")
    config = _get(c, "config", "cluster", _config, {}, names=BROKER_DEFAULTS)
    emu = _keys(c.get("emulator"), "cluster.emulator", EMULATOR_DEFAULTS, what="emulator setting")
    emulator = {**EMULATOR_DEFAULTS, **{k: _typed(x, _at("cluster.emulator", k), EMULATOR_DEFAULTS[k], lo=1)
                                        for k, x in emu.items()}}
    if emulator["initial.record.bytes"] > 2**31 - 1:  # the log table's value_bytes is an int32
        _err("cluster.emulator.initial.record.bytes", emulator["initial.record.bytes"], f"must be <= {2**31 - 1}")
    if emulator["engine"] not in ENGINES:
        raise ScenarioError("cluster.emulator.engine", emulator["engine"], f"must be one of {', '.join(ENGINES)}")
    racks = _get(c, "racks", "cluster", _racks, brokers=brokers)
    ctx = _Ctx(brokers, log_dirs, broker_config(config), None if base_dir is None else Path(base_dir),
               down=None if running else set())
    topics = _seq(m["topics"], "topics", lambda x, p: ctx.create(_topic_spec(x, p, ctx, same_rf=not running), p),
                  unique=False, nonempty=False)
    timeline = _timeline(m.get("timeline"), ctx, emulator["round.ms"])
    if not topics and not running and not any(e.type == "create_topic" for e in timeline):
        _err("topics", m["topics"], "at least one topic is required (unless the timeline creates one)")
    until_ms, until_round = _run(m.get("run"), timeline, emulator["round.ms"])
    _check_supported(timeline, m.get("timeline"))
    return Scenario(name=name, seed=seed,
                    brokers=brokers, racks=racks, log_dirs=log_dirs, config=config, emulator=emulator,
                    topics=topics, timeline=timeline, until_ms=until_ms, until_round=until_round)


def _racks(v: Any, path: str, brokers: tuple[int, ...]) -> dict[int, str] | None:
    """broker -> rack, for every broker or none (Kafka's rack-aware assignment needs all)."""
    if not isinstance(v, dict):
        _err(path, v, "expected a mapping broker -> rack")
    racks: dict[int, str] = {}
    for k, rack in v.items():
        b = _id(k, _at(path, k))
        if b not in brokers:
            _unknown(_at(path, k), rack, "broker", b, brokers)
        racks[b] = _str(rack, _at(path, b))
    missing = [b for b in brokers if b not in racks]
    if racks and missing:
        _err(path, missing, "Not all brokers have rack information (these have none)")
    return racks or None


def _run(v: Any, timeline: tuple[Event, ...], round_ms: int) -> tuple[int | None, int | None]:
    """(until_ms, until_round); without `run`, DEFAULT_TAIL_MS after the last event ends."""
    if v is None:
        ends = (e.time_ms(round_ms) + (e.args.get("duration_ms") or 0) for e in timeline)
        return max(ends, default=0) + DEFAULT_TAIL_MS, None
    m = _keys(v, "run", ("until_ms", "until_round"))
    given = {k: _int(x, _at("run", k)) for k, x in m.items() if x is not None}
    if len(given) != 1:
        _err("run", v, "give exactly one of until_ms or until_round")
    (key, value), = given.items()
    if value * (round_ms if key == "until_round" else 1) > MAX_TIME_MS:
        _err(_at("run", key), value, f"must be <= {MAX_TIME_MS // (round_ms if key == 'until_round' else 1)} "
                                     f"(a run spans at most {MAX_TIME_MS} emulated ms, a week)")
    return given.get("until_ms"), given.get("until_round")


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
