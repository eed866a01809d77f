"""`sparkkafka whatif`: losses, unclean candidates and dir balancing predicted from a
snapshot; one short emulated run confirms a rack loss."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from sparkkafka import whatif as W
from sparkkafka.cli import main
from sparkkafka.scenario.loader import parse_scenario
from sparkkafka.tools.reassign_partitions import parse_reassignment_json

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "snapshots" / "sample"
DESCRIBE = (
    "Topic: a\tPartitionCount: 4\tReplicationFactor: 3\tConfigs: min.insync.replicas=2\n"
    "\tTopic: a\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3\n"
    "\tTopic: a\tPartition: 1\tLeader: 2\tReplicas: 2,3,4\tIsr: 2,3\n"
    "\tTopic: a\tPartition: 2\tLeader: 4\tReplicas: 4,1,2\tIsr: 4,1,2\n"
    "\tTopic: a\tPartition: 3\tLeader: 3\tReplicas: 3,4,1\tIsr: 3,4,1\n"
    "Topic: b\tPartitionCount: 2\tReplicationFactor: 2\tConfigs: \n"
    "\tTopic: b\tPartition: 0\tLeader: 1\tReplicas: 1,3\tIsr: 1,3\n"
    "\tTopic: b\tPartition: 1\tLeader: 2\tReplicas: 2,4\tIsr: 2\n")


def _snapshot(tmp_path: Path) -> Path:
    d = tmp_path / "snap"
    d.mkdir()
    (d / "topics-describe.txt").write_text(DESCRIBE)
    (d / "racks.txt").write_text("1=r1\n2=r2\n3=r1\n4=r2\n")
    (d / "server.properties").write_text("zookeeper.session.timeout.ms=1000\n")
    (d / "rates.csv").write_text("topic,records_per_sec,value_bytes,acks\na,20,100,all\nb,20,100,1\n")
    return d


MOVING = (  # a-0 is being reassigned from 1,2,3 to 1,2,4 (kafka-topics --describe, KIP-455)
    "Topic: a\tPartitionCount: 2\tReplicationFactor: 3\tConfigs: min.insync.replicas=2\n"
    "\tTopic: a\tPartition: 0\tLeader: 1\tReplicas: 1,2,4,3\tIsr: 1,2,3\tAdding Replicas: 4\tRemoving Replicas: 3\n"
    "\tTopic: a\tPartition: 1\tLeader: 2\tReplicas: 2,3,4\tIsr: 2,3,4\n")


def _moving_cluster(tmp_path: Path):
    """The MOVING snapshot started on the in-process engine (no SparkSession)."""
    from sparkkafka import Cluster

    d = tmp_path / "moving"
    d.mkdir()
    (d / "topics-describe.txt").write_text(MOVING)
    (d / "rates.csv").write_text("topic,records_per_sec,value_bytes,acks\na,20,100,all\n")
    m = W.load_snapshot(d)
    m["cluster"]["emulator"] = {"engine": "local"}
    return Cluster.from_scenario(m, spark=None, out=str(tmp_path / "run"))


def test_a_move_in_flight_in_the_snapshot_accepts_events_and_completes_in_the_run(tmp_path):
    """An event applied to the running cluster is checked against its current assignments, where a-0 has 4
    replicas (the same-RF rule of topic creation does not apply to them); the controller resumes the move at
    failover as Kafka's does: the adding replica catches up and joins the ISR, then the removing one is dropped."""
    from sparkkafka.storage import tables as T

    c = _moving_cluster(tmp_path)
    assert c.control.reassignments() == {("a", 0): ([1, 2, 4, 3], [4], [3])}
    c.step(1)
    c.apply({"produce": {"topic": "a", "partition": 0, "records": 5, "acks": "all"}})
    for _ in range(20):
        c.step(2)
        if not c.control.reassignments():
            break
    assert c.control.reassignments() == {}
    assert c.control.zk.topic_assignment("a") == {0: [1, 2, 4], 1: [2, 3, 4]}
    ps = T.read_table(c.tables_dir, "partition_state").to_pandas()
    a0 = ps[(ps["topic"] == "a") & (ps["partition"] == 0)].sort_values(["time_ms", "version"])
    rows = [(list(r), list(i), list(ad), list(rm)) for r, i, ad, rm in
            zip(a0["replicas"], a0["isr"], a0["adding"], a0["removing"], strict=True)]
    assert rows[0] == ([1, 2, 4, 3], [1, 2, 3], [4], [3])
    joined = next(k for k, r in enumerate(rows) if 4 in r[1])
    dropped = next(k for k, r in enumerate(rows) if r[0] == [1, 2, 4])
    assert joined < dropped and rows[-1] == ([1, 2, 4], [1, 2, 4], [], [])
    assert all(r[0] == [1, 2, 4, 3] for r in rows[:dropped])
    assert c.summary()["lost_acked"] == 0


def test_events_applied_to_a_run_see_the_topics_the_run_created_and_deleted(tmp_path):
    """Cluster.apply checks an event against the topics in the run's ZooKeeper now, not the scenario file's."""
    from sparkkafka.errors import ScenarioError

    c = _moving_cluster(tmp_path)
    c.step(1)
    c.apply({"create_topic": {"name": "b", "partitions": 1, "replication_factor": 2}})
    c.apply({"produce": {"topic": "b", "records": 3}})  # the topic the run created
    c.apply({"delete_topic": "b"})
    for _ in range(10):
        c.step(1)
        if "b" not in c.control.topics():
            break
    with pytest.raises(ScenarioError) as e:
        c.apply({"produce": {"topic": "b", "records": 3}})
    assert "produce.topic" in e.value.field and "'b' does not exist" in str(e.value)


def _load(d: Path) -> tuple[dict, pd.DataFrame, object]:
    m = W.load_snapshot(d)
    sc = parse_scenario(m)
    return m, W.partitions_frame(sc), sc


def test_lose_rack_prediction_follows_kafkas_election(tmp_path):
    _, parts, sc = _load(_snapshot(tmp_path))
    p = W.predict_loss(parts, W.resolve_loss(sc, rack="r1")).set_index(["topic", "partition"])
    assert p.loc[("b", 0), "offline"] and p.loc[("b", 0), "leader"] == -1  # replicas 1,3: all in r1
    assert p.loc[("a", 0), "leader"] == 2 and p.loc[("a", 3), "leader"] == 4  # first live ISR member
    assert p.loc[("a", 1), "leader"] == 2 and not p.loc[("a", 1), "leader_moved"]
    assert p.loc[("a", 1), "isr"] == [2, 4]  # the live follower outside the ISR catches up
    assert W.predict_loss(parts, W.resolve_loss(sc, rack="r1"), catch_up=False).set_index(
        ["topic", "partition"]).loc[("a", 1), "isr"] == [2]
    assert W.counts(p) == {"offline": 1, "under_min_isr": 2, "under_replicated": 4, "leader_moved": 3}
    assert W.resolve_loss(sc, rack="r1").label() == "rack r1: broker(s) 1,3"
    risk = W.rates_at_risk(sc, p.reset_index()).set_index("acks")
    assert risk.loc["1", "offline_records_per_sec"] == 10.0  # b: 20/s over 2 partitions, one offline
    assert risk.loc["all", "under_min_isr_records_per_sec"] == 10.0  # a: 5/s into each of a-0, a-3


def test_lose_rack_on_the_sample_offlines_exactly_the_partitions_inside_the_rack():
    m = W.load_snapshot(SAMPLE)
    sc = parse_scenario(m)
    parts = W.partitions_frame(sc)
    for rack in ("rack-a", "rack-b", "rack-c"):
        inside = {b for b, r in sc.racks.items() if r == rack}
        p = W.predict_loss(parts, W.resolve_loss(sc, rack=rack))
        want = {(t, n) for t, n, r in zip(parts["topic"], parts["partition"], parts["replicas"], strict=True)
                if set(r) <= inside}
        assert {(t, n) for t, n in zip(p.loc[p["offline"], "topic"], p.loc[p["offline"], "partition"],
                                       strict=True)} == want
    p = W.predict_loss(parts, W.resolve_loss(sc, rack="rack-a"))  # the emulated run (20 s) measured these
    assert W.counts(p)["offline"] == 0 and W.counts(p)["under_replicated"] == 302
    assert W.counts(p)["under_min_isr"] == 24


def test_lose_dir_takes_only_the_replicas_in_that_dir():
    sc = parse_scenario(W.load_snapshot(SAMPLE))
    parts = W.partitions_frame(sc)
    loss = W.resolve_loss(sc, log_dir="1:/var/kafka/data-2")
    gone = W.lost_replicas(parts, loss)
    hit = [(t, n) for t, n, g in zip(parts["topic"], parts["partition"], gone, strict=True) if g]
    assert ("orders", 39) in hit and ("clickstream", 71) not in hit  # log-dirs.txt: data-2 vs data-1
    assert len(hit) == sum(1 for d in parts["dirs"] if d.get(1) == "/var/kafka/data-2")
    assert loss.events(5) == [{"at": 5, "fail_log_dir": {"broker": 1, "log_dir": "/var/kafka/data-2"}}]


@pytest.mark.parametrize("flag,value,field", [
    ("--lose-broker", "99", "--lose-broker"), ("--lose-rack", "rack-z", "--lose-rack"),
    ("--lose-dir", "3:/nope", "--lose-dir"), ("--lose-dir", "77:/var/kafka/data-1", "--lose-dir"),
    ("--lose-dir", "x", "--lose-dir")])
def test_cli_bad_loss_exits_2_naming_flag_and_value(flag, value, field, capsys):
    assert main(["whatif", str(SAMPLE), flag, value, "--no-emulate"]) == 2
    err = capsys.readouterr().err
    assert field in err and value in err


def test_cli_not_a_snapshot_and_no_loss(tmp_path, capsys):
    assert main(["whatif", str(tmp_path), "--lose-broker", "1"]) == 2
    assert "SNAPSHOT" in capsys.readouterr().err
    assert main(["whatif", str(SAMPLE), "--no-emulate"]) == 2
    assert "give exactly one" in capsys.readouterr().err
    assert main(["whatif", str(SAMPLE), "--lose-broker", "1", "--unclean", "--no-emulate"]) == 2
    assert "--unclean" in capsys.readouterr().err
    assert main(["whatif", str(SAMPLE), "--lose-broker", "1", "--balance-dirs"]) == 2
    assert "--balance-dirs" in capsys.readouterr().err


def test_cli_prediction_table_formats(capsys):
    assert main(["whatif", str(SAMPLE), "--lose-broker", "1", "--lose-broker", "2", "--no-emulate",
                 "--format", "csv"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Losing broker(s) 1,2:")
    header = "topic,partition,leader_before,leader_predicted,isr_predicted,offline,under_min_isr,under_replicated"
    assert header in out
    assert main(["whatif", str(SAMPLE), "--lose-broker", "1", "--no-emulate", "--format", "markdown"]) == 0
    assert "| topic | partition |" in capsys.readouterr().out


def test_unclean_candidates_count_acked_records_missing_from_each_log():
    acked = pd.DataFrame({"topic": "t", "partition": 0, "record_id": range(10), "acked": [True] * 9 + [False]})
    log = pd.DataFrame({"topic": "t", "partition": 0, "broker": [2] * 7 + [3] * 4,
                        "record_id": [*range(7), *range(4)], "is_future": False})
    offline = pd.DataFrame({"topic": ["t"], "partition": [0], "replicas": [[1, 2, 3]]})
    c = W.unclean_candidates(acked, log, offline, live=[2, 3]).set_index("candidate")
    assert c["lost_if_elected"].to_dict() == {1: 9, 2: 2, 3: 5}
    assert c["best"].to_dict() == {1: False, 2: True, 3: False}  # broker 1 is down: not electable
    c = W.unclean_candidates(acked, log, offline, live=[]).set_index("candidate")
    assert not c["best"].any()


def test_balance_dirs_plan_evens_dirs_and_is_a_plan_kafkas_tool_accepts(tmp_path, capsys):
    sc = parse_scenario(W.load_snapshot(SAMPLE))
    parts = W.partitions_frame(sc)
    moves = W.balance_dirs(parts, sc.log_dirs)
    before, after = W.dir_usage(parts), W.dir_usage(parts, moves, settled=True)
    assert W.widest_gap(after) < W.widest_gap(before) / 10
    assert after["bytes"].sum() == W.dir_usage(parts, settled=True)["bytes"].sum()  # moves within brokers
    moving = {(t, n, b) for t, n, ms in zip(parts["topic"], parts["partition"], parts["moving"], strict=True)
              for b in ms}
    assert moving and not moving & {(m["topic"], m["partition"], m["broker"]) for m in moves}
    entries = parse_reassignment_json(W.plan_json(parts, moves), brokers=sc.brokers,
                                      log_dirs={b: list(sc.log_dirs) for b in sc.brokers})
    assert sum(d != "any" for e in entries for d in e["log_dirs"]) == len(moves)
    plan = tmp_path / "plan.json"
    assert main(["whatif", str(SAMPLE), "--balance-dirs", "--plan", str(plan), "--format", "csv"]) == 0
    assert json.loads(plan.read_text())["partitions"] and "KIP-113 move(s)" in capsys.readouterr().out


@pytest.mark.slow
def test_emulated_rack_loss_matches_prediction_and_metrics(spark, tmp_path):
    """One short run (ZooKeeper session 1 s): the controller's state and the metrics row agree with the
    prediction, partition by partition; with the brokers back, under-replicated returns to 0."""
    m, parts, sc = _load(_snapshot(tmp_path))
    m["cluster"]["emulator"] = {"engine": "resident"}
    loss = W.resolve_loss(sc, rack="r1")
    p = W.predict_loss(parts, loss)
    e = W.emulate_loss(m, loss, spark=spark, out=str(tmp_path / "run"), at_ms=300, settle_ms=700, recover_ms=3000)
    both = W.compare(p, e.state)
    assert both["agree"].all(), both.to_string()
    assert {k: W.counts(p)[k] for k in e.metrics} == e.metrics == {k: W.counts(e.state)[k] for k in e.metrics}
    assert e.summary["offline_partitions"] == 1
    assert e.recovery_ms is not None and 0 < e.recovery_ms <= 3000  # restarted, caught up, back in the ISRs
    text = W.loss_text(loss, p, e, p.iloc[:0])
    s = e.summary
    assert (f"emulated run: {s['acked']} acked, lost by acks {s['lost_acked_by_acks']}, {s['unavailable_acked']} "
            f"acked records unavailable (offline partitions), {s['pending_acked']} pending") in text


@pytest.mark.slow
def test_unclean_best_candidate_loses_exactly_what_was_predicted(spark, tmp_path):
    """Replicas 3 then 2 drop out (crash), acks=all records go on being acked by the shrinking ISR, then the
    last ISR member 1 dies and 2, 3 come back: the partition is offline. The prediction names 2 (it missed
    fewer acked records than 3); electing it uncleanly loses exactly that many (the checker's count). On the
    in-process engine: the prediction is under test here, and the engines give the same tables (test_resident)."""
    from sparkkafka import Cluster

    sc = {"name": "unclean", "cluster": {"brokers": [1, 2, 3], "config": {"zookeeper.session.timeout.ms": 1000},
                                         "emulator": {"engine": "local"}},
          "topics": [{"name": "t", "assignment": {0: [1, 2, 3]}}],
          "timeline": [{"at": 0, "produce": {"topic": "t", "rate_per_sec": 40, "duration_ms": 5000, "acks": "all"}},
                       {"at": 300, "crash": 3}, {"at": 1500, "crash": 2}, {"at": 2700, "crash": 1},
                       {"at": 3800, "restart": 2}, {"at": 3800, "restart": 3}],
          "run": {"until_ms": 5000}}
    c = Cluster.from_scenario(sc, spark=spark, out=str(tmp_path / "run"))
    c.run(until_ms=4300)
    cands = W.unclean_of_run(c.out).set_index("candidate")
    assert list(cands["topic"].unique()) == ["t"]
    best = cands[cands["best"]]
    assert list(best.index) == [2] and 0 < cands.loc[2, "lost_if_elected"] < cands.loc[3, "lost_if_elected"]
    assert not cands.loc[1, "live"]
    assert c.summary()["lost_acked"] == 0
    assert c.elect_leaders("unclean", [("t", 0)]) == {("t", 0): None}
    c.run(until_ms=5000)
    s = c.summary()
    assert s["offline_partitions"] == 0
    assert s["lost_acked"] == int(best["lost_if_elected"].iloc[0])


def test_unclean_candidates_with_no_partition_offline_is_an_empty_table():
    """A loss that leaves nothing offline (the sample losing two brokers) has no candidates: an empty table
    with its columns, not a KeyError."""
    from sparkkafka import whatif as W

    produced = pd.DataFrame({"topic": [], "partition": [], "record_id": [], "acked": pd.Series([], dtype=bool)})
    log = pd.DataFrame({"topic": [], "partition": [], "record_id": [], "broker": [],
                        "is_future": pd.Series([], dtype=bool)})
    cands = W.unclean_candidates(produced, log, pd.DataFrame(columns=["topic", "partition", "replicas"]), [1])
    assert cands.empty and list(cands.columns) == [*W.TP, "candidate", "live", "acked", "lost_if_elected", "best"]
    assert W.table_text(cands, "text") == "(none)\n"


def test_a_move_in_flight_completes_in_the_prediction_only_when_its_target_replicas_all_survive(tmp_path):
    """a-0 moves 1,2,4,3 -> 1,2,4: losing the removing replica 3 leaves the target live, so the adding
    replica joins the ISR and the controller completes the move (KafkaController.isReassignmentComplete):
    replicas 1,2,4, fully in sync, not under-replicated; losing 2 (in the target) keeps it pending."""
    d = tmp_path / "moving"
    d.mkdir()
    (d / "topics-describe.txt").write_text(MOVING)
    _, parts, sc = _load(d)
    done = W.predict_loss(parts, W.resolve_loss(sc, [3])).set_index(["topic", "partition"]).loc[("a", 0)]
    assert (done["replicas"], done["isr"], done["leader"]) == ([1, 2, 4], [1, 2, 4], 1)
    assert not done["under_replicated"]
    pending = W.predict_loss(parts, W.resolve_loss(sc, [2])).set_index(["topic", "partition"]).loc[("a", 0)]
    assert (pending["replicas"], pending["isr"]) == ([1, 2, 4, 3], [1, 4, 3])
    assert pending["under_replicated"] and not pending["under_min_isr"]
    kept = W.predict_loss(parts, W.resolve_loss(sc, [3]), catch_up=False).set_index(["topic", "partition"])
    assert kept.loc[("a", 0), "replicas"] == [1, 2, 4, 3] and kept.loc[("a", 0), "isr"] == [1, 2]


def test_balance_dirs_counts_a_move_in_flight_in_its_future_dir():
    """Broker 12's metrics.raw-11 (22 GB) is moving from data-1 to data-2 in the sample (a future log): once it
    completes the bytes are in data-2, which the plan must even out, not data-1 (a run of the plan showed a
    44 GB gap left by a plan that counted it where it was, 14 GB by one that ignored the KIP-455 moves)."""
    sc = parse_scenario(W.load_snapshot(SAMPLE))
    parts = W.partitions_frame(sc)
    now = W.dir_usage(parts).set_index(["broker", "dir"])["bytes"]
    settled = W.dir_usage(parts, settled=True).set_index(["broker", "dir"])["bytes"]
    size = 22040658192  # log-dirs.txt: broker 12's metrics.raw-11 in /var/kafka/data-1
    assert settled[(12, "/var/kafka/data-2")] - now[(12, "/var/kafka/data-2")] == size
    assert now[(12, "/var/kafka/data-1")] - settled[(12, "/var/kafka/data-1")] == size
    moves = W.balance_dirs(parts, sc.log_dirs)
    assert W.widest_gap(W.dir_usage(parts, moves, settled=True)) < W.widest_gap(W.dir_usage(parts)) / 100


def test_a_loss_on_a_0_11_snapshot_waits_for_the_session_expiry_the_emulator_applies(tmp_path):
    """server.properties sets inter.broker.protocol.version=0.11 and no zookeeper.session.timeout.ms: the
    version's historic default applies (6000 before Kafka 2.5, KIP-537) to the emulated broker's session, and
    the what-if reads the state once that session ended, not 2.8's 18000 later (in-process engine)."""
    from sparkkafka import Cluster
    from sparkkafka.protocol.config import BROKER_DEFAULTS

    d = _snapshot(tmp_path)
    (d / "server.properties").write_text("inter.broker.protocol.version=0.11\n")
    m, _, sc = _load(d)
    m["cluster"]["emulator"] = {"engine": "local"}
    c = Cluster.from_scenario(m, spark=None, out=str(tmp_path / "run"))
    now = c.round * c.round_ms
    c.apply({"crash": 1})
    expiry = c.control.session_expiry[1]  # when the controller sees broker 1 gone
    assert expiry - now != BROKER_DEFAULTS["zookeeper.session.timeout.ms"]
    assert W.loss_acted_ms(sc, W.resolve_loss(sc, broker=[1]), now, settle_ms=0) == expiry
