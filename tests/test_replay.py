"""`sparkkafka replay SCENARIO --on-kafka 2.8.2 --out DIR` (sparkkafka/realkafka/replay.py, docs/replay.md).

The refusals and the comparison's output need no JVM. The slow test replays the quickstart from a fresh
directory on real Kafka 2.8.2 (ZooKeeper and three broker JVMs; the emulator on the local engine): about
55 s on the shared 2-core machine.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import toy_event

from sparkkafka import parse_scenario
from sparkkafka.cli import main
from sparkkafka.realkafka import replay as R
from sparkkafka.realkafka.compare import compare_partition
from sparkkafka.scenario.event_kind import unregister

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "conf" / "scenarios" / "quickstart.yaml"


def _refused(capsys, scenario, out, on_kafka: str = "2.8.2") -> str:
    """`replay SCENARIO --on-kafka VERSION --out OUT` exits 2; what it printed on stderr."""
    assert main(["replay", str(scenario), "--on-kafka", on_kafka, "--out", str(out)]) == 2
    return capsys.readouterr().err


def test_an_unknown_kafka_version_is_refused_before_anything(tmp_path, capsys):
    out = tmp_path / "out"
    err = _refused(capsys, QUICKSTART, out, "3.0.0")
    assert "--on-kafka: replay starts real Kafka 2.8.2 only (got '3.0.0')" in err
    assert not out.exists()


def test_an_event_real_kafka_cannot_drive_is_refused_naming_it(tmp_path, capsys):
    kind = toy_event.install()  # a kind registered beside Kafka's: no real-Kafka driver for it
    try:
        sc = tmp_path / "toy.yaml"
        sc.write_text("cluster: {brokers: [1, 2]}\ntopics: [{name: t}]\n"
                      "timeline: [{at: 0, crash: 1}, {at: 5, restart: 1}, {at: 10, crash_all_but: {keep: 2}}]\n"
                      "run: {until_ms: 100}\n")
        out = tmp_path / "out"
        err = _refused(capsys, sc, out)
    finally:
        unregister(kind.name)
    assert "timeline[2].crash_all_but: replay --on-kafka does not drive 'crash_all_but' events yet" in err
    assert not out.exists()


def test_isolate_is_refused_with_the_reason_where_network_namespaces_are_not_allowed(tmp_path, capsys, monkeypatch):
    from sparkkafka.realkafka import netns

    monkeypatch.setattr(netns, "unavailable", lambda: "`ip netns add` is not permitted (mount --make-shared "
                                                      "/run/netns failed: Operation not permitted)")
    sc = tmp_path / "iso.yaml"
    sc.write_text("cluster: {brokers: [1, 2, 3]}\ntopics: [{name: t}]\n"
                  "timeline: [{at: 10, isolate: {brokers: [1]}}, {at: 20, heal: {}}]\nrun: {until_ms: 100}\n")
    err = _refused(capsys, sc, tmp_path / "out")
    assert ("timeline[0].isolate: replay --on-kafka cuts brokers apart with Linux network namespaces, one per "
            "JVM, which this machine does not allow: `ip netns add` is not permitted") in err
    assert not (tmp_path / "out").exists()


def test_a_non_empty_out_is_refused_without_overwrite(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "comparison.json").write_text("{}")
    err = _refused(capsys, QUICKSTART, out)
    assert "--out: directory is not empty (a previous replay?): replace it with --overwrite" in err
    assert str(out) in err and os.listdir(out) == ["comparison.json"]
    (tmp_path / "file").write_text("x")
    err = _refused(capsys, QUICKSTART, tmp_path / "file")
    assert "--out: is a file, not a directory" in err


def test_overwrite_removes_only_what_a_replay_wrote(tmp_path):
    for name in ("emulator", "kafka"):
        (tmp_path / name / "x").mkdir(parents=True)
    (tmp_path / "comparison.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("mine")
    R.clear_out(str(tmp_path))
    assert os.listdir(tmp_path) == ["notes.txt"]


SC = parse_scenario({"cluster": {"brokers": [1, 2, 3], "config": {"replica.lag.time.max.ms": 10000}},
                     "topics": [{"name": "t", "partitions": 1, "replication_factor": 3}],
                     "timeline": [{"at": 2000, "crash": 3}, {"at": 10000, "restart": 3}], "run": {"until_ms": 16000}})
KEY = ("t", 0)
START = (3, 0, (1, 2, 3))
SHRUNK = (1, 1, (1, 2))
BACK = (1, 1, (1, 2, 3))


def _sides(real: list, emu: list, delay_ms: int = 7000) -> tuple[R.Side, R.Side]:
    restarts = [{"broker": 3, "at_ms": 10000, "registered_ms": 10000 + delay_ms, "delay_ms": delay_ms}]
    k = R.Side({KEY: real}, {"acked": 2230, "not_acked": 170, "errors": {"_TRANSPORT": 170}},
               {KEY: {1: 516, 2: 516, 3: 516}}, 30000, restarts)
    e = R.Side({KEY: emu}, {"acked": 1770, "not_acked": 610, "errors": {"NETWORK_EXCEPTION": 600}},
               {KEY: {1: 295, 2: 295, 3: 295}}, 16100)
    return k, e


def test_the_comparison_lists_both_sequences_the_tolerance_and_the_records():
    real, emu = _sides([(0, START), (9226, SHRUNK), (20327, BACK)],
                       [(-100, START), (8000, SHRUNK), (10500, BACK)])
    cmp = R.comparison(SC, "2.8.2", real, emu, "local")
    assert (cmp["tolerance_ms"], cmp["tolerance_after_restart_ms"]) == (2000 + 5000, 2000 + 5000 + 7000)
    assert cmp["mismatches"] == []
    [p] = cmp["partitions"]
    assert [(s["time_ms"], s["leader"], s["leader_epoch"], s["isr"]) for s in p["emulator"]] == [
        (0, 3, 0, [1, 2, 3]), (8000, 1, 1, [1, 2]), (10500, 1, 1, [1, 2, 3])]
    assert [s["leader"] for s in p["kafka"]] == [3, 1, 1]
    assert p["log_end_offsets"] == {"kafka": {"1": 516, "2": 516, "3": 516}, "emulator": {"1": 295, "2": 295, "3": 295}}
    out = R.text(cmp)
    assert ("Tolerance per change: 7000 ms = 2000 + replica.lag.time.max.ms/2 5000; from the first restart "
            "(10000 ms) on, + the restart delay 7000 = 14000 ms") in out
    assert "Broker 3 restarted at 10000 ms on Kafka, registered again at 17000 ms" in out
    assert "   9226 ms  leader  1  epoch  1  isr 1,2" in out and "   8000 ms  leader  1  epoch  1  isr 1,2" in out
    assert "Kafka acked 2230, not acked 170 {'_TRANSPORT': 170}; emulator acked 1770" in out
    assert out.rstrip().endswith("Within tolerance: the sequences and the tools' outputs agree")
    json.dumps(cmp)  # comparison.json


def test_a_change_too_late_or_of_another_leader_is_a_mismatch():
    late, emu = _sides([(0, START), (9226, SHRUNK), (27000, BACK)],
                       [(0, START), (8000, SHRUNK), (10500, BACK)])
    cmp = R.comparison(SC, "2.8.2", late, emu, "local")
    assert cmp["mismatches"] == [f"t-0: {BACK} at 27000 ms on Kafka, 10500 ms on the emulator: more than "
                                 "14000 ms apart"]
    assert "t-0: MISMATCH" in R.text(cmp) and R.text(cmp).rstrip().endswith("1 mismatch(es)")
    # the restart delay is allowed from the restart on only: the session expiry 7.5 s late is a mismatch
    slow, emu = _sides([(0, START), (15500, SHRUNK), (20327, BACK)],
                       [(0, START), (8000, SHRUNK), (10500, BACK)])
    assert R.comparison(SC, "2.8.2", slow, emu, "local")["mismatches"] == [
        f"t-0: {SHRUNK} at 15500 ms on Kafka, 8000 ms on the emulator: more than 7000 ms apart"]
    other, emu = _sides([(0, START), (9226, (2, 1, (1, 2)))], [(0, START), (8000, SHRUNK)])
    [m] = R.comparison(SC, "2.8.2", other, emu, "local")["mismatches"]
    assert m.startswith("t-0: states differ")


def test_at_the_end_kafka_may_lag_by_the_tolerance_but_every_emulator_state_must_show():
    tol, end = 7000, 16000
    # the emulator's ISR expansion at 15 s shows on Kafka at 19 s (observed until end + tol): agreed
    assert compare_partition(KEY, [(0, START), (19000, BACK)], [(0, START), (15000, BACK)], tol, end_ms=end) == []
    # Kafka's change after end - tol, with none on the emulator: the emulator could make it past its end
    real = [(0, START), (9500, SHRUNK)]
    assert compare_partition(KEY, real, [(0, START)], tol, end_ms=end) == []
    cmp = R.comparison(SC, "2.8.2", *_sides(real, [(0, START)], delay_ms=0), "local")
    assert cmp["partitions"][0]["kafka_after_end"] == [{"time_ms": 9500, "leader": 1, "leader_epoch": 1,
                                                        "isr": [1, 2], "deleted": False}]
    assert "(after the end: not compared)" in R.text(cmp)
    # ... but not one well before the end, and not an emulator state Kafka never reached
    [m] = compare_partition(KEY, [(0, START), (5000, SHRUNK)], [(0, START)], tol, end_ms=end)
    assert m.message.startswith("states differ")
    [m] = compare_partition(KEY, [(0, START)], [(0, START), (15000, SHRUNK)], tol, end_ms=end)
    assert m.message.startswith("states differ")


def test_a_restart_delay_is_until_the_brokers_registration_or_bounded_while_it_has_none():
    registered = [(0, 1), (0, 2), (0, 3), (17565, 3)]  # the first sample's, then broker 3 again
    [r] = R._restarts([(10013, 3)], registered, 30000, alive=lambda b: True)
    assert r == {"broker": 3, "at_ms": 10013, "started_ms": 10013, "registered_ms": 17565, "delay_ms": 7552}
    # a JVM started late (a shutdown before it held the timeline): the delay counts from the event's time
    [r] = R._restarts([(10000, 3, 10868)], registered, 30000, alive=lambda b: True)
    assert (r["started_ms"], r["registered_ms"], r["delay_ms"]) == (10868, 17565, 7565)
    cmp = R.comparison(SC, "2.8.2", *_sides([(0, START)], [(0, START)]), "local")
    cmp["restarts"] = [r]
    assert ("Broker 3 restarted at 10000 ms on Kafka (its JVM started 868 ms later: the timeline was held), "
            "registered again at 17565 ms") in R.text(cmp)
    [r] = R._restarts([(10013, 3)], registered[:3], 20013, alive=lambda b: True)
    assert (r["registered_ms"], r["delay_ms"]) == (None, 10000)  # still starting: counted until now
    [r] = R._restarts([(10013, 3)], registered[:3], 90000, alive=lambda b: True)
    assert r["delay_ms"] == R.RESTART_WAIT_MS
    [r] = R._restarts([(10013, 3)], registered[:3], 20013, alive=lambda b: False)
    assert r["delay_ms"] == 0  # its JVM exited: nothing to wait for


@pytest.mark.slow
@pytest.mark.replay(QUICKSTART)
def test_replay_of_the_quickstart_agrees_and_lists_the_leader_change_on_both_sides(replayed):
    """The quickstart (broker 3, leader of orders-0 and orders-3, crashed at 2 s and restarted at 10 s) on
    real Kafka 2.8.2 and on the emulator, from a fresh directory as a user runs it."""
    cmp, out, parts = replayed.cmp, replayed.out, replayed.partitions
    assert cmp["mismatches"] == [] and cmp["engine"] == "local"
    for key in (("orders", 0), ("orders", 3)):  # broker 3 led both: a new leader, epoch 1, on both sides
        for side in ("kafka", "emulator"):
            seq = [(s["leader"], s["leader_epoch"]) for s in parts[key][side]]
            assert seq[0] == (3, 0) and seq[1][1] == 1 and seq[1][0] != 3, (key, side, seq)
            assert parts[key][side][-1]["isr"] == [1, 2, 3]  # broker 3 back in the ISR
    [restart] = cmp["restarts"]
    assert restart["broker"] == 3 and restart["registered_ms"] is not None
    kafka = cmp["records"]["kafka"]
    leader_leo = sum(max(p["log_end_offsets"]["kafka"].values()) for p in cmp["partitions"])
    assert kafka["acked"] > 0 and leader_leo >= kafka["acked"]  # every acked record is in a log
    # orders-1 (broker 3 a follower): 200 records/s for 12 s over 4 partitions, none lost, on every replica
    assert parts[("orders", 1)]["log_end_offsets"] == {side: {"1": 600, "2": 600, "3": 600}
                                                       for side in ("kafka", "emulator")}
    assert (out / "emulator" / "run.json").is_file() and (out / "kafka" / "brokers" / "3" / "server.log").is_file()


KAFKA_DESCRIBE = ("Topic: orders\tTopicId: 3X_pqkKPQ8u1vTEz8I3Ygw\tPartitionCount: 1\tReplicationFactor: 3\t"
                  "Configs: min.insync.replicas=2\n\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 3,1,2\t"
                  "Isr: 1,2,3\n")


def test_tool_outputs_are_compared_byte_for_byte_with_the_topic_ids_masked():
    """kafka-topics --describe of both sides: equal once the TopicIds are masked; an ISR in another order is
    a mismatch, shown as a unified diff, and counts in the comparison's mismatches."""
    emulated = KAFKA_DESCRIBE.replace("3X_pqkKPQ8u1vTEz8I3Ygw", "fqC03fZJSoSmxQe0e4jC7w")
    same = R.compare_tools({R.DESCRIBE: KAFKA_DESCRIBE}, {R.DESCRIBE: emulated})[R.DESCRIBE]
    assert same["equal"] and "TopicId: <masked>\tPartitionCount" in same["kafka"] and not same["diff"]
    other = R.compare_tools({R.DESCRIBE: KAFKA_DESCRIBE}, {R.DESCRIBE: emulated.replace("Isr: 1,2,3", "Isr: 1,3,2")})
    assert not other[R.DESCRIBE]["equal"]
    assert "-\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 3,1,2\tIsr: 1,2,3" in other[R.DESCRIBE]["diff"]
    assert "+\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 3,1,2\tIsr: 1,3,2" in other[R.DESCRIBE]["diff"]
    real, emu = _sides([(0, START)], [(0, START)])
    real.tools, emu.tools = {R.DESCRIBE: KAFKA_DESCRIBE}, {R.DESCRIBE: emulated.replace("Isr: 1,2,3", "Isr: 1,3,2")}
    cmp = R.comparison(SC, "2.8.2", real, emu, "local")
    assert "kafka-topics --describe: the outputs differ (TopicIds masked)" in cmp["mismatches"]
    assert "kafka-topics --describe at the end (TopicIds masked): MISMATCH" in R.text(cmp)


def test_the_emulators_tools_and_whatif_eta_are_its_own_verbs_output(tmp_path, capsys):
    """The emulator's side of the tools comparison is what `sparkkafka log-dirs RUN --describe --topic-list`
    and `sparkkafka reassign RUN --verify` print (log-dirs with each broker's dirs named by the real paths
    when given them), and the ETA is what `sparkkafka whatif SNAPSHOT --reassign PLAN --throttle T` prints
    for the snapshot replay wrote of the cluster just before the plan."""
    plan = {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 3]}]}
    sc = parse_scenario({"cluster": {"brokers": [1, 2, 3], "log_dirs": ["d0", "d1"], "emulator": {"engine": "local"}},
                         "topics": [{"name": "t", "assignment": {0: [1, 2]}}, {"name": "u", "assignment": {0: [2]}}],
                         "timeline": [{"at": 0, "produce": {"topic": "t", "partition": 0, "records": 50,
                                                            "value_bytes": 10000, "acks": "all"}},
                                      {"at": 300, "reassign": {"throttle": 100000, "plan": plan}}],
                         "run": {"until_ms": 1000}}, name="tools")
    run = str(tmp_path / "run")
    from sparkkafka import Cluster

    Cluster.from_scenario(sc, out=run).run()
    capsys.readouterr()
    etas = R.whatif_etas(sc, tmp_path / "replay")
    snap = tmp_path / "replay" / "whatif" / "timeline-1" / "snapshot"
    assert main(["whatif", str(snap), "--reassign", str(snap / "plan.json"), "--throttle", "100000",
                 "--no-emulate"]) == 0
    assert f"predicted completion: {etas[('t', 0)]} ms" in capsys.readouterr().out and etas[("t", 0)] > 5000
    assert R.emulator_moves(run, sc) == {("t", 0): (300, None)}  # 500 kB at 100 kB/s: not done by 1000 ms
    paths = {(b, d): f"/w/kafka/brokers/{b}/{d}" for b in (1, 2, 3) for d in ("d0", "d1")}
    tools = R.emulator_tools(run, sc, paths)
    assert main(["log-dirs", run, "--describe", "--topic-list", "t,u"]) == 0
    own = capsys.readouterr().out
    assert R.masked(tools[R.LOG_DIRS], {p: d for (_, d), p in paths.items()}).count('"logDir"') == 6
    assert '"logDir":"/w/kafka/brokers/2/d0"' in tools[R.LOG_DIRS] and '"logDir":"d0"' in own
    assert R.emulator_tools(run, sc, {})[R.LOG_DIRS] == own
    assert main(["reassign", run, "--verify", "--reassignment-json-file", str(snap / "plan.json")]) == 0
    assert tools[R.verify_name(1)] == capsys.readouterr().out
    assert tools[R.verify_name(1)].startswith(
        "Status of partition reassignment:\nReassignment of partition t-0 is still in progress.\n")
