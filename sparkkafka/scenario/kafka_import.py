"""Import a real cluster: Kafka tools' text -> a scenario mapping whose run starts in that cluster's state.

Inputs, each the text an operator already has (tool formats as TopicCommand / LogDirsCommand / ConfigCommand
print them, 2.x and 3.x):

* ``kafka-topics.sh --describe`` (no filter flags): header lines ``Topic: t[\\tTopicId: id]\\tPartitionCount: n
  \\tReplicationFactor: r\\tConfigs: k=v,...`` and partition lines ``\\tTopic: t\\tPartition: p\\tLeader: l|none
  \\tReplicas: a,b\\tIsr: a,b[\\tAdding Replicas: ..\\tRemoving Replicas: ..][\\tElr: ..\\tLastKnownElr: ..]``
  (KIP-455 reassignments; KIP-966 ELR columns of 3.8+ are tolerated and ignored). ``Topic:foo`` without the
  space after the colon (the form docs/ops.html shows) is accepted too.
* ``kafka-log-dirs.sh --describe`` output (its two header lines optional; JSON keys in the <=3.5 or 3.6+
  order): one current log per replica, its dir and size; ``isFuture`` logs are KIP-113 moves in flight;
  a dir with an ``error`` is offline (KIP-112).
* optional broker racks (``ID=RACK`` or ``ID RACK`` lines), broker configs (``server.properties`` or
  ``kafka-configs --describe`` output, whose dynamic broker and topic configs are applied at time 0), and
  per-topic produce rates (CSV ``topic,records_per_sec[,value_bytes[,acks]]``).

Every problem raises ``ScenarioError`` whose field is ``FILE:LINE field`` (for the JSON, the JSON path):
a line that is not the tool's output, a replica on an unknown broker, a replica with no log in log-dirs,
inconsistent ISR/leader, and so on. Pure Python: no Spark, nothing written (``write_scenario`` writes
the YAML only after everything was checked).
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import yaml

from sparkkafka.errors import ScenarioError
from sparkkafka.protocol.config import BROKER_DEFAULTS, TOPIC_CONFIGS

__all__ = [
    "ImportedCluster", "LogDirs", "PartitionLine", "ReplicaLog", "TopicHeader", "TopicsDescribe", "build_scenario", "import_cluster",
    "parse_configs", "parse_log_dirs", "parse_racks", "parse_rates", "parse_topics_describe", "write_scenario",
]

_TOPIC_ID = re.compile(r"[A-Za-z0-9_-]{22}")
_HEADER_KEYS = ("Topic", "TopicId", "PartitionCount", "ReplicationFactor", "Configs", "MarkedForDeletion")
# Elr and LastKnownElr (3.8+, KIP-966) are read and ignored: a 2.8 ZooKeeper-mode cluster has no ELR
_PARTITION_KEYS = ("Topic", "Partition", "Leader", "Replicas", "Isr", "Adding Replicas", "Removing Replicas",
                   "Elr", "LastKnownElr")
LOG_DIRS_HEADER = ("Querying brokers for log directories information", "Received log directory information from brokers")
DEFAULT_DURATION_MS = 60000


def _fail(where: str, value: Any, message: str) -> NoReturn:
    raise ScenarioError(where, value, message)


# ---------------------------------------------------------------------------------------------
# kafka-topics --describe


@dataclass(frozen=True)
class TopicHeader:
    """A describe header line (TopicCommand.TopicDescription)."""

    topic: str
    topic_id: str | None
    partition_count: int
    replication_factor: int
    configs: dict[str, str]
    line: int


@dataclass(frozen=True)
class PartitionLine:
    """A describe partition line (PartitionDescription); leader -1 = ``none``."""

    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    line: int


@dataclass(frozen=True)
class TopicsDescribe:
    """What a describe text holds: headers by topic (in the order printed) and their partition lines."""

    source: str
    topics: dict[str, TopicHeader]
    partitions: dict[str, tuple[PartitionLine, ...]]

    def where(self, line: int, name: str) -> str:
        return f"{self.source}:{line} {name}"


def _fields(text: str, where: str, allowed: tuple[str, ...]) -> dict[str, str]:
    """`Key: value` fields split on TABs (kafkatest's parse_describe_topic), in a line of describe output."""
    out: dict[str, str] = {}
    for part in text.split("\t"):
        if not part.strip():
            continue
        key, sep, value = part.partition(":")
        key = key.strip()
        if not sep or key not in allowed:
            _fail(f"{where} {key or repr(part)}", part, "not kafka-topics --describe output: expected "
                                                    f"'Key: value' fields among {', '.join(allowed)}")
        if key in out:
            _fail(f"{where} {key}", value.strip(), "field given twice")
        out[key] = value.strip()
    return out


def _int_field(m: Mapping[str, str], key: str, where: str, lo: int = 0) -> int:
    v = m.get(key)
    if v is None:
        _fail(f"{where} {key}", None, "required field missing")
    if not re.fullmatch(r"\d+", v) or int(v) < lo:
        _fail(f"{where} {key}", v, f"expected an integer >= {lo}")
    return int(v)


def _ids(m: Mapping[str, str], key: str, where: str, nonempty: bool = False) -> tuple[int, ...]:
    v = m.get(key, "")
    if key not in m and nonempty:
        _fail(f"{where} {key}", None, "required field missing")
    items = [x.strip() for x in v.split(",")] if v.strip() else []
    if any(not re.fullmatch(r"\d+", x) for x in items) or (nonempty and not items):
        _fail(f"{where} {key}", v, "expected a comma-separated list of broker ids" + (" (non-empty)" if nonempty else ""))
    ids = tuple(int(x) for x in items)
    if len(set(ids)) != len(ids):
        _fail(f"{where} {key}", v, "a broker id is listed twice")
    return ids


def _topic_configs(text: str, where: str) -> dict[str, str]:
    """``Configs: k=v,k=v``; a piece without ``=`` continues the previous value (TopicCommand joins values
    such as ``leader.replication.throttled.replicas=0:1,1:2`` with the same comma)."""
    out: dict[str, str] = {}
    last = None
    for piece in text.split(",") if text else []:
        name, sep, value = piece.partition("=")
        if sep and re.fullmatch(r"[a-z][a-z0-9._-]*", name):
            last = name
            out[name] = value
        elif last is not None:
            out[last] += "," + piece
        else:
            _fail(f"{where} Configs", text, "expected name=value entries joined by ','")
    return out


def _header(m: dict[str, str], where: str, line: int) -> TopicHeader:
    topic = m.get("Topic") or _fail(f"{where} Topic", m.get("Topic"), "required field missing")
    tid = m.get("TopicId")
    if tid is not None and not _TOPIC_ID.fullmatch(tid):
        _fail(f"{where} TopicId", tid, "expected Kafka's Uuid: 22 characters of URL-safe base64")
    if "Configs" not in m:
        _fail(f"{where} Configs", None, "required field missing")
    return TopicHeader(topic, None if tid == "AAAAAAAAAAAAAAAAAAAAAA" else tid,
                       _int_field(m, "PartitionCount", where, 1), _int_field(m, "ReplicationFactor", where, 1),
                       _topic_configs(m["Configs"], where), line)


def _partition(m: dict[str, str], where: str, line: int) -> PartitionLine:
    leader_text = m.get("Leader")
    if leader_text is None:
        _fail(f"{where} Leader", None, "required field missing")
    if leader_text != "none" and not re.fullmatch(r"-?\d+", leader_text):
        _fail(f"{where} Leader", leader_text, "expected a broker id or 'none'")
    leader = -1 if leader_text == "none" else int(leader_text)
    if "Isr" not in m:
        _fail(f"{where} Isr", None, "required field missing")
    p = PartitionLine(m["Topic"], _int_field(m, "Partition", where), leader, _ids(m, "Replicas", where, True),
                      _ids(m, "Isr", where), _ids(m, "Adding Replicas", where), _ids(m, "Removing Replicas", where),
                      line)
    if p.leader != -1 and p.leader not in p.isr:
        _fail(f"{where} Leader", leader_text, f"the leader is not in the ISR {list(p.isr)}")
    for name, ids in (("Isr", p.isr), ("Adding Replicas", p.adding), ("Removing Replicas", p.removing)):
        extra = [b for b in ids if b not in p.replicas]
        if extra:
            _fail(f"{where} {name}", m.get(name), f"broker(s) {extra} are not in Replicas {list(p.replicas)}")
    if set(p.adding) & set(p.removing):
        _fail(f"{where} Removing Replicas", m.get("Removing Replicas"), "a broker is both added and removed")
    if ("Adding Replicas" in m) != ("Removing Replicas" in m):
        _fail(f"{where} Removing Replicas", None, "Adding Replicas and Removing Replicas come together")
    if len(p.replicas) == len(p.adding):
        _fail(f"{where} Adding Replicas", m.get("Adding Replicas"), "every replica is being added")
    return p


def parse_topics_describe(text: str, source: str = "topics-describe") -> TopicsDescribe:
    """Parse ``kafka-topics --describe`` output (2.x and 3.x); checks each topic's partitions are
    0..PartitionCount-1 in order and its ReplicationFactor matches partition 0's."""
    topics: dict[str, TopicHeader] = {}
    parts: dict[str, list[PartitionLine]] = {}
    current: TopicHeader | None = None

    def close(h: TopicHeader | None) -> None:
        if h is None:
            return
        got = parts[h.topic]
        if len(got) != h.partition_count:
            _fail(f"{source}:{h.line} PartitionCount", h.partition_count,
                  f"topic {h.topic!r} has {len(got)} partition line(s)")
        first = got[0]
        rf = len(first.replicas) - len(first.adding)
        if rf != h.replication_factor:
            _fail(f"{source}:{h.line} ReplicationFactor", h.replication_factor,
                  f"partition 0 (line {first.line}) has {rf} replica(s) (Replicas minus Adding Replicas)")

    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        where = f"{source}:{n}"
        if raw[0] not in "\t ":  # a header line
            if not raw.startswith("Topic:"):
                _fail(f"{where} <line>", raw, "not kafka-topics --describe output (expected 'Topic: ...')")
            close(current)
            m = _fields(raw, where, _HEADER_KEYS)
            current = _header(m, where, n)
            if current.topic in topics:
                _fail(f"{where} Topic", current.topic, f"topic described twice (first at line "
                                                       f"{topics[current.topic].line})")
            topics[current.topic] = current
            parts[current.topic] = []
            continue
        m = _fields(raw, where, _PARTITION_KEYS)
        if current is None:
            _fail(f"{where} Topic", m.get("Topic"), "a partition line before any topic header line (describe "
                                                    "without --under-replicated-partitions and similar filters)")
        if m.get("Topic") != current.topic:
            _fail(f"{where} Topic", m.get("Topic"), f"expected {current.topic!r}, the topic of line {current.line}")
        p = _partition(m, where, n)
        if p.partition != len(parts[current.topic]):
            _fail(f"{where} Partition", p.partition, f"expected partition {len(parts[current.topic])} "
                                                     "(partitions are printed in id order from 0)")
        parts[current.topic].append(p)
    close(current)
    if not topics:
        _fail(f"{source}:1 <line>", text[:80], "no topic in this kafka-topics --describe output")
    return TopicsDescribe(source, topics, {t: tuple(v) for t, v in parts.items()})


# ---------------------------------------------------------------------------------------------
# kafka-log-dirs --describe


@dataclass(frozen=True)
class ReplicaLog:
    """One entry of a log dir's ``partitions`` (DescribeLogDirs ReplicaInfo)."""

    broker: int
    log_dir: str
    topic: str
    partition: int
    size: int
    offset_lag: int
    is_future: bool
    where: str


@dataclass(frozen=True)
class LogDirs:
    """Brokers queried, each broker's dirs (with the error of an offline one) and the logs in them."""

    source: str
    line: int
    brokers: tuple[int, ...]
    dirs: dict[int, dict[str, str | None]]
    logs: tuple[ReplicaLog, ...]


def _json_get(obj: Any, key: str, where: str, kind: type | tuple, nullable: bool = False) -> Any:
    if not isinstance(obj, dict):
        _fail(where, obj, "expected a JSON object")
    if key not in obj:
        _fail(f"{where}.{key}", None, "required key missing")
    v = obj[key]
    if v is None and nullable:
        return None
    if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
        _fail(f"{where}.{key}", v, f"expected {'a string' if kind is str else getattr(kind, '__name__', kind)}")
    return v


def parse_log_dirs(text: str, source: str = "log-dirs") -> LogDirs:
    """Parse ``kafka-log-dirs --describe`` output: optional two header lines, then the JSON line."""
    lines = text.splitlines()
    body = None
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        if body is not None:
            _fail(f"{source}:{n} <line>", raw, "unexpected text after the JSON line")
        if raw.startswith(LOG_DIRS_HEADER):
            continue
        if not raw.lstrip().startswith("{"):
            _fail(f"{source}:{n} <line>", raw, "not kafka-log-dirs --describe output (expected its two header "
                                               "lines and one JSON line)")
        body = n
    if body is None:
        _fail(f"{source}:1 <line>", text[:80], "no JSON line in this kafka-log-dirs --describe output")
    try:
        data = json.loads(lines[body - 1])
    except ValueError as exc:
        _fail(f"{source}:{body} <json>", lines[body - 1][:80], f"not valid JSON: {exc}")
    at = f"{source}:{body} "
    if _json_get(data, "version", at + "$", int) != 1:
        _fail(at + "$.version", data["version"], "expected version 1")
    brokers: list[int] = []
    dirs: dict[int, dict[str, str | None]] = {}
    logs: list[ReplicaLog] = []
    seen: dict[tuple, str] = {}
    for i, b in enumerate(_json_get(data, "brokers", at + "$", list)):
        w = f"{at}$.brokers[{i}]"
        broker = _json_get(b, "broker", w, int)
        if broker in dirs:
            _fail(w + ".broker", broker, "broker listed twice")
        brokers.append(broker)
        dirs[broker] = {}
        for j, d in enumerate(_json_get(b, "logDirs", w, list)):
            wd = f"{w}.logDirs[{j}]"
            path = _json_get(d, "logDir", wd, str)
            if path in dirs[broker]:
                _fail(wd + ".logDir", path, "log dir listed twice for this broker")
            dirs[broker][path] = _json_get(d, "error", wd, str, nullable=True)
            for k, p in enumerate(_json_get(d, "partitions", wd, list)):
                wp = f"{wd}.partitions[{k}]"
                name = _json_get(p, "partition", wp, str)
                topic, dash, num = name.rpartition("-")
                if not dash or not topic or not num.isdigit():
                    _fail(wp + ".partition", name, "expected '<topic>-<partition>'")
                size, lag = _json_get(p, "size", wp, int), _json_get(p, "offsetLag", wp, int)
                if size < 0:
                    _fail(wp + ".size", size, "expected a size >= 0")
                log = ReplicaLog(broker, path, topic, int(num), size, lag, _json_get(p, "isFuture", wp, bool), wp)
                key = (broker, topic, int(num), log.is_future)
                if key in seen:
                    _fail(wp + ".partition", name, f"a second {'future' if log.is_future else 'current'} log of this "
                                                   f"replica on broker {broker} (first at {seen[key]})")
                seen[key] = wp
                logs.append(log)
    return LogDirs(source, body, tuple(brokers), dirs, tuple(logs))


# ---------------------------------------------------------------------------------------------
# racks, configs, rates


@dataclass(frozen=True)
class Configs:
    """Broker-level configs (static: server.properties; dynamic: per broker or cluster default) and topic
    configs from kafka-configs; each value is (text, where)."""

    static: dict[str, tuple[str, str]] = field(default_factory=dict)
    dynamic: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)  # "default" or broker id
    topics: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)


def _content_lines(text: str) -> Iterable[tuple[int, str]]:
    for n, raw in enumerate(text.splitlines(), 1):
        s = raw.strip()
        if s and not s.startswith(("#", "!")):
            yield n, raw


def parse_racks(text: str, source: str = "racks") -> dict[int, tuple[str, str]]:
    """``ID=RACK``, ``ID: RACK`` or ``ID RACK`` per line (``broker.rack`` of each broker); # comments."""
    out: dict[int, tuple[str, str]] = {}
    for n, raw in _content_lines(text):
        m = re.fullmatch(r"\s*(\d+)\s*(?:[=:]\s*|\s+)(\S+)\s*", raw)
        if not m:
            _fail(f"{source}:{n} <line>", raw, "expected 'BROKER_ID=RACK'")
        b = int(m.group(1))
        if b in out:
            _fail(f"{source}:{n} broker", b, f"rack given twice (first at {out[b][1]})")
        out[b] = (m.group(2), f"{source}:{n}")
    return out


_DYNAMIC = re.compile(r"(Dynamic|All|Default) configs for (broker|topic|brokers) ?(\S*?)(?: in the cluster)? are:")
_ONE_LINE = re.compile(r"Configs for (brokers?|topics?) '([^']*)' are (.*)")


def parse_configs(text: str, source: str = "configs") -> Configs:
    """``server.properties`` (``name=value`` / ``name: value``) or ``kafka-configs --describe`` output
    (``Dynamic configs for broker 1 are:`` then indented ``name=value sensitive=.. synonyms={..}`` lines; the
    older one-line ``Configs for topic 't' are k=v,k=v``). ``--all`` output keeps only the entries whose
    first synonym is not a DEFAULT_CONFIG."""
    out = Configs()
    target: dict[str, tuple[str, str]] | None = None
    for n, raw in _content_lines(text):
        where = f"{source}:{n}"
        m = _DYNAMIC.fullmatch(raw.strip())
        if m:
            kind, entity, name = m.group(2), m.group(1), m.group(3)
            if kind == "topic":
                target = out.topics.setdefault(name, {})
            else:
                target = out.dynamic.setdefault("default" if entity == "Default" or not name else name, {})
            continue
        m = _ONE_LINE.fullmatch(raw.strip())
        if m:
            bucket = out.topics if m.group(1).startswith("topic") else out.dynamic
            entries = _topic_configs(m.group(3), where)
            bucket.setdefault(m.group(2) or "default", {}).update({k: (v, f"{where} {k}") for k, v in entries.items()})
            target = None
            continue
        if raw[:1] in " \t" and target is not None:
            entry = raw.strip()
            name, sep, rest = entry.partition("=")
            if not sep:
                _fail(f"{where} <line>", raw, "expected 'name=value sensitive=... synonyms={...}'")
            value = rest.split(" sensitive=")[0]
            syn = re.search(r"synonyms=\{(\w+):", rest)
            if syn and syn.group(1) == "DEFAULT_CONFIG":
                continue
            target[name.strip()] = (value, f"{where} {name.strip()}")
            continue
        if target is not None and raw[:1] not in " \t":
            target = None
        m = re.fullmatch(r"\s*([A-Za-z0-9._-]+)\s*(?:=|:)\s*(.*?)\s*", raw)
        if not m:
            _fail(f"{where} <line>", raw, "expected 'name=value' (server.properties) or kafka-configs --describe "
                                          "output")
        out.static[m.group(1)] = (m.group(2), f"{where} {m.group(1)}")
    return out


@dataclass(frozen=True)
class Rate:
    topic: str
    records_per_sec: float
    value_bytes: int | None
    acks: str | None
    where: str


def parse_rates(text: str, source: str = "rates") -> tuple[Rate, ...]:
    """CSV ``topic,records_per_sec[,value_bytes[,acks]]`` (a header line starting with ``topic`` is skipped)."""
    out: list[Rate] = []
    rows = csv.reader(io.StringIO(text))
    for n, row in enumerate(rows, 1):
        where = f"{source}:{n}"
        if not row or not "".join(row).strip() or row[0].strip().startswith("#"):
            continue
        cells = [c.strip() for c in row]
        if n == 1 and cells[0] == "topic":
            continue
        if not 2 <= len(cells) <= 4:
            _fail(f"{where} <line>", ",".join(row), "expected 'topic,records_per_sec[,value_bytes[,acks]]'")
        try:
            rate = float(cells[1])
        except ValueError:
            rate = -1.0
        if not rate > 0:
            _fail(f"{where} records_per_sec", cells[1], "expected a number > 0")
        vb = cells[2] if len(cells) > 2 and cells[2] else None
        if vb is not None and not vb.isdigit():
            _fail(f"{where} value_bytes", vb, "expected an integer")
        acks = cells[3] if len(cells) > 3 and cells[3] else None
        if acks is not None and acks not in ("0", "1", "-1", "all"):
            _fail(f"{where} acks", acks, "expected 0, 1, -1 or all")
        out.append(Rate(cells[0], rate, None if vb is None else int(vb), acks, where))
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# the scenario


def _typed(name: str, text: str, default: Any, where: str) -> Any:
    """A config's text as the type of its default (Kafka's ConfigDef parse)."""
    if isinstance(default, bool):
        if text.lower() not in ("true", "false"):
            _fail(where, text, "expected true or false")
        return text.lower() == "true"
    if isinstance(default, str):
        return text
    if not re.fullmatch(r"-?\d+", text):
        _fail(where, text, "expected an integer")
    return int(text)


def _config_default(name: str) -> Any:
    from sparkkafka.scenario.loader import _default_of

    return _default_of(name)


def _known(entries: Mapping[str, tuple[str, str]], names: Mapping[str, Any], skipped: set[str]) -> dict[str, Any]:
    out = {}
    for k, (text, where) in entries.items():
        if k in names:
            out[k] = _typed(k, text, _config_default(k), where)
        else:
            skipped.add(k)
    return out


def _dir_names(logs: LogDirs, describe: TopicsDescribe) -> tuple[str, ...]:
    """The cluster's log.dirs: every broker must list the same dirs (a scenario gives all brokers one list)."""
    first = None
    for i, b in enumerate(logs.brokers):
        names = tuple(sorted(logs.dirs[b]))
        if not names:
            _fail(f"{logs.source}:{logs.line} $.brokers[{i}].logDirs", [], "a broker with no log dir")
        if first is None:
            first = (b, names)
        elif names != first[1]:
            _fail(f"{logs.source}:{logs.line} $.brokers[{i}].logDirs", list(names),
                  f"broker {b}'s log dirs differ from broker {first[0]}'s {list(first[1])}: a scenario gives every "
                  "broker the same log.dirs")
    return first[1] if first else ("d0",)


@dataclass(frozen=True)
class ImportedCluster:
    """The scenario mapping (as the YAML holds it) and the configs left out as not modelled."""

    scenario: dict
    skipped_configs: tuple[str, ...] = ()


def build_scenario(describe: TopicsDescribe, log_dirs: LogDirs | None = None,
                   racks: Mapping[int, tuple[str, str]] | None = None, configs: Iterable[Configs] = (),
                   rates: Iterable[Rate] = (), *, name: str = "imported", seed: int = 0,
                   record_bytes: int | None = None, duration_ms: int = DEFAULT_DURATION_MS) -> dict:
    """The scenario mapping of an imported cluster (and the configs left out); raises ScenarioError on any
    inconsistency between the inputs. ``record_bytes``: the size of the records sizes are expanded to
    (``cluster.emulator.initial.record.bytes``; None keeps the emulator's default)."""
    racks = dict(racks or {})
    if log_dirs is not None:
        brokers = list(log_dirs.brokers)
    elif racks:
        brokers = sorted(racks)
    else:
        brokers = sorted({b for ps in describe.partitions.values() for p in ps for b in p.replicas})
    known = set(brokers)
    for b, (_, where) in racks.items():
        if b not in known:
            _fail(f"{where} broker", b, f"not a broker of the cluster {sorted(known)}")
    if racks and set(racks) != known:
        _fail("racks", sorted(known - set(racks)), "Not all brokers have rack information (these have none)")
    dirs = _dir_names(log_dirs, describe) if log_dirs is not None else ("d0",)

    skipped: set[str] = set()
    config: dict[str, Any] = {}
    events: list[dict] = []
    topic_cfg: dict[str, dict[str, Any]] = {}
    for c in configs:
        _check_log_dirs_config(c, dirs if log_dirs is not None else None)
        config.update(_known(c.static, BROKER_DEFAULTS, skipped))
        for entity, entries in c.dynamic.items():
            if entity != "default" and (not entity.isdigit() or int(entity) not in known):
                where = next(iter(entries.values()))[1] if entries else "configs"
                _fail(where, entity, f"configs of an unknown broker {entity!r} (brokers: {sorted(known)})")
            got = _known(entries, BROKER_DEFAULTS, skipped)
            if got:
                events.append({"at": 0, "set_config": {"entity": "brokers",
                                                       "name": entity if entity == "default" else int(entity),
                                                       "config": got}})
        for t, entries in c.topics.items():
            if t not in describe.topics:
                where = next(iter(entries.values()))[1] if entries else "configs"
                _fail(where, t, "configs of a topic the describe output does not list")
            topic_cfg.setdefault(t, {}).update(_known(entries, TOPIC_CONFIGS, skipped))

    logs_of: dict[tuple[str, int, int], dict[bool, ReplicaLog]] = {}
    offline: dict[int, list[str]] = {}
    if log_dirs is not None:
        for b in log_dirs.brokers:
            offline[b] = [d for d, err in log_dirs.dirs[b].items() if err is not None]
        for log in log_dirs.logs:
            ps = describe.partitions.get(log.topic)
            if ps is None or log.partition >= len(ps):
                _fail(log.where + ".partition", f"{log.topic}-{log.partition}",
                      "a log of a partition the describe output does not list")
            if log.broker not in ps[log.partition].replicas:
                _fail(log.where + ".partition", f"{log.topic}-{log.partition}",
                      f"broker {log.broker} holds a log of it but is not among its Replicas "
                      f"{list(ps[log.partition].replicas)} ({describe.source}:{ps[log.partition].line})")
            logs_of.setdefault((log.topic, log.partition, log.broker), {})[log.is_future] = log

    topics = []
    for t, h in describe.topics.items():
        cfg = {}
        for k, v in h.configs.items():
            if k in TOPIC_CONFIGS:
                cfg[k] = _typed(k, v, _config_default(k), describe.where(h.line, f"Configs.{k}"))
            else:
                skipped.add(k)
        cfg.update(topic_cfg.get(t, {}))
        assignment, state = {}, {}
        for p in describe.partitions[t]:
            for b in p.replicas:
                if b not in known:
                    _fail(describe.where(p.line, "Replicas"), ",".join(map(str, p.replicas)),
                          f"broker {b} is not a broker of the cluster {sorted(known)}")
            assignment[p.partition] = list(p.replicas)
            st: dict[str, Any] = {"leader": p.leader, "isr": list(p.isr)}
            if p.adding or p.removing:
                st["adding"], st["removing"] = list(p.adding), list(p.removing)
            if log_dirs is not None:
                st["logs"] = _replica_logs(p, t, logs_of, offline, describe)
            state[p.partition] = st
        spec: dict[str, Any] = {"name": t}
        if h.topic_id:
            spec["id"] = h.topic_id
        spec["assignment"] = assignment
        if cfg:
            spec["config"] = cfg
        spec["state"] = state
        topics.append(spec)

    for b in sorted(offline):
        events += [{"at": 0, "fail_log_dir": {"broker": b, "log_dir": d}} for d in offline[b]]
    for r in rates:
        if r.topic not in describe.topics:
            _fail(f"{r.where} topic", r.topic, "a rate for a topic the describe output does not list")
        prod: dict[str, Any] = {"topic": r.topic, "partition": "all", "rate_per_sec": r.records_per_sec,
                                "duration_ms": duration_ms}
        if r.value_bytes is not None:
            prod["value_bytes"] = r.value_bytes
        if r.acks is not None:
            prod["acks"] = r.acks if r.acks == "all" else int(r.acks)
        events.append({"at": 0, "produce": prod})

    cluster: dict[str, Any] = {"brokers": brokers}
    if racks:
        cluster["racks"] = {b: racks[b][0] for b in brokers}
    cluster["log_dirs"] = list(dirs)
    if config:
        cluster["config"] = config
    if record_bytes is not None:
        cluster["emulator"] = {"initial.record.bytes": record_bytes}
    out: dict[str, Any] = {"name": name, "seed": seed, "cluster": cluster, "topics": topics}
    if events:
        out["timeline"] = events
    out["run"] = {"until_ms": duration_ms}
    return ImportedCluster(out, tuple(sorted(skipped)))


def _check_log_dirs_config(c: Configs, dirs: tuple[str, ...] | None) -> None:
    """server.properties' ``log.dirs`` (else ``log.dir``) names the dirs kafka-log-dirs must report, no more."""
    key = "log.dirs" if "log.dirs" in c.static else "log.dir" if "log.dir" in c.static else None
    if key is None or dirs is None:
        return
    text, where = c.static[key]
    listed = [d.strip() for d in text.split(",") if d.strip()]
    missing = [d for d in listed if d not in dirs]
    if missing:
        _fail(where, text, f"log dir(s) {missing} are missing from the log-dirs output, which reports {list(dirs)}")
    extra = [d for d in dirs if d not in listed]
    if extra:
        _fail(where, text, f"the log-dirs output reports log dir(s) {extra} that {key} does not list")


def _replica_logs(p: PartitionLine, topic: str, logs_of: Mapping, offline: Mapping[int, list[str]],
                  describe: TopicsDescribe) -> dict[int, dict[str, Any]]:
    """broker -> {dir, bytes[, future: {dir, bytes}]} of one partition's replicas."""
    out: dict[int, dict[str, Any]] = {}
    for b in p.replicas:
        found = logs_of.get((topic, p.partition, b), {})
        cur, fut = found.get(False), found.get(True)
        if cur is None:
            if fut is not None:
                _fail(fut.where + ".isFuture", True, f"a future log of {topic}-{p.partition} on broker {b} without "
                                                     "its current log")
            if offline.get(b):  # its dir is offline: kafka-log-dirs cannot list it
                out[b] = {"dir": offline[b][0], "bytes": 0}
                continue
            _fail(describe.where(p.line, "Replicas"), b, f"replica {topic}-{p.partition} on broker {b} has no log in "
                                                        "the log-dirs output")
        entry: dict[str, Any] = {"dir": cur.log_dir, "bytes": cur.size}
        if fut is not None:
            if fut.log_dir == cur.log_dir:
                _fail(fut.where + ".partition", f"{topic}-{p.partition}", "a future log in the dir of its current log")
            entry["future"] = {"dir": fut.log_dir, "bytes": fut.size}
        out[b] = entry
    return out


def to_yaml(scenario: Mapping[str, Any], header: str = "", skipped: Iterable[str] = ()) -> str:
    """The scenario mapping as YAML: lists and per-partition states in flow style, one partition a line;
    `header` and the `skipped` configs become comments at the top."""
    data = dict(scenario)
    skipped = list(skipped)
    lines = [f"# {x}" for x in header.splitlines()]
    if skipped:
        lines.append("# configs not modelled by sparkkafka, left out: " + ", ".join(skipped))

    class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # libyaml's emitter when PyYAML has it
        pass

    def flow_map(d: yaml.SafeDumper, v: dict) -> yaml.Node:
        return d.represent_mapping("tag:yaml.org,2002:map", v, flow_style=True)

    class _Flow(dict):
        pass

    _Dumper.add_representer(_Flow, flow_map)
    topics = []
    for t in data.get("topics", []):
        t = dict(t)
        if "assignment" in t:
            t["assignment"] = _Flow(t["assignment"])
        if "state" in t:
            t["state"] = {p: _Flow(s) for p, s in t["state"].items()}
        topics.append(t)
    data["topics"] = topics
    if "timeline" in data:
        data["timeline"] = [_Flow(e) for e in data["timeline"]]
    body = yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=None, width=1 << 16)
    return "\n".join(lines + [body]) if lines else body


def import_cluster(topics_describe: str | Path, log_dirs: str | Path | None = None, *,
                   racks: str | Path | None = None, configs: Iterable[str | Path] = (),
                   rates: str | Path | None = None, name: str = "imported", seed: int = 0,
                   record_bytes: int | None = None, duration_ms: int = DEFAULT_DURATION_MS,
                   out: str | Path | None = None) -> dict:
    """Read the files, build the scenario mapping, check it loads (``parse_scenario``), and write it as
    YAML to ``out`` if given (``-``: standard output; nothing is written when any input is bad). Returns the
    mapping, which ``Cluster.from_scenario`` also takes."""
    from sparkkafka.scenario.loader import parse_scenario

    def read(path: str | Path, flag: str) -> tuple[str, str]:
        try:
            return Path(path).read_text(encoding="utf-8"), str(path)
        except (OSError, UnicodeDecodeError) as exc:
            _fail(flag, str(path), f"cannot read the file: {exc}")

    d = parse_topics_describe(*read(topics_describe, "--topics-describe"))
    ld = parse_log_dirs(*read(log_dirs, "--log-dirs")) if log_dirs is not None else None
    rk = parse_racks(*read(racks, "--racks")) if racks is not None else None
    cf = [parse_configs(*read(c, "--configs")) for c in configs]
    rt = parse_rates(*read(rates, "--rates")) if rates is not None else ()
    imported = build_scenario(d, ld, rk, cf, rt, name=name, seed=seed, record_bytes=record_bytes,
                              duration_ms=duration_ms)
    sc = imported.scenario
    if out is None:  # the mapping is the result: no YAML (~80 % of importing 100,000 partitions)
        parse_scenario(sc, name=name)  # it loads
        return sc
    text = to_yaml(sc, header=f"Imported by `sparkkafka import` from {topics_describe}"
                              + (f" and {log_dirs}" if log_dirs else ""), skipped=imported.skipped_configs)
    parse_scenario(yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)), name=name)  # it loads
    if out == "-":
        sys.stdout.write(text)
    elif out is not None:
        write_scenario(text, out)
    return sc


def write_scenario(text: str, out: str | Path) -> None:
    """Write the YAML atomically (a temporary file renamed into place)."""
    p = Path(out)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(p)
