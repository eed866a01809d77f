"""Real Kafka 2.8.2 beside the emulator (sparkkafka/realkafka, docs/fidelity.md).

No JVM here: the harness's parts on their own. The real ZooKeeper and Kafka 2.8.2 brokers run in
tests/test_replay.py and tests/test_differential.py (the throttle case of docs/fidelity.md among them).
"""

from __future__ import annotations

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


def test_a_short_emulator_state_pairs_when_kafka_shows_it_and_is_left_out_when_not():
    """A reassignment's completion: the new replica 3 joins the ISR, is elected, the old replica 1 goes, all
    in one emulator round (0 ms apart), ~235 ms apart on Kafka, whose 200 ms sampler sees some of the steps:
    the comparison pairs the ones Kafka shows and leaves the others out; a state the emulator never had, or
    a lasting emulator state Kafka never showed, is still a mismatch."""
    from sparkkafka.realkafka.compare import compare_partition

    moving, joined, elected, done = (1, 1, (1,)), (1, 1, (1, 3)), (3, 2, (1, 3)), (3, 3, (3,))
    emulated = [(0, (1, 0, (1,))), (2000, moving), (17700, joined), (17700, elected), (17700, done)]
    start = [(0, (1, 0, (1,))), (3700, moving)]
    for seen in ([elected, done], [joined, done], [joined, elected, done], [done]):
        real = start + [(17900 + 200 * i, s) for i, s in enumerate(seen)]
        assert compare_partition(("t", 0), real, emulated, 7000) == [], seen
    other = compare_partition(("t", 0), start + [(17900, (3, 2, (3,))), (18100, done)], emulated, 7000)
    assert other and other[0].message.startswith("states differ")
    unseen = compare_partition(("t", 0), [(0, (1, 0, (1,))), (17900, done)], emulated, 7000)
    assert unseen and unseen[0].message.startswith("states differ")
