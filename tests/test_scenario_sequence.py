"""Bounds on what sizes a run's work, and the timeline checked as a sequence (topics deleted earlier,
brokers already down or still running): refused with the field and value named, before any run
directory exists or Spark starts, from Python and from `sparkkafka run` (exit 2)."""

from __future__ import annotations

import copy

import pytest
import yaml

from sparkkafka.cli import main
from sparkkafka.errors import ScenarioError
from sparkkafka.scenario import loader, parse_scenario

BASE = {
    "cluster": {"brokers": [1, 2, 3]},
    "topics": [{"name": "t", "partitions": 1, "replication_factor": 2}],
}


def with_timeline(*entries, run=None):
    d = copy.deepcopy(BASE)
    d["timeline"] = list(entries)
    if run is not None:
        d["run"] = run
    return d


# (scenario, the field named, the value named, a piece of the message)
HELD = {
    "until_ms past a week": (with_timeline(run={"until_ms": 10**18}), "run.until_ms", 10**18, "a week"),
    "until_round past a week": (with_timeline(run={"until_round": 10**16}), "run.until_round", 10**16, "a week"),
    "records 1e15": (with_timeline({"at": 0, "produce": {"topic": "t", "records": 10**15}}),
                     "timeline[0].produce.records", 10**15, f"must be <= {loader.MAX_RECORDS}"),
    "value_bytes 1e11": (with_timeline({"at": 0, "produce": {"topic": "t", "records": 1, "value_bytes": 10**11}}),
                         "timeline[0].produce.value_bytes", 10**11, f"must be <= {2**31 - 1}"),
    "a steady rate sending 1e15 records": (
        with_timeline({"at": 0, "produce": {"topic": "t", "rate_per_sec": 1e12, "duration_ms": 1000}}),
        "timeline[0].produce.rate_per_sec", 1e12, "records per produce event"),
    "an event past a week": (with_timeline({"at": 10**15, "crash": 1}), "timeline[0].at", 10**15, "must be <="),
    "a pause of a year": (with_timeline({"at": 0, "pause": {"broker": 1, "duration_ms": 365 * 86400 * 1000}}),
                          "timeline[0].pause.duration_ms", 365 * 86400 * 1000, "must be <="),
    "acks 2": (with_timeline({"at": 0, "produce": {"topic": "t", "records": 1, "acks": 2}}),
               "timeline[0].produce.acks", 2, "String must be one of: all, -1, 0, 1"),
    "produce to a deleted topic": (
        with_timeline({"at": 0, "delete_topic": "t"}, {"at": 100, "produce": {"topic": "t", "records": 1}}),
        "timeline[1].produce.topic", "t", "an earlier delete_topic event deleted it"),
    "reassign a deleted topic": (
        with_timeline({"at": 0, "delete_topic": "t"},
                      {"at": 100, "reassign": {"plan": {"version": 1, "partitions": [
                          {"topic": "t", "partition": 0, "replicas": [1, 3]}]}}}),
        "timeline[1].reassign.plan.partitions[0].topic", "t", "deleted it"),
    "delete a topic twice": (with_timeline({"at": 0, "delete_topic": "t"}, {"at": 100, "delete_topic": "t"}),
                             "timeline[1].delete_topic.topic", "t", "deleted it"),
    "crash of a broker already down": (with_timeline({"at": 0, "crash": 1}, {"at": 100, "crash": 1}),
                                       "timeline[1].crash", 1, "already down"),
    "shutdown after a crash": (with_timeline({"at": 0, "crash": 2}, {"at": 100, "shutdown": {"broker": 2}}),
                               "timeline[1].shutdown.broker", 2, "already down"),
    "restart of a running broker": (with_timeline({"at": 0, "restart": 3}), "timeline[0].restart", 3,
                                    "is running"),
    "restart twice": (with_timeline({"at": 0, "crash": 1}, {"at": 10, "restart": 1}, {"at": 20, "restart": 1}),
                      "timeline[2].restart", 1, "is running"),
    "pause of a crashed broker": (
        with_timeline({"round": 1, "crash": 1}, {"at": 500, "pause": {"broker": 1, "duration_ms": 100}}),
        "timeline[1].pause.broker", 1, "already down"),
}


@pytest.mark.parametrize("name", HELD)
def test_held_input_is_refused_naming_field_and_value(name):
    data, field, value, piece = HELD[name]
    with pytest.raises(ScenarioError) as info:
        parse_scenario(data)
    assert (info.value.field, info.value.value) == (field, value)
    assert piece in str(info.value)


@pytest.mark.parametrize("name", ["until_ms past a week", "records 1e15", "value_bytes 1e11",
                                  "produce to a deleted topic", "acks 2", "crash of a broker already down",
                                  "restart of a running broker"])
def test_cli_run_exits_2_before_any_directory(name, tmp_path, capsys):
    data, field, value, _ = HELD[name]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "runs" / "bad"
    assert main(["run", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{field}:" in err and str(value) in err
    assert not out.exists() and not out.parent.exists()


def test_a_valid_sequence_still_loads():
    """The order is the run's (time, then file position): crash, restart, crash again; delete, create again."""
    sc = parse_scenario(with_timeline(
        {"at": 300, "crash": 1}, {"at": 0, "crash": 1}, {"at": 100, "restart": 1},
        {"at": 0, "shutdown": 2}, {"at": 50, "restart": 2}, {"at": 60, "pause": {"broker": 2, "duration_ms": 10}},
        {"at": 0, "delete_topic": "t"}, {"at": 10, "create_topic": {"name": "t", "replication_factor": 3}},
        {"at": 20, "produce": {"topic": "t", "records": 1}}, run={"until_ms": loader.MAX_TIME_MS}))
    assert [e.type for e in sc.timeline][:3] == ["crash", "crash", "restart"]
    assert sc.until_ms == 7 * 24 * 3600 * 1000


def test_events_applied_to_a_running_cluster_are_not_sequence_checked():
    """Cluster.apply checks one event against the run's current topics: the broker's state is the run's."""
    running = parse_scenario(with_timeline({"at": 0, "restart": 3}), running=True)
    assert running.timeline[0].args == {"broker": 3}


def test_a_broker_whose_log_dir_failed_may_restart():
    """A failed log dir may stop its broker (KIP-112): the timeline does not know, so a restart is allowed."""
    d = copy.deepcopy(BASE)
    d["cluster"]["log_dirs"] = ["d0"]
    d["timeline"] = [{"at": 0, "fail_log_dir": {"broker": 1, "log_dir": "d0"}}, {"at": 100, "restart": 1}]
    assert [e.type for e in parse_scenario(d).timeline] == ["fail_log_dir", "restart"]


def test_campaign_schedules_keep_only_steps_that_take_effect():
    """with_faults drops what the driver would ignore (a second crash of a down broker, the tail's restart of a
    running one), so every drawn schedule passes the sequence check; the base timeline stays as written."""
    from sparkkafka.scenario.faults import with_faults

    base = with_timeline({"at": 0, "produce": {"topic": "t", "records": 1}})
    faults = [{"at": 100, "crash": 1}, {"at": 200, "restart": 1}, {"at": 150, "crash": 1}, {"at": 400, "restart": 1},
              {"at": 120, "pause": {"broker": 1, "duration_ms": 10}}, {"at": 300, "crash": 2}]
    sc = with_faults(base, faults, settle_ms=1000, name="x")
    assert sc["timeline"] == [{"at": 0, "produce": {"topic": "t", "records": 1}}, {"at": 100, "crash": 1},
                              {"at": 200, "restart": 1}, {"at": 300, "crash": 2},
                              {"at": 500, "heal": {}}, {"at": 500, "restart": 2}]
    parse_scenario(sc)
