"""A log dir fails (KIP-112): ReplicaManager.handleLogDirFailure and the LeaderAndIsr / produce answers of
offline replicas (protocol/log_dir_failure.py, produce.py), plus one end-to-end run."""

from __future__ import annotations

import harness as H
import pandas as pd
import pytest

from sparkkafka import Cluster, parse_scenario
from sparkkafka.protocol import alter_log_dirs as A
from sparkkafka.protocol import frames as F
from sparkkafka.protocol import produce
from sparkkafka.protocol.leader_and_isr import become_leader_or_follower, new_broker_rows
from sparkkafka.protocol.log_dir_failure import fail_log_dirs, offline_dirs_now, screen_leader_and_isr

DIRS = ["d0", "d1"]
CFG = H.settings("2.8", replica_lag_time_max_ms=30000)


def replica(b, t, p, d, **kw):
    return {"broker": b, "topic": t, "partition": p, "log_dir": d, **kw}


def reps(*rows):
    return F.new_replicas(pd.DataFrame(list(rows)))


def lai(b, t, p, leader, epoch=1, is_new=False, ctrl=1):
    return H.lai(b, leader, (leader,), (leader,), epoch, ctrl, t, p, is_new)


def batch(b, t, p, acks=1, n=1):
    return H.batch(n, acks, broker=b, topic=t, partition=p)


def test_offline_dirs_now_joins_known_and_new_failures():
    got = offline_dirs_now({1: frozenset({"d0"})}, pd.DataFrame({"broker": [1, 2], "log_dir": ["d1", "d0"]}))
    assert got == {1: frozenset({"d0", "d1"}), 2: frozenset({"d0"})}


def test_replicas_in_the_failed_dir_go_offline_and_are_reported_once():
    r = reps(replica(1, "t", 0, "d0", leader=1, leader_epoch=0), replica(1, "t", 1, "d1", leader=2, leader_epoch=0))
    rem = F.conform(pd.DataFrame([{"broker": 1, "topic": "t", "partition": 0, "replica": 2, "leo": 0,
                                   "log_start_offset": 0, "last_caught_up_ms": 0, "last_fetch_leader_leo": 0,
                                   "last_fetch_ms": 0, "in_isr": True, "leo_changed_ms": 0}]), F.REMOTE)
    tail = F.conform(pd.DataFrame([{"broker": 1, "src": 1, "topic": "t", "partition": 0, "offset": 0, "leader_epoch": 0,
                                    "record_id": 0, "value_bytes": 1, "key": None, "timestamp": 0}]), F.RECORD)
    fut = A.new_futures(pd.DataFrame([replica(1, "t", 1, "d0"), replica(1, "x", 0, "d1")]))
    down = {1: frozenset({"d0"})}
    r2, rem2, fut2, off, tail2, newly, halts = fail_log_dirs(r, rem, fut, F.empty(F.OFFLINE_REPLICA), tail, down,
                                                             DIRS, "2.8", [1])
    assert list(zip(r2["topic"], r2["partition"], strict=True)) == [("t", 1)]
    assert rem2.empty and tail2.empty and halts.empty
    assert list(zip(newly["partition"], newly["log_dir"], strict=True)) == [(0, "d0")]
    assert list(zip(off["partition"], off["log_dir"], strict=True)) == [(0, "d0")]
    # the future log in the failed dir is dropped silently; one whose current log is alive is kept
    assert list(zip(fut2["topic"], fut2["log_dir"], strict=True)) == [("x", "d1")]
    # next round: nothing new to report (the dir stays offline, its replicas are already gone)
    *_, newly_again, _ = fail_log_dirs(r2, rem2, fut2, off, tail2, down, DIRS, "2.8", [1])
    assert newly_again.empty


def test_future_logs_of_a_replica_going_offline_are_dropped():
    r = reps(replica(1, "t", 0, "d0"))
    fut = A.new_futures(pd.DataFrame([replica(1, "t", 0, "d1")]))
    _, _, fut2, *_ = fail_log_dirs(r, F.empty(F.REMOTE), fut, F.empty(F.OFFLINE_REPLICA), F.empty(F.RECORD),
                                   {1: frozenset({"d0"})}, DIRS, "2.8", [1])
    assert fut2.empty


def test_broker_halts_when_no_live_dir_remains_and_before_jbod_support():
    r = reps(replica(1, "t", 0, "d0"))
    args = (F.empty(F.REMOTE), F.empty(F.FUTURE), F.empty(F.OFFLINE_REPLICA), F.empty(F.RECORD))
    *_, halts = fail_log_dirs(r, *args, {1: frozenset(DIRS)}, DIRS, "2.8", [1])
    assert list(halts["broker"]) == [1] and "all log dirs in d0, d1 have failed" in halts["message"].iat[0]
    *_, halts = fail_log_dirs(r, *args, {1: frozenset({"d1"})}, DIRS, "2.8", [1])
    assert halts.empty
    *_, halts = fail_log_dirs(r, *args, {1: frozenset({"d1"})}, DIRS, "0.10", [1])  # IBP < 1.0
    assert list(halts["broker"]) == [1] and "Halting broker because dir d1 is offline" in halts["message"].iat[0]


def test_produce_to_an_offline_replica_gets_kafka_storage_error():
    r = reps(replica(1, "t", 1, "d1", leader=1, isr="1", leader_epoch=0))
    off = F.conform(pd.DataFrame([replica(1, "t", 0, "d0")]), F.OFFLINE_REPLICA)
    b = F.concat([batch(1, "t", 0), batch(1, "t", 1)], F.PRODUCE)
    _, recs, res, _ = produce.append_to_leader(r, F.empty(F.REMOTE), b, pd.Series({"t": 1}), 0, CFG, offline=off)
    assert dict(zip(res["partition"], res["error"], strict=True)) == {0: "KAFKA_STORAGE_ERROR", 1: None}
    assert list(recs["partition"]) == [1]
    pend = F.conform(batch(1, "t", 0, acks=-1).assign(base_offset=0, required_offset=1), F.PENDING)
    still, done = produce.complete_delayed_produce(r, pend, pd.Series({"t": 1}), 0, offline=off)
    assert still.empty and list(done["error"]) == ["KAFKA_STORAGE_ERROR"]


def test_leader_and_isr_for_an_offline_replica_is_answered_again_and_not_recreated():
    off = F.conform(pd.DataFrame([replica(1, "t", 0, "d0")]), F.OFFLINE_REPLICA)
    brk = new_broker_rows([1])
    down = {1: frozenset({"d0"})}
    ok, off2, report = screen_leader_and_isr(lai(1, "t", 0, 1), F.empty(F.REPLICA), off, brk, down, DIRS)
    assert ok.empty and list(zip(report["partition"], report["log_dir"], strict=True)) == [(0, "d0")]
    assert len(off2) == 1


def test_non_new_replica_not_created_while_a_dir_is_offline_but_a_new_one_is():
    brk = new_broker_rows([1])
    down = {1: frozenset({"d0"})}
    reqs = F.concat([lai(1, "t", 0, 1, is_new=False), lai(1, "u", 0, 1, is_new=True)], F.LEADER_AND_ISR)
    ok, off, report = screen_leader_and_isr(reqs, F.empty(F.REPLICA), F.empty(F.OFFLINE_REPLICA), brk, down, DIRS)
    assert list(report["topic"]) == ["t"] and list(off["topic"]) == ["t"] and list(off["log_dir"]) == [""]
    r, *_ = become_leader_or_follower(F.empty(F.REPLICA), F.empty(F.REMOTE), brk, ok, DIRS, 0, offline_dirs=down)
    assert list(zip(r["topic"], r["log_dir"], strict=True)) == [("u", "d1")]  # a live dir, not the failed one


def test_remembered_dir_that_failed_refuses_creation():
    brk = new_broker_rows([1])
    pref = F.conform(pd.DataFrame([replica(1, "t", 0, "d0")]), F.PREFERRED_DIR)
    ok, off, report = screen_leader_and_isr(lai(1, "t", 0, 1, is_new=True), F.empty(F.REPLICA),
                                            F.empty(F.OFFLINE_REPLICA), brk, {1: frozenset({"d0"})}, DIRS, pref)
    assert ok.empty and list(report["topic"]) == ["t"]


def test_stale_controller_request_is_not_screened():
    brk = new_broker_rows([1]).assign(controller_epoch=5)
    ok, off, report = screen_leader_and_isr(lai(1, "t", 0, 1, ctrl=1), F.empty(F.REPLICA), F.empty(F.OFFLINE_REPLICA),
                                            brk, {1: frozenset({"d0"})}, DIRS)
    assert len(ok) == 1 and report.empty  # become_leader_or_follower ignores it (STALE_CONTROLLER_EPOCH)


# ---------------------------------------------------------------------------------------------------- end to end


@pytest.fixture
def fail_log_dir_supported(monkeypatch):
    from sparkkafka.scenario import loader

    monkeypatch.setattr(loader, "NOT_YET_SUPPORTED", loader.NOT_YET_SUPPORTED - {"fail_log_dir"})


def test_e2e_leader_dir_fails(spark, tmp_out, fail_log_dir_supported):
    """Broker 1 leads t-0 from d0 and d0 fails: produce to it gets KAFKA_STORAGE_ERROR, the broker reports the
    replica offline, the controller elects broker 2 and takes broker 1 out of the ISR; broker 1 keeps running
    on d1. After a restart it loads nothing from d0 and its replica stays offline."""
    sc = parse_scenario({
        "cluster": {"brokers": [1, 2], "log_dirs": DIRS, "config": {"zookeeper.session.timeout.ms": 1000}},
        "topics": [{"name": "t", "partitions": 1, "replication_factor": 2, "assignment": {0: [1, 2]}}],
        "timeline": [
            {"at": 0, "produce": {"topic": "t", "partition": 0, "rate_per_sec": 50, "duration_ms": 2000, "acks": "all"}},
            {"at": 1000, "fail_log_dir": {"broker": 1, "log_dir": "d0"}},
            {"at": 1500, "crash": 1}, {"at": 1800, "restart": 1},
        ],
        "run": {"until_ms": 3000},
    }, name="dirfail")
    c = Cluster.from_scenario(sc, spark=spark, engine="local", out=tmp_out)
    c.run()
    res = c.produce_results().toPandas()
    failed = res[res["error"] == "KAFKA_STORAGE_ERROR"]
    assert len(failed) and set(failed["time_ms"]) == {1000}
    assert res[res["time_ms"] >= 1300]["acked"].all()  # the new leader takes the writes
    ps = c.partition_state().toPandas().sort_values("time_ms", kind="stable")
    assert ps.iloc[-1]["leader"] == 2 and list(ps.iloc[-1]["isr"]) == [2]
    first_after = ps[ps["time_ms"] >= 1000].iloc[0]
    assert first_after["leader"] == 2 and first_after["time_ms"] <= 1200
    rs = c.replica_state().toPandas()
    # offline from round 10: no longer a hosted replica, not even after the restart (d0 stays failed)
    assert rs[(rs["broker"] == 1)]["round"].max() == 9
    assert 1 not in c.crashed
    assert c.state_change_log().where("message like '%went offline%'").count() >= 1
    lg = c.log().where("broker = 1").toPandas()
    assert set(lg["log_dir"]) == {"d0"} and lg["offset"].max() < 60  # nothing written for it after the failure
