"""The benchmark's reference scenario is the one issue 11 names (no Spark needed)."""

from sparkkafka.bench import reference_scenario


def test_reference_scenario_shape():
    sc = reference_scenario()
    assert len(sc.brokers) == 12
    assert list(sc.log_dirs) == ["d0", "d1", "d2"]
    (t,) = sc.topics
    assert (t.partitions, t.replication_factor) == (3000, 3)
    assert sc.end_ms == 60000
    kinds = [(e.type, e.time_ms(sc.round_ms)) for e in sc.timeline]
    assert ("crash", 20000) in kinds and ("restart", 40000) in kinds
    (prod,) = [e for e in sc.timeline if e.type == "produce"]
    assert str(prod.args["acks"]) in ("all", "-1") and prod.args["partition"] == "all"
    assert prod.args["duration_ms"] == 60000


def test_reference_scenario_scales():
    sc = reference_scenario(96, 20000, 6)
    assert len(sc.brokers) == 96 and sc.topics[0].partitions * sc.topics[0].replication_factor == 60000
    assert [(e.type, e.time_ms(sc.round_ms)) for e in sc.timeline if e.type != "produce"] == [
        ("crash", 2000), ("restart", 4000)]


def test_long_run_scenario_shape():
    from sparkkafka.bench import long_run_scenario

    sc = long_run_scenario(3, 6, 10_000, **{"delta.compact.min.files": 7})
    assert len(sc.brokers) == 3 and len(sc.log_dirs) == 2 and sc.emulator["engine"] == "resident"
    assert sc.emulator["delta.compact.min.files"] == 7
    assert sc.end_ms // sc.round_ms + 1 == 10_000  # rounds 0 .. 9,999
    (prod,) = sc.timeline
    assert prod.args["duration_ms"] > sc.end_ms and prod.args["partition"] == "all"
