"""End-to-end behaviour of the round engine on Spark, asserted on the tables users read."""

from __future__ import annotations

import os

import pyarrow.parquet as pq
import pytest
from chispa import assert_df_equality
from deltalake import DeltaTable
from pyspark.sql import functions as Fn

from sparkkafka import Cluster, parse_scenario
from sparkkafka.storage import broker_disk

PAIR = {
    "cluster": {"brokers": [1, 2]},
    "topics": [{"name": "t", "partitions": 1, "replication_factor": 2, "assignment": {0: [1, 2]}}],
}


def scenario(timeline, until_ms, **extra):
    return parse_scenario({**PAIR, **extra, "timeline": timeline, "run": {"until_ms": until_ms}}, name="test")


def five_values(c):
    """Per round: leader LEO, the leader's view of the follower's LEO, leader HW, follower LEO, HW."""
    rs = c.replica_state()
    lead = rs.where("broker = 1").select("round", Fn.col("leo").alias("leader_leo"), Fn.col("hw").alias("leader_hw"))
    fol = rs.where("broker = 2").select("round", Fn.col("remote_leo"), Fn.col("leo").alias("follower_leo"),
                                        Fn.col("hw").alias("follower_hw"))
    return lead.join(fol, "round").select("round", "leader_leo", "remote_leo", "leader_hw", "follower_leo",
                                          "follower_hw").orderBy("round")


def test_seed_hw_table(spark, tmp_out):
    """Golden A-HW-02 / the seed's HW table: 1 0 0 0 0 -> 1 0 0 1 0 -> 1 1 1 1 0 -> 1 1 1 1 1."""
    sc = scenario([{"round": 2, "produce": {"topic": "t", "partition": 0, "records": 1, "acks": 1}}], 1200)
    c = Cluster.from_scenario(sc, spark=spark, out=tmp_out)
    c.run()
    got = five_values(c).where("round >= 2 and round <= 11")
    wait = 500 // 100  # replica.fetch.wait.max.ms in rounds: the parked fetch that reports HW 1
    rows = [(2, 1, 0, 0, 0, 0), (3, 1, 0, 0, 1, 0)]
    rows += [(r, 1, 1, 1, 1, 0) for r in range(4, 4 + wait + 1)]
    rows += [(r, 1, 1, 1, 1, 1) for r in range(4 + wait + 1, 12)]
    expected = spark.createDataFrame(rows, got.schema)
    assert_df_equality(got, expected)


def test_acks_levels(spark, tmp_out):
    """acks=1 is answered at append, acks=all when the HW passes it, acks=0 never. (acks=2 cannot be sent: the
    scenario refuses it as the producer config does; the broker's INVALID_REQUIRED_ACKS is tested in test_protocol.)"""
    sc = parse_scenario({
        "cluster": {"brokers": [1, 2]},
        "topics": [{"name": "t", "partitions": 4, "replication_factor": 2,
                    "assignment": {0: [1, 2], 1: [1, 2], 2: [1, 2], 3: [1, 2]}}],
        "timeline": [{"round": 2, "produce": {"topic": "t", "partition": p, "records": 1, "acks": a}}
                     for p, a in enumerate([1, "all", 0])],
        "run": {"until_ms": 1200},
    }, name="acks")
    c = Cluster.from_scenario(sc, spark=spark, out=tmp_out)
    c.run()
    res = {r["partition"]: r for r in c.produce_results().collect()}
    assert (res[0]["acked"], res[0]["time_ms"], res[0]["offset"], res[0]["error"]) == (True, 200, 0, None)
    # acks=all: the follower's second fetch (round 4) moves the HW past offset 0
    assert (res[1]["acked"], res[1]["time_ms"], res[1]["offset"], res[1]["error"]) == (True, 400, 0, None)
    hw_at_ack = c.replica_state().where("broker = 1 and partition = 1 and round = 4").first()["hw"]
    assert hw_at_ack == 1
    assert (res[2]["acked"], res[2]["error"], res[2]["offset"]) == (False, None, None)
    assert sorted(res) == [0, 1, 2]
    assert c.log(topic="t", partition=2).count() == 2  # acks=0 was appended and replicated all the same


def test_follower_crash_restart_catches_up_from_checkpoint(spark, tmp_out):
    sc = scenario([
        {"at": 0, "produce": {"topic": "t", "partition": 0, "rate_per_sec": 100, "duration_ms": 4000, "acks": 1}},
        {"at": 1500, "crash": 2},
        {"at": 3000, "restart": 2},
    ], 6000, cluster={"brokers": [1, 2], "config": {"replica.high.watermark.checkpoint.interval.ms": 1000,
                                                     "zookeeper.session.timeout.ms": 1000}})
    c = Cluster.from_scenario(sc, spark=spark, out=tmp_out)
    c.run()
    rs = c.replica_state()
    assert rs.where("broker = 2 and time_ms > 1500 and time_ms < 3000").count() == 0  # its memory is gone
    ck = broker_disk.read_disk(os.path.join(tmp_out, "brokers"), 2, ["d0"])
    first_back = rs.where("broker = 2 and time_ms = 3000").first()
    before = rs.where("broker = 2 and time_ms = 1000").first()  # the checkpoint written at 1000 ms
    assert first_back["hw"] == before["hw"] > 0  # recovered from replication-offset-checkpoint
    assert first_back["leo"] >= before["leo"]  # its log survived the crash
    # told to follow again (the controller's LeaderAndIsr arrives a round later), a 2.8 follower
    # with an epoch cache keeps its log and fetches from its LEO with lastFetchedEpoch: its records
    # match the leader's epochs, so nothing is truncated (before 0.11 it would cut to its HW)
    follower_again = rs.where("broker = 2 and time_ms = 3100").first()
    assert follower_again["role"] == "follower"
    assert follower_again["leo"] == first_back["leo"] > first_back["hw"]
    assert ck["hw"].iloc[0] >= first_back["hw"]
    logs = {b: c.log(topic="t", partition=0).where(f"broker = {b}").select("offset", "leader_epoch", "record_id")
            for b in (1, 2)}
    assert logs[1].count() == 400
    assert_df_equality(logs[2], logs[1])
    assert c.summary()["lost_acked"] == 0


def test_tables_open_with_deltalake_and_parquet_gives_same_rows(spark, tmp_out):
    sc = scenario([{"at": 0, "produce": {"topic": "t", "partition": 0, "records": 5, "acks": 1}}], 600)
    c = Cluster.from_scenario(sc, spark=spark, out=tmp_out)
    c.run()
    for name in ("log", "replica_state", "partition_state", "produce_results", "metrics"):
        path = os.path.join(tmp_out, "tables", name)
        dt = DeltaTable(path)
        via_delta = dt.to_pandas()
        via_spark = c._df(name).toPandas()
        assert len(via_delta) == len(via_spark) > 0, name
        cols = [x for x in via_delta.columns if x not in ("isr", "replicas", "adding", "removing")]
        a = via_delta[cols].sort_values(cols).reset_index(drop=True)
        b = via_spark[cols].sort_values(cols).reset_index(drop=True)
        assert a.astype(str).equals(b.astype(str)), name
    # every data file is plain Parquet without the partition columns, as Delta lays them out
    f = DeltaTable(os.path.join(tmp_out, "tables", "log")).file_uris()[0]
    assert "broker" not in pq.read_schema(f.removeprefix("file://")).names


def test_rerun_of_a_committed_round_is_refused(spark, tmp_out):
    sc = scenario([{"at": 0, "produce": {"topic": "t", "partition": 0, "records": 3, "acks": 1}}], 300)
    c = Cluster.from_scenario(sc, spark=spark, out=tmp_out)
    c.run()
    n = c.log().count()
    assert c.writer.commit("log", [{"path": "x", "size": 1, "partition_values": {}, "modification_time": 0,
                                    "stats": "{}"}], 1) is False
    assert c.log().count() == n


def test_existing_run_is_not_overwritten_and_reopens(spark, tmp_out):
    sc = scenario([{"at": 0, "produce": {"topic": "t", "partition": 0, "records": 2, "acks": 1}}], 300)
    first = Cluster.from_scenario(sc, spark=spark, out=tmp_out).run()
    again = Cluster.for_path(spark, tmp_out)
    assert again.summary() == first.summary() and again.describe() == first.describe()
    assert again.log().count() == first.log().count() == 4
    from sparkkafka import ScenarioError

    with pytest.raises(ScenarioError) as e:
        Cluster.from_scenario(sc, spark=spark, out=tmp_out)
    assert e.value.field == "out"
    assert os.path.exists(os.path.join(tmp_out, "summary.json"))


def test_consumers_read_only_below_the_leader_hw(spark, tmp_out):
    """With the follower crashed the static ISR holds the HW: acks=1 records are in the leader's
    log but invisible to consumers until the follower is back and has caught up."""
    sc = scenario([{"at": 0, "crash": 2},
                   {"at": 100, "produce": {"topic": "t", "partition": 0, "records": 3, "acks": 1}}], 500,
                  cluster={"brokers": [1, 2], "config": {"zookeeper.session.timeout.ms": 1000}})
    c = Cluster.from_scenario(sc, spark=spark, out=tmp_out)
    c.run()
    assert c.log(topic="t", partition=0).where("broker = 1").count() == 3
    assert c.consume("t", 0).count() == 0
    c.apply({"restart": 2})  # registers once its old session has ended (1000 ms)
    c.step(20)
    assert [r.offset for r in c.consume("t", 0).collect()] == [0, 1, 2]


def test_pause_and_isolation_stop_replication_until_they_end(spark, tmp_out):
    sc = scenario([
        {"at": 0, "produce": {"topic": "t", "partition": 0, "rate_per_sec": 100, "duration_ms": 3000, "acks": 1}},
        {"at": 500, "pause": {"broker": 2, "duration_ms": 600}},
        {"at": 1800, "isolate": {"brokers": [2], "from": [1], "duration_ms": 500}},
    ], 3600)
    c = Cluster.from_scenario(sc, spark=spark, out=tmp_out)
    c.run()
    fol = {r.time_ms: r for r in c.replica_state().where("broker = 2").collect()}
    assert fol[500].leo == fol[1000].leo  # a paused broker processes nothing
    assert fol[1200].leo < fol[1500].leo  # and catches up once the pause ends
    assert fol[1900].leo == fol[2200].leo  # cut off from its leader, it fetches nothing
    # the cut failed its fetch: it retries replica.fetch.backoff.ms later, after the heal
    assert fol[2300].leo == fol[2800].leo < fol[3100].leo
    lead = c.replica_state().where("broker = 1 and time_ms = 3500").first()
    assert fol[3500].leo == lead.leo == 300
