"""Partition reassignment (KIP-455, 2.4+ controller) end to end: the seed's walk-through, golden J-01,
cancellation, a move that waits for its target broker, and a run continued from its directory."""

from __future__ import annotations

from sparkkafka import Cluster, parse_scenario


def _plan(*entries):
    return {"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r} for t, p, r in entries]}


def _history(c, topic="t", partition=0):
    rows = c.partition_state().where(f"topic = '{topic}' and partition = {partition}").collect()
    return [(list(r.replicas), r.leader, list(r.isr), r.leader_epoch, list(r.adding), list(r.removing))
            for r in rows]


def test_seed_walkthrough_moves_123_to_456(spark, tmp_out):
    """The seed's OAR {1,2,3} -> RAR {4,5,6}: AR = {4,5,6,1,2,3}, ISR grows to all six, leader 4,
    ISR {4,5,6}, AR = {4,5,6} written last; the old replicas' log rows are gone."""
    sc = parse_scenario({
        "cluster": {"brokers": [1, 2, 3, 4, 5, 6], "config": {"auto.leader.rebalance.enable": False}},
        "topics": [{"name": "t", "assignment": {0: [1, 2, 3]}}],
        "timeline": [{"at": 0, "produce": {"topic": "t", "partition": 0, "records": 50, "acks": "all"}},
                     {"at": 1000, "reassign": {"plan": _plan(("t", 0, [4, 5, 6]))}}],
        "run": {"until_ms": 3500}}, name="walk")
    c = Cluster.from_scenario(sc, spark=spark, engine="local", out=tmp_out).run()
    h = _history(c)
    steps = [(reps, leader, sorted(isr)) for reps, leader, isr, *_ in h]
    full = [4, 5, 6, 1, 2, 3]
    seed = [([1, 2, 3], 1, [1, 2, 3]), (full, 1, [1, 2, 3]), (full, 1, [1, 2, 3, 4, 5, 6]),
            (full, 4, [1, 2, 3, 4, 5, 6]), (full, 4, [4, 5, 6]), ([4, 5, 6], 4, [4, 5, 6])]
    it = iter(steps)
    assert all(any(s == x for x in it) for s in seed), steps  # every seed step, in order
    assert h[-1][4:] == ([], [])  # adding/removing cleared
    assert all(leader in (1, 4) for _, leader, *_ in h)
    log = c.log().collect()
    assert sorted({r.broker for r in log}) == [4, 5, 6]
    ids = {b: sorted(r.record_id for r in log if r.broker == b) for b in (4, 5, 6)}
    assert ids[4] == ids[5] == ids[6] == list(range(50))
    assert c.summary()["lost_acked"] == 0
    assert c.control.zk.reassign_partitions() is None and not c.control.reassignments()


def test_j01_controller_to_other_broker_three_epoch_bumps(spark, tmp_out):
    """Golden J-01 (ControllerIntegrationTest.testPartitionReassignment): [C] -> [O] ends with
    leader O at leader epoch 0+3 (phase A bump, leader move, C's ISR removal), assignment [O]."""
    sc = parse_scenario({
        "cluster": {"brokers": [0, 1], "config": {"auto.leader.rebalance.enable": False}},
        "topics": [{"name": "t", "assignment": {0: [0]}}],
        "timeline": [{"at": 0, "produce": {"topic": "t", "partition": 0, "records": 5, "acks": 1}},
                     {"at": 500, "reassign": {"plan": _plan(("t", 0, [1]))}}],
        "run": {"until_ms": 2500}}, name="j01")
    c = Cluster.from_scenario(sc, spark=spark, engine="local", out=tmp_out).run()
    assert c.control.controller_id() == 0
    last = _history(c)[-1]
    assert last[:4] == ([1], 1, [1], 3)
    assert c.control.zk.topic_assignment("t") == {0: [1]}
    assert [r.broker for r in c.log().select("broker").distinct().collect()] == [1]


def test_move_waits_for_a_dead_target_then_completes_and_run_continues(spark, tmp_out):
    """A znode reassignment to a broker that is down stalls (phase A only) until it returns; the run
    is continued from its directory by a new Cluster (Cluster.for_path), as `sparkkafka run RUN
    --until-ms` does."""
    sc = parse_scenario({
        "cluster": {"brokers": [0, 1, 2], "config": {"auto.leader.rebalance.enable": False,
                                                     "zookeeper.session.timeout.ms": 1000}},
        "topics": [{"name": "t", "assignment": {0: [0, 1]}}],
        "timeline": [{"at": 0, "produce": {"topic": "t", "partition": 0, "records": 20, "acks": "all"}},
                     {"at": 200, "crash": 2},
                     {"at": 2000, "reassign": {"plan": _plan(("t", 0, [2, 1])), "via": "zookeeper"}}],
        "run": {"until_ms": 3000}}, name="stall")
    Cluster.from_scenario(sc, spark=spark, engine="local", out=tmp_out).run()
    c = Cluster.for_path(spark, tmp_out)
    assert c.control.reassignments() == {("t", 0): ([2, 1, 0], [2], [0])}
    assert c.control.zk.reassign_partitions() is not None
    c.apply({"restart": 2})
    c.run(until_ms=6000)
    c = Cluster.for_path(spark, tmp_out)  # a third process looks at the result
    last = _history(c)[-1]
    assert last[0] == [2, 1] and last[1] == 2 and sorted(last[2]) == [1, 2]
    assert not c.control.reassignments() and c.control.zk.reassign_partitions() is None
    assert c.summary()["lost_acked"] == 0
    assert sorted({r.broker for r in c.log().collect()}) == [1, 2]


def test_cancel_restores_the_original_replicas_and_deletes_the_added_one(spark, tmp_out):
    """Golden J-03's cancellation: a stuck move of foo-0 [0,1,2] -> [0,1,3] is cancelled; the
    partition returns to [0,1,2] and replica 3's log is deleted; a second cancel finds nothing."""
    sc = parse_scenario({
        "cluster": {"brokers": [0, 1, 2, 3], "config": {"auto.leader.rebalance.enable": False,
                                                        "zookeeper.session.timeout.ms": 1000}},
        "topics": [{"name": "foo", "assignment": {0: [0, 1, 2]}}],
        "timeline": [{"at": 0, "produce": {"topic": "foo", "partition": 0, "records": 10, "acks": "all"}},
                     {"at": 300, "pause": {"broker": 3, "duration_ms": 800}},
                     {"at": 400, "reassign": {"plan": _plan(("foo", 0, [0, 1, 3]))}}],
        "run": {"until_ms": 600}}, name="cancel")
    c = Cluster.from_scenario(sc, spark=spark, engine="local", out=tmp_out).run()
    assert c.control.reassignments() == {("foo", 0): ([0, 1, 3, 2], [3], [2])}
    assert c.cancel_reassignments([("foo", 0)]) == {("foo", 0): None}
    assert c.cancel_reassignments([("foo", 0)])[("foo", 0)][0] == "NO_REASSIGNMENT_IN_PROGRESS"
    c.run(until_ms=2500)
    last = _history(c, "foo")[-1]
    assert last[0] == [0, 1, 2] and sorted(last[2]) == [0, 1, 2] and last[4:] == ([], [])
    assert sorted({r.broker for r in c.log().collect()}) == [0, 1, 2]


def test_api_refuses_invalid_targets_and_changes_nothing(spark, tmp_out):
    """AlterPartitionReassignments: adding a dead broker is INVALID_REPLICA_ASSIGNMENT, an unknown
    partition UNKNOWN_TOPIC_OR_PARTITION; neither touches ZooKeeper."""
    sc = parse_scenario({
        "cluster": {"brokers": [0, 1, 2], "config": {"zookeeper.session.timeout.ms": 1000}},
        "topics": [{"name": "t", "assignment": {0: [0, 1]}}],
        "timeline": [{"at": 0, "crash": 2}], "run": {"until_ms": 1500}}, name="invalid")
    c = Cluster.from_scenario(sc, spark=spark, engine="local", out=tmp_out).run()
    before = c.control.zk.to_dict()
    res = c.reassign(_plan(("t", 0, [2, 1]), ("t", 5, [0, 1])))
    assert res[("t", 0)][0] == "INVALID_REPLICA_ASSIGNMENT"
    assert "not alive" in res[("t", 0)][1]
    assert res[("t", 5)][0] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert c.control.zk.to_dict() == before
