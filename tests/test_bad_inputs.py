"""Issue 13 item 3: the bad inputs a new user hit each get a clear error and change nothing (the run
directory is byte-identical before and after): `run RUN --until-ms -5`, `leader-election` on a partition
that does not exist (Kafka's exit code 1 and message), `Cluster.save()` twice in one round, and
`Cluster.for_path` on a directory holding only run.json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from operator_util import TINY, cli, copy_run, snapshot, tiny_run

from sparkkafka.errors import ScenarioError

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "snapshots" / "sample"


@pytest.fixture(scope="module")
def base(spark, tmp_path_factory) -> str:
    """A run directory after two rounds (its brokers' rows saved in a state folder)."""
    return tiny_run(spark, str(tmp_path_factory.mktemp("bad") / "run"), rounds=2)


def test_run_until_a_negative_time_is_refused_and_changes_nothing(base, tmp_path, capsys):
    from sparkkafka import Cluster

    run = copy_run(base, tmp_path)
    before = snapshot(run)
    code, out, err = cli(capsys, "run", run, "--until-ms", "-5", "--no-progress")
    assert (code, out) == (2, "")
    assert err == "sparkkafka: error: --until-ms: must be >= 0 (emulated milliseconds) (got -5)\n"
    # a time before the rounds the run has already run: a run does not go back
    code, _, err = cli(capsys, "run", run, "--until-ms", "0", "--no-progress")
    assert code == 2 and "is before the time run" in err and "(100 ms, run.json)" in err, err
    assert snapshot(run) == before
    # a new run: refused before its run directory is made
    scenario = tmp_path / "s.yaml"
    scenario.write_text(json.dumps(TINY))
    assert cli(capsys, "run", scenario, "--out", tmp_path / "new", "--until-ms", "-5")[0] == 2
    assert not (tmp_path / "new").exists()
    with pytest.raises(ScenarioError, match="until_ms: must be an integer >= 0"):
        Cluster.for_path(None, run).run(until_ms=-5)
    with pytest.raises(ScenarioError, match="rounds: must be an integer >= 0"):
        Cluster.for_path(None, run).step(rounds=-1)
    assert snapshot(run) == before


BIG = 10**18  # a typo'd end time: a run that would never end


def test_run_until_past_a_week_or_before_the_run_is_refused_naming_the_flag(base, tmp_path, capsys):
    """--until-ms and Cluster.run(until_ms) are bounded as the scenario's run.until_ms (MAX_TIME_MS, a week of
    emulated ms): refused before a directory is made or Spark starts, and a continued run the same way."""
    from sparkkafka import Cluster
    from sparkkafka.scenario.loader import MAX_TIME_MS

    run = copy_run(base, tmp_path)
    before = snapshot(run)
    code, out, err = cli(capsys, "run", run, "--until-ms", BIG, "--no-progress")
    assert (code, out) == (2, "")
    assert err == (f"sparkkafka: error: --until-ms: must be <= {MAX_TIME_MS} (a run spans at most {MAX_TIME_MS} "
                   f"emulated ms, a week) (got {BIG})\n")
    assert cli(capsys, "run", run, "--until-ms", MAX_TIME_MS + 1, "--no-progress")[0] == 2
    scenario = tmp_path / "s.yaml"
    scenario.write_text(json.dumps(TINY))
    code, _, err = cli(capsys, "run", scenario, "--out", tmp_path / "new", "--until-ms", BIG)
    assert code == 2 and "--until-ms" in err and str(BIG) in err
    assert not (tmp_path / "new").exists()
    with pytest.raises(ScenarioError) as e:
        Cluster.for_path(None, run).run(until_ms=BIG)
    assert (e.value.field, e.value.value) == ("until_ms", BIG) and f"must be <= {MAX_TIME_MS}" in e.value.message
    with pytest.raises(ScenarioError) as e:  # the run has run rounds 0 and 1: it is at 100 ms
        Cluster.for_path(None, run).run(until_ms=50)
    assert (e.value.field, e.value.value) == ("until_ms", 50)
    assert e.value.message == f"is before the time run {run} has already reached (100 ms); a run does not go back"
    assert snapshot(run) == before


@pytest.mark.parametrize(("args", "field", "message"), [
    (["--at-ms", BIG], "--at-ms", "must be <= 604800000 (a run spans at most 604800000 emulated ms, a week)"),
    (["--at-ms", -1], "--at-ms", "must be >= 0 (emulated milliseconds)"),
    (["--settle-ms", -5], "--settle-ms", "must be >= 0 (emulated milliseconds)"),
    (["--recover-ms", BIG], "--recover-ms", "must be <= 604800000"),
    (["--record-bytes", 0], "--record-bytes", "must be from 1 to 2147483647 (bytes of one record"),
    (["--record-bytes", 2**31], "--record-bytes", "must be from 1 to 2147483647"),
    # each within a week, the run they make not: the state is read at --at-ms + 18,000 (2.8's
    # zookeeper.session.timeout.ms) + --settle-ms (default 2,000), then --recover-ms at most
    (["--at-ms", 604_000_000, "--settle-ms", 800_000, "--recover-ms", 0], "--at-ms/--settle-ms/--recover-ms",
     "the emulated run would end at 604818000 ms"),
    (["--recover-ms", 604_790_000], "--at-ms/--settle-ms/--recover-ms", "the emulated run would end at 604811000"),
])
def test_whatif_flags_that_size_the_run_are_bounded_naming_the_flag(args, field, message, tmp_path, capsys):
    """whatif's times and record size are checked before the snapshot's run is made or Spark starts."""
    code, out, err = cli(capsys, "whatif", SAMPLE, "--lose-broker", "1", "--run-dir", tmp_path / "w", *args)
    assert (code, out) == (2, "")
    assert err.startswith(f"sparkkafka: error: {field}: {message}"), err
    assert not (tmp_path / "w").exists()


def test_whatif_reassign_until_is_bounded_and_not_before_the_plan(tmp_path, capsys):
    plan = SAMPLE.parent.parent / "plans" / "sample-move.json"
    for until, message in ((BIG, "must be <= 604800000"), (500, "is before --at-ms (1000), when the plan is submitted")):
        code, out, err = cli(capsys, "whatif", SAMPLE, "--reassign", plan, "--throttle", 10**6, "--until-ms", until,
                             "--run-dir", tmp_path / "w")
        assert (code, out) == (2, "") and err.startswith(f"sparkkafka: error: --until-ms: {message}"), err
        assert not (tmp_path / "w").exists()


def test_leader_election_on_a_partition_that_does_not_exist_exits_1_as_kafka_and_changes_nothing(
        base, tmp_path, capsys):
    """Kafka's controller answers UNKNOWN_TOPIC_OR_PARTITION "The partition does not exist."
    (KafkaController.processReplicaLeaderElection); LeaderElectionCommand prints it and throws
    AdminCommandFailedException: exit 1. Nothing was elected, so nothing is saved."""
    run = copy_run(base, tmp_path)
    before = snapshot(run)
    for topic, partition in (("t", "7"), ("nope", "0")):
        code, out, err = cli(capsys, "leader-election", run, "--election-type", "preferred",
                             "--topic", topic, "--partition", partition)
        assert (code, out) == (1, f"Error completing leader election (PREFERRED) for partition: {topic}-{partition}: "
                                  "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: The partition "
                                  "does not exist.\n")
        assert err.startswith('Exception in thread "main" kafka.common.AdminCommandFailedException: 1 replica(s) '
                              "could not be elected\n"), err
        assert snapshot(run) == before
    # an election that acts still saves the run: broker 2 is t-0's preferred leader and leads it already,
    # t-1's preferred leader 1 too, so an unclean election of both is not needed ...
    code, out, _ = cli(capsys, "leader-election", run, "--election-type", "unclean", "--all-topic-partitions")
    assert (code, out) == (0, "") and snapshot(run) == before


def test_cluster_save_twice_in_a_round_keeps_its_state_and_the_run_continues(base, tmp_path, spark):
    from sparkkafka import Cluster

    run = copy_run(base, tmp_path)
    c = Cluster.for_path(spark, run)
    folder = c.driver.state_folder
    c.save()
    c.save()  # used to write a new folder from the old one, delete the old one, then read it again
    assert c.driver.state_folder == folder and (tmp_path / "run" / folder).is_dir()
    c.step()
    c.save()
    c.save()
    again = Cluster.for_path(spark, run)
    assert again.round == 3 and again.state.count() > 0
    again.step()  # the rows saved are the rows the next round reads
    assert again.round == 4


def test_for_path_on_a_directory_with_only_run_json_is_refused(base, tmp_path, capsys):
    from sparkkafka import Cluster

    only = tmp_path / "only"
    only.mkdir()
    shutil.copy(f"{base}/run.json", only / "run.json")
    before = snapshot(str(only))
    with pytest.raises(ScenarioError, match=r"holds run.json but not the run's Delta tables \(log, "):
        Cluster.for_path(None, str(only))
    code, _, err = cli(capsys, "run", only, "--no-progress")
    assert code == 2 and "not a complete run directory" in err, err
    assert snapshot(str(only)) == before


def test_from_scenario_engine_overrides_the_scenarios_and_an_unknown_one_is_refused_naming_it(tmp_path):
    from sparkkafka import Cluster

    quickstart = Path(__file__).resolve().parents[1] / "conf" / "scenarios" / "quickstart.yaml"
    with pytest.raises(ScenarioError) as e:
        Cluster.from_scenario(quickstart, out=str(tmp_path / "bad"), engine="fast")
    assert (e.value.field, e.value.value) == ("engine", "fast")
    assert "expected one of: rounds, resident, local" in str(e.value) and not (tmp_path / "bad").exists()
    c = Cluster.from_scenario(quickstart, out=str(tmp_path / "run"), engine="local")  # quickstart says resident
    assert c.spark is None and c.scenario.emulator["engine"] == "local"
    c.run(until_ms=1000)
    assert c.summary()["acked"] > 0
