"""`sparkkafka run` as a user runs it: exit codes, messages, and nothing left behind on bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from sparkkafka.cli import main

GOOD = {
    "name": "cli",
    "cluster": {"brokers": [1, 2, 3], "config": {"min.insync.replicas": 2}},
    "topics": [{"name": "t", "partitions": 2, "replication_factor": 3}],
    "timeline": [{"at": 0, "produce": {"topic": "t", "records": 4, "acks": "all"}}],
    "run": {"until_ms": 800},
}


def write(tmp_path, data):
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(data))
    return str(p)


def bad(**change):
    import copy

    d = copy.deepcopy(GOOD)
    for path, value in change.items():
        *head, last = path.split("__")
        node = d
        for k in head:
            node = node[int(k)] if k.isdigit() else node[k]
        node[int(last) if last.isdigit() else last] = value
    return d


CASES = [
    ("unknown key", bad(topics__0__replicas=3), "topics[0].replicas"),
    ("RF above brokers", bad(topics__0__replication_factor=4), "topics[0].replication_factor"),
    ("unknown broker", bad(timeline=[{"at": 100, "crash": 9}]), "timeline[0].crash"),
    ("negative time", bad(timeline=[{"at": -5, "crash": 1}]), "timeline[0].at"),
    ("acks most", bad(timeline=[{"at": 0, "produce": {"topic": "t", "records": 1, "acks": "most"}}]),
     "timeline[0].produce.acks"),
]


@pytest.mark.parametrize("what,data,field", CASES, ids=[c[0] for c in CASES])
def test_malformed_scenario_exits_2_naming_the_field(tmp_path, what, data, field):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "sparkkafka.cli", "run", write(tmp_path, data), "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert field in proc.stderr
    assert not out.exists()  # no partial run behind


def test_a_bad_master_url_exits_2_naming_it_before_anything_is_made(tmp_path):
    """A typo in --master is bad input like a malformed scenario: exit 2 naming --master and the value,
    no run directory, no JVM started (Spark's own error came after the run directory was made, exit 1)."""
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "sparkkafka.cli", "run", write(tmp_path, GOOD), "--out", str(out),
                           "--master", "bogus://x"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "--master" in proc.stderr and "'bogus://x'" in proc.stderr
    assert not out.exists()


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[4, 3]", "local-cluster[2,1,1024]",
                                    "spark://host:7077", "spark://a:7077,b:7077", "yarn",
                                    "k8s://https://host:6443", "sc://localhost:15002"])
def test_spark_master_urls_pass_the_check(master):
    from sparkkafka.engine.session import check_master

    assert check_master(master) == master


@pytest.mark.parametrize("master", ["bogus://x", "local[0]", "local[2", "locale", "local-cluster[2,1]", "yarn-client",
                                    "spark://", ""])
def test_other_master_values_are_refused_naming_master(master):
    from sparkkafka.engine.session import check_master
    from sparkkafka.errors import ScenarioError

    with pytest.raises(ScenarioError, match="--master") as e:
        check_master(master)
    assert e.value.field == "--master" and e.value.value == master


def test_run_prints_describe_and_summary(spark, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", write(tmp_path, GOOD), "--out", str(out), "--no-progress"]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0].startswith("Topic: t\tTopicId: ") and "\tPartitionCount: 2\tReplicationFactor: 3\t" in lines[0]
    assert lines[0].endswith("\tConfigs: min.insync.replicas=2")  # a static broker setting is not a default
    assert lines[1].startswith("\tTopic: t\tPartition: 0\tLeader: ")
    summary = json.loads(text[text.index("{"):])
    assert summary["acked"] == 4 and summary["lost_acked"] == 0
    assert json.load(open(os.path.join(out, "summary.json"))) == summary
    # the same run again refuses to clobber it, and says so
    assert main(["run", write(tmp_path, GOOD), "--out", str(out), "--no-progress"]) == 2
    assert main(["describe", str(out), "--under-replicated-partitions"]) == 0
    assert capsys.readouterr().out == ""  # nothing under-replicated
