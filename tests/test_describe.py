"""kafka-topics --describe (2.8, --bootstrap-server) lines from sparkkafka.tools.describe, compared byte for byte."""

from __future__ import annotations

import base64
import re

import pandas as pd
import pytest

from sparkkafka.tools.describe import (
    KAFKA_28_TOPIC_CONFIGS,
    _JavaHashMap,
    _topic_order,
    describe_lines,
    topic_id,
)

TID = "U8NEECZuTR-DGNpU6QQKTQ"


def topics_frame(*rows: dict) -> pd.DataFrame:
    base = {"topic_id": TID, "partition_count": 1, "replication_factor": 3, "configs": {},
            "min_insync_replicas": 1, "marked_for_deletion": False}  # fmt: skip
    return pd.DataFrame([{**base, **row} for row in rows])


def partitions_frame(*rows: dict) -> pd.DataFrame:
    base = {"adding": [], "removing": []}
    return pd.DataFrame([{**base, **row} for row in rows])


def p(topic: str, partition: int, leader: int, replicas: list[int], isr: list[int], **kw: list[int]) -> dict:
    return {"topic": topic, "partition": partition, "leader": leader, "replicas": replicas, "isr": isr, **kw}


# A topic "t" with one partition of each kind; min.insync.replicas 2, brokers 1..4 live, 5 dead.
MIXED_TOPICS = topics_frame({"topic": "t", "partition_count": 6, "min_insync_replicas": 2})
MIXED_PARTITIONS = partitions_frame(
    p("t", 0, 1, [1, 2, 3], [1, 2, 3]),  # healthy
    p("t", 1, 2, [2, 3, 1], [2, 3]),  # under-replicated, at min ISR
    p("t", 2, 3, [3, 1, 2], [3]),  # under-replicated, under min ISR
    p("t", 3, -1, [1, 2, 3], [3]),  # no leader
    p("t", 4, 5, [5, 1, 2], [5, 1, 2]),  # leader is a dead broker
    p("t", 5, 2, [2, 3, 4, 1], [2, 3, 1], adding=[4], removing=[1]),  # reassigning [2,3,1] → [2,3,4]
)
LINES = {
    0: "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3",
    1: "\tTopic: t\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,3",
    2: "\tTopic: t\tPartition: 2\tLeader: 3\tReplicas: 3,1,2\tIsr: 3",
    3: "\tTopic: t\tPartition: 3\tLeader: none\tReplicas: 1,2,3\tIsr: 3",
    4: "\tTopic: t\tPartition: 4\tLeader: none\tReplicas: 5,1,2\tIsr: 5,1,2",
    5: "\tTopic: t\tPartition: 5\tLeader: 2\tReplicas: 2,3,4,1\tIsr: 2,3,1\tAdding Replicas: 4\tRemoving Replicas: 1",
}


def mixed(**flags: bool) -> list[str]:
    return describe_lines(MIXED_TOPICS, MIXED_PARTITIONS, live_brokers={1, 2, 3, 4}, **flags)


def test_plain_topic() -> None:
    topics = topics_frame({"topic": "orders", "partition_count": 2})
    parts = partitions_frame(p("orders", 1, 2, [2, 3, 1], [2, 3, 1]), p("orders", 0, 1, [1, 2, 3], [1, 3, 2]))
    assert describe_lines(topics, parts, live_brokers=[1, 2, 3]) == [
        f"Topic: orders\tTopicId: {TID}\tPartitionCount: 2\tReplicationFactor: 3\tConfigs: ",
        "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,3,2",
        "\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,3,1",
    ]


def test_zero_or_missing_topic_id_is_left_out() -> None:
    parts = partitions_frame(p("a", 0, 1, [1], [1]))
    for tid in ("AAAAAAAAAAAAAAAAAAAAAA", None, ""):
        topics = topics_frame({"topic": "a", "topic_id": tid, "replication_factor": 1})
        assert describe_lines(topics, parts, live_brokers=[1])[0] == (
            "Topic: a\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: "
        )


def test_configs_in_kafka_hashmap_order() -> None:
    # Orders observed in published kafka-topics 2.x outputs.
    configs = {"retention.ms": "7200000", "segment.bytes": 1073741824, "min.insync.replicas": 2}
    topics = topics_frame({"topic": "c", "configs": configs})
    parts = partitions_frame(p("c", 0, 1, [1, 2, 3], [1, 2, 3]))
    assert describe_lines(topics, parts, live_brokers=[1, 2, 3])[0] == (
        f"Topic: c\tTopicId: {TID}\tPartitionCount: 1\tReplicationFactor: 3"
        "\tConfigs: min.insync.replicas=2,segment.bytes=1073741824,retention.ms=7200000"
    )
    compacted = {"segment.ms": "100", "delete.retention.ms": "100", "max.compaction.lag.ms": "1000",
                 "segment.bytes": "1073741824", "cleanup.policy": "compact"}  # fmt: skip
    topics = topics_frame({"topic": "compact1", "topic_id": "AAAAAAAAAAAAAAAAAAAAAA", "configs": compacted,
                           "replication_factor": 1})  # fmt: skip
    parts = partitions_frame(p("compact1", 0, 0, [0], [0]))
    assert describe_lines(topics, parts, live_brokers=[0])[0] == (
        "Topic: compact1\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: cleanup.policy=compact,"
        "segment.bytes=1073741824,max.compaction.lag.ms=1000,delete.retention.ms=100,segment.ms=100"
    )


def test_config_values_print_as_java_does() -> None:
    configs = [("unclean.leader.election.enable", True), ("preallocate", False)]  # (k, v) pairs also accepted
    topics = topics_frame({"topic": "x", "configs": configs, "replication_factor": 1})
    parts = partitions_frame(p("x", 0, 1, [1], [1]))
    assert describe_lines(topics, parts, live_brokers=[1])[0].endswith(
        "\tConfigs: preallocate=false,unclean.leader.election.enable=true"
    )


def test_leaderless_and_reassigning_partitions() -> None:
    lines = mixed()
    # Header RF comes from partition 0, which is not reassigning.
    assert lines == [f"Topic: t\tTopicId: {TID}\tPartitionCount: 6\tReplicationFactor: 3\tConfigs: "] + [
        LINES[i] for i in range(6)
    ]


def test_header_rf_discounts_adding_replicas() -> None:
    topics = topics_frame({"topic": "orders", "partition_count": 1, "replication_factor": 4})
    parts = partitions_frame(p("orders", 0, 2, [2, 3, 4, 1], [2, 3, 1], adding=[4], removing=[1]))
    assert describe_lines(topics, parts, live_brokers=[1, 2, 3, 4]) == [
        f"Topic: orders\tTopicId: {TID}\tPartitionCount: 1\tReplicationFactor: 3\tConfigs: ",
        "\tTopic: orders\tPartition: 0\tLeader: 2\tReplicas: 2,3,4,1\tIsr: 2,3,1"
        "\tAdding Replicas: 4\tRemoving Replicas: 1",
    ]


def test_shrinking_reassignment_prints_empty_adding() -> None:
    topics = topics_frame({"topic": "s"})
    parts = partitions_frame(p("s", 0, 1, [1, 2, 3], [1, 2, 3], removing=[3]))
    assert describe_lines(topics, parts, live_brokers=[1, 2, 3])[1] == (
        "\tTopic: s\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3\tAdding Replicas: \tRemoving Replicas: 3"
    )


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        ("under_replicated", [1, 2, 3]),  # RF − |ISR| > 0; partition 5 has RF 4 − 1 = 3 = |ISR|
        ("unavailable", [3, 4]),  # no leader, or leader not live
        ("under_min_isr", [2, 3, 4]),  # no leader, or |ISR| < 2
        ("at_min_isr", [1]),  # |ISR| == 2 (partition 3 has one ISR member, partition 4 three)
    ],
)
def test_each_filter_suppresses_header(flag: str, expected: list[int]) -> None:
    assert mixed(**{flag: True}) == [LINES[i] for i in expected]


def test_filters_are_ored() -> None:
    assert mixed(unavailable=True, at_min_isr=True) == [LINES[i] for i in (1, 3, 4)]
    assert mixed(under_replicated=True, unavailable=True, under_min_isr=True, at_min_isr=True) == [
        LINES[i] for i in (1, 2, 3, 4)
    ]


def test_filter_with_nothing_matching_prints_nothing() -> None:
    topics = topics_frame({"topic": "ok"})
    parts = partitions_frame(p("ok", 0, 1, [1, 2, 3], [1, 2, 3]))
    assert describe_lines(topics, parts, live_brokers=[1, 2, 3], under_replicated=True) == []


def test_marked_for_deletion_not_printed_by_admin_client_path() -> None:
    topics = topics_frame({"topic": "gone", "marked_for_deletion": True, "replication_factor": 1})
    parts = partitions_frame(p("gone", 0, 1, [1], [1]))
    assert "MarkedForDeletion" not in "\n".join(describe_lines(topics, parts, live_brokers=[1]))


def test_topics_in_kafka_order_and_partitions_by_id() -> None:
    names = ["payments", "orders", "audit", "__consumer_offsets"]
    topics = topics_frame(*({"topic": n, "replication_factor": 1} for n in names))
    parts = partitions_frame(*(p(n, 0, 1, [1], [1]) for n in names))
    headers = [
        line.split("\t")[0] for line in describe_lines(topics, parts, live_brokers=[1]) if line[0] != "\t"
    ]
    # java.util.HashMap order (checked against JDK 17), not name order.
    assert headers == ["Topic: orders", "Topic: __consumer_offsets", "Topic: audit", "Topic: payments"]


def test_java_hashmap_replay_matches_jdk() -> None:
    # Expected lists printed by a JDK 17 program doing what KafkaAdminClient/DescribeTopicsResult do.
    assert _topic_order(f"topic-{i}" for i in range(20)) == [
        "topic-6", "topic-7", "topic-8", "topic-9", "topic-0", "topic-1", "topic-2", "topic-10", "topic-3",
        "topic-11", "topic-4", "topic-12", "topic-5", "topic-13", "topic-14", "topic-15", "topic-16", "topic-17",
        "topic-18", "topic-19",
    ]  # fmt: skip
    assert _topic_order(["t1", "t2", "t10", "t3"]) == ["t10", "t1", "t2", "t3"]
    assert _JavaHashMap().put_all(KAFKA_28_TOPIC_CONFIGS).keys()[:6] == [
        "compression.type", "leader.replication.throttled.replicas", "min.insync.replicas",
        "message.downconversion.enable", "segment.jitter.ms", "cleanup.policy",
    ]  # fmt: skip


def test_topic_id_shape_and_determinism() -> None:
    assert topic_id(0, "orders") == "U8NEECZuTR-DGNpU6QQKTQ"
    assert topic_id(0, "orders") == topic_id(0, "orders")
    assert len({topic_id(s, t) for s in range(5) for t in ("a", "b", "orders")}) == 15
    for seed in range(200):
        tid = topic_id(seed, f"topic-{seed}")
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", tid) and not tid.startswith("-")
        raw = base64.urlsafe_b64decode(tid + "==")
        assert len(raw) == 16 and raw != bytes(16)
        assert raw[6] >> 4 == 4 and raw[8] >> 6 == 0b10  # version 4, variant 2 like java.util.UUID


def test_empty_frames() -> None:
    assert describe_lines(pd.DataFrame(), pd.DataFrame(), live_brokers=[]) == []
    topics = topics_frame({"topic": "bare", "partition_count": 0, "replication_factor": 2})
    assert describe_lines(topics, pd.DataFrame(), live_brokers=[1]) == [
        f"Topic: bare\tTopicId: {TID}\tPartitionCount: 0\tReplicationFactor: 2\tConfigs: "
    ]
