"""`sparkkafka import`: Kafka tools' text -> a scenario starting in that cluster's state.

Pure tests (parsers, builder, loader extension, log layout, CLI) plus one Spark test: the imported sample
cluster, started for one round, prints the describe text it was imported from.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from sparkkafka import ScenarioError, import_cluster
from sparkkafka.cli import main
from sparkkafka.scenario import load_scenario, parse_scenario
from sparkkafka.scenario.initial_logs import partition_layout
from sparkkafka.scenario.kafka_import import (
    build_scenario,
    parse_configs,
    parse_log_dirs,
    parse_racks,
    parse_rates,
    parse_topics_describe,
)
from sparkkafka.scenario.model import PartitionStateSpec, ReplicaLogSpec
from sparkkafka.tools.describe import describe_lines

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "snapshots" / "sample"
T = "\t"

# Kafka 2.x (before KIP-516: no TopicId), as TopicCommand 2.4-2.7 prints it, one partition reassigning
DESCRIBE_2X = (
    "Topic: orders\tPartitionCount: 2\tReplicationFactor: 3\tConfigs: min.insync.replicas=2,"
    "leader.replication.throttled.replicas=0:1,0:2\n"
    "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3\n"
    "\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 2,3,4,1\tIsr: 2,3,1\tAdding Replicas: 4\t"
    "Removing Replicas: 1\n"
)
# Kafka 3.8+ (KIP-966 Elr columns, empty against a KRaft broker; N/A on the Metadata fallback), TopicId
DESCRIBE_3X = (
    "Topic: orders\tTopicId: 9xXw2y1hQkmQz5fUu8W3Qg\tPartitionCount: 2\tReplicationFactor: 3\tConfigs: \n"
    "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3\tElr: \tLastKnownElr: \n"
    "\tTopic: orders\tPartition: 1\tLeader: none\tReplicas: 2,3,1\tIsr: 3\tElr: N/A\tLastKnownElr: N/A\n"
)
LOG_DIRS_36 = (  # 3.6+ key order
    "Querying brokers for log directories information\n"
    "Received log directory information from brokers 1,2,3\n"
    + json.dumps({"brokers": [
        {"broker": b, "logDirs": [
            {"partitions": [{"partition": f"orders-{p}", "size": 1000 + b, "offsetLag": 0, "isFuture": False}
                            for p in (0, 1) if d == "/d1"], "error": None, "logDir": d}
            for d in ("/d1", "/d2")]}
        for b in (1, 2, 3)], "version": 1}, separators=(",", ":")) + "\n")


def _files(tmp_path: Path, **texts: str) -> dict[str, str]:
    out = {}
    for name, text in texts.items():
        p = tmp_path / name
        p.write_text(text)
        out[name] = str(p)
    return out


# ------------------------------------------------------------------------------------------ parsers
def test_parse_2x_describe_with_reassignment_and_comma_config():
    d = parse_topics_describe(DESCRIBE_2X, "d.txt")
    h = d.topics["orders"]
    assert h.topic_id is None and h.partition_count == 2 and h.replication_factor == 3
    assert h.configs == {"min.insync.replicas": "2", "leader.replication.throttled.replicas": "0:1,0:2"}
    p0, p1 = d.partitions["orders"]
    assert (p0.leader, p0.replicas, p0.isr, p0.adding, p0.removing) == (1, (1, 2, 3), (1, 2, 3), (), ())
    assert (p1.replicas, p1.isr, p1.adding, p1.removing, p1.line) == ((2, 3, 4, 1), (2, 3, 1), (4,), (1,), 3)


def test_parse_3x_describe_with_topic_id_and_elr_columns():
    d = parse_topics_describe(DESCRIBE_3X)
    assert d.topics["orders"].topic_id == "9xXw2y1hQkmQz5fUu8W3Qg"
    p0, p1 = d.partitions["orders"]
    assert p0.isr == (1, 2, 3) and p1.leader == -1 and p1.isr == (3,)


def test_parse_docs_form_without_space_after_colon():
    text = "Topic:foo\tPartitionCount:1\tReplicationFactor:1\tConfigs:\n\tTopic: foo\tPartition: 0\tLeader: 0\t" \
           "Replicas: 0\tIsr: 0\n"
    assert parse_topics_describe(text).partitions["foo"][0].replicas == (0,)


def test_parse_log_dirs_both_key_orders():
    new = parse_log_dirs(LOG_DIRS_36)
    data = json.loads(LOG_DIRS_36.splitlines()[2])
    old_order = {"version": 1, "brokers": [{"broker": b["broker"], "logDirs": [
        {"logDir": d["logDir"], "error": d["error"], "partitions": d["partitions"]} for d in b["logDirs"]]}
        for b in data["brokers"]]}
    old = parse_log_dirs(json.dumps(old_order))  # <=3.5 order, without the two header lines
    assert new.brokers == old.brokers == (1, 2, 3)

    def key(lg):
        return (lg.broker, lg.log_dir, lg.topic, lg.partition, lg.size, lg.offset_lag, lg.is_future)

    assert [key(lg) for lg in new.logs] == [key(lg) for lg in old.logs] and len(new.logs) == 6
    assert {(lg.broker, lg.log_dir, lg.topic, lg.partition, lg.size) for lg in new.logs} >= {(2, "/d1", "orders", 1, 1002)}


def test_parse_racks_configs_rates():
    assert parse_racks("# racks\n1=a\n2: b\n3 c\n") == {1: ("a", "racks:2"), 2: ("b", "racks:3"), 3: ("c", "racks:4")}
    c = parse_configs("Dynamic configs for broker 1 are:\n"
                      "  leader.replication.throttled.rate=700000000 sensitive=false "
                      "synonyms={DYNAMIC_BROKER_CONFIG:leader.replication.throttled.rate=700000000}\n"
                      "Dynamic configs for topic orders are:\n"
                      "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}\n"
                      "  segment.bytes=1073741824 sensitive=false synonyms={DEFAULT_CONFIG:log.segment.bytes=1073741824}\n")
    assert {k: v for k, (v, _) in c.dynamic["1"].items()} == {"leader.replication.throttled.rate": "700000000"}
    assert {k: v for k, (v, _) in c.topics["orders"].items()} == {"retention.ms": "1000"}
    props = parse_configs("# server.properties\nmin.insync.replicas=2\nbroker.id: 3\n")
    assert {k: v for k, (v, _) in props.static.items()} == {"min.insync.replicas": "2", "broker.id": "3"}
    rates = parse_rates("topic,records_per_sec,value_bytes,acks\norders,50,200,all\n")
    assert [(r.topic, r.records_per_sec, r.value_bytes, r.acks) for r in rates] == [("orders", 50.0, 200, "all")]


# ------------------------------------------------------------------------------------------ errors
BAD = {
    "not describe output": ("d", "hello world\n", "d:1 <line>"),
    "unknown field": ("d", "Topic: a\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: \tColour: red\n", "d:1 Colour"),
    "bad replica list": ("d", "Topic: a\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: \n"
                              "\tTopic: a\tPartition: 0\tLeader: 1\tReplicas: 1,x\tIsr: 1\n", "d:2 Replicas"),
    "leader not in isr": ("d", "Topic: a\tPartitionCount: 1\tReplicationFactor: 2\tConfigs: \n"
                               "\tTopic: a\tPartition: 0\tLeader: 2\tReplicas: 1,2\tIsr: 1\n", "d:2 Leader"),
    "missing partition": ("d", "Topic: a\tPartitionCount: 2\tReplicationFactor: 1\tConfigs: \n"
                               "\tTopic: a\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\n", "d:1 PartitionCount"),
    "other topic's line": ("d", "Topic: a\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: \n"
                                "\tTopic: b\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\n", "d:2 Topic"),
    "bad topic id": ("d", "Topic: a\tTopicId: xyz\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: \n", "d:1 TopicId"),
    "rf mismatch": ("d", "Topic: a\tPartitionCount: 1\tReplicationFactor: 3\tConfigs: \n"
                         "\tTopic: a\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\n", "d:1 ReplicationFactor"),
    "bad json": ("l", "Querying brokers for log directories information\n{\"version\":1,", "l:2 <json>"),
    "json field type": ("l", '{"version":1,"brokers":[{"broker":"1","logDirs":[]}]}', "l:1 $.brokers[0].broker"),
    "text after json": ("l", '{"version":1,"brokers":[]}\nmore\n', "l:2 <line>"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_input_names_line_and_field_and_writes_nothing(tmp_path, case, capsys):
    which, text, field = BAD[case]
    describe = DESCRIBE_2X.replace("Replicas: 2,3,4,1\tIsr: 2,3,1\tAdding Replicas: 4\tRemoving Replicas: 1",
                                   "Replicas: 2,3,1\tIsr: 2,3,1")
    f = _files(tmp_path, d=text if which == "d" else describe, l=text if which == "l" else LOG_DIRS_36)
    out = tmp_path / "out.yaml"
    with pytest.raises(ScenarioError) as e:
        import_cluster(f["d"], f["l"], out=out)
    assert e.value.field.replace(str(tmp_path) + "/", "") == field
    assert not out.exists()
    code = main(["import", f["d"], "--log-dirs", f["l"], "--out", str(out)])
    assert code == 2 and not out.exists()
    assert field.split(" ")[0] in capsys.readouterr().err.replace(str(tmp_path) + "/", "")


def test_inconsistent_inputs_name_line_and_field(tmp_path):
    d = parse_topics_describe(DESCRIBE_2X, "d")
    ld = parse_log_dirs(LOG_DIRS_36, "l")
    with pytest.raises(ScenarioError) as e:  # broker 4 (an adding replica) is not among log-dirs' brokers
        build_scenario(d, ld)
    assert (e.value.field, e.value.value) == ("d:3 Replicas", "2,3,4,1") and "broker 4" in e.value.message
    ok = parse_topics_describe(DESCRIBE_3X, "d")
    missing = LOG_DIRS_36.replace('{"partition":"orders-1","size":1003,"offsetLag":0,"isFuture":false}', "")
    missing = missing.replace(",]", "]")
    with pytest.raises(ScenarioError) as e:  # a replica with no log in log-dirs
        build_scenario(ok, parse_log_dirs(missing, "l"))
    assert e.value.field == "d:3 Replicas" and e.value.value == 3
    stray = LOG_DIRS_36.replace('"orders-1","size":1003', '"other-0","size":1003')
    with pytest.raises(ScenarioError) as e:  # a log of a partition describe does not list
        build_scenario(ok, parse_log_dirs(stray, "l"))
    assert e.value.field == "l:3 $.brokers[2].logDirs[0].partitions[1].partition"
    with pytest.raises(ScenarioError) as e:  # a rack for a broker the cluster does not have
        build_scenario(ok, parse_log_dirs(LOG_DIRS_36, "l"), parse_racks("1=a\n2=b\n3=c\n9=a\n", "r"))
    assert e.value.field == "r:4 broker"
    with pytest.raises(ScenarioError) as e:  # server.properties names a dir the log-dirs output lacks
        build_scenario(ok, parse_log_dirs(LOG_DIRS_36, "l"), None, [parse_configs("log.dirs=/d1,/d2,/d3\n", "s")])
    assert e.value.field == "s:1 log.dirs" and "['/d3'] are missing" in e.value.message
    with pytest.raises(ScenarioError) as e:  # a config value of the wrong type
        build_scenario(ok, None, None, [parse_configs("min.insync.replicas=two\n", "s")])
    assert e.value.field == "s:1 min.insync.replicas"


# ------------------------------------------------------------------------------------------ scenario
def test_imported_scenario_loads_with_state_and_drops_unmodelled_configs(tmp_path):
    f = _files(tmp_path, d=DESCRIBE_3X, l=LOG_DIRS_36, r="1=a\n2=b\n3=c\n", s="min.insync.replicas=2\nlisteners=x\n",
               rates="orders,10,100,all\n")
    out = tmp_path / "s.yaml"
    sc = import_cluster(f["d"], f["l"], racks=f["r"], configs=[f["s"]], rates=f["rates"], name="t", out=out)
    assert "left out: listeners" in out.read_text() and "listeners" not in sc["cluster"]["config"]
    s = load_scenario(out)
    t = s.topics[0]
    assert t.topic_id == "9xXw2y1hQkmQz5fUu8W3Qg" and s.racks == {1: "a", 2: "b", 3: "c"}
    assert s.log_dirs == ("/d1", "/d2") and s.config["min.insync.replicas"] == 2
    assert t.state[1] == PartitionStateSpec(-1, (3,), (), (), {b: ReplicaLogSpec("/d1", 1000 + b) for b in (2, 3, 1)})
    assert [e.type for e in s.timeline] == ["produce"] and s.timeline[0].args["rate_per_sec"] == 10.0


def _loads(topic: dict) -> None:
    parse_scenario({"cluster": {"brokers": [1, 2, 3], "log_dirs": ["a", "b"]}, "topics": [topic]})


@pytest.mark.parametrize("state, field", [
    ({0: {"leader": 2, "isr": [1]}}, "topics[0].state[0].leader"),
    ({0: {"leader": 1, "isr": [1, 3]}}, "topics[0].state[0].isr[1]"),
    ({0: {"leader": 1, "isr": [1], "logs": {1: {"dir": "c", "bytes": 1}}}}, "topics[0].state[0].logs[1].dir"),
    ({0: {"leader": 1, "isr": [1], "logs": {1: {"dir": "a", "bytes": 1, "future": {"dir": "a", "bytes": 0}}}}},
     "topics[0].state[0].logs[1].future.dir"),
    ({1: {"leader": 1, "isr": [1]}}, "topics[0].state"),
])
def test_loader_checks_the_state_section(state, field):
    with pytest.raises(ScenarioError) as e:
        _loads({"name": "t", "assignment": {0: [1, 2]}, "state": state})
    assert e.value.field == field


def test_state_allows_per_partition_replication_factors_and_reassignments():
    _loads({"name": "t", "id": "9xXw2y1hQkmQz5fUu8W3Qg", "assignment": {0: [1, 2], 1: [1, 2, 3]},
            "state": {0: {"leader": 1, "isr": [1, 2]},
                      1: {"leader": "none", "isr": [2], "adding": [3], "removing": [1]}}})
    with pytest.raises(ScenarioError):  # without state, Kafka's topic tool rule (one RF) holds
        _loads({"name": "t", "assignment": {0: [1, 2], 1: [1, 2, 3]}})


def test_layout_gives_exact_sizes_and_the_same_record_at_each_offset():
    rng = random.Random(5)
    for _ in range(200):
        logs = {b: ReplicaLogSpec("a", rng.randrange(0, 5000)) for b in (1, 2, 3, 4)}
        logs[2] = ReplicaLogSpec("a", logs[2].size, "b", rng.randrange(0, 6000))
        st = PartitionStateSpec(1, (1, 2), (4,), (3,), logs)
        sizes, ranges = partition_layout(st, rng.choice([1, 7, 1000]))
        assert (sizes > 0).all()
        for (b, fut), (d, a, e) in ranges.items():
            want = logs[b].future_size if fut else logs[b].size
            assert int(sizes[a:e].sum()) == want
            assert d == (logs[b].future_dir if fut else "a")
        ends = {ranges[(b, False)][2] for b in st.isr}
        assert len(ends) == 1  # the ISR members end together (the leader's LEO)
        if logs[2].future_size <= logs[2].size:  # a future log copies from its current log's start
            assert ranges[(2, True)][1] == ranges[(2, False)][1]


# ------------------------------------------------------------------------------------------ sample
def _sample_args(record_bytes: int | None = None, rates: bool = True) -> dict:
    return dict(topics_describe=SAMPLE / "topics-describe.txt", log_dirs=SAMPLE / "log-dirs.txt",
                racks=SAMPLE / "racks.txt", configs=[SAMPLE / "server.properties"],
                rates=SAMPLE / "rates.csv" if rates else None, name="sample", record_bytes=record_bytes)


def test_sample_snapshot_is_what_make_sample_writes(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_sample", SAMPLE.parent / "make_sample.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.main(tmp_path)
    for f in SAMPLE.iterdir():
        assert (tmp_path / f.name).read_text() == f.read_text(), f.name


def test_sample_imports_and_its_state_describes_as_the_input():
    """The pure half of the round trip: describe_lines over the imported state gives back the text."""
    s = parse_scenario(import_cluster(**_sample_args()))
    assert len(s.brokers) == 12 and len(set(s.racks.values())) == 3 and len(s.log_dirs) == 3
    assert sum(t.partitions for t in s.topics) >= 300
    states = [st for t in s.topics for st in t.state.values()]
    assert sum(bool(st.adding) for st in states) == 2
    assert sum(log.future_dir is not None for st in states for log in st.logs.values()) == 2
    topics = pd.DataFrame([{"topic": t.name, "topic_id": t.topic_id, "partition_count": t.partitions,
                            "replication_factor": t.replication_factor, "configs": {**t.config},
                            "min_insync_replicas": 2, "marked_for_deletion": False} for t in s.topics])
    parts = pd.DataFrame([{"topic": t.name, "partition": p, "leader": st.leader, "replicas": list(t.assignment[p]),
                           "isr": list(st.isr), "adding": list(st.adding), "removing": list(st.removing)}
                          for t in s.topics for p, st in t.state.items()])
    lines = describe_lines(topics, parts, live_brokers=s.brokers)
    assert lines == (SAMPLE / "topics-describe.txt").read_text().splitlines()


def test_cli_import_writes_a_scenario_that_loads(tmp_path, capsys):
    out = tmp_path / "sample.yaml"
    code = main(["import", str(SAMPLE / "topics-describe.txt"), "--log-dirs", str(SAMPLE / "log-dirs.txt"),
                 "--racks", str(SAMPLE / "racks.txt"), "--configs", str(SAMPLE / "server.properties"),
                 "--rates", str(SAMPLE / "rates.csv"), "--record-bytes", "268435456", "--out", str(out)])
    assert code == 0 and "12 brokers, 8 topics, 302 partitions" in capsys.readouterr().out
    s = load_scenario(out)
    assert s.name == "sample" and s.emulator["initial.record.bytes"] == 268435456


# ------------------------------------------------------------------------------------------ Spark
def test_imported_sample_cluster_describes_as_the_input(spark, tmp_out):
    """Round trip: import, start the cluster for one round, describe it: Kafka's text comes back; kafka-log-dirs
    gives back every current log's size, and each future log has copied at least what it had."""
    from sparkkafka import Cluster
    from sparkkafka.tools import operator as op

    c = Cluster.from_scenario(import_cluster(**_sample_args(2**31 - 1, rates=False)),  # no producer: sizes stay
                              spark=spark, out=tmp_out)
    c.step(1)
    assert c.describe() == (SAMPLE / "topics-describe.txt").read_text().splitlines()

    def sizes(text: str) -> dict:
        data = json.loads(text.splitlines()[2])
        return {(b["broker"], d["logDir"], p["partition"], p["isFuture"]): p["size"]
                for b in data["brokers"] for d in b["logDirs"] for p in d["partitions"]}

    got, want = sizes(op.log_dirs_tool(c, None, None).stdout), sizes((SAMPLE / "log-dirs.txt").read_text())
    assert got.keys() == want.keys()
    assert {k: v for k, v in got.items() if not k[3]} == {k: v for k, v in want.items() if not k[3]}
    futures = [k for k in want if k[3]]
    assert len(futures) == 2 and all(want[k] <= got[k] for k in futures)
    assert np.all([got[k] <= got[(k[0], d, k[2], False)] for k in futures for d in c.scenario.log_dirs
                   if (k[0], d, k[2], False) in got])


def test_offline_dir_becomes_a_failed_log_dir_and_cli_prints_to_stdout(tmp_path, capsys):
    data = json.loads(LOG_DIRS_36.splitlines()[2])
    d2 = data["brokers"][2]["logDirs"][0]  # broker 3's /d1 is offline: it lists no partitions
    d2["partitions"], d2["error"] = [], "org.apache.kafka.common.errors.KafkaStorageException"
    f = _files(tmp_path, d=DESCRIBE_3X, l=json.dumps(data))
    assert main(["import", f["d"], "--log-dirs", f["l"]]) == 0
    s = parse_scenario(yaml.safe_load(capsys.readouterr().out))
    assert [(e.type, e.args) for e in s.timeline] == [("fail_log_dir", {"broker": 3, "log_dir": "/d1"})]
    assert s.topics[0].state[0].logs[3] == ReplicaLogSpec("/d1", 0)


def test_a_generated_snapshot_of_any_size_imports_with_the_sizes_asked(tmp_path):
    """tools/snapshot.py at 30 brokers and 3,000 partitions (`sparkkafka bench --operator` writes 200 and
    100,000): three racks, RF 3, every topic scaled, the disks as uneven as the sample's."""
    from sparkkafka import whatif as W
    from sparkkafka.tools import snapshot

    sc = parse_scenario(W.load_snapshot(snapshot.write(tmp_path / "snap", 30, 3000), record_bytes=2**31 - 1))
    assert len(sc.brokers) == 30 and sorted(set(sc.racks.values())) == ["rack-a", "rack-b", "rack-c"]
    assert sum(t.partitions for t in sc.topics) == 3000 and len(sc.topics) == len(snapshot.TOPICS)
    parts = W.partitions_frame(sc)
    usage = W.dir_usage(parts).groupby("dir")["bytes"].sum()
    assert usage["/var/kafka/data-1"] > usage["/var/kafka/data-2"] > usage["/var/kafka/data-3"]
    assert (parts["adding"].map(len) > 0).sum() == 2
