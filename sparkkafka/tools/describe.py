"""``kafka-topics.sh --describe`` as Kafka 2.8 prints it with ``--bootstrap-server``.

Source: ``kafka.admin.TopicCommand`` (2.8, ``AdminClientTopicService.describeTopic``, ``TopicDescription``,
``PartitionDescription``, ``DescribeOptions``, ``getReplicationFactor``) and what the admin client hands it:
``KafkaAdminClient.describeTopics``/``DescribeTopicsResult.all``, ``clients.admin.Config``, and the broker's
``MetadataCache.getPartitionMetadata``. Three consequences that the printed text depends on:

* Topics come out in the iteration order of a ``java.util.HashMap`` keyed by topic name, not sorted
  (``describeTopics(...).all().get().values()``; a proposed sort, apache/kafka PR #10383, was not merged).
  ``_topic_order`` replays the three HashMaps involved.
* ``Configs:`` lists the non-default entries in the iteration order of the ``HashMap`` inside
  ``admin.Config`` (see ``_config_order``), not sorted and not in the order they were set.
* A partition whose leader is not a live broker is returned by the broker with leader -1, so it prints
  ``Leader: none`` (``MetadataCache.getPartitionMetadata``), and counts as having no leader.

The 2.8 AdminClient path never prints ``MarkedForDeletion`` (TopicCommand passes ``markedForDeletion =
false``); only the deprecated ``--zookeeper`` path did. Pure Python/pandas; no Spark, no Delta.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from ..protocol.java_hash import spread, string_hash
from ..protocol.under_replicated import is_under_replicated, replication_factor

__all__ = ["KAFKA_28_TOPIC_CONFIGS", "describe_lines", "topic_id"]

ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"

# Every topic config a 2.8 broker returns in DescribeConfigs (LogConfig.configDef, 2.8). Their number sets the
# capacity of the HashMap inside admin.Config, hence the order of the printed ``Configs:``.
KAFKA_28_TOPIC_CONFIGS: tuple[str, ...] = (
    "segment.bytes", "segment.ms", "segment.jitter.ms", "segment.index.bytes", "flush.messages", "flush.ms",
    "retention.bytes", "retention.ms", "max.message.bytes", "index.interval.bytes", "delete.retention.ms",
    "min.compaction.lag.ms", "max.compaction.lag.ms", "file.delete.delay.ms", "min.cleanable.dirty.ratio",
    "cleanup.policy", "unclean.leader.election.enable", "min.insync.replicas", "compression.type",
    "preallocate", "message.format.version", "message.timestamp.type", "message.timestamp.difference.max.ms",
    "leader.replication.throttled.replicas", "follower.replication.throttled.replicas",
    "message.downconversion.enable",
)  # fmt: skip


def topic_id(seed: int, topic: str) -> str:
    """A deterministic Kafka-style topic id: ``Uuid.toString`` (URL-safe base64, no padding) of 16 bytes.

    The bytes are the head of SHA-256(seed, topic) with the version-4/variant-2 bits set as in
    ``java.util.UUID.randomUUID`` (Kafka's ``Uuid.randomUuid`` wraps it), so the id is never all zeros nor
    Kafka's reserved ``Uuid(0, 1)``; like ``Uuid.randomUuid`` in later Kafka, an id starting with "-" is
    skipped (the next counter value is hashed instead).
    """
    counter = 0
    while True:
        raw = bytearray(hashlib.sha256(f"{seed}\x00{topic}\x00{counter}".encode()).digest()[:16])
        raw[6] = (raw[6] & 0x0F) | 0x40
        raw[8] = (raw[8] & 0x3F) | 0x80
        text = base64.urlsafe_b64encode(bytes(raw)).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text
        counter += 1


def describe_lines(
    topics: pd.DataFrame,
    partitions: pd.DataFrame,
    *,
    live_brokers: Iterable[int],
    under_replicated: bool = False,
    unavailable: bool = False,
    under_min_isr: bool = False,
    at_min_isr: bool = False,
) -> list[str]:
    """The lines (without newlines) ``kafka-topics --describe`` 2.8 prints, one list item per line.

    ``topics``: topic, topic_id, partition_count, replication_factor, configs (non-default configs, dict),
    min_insync_replicas, marked_for_deletion. ``partitions``: topic, partition, leader (-1 = none), replicas,
    isr, adding, removing. A partition is being reassigned while ``adding`` or ``removing`` is non-empty.

    Per topic (TopicCommand order, see ``_topic_order``): the header line unless a filter flag is set, then the
    partition lines in partition-id order that pass the filters. The flags are OR-ed as in
    ``DescribeOptions.shouldPrintTopicPartition`` (the 2.8 command line itself refuses more than one).
    ReplicationFactor is ``getReplicationFactor`` of the topic's lowest partition (``replication_factor`` only
    when the topic has no partition rows); PartitionCount is ``partition_count``; ``marked_for_deletion`` is
    not printed (see module docstring).
    """
    live = {int(b) for b in live_brokers}
    filtered = under_replicated or unavailable or under_min_isr or at_min_isr
    groups = partitions.groupby("topic", sort=False) if len(partitions) else []
    rows_by_topic = {str(name): group.sort_values("partition") for name, group in groups}
    topic_rows = {str(row["topic"]): row for _, row in topics.iterrows()}
    lines: list[str] = []
    for name in _topic_order(topic_rows):
        topic = topic_rows[name]
        parts = [_Partition(row, live) for _, row in rows_by_topic.get(name, pd.DataFrame()).iterrows()]
        min_isr = int(topic["min_insync_replicas"])
        if not filtered:
            rf = parts[0].replication_factor if parts else int(topic["replication_factor"])
            lines.append(_header_line(topic, rf))
        for part in parts:
            if not filtered or (
                (under_replicated and part.under_replicated)
                or (unavailable and not part.has_leader)
                or (under_min_isr and (not part.has_leader or len(part.isr) < min_isr))
                or (at_min_isr and len(part.isr) == min_isr)
            ):
                lines.append(part.line(name))
    return lines


class _Partition:
    """One partition as ``PartitionDescription`` sees it (TopicPartitionInfo + PartitionReassignment)."""

    def __init__(self, row: pd.Series, live: set[int]) -> None:
        self.partition = int(row["partition"])
        leader = int(row["leader"])
        # MetadataCache.getPartitionMetadata answers leader -1 when the leader is not an alive broker.
        self.leader = leader if leader in live else -1
        self.replicas = _ids(row["replicas"])
        self.isr = _ids(row["isr"])
        self.adding = _ids(row.get("adding"))
        self.removing = _ids(row.get("removing"))

    @property
    def has_leader(self) -> bool:
        """``PartitionDescription.hasLeader``: the admin client got a leader node (so it is live)."""
        return self.leader != -1

    @property
    def reassigning(self) -> bool:
        """The partition is listed by ListPartitionReassignments."""
        return bool(self.adding or self.removing)

    @property
    def replication_factor(self) -> int:
        """``TopicCommand.getReplicationFactor``: |replicas − adding| while a reassignment is in progress."""
        return replication_factor(self.replicas, self.adding, self.removing)

    @property
    def under_replicated(self) -> bool:
        """``PartitionDescription.isUnderReplicated``."""
        return is_under_replicated(self.replicas, self.isr, self.adding, self.removing)

    def line(self, topic: str) -> str:
        """``PartitionDescription.printDescription`` (2.8)."""
        text = (
            f"\tTopic: {topic}\tPartition: {self.partition}"
            f"\tLeader: {self.leader if self.has_leader else 'none'}"
            f"\tReplicas: {_csv(self.replicas)}\tIsr: {_csv(self.isr)}"
        )
        if self.reassigning:
            text += f"\tAdding Replicas: {_csv(self.adding)}\tRemoving Replicas: {_csv(self.removing)}"
        return text


def _header_line(topic: pd.Series, replication_factor: int) -> str:
    """``TopicCommand.TopicDescription.printDescription`` (2.8, AdminClient path)."""
    configs = _config_pairs(topic.get("configs"))
    tid = topic.get("topic_id")
    text = f"Topic: {topic['topic']}"
    if isinstance(tid, str) and tid and tid != ZERO_UUID:
        text += f"\tTopicId: {tid}"
    text += f"\tPartitionCount: {int(topic['partition_count'])}\tReplicationFactor: {replication_factor}"
    return text + "\tConfigs: " + ",".join(f"{k}={configs[k]}" for k in _config_order(configs))


def _ids(value: Any) -> list[int]:
    """A broker-id list from a cell (list, tuple, numpy array, or None/NaN for empty)."""
    return [] if _is_missing(value) else [int(v) for v in value]


def _is_missing(value: Any) -> bool:
    return value is None or (pd.api.types.is_scalar(value) and bool(pd.isna(value)))


def _csv(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in ids)


def _config_pairs(value: Any) -> dict[str, str]:
    """Config names → values as Java prints them (``true``/``false``, ``null``) from a dict or (k, v) pairs."""
    if _is_missing(value):
        return {}
    pairs = value.items() if isinstance(value, Mapping) else value
    return {str(k): _java_str(v) for k, v in pairs}


def _java_str(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# --- java.util.HashMap iteration order (JDK 8-17) ---------------------------------------------------------


def _spread(key: str) -> int:
    return spread(string_hash(key))


class _JavaHashMap:
    """Just enough of ``java.util.HashMap`` (keys only) to replay its iteration order.

    Models ``tableSizeFor``, ``resize`` (bins split in order), the resize a long bin triggers in a table under
    64 slots, and the pre-sizing of ``HashMap(Map)`` (JDK 8-17 formula). A bin that would be treeified (9+
    keys in one slot of a 64+ table) keeps list order here, where Java would move the tree root first.
    """

    def __init__(self, initial_capacity: int | None = None) -> None:
        self.table: list[list[str]] = []
        self.size = 0
        self.threshold = 0 if initial_capacity is None else _table_size_for(initial_capacity)

    @classmethod
    def copy_of(cls, keys: Sequence[str]) -> _JavaHashMap:
        """``new HashMap<>(map)``: pre-size to ``tableSizeFor((int)(n / 0.75f + 1))``, then put in order."""
        out = cls()
        if keys:
            out.threshold = _table_size_for(int(len(keys) / 0.75 + 1.0))
        out.put_all(keys)
        return out

    def put_all(self, keys: Iterable[str]) -> _JavaHashMap:
        for key in keys:
            self.put(key)
        return self

    def put(self, key: str) -> None:
        if not self.table:
            self._resize()
        bin_ = self.table[_spread(key) & (len(self.table) - 1)]
        if key in bin_:
            return
        bin_.append(key)
        if len(bin_) > 8 and len(self.table) < 64:  # treeifyBin on a small table resizes instead
            self._resize()
        self.size += 1
        if self.size > self.threshold:
            self._resize()

    def keys(self) -> list[str]:
        return [key for bin_ in self.table for key in bin_]

    def _resize(self) -> None:
        old_cap, old_thr = len(self.table), self.threshold
        if old_cap > 0:
            new_cap, new_thr = old_cap * 2, (old_thr * 2 if old_cap >= 16 else 0)
        elif old_thr > 0:
            new_cap, new_thr = old_thr, 0
        else:
            new_cap, new_thr = 16, 12
        self.threshold = new_thr or int(new_cap * 0.75)
        table: list[list[str]] = [[] for _ in range(new_cap)]
        for key in self.keys():
            table[_spread(key) & (new_cap - 1)].append(key)
        self.table = table


def _table_size_for(capacity: int) -> int:
    """``HashMap.tableSizeFor``: the smallest power of two >= capacity (at least 1)."""
    size = 1
    while size < capacity:
        size *= 2
    return size


def _topic_order(names: Iterable[str]) -> list[str]:
    """Topic order of TopicCommand 2.8's describe loop.

    ``getTopics`` sorts the names; ``KafkaAdminClient.describeTopics`` puts them into ``new HashMap<>(n)``,
    wraps a copy (``new HashMap<>(topicFutures)``) in DescribeTopicsResult, whose ``all()`` fills
    ``new HashMap<>(n)`` from that copy; TopicCommand iterates the last map's values.
    """
    ordered = sorted(names)
    first = _JavaHashMap(len(ordered)).put_all(ordered)
    copy = _JavaHashMap.copy_of(first.keys())
    return _JavaHashMap(len(ordered)).put_all(copy.keys()).keys()


def _config_order(configs: Mapping[str, str]) -> list[str]:
    """Order of the non-default entries in ``admin.Config.entries()``.

    ``Config`` puts every entry of the DescribeConfigs response (all topic configs, defaults included) into a
    default ``new HashMap<>()``; TopicCommand filters out the defaults while iterating. Entries sharing a slot
    keep response order; we take that order to be ascending signed ``HashMap.hash`` (the broker builds the
    response from a Scala map whose slots are kept sorted by hash). That tie rule is inferred: it matches
    every published 2.x output we found (``segment.bytes`` before ``retention.ms``, ``retention.bytes`` before
    ``delete.retention.ms``, ``message.downconversion.enable`` before ``min.insync.replicas``).
    """
    names = list(dict.fromkeys([*KAFKA_28_TOPIC_CONFIGS, *configs]))
    slots = _JavaHashMap().put_all(names).table
    response = sorted(names, key=lambda k: (_spread(k) & (len(slots) - 1), _signed32(_spread(k))))
    return [k for k in _JavaHashMap().put_all(response).keys() if k in configs]


def _signed32(value: int) -> int:
    return value - (1 << 32) if value >= 1 << 31 else value
