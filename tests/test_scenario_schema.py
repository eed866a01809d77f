"""The scenario document as a typed model (scenario/schema.py): an upper bound on every number that sizes a
run's work, strict types, unknown keys at any depth with a did-you-mean hint, all refused as a ScenarioError
naming the field and the value, from Python and from `sparkkafka run` (exit 2, before the run directory)."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from sparkkafka.cli import main
from sparkkafka.errors import ScenarioError
from sparkkafka.scenario import parse_scenario, schema

BASE = {
    "cluster": {"brokers": [1, 2], "log_dirs": ["d0", "d1"], "config": {}, "emulator": {}},
    "topics": [{"name": "t", "partitions": 2, "replication_factor": 2}],
    "timeline": [{"at": 0, "produce": {"topic": "t", "records": 1}}],
}
IMPORTED = {"name": "i", "assignment": {0: [1, 2]},
            "state": {0: {"leader": 1, "isr": [1, 2], "logs": {1: {"dir": "d0", "bytes": 10},
                                                              2: {"dir": "d1", "bytes": 10}}}}}


def doc(*sets: tuple[tuple, object], timeline: list | None = None) -> dict:
    """BASE with (key path, value) replacements, and another timeline if given."""
    d = copy.deepcopy(BASE)
    if timeline is not None:
        d["timeline"] = timeline
    for keys, value in sets:
        target = d
        for k in keys[:-1]:
            target = target.setdefault(k, {}) if isinstance(target, dict) else target[k]
        target[keys[-1]] = value
    return d


def event(kind: str, args: object, at: int = 0) -> list:
    return [{"at": at, kind: args}]


def refused(data: dict) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(data)
    assert type(info.value) is ScenarioError
    return info.value


# (scenario, the field named, the value named): one absurd value of each number that sizes work
TOO_BIG = {
    "at": (doc(timeline=[{"at": 10**13, "heal": {}}]), "timeline[0].at", 10**13),
    "round": (doc(timeline=[{"round": 10**13, "heal": {}}]), "timeline[0].round", 10**13),
    "pause duration": (doc(timeline=event("pause", {"broker": 1, "duration_ms": 10**13})),
                       "timeline[0].pause.duration_ms", 10**13),
    "isolate duration": (doc(timeline=event("isolate", {"brokers": 1, "duration_ms": 10**13})),
                         "timeline[0].isolate.duration_ms", 10**13),
    "produce duration": (doc(timeline=event("produce", {"topic": "t", "rate_per_sec": 1, "duration_ms": 10**13})),
                         "timeline[0].produce.duration_ms", 10**13),
    "records": (doc(timeline=event("produce", {"topic": "t", "records": 10**9})), "timeline[0].produce.records",
                10**9),
    "rate_per_sec": (doc(timeline=event("produce", {"topic": "t", "rate_per_sec": 1e300, "duration_ms": 1})),
                     "timeline[0].produce.rate_per_sec", 1e300),
    "rate x duration": (doc(timeline=event("produce", {"topic": "t", "rate_per_sec": 1e6, "duration_ms": 10**6})),
                        "timeline[0].produce.rate_per_sec", 1e6),
    "value_bytes": (doc(timeline=event("produce", {"topic": "t", "records": 1, "value_bytes": 2**31})),
                    "timeline[0].produce.value_bytes", 2**31),
    "throttle": (doc(timeline=event("reassign", {"plan": {"partitions": [
        {"topic": "t", "partition": 0, "replicas": [2, 1]}]}, "throttle": 2**63})),
        "timeline[0].reassign.throttle", 2**63),
    "until_ms": (doc((("run",), {"until_ms": 10**13})), "run.until_ms", 10**13),
    "until_round": (doc((("run",), {"until_round": 10**9})), "run.until_round", 10**9),
    "until_round x round.ms": (doc((("run",), {"until_round": 10**7}), (("cluster", "emulator", "round.ms"), 100)),
                               "run.until_round", 10**7),
    "broker count": (doc((("cluster", "brokers"), 10**6)), "cluster.brokers", 10**6),
    "broker id": (doc((("cluster", "brokers"), [1, 2**31])), "cluster.brokers[1]", 2**31),
    "broker list": (doc((("cluster", "brokers"), list(range(10_001)))), "cluster.brokers", list(range(10_001))),
    "partitions": (doc((("topics", 0, "partitions"), 10**7)), "topics[0].partitions", 10**7),
    "partitions in all topics": (doc((("topics",), [{"name": "a", "partitions": 600_000},
                                                     {"name": "b", "partitions": 600_000}])),
                                 "topics[1].partitions", 600_000),
    "created partitions in all topics": (
        doc((("topics", 0, "partitions"), 600_000),
            timeline=event("create_topic", {"name": "n", "partitions": 600_000})),
        "timeline[0].create_topic.partitions", 600_000),
    "replication_factor": (doc((("topics", 0, "replication_factor"), 10**5)), "topics[0].replication_factor", 10**5),
    "partition id": (doc(timeline=event("produce", {"topic": "t", "partition": 2**31, "records": 1})),
                     "timeline[0].produce.partition", 2**31),
    "replica log bytes": (doc((("topics",), [copy.deepcopy(IMPORTED)]),
                              (("topics", 0, "state", 0, "logs", 1, "bytes"), 2**60)),
                          "topics[0].state[0].logs[1].bytes", 2**60),
    "future log bytes": (doc((("topics",), [copy.deepcopy(IMPORTED)]),
                             (("topics", 0, "state", 0, "logs", 1, "future"), {"dir": "d1", "bytes": 2**60})),
                         "topics[0].state[0].logs[1].future.bytes", 2**60),
    "replica log rows": (doc((("topics",), [copy.deepcopy(IMPORTED)]),
                             (("cluster", "emulator", "initial.record.bytes"), 1),
                             (("topics", 0, "state", 0, "logs", 2, "bytes"), 10**9)),
                         "topics[0].state[0].logs[2].bytes", 10**9),
    "broker config of Kafka type INT": (doc((("cluster", "config", "replica.fetch.max.bytes"), 2**31)),
                                        "cluster.config.replica.fetch.max.bytes", 2**31),
    "broker config of Kafka type LONG": (doc((("cluster", "config", "replica.lag.time.max.ms"), 2**63)),
                                         "cluster.config.replica.lag.time.max.ms", 2**63),
    "topic config": (doc((("topics", 0, "config"), {"segment.bytes": 2**31})), "topics[0].config.segment.bytes",
                     2**31),
    "set_config value": (doc(timeline=event("set_config", {"entity": "brokers", "name": 1,
                                                           "config": {"num.replica.fetchers": 2**31}})),
                         "timeline[0].set_config.config.num.replica.fetchers", 2**31),
    **{f"emulator {k}": (doc((("cluster", "emulator", k), hi + 1)), f"cluster.emulator.{k}", hi + 1)
       for k, hi in schema.EMULATOR_MAX.items()},
}


@pytest.mark.parametrize("name", TOO_BIG)
def test_every_number_that_sizes_work_has_an_upper_bound(name):
    data, field, value = TOO_BIG[name]
    e = refused(data)
    assert (e.field, e.value) == (field, value)
    assert f"{field}: " in str(e) and ("<=" in e.message or "at most" in e.message), e


def test_the_bounds_themselves_load():
    """The largest value each bound allows is a valid scenario."""
    sc = parse_scenario(doc((("run",), {"until_ms": schema.MAX_TIME_MS}),
                            (("cluster", "emulator"), dict(schema.EMULATOR_MAX)),
                            (("cluster", "config", "replica.lag.time.max.ms"), 2**63 - 1),
                            timeline=event("produce", {"topic": "t", "rate_per_sec": schema.MAX_RECORDS,
                                                       "duration_ms": 1000, "value_bytes": 2**31 - 1})))
    assert sc.until_ms == schema.MAX_TIME_MS and sc.emulator["round.ms"] == schema.MAX_TIME_MS
    assert sc.timeline[0].args["rate_per_sec"] == float(schema.MAX_RECORDS)


STRICT = {
    "bool for the broker count": (doc((("cluster", "brokers"), True)), "cluster.brokers", True,
                                  "expected an integer, not a boolean"),
    "bool for a time": (doc(timeline=[{"at": False, "heal": {}}]), "timeline[0].at", False, "not a boolean"),
    "bool for round.ms": (doc((("cluster", "emulator", "round.ms"), True)), "cluster.emulator.round.ms", True,
                          "not a boolean"),
    "bool for a config int": (doc((("cluster", "config", "min.insync.replicas"), True)),
                              "cluster.config.min.insync.replicas", True, "not a boolean"),
    "bool for a leader": (doc((("topics",), [copy.deepcopy(IMPORTED)]), (("topics", 0, "state", 0, "leader"), True)),
                          "topics[0].state[0].leader", True, "not a boolean"),
    "string records": (doc(timeline=event("produce", {"topic": "t", "records": "5"})),
                       "timeline[0].produce.records", "5", "expected an integer"),
    "string partitions": (doc((("topics", 0, "partitions"), "2")), "topics[0].partitions", "2",
                          "expected an integer"),
    "string time": (doc(timeline=[{"round": "3", "heal": {}}]), "timeline[0].round", "3", "expected an integer"),
    "float for an int": (doc(timeline=event("crash", 1.0)), "timeline[0].crash.broker", 1.0, "expected an integer"),
    "int for a bool": (doc(timeline=event("crash", {"broker": 1, "power_loss": 1})), "timeline[0].crash.power_loss",
                       1, "expected true or false"),
    "string rate": (doc(timeline=event("produce", {"topic": "t", "rate_per_sec": "5", "duration_ms": 10})),
                    "timeline[0].produce.rate_per_sec", "5", "expected a finite number"),
    "infinite rate": (doc(timeline=event("produce", {"topic": "t", "rate_per_sec": float("inf"), "duration_ms": 10})),
                      "timeline[0].produce.rate_per_sec", float("inf"), "expected a finite number"),
    "int for a string": (doc((("cluster", "log_dirs"), ["d0", 1])), "cluster.log_dirs[1]", 1, "expected a string"),
    "a list for a mapping": (doc((("cluster", "config"), [1])), "cluster.config", [1], "expected a mapping"),
    "a tuple for a list": (doc((("cluster", "brokers"), (1, 2))), "cluster.brokers", (1, 2), "expected a list"),
    "a negative digit-string key": (doc((("topics", 0), {"name": "t", "assignment": {"-1": [1, 2]}})),
                                    "topics[0].assignment.-1", "-1", "expected an integer"),
}


@pytest.mark.parametrize("name", STRICT)
def test_types_are_strict(name):
    data, field, value, piece = STRICT[name]
    e = refused(data)
    assert (e.field, e.value) == (field, value) and piece in e.message, e


def test_digit_string_ids_as_mapping_keys_are_json_s_integers():
    """JSON has no integer keys: an assignment, racks, a state and its logs keyed by "0" mean 0."""
    sc = parse_scenario(json.loads(json.dumps(doc((("cluster", "racks"), {1: "a", 2: "b"}),
                                                  (("topics",), [copy.deepcopy(IMPORTED)]), timeline=[]))))
    assert sc.racks == {1: "a", 2: "b"} and sc.topics[0].assignment == {0: (1, 2)}
    assert sorted(sc.topics[0].state[0].logs) == [1, 2]


UNKNOWN = {
    "top level": (doc((("timelin",), [])), "timelin", [], "unknown key 'timelin'; did you mean 'timeline'?"),
    "cluster": (doc((("cluster", "emulater"), {})), "cluster.emulater", {},
                "unknown key 'emulater'; did you mean 'emulator'?"),
    "broker config": (doc((("cluster", "config", "min.insync.replica"), 2)), "cluster.config.min.insync.replica", 2,
                      "unknown config 'min.insync.replica'; did you mean 'min.insync.replicas'?"),
    "emulator setting": (doc((("cluster", "emulator", "round.msec"), 5)), "cluster.emulator.round.msec", 5,
                         "unknown emulator setting 'round.msec'; did you mean 'round.ms'?"),
    "topic": (doc((("topics", 0, "replication"), 2)), "topics[0].replication", 2,
              "unknown key 'replication'; did you mean 'replication_factor'?"),
    "replica log": (doc((("topics",), [copy.deepcopy(IMPORTED)]), (("topics", 0, "state", 0, "logs", 1, "byte"), 1)),
                    "topics[0].state[0].logs[1].byte", 1, "unknown key 'byte'; did you mean 'bytes'?"),
    "event kind": (doc(timeline=[{"at": 0, "crsh": 1}]), "timeline[0].crsh", 1,
                   "unknown key 'crsh'; did you mean 'crash'?"),
    "event": (doc(timeline=event("produce", {"topic": "t", "recods": 1})), "timeline[0].produce.recods", 1,
              "unknown key 'recods'; did you mean 'records'?"),
    "plan entry": (doc(timeline=event("reassign", {"plan": {"partitions": [
        {"topic": "t", "partition": 0, "replica": [1]}]}})), "timeline[0].reassign.plan.partitions[0].replica", [1],
        "unknown key 'replica'; did you mean 'replicas'?"),
    "topic config in set_config": (doc(timeline=event("set_config", {"entity": "topics", "name": "t",
                                                                     "config": {"retention.m": 5}})),
                                   "timeline[0].set_config.config.retention.m", 5,
                                   "unknown config 'retention.m'; did you mean 'retention.ms'?"),
    "nothing close": (doc(timeline=event("pause", {"broker": 1, "duration_ms": 5, "zzz": 0})),
                      "timeline[0].pause.zzz", 0, "unknown key 'zzz'; expected one of: broker, duration_ms"),
}


@pytest.mark.parametrize("name", UNKNOWN)
def test_unknown_keys_at_any_depth_get_a_hint(name):
    data, field, value, message = UNKNOWN[name]
    e = refused(data)
    assert (e.field, e.value, e.message) == (field, value, message)


def test_a_key_set_to_null_is_the_key_left_out():
    """As YAML authors write `key:` for "no value": the default, or `required` for a required key."""
    sc = parse_scenario(doc(timeline=event("produce", {"topic": "t", "records": 1, "acks": None, "partition": None})))
    assert sc.timeline[0].args["acks"] == 1 and sc.timeline[0].args["partition"] == "all"
    e = refused(doc(timeline=event("produce", {"topic": None, "records": 1})))
    assert (e.field, e.value, e.message) == ("timeline[0].produce.topic", None, "required")


@pytest.mark.parametrize("data, field, value", [
    (doc((("cluster", "emulator", "initial.record.bytes"), True)), "cluster.emulator.initial.record.bytes", True),
    (doc((("topics",), [copy.deepcopy(IMPORTED)]), (("topics", 0, "state", 0, "logs", 1, "bytes"), 2**60)),
     "topics[0].state[0].logs[1].bytes", 2**60),
    (doc((("clustr",), {})), "clustr", {}),
], ids=["strict", "bound", "unknown key"])
def test_cli_run_exits_2_naming_field_and_value_before_the_run_directory(data, field, value, tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "runs" / "bad"
    assert main(["run", str(path), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"sparkkafka: error: {field}: ") and f"(got {value!r})" in err, err
    assert not out.exists() and not out.parent.exists()
