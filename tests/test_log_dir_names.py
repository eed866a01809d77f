"""Log dirs named as Kafka's usually are: absolute paths (with a space or a non-ASCII letter too), e.g.
log.dirs=/var/kafka/d0.

Each name is kept whole in the tables and tools, and stored as one escaped folder under OUT/brokers/<id>/
(and one `log_dir=` folder of the Delta log table), so nothing is written outside the run directory.
"""

from __future__ import annotations

import json
import os
from urllib.parse import unquote

import pytest

from sparkkafka import Cluster, parse_scenario
from sparkkafka.cli import main
from sparkkafka.storage import broker_disk
from sparkkafka.storage.tables import path_component


@pytest.mark.parametrize("name", ["d0", "/var/kafka/d0", "/var/kafka-logs 1", "..", ".", "a%2Fb", "x*[y]?",
                                  "dé/ü"])
def test_path_component_is_one_safe_component_and_round_trips(name):
    c = path_component(name)
    assert "/" not in c and c not in (".", "..") and unquote(c) == name
    assert path_component("a/b") != path_component("a%2Fb")
    assert broker_disk.dir_path("/run/brokers", 3, name) == f"/run/brokers/3/{c}"


def test_absolute_log_dir_names_end_to_end(spark, tmp_path, capsys):
    outside = tmp_path / "kafka"  # where a log dir would land if its name were used as a path
    d0, d1 = f"{outside}/d0", f"{outside}/données 1"  # a space and a non-ASCII letter too
    out = str(tmp_path / "out")
    move = {"version": 1, "partitions": [{"topic": "a", "partition": 0, "replicas": [0, 1],
                                          "log_dirs": ["any", "any"]}]}
    sc = parse_scenario({
        "cluster": {"brokers": [0, 1, 2], "log_dirs": [d0, d1],
                    "config": {"zookeeper.session.timeout.ms": 1000, "auto.leader.rebalance.enable": False}},
        "topics": [{"name": "a", "partitions": 2, "replication_factor": 2, "assignment": {0: [0, 1], 1: [1, 2]}},
                   {"name": "b", "partitions": 1, "replication_factor": 3, "assignment": {0: [1, 2, 0]}}],
        "timeline": [
            {"at": 0, "produce": {"topic": "a", "partition": "all", "rate_per_sec": 40, "duration_ms": 2500,
                                  "acks": "all", "value_bytes": 50}},
            {"at": 0, "produce": {"topic": "b", "partition": 0, "rate_per_sec": 40, "duration_ms": 2500,
                                  "acks": "all", "value_bytes": 50}},
            {"at": 300, "crash": 1},
            {"at": 1300, "restart": 1},
        ],
        "run": {"until_ms": 3000}}, name="abs-log-dirs")
    c = Cluster.from_scenario(sc, spark=spark, out=out)
    c.step(18)  # past the restart (round 13)
    rs = c.replica_state().toPandas()
    assert set(rs["log_dir"]) == {d0, d1}
    placed = rs.sort_values("round").drop_duplicates(["broker", "topic", "partition"], keep="last")
    where = {(r.broker, r.topic, r.partition): r.log_dir for r in placed.itertuples()}
    target = d1 if where[(0, "a", 0)] == d0 else d0
    move["partitions"][0]["log_dirs"] = [target, "any"]
    c.apply({"reassign": {"plan": move}})
    c.run()

    log = c.log().toPandas()
    assert set(log["log_dir"]) <= {d0, d1} and not log["is_future"].any()
    rs = c.replica_state().toPandas()
    assert set(rs["log_dir"]) <= {d0, d1}
    last = rs[rs["round"] == rs["round"].max()]
    now = {(r.broker, r.topic, r.partition): r.log_dir for r in last.itertuples()}
    assert now[(0, "a", 0)] == target
    assert {k: v for k, v in now.items() if k != (0, "a", 0)} == {k: v for k, v in where.items() if k != (0, "a", 0)}
    for (b, t, p), d in now.items():  # every replica's records live in its dir, offsets 0..n-1
        rows = log[(log["broker"] == b) & (log["topic"] == t) & (log["partition"] == p)]
        assert set(rows["log_dir"]) == {d} and sorted(rows["offset"]) == list(range(len(rows)))
    b1 = log[log["broker"] == 1]
    assert len(b1[b1["topic"] == "b"]) == len(log[(log["broker"] == 2) & (log["topic"] == "b")]) > 30  # caught up
    assert c.summary()["lost_acked"] == 0

    # on disk: one escaped folder per dir, inside the run directory
    assert not outside.exists() and sorted(os.listdir(tmp_path)) == ["out"]
    for b in (0, 1, 2):
        assert sorted(os.listdir(os.path.join(out, "brokers", str(b)))) == sorted(map(path_component, (d0, d1)))
    for b, t, p in now:
        assert (t, p, False) in broker_disk.epoch_checkpoints(c.brokers_dir, b, now[(b, t, p)])
    assert sorted(os.listdir(os.path.join(out, "tables", "log", "broker=0"))) == \
        sorted(f"log_dir={path_component(d)}" for d in (d0, d1))

    capsys.readouterr()
    assert main(["log-dirs", out, "--describe", "--broker-list", "0"]) == 0
    text = capsys.readouterr().out
    assert f'"logDir":"{target}"' in text
    body = json.loads(text.split("\n")[2])
    dirs = {d["logDir"]: {q["partition"]: q for q in d["partitions"]} for d in body["brokers"][0]["logDirs"]}
    assert set(dirs) == {d0, d1}
    assert "a-0" in dirs[target] and "a-0" not in dirs[d0 if target == d1 else d1]
    assert dirs[target]["a-0"]["size"] > 0 and dirs[target]["a-0"]["offsetLag"] == 0
    assert not any(q["isFuture"] for d in dirs.values() for q in d.values())
