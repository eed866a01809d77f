"""The typed round configuration (protocol.config.RoundSettings): Kafka's names map to typed fields, the
executors' protocol functions read it as a Mapping, and no key outside its fields exists."""

from __future__ import annotations

import pytest

from sparkkafka.protocol import alter_log_dirs
from sparkkafka.protocol.config import (
    BROKER_DEFAULTS,
    EMULATOR_DEFAULTS,
    ROUND_DERIVED,
    ROUND_EMULATOR_SETTINGS,
    ROUND_KAFKA_CONFIGS,
    RoundSettings,
    broker_config,
)
from sparkkafka.protocol.rules import rules_for, rules_of


def _cfg(**derived) -> RoundSettings:
    broker = broker_config({"inter.broker.protocol.version": "2.1", "replica.lag.time.max.ms": 7000})
    return RoundSettings.of(broker, {**EMULATOR_DEFAULTS, "tail.records": 7}, profile="2.1", rules=rules_for("2.1"),
                          round_ms=100, **derived)


def test_kafka_names_map_to_typed_fields():
    cfg = _cfg()
    assert set(ROUND_KAFKA_CONFIGS) <= set(BROKER_DEFAULTS)  # Kafka's own names, each a broker config
    assert cfg.replica_lag_time_max_ms == cfg["replica.lag.time.max.ms"] == 7000
    assert cfg["inter.broker.protocol.version"] == "2.1" and cfg["unclean.leader.election.enable"] is False
    assert cfg.tail_records == cfg["emulator.tail.records"] == 7
    assert set(cfg) == {*ROUND_KAFKA_CONFIGS, *ROUND_EMULATOR_SETTINGS, *ROUND_DERIVED}
    assert rules_of(cfg) is cfg.rules and not rules_of(cfg).alter_isr
    with pytest.raises(KeyError, match="replica.fetch.min.bytes"):
        cfg["replica.fetch.min.bytes"]  # a config no round reads is not there (the driver's dict had it)
    with pytest.raises(AttributeError):
        cfg.round_ms = 5  # frozen


def test_protocol_functions_read_it_like_a_dict():
    cfg = _cfg(quota={"alter_dirs": {1: 2000}})
    plain = {"quota": {"alter_dirs": {1: 2000}}, "round_ms": 100}
    assert alter_log_dirs.round_budget(cfg, 1) == alter_log_dirs.round_budget(plain, 1) == 200
    assert alter_log_dirs.round_budget(cfg, 2) is None  # no finite rate for broker 2
    assert alter_log_dirs.thread_count(cfg, ["d0", "d1"]) == 2  # num.replica.alter.log.dirs.threads: the dirs
