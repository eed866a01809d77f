"""Mid-reassignment, `describe --under-replicated-partitions` and the summary's `under_replicated_partitions`
count the same partitions: Kafka's definition (TopicCommand and the UnderReplicatedPartitions gauge, KIP-352),
|ISR| below the replica count *without* the adding replicas. In-process engine: no Spark."""

from __future__ import annotations

import json

from operator_util import cli

from sparkkafka import Cluster
from sparkkafka.scenario import parse_scenario


def test_describe_filter_and_summary_agree_mid_reassignment(tmp_path, capsys):
    out = str(tmp_path / "run")
    sc = parse_scenario({
        "cluster": {"brokers": [1, 2, 3], "config": {"auto.leader.rebalance.enable": False,
                                                                  "zookeeper.session.timeout.ms": 2000},
                    "emulator": {"engine": "local"}},
        "topics": [{"name": "t", "assignment": {0: [1, 2], 1: [2, 3]}}],
        "timeline": [{"at": 0, "produce": {"topic": "t", "partition": 0, "records": 200, "acks": "all",
                                           "value_bytes": 1000}},
                     {"at": 600, "crash": 3}],
        "run": {"until_ms": 500}}, name="urp")
    Cluster.from_scenario(sc, out=out).run()
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2, 3]}]}))
    # 1 kB/s: the 200 kB copy to broker 3 is far from done when the run stops
    rc, text, err = cli(capsys, "reassign", out, "--execute", "--reassignment-json-file", plan, "--throttle", 1000)
    assert rc == 0, text + err
    c = Cluster.for_path(None, out)
    c.run(until_ms=4000)  # broker 3 crashes at 600, its session expires at 2600: t-1 ([2, 3]) really is under-replicated

    rc, all_lines, _ = cli(capsys, "describe", out)
    assert "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2\tAdding Replicas: 3" in all_lines
    rc, listed, _ = cli(capsys, "describe", out, "--under-replicated-partitions")
    assert rc == 0
    assert [line.split("\t")[2] for line in listed.splitlines()] == ["Partition: 1"]
    assert c.summary()["under_replicated_partitions"] == 1  # t-1 only: t-0's adding replica 3 does not count
