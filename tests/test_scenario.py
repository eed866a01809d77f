"""Scenario YAML loading and validation (pure Python, no Spark)."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from sparkkafka.errors import NotYetSupportedError, ScenarioError
from sparkkafka.scenario import Event, Scenario, TopicSpec, load_scenario, loader, parse_scenario
from sparkkafka.scenario.event_kind import KINDS

FULL = """
seed: 3
cluster:
  brokers: 3
  racks: {0: a, 1: b, 2: c}
  log_dirs: [d0, d1]
  config: {inter.broker.protocol.version: 2.7-IV2, min.insync.replicas: 2}
  emulator: {round.ms: 50}
topics:
  - {name: t, partitions: 2, replication_factor: 3}
  - {name: u, assignment: {0: [1, 2], 1: [2, 0]}, config: {unclean.leader.election.enable: true}}
timeline:
  - {at: 0, produce: {topic: t, records: 5, acks: all}}
  - {at: 0, produce: {topic: u, partition: 1, rate_per_sec: 100, duration_ms: 2000, acks: "-1", value_bytes: 10, key: k}}
  - {at: 850, produce: {topic: v, records: 1, acks: 0}}
  - {round: 2, crash: 0}
  - {round: 3, crash: {broker: 1, power_loss: true}}
  - {round: 4, restart: 0}
  - {round: 5, shutdown: {broker: 2}}
  - {at: 300, pause: {broker: 0, duration_ms: 500}}
  - {at: 400, isolate: {brokers: 0}}
  - {at: 410, isolate: {brokers: [0, 1], from: [2], duration_ms: 100}}
  - {at: 420, isolate: {brokers: 2, from: controller}}
  - {at: 500, heal: {}}
  - {at: 510, heal: }
  - {at: 600, fail_log_dir: {broker: 2, log_dir: d1}}
  - {at: 700, controller_failover: {}}
  - {at: 800, create_topic: {name: v, partitions: 1, replication_factor: 2}}
  - {at: 900, reassign: {plan: plan.json, throttle: 1000}}
  - at: 900
    reassign:
      plan: {partitions: [{topic: v, partition: 0, replicas: [2, 1], log_dirs: [any, d0]}]}
      log_dirs_throttle: 500
  - {at: 1000, elect_leaders: {election_type: preferred}}
  - {at: 1000, elect_leaders: {election_type: UNCLEAN, partitions: [{topic: t, partition: 1}]}}
  - {at: 1100, set_config: {entity: brokers, name: default, config: {follower.replication.throttled.rate: 100}}}
  - {at: 1100, set_config: {entity: brokers, name: 1, config: {min.insync.replicas: null}}}
  - {at: 1100, set_config: {entity: topics, name: v, config: {leader.replication.throttled.replicas: "0:1,0:2"}}}
  - {at: 1200, delete_topic: v}
"""

PLAN = {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [0, 1, 2]}]}


def _produce(topic, partition="all", records=None, rate=None, duration=None, acks=1, value_bytes=100, key=None):
    return {"topic": topic, "partition": partition, "records": records, "rate_per_sec": rate,
            "duration_ms": duration, "acks": acks, "value_bytes": value_bytes, "key": key}


def test_full_scenario_normalised(tmp_path, monkeypatch):
    monkeypatch.setattr(loader, "NOT_YET_SUPPORTED", set())
    (tmp_path / "plan.json").write_text(json.dumps(PLAN))
    path = tmp_path / "full.yaml"
    path.write_text(FULL)
    sc = load_scenario(path)
    assert isinstance(sc, Scenario)
    assert (sc.name, sc.seed, sc.brokers, sc.racks, sc.log_dirs) == ("full", 3, (0, 1, 2), {0: "a", 1: "b", 2: "c"},
                                                                     ("d0", "d1"))
    assert sc.config == {"inter.broker.protocol.version": "2.7-IV2", "min.insync.replicas": 2}
    assert sc.emulator["round.ms"] == 50 and sc.round_ms == 50
    assert set(sc.emulator) == set(loader.EMULATOR_DEFAULTS)
    assert sc.topics == (
        TopicSpec("t", 2, 3, None, {}),
        TopicSpec("u", 2, 2, {0: (1, 2), 1: (2, 0)}, {"unclean.leader.election.enable": True}),
    )
    v = TopicSpec("v", 1, 2, None, {})
    expected = [
        (0, None, "produce", _produce("t", records=5, acks=-1)),
        (0, None, "produce", _produce("u", 1, rate=100.0, duration=2000, acks=-1, value_bytes=10, key="k")),
        (850, None, "produce", _produce("v", records=1, acks=0)),
        (None, 2, "crash", {"broker": 0, "power_loss": False}),
        (None, 3, "crash", {"broker": 1, "power_loss": True}),
        (None, 4, "restart", {"broker": 0}),
        (None, 5, "shutdown", {"broker": 2}),
        (300, None, "pause", {"broker": 0, "duration_ms": 500}),
        (400, None, "isolate", {"brokers": (0,), "from": (1, 2), "duration_ms": None}),
        (410, None, "isolate", {"brokers": (0, 1), "from": (2,), "duration_ms": 100}),
        (420, None, "isolate", {"brokers": (2,), "from": "controller", "duration_ms": None}),
        (500, None, "heal", {}),
        (510, None, "heal", {}),
        (600, None, "fail_log_dir", {"broker": 2, "log_dir": "d1"}),
        (700, None, "controller_failover", {}),
        (800, None, "create_topic", {"topic": v}),
        (900, None, "reassign", {"plan": {"version": 1, "partitions": [
            {"topic": "t", "partition": 0, "replicas": [0, 1, 2], "log_dirs": ["any", "any", "any"]}]},
            "throttle": 1000, "log_dirs_throttle": None, "via": "api"}),
        (900, None, "reassign", {"plan": {"version": 1, "partitions": [
            {"topic": "v", "partition": 0, "replicas": [2, 1], "log_dirs": ["any", "d0"]}]},
            "throttle": None, "log_dirs_throttle": 500, "via": "api"}),
        (1000, None, "elect_leaders", {"election_type": "preferred", "partitions": None}),
        (1000, None, "elect_leaders", {"election_type": "unclean", "partitions": (("t", 1),)}),
        (1100, None, "set_config", {"entity": "brokers", "name": "default",
                                    "config": {"follower.replication.throttled.rate": 100}}),
        (1100, None, "set_config", {"entity": "brokers", "name": 1, "config": {"min.insync.replicas": None}}),
        (1100, None, "set_config", {"entity": "topics", "name": "v",
                                    "config": {"leader.replication.throttled.replicas": "0:1,0:2"}}),
        (1200, None, "delete_topic", {"topic": "v"}),
    ]
    assert sc.timeline == tuple(Event(i, *e) for i, e in enumerate(expected))
    assert {e.type for e in sc.timeline} == set(KINDS)  # every registered kind
    # no `run`: 10 s after the last event ends (the 2 s steady produce started at 0, not the delete at 1.2 s)
    assert (sc.until_ms, sc.until_round) == (2000 + 10000, None)


# --- malformed input: each names the exact field and value ------------------------------------

BASE = {
    "cluster": {"brokers": [1, 2], "log_dirs": ["d0", "d1"]},
    "topics": [{"name": "t", "partitions": 2, "replication_factor": 2}],
    "timeline": [{"at": 0, "produce": {"topic": "t", "records": 1}}],
}


def case(*sets, timeline=None):
    """BASE with (key path, value) replacements and optionally another timeline."""
    d = copy.deepcopy(BASE)
    for keys, value in sets:
        target = d
        for k in keys[:-1]:
            target = target.setdefault(k, {}) if isinstance(target, dict) else target[k]
        target[keys[-1]] = value
    if timeline is not None:
        d["timeline"] = timeline
    return d


def produce(**kw):
    return [{"at": 0, "produce": {"topic": "t", "records": 1, **kw}}]


def plan(*parts):
    return [{"at": 0, "reassign": {"plan": {"version": 1, "partitions": list(parts)}}}]


MALFORMED = {
    "unknown-top-level-key": (case((("bogus",), 1)), "bogus", 1),
    "unknown-cluster-key": (case((("cluster", "rack"), {})), "cluster.rack", {}),
    "unknown-key-in-event": (case(timeline=produce(partiton=0)), "timeline[0].produce.partiton", 0),
    "unknown-event": (case(timeline=[{"at": 0, "explode": 1}]), "timeline[0].explode", 1),
    "rf-above-brokers": (case((("topics", 0, "replication_factor"), 3)), "topics[0].replication_factor", 3),
    "unknown-broker-in-event": (case(timeline=[{"round": 3, "crash": 9}]), "timeline[0].crash.broker", 9),
    "unknown-broker-in-list": (case(timeline=[{"at": 0, "isolate": {"brokers": [1, 7]}}]),
                               "timeline[0].isolate.brokers[1]", 7),
    "negative-at": (case(timeline=[{"at": -5, "heal": {}}]), "timeline[0].at", -5),
    "negative-round": (case(timeline=[{"round": -1, "heal": {}}]), "timeline[0].round", -1),
    "acks-most": (case(timeline=produce(acks="most")), "timeline[0].produce.acks", "most"),
    "bool-for-int": (case((("topics", 0, "partitions"), True)), "topics[0].partitions", True),
    "bool-for-int-in-event": (case(timeline=produce(records=True)), "timeline[0].produce.records", True),
    "assignment-gap": (case((("topics", 0), {"name": "t", "assignment": {0: [1, 2], 2: [2, 1]}})),
                       "topics[0].assignment", [0, 2]),
    "assignment-duplicate-broker": (case((("topics", 0), {"name": "t", "assignment": {0: [1, 1]}})),
                                    "topics[0].assignment[0][1]", 1),
    "assignment-uneven": (case((("topics", 0), {"name": "t", "assignment": {0: [1, 2], 1: [2]}})),
                          "topics[0].assignment[1]", [2]),
    "unknown-broker-config": (case((("cluster", "config"), {"replica.lag.time.max": 1})),
                              "cluster.config.replica.lag.time.max", 1),
    "unknown-topic-config": (case((("topics", 0, "config"), {"retention.bytes": 1})),
                             "topics[0].config.retention.bytes", 1),
    "bad-ibp": (case((("cluster", "config", "inter.broker.protocol.version"), "3.5")),
                "cluster.config.inter.broker.protocol.version", "3.5"),
    "unquoted-ibp-0.10": (case((("cluster", "config", "inter.broker.protocol.version"), 0.10)),
                          "cluster.config.inter.broker.protocol.version", 0.1),
    "min-isr-zero": (case((("topics", 0, "config"), {"min.insync.replicas": 0})),
                     "topics[0].config.min.insync.replicas", 0),
    "unknown-log-dir": (case(timeline=[{"at": 0, "fail_log_dir": {"broker": 1, "log_dir": "d9"}}]),
                        "timeline[0].fail_log_dir.log_dir", "d9"),
    "both-at-and-round": (case(timeline=[{"at": 0, "round": 1, "heal": {}}]), "timeline[0]", {"at": 0, "round": 1}),
    "no-time": (case(timeline=[{"heal": {}}]), "timeline[0]", {}),
    "two-events": (case(timeline=[{"at": 0, "crash": 1, "restart": 1}]), "timeline[0]", ["crash", "restart"]),
    "unknown-topic": (case(timeline=[{"at": 0, "produce": {"topic": "x", "records": 1}}]),
                      "timeline[0].produce.topic", "x"),
    "unknown-partition": (case(timeline=produce(partition=2)), "timeline[0].produce.partition", 2),
    "records-and-rate": (case(timeline=produce(rate_per_sec=5, duration_ms=10)), "timeline[0].produce",
                         {"topic": "t", "records": 1, "rate_per_sec": 5, "duration_ms": 10}),
    "rate-without-duration": (case(timeline=[{"at": 0, "produce": {"topic": "t", "rate_per_sec": 5}}]),
                              "timeline[0].produce.duration_ms", None),
    "missing-brokers": (case((("cluster",), {})), "cluster.brokers", None),
    "duplicate-broker-ids": (case((("cluster", "brokers"), [1, 2, 1])), "cluster.brokers[2]", 1),
    "partial-racks": (case((("cluster", "racks"), {1: "a"})), "cluster.racks", [2]),
    "duplicate-topic": (case((("topics",), [{"name": "t"}, {"name": "t"}])), "topics[1].name", "t"),
    "plan-duplicate-partition": (case(timeline=plan({"topic": "t", "partition": 0, "replicas": [1]},
                                                    {"topic": "t", "partition": 0, "replicas": [2]})),
                                 "timeline[0].reassign.plan.partitions[1]",
                                 {"topic": "t", "partition": 0, "replicas": [2]}),
    "plan-log-dirs-length": (case(timeline=plan({"topic": "t", "partition": 0, "replicas": [1, 2],
                                                 "log_dirs": ["any"]})),
                             "timeline[0].reassign.plan.partitions[0].log_dirs", ["any"]),
    "plan-empty": (case(timeline=plan()), "timeline[0].reassign.plan.partitions", []),
    "create-existing-topic": (case(timeline=[{"at": 0, "create_topic": {"name": "t"}}]),
                              "timeline[0].create_topic.name", "t"),
    "set-config-read-only": (case(timeline=[{"at": 0, "set_config": {
        "entity": "brokers", "name": 1, "config": {"inter.broker.protocol.version": "2.7"}}}]),
        "timeline[0].set_config.config.inter.broker.protocol.version", "2.7"),
}


@pytest.mark.parametrize("data, field, value", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed(data, field, value):
    with pytest.raises(ScenarioError) as info:
        parse_scenario(data)
    assert type(info.value) is ScenarioError
    assert (info.value.field, info.value.value) == (field, value)
    assert field in str(info.value)


def test_cluster_from_a_malformed_dict_names_the_field_and_writes_nothing(tmp_path):
    from sparkkafka import Cluster

    out = tmp_path / "run"
    with pytest.raises(ScenarioError) as info:
        Cluster.from_scenario({"cluster": {"brokers": 3}, "topics": [{"name": "t", "partitions": 0}]},
                              out=str(out))
    assert info.value.field == "topics[0].partitions" and info.value.value == 0
    assert not out.exists()


def test_replication_factor_message_is_kafkas():
    with pytest.raises(ScenarioError, match=r"Replication factor: 3 larger than available brokers: 2\."):
        parse_scenario(case((("topics", 0, "replication_factor"), 3)))


@pytest.mark.parametrize("entry, field, value", [
    ({"fail_log_dir": {"broker": 1, "log_dir": "d0"}}, "timeline[0].fail_log_dir", {"broker": 1, "log_dir": "d0"}),
    ({"elect_leaders": {"election_type": "preferred"}}, "timeline[0].elect_leaders", {"election_type": "preferred"}),
])
def test_not_yet_supported(entry, field, value, monkeypatch):
    """The mechanism a version uses for validated events it cannot run yet (none are left now)."""
    monkeypatch.setattr(loader, "NOT_YET_SUPPORTED", {"fail_log_dir", "elect_leaders"})
    with pytest.raises(NotYetSupportedError) as info:
        parse_scenario(case(timeline=[{"at": 0, **entry}]))
    assert (info.value.field, info.value.value) == (field, value)
    assert "not yet supported by this version of sparkkafka" in info.value.message


def test_not_yet_supported_only_after_full_validation(monkeypatch):
    monkeypatch.setattr(loader, "NOT_YET_SUPPORTED", {"elect_leaders"})
    bad = [{"at": 0, "elect_leaders": {"election_type": "preferred"}}, {"at": 5, "shutdown": 9}]
    with pytest.raises(ScenarioError) as info:
        parse_scenario(case(timeline=bad))
    assert type(info.value) is ScenarioError and info.value.field == "timeline[1].shutdown.broker"


# --- the rest of the contract --------------------------------------------------------------------

@pytest.mark.parametrize("acks, expected", [(0, 0), (1, 1), (-1, -1), ("all", -1), ("-1", -1), ("1", 1)])
def test_acks(acks, expected):
    assert parse_scenario(case(timeline=produce(acks=acks))).timeline[0].args["acks"] == expected


@pytest.mark.parametrize("acks", [2, -2, "2", "none", True, 1.0])
def test_acks_outside_the_producers_config_is_refused(acks):
    """The Java producer's `acks` accepts only all, -1, 0 and 1 (a ConfigException otherwise)."""
    with pytest.raises(ScenarioError) as info:
        parse_scenario(case(timeline=produce(acks=acks)))
    assert info.value.field == "timeline[0].produce.acks" and info.value.value == acks
    assert "String must be one of: all, -1, 0, 1" in str(info.value)


def test_defaults():
    sc = parse_scenario({"cluster": {"brokers": 2}, "topics": [{"name": "t"}]}, name="x")
    assert (sc.name, sc.seed, sc.brokers, sc.racks, sc.log_dirs) == ("x", 0, (0, 1), None, ("d0",))
    assert sc.topics == (TopicSpec("t", 1, 1, None, {}),)
    assert (sc.timeline, sc.until_ms, sc.until_round, sc.end_ms) == ((), 10000, None, 10000)
    assert sc.emulator == loader.EMULATOR_DEFAULTS


def test_json_style_string_ids():
    sc = parse_scenario(case((("cluster", "racks"), {"1": "a", "2": "b"}),
                             (("topics", 0), {"name": "t", "assignment": {"0": [1, 2], "1": [2, 1]}})))
    assert sc.racks == {1: "a", 2: "b"} and sc.topics[0].assignment == {0: (1, 2), 1: (2, 1)}


def test_run_until_round_and_round_events():
    sc = parse_scenario(case((("run",), {"until_round": 40}), (("cluster", "emulator"), {"round.ms": 10})))
    assert (sc.until_ms, sc.until_round, sc.end_ms) == (None, 40, 400)
    sc = parse_scenario(case(timeline=[{"round": 7, "crash": 1}]))
    assert sc.until_ms == 7 * 100 + 10000


def test_topics_defaults_from_broker_config():
    sc = parse_scenario(case((("cluster", "config"), {"num.partitions": 3, "default.replication.factor": 2}),
                             (("topics",), [{"name": "t"}])))
    assert sc.topics[0] == TopicSpec("t", 3, 2, None, {})


def test_topics_may_be_empty_only_when_created_by_the_timeline():
    with pytest.raises(ScenarioError) as info:
        parse_scenario(case((("topics",), []), timeline=[]))
    assert (info.value.field, info.value.value) == ("topics", [])
    sc = parse_scenario(case((("topics",), []), timeline=[
        {"at": 5, "produce": {"topic": "n", "records": 1}}, {"at": 0, "create_topic": {"name": "n"}}]))
    assert [e.type for e in sc.timeline] == ["produce", "create_topic"]  # file order kept


def test_topic_used_before_it_is_created():
    with pytest.raises(ScenarioError) as info:
        parse_scenario(case(timeline=[{"at": 0, "produce": {"topic": "n", "records": 1}},
                                      {"at": 5, "create_topic": {"name": "n"}}]))
    assert (info.value.field, info.value.value) == ("timeline[0].produce.topic", "n")


def test_yaml_errors_are_scenario_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster: [1,\n")
    with pytest.raises(ScenarioError) as info:
        load_scenario(bad)
    assert (info.value.field, info.value.value) == ("<file>", str(bad))
    dup = tmp_path / "dup.yaml"
    dup.write_text("cluster: {brokers: 1}\ntopics: []\ntimeline:\n  - {at: 0, crash: 0, crash: 0}\n")
    with pytest.raises(ScenarioError, match="duplicate key 'crash'"):
        load_scenario(dup)
    with pytest.raises(ScenarioError) as info:
        load_scenario(tmp_path / "missing.yaml")
    assert info.value.field == "<file>"
    with pytest.raises(ScenarioError) as info:
        parse_scenario(["not", "a", "mapping"])
    assert info.value.field == "<scenario>"


def test_missing_plan_file(tmp_path):
    with pytest.raises(ScenarioError) as info:
        parse_scenario(case(timeline=[{"at": 0, "reassign": {"plan": "nope.json"}}]), base_dir=tmp_path)
    assert (info.value.field, info.value.value) == ("timeline[0].reassign.plan", "nope.json")


def _paths(node, prefix=()):
    """Every (key path) inside a loaded YAML tree."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for k, v in items:
        yield prefix + (k,)
        yield from _paths(v, prefix + (k,))


def test_any_garbage_gives_a_scenario_error(tmp_path):
    """Replace every value of the full scenario with odd ones: only ScenarioError may come out."""
    (tmp_path / "plan.json").write_text(json.dumps(PLAN))
    data = yaml.safe_load(FULL)
    for keys in list(_paths(data)):
        for odd in (None, True, -1, 0, "x", "", [], {}, 1.5, [None], {"x": 1}):
            d = copy.deepcopy(data)
            target = d
            for k in keys[:-1]:
                target = target[k]
            target[keys[-1]] = odd
            try:
                parse_scenario(d, base_dir=tmp_path)
            except ScenarioError:
                pass
