"""``kafka-log-dirs.sh --describe`` (``kafka.admin.LogDirsCommand``, Kafka 2.8, Scala 2.13 build) over a run.

The tool prints ``Querying brokers for log directories information``, then ``Received log directory
information from brokers <ids>`` and one line of JSON built from nested Scala ``Map``s of at most four
entries, which keep insertion order: ``{"version":1,"brokers":[{"broker":0,"logDirs":[{"logDir":...,
"error":null,"partitions":[{"partition":"t-0","size":1234,"offsetLag":0,"isFuture":false}]}]}]}``.

The broker ids and the three lists come out of hash maps, replayed here (checked against JDK 17
and scala-library 2.13):

* ``<ids>``: ``--broker-list`` as typed; without it, ``describeCluster().nodes()``, the values of a
  ``java.util.HashMap<Integer, Node>`` (``Collectors.toMap``): bucket of the spread id, ids in one bucket
  in the order `brokers` is given (Kafka's: the broker's metadata order, a ``LongMap``'s, not modelled).
* brokers: ``DescribeLogDirsResult.allDescriptions`` (a Java ``HashMap``) mapped by
  ``.asScala.map { case (k, v) => k -> v.asScala }``, which builds a Scala 2.13 ``mutable.HashMap``.
* logDirs: the admin client's ``HashMap<String, LogDirDescription>(n)`` (table ``tableSizeFor(n)``,
  grown by 3/4), filled in the broker's response order: ``log.dirs`` order when a broker has at most
  four dirs (``config.logDirs.toSet`` keeps insertion order up to four). With more, Kafka fills it in
  the hash-set order of the response objects, not modelled: we keep the ``dirs`` row order.
* partitions: the admin client's ``HashMap<TopicPartition, ReplicaInfo>``, then
  ``.asScala.filter {topic in --topic-list}``, which builds a Scala ``mutable.HashMap``: ordered by
  bucket of the improved ``TopicPartition.hashCode``, then that hash (signed), then row order.

Topics are filtered client-side (``--topic-list``), after the query, so the order is that of the
filtered map. A dir whose ``error`` is set (an offline dir: ``KAFKA_STORAGE_ERROR``) lists no
partitions. Treeified Java bins (nine keys in one bucket of a table of 64 or more) are not modelled.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from ..errors import ScenarioError
from ..protocol.java_hash import scala_hash_order, spread, string_hash

_MASK = 0xFFFFFFFF


def topic_partition_hash(topic: str, partition: int) -> int:
    """``TopicPartition.hashCode``: ``31 * (31 + partition) + topic.hashCode()``, unsigned 32-bit."""
    return (31 * (31 + partition) + string_hash(topic)) & _MASK


def _table_size_for(capacity: int) -> int:
    """``HashMap.tableSizeFor``: the power of two at or above `capacity`, at least 1."""
    size = 1
    while size < capacity:
        size <<= 1
    return size


def java_hash_map_order(hashes: Sequence[int], initial_capacity: int | None = None) -> list[int]:
    """Positions of distinct keys (hash codes `hashes`, inserted in order) in the iteration order of a
    ``java.util.HashMap`` (``new HashMap<>(initial_capacity)``, or the default): bucket of the spread
    hash in the final table, then insertion order. Models growth past 3/4 and the resize a bin of nine
    keys forces in a table smaller than 64."""
    if initial_capacity is None:
        cap, threshold = 16, 12
    else:
        cap = _table_size_for(initial_capacity)
        threshold = int(cap * 0.75)
    spreads = [spread(h & _MASK) for h in hashes]
    counts: dict[int, int] = {}

    def grow() -> None:
        nonlocal cap, threshold, counts
        threshold = threshold << 1 if cap >= 16 else int(cap * 2 * 0.75)
        cap <<= 1
        counts = {}
        for s in spreads[:size]:
            counts[s & (cap - 1)] = counts.get(s & (cap - 1), 0) + 1

    size = 0
    for s in spreads:
        bucket = s & (cap - 1)
        counts[bucket] = counts.get(bucket, 0) + 1
        size += 1
        if counts[bucket] >= 9 and cap < 64:  # treeifyBin on a small table resizes instead
            grow()
        if size > threshold:
            grow()
    return sorted(range(len(spreads)), key=lambda i: (spreads[i] & (cap - 1), i))


def _json_string(text: str) -> str:
    """A JSON string as Jackson writes it: short escapes for \\b\\t\\n\\f\\r, ``\\u00XX`` (upper-case hex)
    for other control characters, everything else raw."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif code < 0x20:
            short = {8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r"}.get(code)
            out.append(short or f"\\u{code:04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _java_int(option: str, text: str) -> int:
    """Scala's ``String.toInt`` (``Integer.parseInt``), failing as ``NumberFormatException`` does."""
    body = text[1:] if text[:1] in "+-" else text
    if body and body.isascii() and body.isdigit():
        value = int(text)
        if -(2**31) <= value < 2**31:
            return value
    raise ScenarioError(option, text, f'For input string: "{text}"')


def _split_list(value: str | Sequence | None) -> list | None:
    """A comma-separated option as the tool splits it (``split(",").filter(!_.isEmpty)``), or a list."""
    if value is None:
        return None
    if isinstance(value, str):
        return [part for part in value.split(",") if part]
    return list(value)


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def cluster_broker_order(brokers: Sequence[int]) -> list[int]:
    """The ids of ``describeCluster().nodes()``: values of a default ``HashMap<Integer, Node>`` filled
    in the order of `brokers` (the broker's metadata order, which decides ids in one bucket)."""
    ids = list(dict.fromkeys(int(b) for b in brokers))
    return [ids[i] for i in java_hash_map_order(ids)]


def describe_log_dirs_text(
    dirs: pd.DataFrame,
    logs: pd.DataFrame,
    brokers: Sequence[int],
    topic_list: str | Sequence[str] | None = None,
    broker_list: str | Sequence[int] | None = None,
) -> str:
    """What ``kafka-log-dirs.sh --describe [--topic-list t1,t2] [--broker-list 0,1]`` prints (2.8).

    `dirs` (broker, log_dir, error: None or an exception class name) lists each broker's configured
    dirs in ``log.dirs`` order; `logs` (broker, log_dir, topic, partition, size, offset_lag, is_future)
    the logs they hold. `brokers` are the live brokers ``describeCluster`` returns; a `broker_list`
    entry outside them raises ScenarioError (Kafka's admin call would time out)."""
    live = {int(b) for b in brokers}
    if broker_list is None:
        queried = cluster_broker_order(brokers)
    else:
        raw = _split_list(broker_list) or []
        queried = [_java_int("--broker-list", p) if isinstance(p, str) else int(p) for p in raw]
        for broker in queried:
            if broker not in live:
                raise ScenarioError(
                    "--broker-list", broker, "not a live broker: Kafka's describeLogDirs call would time out"
                )
    topics = set(_split_list(topic_list) or [])

    distinct = list(dict.fromkeys(queried))  # the admin client's futures map drops repeats
    broker_ids = [distinct[i] for i in scala_hash_order(distinct)]

    dir_rows: dict[int, list[tuple[str, str | None]]] = {}
    for row in dirs.itertuples(index=False):
        b = int(row.broker)
        entries = dir_rows.setdefault(b, [])
        if all(path != row.log_dir for path, _ in entries):  # config.logDirs.toSet
            entries.append((str(row.log_dir), None if _missing(row.error) else str(row.error)))
    replicas: dict[tuple[int, str], dict[tuple[str, int], tuple[int, int, bool]]] = {}
    for row in logs.itertuples(index=False):
        key = (int(row.broker), str(row.log_dir))
        # HashMap.put: a repeated partition keeps its place and takes the later value
        replicas.setdefault(key, {})[(str(row.topic), int(row.partition))] = (
            int(row.size),
            int(row.offset_lag),
            bool(row.is_future),
        )

    broker_json = []
    for broker in broker_ids:
        entries = dir_rows.get(broker, [])
        order = java_hash_map_order([string_hash(path) for path, _ in entries], len(entries))
        dir_json = []
        for path, error in (entries[i] for i in order):
            parts = [] if error is not None else list(replicas.get((broker, path), {}).items())
            if topics:
                parts = [p for p in parts if p[0][0] in topics]
            ranked = scala_hash_order([topic_partition_hash(t, p) for (t, p), _ in parts])
            part_json = [
                f'{{"partition":{_json_string(f"{t}-{p}")},"size":{size},"offsetLag":{lag},'
                f'"isFuture":{"true" if future else "false"}}}'
                for (t, p), (size, lag, future) in (parts[i] for i in ranked)
            ]
            error_json = "null" if error is None else _json_string(error)
            dir_json.append(
                f'{{"logDir":{_json_string(path)},"error":{error_json},"partitions":[{",".join(part_json)}]}}'
            )
        broker_json.append(f'{{"broker":{broker},"logDirs":[{",".join(dir_json)}]}}')
    body = f'{{"version":1,"brokers":[{",".join(broker_json)}]}}'
    return (
        "Querying brokers for log directories information\n"
        f"Received log directory information from brokers {','.join(str(b) for b in queried)}\n"
        f"{body}\n"
    )
