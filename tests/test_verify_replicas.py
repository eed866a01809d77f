"""`sparkkafka verify-replicas RUN`: kafka-replica-verification (ReplicaVerificationTool) over a run's
final state, on hand-built run directories."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from test_checker import make_run, ps, rec, rs

from sparkkafka import Cluster
from sparkkafka.cli import main
from sparkkafka.tools.replica_verification import (
    crc32c,
    record_checksums,
    timestamp,
    topic_filter,
    verify_run,
)

TS = "1970-01-01 00:00:01,000"  # make_run's run.json time_ms is 1000


def three_replicas(tmp_path, change: dict | None = None, follower_hw: int = 3) -> str:
    """t-0 on brokers 0 (leader, epoch 1), 1 and 2, records 0-2 at offsets 0-2, every HW 3; `change`
    replaces the row of (broker, offset)."""
    change = change or {}
    log = [rec(b, o, r, epoch=0 if b else 1) for b in (0, 1, 2) for o, r in enumerate((0, 1, 2))]
    log = [x for x in log if (x["broker"], x["offset"]) not in change] + list(change.values())
    return make_run(str(tmp_path), log=log,
                    replica_state=[rs(9, 0, 3, 3), rs(9, 1, 3, follower_hw), rs(9, 2, 3, follower_hw)],
                    partition_state=[ps(-100, 0, [0, 1, 2], replicas=[0, 1, 2])])


def run_cli(capsys, *argv: str) -> tuple[int, list[str], str]:
    code = main(["verify-replicas", *argv])
    cap = capsys.readouterr()
    return code, cap.out.splitlines(), cap.err


def test_identical_replicas_print_only_the_start_and_the_lag(tmp_path, capsys):
    """Leader epochs differ between replicas here (1 on the leader): the checksum, like Kafka's v2 batch
    CRC, does not cover partitionLeaderEpoch."""
    out = three_replicas(tmp_path)
    code, lines, err = run_cli(capsys, out)
    assert code == 0, err
    assert lines == [f"{TS}: verification process is started.",
                     f"{TS}: max lag is 0 for partition t-0 at offset 3 among 1 partitions"]


def test_divergent_replica_prints_unmatched_checksum_and_goes_on(tmp_path, capsys):
    out = three_replicas(tmp_path, {(2, 1): rec(2, 1, 9)})  # broker 2 holds record 9 at offset 1
    code, lines, _ = run_cli(capsys, out, "--report-interval-ms", "1000")
    assert code == 0
    c = record_checksums(pd.DataFrame([rec(0, 1, 1), rec(2, 1, 9)]))
    assert c[0] != c[1]
    assert lines == [f"{TS}: verification process is started.",
                     f"{TS}: partition t-0 has unmatched checksum at offset 1; replica 0's checksum {c[0]}; "
                     f"replica 2's checksum {c[1]}",
                     f"{TS}: max lag is 0 for partition t-0 at offset 3 among 1 partitions"]


def test_a_record_with_another_key_is_unmatched_too(tmp_path):
    out = three_replicas(tmp_path, {(1, 2): rec(1, 2, 2, key="k")})
    lines = verify_run(out).lines
    assert len(lines) == 3 and "unmatched checksum at offset 2; replica 0's checksum" in lines[1]
    assert "; replica 1's checksum" in lines[1]


def test_offset_mismatch_exits_1_at_once(tmp_path, capsys):
    out = three_replicas(tmp_path, {(1, 1): rec(1, 3, 1)})  # broker 1's offset 1 is missing: a gap
    code, lines, _ = run_cli(capsys, out)
    assert code == 1
    assert lines == [f"{TS}: verification process is started.",
                     f"{TS}: partition t-0: replica 0's offset 1 doesn't match replica 1's offset 2"]


def test_lag_is_the_highest_hw_minus_the_verified_offset(tmp_path):
    out = three_replicas(tmp_path, follower_hw=1)
    assert verify_run(out).lines[-1] == f"{TS}: max lag is 2 for partition t-0 at offset 1 among 1 partitions"


def test_white_list_selects_topics_and_nothing_selected_exits_1(tmp_path, capsys):
    out = three_replicas(tmp_path)
    assert verify_run(out, "t,u").lines[-1].endswith("among 1 partitions")
    code, lines, err = run_cli(capsys, out, "--topic-white-list", "u.*")
    assert (code, lines) == (1, []) and "No topics found" in err


def test_bad_input_exits_2_naming_the_field(tmp_path, capsys):
    code, lines, err = run_cli(capsys, str(tmp_path / "nothing"))
    assert (code, lines) == (2, []) and "run:" in err and "no run.json" in err
    out = three_replicas(tmp_path)
    code, lines, err = run_cli(capsys, out, "--topic-white-list", "t(")
    assert (code, lines) == (2, []) and "topic-white-list" in err and "'t('" in err


def test_cluster_verify_replicas(spark, tmp_path):
    out = three_replicas(tmp_path, {(2, 1): rec(2, 1, 9)})
    lines = Cluster.for_path(spark, out).verify_replicas()
    assert len(lines) == 3 and "partition t-0 has unmatched checksum at offset 1" in lines[1]


def test_partitions_are_visited_in_the_tools_hash_map_order(tmp_path):
    """Ties on the largest lag name the first partition of the tool's ConcurrentHashMap: for topic "a",
    TopicPartition.hashCode is 31 * (31 + p) + 97, so a-2 (slot 0) comes before a-1 and a-0."""
    parts = [0, 1, 2]
    out = make_run(str(tmp_path), log=[rec(0, 0, p, topic="a", partition=p) for p in parts],
                   replica_state=[rs(9, 0, 1, 1, topic="a", partition=p) for p in parts],
                   partition_state=[ps(-100, 0, [0], topic="a", partition=p) for p in parts],
                   topics={"a": {"partitions": 3, "overrides": {}, "min.insync.replicas": 1}})
    assert verify_run(out).lines[-1].endswith("max lag is 0 for partition a-2 at offset 1 among 3 partitions")


def test_formats():
    assert timestamp(0) == "1970-01-01 00:00:00,000"
    assert timestamp(90_061_007) == "1970-01-02 01:01:01,007"
    assert int(crc32c([b"123456789"])[0]) == 0xE3069283  # the CRC-32C check value
    assert topic_filter(" 'a, b' ").fullmatch("b") and not topic_filter("a").fullmatch("ab")
    with pytest.raises(ValueError, match=re.escape("topic-white-list")):
        topic_filter("[")
