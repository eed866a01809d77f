"""Real Kafka 2.8.2 beside the emulator (sparkkafka/realkafka, docs/fidelity.md).

The unit tests need no JVM. The slow test starts a real ZooKeeper and three real Kafka 2.8.2 brokers
(the classpath resolved by Maven into ~/.cache/sparkkafka on first use) and measures the throttle case of
docs/fidelity.md: about 80 s on the shared 2-core machine.
"""

from __future__ import annotations

import json
import time

import pytest

from sparkkafka import parse_scenario
from sparkkafka.errors import NotYetSupportedError
from sparkkafka.realkafka import jars
from sparkkafka.realkafka.cluster import RealCluster, server_properties
from sparkkafka.realkafka.timeline import check_supported


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def test_server_properties_carry_identity_dirs_rack_and_the_scenarios_configs():
    p = _props(server_properties(2, 9093, 2181, ["/x/2/d0", "/x/2/d1"], "rack-a",
                                 {"min.insync.replicas": 2, "unclean.leader.election.enable": True,
                                  "num.io.threads": 4, "broker.id": 99}, brokers=2))
    assert p["broker.id"] == "2"  # identity keys are the harness's, whatever the config says
    assert p["listeners"] == "PLAINTEXT://127.0.0.1:9093"
    assert p["zookeeper.connect"] == "127.0.0.1:2181"
    assert p["log.dirs"] == "/x/2/d0,/x/2/d1"
    assert p["broker.rack"] == "rack-a"
    assert p["min.insync.replicas"] == "2"
    assert p["unclean.leader.election.enable"] == "true"  # Kafka's boolean spelling
    assert p["num.io.threads"] == "4"  # the scenario wins over the small-machine default
    assert p["offsets.topic.replication.factor"] == "2"  # Kafka's 3 cannot be met by 2 brokers


def test_no_rack_no_broker_rack_and_one_folder_per_log_dir(tmp_path):
    assert "broker.rack" not in _props(server_properties(1, 1, 2, ["/a"], None, {}, brokers=3))
    sc = parse_scenario({"cluster": {"brokers": [1, 2], "log_dirs": ["d0", "/var/kafka/data-2"]},
                         "topics": [{"name": "t"}], "run": {"until_ms": 100}})
    c = RealCluster.for_scenario(sc, tmp_path)
    assert c.broker_dirs(2) == [tmp_path / "brokers/2/d0", tmp_path / "brokers/2/data-2"]


def test_the_pom_names_kafkas_distribution_artifacts():
    pom = jars.pom("2.8.2")
    assert "<artifactId>kafka_2.13</artifactId><version>2.8.2</version>" in pom
    assert "<artifactId>kafka-tools</artifactId><version>2.8.2</version>" in pom
    with pytest.raises(jars.KafkaSetupError, match="Kafka 3.0.0 is not supported"):
        jars.classpath("3.0.0")


def test_events_real_kafka_cannot_drive_are_refused_naming_them():
    sc = parse_scenario({"cluster": {"brokers": [1, 2]}, "topics": [{"name": "t"}],
                         "timeline": [{"at": 0, "crash": 1}, {"at": 10, "isolate": {"brokers": [1]}}],
                         "run": {"until_ms": 100}})
    with pytest.raises(NotYetSupportedError) as e:
        check_supported(sc)
    assert e.value.field == "timeline[1].isolate" and "'isolate'" in e.value.message


@pytest.mark.slow
def test_real_kafka_moves_nothing_under_a_throttle_its_in_sync_traffic_exceeds(tmp_path):
    """docs/fidelity.md: two partitions on [1, 2] moved to [1, 3] under --throttle 200000 while 1 MB/s goes
    into partition 1. Broker 2's in-sync fetches of partition 1 are counted in broker 1's leader quota
    (KafkaApis.sizeOfThrottledPartitions), so broker 3 (out of sync) gets at most the one fetch served
    before the sensor filled, and nothing of the idle partition 0, as the emulator (0 bytes)."""
    from sparkkafka.realkafka import tools

    with RealCluster(brokers=[1, 2, 3], workdir=tmp_path / "kafka") as c:
        tools.create_topic(c, "t", 2, 2, assignment={0: [1, 2], 1: [1, 2]})
        for p in (0, 1):
            assert tools.produce_now(c, "t", p, 300, 10_000) == 300  # 3 MB each
        prod = tools.SteadyProducer(c, "t", [1], 100, 60_000, acks="all", value_bytes=10_000).start()
        time.sleep(3)
        plan = {"version": 1, "partitions": [{"topic": "t", "partition": p, "replicas": [1, 3]} for p in (0, 1)]}
        out = tools.reassign(c, plan, 200_000, tmp_path)
        assert "The inter-broker throttle limit was set to 200000 B/s" in out
        topic_cfg = json.loads(c.zk().get("/config/topics/t")[0])["config"]
        assert topic_cfg == {"leader.replication.throttled.replicas": "0:1,0:2,1:1,1:2",
                             "follower.replication.throttled.replicas": "0:3,1:3"}
        time.sleep(30)
        moved = [tools.log_bytes(c, 3, "t", p) for p in (0, 1)]
        leader_grew = tools.log_bytes(c, 1, "t", 1)
        isr = [json.loads(c.zk().get(f"/brokers/topics/t/partitions/{p}/state")[0])["isr"] for p in (0, 1)]
        prod.stop()
    # shared 200 kB/s would have moved some 6 MB in 30 s; the in-sync traffic leaves at most one fetch
    assert moved[0] == 0, moved
    assert moved[1] <= 1024 * 1024, moved  # replica.fetch.max.bytes
    assert leader_grew > 3_000_000 + 25 * 1_000_000 * 0.8, leader_grew  # the 1 MB/s did go in
    assert isr == [[1, 2], [1, 2]]


def test_the_comparison_holds_within_its_tolerance_and_names_what_differs():
    from sparkkafka.realkafka.compare import compare, tolerance_ms

    tol = tolerance_ms({"replica.lag.time.max.ms": 10000}, restart_delay_ms=0)
    assert tol == 7000
    key = ("orders", 2)
    real = {key: [(1, (3, 0, (1, 2, 3))), (8447, (1, 1, (1, 2)))]}
    # the emulator's own timing (-100: before the start), and a state shorter than the sampling interval
    emu = {key: [(-100, (3, 0, (1, 2, 3))), (8000, (3, 0, (1, 2))), (8050, (1, 1, (1, 2)))]}
    assert compare(real, emu, tol) == []
    late = {key: [(-100, (3, 0, (1, 2, 3))), (16000, (1, 1, (1, 2)))]}
    [m] = compare(real, late, tol)
    assert "more than 7000 ms apart" in m.message and m.partition == key
    other = {key: [(0, (3, 0, (1, 2, 3))), (8000, (2, 1, (1, 2)))]}
    [m] = compare(real, other, tol)
    assert m.message.startswith("states differ")
