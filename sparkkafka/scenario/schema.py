"""The scenario document's shape as typed pydantic models, and a `ValidationError` as a `ScenarioError`.

A model checks what one mapping holds on its own: the keys (unknown ones refused with a did-you-mean hint,
required ones present, null = absent), the types (strict: a bool is not an int, "5" is not an int; only a
broker or partition id used as a mapping key may be a digit string, as JSON spells them), the bounds of every
number (every one that sizes a run's work has an upper bound: emulated time, records, bytes, rates, brokers,
partitions) and the rules between keys of that mapping (exactly one of at/round, records or a rate with a
duration, a future log in another dir). What needs the rest of the document (a broker the cluster has, a
topic that exists at that point of the timeline, a log dir the brokers have) is loader._Sequence's, one pass
over these models in run order. `scenario_error` turns pydantic's first error into the ScenarioError users
see: the field path spelled as the file (`timeline[3].crash.broker`, `cluster.config.min.insync.replicas`)
and the value as given.
"""

import difflib
import json
import re
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, ClassVar, Literal, Self, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    ValidationError,
    ValidationInfo,
    create_model,
    model_validator,
)
from pydantic_core import PydanticCustomError

from sparkkafka.errors import ScenarioError
from sparkkafka.protocol.config import (
    BROKER_DEFAULTS,
    DELTA_WRITERS,
    EMULATOR_DEFAULTS,
    ENGINES,
    LONG_MAX,
    TOPIC_CONFIGS,
    TOPIC_DEFAULTS,
    profile_of,
)
from sparkkafka.protocol.rules import unknown_version_message
from sparkkafka.scenario import event_kind

IBP = "inter.broker.protocol.version"
INT_MAX = 2**31 - 1  # Kafka's broker ids, partition ids and counts are Java ints
# What one emulated cluster may hold (the emulator's limits, far above what a round can carry): a bare
# `cluster.brokers: N`, a list of more broker ids, and partitions above these (per topic and in all live
# topics) are refused, not expanded.
MAX_BROKERS = 10_000
MAX_PARTITIONS = 1_000_000
# Bounds on what sizes a run's work, so that a mistyped number is refused before any directory or Spark
# job exists instead of running without end: emulated time (a week, Kafka's default log.retention.hours),
# records one produce event sends (each is a row of produce_results), and a record's size (the log
# table's value_bytes is a Java int, as Kafka's record sizes are).
MAX_TIME_MS = 7 * 24 * 3600 * 1000
MAX_RECORDS = 100_000_000
MAX_VALUE_BYTES = INT_MAX
MAX_RATE = MAX_RECORDS * 1000  # records/s: MAX_RECORDS in the shortest steady produce (1 ms)
# One imported replica log (topics[].state): 1 PiB. Its rows are bounded too: loader._Sequence refuses
# logs that become more than MAX_RECORDS records of cluster.emulator.initial.record.bytes in all.
MAX_LOG_BYTES = 2**50
# Lower bounds of int configs (Kafka's validators); every other int config is >= 0.
CONFIG_MIN = {
    "min.insync.replicas": 1, "num.partitions": 1, "default.replication.factor": 1,
    "num.replica.fetchers": 1, "num.replica.alter.log.dirs.threads": 1,
    "replication.quota.window.num": 1, "replication.quota.window.size.seconds": 1,
    "log.flush.interval.messages": 1, "retention.ms": -1, "segment.bytes": 14,
}
# The int configs Kafka declares as LONG (KafkaConfig, LogConfig); every other one is an INT there, so its
# upper bound is Java's Integer.MAX_VALUE (ConfigDef refuses more: "Not a number of type INT").
LONG_CONFIGS = {
    "replica.lag.time.max.ms", "replica.lag.max.messages", "replica.high.watermark.checkpoint.interval.ms",
    "leader.imbalance.check.interval.seconds", "controlled.shutdown.retry.backoff.ms",
    "leader.replication.throttled.rate", "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second", "log.flush.interval.messages", "log.flush.interval.ms",
    "log.flush.scheduler.interval.ms", "retention.ms", "flush.messages", "flush.ms",
}
# Upper bounds of the emulator's own numbers (lower bound 1, spark.partitions 0 = Spark's default):
# rounds and times within a run's week, records and rows within MAX_RECORDS, Spark partitions within brokers.
EMULATOR_MAX = {
    "round.ms": MAX_TIME_MS, "history.commit.rounds": MAX_TIME_MS, "checkpoint.rounds": MAX_TIME_MS,
    "delta.checkpoint.interval": INT_MAX, "delta.compact.min.files": INT_MAX,
    "delta.log.retention.commits": INT_MAX, "spark.partitions": MAX_BROKERS, "tail.records": MAX_RECORDS,
    "read.max.records": MAX_RECORDS, "page.cache.writeback.ms": MAX_TIME_MS, "resident.rounds": MAX_TIME_MS,
    "resident.history.rows": INT_MAX, "initial.record.bytes": MAX_VALUE_BYTES,
}
ACKS = ("all", "-1", "0", "1")  # the producer's ConfigDef for acks (ProducerConfig: ValidString.in)
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_TOPIC_ID = re.compile(r"[A-Za-z0-9_-]{22}")
_THROTTLED = re.compile(r"\*|\s*\d+\s*:\s*\d+\s*(,\s*\d+\s*:\s*\d+\s*)*|")
_INT_STR = re.compile(r"\d+", re.ASCII)


# ---------------------------------------------------------------------------------------------
# Errors


def fail(message: str, value: Any = ..., at: tuple = ()) -> Any:
    """Refuse the value being validated; `at`: a path below it, `value`: the value to name (default: the input)."""
    raise PydanticCustomError("scenario", "{message}", {"message": message, "value": value, "at": at})


def unknown_message(what: str, key: Any, allowed: tuple) -> str:
    """`unknown key 'x'; did you mean 'y'?` (difflib), else the names allowed."""
    names = [str(a) for a in allowed]
    close = difflib.get_close_matches(key, names, n=1) if isinstance(key, str) else []
    hint = f"did you mean {close[0]!r}?" if close else f"expected one of: {', '.join(names) or 'nothing'}"
    return f"unknown {what} {key!r}; {hint}"


def path_of(loc: tuple) -> str:
    """`a.b` for a name, `a[3]` for an index or an integer key; a union's `<tag>` and a key's `[key]` dropped."""
    out = ""
    for k in loc:
        if isinstance(k, str) and (k == "[key]" or k.startswith("<")):
            continue
        out = f"{out}[{k}]" if isinstance(k, int) else f"{out}.{k}" if out else str(k)
    return out or "<scenario>"


def _message(e: dict) -> str:
    """Today's words for pydantic's error types."""
    kind, v, ctx = e["type"], e["input"], e.get("ctx") or {}
    if v is None:
        return "expected a value"
    if kind.startswith("int_"):
        return "expected an integer" + (", not a boolean" if isinstance(v, bool) else "")
    if kind in ("float_type", "finite_number"):
        return "expected a finite number"
    bound = {"greater_than_equal": ">=", "less_than_equal": "<=", "greater_than": ">", "less_than": "<"}
    if kind in bound:
        return f"must be {bound[kind]} {next(iter(ctx.values()))}"
    if kind == "string_type":
        return "expected a string"
    if kind == "string_too_short":
        return "expected a non-empty string"
    if kind == "bool_type":
        return "expected true or false"
    if kind == "too_long":
        return f"at most {ctx['max_length']} entries"
    if kind in ("list_type", "too_short"):
        return "expected a non-empty list" if ctx.get("min_length") else "expected a list"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return "expected a mapping"
    return e["msg"]


def scenario_error(exc: ValidationError) -> ScenarioError:
    """pydantic's first error as ScenarioError(field, value as given, message)."""
    errors = exc.errors(include_url=False)
    e = errors[0]
    if e["type"] == "missing":  # a misspelt required key: its unknown spelling is the error to name
        e = next((x for x in errors if x["type"] == "extra_forbidden" and x["loc"][:-1] == e["loc"][:-1]), e)
    loc, value = e["loc"], e["input"]
    if e["type"] == "scenario":
        ctx = e["ctx"]
        return ScenarioError(path_of(loc + tuple(ctx["at"])), value if ctx["value"] is ... else ctx["value"],
                             ctx["message"])
    if e["type"] == "missing":
        return ScenarioError(path_of(loc), None, "required")
    if e["type"] == "extra_forbidden":
        model = _model_at(loc[:-1])
        return ScenarioError(path_of(loc), value, unknown_message(model.what, loc[-1], model.key_names))
    return ScenarioError(path_of(loc), value, _message(e))


def _model_at(loc: tuple) -> Any:
    """The model a location of the document is validated by (the mapping an unknown key was found in)."""
    t: Any = document_model()
    for k in loc:
        t = _below(t, k)
    return _below(t, None)


def _below(t: Any, k: Any) -> Any:
    """What validates `k` of a value of type `t`: a model's field, a list's item, a mapping's value, a tagged
    union's branch (k its tag) or the one non-null type of an Optional; k None: the model `t` is."""
    while get_origin(t) is Annotated:
        t = t.__origin__
    if isinstance(t, type) and issubclass(t, BaseModel):
        return t if k is None else next(f.annotation for n, f in t.model_fields.items() if (f.alias or n) == k)
    args = [a for a in get_args(t) if a is not type(None)]
    if get_origin(t) in (Union, UnionType):
        tagged = [a for a in args if any(getattr(m, "tag", None) == k for m in getattr(a, "__metadata__", ()))]
        return tagged[0] if k is not None and tagged else _below(args[0], k)
    return args[-1]  # list[X] -> X, dict[K, V] -> V


# ---------------------------------------------------------------------------------------------
# Value types


def _unique(what: str, key: Any = None) -> AfterValidator:
    """A list without two entries of the same `key` (the entry itself by default)."""

    def check(v: list) -> list:
        seen: set = set()
        for j, x in enumerate(v):
            k = key(x) if key else x
            if k in seen:
                fail(f"duplicate {what} {k!r}", x.model_dump(by_alias=True, exclude_unset=True)
                     if isinstance(x, BaseModel) else x, (j,))
            seen.add(k)
        return v

    return AfterValidator(check)


def _choice(what: str, choices: tuple[str, ...]) -> AfterValidator:
    def check(v: str) -> str:
        return v if v in choices else fail(unknown_message(what, v, choices))

    return AfterValidator(check)


def _listed(v: Any) -> Any:
    """A bare scalar means a list of it (`brokers: 1`)."""
    return v if isinstance(v, list | dict) else [v]


def _digits(v: Any) -> Any:
    """A mapping key may be a digit string (JSON has no integer keys)."""
    return int(v) if isinstance(v, str) and _INT_STR.fullmatch(v) else v


def _either(tag_of: Any, **branches: Any) -> Any:
    """A union whose branch `tag_of(value)` picks (its `<tag>` is left out of the field path)."""
    return Annotated[Union[tuple(Annotated[t, Tag(f"<{k}>")] for k, t in branches.items())],  # noqa: UP007
                     Discriminator(lambda v: f"<{tag_of(v)}>")]


def Int(lo: int = 0, hi: int = LONG_MAX) -> Any:  # noqa: N802 - a type
    return Annotated[int, Field(ge=lo, le=hi)]


Text = Annotated[str, Field(min_length=1)]
BrokerId = Int(hi=INT_MAX)
PartitionId = Int(hi=INT_MAX)
IdKey = Annotated[int, Field(ge=0, le=INT_MAX), BeforeValidator(_digits)]  # (Field first: checked in pydantic-core)
TimeMs = Int(hi=MAX_TIME_MS)
DurationMs = Int(1, MAX_TIME_MS)
Brokers = Annotated[list[BrokerId], Field(min_length=1, max_length=MAX_BROKERS), _unique("broker")]
SomeBrokers = Annotated[Brokers, BeforeValidator(_listed)]  # `brokers: 1` = [1]
Rate = Int(1)  # bytes/s (KIP-73 throttles are Java longs)


def _week(v: int) -> int:
    return v if v <= MAX_TIME_MS else fail(f"must be <= {MAX_TIME_MS} (a run spans at most {MAX_TIME_MS} "
                                           "emulated ms, a week)")


def _rate(v: float) -> float:
    return v if v <= MAX_RATE else fail(f"must be <= {MAX_RATE} records/s (at most {MAX_RECORDS} records per "
                                        "produce event, in 1 ms at the shortest)")


def _acks(v: Any) -> int:
    """0, 1, all or -1 (-> -1), as the Java producer's `acks` config accepts: anything else is a
    ConfigException there, so a scenario cannot send it."""
    text = str(v).strip() if isinstance(v, str | int) and not isinstance(v, bool) else None
    if text not in ACKS:
        fail(f"Invalid value {v} for configuration acks: String must be one of: {', '.join(ACKS)}")
    return -1 if text == "all" else int(text)


def _topic_name(v: str) -> str:
    if not _TOPIC_NAME.fullmatch(v) or v in (".", ".."):
        fail("Topic name is illegal: at most 249 characters among ASCII alphanumerics, '.', '_' and '-', "
             "and not '.' or '..'")
    return v


def _topic_id(v: str) -> str:
    if not _TOPIC_ID.fullmatch(v) or v == "A" * 22:
        fail("expected Kafka's Uuid text: 22 characters of URL-safe base64, not all zeros")
    return v


def _ibp(v: Any) -> str:
    text = str(v) if isinstance(v, str | int | float) and not isinstance(v, bool) else ""
    return text if profile_of(text) is not None else fail(unknown_version_message())


def _throttled(v: str) -> str:
    if not _THROTTLED.fullmatch(v):
        fail("must be '*' or a list of [partitionId]:[brokerId],[partitionId]:[brokerId],...")
    return v


# ---------------------------------------------------------------------------------------------
# Models


class Shape(BaseModel):
    """A mapping of the document: strict types, no unknown key (scenario_error adds the hint); a key whose
    value may be null has None as its default, so null is the key left out."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    what: ClassVar[str] = "key"  # what an unknown key is called in the message
    key_names: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def __pydantic_init_subclass__(cls, **kw: Any) -> None:
        cls.key_names = tuple(f.alias or n for n, f in cls.model_fields.items())


class RawShape(Shape):
    """A mapping checked as written first: unknown keys, then `check_mapping`; null is an empty mapping and a
    key set to null the key left out (its default other than None, or `required`). Only the few mappings
    with such defaults or rules (a Python step each: the many replica logs of an import stay in pydantic-core)."""

    null_is_absent: ClassVar[bool] = True

    @model_validator(mode="before")
    @classmethod
    def _raw(cls, v: Any) -> Any:
        v = {} if v is None else v
        if isinstance(v, dict):
            for k, x in v.items():
                if k not in cls.key_names:
                    fail(unknown_message(cls.what, k, cls.key_names), x, (k,))
            cls.check_mapping(v)
            if cls.null_is_absent and any(x is None for x in v.values()):
                return {k: x for k, x in v.items() if x is not None}
        return v

    @classmethod
    def check_mapping(cls, v: dict) -> None:
        """The rules on the raw mapping once its keys are known (a subclass's)."""


class Config(Shape):
    """Named settings (a Kafka config, the emulator's): `given()` is what the file set, in its order."""

    what: ClassVar[str] = "config"
    _order: tuple = PrivateAttr(())

    @model_validator(mode="wrap")
    @classmethod
    def _keep_order(cls, v: Any, handler: Any) -> Self:
        m = handler(v)
        m._order = tuple(v) if isinstance(v, dict) else ()
        return m

    def given(self) -> dict[str, Any]:
        return {k: getattr(self, k.replace(".", "_")) for k in self._order}


def _default_of(name: str) -> Any:
    """A broker or topic config's default (a topic config without its own inherits the broker's)."""
    if name in BROKER_DEFAULTS:
        return BROKER_DEFAULTS[name]
    base = TOPIC_CONFIGS[name]
    return BROKER_DEFAULTS[base] if base else TOPIC_DEFAULTS[name]


def _config_model(name: str, names: dict, deletable: bool) -> type[Config]:
    """Kafka config overrides restricted to `names`, each of its default's type: bool, string (may be
    empty) or an int within Kafka's validator and type; null only to delete it (set_config) or where the
    default is null (derived from another config)."""
    fields: dict[str, Any] = {}
    for key in names:
        default = _default_of(key)
        if key == IBP:
            t: Any = Annotated[str, BeforeValidator(_ibp)]
        elif isinstance(default, bool):
            t = bool
        elif isinstance(default, str):
            t = Annotated[str, AfterValidator(_throttled)] if key.endswith("throttled.replicas") else str
        else:
            t = Int(CONFIG_MIN.get(key, 0), LONG_MAX if key in LONG_CONFIGS else INT_MAX)
        fields[key.replace(".", "_")] = (t | None if deletable or default is None else t,
                                         Field(None, alias=key))
    return create_model(name, __base__=Config, **fields)


BrokerConfig = _config_model("BrokerConfig", BROKER_DEFAULTS, deletable=False)
TopicConfig = _config_model("TopicConfig", TOPIC_CONFIGS, deletable=False)
BrokerConfigChange = _config_model("BrokerConfigChange", BROKER_DEFAULTS, deletable=True)
TopicConfigChange = _config_model("TopicConfigChange", TOPIC_CONFIGS, deletable=True)


CHOICES = {"engine": ENGINES, "delta.writer": DELTA_WRITERS}  # the emulator settings that name one of a few


def _emulator_type(key: str, default: Any) -> Any:
    if isinstance(default, bool):
        return bool
    if key in CHOICES:
        return Annotated[str, AfterValidator(
            lambda v, choices=CHOICES[key]: v if v in choices else fail(f"must be one of {', '.join(choices)}"))]
    return Int(0 if key == "spark.partitions" else 1, EMULATOR_MAX[key])


Emulator = create_model("Emulator", __base__=Config, **{
    k.replace(".", "_"): (_emulator_type(k, d), Field(None, alias=k)) for k, d in EMULATOR_DEFAULTS.items()})
Emulator.what = "emulator setting"


class Cluster(Shape):
    brokers: _either(lambda v: "ids" if isinstance(v, list | tuple) else "count", count=Int(1, MAX_BROKERS), ids=Brokers)
    racks: dict[IdKey, Text] | None = None
    log_dirs: Annotated[list[Text], Field(min_length=1), _unique("log dir")] | None = None
    config: BrokerConfig | None = None  # type: ignore[valid-type]
    emulator: Emulator | None = None  # type: ignore[valid-type]


class FutureLog(Shape):
    """A KIP-113 move in flight: the replica's future log in another dir."""

    dir: Text
    bytes: Int(hi=MAX_LOG_BYTES)


class ReplicaLog(Shape):
    dir: Text
    bytes: Int(hi=MAX_LOG_BYTES)
    future: FutureLog | None = None

    @model_validator(mode="after")
    def _future_elsewhere(self) -> Self:
        if self.future is not None and self.future.dir == self.dir:
            fail("a future log (KIP-113 move) must be in another dir than the current log", self.dir,
                 ("future", "dir"))
        return self


class PartitionState(Shape):
    """The partition state znode (leader, ISR), a KIP-455 reassignment's adding/removing replicas, the logs."""

    leader: Annotated[int, BeforeValidator(lambda v: -1 if v == "none" else v), Field(ge=-1, le=INT_MAX)]
    isr: Annotated[list[BrokerId], _unique("broker")]
    adding: Annotated[list[BrokerId], _unique("broker")] | None = None
    removing: Annotated[list[BrokerId], _unique("broker")] | None = None
    logs: dict[IdKey, ReplicaLog] | None = None

    @model_validator(mode="after")
    def _leader_in_isr(self) -> Self:
        if self.leader != -1 and self.leader not in self.isr:
            fail(f"the leader is not in the ISR {list(self.isr)}", self.leader, ("leader",))
        both = set(self.adding or ()) & set(self.removing or ())
        if both:
            fail(f"broker(s) {sorted(both)} both added and removed", list(self.removing), ("removing",))
        return self


class Topic(Shape):
    """A `topics` entry; missing counts come from num.partitions / default.replication.factor."""

    name: Annotated[Text, AfterValidator(_topic_name)]
    id: Annotated[Text, AfterValidator(_topic_id)] | None = None
    partitions: Int(1, MAX_PARTITIONS) | None = None
    replication_factor: Int(1, MAX_BROKERS) | None = None
    assignment: Annotated[dict[IdKey, Brokers], Field(max_length=MAX_PARTITIONS)] | None = None
    config: TopicConfig | None = None  # type: ignore[valid-type]
    state: dict[IdKey, PartitionState] | None = None

    @model_validator(mode="after")
    def _assignment_given(self) -> Self:
        if self.assignment == {}:
            fail("expected a non-empty mapping partition -> list of broker ids", {}, ("assignment",))
        if self.state is not None and self.assignment is None:
            fail("required with state (the replicas the state describes)", None, ("assignment",))
        return self


class NewTopic(Topic):
    """A create_topic event's topic: it starts empty."""

    @model_validator(mode="before")
    @classmethod
    def _empty(cls, v: Any) -> Any:
        if isinstance(v, dict) and v.get("state") is not None:
            fail("a created topic starts empty: state is for the scenario's topics", v["state"], ("state",))
        return v


class Bare:
    """An event given as its bare value (`crash: 1`): a sequence error names the event itself."""


def shorthand(model: type[Shape], key: str) -> Any:
    """`crash: 1` = `crash: {broker: 1}`: a mapping is a `model`, any other value its one required `key`."""
    bare = type(f"Bare{model.__name__}", (model, Bare), {"__module__": __name__})
    return _either(lambda v: "map" if isinstance(v, dict) else "bare", map=model,
                   bare=Annotated[bare, BeforeValidator(lambda v: {key: v})])


class Produce(RawShape):
    topic: Text
    partition: _either(lambda v: "all" if v == "all" else "id", all=Literal["all"], id=PartitionId) = "all"
    records: Int(1, MAX_RECORDS) | None = None
    rate_per_sec: Annotated[float, Field(gt=0, allow_inf_nan=False), AfterValidator(_rate)] | None = None
    duration_ms: DurationMs | None = None
    acks: Annotated[int, BeforeValidator(_acks)] = 1
    value_bytes: Int(hi=MAX_VALUE_BYTES) = 100
    key: Text | None = None

    @model_validator(mode="wrap")
    @classmethod
    def _amount(cls, v: Any, handler: Any) -> Self:
        """Either records, or rate_per_sec with duration_ms, sending at most MAX_RECORDS."""
        m = handler(v)
        rate, duration = m.rate_per_sec, m.duration_ms
        if (m.records is None) == (rate is None and duration is None):
            fail("give either records or rate_per_sec with duration_ms")
        if (rate is None) != (duration is None):
            missing, given = ("duration_ms", "rate_per_sec") if duration is None else ("rate_per_sec", "duration_ms")
            fail(f"required together with {given}", None, (missing,))
        if rate is not None and rate * duration / 1000 > MAX_RECORDS:
            fail(f"sends {rate * duration / 1000:.0f} records over duration_ms {duration}: at most {MAX_RECORDS} "
                 "records per produce event", v["rate_per_sec"], ("rate_per_sec",))
        return m


class Crash(RawShape):
    broker: BrokerId
    power_loss: bool = False


class BrokerEvent(Shape):
    """restart, shutdown."""

    broker: BrokerId


class Pause(Shape):
    broker: BrokerId
    duration_ms: DurationMs


def _controller(v: str) -> str:
    return v if v == "controller" else fail("expected a list of broker ids or 'controller'")


class Isolate(Shape):
    brokers: SomeBrokers
    from_: _either(lambda v: "name" if isinstance(v, str) else "ids", name=Annotated[str, AfterValidator(_controller)],
                   ids=SomeBrokers) | None = Field(None, alias="from")
    duration_ms: DurationMs | None = None

    @model_validator(mode="after")
    def _two_sides(self) -> Self:
        both = sorted(set(self.brokers) & set(self.from_ or ())) if isinstance(self.from_, list) else []
        if both:
            fail(f"broker(s) {both} are on both sides", self.from_, ("from",))
        return self


class Empty(Shape):
    """heal, controller_failover."""


class FailLogDir(Shape):
    broker: BrokerId
    log_dir: Text


class DeleteTopic(Shape):
    topic: Text


class PlanEntry(Shape):
    topic: Text
    partition: PartitionId
    replicas: Brokers
    log_dirs: list[Text] | None = None

    @model_validator(mode="after")
    def _dirs_per_replica(self) -> Self:
        if self.log_dirs is not None and len(self.log_dirs) != len(self.replicas):
            fail(f"has {len(self.log_dirs)} entries but replicas has {len(self.replicas)}", self.log_dirs,
                 ("log_dirs",))
        return self


class Plan(RawShape):
    """Kafka's reassignment JSON (inline, or a file path read here), checked as kafka-reassign-partitions does."""

    version: int = 1
    partitions: Annotated[list[PlanEntry], _unique("partition", lambda e: (e.topic, e.partition))]

    @model_validator(mode="before")
    @classmethod
    def _read(cls, v: Any, info: ValidationInfo) -> Any:
        if isinstance(v, str):
            p = Path(v)
            base = (info.context or {}).get("base_dir")
            if not p.is_absolute() and base is not None:
                p = Path(base) / p
            try:
                v = json.loads(p.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, ValueError) as exc:
                fail(f"cannot read the reassignment JSON {str(p)!r}: {exc}")
        if isinstance(v, dict) and v.get("partitions") == []:
            fail("Partition reassignment list cannot be empty", [], ("partitions",))
        return v

    @model_validator(mode="after")
    def _version(self) -> Self:
        return self if self.version == 1 else fail("Not supported version field value", self.version, ("version",))


class Reassign(RawShape):
    plan: Plan
    throttle: Rate | None = None
    log_dirs_throttle: Rate | None = None
    # api: AlterPartitionReassignments, as the 2.8 tool; zookeeper: /admin/reassign_partitions
    via: Annotated[str, _choice("reassignment path", ("api", "zookeeper"))] = "api"


class TopicPartition(Shape):
    topic: Text
    partition: PartitionId


class ElectLeaders(Shape):
    election_type: Annotated[str, BeforeValidator(lambda v: v.lower() if isinstance(v, str) else v),
                             _choice("election type", ("preferred", "unclean"))]
    partitions: Annotated[list[TopicPartition], Field(min_length=1),
                          _unique("partition", lambda e: (e.topic, e.partition))] | None = None


class _SetConfig(Shape):
    entity: Annotated[str, _choice("entity type", ("brokers", "topics"))]

    @model_validator(mode="after")
    def _changes(self) -> Self:
        config = self.config.given()
        if not config:
            fail("expected at least one config", {}, ("config",))
        for k in config.keys() & {IBP}:  # static broker configs set_config may not change
            fail(f"Cannot update these configs dynamically: Set({k})", config[k], ("config", k))
        return self


class SetBrokerConfig(_SetConfig):
    name: _either(lambda v: "default" if v == "default" else "id", default=Literal["default"], id=BrokerId)
    config: BrokerConfigChange  # type: ignore[valid-type]


class SetTopicConfig(_SetConfig):
    name: Text
    config: TopicConfigChange  # type: ignore[valid-type]


SetConfig = _either(lambda v: "topics" if isinstance(v, dict) and v.get("entity") == "topics" else "brokers",
                    brokers=SetBrokerConfig, topics=SetTopicConfig)
TIME_KEYS = ("at", "round")


class EntryBase(RawShape):
    """One timeline entry: exactly one of at (ms) or round, and exactly one event (`heal:` null = `heal: {}`).
    Its event keys are the registered kinds (scenario/event_kind.py): `entry_model()` adds them."""

    null_is_absent: ClassVar[bool] = False

    at: TimeMs = None
    round: TimeMs = None

    @classmethod
    def check_mapping(cls, v: dict) -> None:
        times = [k for k in TIME_KEYS if k in v]
        if len(times) != 1:
            fail("give exactly one of at (ms) or round", {k: v[k] for k in times})
        names = event_kind.names()
        events = [k for k in v if k in names]
        if len(events) != 1:
            fail(f"give exactly one event per entry, one of: {', '.join(names)}", events)

    @property
    def kind(self) -> str:
        return next(k for k in event_kind.names() if k in self.model_fields_set)


class Run(Shape):
    until_ms: Annotated[int, Field(ge=0), AfterValidator(_week)] | None = None
    until_round: Annotated[int, Field(ge=0), AfterValidator(_week)] | None = None  # and by round.ms: loader

    @model_validator(mode="wrap")
    @classmethod
    def _one(cls, v: Any, handler: Any) -> Self:
        m = handler(v)
        if (m.until_ms is None) == (m.until_round is None):
            fail("give exactly one of until_ms or until_round")
        return m


class DocumentBase(RawShape):
    """A scenario file (`document_model()` gives it its timeline entries' type)."""

    name: Text | None = None
    seed: Int() = 0
    cluster: Cluster
    topics: list[Topic]
    timeline: list[Any] | None = None
    run: Run | None = None


_DOCUMENTS: dict[tuple[str, ...], type[DocumentBase]] = {}


def document_model() -> type[DocumentBase]:
    """The scenario document's model with one key per registered event kind (made once per set of kinds)."""
    names = event_kind.names()
    if names not in _DOCUMENTS:
        entry = create_model("Entry", __base__=EntryBase, __module__=__name__,
                             **{k.name: (k.shape, None) for k in event_kind.KINDS.values()})
        _DOCUMENTS[names] = create_model("Document", __base__=DocumentBase, __module__=__name__,
                                         timeline=(list[entry] | None, None))
    return _DOCUMENTS[names]


def validate(data: Any, base_dir: Path | None) -> DocumentBase:
    """The document's shape checked (reassignment plan files read relative to `base_dir`), or ScenarioError."""
    try:
        return document_model().model_validate(data, context={"base_dir": base_dir})
    except ValidationError as exc:
        raise scenario_error(exc) from None
