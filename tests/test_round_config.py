"""The typed round configuration (protocol.config.RoundSettings), the driver's and controller's
(ClusterSettings), a topic's (TopicSettings) and the emulator's (EmulatorSettings): Kafka's names map to
typed fields, read by attribute only, and no protocol or driver module reads a setting by its name."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import fields
from pathlib import Path

import harness as H
import pytest

from sparkkafka.protocol import alter_log_dirs
from sparkkafka.protocol.config import (
    BROKER_DEFAULTS,
    CLUSTER_EMULATOR_SETTINGS,
    CLUSTER_KAFKA_CONFIGS,
    EMULATOR_DEFAULTS,
    ROUND_EMULATOR_SETTINGS,
    ROUND_KAFKA_CONFIGS,
    TOPIC_CONFIGS,
    ClusterSettings,
    EmulatorSettings,
    RoundSettings,
    TopicSettings,
    broker_config,
)
from sparkkafka.protocol.rules import rules_for
from sparkkafka.scenario.loader import parse_scenario

PACKAGE = Path(__file__).resolve().parent.parent / "sparkkafka"
PROTOCOL = PACKAGE / "protocol"


def _cfg(**derived) -> RoundSettings:
    broker = broker_config({"inter.broker.protocol.version": "2.1", "replica.lag.time.max.ms": 7000})
    return RoundSettings.of(broker, EmulatorSettings.of({"tail.records": 7}), "2.1", round_ms=100, **derived)


def test_kafka_names_map_to_typed_fields():
    cfg = _cfg()
    # Kafka's own names, each a broker config or an emulator setting
    assert set(ROUND_KAFKA_CONFIGS) | set(CLUSTER_KAFKA_CONFIGS) <= set(BROKER_DEFAULTS)
    assert set(ROUND_EMULATOR_SETTINGS) | set(CLUSTER_EMULATOR_SETTINGS) <= set(EMULATOR_DEFAULTS)
    assert cfg.replica_lag_time_max_ms == 7000
    assert cfg.inter_broker_protocol_version == "2.1" and cfg.unclean_leader_election_enable is False
    assert cfg.tail_records == 7
    assert cfg.rules is rules_for("2.1") and not cfg.rules.alter_isr  # the profile's shared rules
    with pytest.raises(TypeError):
        cfg["replica.lag.time.max.ms"]  # no key-based reads: a Kafka name is no key of it
    with pytest.raises(AttributeError):
        cfg.round_ms = 5  # frozen


def test_the_defaults_are_kafkas():
    cfg = H.settings()
    assert {k: getattr(cfg, f) for k, f in ROUND_KAFKA_CONFIGS.items()} == \
        {k: BROKER_DEFAULTS[k] for k in ROUND_KAFKA_CONFIGS}
    assert cfg.replication_quota_window_num == 11 and cfg.round_ms == EMULATOR_DEFAULTS["round.ms"]
    cluster = ClusterSettings.defaults()
    assert cluster.zookeeper_session_timeout_ms == 18000 and cluster.leader_imbalance_per_broker_percentage == 10
    assert cluster.auto_rebalance_during_reassignment is False
    assert ClusterSettings.of(broker_config({"inter.broker.protocol.version": "0.10"})).zookeeper_session_timeout_ms \
        == 6000  # the profile's historic default (config.version_defaults)


def test_protocol_functions_read_its_fields():
    cfg = _cfg(quota={"alter_dirs": {1: 2000}})
    assert alter_log_dirs.round_budget(cfg, 1) == 200
    assert alter_log_dirs.round_budget(cfg, 2) is None  # no finite rate for broker 2
    assert alter_log_dirs.thread_count(cfg, ["d0", "d1"]) == 2  # num.replica.alter.log.dirs.threads: the dirs


STRING_READ = re.compile(r"""\bcfg\s*(\[\s*["']|\.get\(\s*["'])""")


def test_the_string_read_finder_finds_one():
    assert STRING_READ.search('x = cfg["replica.lag.time.max.ms"]')
    assert STRING_READ.search("n = config.cfg.get('replication.quota.window.num') or 11")
    assert not STRING_READ.search("lag = cfg.replica_lag_time_max_ms")


def test_no_protocol_module_reads_a_setting_by_its_kafka_name():
    """Every setting is read through RoundSettings' typed fields, its default in one place (BROKER_DEFAULTS,
    EMULATOR_DEFAULTS): a string read (`cfg["..."]`, `cfg.get("...")`) would restate it at the call site."""
    found = [f"{p.name}:{n}" for p in sorted(PROTOCOL.glob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1) if STRING_READ.search(line)]
    assert found == []


def test_emulator_settings_are_the_defaults_table_typed_and_fill_a_missing_setting():
    """Each field is a setting's dotted name in snake_case; what a mapping lacks (a run saved before the
    setting existed) reads EMULATOR_DEFAULTS, as the scenario's typed view does."""
    assert [f.name for f in fields(EmulatorSettings)] == [k.replace(".", "_") for k in EMULATOR_DEFAULTS]
    assert {k: getattr(EmulatorSettings.of(), k.replace(".", "_")) for k in EMULATOR_DEFAULTS} == EMULATOR_DEFAULTS
    sc = parse_scenario({"name": "s", "cluster": {"brokers": 1, "emulator": {"checkpoint.rounds": 5}},
                         "topics": [{"name": "t", "partitions": 1, "replication_factor": 1}], "run": {"until_ms": 100}})
    assert sc.emulator_settings.checkpoint_rounds == 5
    older = dataclasses.replace(sc, emulator={k: v for k, v in sc.emulator.items()
                                              if k not in ("checkpoint.rounds", "idle.jump", "resident.rounds")})
    assert (older.emulator_settings.checkpoint_rounds, older.emulator_settings.idle_jump,
            older.emulator_settings.resident_rounds) == (EMULATOR_DEFAULTS["checkpoint.rounds"],
                                                         EMULATOR_DEFAULTS["idle.jump"], EMULATOR_DEFAULTS["resident.rounds"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        sc.emulator_settings.engine = "local"  # type: ignore[misc]


def test_topic_settings_take_the_override_else_the_brokers_else_kafkas_default():
    assert [f.name for f in fields(TopicSettings)] == [k.replace(".", "_") for k in TOPIC_CONFIGS]
    broker = broker_config({"min.insync.replicas": 2})
    assert TopicSettings.of(broker, {}).min_insync_replicas == 2
    assert TopicSettings.of(broker, {"min.insync.replicas": 3}).min_insync_replicas == 3
    assert TopicSettings.of(broker_config(None), {}).min_insync_replicas == BROKER_DEFAULTS["min.insync.replicas"]
    assert TopicSettings.of(broker, {}).leader_replication_throttled_replicas == ""  # LogConfig's default
    # the 0.10 profile's historic unclean.leader.election.enable (true before 0.11)
    assert TopicSettings.of(broker_config({"inter.broker.protocol.version": "0.10"}), {}).unclean_leader_election_enable


# a read of an emulator setting or a topic config by its name: emulator["..."], emulator.get("..."),
# self._emulator("..."), c["min.insync.replicas"] and the like
NAME_READ = re.compile(r"""\bemulator\s*(\[\s*["']|\.get\(\s*["'])|\b_emulator\(|"""
                       r"""\[\s*["'](""" + "|".join(re.escape(k) for k in TOPIC_CONFIGS) + r""")["']\s*\]""")


def test_the_name_read_finder_finds_one():
    assert NAME_READ.search('every = int(self.scenario.emulator.get("checkpoint.rounds", 0))')
    assert NAME_READ.search("n = sc.emulator['spark.partitions']")
    assert NAME_READ.search('if self._emulator("delta.writer") == "delta-spark":')
    assert NAME_READ.search('min_isr = {t: int(c["min.insync.replicas"]) for t, c in tcfg.items()}')
    assert not NAME_READ.search("every = self.emulator.checkpoint_rounds")
    assert not NAME_READ.search('mapping["cluster"].setdefault("emulator", {})["engine"] = engine')


def test_no_driver_module_reads_an_emulator_setting_or_a_topic_config_by_name():
    """The driver, the controller and the run directory read EmulatorSettings / TopicSettings fields: a
    name read would restate a default at the call site (as `.get("checkpoint.rounds", 0)` did)."""
    files = [*sorted((PACKAGE / "driver").glob("*.py")), *sorted((PACKAGE / "controller").glob("*.py")),
             PACKAGE / "run_dir.py", PACKAGE / "cluster.py", PACKAGE / "whatif.py"]
    found = [f"{p.name}:{n}" for p in files
             for n, line in enumerate(p.read_text().splitlines(), 1) if NAME_READ.search(line)]
    assert found == []
