"""The differential suite (docs/fidelity.md): scenarios of conf/scenarios/diff-*.yaml replayed on real
Kafka 2.8.2 beside the emulator (`sparkkafka replay`, sparkkafka/realkafka/replay.py), each asserting
exit 0 (every partition's leader, leader epoch and ISR sequence agrees within the tolerance) and what a
user checks for its case on both sides. The quickstart's replay is tests/test_replay.py's.

The unit tests need no JVM: the comparison of the replicas a reassignment plan names and how replay
reports them. The slow tests start a ZooKeeper and three broker JVMs each (-Xmx256m; diff-isolate's each in
a network namespace of its own), the emulator on the local engine; 65 to 91 s each, 212 to 237 s for the
first three, on the shared 2-core machine with a full test run beside them, diff-isolate 55 s alone
(docs/fidelity.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkkafka import parse_scenario
from sparkkafka.realkafka import netns
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


def _by_partition(cmp: dict) -> dict:
    return {(p["topic"], p["partition"]): p for p in cmp["partitions"]}


def _leaders(part: dict, side: str) -> list[int]:
    out: list[int] = []
    for s in part[side]:
        if not out or out[-1] != s["leader"]:
            out.append(s["leader"])
    return out


@pytest.mark.slow
@pytest.mark.replay(SCENARIOS / "diff-shutdown-restart.yaml")
def test_pause_controlled_shutdown_restart_and_the_preferred_leaders_return(replayed):
    """diff-shutdown-restart.yaml: broker 3 paused 8 s leaves every ISR and rejoins; broker 2's controlled
    shutdown hands partition 0 to broker 1 and partition 1 to broker 3 (the next ISR replica of each
    assignment) on both sides; after its restart the imbalance check makes it leader of both again."""
    cmp, out = replayed.cmp, replayed.stdout
    print(f"diff-shutdown-restart: {replayed.wall_s:.1f} s")
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
@pytest.mark.replay(SCENARIOS / "diff-unclean-min-isr.yaml")
def test_unclean_election_on_and_off_and_min_insync_refusals(replayed):
    """diff-unclean-min-isr.yaml: with broker 2 (the last ISR member) down, the restarted out-of-sync
    broker 3 is elected for unclean-on only, at the records it had (fewer than broker 2's); unclean-off
    stays offline; minisr refuses acks=all writes while its ISR is broker 1 alone, on both sides."""
    cmp, out = replayed.cmp, replayed.stdout
    print(f"diff-unclean-min-isr: {replayed.wall_s:.1f} s")
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
@pytest.mark.replay(SCENARIOS / "diff-throttled-move.yaml")
def test_a_throttled_two_partition_move_and_a_log_dir_move(replayed):
    """diff-throttled-move.yaml: under one 200 kB/s throttle that broker 2's in-sync fetches of the written
    partition keep exceeded, the new replicas on broker 3 get at most one fetch each (Kafka) or nothing
    (the emulator), the move does not complete; broker 1's replica of `moved` goes to d1 on both sides."""
    cmp = replayed.cmp
    print(f"diff-throttled-move: {replayed.wall_s:.1f} s")
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


@pytest.mark.slow
@pytest.mark.replay(SCENARIOS / "diff-isolate.yaml")
def test_a_leader_cut_off_from_its_peers_keeps_its_leadership_and_rejoins_the_isrs_after_the_heal(replayed):
    """diff-isolate.yaml: broker 2, cut off from brokers 1 and 3 (each JVM in a network namespace of its own
    on Kafka) from 2 to 10 s, keeps its ZooKeeper session, so no new leader is elected for iso-0, which it
    leads; the leaders of iso-1 (the controller) and iso-2 take it out of their ISR while it is cut off and
    back in after the heal. Broker 3, cut off from the controller from 12 to 20 s (`from: controller`,
    `duration_ms`), leaves iso-1's ISR and rejoins when the cut ends. The same on both sides; every acks=1
    write acked; the replay leaves no network namespace behind."""
    cmp, out = replayed.cmp, replayed.stdout
    print(f"diff-isolate: {replayed.wall_s:.1f} s")
    assert "controller broker 1" in out
    parts = _by_partition(cmp)
    for side in ("kafka", "emulator"):
        led = parts[("iso", 0)][side]
        assert [(s["leader"], s["leader_epoch"], s["isr"]) for s in led] == [(2, 0, [1, 2, 3])], (side, led)
        for p, leader, isrs, cuts in (
                (1, 1, [[1, 2, 3], [1, 3], [1, 2, 3], [1, 2], [1, 2, 3]], [(2000, 10000), (12000, 20000)]),
                (2, 3, [[1, 2, 3], [1, 3], [1, 2, 3]], [(2000, 10000)])):
            states = parts[("iso", p)][side]
            assert [(s["leader"], s["leader_epoch"]) for s in states] == [(leader, 0)] * len(isrs), (side, states)
            assert [s["isr"] for s in states] == isrs, (side, states)
            for i, (cut, end) in enumerate(cuts):  # out while cut off, back after the cut ends
                shrink, rejoin = states[1 + 2 * i]["time_ms"], states[2 + 2 * i]["time_ms"]
                assert cut < shrink < end < rejoin, (side, states)
        assert cmp["records"][side]["not_acked"] == 0, cmp["records"]
    assert netns.stale(netns.namespaces(), netns.alive) == []  # the replay deleted its namespaces
