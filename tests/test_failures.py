"""The controller and failures, end to end: elections, ISR changes, min ISR, unclean election,
controller failover and a zombie controller, as a user would check them in the tables."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as Fn

from sparkkafka import Cluster, parse_scenario

FAST = {"zookeeper.session.timeout.ms": 1000, "replica.lag.time.max.ms": 1000}


def run(spark, out, brokers, topics, timeline, until_ms, config=None, name="t"):
    sc = parse_scenario({"cluster": {"brokers": brokers, "config": {**FAST, **(config or {})}},
                         "topics": topics, "timeline": timeline, "run": {"until_ms": until_ms}}, name=name)
    c = Cluster.from_scenario(sc, spark=spark, engine="local", out=out)
    c.run()
    m = c.metrics()  # exactly one controller in every round that has a live broker, none otherwise
    assert m.where("active_controller != if(live_brokers > 0, 1, 0)").count() == 0
    return c


def state_at(c, t, topic="t", partition=0):
    """The partition's latest ZooKeeper state at or before time t."""
    rows = (c.partition_state().where((Fn.col("topic") == topic) & (Fn.col("partition") == partition)
                                      & (Fn.col("time_ms") <= t)).collect())
    return rows[-1]


def produce(at, n=1, acks="all", partition=0):
    return {"at": at, "produce": {"topic": "t", "partition": partition, "records": n, "acks": acks}}


ONE = [{"name": "t", "partitions": 1, "replication_factor": 2, "assignment": {0: [0, 1]}}]


def test_seed_narrative_failover_and_restart(spark, tmp_out):
    """8 brokers, 8 partitions at RF 3; stopping 1, 2 and 4 moves every affected
    leadership to the first surviving ISR replica in assignment order; broker 1 comes back into
    the ISRs but leads nothing."""
    topics = [{"name": "t", "partitions": 8, "replication_factor": 3}]
    c = run(spark, tmp_out, list(range(1, 9)), topics,
            [{"at": 0, "produce": {"topic": "t", "partition": "all", "rate_per_sec": 80, "duration_ms": 6000,
                                   "acks": 1}},
             {"at": 1000, "shutdown": 1}, {"at": 1000, "shutdown": 2}, {"at": 1000, "shutdown": 4},
             {"at": 3000, "restart": 1}], 7000)
    before = {r.partition: r for r in c.partition_state().where("time_ms = 0").collect()}
    after = {p: state_at(c, 2900, partition=p) for p in range(8)}
    final = {p: state_at(c, 7000, partition=p) for p in range(8)}
    for p, b in before.items():
        survivors = [x for x in b.replicas if x not in (1, 2, 4) and x in b.isr]
        if b.leader in (1, 2, 4):
            assert after[p].leader == survivors[0], p
        else:
            assert after[p].leader == b.leader, p
        assert final[p].leader == after[p].leader, p  # broker 1 is back but leads nothing
        if 1 in b.replicas:
            assert 1 in final[p].isr, p


def test_unclean_election_enabled_loses_an_acked_write(spark, tmp_out):
    """Golden G-01: with ULE on, F becomes leader unclean; a consumer reads first and third."""
    c = run(spark, tmp_out, [0, 1], ONE,
            [produce(0), {"at": 1000, "shutdown": 1}, produce(1500), {"at": 2000, "shutdown": 0},
             {"at": 2500, "restart": 1}, produce(3500)], 5000, {"unclean.leader.election.enable": True})
    acked = [r.record_id for r in c.produce_results().where("acked").collect()]
    assert acked == [0, 1, 2]
    assert [r.record_id for r in c.consume("t", 0).collect()] == [0, 2]
    assert c.metrics().agg(Fn.sum("unclean_elections")).first()[0] == 1
    s = state_at(c, 5000)
    assert (s.leader, list(s.isr)) == (1, [1])
    assert c.summary()["lost_acked"] == 1


def test_unclean_election_disabled_keeps_the_partition_offline(spark, tmp_out):
    """Golden G-02: with ULE off the partition has no leader and keeps the old leader in its ISR
    until that leader returns; nothing acknowledged is lost."""
    c = run(spark, tmp_out, [0, 1], ONE,
            [produce(0), {"at": 1000, "shutdown": 1}, produce(1500), {"at": 2000, "shutdown": 0},
             {"at": 2500, "restart": 1}, produce(3000), {"at": 3500, "restart": 0},
             produce(4500), {"at": 6000, "shutdown": 0}], 7500)
    s = state_at(c, 3400)
    assert (s.leader, list(s.isr)) == (-1, [0])
    res = {r.record_id: r for r in c.produce_results().collect()}
    assert res[2].error == "LEADER_NOT_AVAILABLE" and not res[2].acked
    assert state_at(c, 4400).leader == 0
    assert state_at(c, 7500).leader == 1  # a clean election of the caught-up follower
    assert [r.record_id for r in c.consume("t", 0).collect()] == [0, 1, 3]
    assert c.metrics().agg(Fn.sum("unclean_elections")).first()[0] == 0
    assert c.summary()["lost_acked"] == 0


def test_single_replica_partition_shut_down(spark, tmp_out):
    """Golden G-03 case a: leader -1, leader epoch 1, ISR [X], whatever ULE says."""
    c = run(spark, tmp_out, [0, 1], [{"name": "t", "partitions": 1, "replication_factor": 1,
                                      "assignment": {0: [1]}}], [{"at": 500, "shutdown": 1}], 1500)
    s = state_at(c, 1500)
    assert (s.leader, s.leader_epoch, list(s.isr)) == (-1, 1, [1])
    assert "\tLeader: none\tReplicas: 1\tIsr: 1" in c.describe()[1]


def test_all_replicas_dead_stays_offline_until_the_last_isr_member_returns(spark, tmp_out):
    c = run(spark, tmp_out, [0, 1], ONE,
            [produce(0), {"at": 500, "crash": 1}, {"at": 2500, "crash": 0}, {"at": 4000, "restart": 1},
             {"at": 6000, "restart": 0}], 8000)
    assert (state_at(c, 2400).leader, list(state_at(c, 2400).isr)) == (0, [0])
    assert (state_at(c, 5900).leader, list(state_at(c, 5900).isr)) == (-1, [0])  # 1 came back first
    assert state_at(c, 8000).leader == 0
    assert c.metrics().where("time_ms between 3600 and 5900 and offline = 1").count() > 0


def test_min_insync_replicas(spark, tmp_out):
    """Golden A-MINISR-01: NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrinks under a pending
    acks=all write, NOT_ENOUGH_REPLICAS before appending with too few in sync, acks=1 unaffected."""
    topics = [{"name": "t", "partitions": 1, "replication_factor": 2, "assignment": {0: [0, 1]},
               "config": {"min.insync.replicas": 2}}]
    c = run(spark, tmp_out, [0, 1], topics,
            [{"at": 500, "pause": {"broker": 1, "duration_ms": 3000}}, produce(600),
             produce(2600), produce(2700, acks=1)], 6000, {"zookeeper.session.timeout.ms": 18000})
    res = {r.record_id: r for r in c.produce_results().collect()}
    assert (res[0].error, res[0].acked) == ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", False)
    assert res[1].error == "NOT_ENOUGH_REPLICAS"
    assert res[2].acked
    assert c.log("t", 0).where("broker = 0").count() == 2  # record 0 stays appended; 1 never was
    assert c.metrics().agg(Fn.sum("isr_shrinks"), Fn.sum("isr_expands")).first() == (1, 1)
    assert list(state_at(c, 6000).isr) == [0, 1]


@pytest.mark.parametrize("lag", [1000, 3000])
def test_paused_follower_leaves_the_isr_within_lag_and_1_5_lag(spark, tmp_out, lag):
    c = run(spark, tmp_out, [0, 1], ONE,
            [{"at": 0, "produce": {"topic": "t", "partition": 0, "rate_per_sec": 50, "duration_ms": 12000,
                                   "acks": 1}},
             {"at": 1000, "pause": {"broker": 1, "duration_ms": 2 * lag}}], 4000 + 3 * lag,
            {"replica.lag.time.max.ms": lag, "zookeeper.session.timeout.ms": 18000})
    caught = c.follower_state().where("replica = 1 and time_ms < 1000").agg(Fn.max("last_caught_up_ms")).first()[0]
    shrink = c.partition_state().where(Fn.size("isr") == 1).orderBy("time_ms").first().time_ms
    assert caught + lag <= shrink <= caught + 1.5 * lag + 100 + 100  # + one round, + the AlterIsr hop
    assert list(state_at(c, 4000 + 3 * lag).isr) == [0, 1]  # it rejoined after catching up


def test_controller_failover_raises_the_epoch_by_one(spark, tmp_out):
    c = run(spark, tmp_out, [0, 1, 2], ONE, [{"at": 500, "controller_failover": {}},
                                           {"at": 1000, "controller_failover": {}}], 1500)
    epochs = [r.controller_epoch for r in c.metrics().select("controller_epoch").distinct().orderBy("controller_epoch").collect()]
    assert epochs == [1, 2, 3]


def test_zombie_controllers_late_leader_and_isr_is_refused(spark, tmp_out):
    """Broker 0 (the controller) sends LeaderAndIsr for restarted broker 2, then stalls past its
    session: its queued requests reach broker 2 after the new controller's, with the old epoch."""
    c = run(spark, tmp_out, [0, 1, 2], [{"name": "t", "partitions": 1, "replication_factor": 3,
                                         "assignment": {0: [1, 2, 0]}}],
            [{"at": 300, "crash": 2}, {"at": 1400, "restart": 2},  # after its session ended at 1300
             {"at": 1500, "pause": {"broker": 0, "duration_ms": 2000}}], 4500)
    assert [r.controller_epoch for r in c.metrics().where("time_ms = 4500").collect()] == [2]
    lines = [r.message for r in c.state_change_log().where("broker = 2").collect()]
    assert any("controller epoch 1 is old" in m and "Latest known controller epoch is 2" in m for m in lines)


def test_topic_deletion(spark, tmp_out):
    """Deletion goes through the controller: StopReplica with delete to every replica, the rows
    leave the log; while a replica is offline the topic waits."""
    topics = [{"name": "t", "partitions": 2, "replication_factor": 2, "assignment": {0: [0, 1], 1: [1, 0]}},
              {"name": "keep", "partitions": 1, "replication_factor": 2, "assignment": {0: [0, 1]}}]
    c = run(spark, tmp_out, [0, 1], topics,
            [{"at": 0, "produce": {"topic": "t", "partition": "all", "records": 6, "acks": 1}},
             {"at": 0, "produce": {"topic": "keep", "partition": 0, "records": 3, "acks": 1}},
             {"at": 500, "crash": 1}, {"at": 2000, "delete_topic": "t"}, {"at": 3000, "restart": 1}], 4500)
    lines = [r.message for r in c.state_change_log().collect()]
    assert any("Topic t is ineligible for deletion" in m for m in lines)
    assert any("Deletion of topic t successfully completed" in m for m in lines)
    assert c.log(topic="t").count() == 0
    assert c.log(topic="keep").count() == 6  # both replicas of the other topic are intact
    assert not any(x.startswith("Topic: t\t") or "\tTopic: t\t" in x for x in c.describe())


def test_topic_deletion_disabled_changes_nothing(spark, tmp_out):
    c = run(spark, tmp_out, [0, 1], ONE, [produce(0, n=4, acks=1), {"at": 500, "delete_topic": "t"}], 1500,
            {"delete.topic.enable": False})
    assert c.log(topic="t").count() == 8
    assert any("Topic deletion is disabled" in r.message for r in c.state_change_log().collect())


@pytest.mark.parametrize("ibp, flaps", [("0.8", True), ("2.8", False), ("2.1", False)])
def test_isr_flapping_under_the_old_lag_policy(spark, tmp_out, ibp, flaps):
    """With replica.lag.max.messages (IBP 0.8; KIP-16 removed it in 0.9) every burst larger than it expels the
    followers, which rejoin as soon as they catch up; the time-based policy keeps them."""
    bursts = [{"at": t, "produce": {"topic": "t", "partition": 0, "records": 10, "acks": 1}}
              for t in range(1000, 6000, 1000)]
    c = run(spark, tmp_out, [0, 1], ONE, bursts, 6500,
            {"inter.broker.protocol.version": ibp, "replica.lag.max.messages": 4})
    shrinks, expands = c.metrics().agg(Fn.sum("isr_shrinks"), Fn.sum("isr_expands")).first()
    if flaps:
        assert shrinks >= 3 and expands >= 3
    else:
        assert (shrinks, expands) == (0, 0)
    assert list(state_at(c, 6500).isr) == [0, 1]
