"""``kafka-reassign-partitions.sh`` of Kafka 2.8 (``--bootstrap-server`` mode): JSON in and out, printed text.

Source: the Scala ``kafka.admin.ReassignPartitionsCommand`` of 2.8 (the KIP-455 rewrite of 2.6, still Scala up
to 3.6; the Java port of 3.7+ changed several strings) plus ``kafka.utils.json`` for the parse errors.
Operators script and grep this tool's output, so sparkkafka reproduces it byte for byte; the controller/CLI
layer queries the emulated cluster and hands this module plain values. No Spark, no Delta, no I/O.

Where 2.8 differs from the 3.7+ tool's text:

* ``--verify`` prints ``Reassignment of partition foo-0 is complete.`` (3.7+: ``is completed.``).
* Log-dir moves started by ``--execute``/``--cancel`` print one line per batch, ``Successfully started log
  directory move[s] for: foo-0-1,...`` (TopicPartitionReplica ``topic-partition-broker``, sorted by broker,
  topic, partition).
* ``--cancel`` cancels every listed partition with adding *or* removing replicas and prints
  ``None of the specified partition moves are active.`` with ``println``.
* The broker and topic lists of the ``Clearing ... throttles`` lines are Scala 2.13 immutable ``Set``s, not
  Java ``HashSet``s: up to four elements keep insertion order (live brokers first, then the plan's brokers;
  topics in plan order); from five on they follow the CHAMP hash trie (``scala_set_order``), e.g. brokers 0..5
  print ``0,5,1,2,3,4``.
* Error texts (``Partition reassignment list cannot be empty``, ``Unknown broker id 7``, ...) are the Scala
  ones; a failing command prints ``Error: <message>`` plus a stack trace (``ReassignError.tool_output`` gives
  the first line), or just the message for the tool's "terse" failures.

Scala/Java hash-order replays (``scala_set_order``, ``_java_hashmap_order``) only matter for the order of
names inside messages and for which of several bad entries an error names.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from sparkkafka.admin import throttle_configs, throttled_brokers
from sparkkafka.errors import ReassignError

from ..protocol.java_hash import spread, string_hash

__all__ = [
    "ANY_LOG_DIR",
    "CANNOT_EXECUTE_BECAUSE_OF_EXISTING",
    "DirMoveStatus",
    "LOG_DIR_DONE_STATES",
    "ReassignError",
    "YOU_MUST_RUN_VERIFY_PERIODICALLY",
    "cancel_errors_text",
    "cancel_text",
    "execute_text",
    "existing_refusal_text",
    "format_assignment_json",
    "generate",
    "list_text",
    "log_dir_move_state",
    "log_dir_moves_line",
    "log_dir_timeout_text",
    "parse_broker_list",
    "parse_reassignment_json",
    "parse_topics_to_move_json",
    "reassign_errors_text",
    "scala_set_order",
    "throttle_clearing_brokers",
    "throttle_configs",
    "throttled_brokers",
    "verify_text",
]

TP = tuple[str, int]
TPR = tuple[str, int, int]  # TopicPartitionReplica: topic, partition, broker

ANY_LOG_DIR = "any"

CANNOT_EXECUTE_BECAUSE_OF_EXISTING = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to override "
    "this and create a new partition assignment in addition to the existing one. The --additional flag "
    "can also be used to change the throttle by resubmitting the current reassignment."
)
YOU_MUST_RUN_VERIFY_PERIODICALLY = (
    "Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle "
    "is removed."
)
_NOT_ALL_RACKS = (
    "Not all brokers have rack information. Add --disable-rack-aware in command line to make replica "
    "assignment without rack information."
)
_UNKNOWN_TOPIC_EXCEPTION = "org.apache.kafka.common.errors.UnknownTopicOrPartitionException"

# Log-dir move states (ReassignPartitionsCommand.LogDirMoveState subclasses).
LOG_DIR_DONE_STATES = frozenset({"completed", "not_moving"})
_LOG_DIR_STATES = frozenset(
    {"completed", "in_progress", "moving_elsewhere", "not_moving", "missing_replica", "missing_log_dir"}
)


class DirMoveStatus(NamedTuple):
    """One replica's log-dir move as ``--verify`` reports it; ``state`` from ``log_dir_move_state``."""

    topic: str
    partition: int
    broker: int
    state: str
    current_dir: str | None = None
    target_dir: str | None = None
    future_dir: str | None = None


# --- Scala 2.13 / Java collection orders ------------------------------------------------------------------

_M32 = 0xFFFFFFFF


def _scala_improve(h: int) -> int:
    """``scala.collection.Hashing.improve``, the hash spreader of the 2.13 immutable CHAMP HashSet/HashMap."""
    h &= _M32
    h = (h + (~(h << 9) & _M32)) & _M32
    h ^= h >> 14
    h = (h + (h << 4)) & _M32
    return h ^ (h >> 10)


def _hash_code(value: Any) -> int:
    """``##`` as the JVM computes it, unsigned 32 bits: Int, String, TopicPartition ``(topic, partition)``."""
    if isinstance(value, bool):
        raise TypeError("booleans have no Kafka hash here")
    if isinstance(value, int):
        return value & _M32
    if isinstance(value, str):
        return string_hash(value)
    if isinstance(value, tuple) and len(value) == 2:
        topic, partition = value
        return (31 * (31 + partition) + string_hash(topic)) & _M32
    raise TypeError(f"no JVM hash code for {value!r}")


def _champ_order(items: Sequence[Any]) -> list[Any]:
    """Iteration order of a Scala 2.13 immutable ``HashSet``/``HashMap`` holding ``items`` (distinct).

    CHAMP trie over ``improve(##)``, 5 bits per level from the low end: a node yields its own elements (one
    per 5-bit slot) in slot order, then its sub-nodes (slots shared by several elements) in slot order, depth
    first. Equal full hashes end in a collision node in insertion order.
    """

    def walk(entries: list[tuple[Any, int]], shift: int) -> list[Any]:
        if shift >= 32:
            return [item for item, _ in entries]
        slots: dict[int, list[tuple[Any, int]]] = {}
        for entry in entries:
            slots.setdefault((entry[1] >> shift) & 31, []).append(entry)
        data = [group[0][0] for _, group in sorted(slots.items()) if len(group) == 1]
        for _, group in sorted(slots.items()):
            if len(group) > 1:
                data.extend(walk(group, shift + 5))
        return data

    return walk([(item, _scala_improve(_hash_code(item))) for item in items], 0)


def scala_set_order(items: Iterable[Any]) -> list[Any]:
    """Iteration order of a Scala 2.13 immutable ``Set`` (or ``Map``'s keys) built from ``items`` in order.

    ``Set1``..``Set4`` keep insertion order; from the fifth element on it is a CHAMP ``HashSet``.
    """
    distinct = list(dict.fromkeys(items))
    return distinct if len(distinct) <= 4 else _champ_order(distinct)


def _table_size_for(capacity: int) -> int:
    size = 1
    while size < capacity:
        size <<= 1
    return size


def _java_hashmap_order(keys: Sequence[Any], capacity: int) -> list[Any]:
    """Iteration order of a ``java.util.HashMap`` with ``capacity`` slots after putting ``keys`` in order."""
    return sorted(dict.fromkeys(keys), key=lambda k: spread(_hash_code(k)) & (capacity - 1))


def _java_default_hashmap_order(keys: Sequence[Any]) -> list[Any]:
    """A default ``new HashMap<>()`` (16 slots, doubled once the size passes 3/4 of them)."""
    distinct = list(dict.fromkeys(keys))
    capacity = 16
    while len(distinct) > capacity * 3 // 4:
        capacity <<= 1
    return _java_hashmap_order(distinct, capacity)


def _describe_topics_order(topics: Sequence[str]) -> list[str]:
    """Order of ``describeTopics(topics).values()`` (2.8): a ``new HashMap<>(topicFutures)`` copy, pre-sized
    to ``tableSizeFor((int)(n / 0.75f + 1))``; ties in a slot keep the order the topics were passed in."""
    distinct = list(dict.fromkeys(topics))
    return _java_hashmap_order(distinct, _table_size_for(int(len(distinct) / 0.75 + 1.0)))


# --- text helpers -------------------------------------------------------------------------------------------


def _tp(tp: TP) -> str:
    return f"{tp[0]}-{tp[1]}"


def _tpr(tpr: TPR) -> str:
    return f"{tpr[0]}-{tpr[1]}-{tpr[2]}"


def _csv(values: Iterable[Any]) -> str:
    return ",".join(str(v) for v in values)


def _plural(n: int) -> str:
    return "" if n == 1 else "s"


def _sorted_tps(tps: Iterable[TP]) -> list[TP]:
    return sorted(dict.fromkeys((t, int(p)) for t, p in tps))


def _sorted_tprs(tprs: Iterable[TPR]) -> list[TPR]:
    return sorted(dict.fromkeys((t, int(p), int(b)) for t, p, b in tprs), key=lambda r: (r[2], r[0], r[1]))


def _scala_list(values: Sequence[Any]) -> str:
    """``toString`` of the ``List`` Kafka's JSON decoder builds: ``List(1, 2)`` / ``List(any, d1)``."""
    return "List(" + ", ".join(str(v) for v in values) + ")"


# --- JSON parsing (kafka.utils.json decoding rules and messages) --------------------------------------------


def _node(value: Any) -> str:
    """Jackson ``JsonNode.toString``: compact JSON."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -(2**31) <= value < 2**31


def _as_int(value: Any, field: str) -> int:
    if not _is_int(value):
        raise ReassignError(field, value, f"Expected `Int` value, received {_node(value)}")
    return value


def _as_str(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise ReassignError(field, value, f"Expected `String` value, received {_node(value)}")
    return value


def _as_array(value: Any, field: str) -> list[Any]:
    if not isinstance(value, list):
        raise ReassignError(field, value, f"Expected JSON array, received {_node(value)}")
    return value


def _as_object(value: Any, field: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ReassignError(field, value, f"Expected JSON object, received {_node(value)}")
    return value


def _field(obj: dict[str, Any], name: str, field: str) -> Any:
    if name not in obj:
        raise ReassignError(field, None, f"No such field exists: `{name}`")
    return obj[name]


def _load_json(text: str, field: str, *, lenient: bool) -> dict[str, Any]:
    """Parse the top-level JSON object the way ``Json.tryParseFull`` (lenient=False) / ``parseFull`` does.

    Empty input is Jackson's MissingNode, hence ``Expected JSON object, received `` (nothing after the space).
    A syntax error: ``parseFull`` (topics JSON) gives Kafka's ``The input string is not a valid JSON``;
    ``tryParseFull`` (plan JSON) passes Jackson's own message on, which we do not reproduce.
    """
    if not text.strip():
        raise ReassignError(field, text, "Expected JSON object, received ")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        message = "The input string is not a valid JSON" if lenient else f"Invalid JSON: {exc}"
        raise ReassignError(field, text, message) from None
    return _as_object(value, field)


def _check_version(obj: dict[str, Any], field: str) -> None:
    version = _as_int(obj["version"], f"{field}.version") if "version" in obj else 1
    if version != 1:
        raise ReassignError(f"{field}.version", version, f"Not supported version field value {version}")


def parse_topics_to_move_json(text: str) -> list[str]:
    """Topics of a ``--topics-to-move-json-file`` (``{"topics":[{"topic":"foo"}],"version":1}``), in order.

    ``ReassignPartitionsCommand.parseTopicsData``: no ``topics`` key means no topics; duplicates are kept (the
    ``--generate`` check reports them).
    """
    obj = _load_json(text, "topics_json", lenient=True)
    _check_version(obj, "topics_json")
    if "topics" not in obj:
        return []
    topics = []
    for i, entry in enumerate(_as_array(obj["topics"], "topics_json.topics")):
        item = _as_object(entry, f"topics_json.topics[{i}]")
        topics.append(
            _as_str(_field(item, "topic", f"topics_json.topics[{i}].topic"), f"topics_json.topics[{i}].topic")
        )
    return topics


def _duplicates(values: Sequence[Any]) -> list[Any]:
    """``CoreUtils.duplicates``: values seen more than once, in the order of groupBy's immutable HashMap."""
    seen: dict[Any, int] = {}
    for value in values:
        seen[value] = seen.get(value, 0) + 1
    return _champ_order([v for v, n in seen.items() if n > 1])


def parse_reassignment_json(
    text: str,
    brokers: Collection[int] | None = None,
    log_dirs: Mapping[int, Sequence[str]] | None = None,
    *,
    topics: Collection[str] | None = None,
    validate: bool = True,
) -> list[dict[str, Any]]:
    """Entries ``{"topic", "partition", "replicas", "log_dirs"}`` of a ``--reassignment-json-file``, in order.

    Checks, in the order Kafka makes them (the first failure raises ``ReassignError`` with Kafka's text):

    1. parsing (``parsePartitionReassignmentData``): JSON, ``version`` (``Not supported version field value
       2``), field types, and per entry ``Size of replicas list List(1, 2) is different from size of log dirs
       list List(any) for partition foo-0``. ``--verify`` and ``--cancel`` stop here (``validate=False``).
    2. ``parseExecuteAssignmentArgs``: ``Partition reassignment list cannot be empty``, ``Partition replica
       list cannot be empty``, ``Partition reassignment contains duplicate topic partitions: foo-0``,
       ``Partition replica lists may not contain duplicate entries: foo-0 contains multiple entries for 1``.
    3. with ``brokers`` (the live brokers ``describeCluster`` returns): ``Unknown broker id 7``.
    4. with ``topics`` (existing topic names): ``Topic foo not found.`` (an UnknownTopicOrPartitionException).
    5. with ``log_dirs`` (broker -> dir names): a dir the broker does not have. Kafka only finds this out
       after it has started the partition moves, when AlterReplicaLogDirs fails: ``Failed to alter dir for
       foo-0-1``.

    The refusal for an ongoing reassignment (``existing_refusal_text``) comes between steps 2 and 3 in Kafka.
    """
    obj = _load_json(text, "reassignment_json", lenient=False)
    _check_version(obj, "reassignment_json")
    raw = _as_array(obj["partitions"], "partitions") if "partitions" in obj else []
    entries: list[dict[str, Any]] = []
    for i, item in enumerate(raw):
        where = f"partitions[{i}]"
        fields = _as_object(item, where)
        topic = _as_str(_field(fields, "topic", f"{where}.topic"), f"{where}.topic")
        partition = _as_int(_field(fields, "partition", f"{where}.partition"), f"{where}.partition")
        replicas_raw = _as_array(_field(fields, "replicas", f"{where}.replicas"), f"{where}.replicas")
        replicas = [_as_int(r, f"{where}.replicas[{j}]") for j, r in enumerate(replicas_raw)]
        if "log_dirs" in fields:
            dirs_raw = _as_array(fields["log_dirs"], f"{where}.log_dirs")
            dirs = [_as_str(d, f"{where}.log_dirs[{j}]") for j, d in enumerate(dirs_raw)]
        else:
            dirs = [ANY_LOG_DIR] * len(replicas)
        if len(replicas) != len(dirs):
            raise ReassignError(
                f"{where}.log_dirs",
                dirs,
                f"Size of replicas list {_scala_list(replicas)} is different from size of log dirs list "
                f"{_scala_list(dirs)} for partition {topic}-{partition}",
            )
        entries.append({"topic": topic, "partition": partition, "replicas": replicas, "log_dirs": dirs})
    if not validate:
        return entries

    if not entries:
        raise ReassignError("partitions", [], "Partition reassignment list cannot be empty")
    for i, entry in enumerate(entries):
        if not entry["replicas"]:
            raise ReassignError(f"partitions[{i}].replicas", [], "Partition replica list cannot be empty")
    tps = [(e["topic"], e["partition"]) for e in entries]
    duplicate_tps = _duplicates(tps)
    if duplicate_tps:
        first = tps.index(duplicate_tps[0])
        raise ReassignError(
            f"partitions[{first}]",
            _tp(duplicate_tps[0]),
            "Partition reassignment contains duplicate topic partitions: "
            + ",".join(_tp(t) for t in duplicate_tps),
        )
    with_dups = [(i, e, _duplicates(e["replicas"])) for i, e in enumerate(entries)]
    with_dups = [(i, e, d) for i, e, d in with_dups if d]
    if with_dups:
        detail = ". ".join(
            f"{e['topic']}-{e['partition']} contains multiple entries for {_csv(d)}" for _, e, d in with_dups
        )
        i, e, _ = with_dups[0]
        raise ReassignError(
            f"partitions[{i}].replicas",
            e["replicas"],
            f"Partition replica lists may not contain duplicate entries: {detail}",
        )

    if brokers is not None:
        live = set(brokers)
        # verifyBrokerIds: proposedParts.values.flatten.toSet.find(unknown), proposedParts an immutable Map.
        by_tp = {tp: e["replicas"] for tp, e in zip(tps, entries, strict=True)}
        flat = [b for tp in scala_set_order(tps) for b in by_tp[tp]]
        unknown = [b for b in scala_set_order(flat) if b not in live]
        if unknown:
            bad = unknown[0]
            i = next(i for i, e in enumerate(entries) if bad in e["replicas"])
            j = entries[i]["replicas"].index(bad)
            raise ReassignError(f"partitions[{i}].replicas[{j}]", bad, f"Unknown broker id {bad}")

    if topics is not None:
        known = set(topics)
        topic_order = scala_set_order(t for t, _ in scala_set_order(tps))
        missing = [t for t in _describe_topics_order(topic_order) if t not in known]
        if missing:
            i = next(i for i, e in enumerate(entries) if e["topic"] == missing[0])
            raise ReassignError(
                f"partitions[{i}].topic",
                missing[0],
                f"Topic {missing[0]} not found.",
                exception=_UNKNOWN_TOPIC_EXCEPTION,
            )

    if log_dirs is not None:
        bad_moves = []
        for i, e in enumerate(entries):
            for j, (broker, d) in enumerate(zip(e["replicas"], e["log_dirs"], strict=True)):
                if d != ANY_LOG_DIR and d not in log_dirs.get(broker, ()):
                    bad_moves.append(((e["topic"], e["partition"], broker), i, j, d))
        if bad_moves:
            tpr, i, j, d = min(bad_moves, key=lambda m: (m[0][2], m[0][0], m[0][1]))
            raise ReassignError(f"partitions[{i}].log_dirs[{j}]", d, f"Failed to alter dir for {_tpr(tpr)}")
    return entries


def parse_broker_list(text: str) -> list[int]:
    """``--broker-list "0,1,2"`` split on commas, each parsed by ``Integer.parseInt`` (Scala ``toInt``)."""
    out = []
    for part in text.split(","):
        if not re.fullmatch(r"[+-]?[0-9]+", part) or not -(2**31) <= int(part) < 2**31:
            raise ReassignError("broker_list", text, f'For input string: "{part}"')
        out.append(int(part))
    return out


# --- JSON output --------------------------------------------------------------------------------------------


def format_assignment_json(
    assignment: Mapping[TP, Sequence[int]],
    log_dirs: Mapping[TP, Sequence[str]] | None = None,
) -> str:
    """``formatAsReassignmentJson``: Jackson's compact one-line JSON, partitions sorted by (topic, partition).

    ``log_dirs`` maps a partition to one dir per replica; missing partitions get ``"any"`` for every replica.
    """
    partitions = []
    for tp in _sorted_tps(assignment):
        replicas = [int(r) for r in assignment[tp]]
        dirs = list((log_dirs or {}).get(tp) or [ANY_LOG_DIR] * len(replicas))
        partitions.append({"topic": tp[0], "partition": tp[1], "replicas": replicas, "log_dirs": dirs})
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"), ensure_ascii=False)


# --- --generate ---------------------------------------------------------------------------------------------


def generate(
    current: Mapping[TP, Sequence[int]],
    topics: Sequence[str],
    broker_list: Sequence[int],
    racks: Mapping[int, str] | None,
    seed: int,
    disable_rack_aware: bool = False,
    *,
    live_brokers: Collection[int] | None = None,
) -> tuple[str, dict[TP, list[int]]]:
    """``--generate``: (printed text, proposed assignment).

    ``current`` is the cluster's assignment (other topics are ignored), ``topics`` the topics-to-move list,
    ``broker_list`` the ``--broker-list`` ids. As in 2.8's ``getBrokerMetadata``, ids that are not live
    brokers (``live_brokers``; default: all accepted) are silently dropped. Each topic gets a fresh
    ``AdminUtils.assignReplicasToBrokers`` layout with its partition count and RF (the replica count of its
    lowest partition; Kafka takes the first partition of a hash map, the same whenever a topic's RF is
    uniform). Kafka draws the start index and shift of every topic from one ``Random``, topics in the order of
    an immutable HashMap keyed by name; we replay that order with ``random.Random(seed)``, so for one topic
    the layout equals ``assign_replicas_to_brokers(..., seed=seed)``.

    Errors: ``Broker list contains duplicate entries: 1``, ``List of topics to reassign contains duplicate
    entries: foo``, ``Topic foo not found.``, the rack-awareness message, and AdminUtils' replication-factor
    check.
    """
    from sparkkafka.controller.placement import AdminOperationError, assign_replicas_to_brokers

    dup_brokers = _duplicates(list(broker_list))
    if dup_brokers:
        raise ReassignError(
            "broker_list", list(broker_list), f"Broker list contains duplicate entries: {_csv(dup_brokers)}"
        )
    dup_topics = _duplicates(list(topics))
    if dup_topics:
        raise ReassignError(
            "topics",
            list(topics),
            f"List of topics to reassign contains duplicate entries: {_csv(dup_topics)}",
        )
    existing = {t for t, _ in current}
    missing = [t for t in _describe_topics_order(scala_set_order(topics)) if t not in existing]
    if missing:
        raise ReassignError(
            "topics", missing[0], f"Topic {missing[0]} not found.", exception=_UNKNOWN_TOPIC_EXCEPTION
        )
    wanted = set(topics)
    current_sel = {(t, int(p)): [int(r) for r in reps] for (t, p), reps in current.items() if t in wanted}

    live = set(live_brokers) if live_brokers is not None else set(broker_list)
    chosen = sorted(b for b in set(broker_list) if b in live)
    rack_of: dict[int, str] = {}
    if not disable_rack_aware and racks:
        rack_of = {b: racks[b] for b in chosen if racks.get(b) is not None}
        if rack_of and len(rack_of) != len(chosen):
            raise ReassignError("racks", dict(racks), _NOT_ALL_RACKS)

    by_topic: dict[str, list[int]] = {}
    for t, p in current_sel:
        by_topic.setdefault(t, []).append(p)
    rng = random.Random(seed)
    proposed: dict[TP, list[int]] = {}
    for topic in _champ_order(list(by_topic)):
        parts = sorted(by_topic[topic])
        rf = len(current_sel[(topic, parts[0])])
        if rf > len(chosen):
            raise ReassignError(
                "broker_list",
                chosen,
                f"Replication factor: {rf} larger than available brokers: {len(chosen)}.",
            )
        start = rng.randrange(len(chosen))
        shift = rng.randrange(len(chosen))
        try:
            layout = assign_replicas_to_brokers(
                chosen, len(parts), rf, rack_of or None, fixed_start_index=start, start_shift=shift
            )
        except (AdminOperationError, ValueError) as exc:  # placement's Kafka errors
            raise ReassignError("broker_list", chosen, str(exc)) from None
        for partition, replicas in layout.items():
            proposed[(topic, partition)] = list(replicas)

    text = (
        f"Current partition replica assignment\n{format_assignment_json(current_sel)}\n\n"
        f"Proposed partition reassignment configuration\n{format_assignment_json(proposed)}\n"
    )
    return text, proposed


# --- throttles ----------------------------------------------------------------------------------------------


# --- --execute ----------------------------------------------------------------------------------------------


def existing_refusal_text() -> str:
    """``--execute`` without ``--additional`` while any reassignment is running (terse failure, exit 1)."""
    return CANNOT_EXECUTE_BECAUSE_OF_EXISTING + "\n"


def log_dir_moves_line(replicas: Iterable[TPR]) -> str:
    """One ``executeMoves`` batch: ``Successfully started log directory move[s] for: foo-0-1,...``."""
    ordered = _sorted_tprs(replicas)
    if not ordered:
        return ""
    names = ",".join(map(_tpr, ordered))
    return f"Successfully started log directory move{_plural(len(ordered))} for: {names}\n"


def log_dir_timeout_text(pending: Iterable[TPR]) -> str:
    """The terse failure when some log-dir moves could not start within ``--timeout``."""
    ordered = _sorted_tprs(pending)
    return (
        f"Timed out before log directory move{_plural(len(ordered))} could be started for: "
        f"{','.join(map(_tpr, ordered))}\n"
    )


def reassign_errors_text(errors: Mapping[TP, str]) -> str:
    """Terse failure when AlterPartitionReassignments rejects partitions: ``foo-9: <error message>`` lines."""
    lines = [f"{_tp(tp)}: {errors[tp]}" for tp in _sorted_tps(errors)]
    return "Error reassigning partition(s):\n" + "\n".join(lines) + "\n"


def execute_text(
    current: Mapping[TP, Sequence[int]],
    started: Sequence[TP],
    throttle: int = -1,
    log_dirs_throttle: int = -1,
    log_dir_moves: Sequence[TPR] = (),
    *,
    log_dir_move_batches: Sequence[Sequence[TPR]] | None = None,
) -> str:
    """What a successful 2.8 ``--execute`` prints.

    ``current``: the current assignment (only the partitions in ``started`` are printed, as the rollback
    JSON); ``started``: the plan's partitions; ``throttle`` / ``log_dirs_throttle``: ``--throttle`` and
    ``--replica-alter-log-dirs-throttle`` (negative = not given); ``log_dir_moves``: replicas ``(topic,
    partition, broker)`` whose dir moves started, printed as one line. If the moves started over several 100
    ms retries, pass ``log_dir_move_batches`` instead: one line per batch.
    """
    planned = {(t, int(p)) for t, p in started}
    rollback = {tp: reps for tp, reps in current.items() if (tp[0], int(tp[1])) in planned}
    out = [
        "Current partition replica assignment\n\n"
        f"{format_assignment_json(rollback)}\n\n"
        "Save this to use as the --reassignment-json-file option during rollback\n"
    ]
    if throttle >= 0 or log_dirs_throttle >= 0:
        out.append(YOU_MUST_RUN_VERIFY_PERIODICALLY + "\n")
        if throttle >= 0:
            out.append(f"The inter-broker throttle limit was set to {throttle} B/s\n")
        if log_dirs_throttle >= 0:
            out.append(f"The replica-alter-dir throttle limit was set to {log_dirs_throttle} B/s\n")
    ordered = _sorted_tps(planned)
    out.append(
        f"Successfully started partition reassignment{_plural(len(ordered))} for "
        f"{','.join(map(_tp, ordered))}\n"
    )
    batches = log_dir_move_batches if log_dir_move_batches is not None else [log_dir_moves]
    out.extend(log_dir_moves_line(batch) for batch in batches)
    return "".join(out)


# --- --verify -----------------------------------------------------------------------------------------------


def log_dir_move_state(found: bool, current_dir: str | None, future_dir: str | None, target_dir: str) -> str:
    """``findLogDirMoveStates`` for one replica, from DescribeReplicaLogDirs.

    ``found``: the broker reported the replica at all; ``current_dir`` None: reported without a live dir.
    Returns ``missing_replica`` / ``missing_log_dir`` / ``completed`` / ``not_moving`` (cancelled: no future
    dir, not in the target) / ``in_progress`` (future dir = target) / ``moving_elsewhere``.
    """
    if not found:
        return "missing_replica"
    if current_dir is None:
        return "missing_log_dir"
    if future_dir is None:
        return "completed" if current_dir == target_dir else "not_moving"
    return "in_progress" if future_dir == target_dir else "moving_elsewhere"


def _dir_line(status: DirMoveStatus) -> str:
    tpr = (status.topic, status.partition, status.broker)
    where = f"Partition {status.topic}-{status.partition}"
    match status.state:
        case "missing_log_dir":
            return (
                f"{where} is not found in any live log dir on broker {status.broker}. "
                "There is likely an offline log directory on the broker."
            )
        case "missing_replica":
            return f"{where} cannot be found in any live log directory on broker {status.broker}."
        case "in_progress":
            return f"Reassignment of replica {_tpr(tpr)} is still in progress."
        case "moving_elsewhere":
            return (
                f"{where} on broker {status.broker} is being moved to log dir {status.future_dir} "
                f"instead of {status.target_dir}."
            )
        case "not_moving":
            return (
                f"{where} on broker {status.broker} is not being moved from log dir {status.current_dir} "
                f"to {status.target_dir}."
            )
        case "completed":
            return f"Reassignment of replica {_tpr(tpr)} completed successfully."
    raise ReassignError(
        "dir_status.state", status.state, f"unknown log-dir move state (one of {sorted(_LOG_DIR_STATES)})"
    )


def throttle_clearing_brokers(
    live_brokers: Iterable[int], plan_replicas: Iterable[Sequence[int]]
) -> list[int]:
    """The insertion sequence behind ``Clearing broker-level throttles on ...``: the live brokers in
    ``describeCluster`` order (a ``HashMap<Integer, Node>``), then the plan's replicas in plan order.
    Pass the result as ``cleared_brokers``; ``verify_text``/``cancel_text`` apply the Scala Set order."""
    live = _java_default_hashmap_order(sorted(set(live_brokers)))
    return live + [b for replicas in plan_replicas for b in replicas]


def _clearing_lines(cleared_brokers: Sequence[int] | None, cleared_topics: Sequence[str] | None) -> str:
    out = ""
    if cleared_brokers is not None:
        brokers = scala_set_order(int(b) for b in cleared_brokers)
        out += f"Clearing broker-level throttles on broker{_plural(len(brokers))} {_csv(brokers)}\n"
    if cleared_topics is not None:
        topics = scala_set_order(cleared_topics)
        out += f"Clearing topic-level throttles on topic{_plural(len(topics))} {','.join(topics)}\n"
    return out


def verify_text(
    partition_status: Sequence[tuple[TP, str, Sequence[int], Sequence[int]]],
    dir_status: Sequence[DirMoveStatus | tuple[Any, ...]],
    cleared_brokers: Sequence[int] | None,
    cleared_topics: Sequence[str] | None,
) -> str:
    """What 2.8 ``--verify`` prints.

    ``partition_status``: ``(tp, state, current_replicas, target_replicas)`` per plan partition, state
    ``complete`` / ``in_progress`` / ``mismatch`` (no reassignment running, replicas differ from the target;
    an unknown partition has current ``[]``); lines come sorted by (topic, partition), a repeated partition
    counts once (the last wins). ``dir_status``: ``DirMoveStatus`` per replica with an explicit log dir,
    sorted by (broker, topic, partition); with none, Kafka prints an empty line. ``cleared_brokers`` /
    ``cleared_topics``: None unless throttles get cleared (no reassignment running anywhere, no dir move of
    the plan unfinished, no ``--preserve-throttles``); otherwise ``throttle_clearing_brokers(...)`` and the
    plan's topics in plan order.
    """
    states: dict[TP, tuple[str, Sequence[int], Sequence[int]]] = {}
    for tp, state, cur, target in partition_status:
        states[(tp[0], int(tp[1]))] = (state, cur, target)
    lines = ["Status of partition reassignment:"]
    for tp in sorted(states):
        state, cur, target = states[tp]
        if state == "complete":
            lines.append(f"Reassignment of partition {_tp(tp)} is complete.")
        elif state == "in_progress":
            lines.append(f"Reassignment of partition {_tp(tp)} is still in progress.")
        elif state == "mismatch":
            lines.append(
                f"There is no active reassignment of partition {_tp(tp)}, but replica set is "
                f"{_csv(cur)} rather than {_csv(target)}."
            )
        else:
            raise ReassignError("partition_status.state", state, "expected complete, in_progress or mismatch")
    moves = {}
    for status in dir_status:
        s = DirMoveStatus(*status)
        moves[(s.topic, int(s.partition), int(s.broker))] = s
    dir_lines = [_dir_line(moves[tpr]) for tpr in _sorted_tprs(moves)]
    return (
        "\n".join(lines)
        + "\n"
        + "\n".join(dir_lines)
        + "\n"
        + _clearing_lines(cleared_brokers, cleared_topics)
    )


# --- --cancel and --list ------------------------------------------------------------------------------------


def cancel_text(
    cancelled: Sequence[TP],
    dir_moves_cancelled: Sequence[TPR],
    cleared_brokers: Sequence[int] | None = None,
    cleared_topics: Sequence[str] | None = None,
) -> str:
    """What 2.8 ``--cancel`` prints.

    ``cancelled``: plan partitions that had adding or removing replicas (all were cancelled);
    ``dir_moves_cancelled``: plan replicas whose active dir move was re-targeted to their current dir (one
    ``executeMoves`` batch); ``cleared_*`` as for ``verify_text``, None with ``--preserve-throttles`` (cancel
    clears otherwise, whatever else is running).
    """
    parts = _sorted_tps(cancelled)
    if parts:
        out = (
            f"Successfully cancelled partition reassignment{_plural(len(parts))} for: "
            f"{','.join(map(_tp, parts))}\n"
        )
    else:
        out = "None of the specified partition reassignments are active.\n"
    moves = log_dir_moves_line(dir_moves_cancelled)
    out += moves or "None of the specified partition moves are active.\n"
    return out + _clearing_lines(cleared_brokers, cleared_topics)


def cancel_errors_text(errors: Mapping[TP, str]) -> str:
    """The terse failure when cancelling some partitions failed."""
    parts = _sorted_tps(errors)
    lines = [f"{_tp(tp)}: {errors[tp]}" for tp in parts]
    return f"Error cancelling partition reassignment{_plural(len(parts))} for:\n" + "\n".join(lines) + "\n"


def list_text(reassignments: Mapping[TP, tuple[Sequence[int], Sequence[int], Sequence[int]]]) -> str:
    """``--list``: ``foo-1: replicas: 1,2,3. adding: 4. removing: 1.`` per moving partition, sorted; the
    ``adding``/``removing`` parts only when non-empty."""
    lines = []
    for tp in _sorted_tps(reassignments):
        replicas, adding, removing = reassignments[tp]
        line = f"{_tp(tp)}: replicas: {_csv(replicas)}."
        if adding:
            line += f" adding: {_csv(adding)}."
        if removing:
            line += f" removing: {_csv(removing)}."
        lines.append(line)
    if not lines:
        return "No partition reassignments found.\n"
    return "Current partition reassignments:\n" + "\n".join(lines) + "\n"
