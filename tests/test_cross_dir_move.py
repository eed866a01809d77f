"""An intra-broker move (KIP-113) end to end, through the CLI as an operator would: broker 0 with
log.dirs=k0,k1 moves topic1-0 to k0 and topic2-0 to k1 (both "replicas": [0]) with kafka-reassign-partitions
(Kafka 2.8 texts).

topic0 is created first, so by the fewest-logs placement topic1-0 lands in k1 and topic2-0 in k0 (checked,
not assumed): both entries of the plan are real moves. One run is built per module; each test works on a copy.
"""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest
from operator_util import cli, copy_run

from sparkkafka import Cluster, parse_scenario
from sparkkafka.storage import broker_disk
from sparkkafka.tools import reassign_partitions as R

SEED_PLAN = ('{"version":1,"partitions":[{"topic":"topic1","partition":0,"replicas":[0],"log_dirs":["k0"]},'
             '{"topic":"topic2","partition":0,"replicas":[0],"log_dirs":["k1"]}]}')
ROLLBACK = ('{"version":1,"partitions":[{"topic":"topic1","partition":0,"replicas":[0],"log_dirs":["any"]},'
            '{"topic":"topic2","partition":0,"replicas":[0],"log_dirs":["any"]}]}')
EXECUTE_HEAD = (f"Current partition replica assignment\n\n{ROLLBACK}\n\n"
                "Save this to use as the --reassignment-json-file option during rollback\n")
STARTED = ("Successfully started partition reassignments for topic1-0,topic2-0\n"
           "Successfully started log directory moves for: topic1-0-0,topic2-0-0\n")
PARTS_COMPLETE = ("Status of partition reassignment:\n"
                  "Reassignment of partition topic1-0 is complete.\n"
                  "Reassignment of partition topic2-0 is complete.\n")
CLEARING = "Clearing broker-level throttles on broker 0\nClearing topic-level throttles on topics topic1,topic2\n"
RECORDS = 40  # per partition, 100 bytes each
COLS = ["broker", "topic", "partition", "offset", "leader_epoch", "record_id", "key", "value", "value_bytes",
        "timestamp", "is_future"]


def rows(c: Cluster, topic: str) -> pd.DataFrame:
    return c.log(topic, 0).toPandas().sort_values("offset").reset_index(drop=True)


@pytest.fixture(scope="module")
def base(spark, tmp_path_factory):
    """The run before the move, with each partition's log rows and dir."""
    out = str(tmp_path_factory.mktemp("cross-dir") / "base")
    sc = parse_scenario({
        "cluster": {"brokers": [0], "log_dirs": ["k0", "k1"]},
        "topics": [{"name": "topic0"}, {"name": "topic1"}, {"name": "topic2"}],
        "timeline": [{"at": 0, "produce": {"topic": t, "partition": 0, "records": RECORDS, "acks": "all",
                                           "value_bytes": 100}} for t in ("topic1", "topic2")],
        "run": {"until_ms": 500}}, name="cross-dir")
    c = Cluster.from_scenario(sc, spark=spark, engine="local", out=out).run()
    logs = {t: rows(c, t) for t in ("topic1", "topic2")}
    rs = c.replica_state().toPandas()
    last = rs[rs["round"] == rs["round"].max()]
    dirs = {r.topic: r.log_dir for r in last.itertuples()}
    return out, logs, dirs


@pytest.fixture
def run_dir(base, tmp_path):
    return copy_run(base[0], tmp_path)


def plan_file(tmp_path) -> str:
    path = tmp_path / "plan.json"
    path.write_text(SEED_PLAN)
    return str(path)


def check_moved(spark, capsys, run, base_logs):
    """log-dirs --describe, the log table and the assignment after both moves completed."""
    rc, out, _ = cli(capsys, "log-dirs", run, "--describe", "--broker-list", "0")
    head, body = out.split("\n")[:2], json.loads(out.split("\n")[2])
    assert rc == 0 and head == ["Querying brokers for log directories information",
                                "Received log directory information from brokers 0"]
    assert [b["broker"] for b in body["brokers"]] == [0]
    dirs = {d["logDir"]: d for d in body["brokers"][0]["logDirs"]}
    assert set(dirs) == {"k0", "k1"} and all(d["error"] is None for d in dirs.values())
    parts = {d: {p["partition"]: p for p in dirs[d]["partitions"]} for d in dirs}
    size = RECORDS * 100
    assert parts["k0"]["topic1-0"] == {"partition": "topic1-0", "size": size, "offsetLag": 0, "isFuture": False}
    assert parts["k1"]["topic2-0"] == {"partition": "topic2-0", "size": size, "offsetLag": 0, "isFuture": False}
    assert "topic1-0" not in parts["k1"] and "topic2-0" not in parts["k0"]
    assert not any(p["isFuture"] for d in parts.values() for p in d.values())
    assert sum("topic0-0" in d for d in parts.values()) == 1

    # the broker's dirs on disk: each log listed (and its leader-epoch-checkpoint kept) in its new dir only
    disk = os.path.join(run, "brokers", "0")
    listed = {d: open(os.path.join(disk, d, "partitions")).read() for d in ("k0", "k1")}
    assert listed == {"k0": "topic0 0\ntopic1 0\n", "k1": "topic2 0\n"}
    for d in ("k0", "k1"):
        fp = os.path.join(disk, d, "future-partitions")
        assert not os.path.exists(fp) or open(fp).read() == ""
    epochs = {d: broker_disk.epoch_checkpoints(os.path.join(run, "brokers"), 0, d) for d in ("k0", "k1")}
    assert sorted(epochs["k0"]) == [("topic0", 0, False), ("topic1", 0, False)]
    assert sorted(epochs["k1"]) == [("topic2", 0, False)]

    c = Cluster.for_path(spark, run)
    for topic, new_dir in (("topic1", "k0"), ("topic2", "k1")):
        after = rows(c, topic)
        assert set(after["log_dir"]) == {new_dir}
        # the replica's records are the same, apart from their dir (append_ms: when the copy wrote them)
        pd.testing.assert_frame_equal(after[COLS], base_logs[topic][COLS])
        assert list(after["offset"]) == list(range(RECORDS))
    assert set(c.log().toPandas()["is_future"]) == {False}
    rs = c.replica_state().toPandas()
    last = rs[rs["round"] == rs["round"].max()]
    assert {r.topic: r.log_dir for r in last.itertuples() if r.topic != "topic0"} == {"topic1": "k0", "topic2": "k1"}
    assert (last["leo"] == last["hw"]).all()
    ps = c.partition_state().toPandas().sort_values("version")
    latest = ps.drop_duplicates(["topic", "partition"], keep="last")
    assert {r.topic: (list(r.replicas), r.leader, list(r.isr)) for r in latest.itertuples()} == \
        {t: ([0], 0, [0]) for t in ("topic0", "topic1", "topic2")}
    assert c.control.zk.topic_assignment("topic1") == {0: [0]}
    assert c.control.zk.topic_assignment("topic2") == {0: [0]}
    assert c.control.reassignments() == {}
    assert c.summary()["lost_acked"] == 0


def test_placement_before_the_move(base):
    _, logs, dirs = base
    assert dirs == {"topic0": "k0", "topic1": "k1", "topic2": "k0"}
    assert set(logs["topic1"]["log_dir"]) == {"k1"} and set(logs["topic2"]["log_dir"]) == {"k0"}
    for t in ("topic1", "topic2"):
        assert len(logs[t]) == RECORDS and set(logs[t]["value_bytes"]) == {100} and not logs[t]["is_future"].any()


def test_seed_plan_moves_both_replicas_across_dirs(spark, base, run_dir, tmp_path, capsys):
    plan = plan_file(tmp_path)
    rc, out, _ = cli(capsys, "reassign", run_dir, "--execute", "--reassignment-json-file", plan)
    assert (rc, out) == (0, EXECUTE_HEAD + STARTED)
    rc, out, _ = cli(capsys, "run", run_dir, "--until-ms", 1000, "--no-progress")
    assert rc == 0 and json.loads(out[out.index("{"):])["lost_acked"] == 0
    rc, out, _ = cli(capsys, "reassign", run_dir, "--verify", "--reassignment-json-file", plan)
    assert (rc, out) == (0, PARTS_COMPLETE
                         + "Reassignment of replica topic1-0-0 completed successfully.\n"
                         + "Reassignment of replica topic2-0-0 completed successfully.\n" + CLEARING)
    check_moved(spark, capsys, run_dir, base[1])


def test_seed_plan_with_alter_log_dirs_throttle(spark, base, run_dir, tmp_path, capsys):
    """At 10 kB/s (1000 bytes a 100 ms round) a 4000-byte log takes several rounds: --verify first reports the
    moves in progress (no clearing), then complete once the run went on."""
    plan = plan_file(tmp_path)
    rc, out, _ = cli(capsys, "reassign", run_dir, "--execute", "--reassignment-json-file", plan,
                  "--replica-alter-log-dirs-throttle", 10000)
    assert (rc, out) == (0, EXECUTE_HEAD + R.YOU_MUST_RUN_VERIFY_PERIODICALLY + "\n"
                         "The replica-alter-dir throttle limit was set to 10000 B/s\n" + STARTED)
    assert cli(capsys, "run", run_dir, "--until-ms", 700, "--no-progress")[0] == 0
    rc, out, _ = cli(capsys, "reassign", run_dir, "--verify", "--reassignment-json-file", plan)
    assert (rc, out) == (0, PARTS_COMPLETE
                         + "Reassignment of replica topic1-0-0 is still in progress.\n"
                         + "Reassignment of replica topic2-0-0 is still in progress.\n")
    assert cli(capsys, "run", run_dir, "--until-ms", 2000, "--no-progress")[0] == 0
    rc, out, _ = cli(capsys, "reassign", run_dir, "--verify", "--reassignment-json-file", plan)
    assert (rc, out) == (0, PARTS_COMPLETE
                         + "Reassignment of replica topic1-0-0 completed successfully.\n"
                         + "Reassignment of replica topic2-0-0 completed successfully.\n" + CLEARING)
    assert not any(Cluster.for_path(spark, run_dir).control.dynamic.get(b) for b in (0,))
    check_moved(spark, capsys, run_dir, base[1])
