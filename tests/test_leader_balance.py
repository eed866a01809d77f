"""Preferred-replica election (KIP-460 ElectLeaders, the tool and the event) and the automatic leader
rebalance: golden I-01, I-02, I-03 and the seed's 8-broker example."""

from __future__ import annotations

from sparkkafka import Cluster, parse_scenario

FAST = {"zookeeper.session.timeout.ms": 1000, "auto.leader.rebalance.enable": False,
        "replica.lag.time.max.ms": 1000}


def _state(c, topic="t", partition=0):
    s, _ = c.control.zk.get_partition_state((topic, partition))
    return s["leader"], s["leader_epoch"], sorted(s["isr"])


def _cluster(spark, out, brokers, topics, config=None, timeline=(), until_ms=300, emulator=None):
    emu = {"round.ms": 200, **(emulator or {})}  # 200 ms rounds: half the cost, same outcomes
    sc = parse_scenario({"cluster": {"brokers": brokers, "config": {**FAST, **(config or {})}, "emulator": emu},
                         "topics": topics, "timeline": list(timeline), "run": {"until_ms": until_ms}}, name="balance")
    return Cluster.from_scenario(sc, spark=spark, engine="local", out=out).run()


def test_i01_preferred_election_back_to_back_and_offline_no_op(spark, tmp_out):
    """Golden I-01: [O, C]: O shuts down -> C at epoch 1; O returns to the ISR, still epoch 1; the
    preferred election makes O leader at epoch 2; again: 3 and 4; with O down the election is a no-op."""
    c = _cluster(spark, tmp_out, [0, 1], [{"name": "t", "assignment": {0: [1, 0]}}],
                 timeline=[{"at": 0, "produce": {"topic": "t", "partition": 0, "records": 5, "acks": "all"}}])
    assert c.control.controller_id() == 0 and _state(c) == (1, 0, [0, 1])
    c.apply({"shutdown": 1})
    c.step(2)
    assert _state(c) == (0, 1, [0])
    for want in (2, 4):
        c.apply({"restart": 1})
        c.step(13)
        assert _state(c) == (0, want - 1, [0, 1])  # back in the ISR: no epoch bump
        assert c.elect_leaders("preferred", [("t", 0)]) == {("t", 0): None}
        assert _state(c)[:2] == (1, want)
        if want == 2:  # the back-to-back cycle
            c.apply({"shutdown": 1})
            c.step(2)
            assert _state(c)[:2] == (0, 3)
    c.apply({"shutdown": 1})
    c.step(2)
    before = _state(c)
    res = c.elect_leaders("preferred", [("t", 0)])
    assert res[("t", 0)][0] == "PREFERRED_LEADER_NOT_AVAILABLE"
    assert _state(c) == before


def test_i02_elect_leaders_api_results(spark, tmp_out):
    """Golden I-02: ElectionNotNeeded for a partition already led by its preferred replica (an
    all-partitions request leaves it out); after reassigning to [1,2,0] only the elected one moves;
    unknown partitions fail alone; a preferred replica out of the ISR is not elected."""
    c = _cluster(spark, tmp_out, [0, 1, 2], [{"name": "t", "assignment": {0: [0, 1, 2], 1: [0, 1, 2]}}])
    p1, p2 = ("t", 0), ("t", 1)
    assert c.elect_leaders("preferred", [p1])[p1][0] == "ELECTION_NOT_NEEDED"
    assert c.elect_leaders("preferred", None) == {}
    plan = {"version": 1, "partitions": [{"topic": "t", "partition": p, "replicas": [1, 2, 0]} for p in (0, 1)]}
    assert c.reassign(plan) == {p1: None, p2: None}
    c.step(3)
    assert _state(c, *p1)[0] == 0 and _state(c, *p2)[0] == 0  # reassignment alone moves no leader
    assert c.elect_leaders("preferred", [p1]) == {p1: None}
    assert _state(c, *p1)[0] == 1 and _state(c, *p2)[0] == 0
    assert c.elect_leaders("preferred", None) == {p2: None}
    assert _state(c, *p2)[0] == 1
    res = c.elect_leaders("preferred", [("nope", 0), p1])
    assert res[("nope", 0)][0] == "UNKNOWN_TOPIC_OR_PARTITION" and res[p1][0] == "ELECTION_NOT_NEEDED"
    plan = {"version": 1, "partitions": [{"topic": "t", "partition": p, "replicas": [2, 0, 1]} for p in (0, 1)]}
    c.reassign(plan)
    c.step(3)
    assert c.elect_leaders("preferred", [p1]) == {p1: None} and _state(c, *p1)[0] == 2
    plan = {"version": 1, "partitions": [{"topic": "t", "partition": p, "replicas": [1, 2, 0]} for p in (0, 1)]}
    c.reassign(plan)
    c.apply({"crash": 1})
    c.step(13)  # its session ends and it leaves the ISRs
    assert 1 not in _state(c, *p1)[2]
    res = c.elect_leaders("preferred", [p1])
    assert res[p1][0] == "PREFERRED_LEADER_NOT_AVAILABLE" and _state(c, *p1)[0] == 2
    res = c.elect_leaders("preferred", None)
    assert {tp: r[0] for tp, r in res.items()} == {p1: "PREFERRED_LEADER_NOT_AVAILABLE",
                                                    p2: "PREFERRED_LEADER_NOT_AVAILABLE"}


def test_i03a_auto_rebalance_restores_the_preferred_leader(spark, tmp_out):
    """Golden I-03 case a: [1, 0] with auto rebalance: broker 1 shuts down (leader 0, epoch 1), comes
    back, and the periodic check makes it leader at epoch 2 with no manual trigger."""
    c = _cluster(spark, tmp_out, [0, 1], [{"name": "t", "assignment": {0: [1, 0]}}],
                 config={"auto.leader.rebalance.enable": True, "leader.imbalance.check.interval.seconds": 1},
                 timeline=[{"at": 0, "produce": {"topic": "t", "partition": 0, "records": 3, "acks": "all"}},
                           {"at": 500, "shutdown": 1}, {"at": 800, "restart": 1}], until_ms=6000)
    # the first check runs 5 s after the controller took office (KafkaController.onControllerFailover)
    rows = [(r.leader, r.leader_epoch) for r in c.partition_state().where("topic = 't'").collect()]
    assert (0, 1) in rows and rows[-1] == (1, 2)


def _i03(spark, out, during: bool, case: str):
    """Golden I-03 cases b and c; C = 0 (the controller), Lb = 1, O = 2."""
    cfg = {"auto.leader.rebalance.enable": True, "leader.imbalance.check.interval.seconds": 1}
    emu = {"auto.rebalance.during.reassignment": during}
    if case == "b":
        topics = [{"name": "t", "assignment": {0: [1, 0]}}, {"name": "reassigning", "assignment": {0: [0]}}]
        tl = [{"at": 0, "shutdown": 1}, {"at": 200, "shutdown": 2},
              {"at": 400, "reassign": {"via": "zookeeper", "plan": {"version": 1, "partitions": [
                  {"topic": "reassigning", "partition": 0, "replicas": [2]}]}}},
              {"at": 600, "restart": 1}]
    else:
        topics = [{"name": "t", "assignment": {0: [0, 1]}}]
        tl = [{"at": 0, "shutdown": 2},
              {"at": 200, "reassign": {"via": "zookeeper", "plan": {"version": 1, "partitions": [
                  {"topic": "t", "partition": 0, "replicas": [1, 0, 2]}]}}}]
    return _cluster(spark, out, [0, 1, 2], topics, config=cfg, timeline=tl, until_ms=5500, emulator=emu)


def test_i03b_other_reassignment_blocks_the_rebalance_in_28_not_later(spark, tmp_path):
    """Golden I-03 case b. Kafka 2.8's check skips every partition while any reassignment runs, so tp
    stays with C; the later controller the golden test ran (`emulator.auto.rebalance.during.
    reassignment: true`) moves it back to Lb at epoch 2. Once O returns the stuck move completes:
    leader O at epoch 4, assignment [O]."""
    c28 = _i03(spark, str(tmp_path / "28"), False, "b")
    assert _state(c28)[:2] == (0, 1)
    later = _i03(spark, str(tmp_path / "later"), True, "b")
    assert _state(later)[:2] == (1, 2)
    for c in (c28, later):
        c.apply({"restart": 2})
        c.step(13)
        assert _state(c, "reassigning", 0)[:2] == (2, 4)
        assert c.control.zk.topic_assignment("reassigning") == {0: [2]}
        assert c.control.zk.reassign_partitions() is None
    c28.step(15)  # nothing is moving now: 2.8's check runs again and restores Lb
    assert _state(c28)[0] == 1


def test_i03c_rebalance_of_the_partition_being_reassigned(spark, tmp_out):
    """Golden I-03 case c (later-controller behaviour): [C, Lb] -> [Lb, C, O] stuck on O; the
    target's head Lb is preferred already, the rebalance makes it leader at epoch 2; when O
    returns the move completes with Lb leading (epoch 3 on the way) and assignment [Lb, C, O]."""
    c = _i03(spark, tmp_out, True, "c")
    assert _state(c)[:2] == (1, 2)
    c.apply({"restart": 2})
    c.step(13)
    rows = [(r.leader, r.leader_epoch) for r in c.partition_state().where("topic = 't'").collect()]
    assert (1, 3) in rows
    assert _state(c)[0] == 1 and c.control.zk.topic_assignment("t") == {0: [1, 0, 2]}


def test_seed_preferred_election_after_failures(spark, tmp_out):
    """The seed's example: topic1 (RF 3, 8 partitions) on 8 brokers; brokers 1, 2, 4 stop, their
    leaderships move; 1 restarts and leads nothing until the election moves back every partition
    whose preferred replica is alive and in the ISR; after the rest return a second run makes every
    preferred replica the leader."""
    c = _cluster(spark, tmp_out, list(range(8)),
                 [{"name": "topic1", "partitions": 8, "replication_factor": 3}],
                 timeline=[{"at": 0, "produce": {"topic": "topic1", "partition": "all", "records": 16,
                                                 "acks": "all"}}])
    pref = {p: r[0] for p, r in c.control.zk.topic_assignment("topic1").items()}
    for b in (1, 2, 4):
        c.apply({"shutdown": b})
    c.step(3)
    c.apply({"restart": 1})
    c.step(13)
    leaders = {p: _state(c, "topic1", p)[0] for p in range(8)}
    assert 1 not in leaders.values() and any(leaders[p] != pref[p] for p in range(8))
    res = c.elect_leaders("preferred", None)
    for p in range(8):
        leader, _, isr = _state(c, "topic1", p)
        if pref[p] in (2, 4):
            assert leader == leaders[p] and res[("topic1", p)][0] == "PREFERRED_LEADER_NOT_AVAILABLE"
        else:
            assert leader == pref[p] and pref[p] in isr
    c.apply({"restart": 2})
    c.apply({"restart": 4})
    c.step(13)
    c.elect_leaders("preferred", None)
    assert all(_state(c, "topic1", p)[0] == pref[p] for p in range(8))
