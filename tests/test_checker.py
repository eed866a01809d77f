"""The durability checker (sparkkafka.scenario.checker): each violation kind on hand-built tables,
firing exactly when its rule is broken, then the `lost` rows of a real unclean election (golden G-01)."""

from __future__ import annotations

import json
import os

import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from sparkkafka import Cluster
from sparkkafka.scenario import checker
from sparkkafka.scenario.checker import KINDS, audit, check, violations
from sparkkafka.storage import tables as T

ROUND_MS = 100


# ---------------------------------------------------------------------- hand-built runs
def rec(broker: int, offset: int, record_id: int, *, topic: str = "t", partition: int = 0, epoch: int = 0,
        key: str | None = None, log_dir: str = "d0") -> dict:
    """One `log` row."""
    return {"broker": broker, "log_dir": log_dir, "topic": topic, "partition": partition, "offset": offset,
            "leader_epoch": epoch, "record_id": record_id, "key": key, "value": None, "value_bytes": 100,
            "timestamp": 10 * record_id, "is_future": False}


def rs(round_no: int, broker: int, leo: int, hw: int, *, leader: int = 0, epoch: int = 0, topic: str = "t",
       partition: int = 0, log_start: int = 0) -> dict:
    """One `replica_state` row (role from leader, as the engine writes it)."""
    role = "leader" if leader == broker else ("follower" if leader >= 0 else "none")
    return {"round": round_no, "time_ms": round_no * ROUND_MS, "broker": broker, "topic": topic,
            "partition": partition, "log_dir": "d0", "role": role, "leader": leader, "leo": leo, "hw": hw,
            "log_start_offset": log_start, "leader_epoch": epoch}


def ps(time_ms: int, leader: int, isr: list[int], *, epoch: int = 0, version: int = 0, replicas: list[int] | None = None,
       topic: str = "t", partition: int = 0) -> dict:
    """One `partition_state` row."""
    return {"time_ms": time_ms, "topic": topic, "partition": partition, "leader": leader, "isr": isr,
            "replicas": replicas or [0, 1], "leader_epoch": epoch, "controller_epoch": 1, "version": version}


def res(record_id: int, offset: int | None, *, acks: int = -1, acked: bool = True, topic: str = "t",
        partition: int = 0) -> dict:
    """One `produce_results` row."""
    return {"time_ms": 0, "topic": topic, "partition": partition, "record_id": record_id, "acks": acks,
            "offset": offset, "error": None if acked else "NOT_ENOUGH_REPLICAS", "acked": acked}


def make_run(out: str, *, log=(), replica_state=(), partition_state=(), produce_results=(), **meta) -> str:
    """A run directory with these table rows and a run.json (live brokers 0-2, topic t, round 10)."""
    tables_dir = os.path.join(out, "tables")
    T.create_tables(tables_dir)
    for name, rows in (("log", log), ("replica_state", replica_state), ("partition_state", partition_state),
                       ("produce_results", produce_results)):
        if rows:
            write_deltalake(T.table_path(tables_dir, name), pa.Table.from_pylist(list(rows), schema=T.SCHEMAS[name]),
                            mode="append")
    info = {"scenario": "hand", "seed": 0, "round": 10, "time_ms": 1000, "round_ms": ROUND_MS,
            "live_brokers": [0, 1, 2], "topics": {"t": {"partitions": 3, "overrides": {}, "min.insync.replicas": 1}},
            **meta}
    with open(os.path.join(out, "run.json"), "w") as f:
        json.dump(info, f)
    return out


def found(out: str, kind: str | None = None):
    with open(os.path.join(out, "run.json")) as f:
        meta = json.load(f)
    v = violations(os.path.join(out, "tables"), meta)
    return v if kind is None else v[v["kind"] == kind].reset_index(drop=True)


def keys(v) -> list[tuple]:
    """(round, topic, partition, brokers, offset) of each violation row."""
    return [(int(r), t, int(p), list(b), None if o is None or o is pd.NA else int(o))
            for r, t, p, b, o in zip(v["round"], v["topic"], v["partition"], v["brokers"], v["offset"], strict=True)]


# ---------------------------------------------------------------------- lost
def test_lost_is_an_acked_record_missing_below_the_final_leaders_hw(tmp_path):
    out = make_run(
        str(tmp_path),
        # t-0: leader 0 holds rid 0 and 2 below HW 2, rid 4 above it; t-1 is offline at the end
        log=[rec(0, 0, 0), rec(0, 1, 2), rec(0, 2, 4), rec(1, 0, 0), rec(1, 1, 2)],
        replica_state=[rs(9, 0, 3, 2), rs(9, 1, 2, 2)],
        partition_state=[ps(-100, 0, [0, 1]), ps(-100, 0, [0, 1], partition=1), ps(500, -1, [0], epoch=1, version=1,
                                                                                  partition=1)],
        produce_results=[res(0, 0), res(1, 1, acks=1), res(2, 1), res(3, None, acked=False), res(4, 2),
                         res(5, 0, partition=1), res(6, 0, acks=0)],
    )
    lost = found(out, "lost")
    assert lost["record_id"].tolist() == [6, 1]  # 6 never arrived, 1 was overwritten
    assert lost["offset"].tolist() == [0, 1]
    assert [list(b) for b in lost["brokers"]] == [[0, 1]] * 2
    assert (lost["round"] == -1).all() and (lost["time_ms"] == 1000).all()
    assert [d.split(" at ")[0] for d in lost["detail"]] == ["acked with acks=0", "acked with acks=1"]
    assert lost["detail"][1].endswith("absent from the committed log (leader 0 below HW 2)")
    # 4 is on leader 0, which serves t-0, above its HW: not committed yet, not lost
    pending = found(out, "pending")
    assert pending["record_id"].tolist() == [4] and pending["offset"].tolist() == [2]
    assert pending["detail"][0] == "acked with acks=all at offset 2, on leader 0 at or above its HW 2: not yet committed"
    s = check(os.path.join(out, "tables"), json.load(open(os.path.join(out, "run.json"))))
    assert (s["lost_acked"], s["pending_acked"], s["unavailable_acked"], s["violations"]["lost"]) == (2, 1, 1, 2)
    assert s["lost_acked_by_acks"] == {"all": 0, "1": 1, "0": 1}
    assert s["acked"] == 6 and s["not_acked"] == 1 and s["offline_partitions"] == 1
    assert "pending" not in s["violations"]  # pending rows are in the table, but they break no rule


def test_acked_records_above_a_new_leaders_hw_are_pending_not_lost(tmp_path):
    """The run stops mid-failover: leader 0 acked offsets 0-3 and crashed; broker 1, elected in epoch 1,
    holds 0-3 but its HW is still the follower HW it last had (2): offsets 2 and 3 are pending. Offset 4,
    acked with acks=1 by broker 0 alone, is on no replica that can lead: lost."""
    out = make_run(
        str(tmp_path),
        log=[rec(0, o, o) for o in range(5)] + [rec(1, o, o) for o in range(4)],
        replica_state=[rs(9, 1, 4, 2, leader=1, epoch=1)],  # broker 0 is down: no row
        partition_state=[ps(-100, 0, [0, 1]), ps(800, 1, [1], epoch=1, version=1)],
        produce_results=[res(0, 0), res(1, 1), res(2, 2), res(3, 3, acks=1), res(4, 4, acks=1)],
        live_brokers=[1, 2])
    assert found(out, "pending")["record_id"].tolist() == [2, 3]
    assert found(out, "lost")["record_id"].tolist() == [4]
    s = check(os.path.join(out, "tables"), json.load(open(os.path.join(out, "run.json"))))
    assert (s["acked"], s["lost_acked"], s["pending_acked"], s["unavailable_acked"]) == (5, 1, 2, 0)
    assert s["lost_acked_by_acks"] == {"all": 0, "1": 1, "0": 0} and s["violations"]["lost"] == 1


def test_nothing_is_lost_when_the_committed_log_holds_every_acked_record(tmp_path):
    out = make_run(str(tmp_path), log=[rec(0, 0, 0), rec(0, 1, 1)], replica_state=[rs(9, 0, 2, 2)],
                   partition_state=[ps(-100, 0, [0, 1])], produce_results=[res(0, 0), res(1, 1)])
    assert len(found(out)) == 0


def test_an_acked_record_found_only_in_another_partition_or_topic_is_lost(tmp_path):
    """The committed logs are matched on (topic, partition, record id): record 0, acked in t-0, sits in t-1's
    log and record 1 in topic u's partition 0; both are lost from t-0; record 2 is where it was acked."""
    out = make_run(
        str(tmp_path),
        log=[rec(0, 0, 0, partition=1), rec(0, 0, 1, topic="u"), rec(0, 0, 2)],
        replica_state=[rs(9, 0, 1, 1), rs(9, 0, 1, 1, partition=1), rs(9, 0, 1, 1, topic="u")],
        partition_state=[ps(-100, 0, [0, 1]), ps(-100, 0, [0, 1], partition=1), ps(-100, 0, [0, 1], topic="u")],
        produce_results=[res(0, 0), res(1, 0), res(2, 0)],
    )
    assert sorted(found(out, "lost")["record_id"].tolist()) == [0, 1]


def test_a_leader_that_serves_no_log_leaves_its_partition_unjudged(tmp_path):
    """Broker 0 crashed and restarted inside its old ZooKeeper session: the controller still names it
    leader of t-0 (and it is live), but it holds the partition with no role until the controller sees
    the bounce. Its acked records sit on follower 1 (below 1's HW): unavailable, not lost."""
    out = make_run(str(tmp_path), log=[rec(0, 0, 0), rec(0, 1, 1), rec(1, 0, 0), rec(1, 1, 1)],
                   replica_state=[rs(9, 0, 2, 0, leader=-1, epoch=-1), rs(9, 1, 2, 2)],
                   partition_state=[ps(-100, 0, [0, 1])], produce_results=[res(0, 0), res(1, 1)])
    assert len(found(out, "lost")) == 0
    s = check(os.path.join(out, "tables"), json.load(open(os.path.join(out, "run.json"))))
    assert (s["lost_acked"], s["unavailable_acked"], s["offline_partitions"]) == (0, 2, 0)


def test_a_deleted_partition_is_neither_offline_nor_under_replicated_and_its_records_are_not_judged(tmp_path):
    """`gone-0` was deleted (its last partition_state row: leader -2, no ISR): Kafka's OfflinePartitionsCount
    leaves a deleted topic out and no broker holds it any more; its acked record is not lost either."""
    out = make_run(str(tmp_path), log=[rec(0, 0, 0)], replica_state=[rs(9, 0, 1, 1)],
                   partition_state=[ps(-100, 0, [0, 1]), ps(-100, 0, [0, 1], topic="gone"),
                                    ps(500, -2, [], epoch=-2, version=-1, topic="gone")],
                   produce_results=[res(0, 0), res(1, 0, topic="gone")])
    s = check(os.path.join(out, "tables"), json.load(open(os.path.join(out, "run.json"))))
    assert (s["offline_partitions"], s["under_replicated_partitions"], s["lost_acked"]) == (0, 0, 0)


# ---------------------------------------------------------------------- divergent
def test_divergent_pairs_are_reported_once_at_their_first_differing_offset(tmp_path):
    out = make_run(
        str(tmp_path),
        log=[rec(0, o, r) for o, r in enumerate([0, 1, 2])] + [rec(1, o, r) for o, r in enumerate([0, 9, 8])]
        + [rec(2, o, r) for o, r in enumerate([0, 7, 6])]
        # t-1: the replicas differ only at or above broker 1's HW
        + [rec(0, o, r, partition=1) for o, r in enumerate([10, 11])] + [rec(1, o, r, partition=1)
                                                                         for o, r in enumerate([10, 12])],
        replica_state=[rs(9, 0, 3, 3), rs(9, 1, 3, 3), rs(9, 2, 3, 1),
                       rs(9, 0, 2, 2, partition=1), rs(9, 1, 2, 1, partition=1)],
        partition_state=[ps(-100, 0, [0, 1, 2], replicas=[0, 1, 2]), ps(-100, 0, [0, 1], partition=1)],
    )
    d = found(out, "divergent")
    assert keys(d) == [(-1, "t", 0, [0, 1], 1)]  # broker 2 differs only above its HW of 1
    assert d["detail"][0].startswith("2 offset(s) below both HWs differ; at offset 1 replica 0 has record 1, "
                                     "replica 1 has record 9")
    s = check(os.path.join(out, "tables"), json.load(open(os.path.join(out, "run.json"))))
    assert (s["divergent_replicas"], s["divergent_offsets"], s["violations"]["divergent"]) == (1, 2, 1)


# ---------------------------------------------------------------------- HwWithinLeo
def test_hw_above_leo_is_reported_per_row(tmp_path):
    out = make_run(str(tmp_path), replica_state=[rs(3, 0, 5, 5), rs(3, 1, 4, 5), rs(4, 1, 5, 5)],
                   partition_state=[ps(-100, 0, [0, 1])])
    v = found(out)
    assert keys(v) == [(3, "t", 0, [1], 5)] and v["kind"][0] == "HwWithinLeo"
    assert "HW 5 is above its LEO 4" in v["detail"][0]


# ---------------------------------------------------------------------- UniqueLeaderPerEpoch
def test_two_leaders_of_one_epoch_from_either_table(tmp_path):
    out = make_run(
        str(tmp_path),
        partition_state=[
            # t-0: the controller names two leaders for epoch 1
            ps(-100, 0, [0, 1]), ps(100, 0, [0, 1], epoch=1, version=1), ps(300, 1, [0, 1], epoch=1, version=2),
            # t-1: fine by the controller, but broker 1 acts as leader of epoch 2 too
            ps(-100, 0, [0, 1], partition=1), ps(200, 0, [0, 1], epoch=2, version=1, partition=1),
            # t-2: new leaders with new epochs, and a leaderless epoch: fine
            ps(-100, 0, [0, 1], partition=2), ps(200, -1, [0], epoch=1, version=1, partition=2),
            ps(300, 1, [1], epoch=2, version=2, partition=2)],
        replica_state=[rs(5, 0, 1, 1, epoch=2, partition=1), rs(5, 1, 1, 1, leader=1, epoch=2, partition=1),
                       rs(5, 1, 1, 1, leader=1, epoch=2, partition=2)],
    )
    v = found(out, "UniqueLeaderPerEpoch")
    assert keys(v) == [(3, "t", 0, [0, 1], None), (5, "t", 1, [0, 1], None)]
    assert v["detail"][1] == ("leader epoch 2 has more than one leader "
                              "(partition_state says 0; replica_state says 0, 1)")


# ---------------------------------------------------------------------- LeaderHwMonotonic
def test_leader_hw_moving_back_within_an_epoch(tmp_path):
    out = make_run(
        str(tmp_path),
        replica_state=[
            rs(1, 0, 6, 5, epoch=1), rs(2, 0, 6, 4, epoch=1), rs(3, 0, 6, 6, epoch=1),  # back at round 2
            rs(4, 0, 6, 3, epoch=2),  # a new epoch may start lower
            rs(7, 0, 6, 2, epoch=2),  # after rounds without a row (a restart): not consecutive
            rs(1, 1, 6, 5, partition=1), rs(2, 1, 6, 1, partition=1)],  # a follower's HW may move back
        partition_state=[ps(-100, 0, [0, 1], epoch=1), ps(-100, 0, [0, 1], partition=1)],
    )
    v = found(out)
    assert keys(v) == [(2, "t", 0, [0], 4)] and v["kind"][0] == "LeaderHwMonotonic"
    assert v["detail"][0] == "leader HW moved back from 5 to 4 in leader epoch 1"


# ---------------------------------------------------------------------- StrongIsr
def test_truncating_committed_records_while_in_the_isr(tmp_path):
    rows = []
    for p in range(3):  # leader 0 commits offsets 0-1 (HW 2) in round 1; follower 1 then truncates in round 2
        rows += [rs(1, 0, 3, 2, partition=p), rs(2, 0, 3, 2, partition=p), rs(1, 1, 3, 2, partition=p)]
    rows += [rs(2, 1, 0, 0, partition=0),  # below the committed 2, in the ISR: violation
             rs(2, 1, 0, 0, partition=1),  # same, but the ISR lost broker 1 at 150
             rs(2, 1, 2, 2, partition=2)]  # truncated, but not below what was committed
    out = make_run(str(tmp_path), replica_state=rows,
                   partition_state=[ps(-100, 0, [0, 1], partition=p) for p in range(3)]
                   + [ps(150, 0, [0], version=1, partition=1)])
    v = found(out)
    assert keys(v) == [(2, "t", 0, [1], 0)] and v["kind"][0] == "StrongIsr"
    assert v["detail"][0] == "truncated from LEO 3 to 0, below the committed offset 2, while in the ISR [0,1]"


def test_a_recreated_topic_starts_a_new_incarnation(tmp_path):
    """Deleting t and creating it again restarts epochs and logs: no UniqueLeaderPerEpoch, no StrongIsr."""
    out = make_run(
        str(tmp_path),
        partition_state=[ps(-100, 0, [0, 1]), ps(300, -2, [], epoch=-2, version=-1), ps(500, 1, [1, 0])],
        replica_state=[rs(r, 0, 3, 3) for r in range(3)] + [rs(r, 1, 3, 3) for r in range(3)]
        + [rs(r, b, 0, 0, leader=1) for r in (5, 6) for b in (0, 1)],
    )
    assert len(found(out)) == 0


# ---------------------------------------------------------------------- summary shape
def test_summary_keeps_its_keys_and_adds_the_violation_counts(tmp_path):
    out = make_run(str(tmp_path))
    s, v = audit(os.path.join(out, "tables"), json.load(open(os.path.join(out, "run.json"))))
    assert {"scenario", "seed", "rounds", "time_ms", "produced", "acked", "not_acked", "errors", "lost_acked",
            "pending_acked", "unavailable_acked", "divergent_replicas", "offline_partitions", "under_replicated_partitions",
            "log_records"} <= set(s)
    assert s["violations"] == dict.fromkeys(KINDS, 0)
    assert s["lost_acked_by_acks"] == {"all": 0, "1": 0, "0": 0} and s["divergent_offsets"] == 0
    assert list(v.columns) == T.SCHEMAS["violations"].names and len(v) == 0


# ---------------------------------------------------------------------- end to end
FAST = {"zookeeper.session.timeout.ms": 1000, "replica.lag.time.max.ms": 1000,
        "unclean.leader.election.enable": True}


def produce(at: int) -> dict:
    return {"at": at, "produce": {"topic": "t", "partition": 0, "records": 1, "acks": "all"}}


@pytest.fixture(scope="module")
def g01(spark, tmp_path_factory):
    """Golden G-01: the follower is shut down, the leader acks "second" alone, then the leader goes
    and the follower comes back as an unclean leader; the old leader rejoins at 4000."""
    sc = {  # Cluster.from_scenario takes the mapping itself, as a YAML file would hold it
        "name": "g01", "cluster": {"brokers": [0, 1], "config": FAST},
        "topics": [{"name": "t", "partitions": 1, "replication_factor": 2, "assignment": {0: [0, 1]}}],
        "timeline": [produce(0), {"at": 1000, "shutdown": 1}, produce(1500), {"at": 2000, "shutdown": 0},
                     {"at": 2500, "restart": 1}, produce(3500), {"at": 4000, "restart": 0}],
        "run": {"until_ms": 5000}}
    out = str(tmp_path_factory.mktemp("g01") / "run")
    c = Cluster.from_scenario(sc, spark=spark, engine="local", out=out)
    c.step(5)
    stepped = c.summary(), c.violations().count(), os.path.exists(os.path.join(out, "summary.json"))
    c.run()
    return c, stepped


def test_stepped_run_has_a_summary_and_computes_its_violations(g01):
    _, (summary, n, wrote) = g01
    assert summary["acked"] >= 0 and summary["lost_acked"] == 0 and summary["violations"]["lost"] == 0
    assert n == 0 and not wrote


def test_unclean_election_loss_is_one_lost_row(g01):
    c, _ = g01
    s = c.summary()
    rows = c.violations().where("kind = 'lost'").collect()
    assert s["lost_acked"] == len(rows) == s["violations"]["lost"] == 1
    assert [r.record_id for r in rows] == [1]  # "second", acked by the old leader alone
    assert (rows[0].offset, list(rows[0].brokers), rows[0].round) == (1, [0, 1], -1)
    assert "acks=all" in rows[0].detail
    assert s["lost_acked_by_acks"] == {"all": 1, "1": 0, "0": 0}
    # run() wrote the table; the Spark view reads it back in the same order and schema
    table = DeltaTable(os.path.join(c.out, "tables", "violations")).to_pandas()
    assert sorted(table["kind"]) == sorted(r.kind for r in c.violations().collect())
    assert c.violations().schema.simpleString() == (
        "struct<round:bigint,time_ms:bigint,kind:string,topic:string,partition:int,brokers:array<int>,"
        "offset:bigint,record_id:bigint,detail:string>")
    with open(os.path.join(c.out, "summary.json")) as f:
        assert json.load(f) == s


# ---------------------------------------------------------------------- slices
class Cases:
    """Hand-built rows of a run, case by case on partitions of their own (`add(base, table=rows)`: each case's
    partitions are base + its partition numbers)."""

    def __init__(self) -> None:
        self.rows: dict[str, list[dict]] = {"log": [], "replica_state": [], "partition_state": [], "produce_results": []}

    def add(self, base: int, **tables: list[dict]) -> None:
        for name, rs_ in tables.items():
            self.rows[name] += [{**r, "partition": base + r["partition"]} for r in rs_]


def every_kind_of_finding() -> Cases:
    """One case per kind of finding (lost and pending, divergent, HwWithinLeo with no final row,
    LeaderHwMonotonic / UniqueLeaderPerEpoch / StrongIsr, a topic created twice), on partitions 0-49."""
    cases = Cases()
    add = cases.add
    add(0, log=[rec(0, 0, 0), rec(0, 1, 2), rec(0, 2, 4), rec(1, 0, 0), rec(1, 1, 2)],  # lost and pending
        replica_state=[rs(9, 0, 3, 2), rs(9, 1, 2, 2)],
        partition_state=[ps(-100, 0, [0, 1]), ps(-100, 0, [0, 1], partition=1),
                         ps(500, -1, [0], epoch=1, version=1, partition=1)],
        produce_results=[res(0, 0), res(1, 1, acks=1), res(2, 1), res(3, None, acked=False), res(4, 2),
                         res(5, 0, partition=1), res(6, 0, acks=0)])
    add(10, log=[rec(0, o, r) for o, r in enumerate([0, 1, 2])] + [rec(1, o, r) for o, r in enumerate([0, 9, 8])],
        replica_state=[rs(9, 0, 3, 3), rs(9, 1, 3, 3)], partition_state=[ps(-100, 0, [0, 1])])  # divergent
    add(20, replica_state=[rs(3, 0, 5, 5), rs(3, 1, 4, 5), rs(4, 1, 5, 5)],  # HwWithinLeo, no final row
        partition_state=[ps(-100, 0, [0, 1])], produce_results=[res(7, 0)])
    add(30, replica_state=[rs(1, 0, 6, 5, epoch=1), rs(2, 0, 6, 4, epoch=1), rs(1, 1, 3, 2), rs(2, 1, 0, 0)],
        partition_state=[ps(-100, 0, [0, 1], epoch=1), ps(100, 1, [0, 1], epoch=1, version=1)])
    add(40, replica_state=[rs(9, 0, 3, 3)],  # a topic created twice
        partition_state=[ps(-100, 0, [0, 1]), ps(300, -2, [], epoch=-2, version=-1), ps(500, 1, [1, 0])])
    return cases


def test_an_audit_in_slices_of_partitions_finds_what_one_pass_finds(tmp_path):
    """The checker reads a large run in slices of whole partitions (checker.AUDIT_ROWS rows each, spilled to
    local files in one pass): one slice per partition gives the same summary and violations as one pass, also for a slice with no final replica
    (its partitions unjudged) and with a recreated topic elsewhere in the run."""
    rows = every_kind_of_finding().rows
    out = make_run(str(tmp_path), **rows)
    meta = json.load(open(os.path.join(out, "run.json")))
    tables_dir = os.path.join(out, "tables")
    whole, sliced = audit(tables_dir, meta), audit(tables_dir, meta, rows=1)
    assert len(checker._slices(tables_dir, 1)) > 5 and checker._slices(tables_dir, 10**9) == [0]
    assert sliced[0] == whole[0]
    pd.testing.assert_frame_equal(sliced[1], whole[1])
    assert set(whole[1]["kind"]) >= {"lost", "pending", "divergent", "HwWithinLeo", "LeaderHwMonotonic",
                                     "UniqueLeaderPerEpoch", "StrongIsr"}
