"""`sparkkafka reassign RUN ...` (kafka-reassign-partitions.sh of Kafka 2.8) and the other operator verbs
against a run directory: the run directory is the cluster, each call reopens it, acts, and saves it.

One small run (3 brokers, two log dirs, t-0 on [0, 1] with 20 records of 100 bytes, t-1 on [1, 0]) is built
once; tests that act on it work on a copy. Expected texts are Kafka 2.8's (tools/reassign_partitions.py).
"""

from __future__ import annotations

import hashlib
import json
import os

import pytest
from operator_util import cli, copy_run
from scenarios import produce, run_to_end, scenario

from sparkkafka import Cluster
from sparkkafka.tools import reassign_partitions as R

CURRENT_T = ('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[0,1],"log_dirs":["any","any"]},'
             '{"topic":"t","partition":1,"replicas":[1,0],"log_dirs":["any","any"]}]}')
CLEARING = "Clearing broker-level throttles on brokers 0,1,2\nClearing topic-level throttles on topic t\n"


@pytest.fixture(scope="module")
def base_run(spark, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("reassign-cli") / "base")
    return run_to_end(scenario(
        [0, 1, 2], [{"name": "t", "assignment": {0: [0, 1], 1: [1, 0]}}], 500, log_dirs=["d0", "d1"],
        config={"auto.leader.rebalance.enable": False}, timeline=produce([("t", 0, 20)])),
        "reassign-cli", out, spark)


@pytest.fixture
def run_dir(base_run, tmp_path):
    return copy_run(base_run, tmp_path)


def plan_file(tmp_path, name, *entries) -> str:
    parts = []
    for e in entries:
        t, p, reps, *dirs = e
        parts.append({"topic": t, "partition": p, "replicas": reps, **({"log_dirs": dirs[0]} if dirs else {})})
    path = tmp_path / name
    path.write_text(json.dumps({"version": 1, "partitions": parts}))
    return str(path)


def fingerprint(run: str) -> dict:
    """What a tool that changes nothing must leave byte-identical."""
    out = {}
    for name in ("run.json", "zookeeper.json", "driver-state.json"):
        with open(os.path.join(run, name), "rb") as f:
            out[name] = hashlib.sha256(f.read()).hexdigest()
    out["state"] = sorted(os.listdir(os.path.join(run, "state")))
    return out


def execute_head(current_json: str) -> str:
    return (f"Current partition replica assignment\n\n{current_json}\n\n"
            "Save this to use as the --reassignment-json-file option during rollback\n")


# ---------------------------------------------------------------------------------------------- --generate
def test_generate_prints_current_and_proposed_assignments(base_run, tmp_path, capsys):
    before = fingerprint(base_run)
    topics = tmp_path / "topics.json"
    topics.write_text('{"topics":[{"topic":"t"}],"version":1}')
    rc, out, _ = cli(capsys, "reassign", base_run, "--bootstrap-server", "localhost:9092", "--generate",
                     "--topics-to-move-json-file", topics, "--broker-list", "0,1,2")
    assert rc == 0
    lines = out.split("\n")
    assert lines[:4] == ["Current partition replica assignment", CURRENT_T, "",
                         "Proposed partition reassignment configuration"]
    assert lines[5:] == [""] and len(lines) == 6
    proposed = json.loads(lines[4])
    assert [(p["topic"], p["partition"]) for p in proposed["partitions"]] == [("t", 0), ("t", 1)]
    for p in proposed["partitions"]:
        assert len(set(p["replicas"])) == 2 and set(p["replicas"]) <= {0, 1, 2} and p["log_dirs"] == ["any", "any"]
    # the layout is AdminUtils' with the run's seed
    expected, _ = R.generate({("t", 0): [0, 1], ("t", 1): [1, 0]}, ["t"], [0, 1, 2], None, 0)
    assert out == expected
    assert fingerprint(base_run) == before  # nothing executed


# ---------------------------------------------------------------------------------------------- --execute
def test_execute_verify_then_complete_after_run_clears_throttles(run_dir, tmp_path, capsys, spark):
    plan = plan_file(tmp_path, "plan.json", ("t", 0, [1, 2]))
    rc, out, _ = cli(capsys, "reassign", run_dir, "--execute", "--reassignment-json-file", plan,
                     "--throttle", 1000000)
    assert rc == 0
    assert out == (execute_head('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[0,1],'
                                '"log_dirs":["any","any"]}]}')
                   + R.YOU_MUST_RUN_VERIFY_PERIODICALLY + "\n"
                   "The inter-broker throttle limit was set to 1000000 B/s\n"
                   "Successfully started partition reassignment for t-0\n")
    c = Cluster.for_path(spark, run_dir)  # the run directory holds what the tool did
    assert c.control.reassignments() == {("t", 0): ([1, 2, 0], [2], [0])}
    assert c.control.overrides["t"]["leader.replication.throttled.replicas"] == "0:0,0:1"
    assert c.control.overrides["t"]["follower.replication.throttled.replicas"] == "0:2"
    assert {b: c.control.dynamic[b]["follower.replication.throttled.rate"] for b in (0, 1, 2)} == \
        {0: 1000000, 1: 1000000, 2: 1000000}

    assert cli(capsys, "reassign", run_dir, "--list")[1] == (
        "Current partition reassignments:\nt-0: replicas: 1,2,0. adding: 2. removing: 0.\n")
    rc, out, _ = cli(capsys, "reassign", run_dir, "--verify", "--reassignment-json-file", plan)
    assert (rc, out) == (0, "Status of partition reassignment:\nReassignment of partition t-0 is still in "
                            "progress.\n\n")  # no clearing while it moves

    rc, out, _ = cli(capsys, "run", run_dir, "--until-ms", 2000, "--no-progress")
    assert rc == 0
    assert "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: " in out
    summary = json.loads(out[out.index("{"):])
    assert summary["time_ms"] == 2100 and summary["lost_acked"] == 0

    rc, out, _ = cli(capsys, "reassign", run_dir, "--verify", "--reassignment-json-file", plan)
    assert (rc, out) == (0, "Status of partition reassignment:\nReassignment of partition t-0 is complete.\n\n"
                            + CLEARING)
    c = Cluster.for_path(spark, run_dir)
    assert "leader.replication.throttled.replicas" not in c.control.overrides["t"]
    assert not any(c.control.dynamic.get(b) for b in (0, 1, 2))
    assert cli(capsys, "reassign", run_dir, "--list")[1] == "No partition reassignments found.\n"
    log = c.log("t", 0).collect()
    assert sorted({r.broker for r in log}) == [1, 2]
    assert sorted(r.record_id for r in log if r.broker == 2) == list(range(20))


def test_describe_shows_a_started_reassignment_at_once(run_dir, tmp_path, capsys):
    """The controller writes AR = target + originals when --execute returns (KIP-455 phase A), so
    kafka-topics --describe (2.8's PartitionDescription) prints Adding/Removing Replicas before the run
    moves on; the header's ReplicationFactor leaves the adding replica out. No Spark: the run directory."""
    plan = plan_file(tmp_path, "plan.json", ("t", 0, [1, 2]))
    assert cli(capsys, "reassign", run_dir, "--execute", "--reassignment-json-file", plan)[0] == 0
    rc, out, _ = cli(capsys, "describe", run_dir)
    lines = out.splitlines()
    assert rc == 0 and "\tPartitionCount: 2\tReplicationFactor: 2\t" in lines[0]
    assert lines[1:] == [
        "\tTopic: t\tPartition: 0\tLeader: 0\tReplicas: 1,2,0\tIsr: 0,1\tAdding Replicas: 2\tRemoving Replicas: 0",
        "\tTopic: t\tPartition: 1\tLeader: 1\tReplicas: 1,0\tIsr: 1,0"]
    # under-replicated by TopicCommand's rule: RF (3 replicas - 1 adding = 2) - ISR 2 is 0, so not listed
    assert cli(capsys, "describe", run_dir, "--under-replicated-partitions")[1] == ""


def test_execute_is_refused_while_a_move_runs_unless_additional(run_dir, tmp_path, capsys):
    first = plan_file(tmp_path, "first.json", ("t", 0, [1, 2]))
    second = plan_file(tmp_path, "second.json", ("t", 1, [2, 1]))
    assert cli(capsys, "reassign", run_dir, "--execute", "--reassignment-json-file", first)[0] == 0
    before = fingerprint(run_dir)
    rc, out, _ = cli(capsys, "reassign", run_dir, "--execute", "--reassignment-json-file", second)
    assert (rc, out) == (1, R.existing_refusal_text())
    assert fingerprint(run_dir) == before
    rc, out, _ = cli(capsys, "reassign", run_dir, "--execute", "--additional", "--reassignment-json-file", second)
    assert rc == 0
    assert out == execute_head('{"version":1,"partitions":[{"topic":"t","partition":1,"replicas":[1,0],'
                               '"log_dirs":["any","any"]}]}') + "Successfully started partition reassignment for t-1\n"
    assert cli(capsys, "reassign", run_dir, "--list")[1] == (
        "Current partition reassignments:\nt-0: replicas: 1,2,0. adding: 2. removing: 0.\n"
        "t-1: replicas: 2,1,0. adding: 2. removing: 0.\n")


@pytest.mark.parametrize("entries, message", [
    ([("t", 0, [1, 2]), ("t", 0, [2, 1])], "Partition reassignment contains duplicate topic partitions: t-0"),
    ([("t", 0, [1, 7])], "Unknown broker id 7"),
    ([("t", 0, [1, 2], ["any"])],
     "Size of replicas list List(1, 2) is different from size of log dirs list List(any) for partition t-0"),
    ([("t", 0, [1, 1])], "Partition replica lists may not contain duplicate entries: t-0 contains multiple "
                         "entries for 1"),
    ([("nope", 0, [1, 2])], "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: Topic nope not "
                            "found."),
], ids=["duplicate-partition", "unknown-broker", "log-dirs-length", "duplicate-replica", "unknown-topic"])
def test_an_invalid_plan_prints_kafkas_error_and_changes_nothing(run_dir, tmp_path, capsys, entries, message):
    before = fingerprint(run_dir)
    plan = plan_file(tmp_path, "bad.json", *entries)
    rc, out, err = cli(capsys, "reassign", run_dir, "--execute", "--reassignment-json-file", plan,
                       "--throttle", 1000)
    assert (rc, out) == (2, f"Error: {message}\n")  # Kafka's text; exit 2 = bad input (contract)
    assert err.startswith("sparkkafka: error: ") and "(got " in err  # the field and the value
    assert fingerprint(run_dir) == before


def test_empty_plan_and_bad_json(run_dir, tmp_path, capsys):
    before = fingerprint(run_dir)
    empty = tmp_path / "empty.json"
    empty.write_text('{"version":1,"partitions":[]}')
    assert cli(capsys, "reassign", run_dir, "--execute", "--reassignment-json-file", empty)[:2] == (
        2, "Error: Partition reassignment list cannot be empty\n")
    v2 = tmp_path / "v2.json"
    v2.write_text('{"version":2,"partitions":[]}')
    assert cli(capsys, "reassign", run_dir, "--verify", "--reassignment-json-file", v2)[:2] == (
        2, "Error: Not supported version field value 2\n")
    assert fingerprint(run_dir) == before


# ---------------------------------------------------------------------------------------------- --cancel
def test_cancel_reverts_the_move_and_clears_throttles(run_dir, tmp_path, capsys, spark):
    plan = plan_file(tmp_path, "plan.json", ("t", 0, [1, 2]))
    assert cli(capsys, "reassign", run_dir, "--execute", "--reassignment-json-file", plan, "--throttle", 500)[0] == 0
    rc, out, _ = cli(capsys, "reassign", run_dir, "--cancel", "--reassignment-json-file", plan,
                     "--preserve-throttles")
    assert (rc, out) == (0, "Successfully cancelled partition reassignment for: t-0\n"
                            "None of the specified partition moves are active.\n")
    c = Cluster.for_path(spark, run_dir)
    assert c.control.reassignments() == {}
    # Kafka reverts to originReplicas = replicas diff adding: [1, 2, 0] less [2], in that order
    assert c.control.zk.topic_assignment("t")[0] == [1, 0]
    assert c.control.overrides["t"]["follower.replication.throttled.replicas"] == "0:2"  # preserved
    rc, out, _ = cli(capsys, "reassign", run_dir, "--cancel", "--reassignment-json-file", plan)
    assert (rc, out) == (0, "None of the specified partition reassignments are active.\n"
                            "None of the specified partition moves are active.\n" + CLEARING)
    c = Cluster.for_path(spark, run_dir)
    assert "follower.replication.throttled.replicas" not in c.control.overrides["t"]
    assert not any(c.control.dynamic.get(b) for b in (0, 1, 2))


# ---------------------------------------------------------------------------------------------- log-dir moves
def test_log_dir_move_execute_verify_and_a_dir_the_broker_lacks(run_dir, tmp_path, capsys):
    plan = plan_file(tmp_path, "dirs.json", ("t", 0, [0, 1], ["d1", "any"]))
    rc, out, _ = cli(capsys, "reassign", run_dir, "--execute", "--reassignment-json-file", plan,
                     "--replica-alter-log-dirs-throttle", 100000, "--timeout", 5000)
    assert rc == 0
    assert out == (execute_head('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[0,1],'
                                '"log_dirs":["any","any"]}]}')
                   + R.YOU_MUST_RUN_VERIFY_PERIODICALLY + "\n"
                   "The replica-alter-dir throttle limit was set to 100000 B/s\n"
                   "Successfully started partition reassignment for t-0\n"
                   "Successfully started log directory move for: t-0-0\n")
    rc, out, _ = cli(capsys, "reassign", run_dir, "--verify", "--reassignment-json-file", plan)
    assert (rc, out) == (0, "Status of partition reassignment:\nReassignment of partition t-0 is complete.\n"
                            "Reassignment of replica t-0-0 is still in progress.\n")
    assert cli(capsys, "run", run_dir, "--until-ms", 1000, "--no-progress")[0] == 0
    rc, out, _ = cli(capsys, "reassign", run_dir, "--verify", "--reassignment-json-file", plan)
    assert (rc, out) == (0, "Status of partition reassignment:\nReassignment of partition t-0 is complete.\n"
                            "Reassignment of replica t-0-0 completed successfully.\n" + CLEARING)
    rc, out, _ = cli(capsys, "log-dirs", run_dir, "--describe", "--broker-list", "0", "--topic-list", "t")
    head, body = out.split("\n", 2)[:2], json.loads(out.split("\n", 2)[2])
    assert rc == 0 and head == ["Querying brokers for log directories information",
                                "Received log directory information from brokers 0"]
    dirs = {d["logDir"]: d for d in body["brokers"][0]["logDirs"]}
    assert {p["partition"]: p for p in dirs["d1"]["partitions"]}["t-0"] == {
        "partition": "t-0", "size": 2000, "offsetLag": 0, "isFuture": False}
    assert "t-0" not in {p["partition"] for p in dirs["d0"]["partitions"]}

    # a dir broker 2 does not have: the partition move starts, then AlterReplicaLogDirs fails (as in Kafka)
    bad = plan_file(tmp_path, "baddir.json", ("t", 1, [1, 2], ["any", "/nope"]))
    rc, out, _ = cli(capsys, "reassign", run_dir, "--execute", "--reassignment-json-file", bad)
    assert rc == 1
    assert out.endswith("Successfully started partition reassignment for t-1\nError: Failed to alter dir for t-1-2\n")
    assert cli(capsys, "reassign", run_dir, "--list")[1].startswith("Current partition reassignments:\nt-1: ")


# ---------------------------------------------------------------------------------------------- usage
@pytest.mark.parametrize("args, message", [
    (["--list", "--verify"], "Command must include exactly one action: --generate, --execute, --verify, --cancel, "
                             "--list"),
    ([], "Command must include exactly one action: --generate, --execute, --verify, --cancel, --list"),
    (["--execute"], 'Missing required argument "[reassignment-json-file]"'),
    (["--generate", "--topics-to-move-json-file", "x.json"], 'Missing required argument "[broker-list]"'),
    (["--verify", "--reassignment-json-file", "x.json", "--throttle", "5"],
     'Option "[throttle]" can\'t be used with action "[verify]"'),
    (["--list", "--additional"], 'Option "[additional]" can\'t be used with action "[list]"'),
])
def test_usage_errors_use_kafkas_words_and_exit_2(tmp_path, capsys, args, message):
    rc, out, err = cli(capsys, "reassign", tmp_path, *args)
    assert (rc, out, err) == (2, "", message + "\n")


def test_not_a_run_directory_exits_2(tmp_path, capsys):
    rc, out, err = cli(capsys, "reassign", tmp_path, "--list")
    assert rc == 2 and out == "" and "is not a sparkkafka run directory" in err


# ---------------------------------------------------------------------------------------------- other verbs
def test_leader_election_log_dirs_and_state_change_log(run_dir, tmp_path, capsys):
    rc, out, err = cli(capsys, "leader-election", run_dir, "--election-type", "preferred",
                       "--topic", "t", "--partition", 0)
    # the preferred leader already leads; Kafka 2.8 lists the *succeeded* set here (KAFKA-12684)
    assert (rc, out, err) == (0, "Valid replica already elected for partitions \n", "")
    parts = tmp_path / "parts.json"
    parts.write_text('{"partitions":[{"topic":"nope","partition":0}]}')
    rc, out, err = cli(capsys, "leader-election", run_dir, "--election-type", "PREFERRED", "--path-to-json-file", parts)
    assert rc == 1
    assert out.startswith("Error completing leader election (PREFERRED) for partition: nope-0: "
                          "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: ")
    assert "AdminCommandFailedException: 1 replica(s) could not be elected" in err
    rc, out, err = cli(capsys, "leader-election", run_dir, "--election-type", "preferred", "--topic", "t",
                       "--all-topic-partitions")
    assert (rc, out) == (2, "")
    assert err == "One and only one of the following options is required: topic, all-topic-partitions, " \
                  "path-to-json-file\n"

    rc, out, _ = cli(capsys, "log-dirs", run_dir, "--describe")
    lines = out.split("\n")
    assert rc == 0 and lines[:2] == ["Querying brokers for log directories information",
                                     "Received log directory information from brokers 0,1,2"]
    body = json.loads(lines[2])
    by_broker = {b["broker"]: {d["logDir"]: d for d in b["logDirs"]} for b in body["brokers"]}
    assert set(by_broker) == {0, 1, 2} and all(set(d) == {"d0", "d1"} for d in by_broker.values())
    for b in (0, 1):
        held = {p["partition"]: p for d in by_broker[b].values() for p in d["partitions"]}
        assert held["t-0"] == {"partition": "t-0", "size": 2000, "offsetLag": 0, "isFuture": False}
        assert held["t-1"]["size"] == 0
    assert cli(capsys, "log-dirs", run_dir)[0] == 2  # --describe is required

    rc, out, _ = cli(capsys, "state-change-log", run_dir, "--topic", "t", "--partitions", "0",
                     "--end-time", "1970-01-01 00:00:00,000")
    assert rc == 0
    # the controller's startup lines are stamped at the run's start: no line before 1970-01-01 00:00:00,000
    assert out.startswith("[1970-01-01 00:00:00,000] TRACE ")
    assert ("[1970-01-01 00:00:00,000] TRACE [Controller id=0 epoch=1] Changed partition t-0 from "
            "NewPartition to OnlinePartition") in out
    assert all(line.startswith("[") and "t-0" in line for line in out.splitlines())
    rc, _, err = cli(capsys, "state-change-log", run_dir, "--partitions", "0")
    assert rc == 2 and err.startswith('The option "[topic]" needs to be provided')


# ---------------------------------------------------------------------------------------------- run --until-ms
def test_run_until_ms_for_a_new_scenario_and_flags_that_do_not_apply_to_a_run_directory(run_dir, tmp_path, capsys):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(json.dumps({  # JSON is YAML
        "name": "until", "cluster": {"brokers": [0, 1]}, "topics": [{"name": "u", "assignment": {0: [0, 1]}}],
        "timeline": [{"at": 0, "produce": {"topic": "u", "records": 3, "acks": "all"}}],
        "run": {"until_ms": 5000}}))
    out = tmp_path / "new"
    rc, text, _ = cli(capsys, "run", scenario, "--out", out, "--until-ms", 200, "--no-progress")
    assert rc == 0
    summary = json.loads(text[text.index("{"):])
    assert summary["rounds"] == 3 and summary["time_ms"] == 300 and summary["log_records"] == 6
    rc, _, err = cli(capsys, "run", run_dir, "--out", out, "--until-ms", 900)
    assert rc == 2 and "--out" in err
