"""The differential suite (docs/fidelity.md): scenarios of conf/scenarios/diff-*.yaml replayed on real
Kafka 2.8.2 beside the emulator (`sparkkafka replay`, sparkkafka/realkafka/replay.py), each asserting
exit 0 (every partition's leader, leader epoch and ISR sequence agrees within the tolerance) and what a
user checks for its case on both sides. The quickstart's replay is tests/test_replay.py's.

The unit tests need no JVM: the comparison of the replicas a reassignment plan names and of the
controller epochs, how replay reports them, and how the real side drives the admin events and faults
(kafka-configs' and kafka-leader-election's arguments, a failed log dir, a created topic's placement, a
deleted topic's end in a "deleted" state). The slow tests start a ZooKeeper and three broker JVMs each
(-Xmx256m; diff-isolate's each in a network namespace of its own), the emulator on the local engine; 55 to
119 s each on the shared 2-core machine (docs/fidelity.md). Their replays run one after another in the
background from the end of collection (`@pytest.mark.replay`, tests/background.py), while the rest of the
suite runs; the tests come last and assert on the results.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from sparkkafka import parse_scenario
from sparkkafka.errors import NotYetSupportedError
from sparkkafka.realkafka import compare as C
from sparkkafka.realkafka import netns
from sparkkafka.realkafka import replay as R
from sparkkafka.realkafka.cluster import RealCluster
from sparkkafka.realkafka.compare import compare_replicas
from sparkkafka.realkafka.observe import Observer
from sparkkafka.realkafka.timeline import Timeline, all_topics, check_supported
from sparkkafka.realkafka.tools import config_args, log_end_offset

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


ADMIN = parse_scenario({
    "cluster": {"brokers": [1, 2, 3], "log_dirs": ["d0", "d1"]},
    "topics": [{"name": "t", "assignment": {0: [1, 2]}, "config": {"retention.ms": 60000}}],
    "timeline": [{"at": 100, "controller_failover": {}},
                 {"at": 200, "fail_log_dir": {"broker": 2, "log_dir": "d0"}},
                 {"at": 300, "create_topic": {"name": "n", "partitions": 2, "replication_factor": 2}},
                 {"at": 400, "produce": {"topic": "n", "partition": "all", "records": 10}},
                 {"at": 500, "set_config": {"entity": "topics", "name": "n", "config": {"min.insync.replicas": 2}}},
                 {"at": 600, "set_config": {"entity": "topics", "name": "t", "config": {"retention.ms": None}}}],
    "run": {"until_ms": 1000}})


def test_the_admin_events_and_faults_are_driven_and_a_created_topic_gets_the_emulators_placement(tmp_path):
    check_supported(ADMIN)  # nothing refused
    placed = R.with_assignment(ADMIN, {"t": {0: (1, 2)}, "n": {0: (3, 1), 1: (1, 2)}})
    assert [(t.name, t.assignment) for t in all_topics(placed)] == [("t", {0: (1, 2)}), ("n", {0: (3, 1), 1: (1, 2)})]
    assert Timeline(placed, RealCluster.for_scenario(placed, tmp_path), tmp_path).partitions("n") == [0, 1]


def test_an_election_of_named_partitions_is_kafka_leader_elections_json_file(tmp_path):
    scenario = parse_scenario({"cluster": {"brokers": [1, 2]}, "topics": [{"name": "t", "assignment": {0: [2, 1]}}],
                               "timeline": [{"at": 5, "elect_leaders": {"election_type": "PREFERRED", "partitions": [
                                   {"topic": "t", "partition": 0}]}}, {"at": 6, "elect_leaders": {
                                       "election_type": "unclean"}}], "run": {"until_ms": 100}})
    check_supported(scenario)
    timeline = Timeline(scenario, RealCluster.for_scenario(scenario, tmp_path), tmp_path)
    named, every = (timeline.election_args(e.args) for e in scenario.timeline)
    assert named[2:4] == ["--election-type", "PREFERRED"] and named[4] == "--path-to-json-file"
    assert json.loads(Path(named[5]).read_text()) == {"partitions": [{"topic": "t", "partition": 0}]}
    assert every[2:] == ["--election-type", "UNCLEAN", "--all-topic-partitions"]


def test_set_config_is_kafka_configs_alter_and_an_absent_override_cannot_be_deleted():
    assert config_args("topics", "t", {"min.insync.replicas": 2, "retention.ms": None}) == [
        "--alter", "--entity-type", "topics", "--entity-name", "t", "--add-config", "min.insync.replicas=2",
        "--delete-config", "retention.ms"]
    assert config_args("brokers", "default", {"unclean.leader.election.enable": True}) == [
        "--alter", "--entity-type", "brokers", "--entity-default", "--add-config",
        "unclean.leader.election.enable=true"]
    assert config_args("topics", "t", {"leader.replication.throttled.replicas": ["0:1", "0:2"]})[-1] == (
        "leader.replication.throttled.replicas=[0:1,0:2]")  # ConfigCommand's form of a value with commas
    # n has no retention.ms override: kafka-configs would exit 1 ("Invalid config(s)"); refused before any start
    bad = parse_scenario({"cluster": {"brokers": [1]}, "topics": [{"name": "n", "partitions": 1}],
                          "timeline": [{"at": 5, "set_config": {"entity": "topics", "name": "n",
                                                                 "config": {"retention.ms": None}}}],
                          "run": {"until_ms": 100}})
    with pytest.raises(NotYetSupportedError, match=r"Invalid config\(s\): retention.ms"):
        check_supported(bad)
    # the throttles a reassignment set may be deleted (kafka-configs --delete-config, after --verify)
    check_supported(parse_scenario({**_THROTTLED, "timeline": [*_THROTTLED["timeline"], {"at": 50, "set_config": {
        "entity": "topics", "name": "t", "config": {"leader.replication.throttled.replicas": None}}}, {
        "at": 60, "set_config": {"entity": "brokers", "name": 1, "config": {"leader.replication.throttled.rate": None}}}]}))


_THROTTLED = {"cluster": {"brokers": [1, 2]}, "topics": [{"name": "t", "assignment": {0: [1]}}],
              "timeline": [{"at": 10, "reassign": {"throttle": 1000, "plan": {"version": 1, "partitions": [
                  {"topic": "t", "partition": 0, "replicas": [2]}]}}}], "run": {"until_ms": 100}}


def test_a_failed_log_dir_is_a_file_in_its_place_and_holds_no_replica_afterwards(tmp_path):
    cluster = RealCluster.for_scenario(ADMIN, tmp_path)
    for d in cluster.broker_dirs(2):
        (d / "t-0").mkdir(parents=True)
    seg = cluster.broker_dirs(2)[0] / "t-0" / "00000000000000000000.log"
    seg.write_bytes(b"")
    assert cluster.replica_dir(2, "t", 0) == "d0"
    path = cluster.fail_log_dir(2, "d0")
    assert path == tmp_path / "brokers" / "2" / "d0" and path.is_file()  # LogDirFailureTest.causeLogDirFailure
    assert cluster.replica_dir(2, "t", 0) == "d1" and log_end_offset(cluster, 2, "t", 0) is None


def test_the_controller_epochs_are_compared_not_which_broker_won():
    seq = [(0, (1, 0, (1, 2)))]
    real = R.Side({("t", 0): seq}, {"acked": 0, "not_acked": 0, "errors": {}}, controller_epochs=[(0, 1), (1163, 2)])
    emu = R.Side({("t", 0): seq}, {"acked": 0, "not_acked": 0, "errors": {}}, controller_epochs=[(0, 1), (1000, 2)])
    cmp = R.comparison(MOVE, "2.8.2", real, emu, "local")
    assert cmp["mismatches"] == []
    assert cmp["controller_epochs"]["kafka"] == [{"time_ms": 0, "epoch": 1}, {"time_ms": 1163, "epoch": 2}]
    assert ("Controller epochs (which broker is not compared): Kafka 1 from 0 ms, 2 from 1163 ms; emulator 1 from "
            "0 ms, 2 from 1000 ms") in R.text(cmp)
    emu.controller_epochs.append((5000, 3))
    assert R.comparison(MOVE, "2.8.2", real, emu, "local")["mismatches"] == [
        "controller epochs differ: Kafka [1, 2], emulator [1, 2, 3]"]


class _Znodes:
    """A kazoo client's exists/get/get_children over a dict of path -> data (the observer's reads)."""

    def __init__(self, nodes: dict[str, object]):
        self.nodes = nodes

    def exists(self, path: str):
        return True if path in self.nodes else None

    def get(self, path: str):
        v = self.nodes[path]
        return (v if isinstance(v, bytes) else json.dumps(v).encode()), None

    def get_children(self, path: str) -> list[str]:
        return sorted({k[len(path) + 1:].split("/")[0] for k in self.nodes if k.startswith(path + "/")})


def test_the_observer_samples_a_topic_from_its_creation_and_each_controller_epoch():
    zk = _Znodes({"/brokers/ids/1": b"", "/controller_epoch": b"1"})
    obs = Observer(SimpleNamespace(zk=lambda: zk), ["t", "fresh"])
    obs.sample()  # neither topic exists yet
    zk.nodes.update({"/brokers/topics/fresh": {"partitions": {"0": [1]}},
                     "/brokers/topics/fresh/partitions/0/state": {"leader": 1, "leader_epoch": 0, "isr": [1]},
                     "/controller_epoch": b"2"})
    obs.sample()
    assert [(c.topic, c.partition, c.leader, c.leader_epoch, c.isr) for c in obs.changes] == [("fresh", 0, 1, 0, (1,))]
    assert [e for _, e in obs.controller_epochs] == [1, 2]


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
    assert ("Throttled move of t-0 to [1, 3] (timeline[0], --throttle 200000): Kafka 6282 ms (to its new replicas "
            "in the ISR, from its adding replicas in ZooKeeper at 3702 ms), complete 0 ms later, emulator 5700 ms "
            "(from the plan at 1000 ms), whatif --reassign ETA 5800 ms: ok (whatif's ETA and the emulator's within "
            "829 ms of Kafka's)") in R.text(cmp)
    slow = _moved((3702, 9984), 8200, 7200)
    assert slow["mismatches"] == [
        "t-0: the move to [1, 3] took 6282 ms on Kafka, whatif's ETA 7200 ms: more than 829 ms apart",
        "t-0: the move to [1, 3] took 6282 ms on Kafka, the emulator's 7200 ms: more than 829 ms apart"]
    assert "t-0 to [1, 3]" in R.text(slow) and "MISMATCH (whatif's ETA and" in R.text(slow)
    assert _moved((3702, 9984), None, None)["mismatches"][0].endswith("whatif's ETA never: more than 829 ms apart")
    # Kafka's new replica in the ISR at 9300 ms, the controller's completion (a leader election, the old
    # replica's removal) seen at 9984 ms: the copy is judged (5598 ms), the completion printed
    rec = {"acked": 0, "not_acked": 0, "errors": {}}
    seq = [(0, (1, 0, (1, 2))), (3702, (1, 1, (1, 2))), (9300, (1, 1, (1, 2, 3))), (9984, (1, 2, (1, 3)))]
    real = R.Side({("t", 0): seq}, rec, moves={("t", 0): (3702, 9984)})
    emu = R.Side({}, rec, moves={("t", 0): (1000, 6700)}, etas={("t", 0): 5800})
    [mv] = R.comparison(LONG, "2.8.2", real, emu, "local")["reassignments"]
    assert (mv["kafka"]["in_sync_ms"], mv["kafka"]["ms"], mv["tolerance_ms"], mv["mismatches"]) == (9300, 5598, 760, [])
    assert "Kafka 5598 ms (to its new replicas in the ISR, from its adding replicas in ZooKeeper at 3702 ms), " \
           "complete 684 ms later" in R.move_line(mv)
    # the emulator stopped (until_ms 5000) before Kafka's duration had passed: only whatif's ETA is judged
    [mv] = _moved((3702, 9984), None, 6000, sc=MOVE)["reassignments"]
    assert mv["judged"] == ["whatif's ETA"] and mv["mismatches"] == []
    # not complete on Kafka: printed, not judged
    cmp = _moved((3702, None), None, None)
    assert cmp["mismatches"] == [] and "Kafka not complete, emulator not complete" in R.text(cmp)
    assert "not judged (not complete on Kafka)" in R.text(cmp)


def test_a_deleted_topic_ends_in_a_deleted_state_and_its_deletion_steps_are_not_compared():
    zk = _Znodes({"/brokers/ids/1": b"", "/controller_epoch": b"1",
                  "/brokers/topics/gone": {"partitions": {"0": [3, 1]}},
                  "/brokers/topics/gone/partitions/0/state": {"leader": 3, "leader_epoch": 0, "isr": [3, 1]}})
    obs = Observer(SimpleNamespace(zk=lambda: zk), ["gone"])
    obs.sample()
    # kafka-topics --delete marks it; TopicDeletionManager's OfflineReplica step removes replica 3 (leader -1)
    zk.nodes.update({"/admin/delete_topics/gone": b"",
                     "/brokers/topics/gone/partitions/0/state": {"leader": -1, "leader_epoch": 1, "isr": [1]}})
    obs.origin -= 0.5  # half a second later
    obs.sample()
    for path in [k for k in zk.nodes if k.startswith("/brokers/topics/gone")]:
        del zk.nodes[path]  # completeDeleteTopic
    obs.origin -= 0.5
    obs.sample()
    obs.sample()  # deleted once
    assert [(c.leader, c.leader_epoch, c.isr) for c in obs.changes] == [(3, 0, (1, 3)), C.DELETED]
    assert obs.deleted["gone"] - obs.marked_for_deletion["gone"] >= 500
    assert R.kafka_deletions(obs) == {"gone": {"marked_ms": obs.marked_for_deletion["gone"], "steps_not_compared": [
        {"partition": 0, "leader": -1, "leader_epoch": 1, "isr": [1]}]}}

    seq = [(0, (3, 0, (1, 3)))]
    real = R.Side({("gone", 0): [*seq, (11200, C.DELETED)], ("t", 0): seq}, {"acked": 0, "not_acked": 0, "errors": {}},
                  deletions={"gone": {"marked_ms": 11000, "steps_not_compared": [
                      {"partition": 0, "leader": -1, "leader_epoch": 1, "isr": [1]}]}})
    emu = R.Side({("gone", 0): [*seq, (8000, C.DELETED)], ("t", 0): seq}, {"acked": 0, "not_acked": 0, "errors": {}})
    cmp = R.comparison(DELETE, "2.8.2", real, emu, "local")
    assert cmp["mismatches"] == []
    assert cmp["deleted_topics"] == {"kafka": {"gone": {"deleted_ms": 11200, **real.deletions["gone"]}},
                                     "emulator": {"gone": {"deleted_ms": 8000}}}
    out = R.text(cmp)
    assert "    11200 ms  deleted                                  8000 ms  deleted\n" in out
    assert ("Topic gone deleted: Kafka at 11200 ms (marked for deletion at 11000 ms; 1 states of its deletion "
            "sampled, not compared); emulator at 8000 ms") in out
    # not deleted on Kafka: its last state differs
    real.changes[("gone", 0)] = seq
    [m] = R.comparison(DELETE, "2.8.2", real, emu, "local")["mismatches"]
    assert m == "gone-0: states differ: real [(3, 0, (1, 3))] emulator [(3, 0, (1, 3)), (-2, -2, ())]"


DELETE = parse_scenario({"cluster": {"brokers": [1, 2, 3], "config": {"replica.lag.time.max.ms": 4000}},
                         "topics": [{"name": "gone", "assignment": {0: [3, 1]}}, {"name": "t", "assignment": {0: [3, 1]}}],
                         "timeline": [{"at": 8000, "delete_topic": "gone"}], "run": {"until_ms": 20000}})


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
    cmp, out, parts = replayed.cmp, replayed.stdout, replayed.partitions
    assert "controller broker 1" in out
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
    cmp, out, parts = replayed.cmp, replayed.stdout, replayed.partitions
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
    (the emulator), the move does not complete; broker 1's replica of `moved` goes to d1 on both sides;
    `quick`, led by broker 3, moves to broker 2 within the tolerance of whatif's ETA on both sides; the
    tools' outputs at the end agree."""
    cmp, parts = replayed.cmp, replayed.partitions
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


@pytest.mark.slow
@pytest.mark.replay(SCENARIOS / "diff-admin-faults.yaml")
def test_a_controller_failover_a_failed_log_dir_a_created_topic_and_a_config_change(replayed):
    """diff-admin-faults.yaml: after the controller fails over (epoch 2 on both sides, no partition state
    changed), broker 2's failed d0 takes its replica of `disk-0` offline and the new controller moves the
    leadership to broker 1 (ISR [1], epoch 1), while its replica of `lead-0` in d1 stays in sync; `fresh` gets
    the emulator's placement and its preferred leaders on Kafka too; `disk`'s min.insync.replicas 2 refuses
    the acks=all writes its ISR [1] took before, on both sides."""
    cmp, out, parts = replayed.cmp, replayed.stdout, replayed.partitions
    created = R.emulator_assignment(str(replayed.out / "emulator"))["fresh"]
    for side in ("kafka", "emulator"):
        assert [e["epoch"] for e in cmp["controller_epochs"][side]] == [1, 2], (side, cmp["controller_epochs"])
        disk = parts[("disk", 0)][side]
        assert [(s["leader"], s["leader_epoch"], s["isr"]) for s in disk] == [(2, 0, [1, 2]), (1, 1, [1])], side
        for p in (0, 1):  # the failover changed no state; broker 2's replica in d1 was not in the failed dir
            [only] = parts[("lead", p)][side]
            assert only["leader_epoch"] == 0 and len(only["isr"]) == 2, (side, only)
        for p, replicas in created.items():
            assert [(s["leader"], s["isr"]) for s in parts[("fresh", p)][side]] == [
                (replicas[0], sorted(replicas))], (side, p)
        by_topic = cmp["records"][side]["by_topic"]["disk"]
        assert by_topic["acked"] > 0 and by_topic["errors"].get("NOT_ENOUGH_REPLICAS", 0) > 0, (side, by_topic)
        assert "Topic: disk\tTopicId: <masked>\tPartitionCount: 1\tReplicationFactor: 2\tConfigs: min.insync.replicas=2" \
            in cmp["tools"][R.DESCRIBE][side]
    assert "2" not in parts[("disk", 0)]["log_end_offsets"]["kafka"]  # broker 2's replica went with its dir
    assert re.search(r"Controller epochs \(which broker is not compared\): Kafka 1 from \d+ ms, 2 from \d+ ms; "
                     r"emulator 1 from 0 ms, 2 from 1000 ms", out), out


@pytest.mark.slow
@pytest.mark.replay(SCENARIOS / "diff-isolate.yaml")
def test_a_leader_cut_off_from_its_peers_keeps_its_leadership_and_rejoins_the_isrs_after_the_heal(replayed):
    """diff-isolate.yaml: broker 2, cut off from brokers 1 and 3 (each JVM in a network namespace of its own
    on Kafka) from 2 to 10 s, keeps its ZooKeeper session, so no new leader is elected for iso-0, which it
    leads; the leaders of iso-1 (the controller) and iso-2 take it out of their ISR while it is cut off and
    back in after the heal. Broker 3, cut off from the controller from 12 to 20 s (`from: controller`,
    `duration_ms`), leaves iso-1's ISR and rejoins when the cut ends. The same on both sides; every acks=1
    write acked; the replay leaves no network namespace behind."""
    cmp, out, parts = replayed.cmp, replayed.stdout, replayed.partitions
    assert "controller broker 1" in out
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


@pytest.mark.slow
@pytest.mark.replay(SCENARIOS / "diff-elect-delete.yaml")
def test_an_explicit_preferred_election_after_a_restart_and_a_deleted_topic(replayed):
    """diff-elect-delete.yaml: broker 2's controlled shutdown moves `elect-0` to broker 1; with the automatic
    rebalance off it stays there after broker 2 is back in the ISR until kafka-leader-election's preferred
    election gives it back (epoch 2); `gone`, deleted by kafka-topics --delete, ends deleted and is no longer
    in kafka-topics --describe, on both sides."""
    cmp, out, parts = replayed.cmp, replayed.stdout, replayed.partitions
    assert "controller broker 1" in out
    for side in ("kafka", "emulator"):
        elect = parts[("elect", 0)][side]
        assert _leaders(parts[("elect", 0)], side) == [2, 1, 2], (side, elect)
        assert (elect[-1]["leader_epoch"], elect[-1]["isr"]) == (2, [1, 2, 3]), (side, elect)
        assert [s["isr"] for s in elect[:-1]] == [[1, 2, 3], [1, 3], [1, 2, 3]], (side, elect)  # back before
        assert _leaders(parts[("elect", 1)], side) == [1], side
        for p in (0, 1):
            gone = parts[("gone", p)][side]
            assert [s["deleted"] for s in gone] == [False, True], (side, gone)
        assert "gone" in cmp["deleted_topics"][side], (side, cmp["deleted_topics"])
        described = cmp["tools"][R.DESCRIBE][side]
        assert "Topic: elect\t" in described and "Topic: gone" not in described, (side, described)
    # what Kafka's deletion wrote before removing the znodes (those the sampler read): removeReplicasFromIsr of
    # each replica, epoch 1 then 2, the last ISR member kept
    steps = cmp["deleted_topics"]["kafka"]["gone"]["steps_not_compared"]
    assert all(s["leader_epoch"] in (1, 2) and len(s["isr"]) == 1 for s in steps), steps
    assert re.search(r"Topic gone deleted: Kafka at \d+ ms \(marked for deletion at \d+ ms; \d+ states of its "
                     r"deletion sampled, not compared\); emulator at 8000 ms", out), out
