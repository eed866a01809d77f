"""The differential suite (docs/fidelity.md): scenarios of conf/scenarios/diff-*.yaml replayed on real
Kafka 2.8.2 beside the emulator (`sparkkafka replay`, sparkkafka/realkafka/replay.py), each asserting
exit 0 (every partition's leader, leader epoch and ISR sequence agrees within the tolerance) and what a
user checks for its case on both sides. The quickstart's replay is tests/test_replay.py's.

The unit tests need no JVM: the comparison of the replicas a reassignment plan names and how replay
reports them. The slow tests start a ZooKeeper and three broker JVMs each (-Xmx256m), the emulator on the
local engine; 65 to 91 s each, 212 to 237 s for the three, on the shared 2-core machine with a full test
run beside them (docs/fidelity.md).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from realkafka_util import replay

from sparkkafka import parse_scenario
from sparkkafka.realkafka import replay as R
from sparkkafka.realkafka.cluster import RealCluster
from sparkkafka.realkafka.compare import compare_replicas
from sparkkafka.realkafka.timeline import Timeline

SCENARIOS = Path(__file__).resolve().parents[1] / "conf" / "scenarios"
MIB = 1024 * 1024

MOVE = parse_scenario({
    "cluster": {"brokers": [1, 2, 3], "log_dirs": ["d0", "d1"]},
    "topics": [{"name": "t", "assignment": {0: [1, 2]}}, {"name": "m", "assignment": {0: [1, 2]}}],
    "timeline": [{"at": 1000, "reassign": {"throttle": 200000, "plan": {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 3]},
        {"topic": "m", "partition": 0, "replicas": [1, 2], "log_dirs": ["d1", "any"]}]}}}],
    "run": {"until_ms": 5000}})


def test_the_replicas_a_plan_names_are_listed_with_their_log_dirs():
    assert R.planned(MOVE) == {("t", 0): [(1, "any"), (3, "any")], ("m", 0): [(1, "d1"), (2, "any")]}


def test_a_plans_log_dirs_reach_kafka_as_the_brokers_absolute_paths(tmp_path):
    cluster = RealCluster.for_scenario(MOVE, "rel")  # a relative --out: Kafka compares paths as written
    plan = Timeline(MOVE, cluster, tmp_path)._real_plan(MOVE.timeline[0].args["plan"])
    moved = plan["partitions"][1]
    assert moved["log_dirs"] == [str(Path("rel").absolute() / "brokers" / "1" / "d1"), "any"]
    assert plan["partitions"][0]["log_dirs"] == ["any", "any"]


def test_an_added_replica_may_differ_by_one_fetch_and_a_moved_one_must_be_in_the_same_dir():
    key = ("t", 0)
    kafka = {1: {"dir": "d0", "bytes": 9 * MIB}, 3: {"dir": "d1", "bytes": 991185}}
    emulated = {1: {"dir": "d0", "bytes": 5 * MIB}, 3: {"dir": "d0", "bytes": 0}}
    # the leader's bytes are not judged (the producers differ), nor the dir of a replica the plan gives none
    assert compare_replicas(key, kafka, emulated, added=[3], dirs={}, max_bytes=MIB) == []
    [m] = compare_replicas(key, {**kafka, 3: {"dir": "d1", "bytes": 2 * MIB}}, emulated, [3], {}, MIB)
    assert m.message == (f"new replica on broker 3 holds {2 * MIB} bytes on Kafka, 0 on the emulator: more than "
                         f"replica.fetch.max.bytes {MIB} apart")
    # a dir the plan names: the same on both sides (moved on both, or on neither yet)
    assert compare_replicas(key, kafka, emulated, [], {1: "d1"}, MIB) == []
    [m] = compare_replicas(key, kafka, {**emulated, 1: {"dir": "d1", "bytes": 0}}, [], {1: "d1"}, MIB)
    assert m.message == "replica on broker 1 (moved to d1) is in d0 on Kafka, d1 on the emulator"


def test_the_comparison_prints_the_planned_replicas_and_each_topics_records():
    seq = [(0, (1, 0, (1, 2))), (1000, (1, 1, (1, 2)))]
    rec = {"acked": 10, "not_acked": 5, "errors": {"NOT_ENOUGH_REPLICAS": 5},
           "by_topic": {"t": {"acked": 10, "errors": {"NOT_ENOUGH_REPLICAS": 5}}}}
    real = R.Side({("t", 0): seq, ("m", 0): seq}, rec, observed_until_ms=25000,
                  replicas={("t", 0): {1: {"dir": "d0", "bytes": 500}, 3: {"dir": "d1", "bytes": 991185}},
                            ("m", 0): {1: {"dir": "d1", "bytes": 300}, 2: {"dir": "d0", "bytes": 300}}})
    emu = R.Side({("t", 0): seq, ("m", 0): seq}, {**rec, "by_topic": {"t": {"acked": 7, "errors": {}}}},
                 observed_until_ms=5000,
                 replicas={("t", 0): {1: {"dir": "d0", "bytes": 400}, 3: {"dir": "d0", "bytes": 0}},
                           ("m", 0): {1: {"dir": "d1", "bytes": 300}, 2: {"dir": "d0", "bytes": 300}}})
    cmp = R.comparison(MOVE, "2.8.2", real, emu, "local")
    assert cmp["mismatches"] == []
    out = R.text(cmp)
    assert ("replica on broker 3 (added by the plan) at the end: Kafka 991185 bytes in d1, emulator 0 bytes in d0"
            in out)
    assert "replica on broker 1 (in the plan, to d1) at the end: Kafka 300 bytes in d1, emulator 300 bytes in d1" in out
    assert "  t: Kafka acked 10, failed {'NOT_ENOUGH_REPLICAS': 5}; emulator acked 7, failed {}" in out
    real.replicas[("m", 0)][1]["dir"] = "d0"  # the move not done on Kafka
    [m] = R.comparison(MOVE, "2.8.2", real, emu, "local")["mismatches"]
    assert m == "m-0: replica on broker 1 (moved to d1) is in d0 on Kafka, d1 on the emulator"


ROOT = "/w/replay/kafka/brokers"
PATHS = {(b, d): f"{ROOT}/{b}/{d}" for b in (1, 2, 3) for d in ("d1", "d10")}  # d1 a prefix of d10's path


def _log_dirs(sizes: tuple[int, int], lag: int = 0, future: str = "false") -> str:
    """kafka-log-dirs --describe as LogDirsCommand prints it, broker 1's dirs by their real paths."""
    parts = [f'{{"partition":"t-{p}","size":{n},"offsetLag":{lag},"isFuture":{future}}}' for p, n in enumerate(sizes)]
    return ("Querying brokers for log directories information\nReceived log directory information from brokers 1\n"
            f'{{"version":1,"brokers":[{{"broker":1,"logDirs":[{{"logDir":"{ROOT}/1/d10","error":null,"partitions":'
            f'[{parts[0]}]}},{{"logDir":"{ROOT}/1/d1","error":null,"partitions":[{parts[1]}]}}]}}]}}\n')


def test_log_dirs_and_verify_outputs_name_the_scenarios_dirs_and_log_dirs_sizes_are_masked():
    """kafka-log-dirs --describe: each real path back to its scenario dir name (d1's path a prefix of d10's),
    sizes masked (segment bytes with framing on Kafka), everything else byte for byte; --verify's dir lines
    with the dir names."""
    names = {p: d for (_, d), p in PATHS.items()}
    kafka = _log_dirs((5006101, 991185))
    same = R.compare_tools({R.LOG_DIRS: kafka}, {R.LOG_DIRS: _log_dirs((5000000, 0))}, names)[R.LOG_DIRS]
    assert same["equal"] and same["masked"] == "log dirs by their scenario names, sizes masked"
    assert ('{"logDir":"d10","error":null,"partitions":[{"partition":"t-0","size":<masked>,"offsetLag":0,'
            '"isFuture":false}]},{"logDir":"d1"') in same["kafka"]
    for other in (_log_dirs((5000000, 0), lag=3), _log_dirs((5000000, 0), future="true"),
                  kafka.replace("brokers 1\n", "brokers 1,2\n")):
        assert not R.compare_tools({R.LOG_DIRS: kafka}, {R.LOG_DIRS: other}, names)[R.LOG_DIRS]["equal"]
    verify = R.verify_name(4)
    line = f"Partition m-0 on broker 1 is not being moved from log dir {ROOT}/1/d10 to {ROOT}/1/d1."
    [t] = R.compare_tools({verify: line}, {verify: line.replace("d10 to", "d1 to")}, names).values()
    assert t["kafka"] == "Partition m-0 on broker 1 is not being moved from log dir d10 to d1."
    assert t["diff"][-2:] == ["-" + t["kafka"], "+Partition m-0 on broker 1 is not being moved from log dir d1 to d1."]
    real, emu = (R.Side({}, {"acked": 0, "not_acked": 0, "errors": {}}, log_dir_paths=PATHS) for _ in range(2))
    real.tools, emu.tools = {verify: line}, {verify: line.replace("d10 to", "d1 to")}
    cmp = R.comparison(MOVE, "2.8.2", real, emu, "local")
    assert cmp["mismatches"] == ["kafka-reassign-partitions --verify timeline[4]: the outputs differ "
                                 "(log dirs by their scenario names)"]
    assert "kafka-reassign-partitions --verify timeline[4] at the end (log dirs by their scenario names): MISMATCH" \
        in R.text(cmp)


LONG = dataclasses.replace(MOVE, until_ms=20000)


def _moved(kafka: tuple[int, int | None], emulator: int | None, eta: int | None, sc=LONG) -> dict:
    """The comparison of MOVE's throttled t-0 move: Kafka's (start, end), the emulator's end (its plan at
    1000 ms) and whatif's ETA."""
    rec = {"acked": 0, "not_acked": 0, "errors": {}}
    real = R.Side({}, rec, moves={("t", 0): kafka})
    emu = R.Side({}, rec, moves={("t", 0): (1000, emulator)}, etas={("t", 0): eta, ("m", 0): 400})
    return R.comparison(sc, "2.8.2", real, emu, "local")


def test_a_throttled_moves_duration_on_kafka_is_judged_against_the_emulator_and_whatifs_eta():
    """Only t-0 gains a replica under the throttle (m-0 changes dir only); its 6282 ms on Kafka (from its
    adding replicas in ZooKeeper) beside the emulator's and whatif's, within 10 % (629 ms) plus one sampling
    interval."""
    assert [(e.index, key, target) for e, key, target in R.throttled_moves(MOVE)] == [(0, ("t", 0), [1, 3])]
    assert R.move_tolerance_ms(6282, 100) == 629 + 200 and R.move_tolerance_ms(1000, 100) == 400
    cmp = _moved((3702, 9984), 6700, 5800)
    [mv] = cmp["reassignments"]
    assert (mv["kafka"]["ms"], mv["emulator"]["ms"], mv["whatif_eta_ms"], mv["tolerance_ms"]) == (6282, 5700, 5800, 829)
    assert cmp["mismatches"] == [] and mv["judged"] == ["whatif's ETA", "the emulator's"]
    assert ("Throttled move of t-0 to [1, 3] (timeline[0], --throttle 200000): Kafka 6282 ms (from its adding "
            "replicas in ZooKeeper at 3702 ms), emulator 5700 ms (from the plan at 1000 ms), whatif --reassign ETA "
            "5800 ms: ok (whatif's ETA and the emulator's within 829 ms of Kafka's)") in R.text(cmp)
    slow = _moved((3702, 9984), 8200, 7200)
    assert slow["mismatches"] == [
        "t-0: the move to [1, 3] took 6282 ms on Kafka, whatif's ETA 7200 ms: more than 829 ms apart",
        "t-0: the move to [1, 3] took 6282 ms on Kafka, the emulator's 7200 ms: more than 829 ms apart"]
    assert "t-0 to [1, 3]" in R.text(slow) and "MISMATCH (whatif's ETA and" in R.text(slow)
    assert _moved((3702, 9984), None, None)["mismatches"][0].endswith("whatif's ETA never: more than 829 ms apart")
    # the emulator stopped (until_ms 5000) before Kafka's duration had passed: only whatif's ETA is judged
    [mv] = _moved((3702, 9984), None, 6000, sc=MOVE)["reassignments"]
    assert mv["judged"] == ["whatif's ETA"] and mv["mismatches"] == []
    # not complete on Kafka: printed, not judged
    cmp = _moved((3702, None), None, None)
    assert cmp["mismatches"] == [] and "Kafka not complete, emulator not complete" in R.text(cmp)
    assert "not judged (not complete on Kafka)" in R.text(cmp)


def _by_partition(cmp: dict) -> dict:
    return {(p["topic"], p["partition"]): p for p in cmp["partitions"]}


def _leaders(part: dict, side: str) -> list[int]:
    out: list[int] = []
    for s in part[side]:
        if not out or out[-1] != s["leader"]:
            out.append(s["leader"])
    return out


@pytest.mark.slow
def test_pause_controlled_shutdown_restart_and_the_preferred_leaders_return(tmp_path):
    """diff-shutdown-restart.yaml: broker 3 paused 8 s leaves every ISR and rejoins; broker 2's controlled
    shutdown hands partition 0 to broker 1 and partition 1 to broker 3 (the next ISR replica of each
    assignment) on both sides; after its restart the imbalance check makes it leader of both again."""
    cmp, out, wall = replay(tmp_path, SCENARIOS / "diff-shutdown-restart.yaml")
    print(f"diff-shutdown-restart: {wall:.1f} s")
    assert "controller broker 1" in out
    parts = _by_partition(cmp)
    for side in ("kafka", "emulator"):
        assert _leaders(parts[("life", 0)], side) == [2, 1, 2], side
        assert _leaders(parts[("life", 1)], side) == [2, 3, 2], side
        assert _leaders(parts[("life", 2)], side) == [1], side
        for p in parts.values():
            isrs = [s["isr"] for s in p[side]]
            assert isrs[0] == [1, 2, 3] and 3 not in isrs[1] and isrs[2] == [1, 2, 3], (side, isrs)  # the pause
            assert isrs[-1] == [1, 2, 3]  # broker 2 back after its restart
        assert [s["leader_epoch"] for s in parts[("life", 0)][side]][-1] == 2  # shutdown, preferred election
    [restart] = cmp["restarts"]
    assert restart["broker"] == 2 and restart["registered_ms"] is not None


@pytest.mark.slow
def test_unclean_election_on_and_off_and_min_insync_refusals(tmp_path):
    """diff-unclean-min-isr.yaml: with broker 2 (the last ISR member) down, the restarted out-of-sync
    broker 3 is elected for unclean-on only, at the records it had (fewer than broker 2's); unclean-off
    stays offline; minisr refuses acks=all writes while its ISR is broker 1 alone, on both sides."""
    cmp, out, wall = replay(tmp_path, SCENARIOS / "diff-unclean-min-isr.yaml")
    print(f"diff-unclean-min-isr: {wall:.1f} s")
    parts = _by_partition(cmp)
    for side in ("kafka", "emulator"):
        on, off = parts[("unclean-on", 0)][side], parts[("unclean-off", 0)][side]
        assert (on[-1]["leader"], on[-1]["isr"]) == (3, [3]), (side, on)
        assert (off[-1]["leader"], off[-1]["isr"]) == (-1, [2]), (side, off)
        assert [s["leader"] for s in on[:-1]] == [s["leader"] for s in off]  # the same until broker 3's return
        leo = parts[("unclean-on", 0)]["log_end_offsets"][side]
        assert 0 < leo["3"] < leo["2"], (side, leo)  # elected behind: broker 2's later records are lost
        minisr = parts[("minisr", 0)][side]
        assert [s["isr"] for s in minisr] == [[1, 3], [1], [1, 3]], (side, minisr)
        refused = cmp["records"][side]["by_topic"]["minisr"]["errors"]
        assert refused.get("NOT_ENOUGH_REPLICAS", 0) > 0, (side, refused)
    assert "minisr: Kafka acked" in out


@pytest.mark.slow
def test_a_throttled_two_partition_move_and_a_log_dir_move(tmp_path):
    """diff-throttled-move.yaml: under one 200 kB/s throttle that broker 2's in-sync fetches of the written
    partition keep exceeded, the new replicas on broker 3 get at most one fetch each (Kafka) or nothing
    (the emulator), the move does not complete; broker 1's replica of `moved` goes to d1 on both sides;
    `quick`, led by broker 3, moves to broker 2 within the tolerance of whatif's ETA on both sides; the
    tools' outputs at the end agree."""
    cmp, out, wall = replay(tmp_path, SCENARIOS / "diff-throttled-move.yaml")
    print(f"diff-throttled-move: {wall:.1f} s")
    parts = _by_partition(cmp)
    for p in (0, 1):
        [new] = [r for r in parts[("t", p)]["planned_replicas"] if r["added"]]
        assert new["broker"] == 3 and new["emulator"]["bytes"] == 0, new
        assert new["kafka"]["bytes"] <= MIB, new  # replica.fetch.max.bytes: one fetch at most
        for side in ("kafka", "emulator"):
            last = parts[("t", p)][side][-1]
            assert (last["leader"], last["leader_epoch"], last["isr"]) == (1, 1, [1, 2]), (side, last)
    [moved] = [r for r in parts[("moved", 0)]["planned_replicas"] if r["log_dir"] == "d1"]
    assert moved["broker"] == 1 and moved["kafka"]["dir"] == moved["emulator"]["dir"] == "d1", moved
    assert moved["kafka"]["bytes"] >= 2_000_000 and moved["emulator"]["bytes"] == 2_000_000  # all of it
    # quick-0 (1.05 MB, leader 3, no in-sync traffic under the throttle) moves to broker 2 on both sides, in
    # about 1.05 MB / 200 kB/s, as whatif --reassign predicts from a snapshot of the cluster before the plan
    moves = {(m["topic"], m["partition"]): m for m in cmp["reassignments"]}
    quick = moves[("quick", 0)]
    assert quick["judged"] == ["whatif's ETA", "the emulator's"] and quick["mismatches"] == [], quick
    assert 5000 <= quick["kafka"]["ms"] <= 8000 and 5000 <= quick["whatif_eta_ms"] <= 6500, quick
    assert all(moves[("t", p)]["kafka"]["done_ms"] is None and not moves[("t", p)]["judged"] for p in (0, 1))
    assert _leaders(parts[("quick", 0)], "kafka") == _leaders(parts[("quick", 0)], "emulator") == [3, 2]
    # the tools at the end, byte for byte once masked: the verify's states and the dirs the plan named
    tools = cmp["tools"]
    assert all(t["equal"] for t in tools.values()) and set(tools) == {
        "kafka-topics --describe", "kafka-log-dirs --describe", "kafka-reassign-partitions --verify timeline[5]"}
    verified = tools["kafka-reassign-partitions --verify timeline[5]"]["kafka"]
    assert "Reassignment of partition quick-0 is complete.\nReassignment of partition t-0 is still in progress." \
        in verified and "Reassignment of replica moved-0-1 completed successfully." in verified
    assert '"logDir":"d1"' in tools["kafka-log-dirs --describe"]["kafka"] and "/brokers/" not in verified


def test_a_new_topics_logs_take_the_dirs_kafka_gave_them_in_the_quickstarts_replay(tmp_path):
    """Kafka 2.8.2 (the quickstart's replay, 2026-12-03: orders' 4 partitions, leaders 3, 1, 2, 3, log dirs
    d0 and d1) put broker 1's orders-1 and orders-2 in d0 and orders-0 and orders-3 in d1: a broker creates
    the logs it leads first, then the others, each in a Scala HashMap's order of Partition.hashCode, and
    each takes the dir with the fewest logs. The emulator's log-dirs --describe places them the same."""
    from sparkkafka import Cluster
    from sparkkafka.tools import operator as op

    sc = parse_scenario({"cluster": {"brokers": [1, 2, 3], "log_dirs": ["d0", "d1"], "emulator": {"engine": "local"}},
                         "topics": [{"name": "orders", "assignment": {0: [3, 1, 2], 1: [1, 2, 3], 2: [2, 3, 1],
                                                                      3: [3, 2, 1]}}],
                         "run": {"until_ms": 300}}, name="placement")
    Cluster.from_scenario(sc, out=str(tmp_path / "run")).run()
    _, logs, _ = op.log_dirs_frames(str(tmp_path / "run"))
    placed = {(b, d): sorted(g["partition"]) for (b, d), g in logs.groupby(["broker", "log_dir"])}
    assert placed == {(1, "d0"): [1, 2], (1, "d1"): [0, 3], (2, "d0"): [1, 2], (2, "d1"): [0, 3],
                      (3, "d0"): [2, 3], (3, "d1"): [0, 1]}
