"""Golden J-03 (Kafka's ReassignPartitionsCommandTest) through `sparkkafka reassign RUN ...` as an operator
runs it: a complete reassignment, the HW kept across a leader move, the in-progress view under a 1 B/s
throttle and its cancellation, cancelling after an added replica joined the ISR, and producing and
consuming while a throttled move runs.

One base run (5 brokers with 3 log dirs each, replica.lag.time.max.ms 1000, auto rebalance off; the
golden's topics foo, bar, baz with data) is built once; every test works on a copy of it.
"""

from __future__ import annotations

import json

import pytest
from operator_util import cli, copy_run
from scenarios import produce, run_to_end, scenario

from sparkkafka import Cluster

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def base_run(spark, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("j03") / "base")
    items = [("foo", 0, 100), ("baz", 1, 20), ("baz", 2, 60), ("bar", 0, 10)]
    return run_to_end(scenario(
        5, [{"name": "foo", "assignment": {0: [0, 1, 2], 1: [1, 2, 3]}},
            {"name": "bar", "assignment": {0: [3, 2, 1]}},
            {"name": "baz", "assignment": {0: [1, 0, 2], 1: [2, 0, 1], 2: [0, 2, 1]}}],
        400, log_dirs=["d0", "d1", "d2"],
        config={"replica.lag.time.max.ms": 1000, "auto.leader.rebalance.enable": False},
        timeline=produce(items)), "j03", out, spark)


@pytest.fixture
def run_dir(base_run, tmp_path):
    return copy_run(base_run, tmp_path)


def plan_file(tmp_path, name, moves: dict[tuple[str, int], list[int]]) -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r} for (t, p), r in moves.items()]}))
    return str(path)


def run_until(capsys, run: str, ms: int) -> None:
    assert cli(capsys, "run", run, "--until-ms", ms, "--no-progress")[0] == 0


def brokers_holding(c: Cluster, topic: str, partition: int) -> list[int]:
    return sorted({r.broker for r in c.log(topic, partition).select("broker").collect()})


def no_throttles_left(c: Cluster) -> bool:
    throttled = any(k.endswith("throttled.replicas") for ov in c.control.overrides.values() for k in ov)
    return not throttled and not any(c.control.dynamic.get(b) for b in range(5))


def test_complete_reassignment_deletes_the_removed_replicas_and_leaves_no_throttle(run_dir, tmp_path, capsys, spark):
    """foo-0 -> [0,1,3] and bar-0 -> [3,2,0]: verify before starting names current and target (and, with
    nothing moving, clears throttles as 2.8 does), the move ends on the targets, replica 2 of foo-0 and
    replica 1 of bar-0 are deleted, no throttle is left."""
    plan = plan_file(tmp_path, "plan.json", {("foo", 0): [0, 1, 3], ("bar", 0): [3, 2, 0]})
    assert cli(capsys, "reassign", run_dir, "--verify", "--reassignment-json-file", plan)[:2] == (0, (
        "Status of partition reassignment:\n"
        "There is no active reassignment of partition bar-0, but replica set is 3,2,1 rather than 3,2,0.\n"
        "There is no active reassignment of partition foo-0, but replica set is 0,1,2 rather than 0,1,3.\n\n"
        "Clearing broker-level throttles on brokers 0,1,2,3,4\nClearing topic-level throttles on topics foo,bar\n"))
    rc, out, _ = cli(capsys, "reassign", run_dir, "--execute", "--reassignment-json-file", plan,
                  "--throttle", 10_000_000)
    assert rc == 0 and out.endswith("Successfully started partition reassignments for bar-0,foo-0\n")
    run_until(capsys, run_dir, 2000)
    rc, out, _ = cli(capsys, "reassign", run_dir, "--verify", "--reassignment-json-file", plan)
    assert rc == 0 and out.startswith(
        "Status of partition reassignment:\nReassignment of partition bar-0 is complete.\n"
        "Reassignment of partition foo-0 is complete.\n\nClearing broker-level throttles on brokers ")
    c = Cluster.for_path(spark, run_dir)
    assert c.control.zk.topic_assignment("foo")[0] == [0, 1, 3]
    assert c.control.zk.topic_assignment("bar")[0] == [3, 2, 0]
    assert brokers_holding(c, "foo", 0) == [0, 1, 3]  # replica 2 deleted
    assert brokers_holding(c, "bar", 0) == [0, 2, 3]  # replica 1 deleted
    assert no_throttles_left(c)
    assert c.summary()["lost_acked"] == 0


def test_high_watermark_is_preserved_when_the_leader_moves(run_dir, tmp_path, capsys, spark):
    """100 records in foo-0, moved to [3,1,2]: the new leader 3 has HW = LEO = 100 and a consumer reads
    all 100 (ListOffsets LATEST = 100 in the golden)."""
    plan = plan_file(tmp_path, "plan.json", {("foo", 0): [3, 1, 2]})
    assert cli(capsys, "reassign", run_dir, "--execute", "--reassignment-json-file", plan)[0] == 0
    run_until(capsys, run_dir, 2000)
    c = Cluster.for_path(spark, run_dir)
    top = c.describe_topics().where("topic = 'foo' and partition = 0").first()
    assert (top.leader, list(top.replicas)) == (3, [3, 1, 2])
    rs = (c.replica_state().where("topic = 'foo' and partition = 0 and broker = 3")
          .orderBy("round", ascending=False).first())
    assert (rs.hw, rs.leo) == (100, 100)
    got = sorted(r.record_id for r in c.consume("foo", 0).collect())
    assert got == sorted(r.record_id for r in c.produce_results().where(
        "topic = 'foo' and partition = 0 and acked").collect()) and len(got) == 100


def test_in_progress_view_target_first_then_cancel_deletes_the_added_replica(run_dir, tmp_path, capsys, spark):
    """Under a 1 B/s throttle foo-0 -> [0,1,3] and baz-1 -> [0,2,3] stay in progress, listed target-first
    then the removing replicas; cancelling reports both, a second cancel finds nothing, and the added
    replica 3 is deleted from both partitions."""
    plan = plan_file(tmp_path, "plan.json", {("foo", 0): [0, 1, 3], ("baz", 1): [0, 2, 3]})
    assert cli(capsys, "reassign", run_dir, "--execute", "--reassignment-json-file", plan, "--throttle", 1)[0] == 0
    run_until(capsys, run_dir, 1400)
    assert cli(capsys, "reassign", run_dir, "--list")[:2] == (0, (
        "Current partition reassignments:\n"
        "baz-1: replicas: 0,2,3,1. adding: 3. removing: 1.\n"
        "foo-0: replicas: 0,1,3,2. adding: 3. removing: 2.\n"))
    assert cli(capsys, "reassign", run_dir, "--verify", "--reassignment-json-file", plan)[:2] == (0, (
        "Status of partition reassignment:\n"
        "Reassignment of partition baz-1 is still in progress.\n"
        "Reassignment of partition foo-0 is still in progress.\n\n"))
    rc, out, _ = cli(capsys, "describe", run_dir)
    assert "\tTopic: foo\tPartition: 0\tLeader: 0\tReplicas: 0,1,3,2\tIsr: " in out

    rc, out, _ = cli(capsys, "reassign", run_dir, "--cancel", "--reassignment-json-file", plan)
    assert rc == 0 and out.startswith("Successfully cancelled partition reassignments for: baz-1,foo-0\n"
                                      "None of the specified partition moves are active.\n")
    rc, out, _ = cli(capsys, "reassign", run_dir, "--cancel", "--reassignment-json-file", plan)
    assert rc == 0 and out.startswith("None of the specified partition reassignments are active.\n")
    run_until(capsys, run_dir, 2400)
    c = Cluster.for_path(spark, run_dir)
    assert c.control.zk.topic_assignment("foo")[0] == [0, 1, 2]
    # Kafka reverts to originReplicas = replicas diff adding: [0,2,3,1] less [3], so baz-1's order changes
    assert c.control.zk.topic_assignment("baz")[1] == [0, 2, 1]
    assert brokers_holding(c, "foo", 0) == [0, 1, 2]
    assert brokers_holding(c, "baz", 1) == [0, 1, 2]
    states = c.replica_state().where("broker = 3 and (topic = 'foo' and partition = 0 or topic = 'baz' "
                                     "and partition = 1)")
    last_round = c.replica_state().agg({"round": "max"}).first()[0]
    assert states.where(f"round = {last_round}").count() == 0  # no replica left on broker 3
    assert no_throttles_left(c)


def test_cancel_after_an_added_replica_joined_the_isr(run_dir, tmp_path, capsys, spark):
    """foo-0 -> [0,3,4] with 200 records, replica 4 throttled so it cannot finish; once replica 3 is in the
    ISR the move is cancelled: foo-0 returns to [0,1,2], 3 leaves the ISR and replicas 3 and 4 are deleted."""
    c = Cluster.for_path(spark, run_dir)
    c.apply({"produce": {"topic": "foo", "partition": 0, "records": 100, "acks": "all", "value_bytes": 100}})
    c.apply({"set_config": {"entity": "topics", "name": "foo",
                            "config": {"follower.replication.throttled.replicas": "0:4"}}})
    c.apply({"set_config": {"entity": "brokers", "name": 4, "config": {"follower.replication.throttled.rate": 1}}})
    res = c.reassign({"version": 1, "partitions": [{"topic": "foo", "partition": 0, "replicas": [0, 3, 4]}]})
    assert res == {("foo", 0): None}
    for _ in range(40):
        c.step()
        isr = set(c.control.zk.get_partition_state(("foo", 0))[0]["isr"])  # what describe shows
        if isr >= {0, 1, 2, 3}:
            break
    assert isr >= {0, 1, 2, 3} and 4 not in isr
    assert c.cancel_reassignments([("foo", 0)]) == {("foo", 0): None}
    c.run(until_ms=c.round * c.round_ms + 1000)
    top = c.describe_topics().where("topic = 'foo' and partition = 0").first()
    assert list(top.replicas) == [0, 1, 2] and sorted(top.isr) == [0, 1, 2]
    assert brokers_holding(c, "foo", 0) == [0, 1, 2]  # replicas 3 and 4 deleted
    assert c.summary()["lost_acked"] == 0


def test_produce_and_consume_while_a_throttled_move_runs(run_dir, tmp_path, capsys, spark):
    """baz-2 -> [3,2,1] under a throttle it cannot finish with; 100 more records on top of 60 are acked and
    a consumer reads them all while the move runs; raising the throttle (--additional) lets it complete."""
    plan = plan_file(tmp_path, "plan.json", {("baz", 2): [3, 2, 1]})
    assert cli(capsys, "reassign", run_dir, "--execute", "--reassignment-json-file", plan, "--throttle", 1)[0] == 0
    c = Cluster.for_path(spark, run_dir)
    c.apply({"produce": {"topic": "baz", "partition": 2, "records": 100, "acks": "all", "value_bytes": 100}})
    c.run(until_ms=1400)
    assert ("baz", 2) in c.control.reassignments()
    assert c.consume("baz", 2).count() >= 100
    assert c.produce_results().where("topic = 'baz' and partition = 2 and acked").count() == 160
    rc, _, _ = cli(capsys, "reassign", run_dir, "--execute", "--additional", "--reassignment-json-file", plan,
                "--throttle", 10_000_000)
    assert rc == 0
    run_until(capsys, run_dir, 2400)
    rc, out, _ = cli(capsys, "reassign", run_dir, "--verify", "--reassignment-json-file", plan)
    assert rc == 0 and "Reassignment of partition baz-2 is complete.\n" in out
    c = Cluster.for_path(spark, run_dir)
    assert brokers_holding(c, "baz", 2) == [1, 2, 3]
    assert sorted(r.record_id for r in c.consume("baz", 2).collect()) == sorted(
        r.record_id for r in c.produce_results().where("topic = 'baz' and partition = 2 and acked").collect())
