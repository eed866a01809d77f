"""The typed round configuration (protocol.config.RoundSettings) and the driver's and controller's
(ClusterSettings): Kafka's names map to typed fields, read by attribute only, and no protocol module
reads a setting by its Kafka name."""

from __future__ import annotations

import re
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
    ClusterSettings,
    RoundSettings,
    broker_config,
)
from sparkkafka.protocol.rules import rules_for

PROTOCOL = Path(__file__).resolve().parent.parent / "sparkkafka" / "protocol"


def _cfg(**derived) -> RoundSettings:
    broker = broker_config({"inter.broker.protocol.version": "2.1", "replica.lag.time.max.ms": 7000})
    return RoundSettings.of(broker, {**EMULATOR_DEFAULTS, "tail.records": 7}, "2.1", round_ms=100, **derived)


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
