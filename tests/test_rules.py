"""protocol/rules.py: the version rules table (one frozen Rules object per profile). No Spark."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import pytest

from sparkkafka.errors import ScenarioError
from sparkkafka.protocol.config import PROFILES, broker_config, version_defaults
from sparkkafka.protocol.rules import FLAGS, Rules, first_profile, format_table, rules_for, table

# Each boolean flag's first profile with the value True, or (for flags that end) with False.
TURNS_ON = {
    "hw_counts_caught_up_followers": "0.10",  # KAFKA-4485
    "leader_epoch_cache": "0.11",  # KIP-101
    "leader_epoch_exchange": "0.11",
    "alter_replica_log_dirs": "0.11",  # KIP-113 (1.1)
    "epoch_truncation": "2.0",  # KIP-279
    "current_leader_epoch": "2.1",  # KIP-320
    "epoch_entry_on_become_leader": "2.1",  # KAFKA-7415
    "restart_fetcher_on_new_epoch": "2.1",  # KAFKA-7164
    "isr_expand_needs_epoch_start": "2.1",  # KAFKA-7128
    "isr_equal_leo_in_sync": "2.1",  # KAFKA-7152
    "alter_isr": "2.7",  # KIP-497
    "fetch_divergence": "2.8",  # KAFKA-10554
    "default_delete_topic": "0.11",  # KIP-162 (1.0)
}
TURNS_OFF = {
    "isr_lag_by_messages": "0.10",
    "truncate_to_hw": "0.11",  # KIP-101
    "halt_on_log_dir_failure": "0.11",  # KIP-112 (IBP 1.0)
    "halt_on_out_of_range_truncation": "2.1",  # KAFKA-7414
    "default_unclean_leader_election": "0.11",  # KIP-106
}
INTS = {
    "isr_check_period_divisor": (1, "0.10", 2),
    "default_replica_lag_time_max_ms": (10000, "2.1", 30000),
    "default_zookeeper_session_timeout_ms": (6000, "2.1", 18000),
}


def test_every_flag_is_listed_here():
    assert set(FLAGS) == set(TURNS_ON) | set(TURNS_OFF) | set(INTS)


@pytest.mark.parametrize("flag, since", [*TURNS_ON.items(), *TURNS_OFF.items()])
def test_boolean_flags_change_once_at_their_version(flag, since):
    on = flag in TURNS_ON
    at = PROFILES.index(since)
    assert [getattr(rules_for(p), flag) for p in PROFILES] == [(i >= at) == on for i in range(len(PROFILES))]
    assert first_profile(flag) == since


@pytest.mark.parametrize("flag, spec", INTS.items())
def test_int_flags(flag, spec):
    before, since, after = spec
    at = PROFILES.index(since)
    assert [getattr(rules_for(p), flag) for p in PROFILES] == [after if i >= at else before for i in range(len(PROFILES))]


def test_examples_from_the_issue():
    assert rules_for("0.10").truncate_to_hw is True
    assert rules_for("0.11").truncate_to_hw is False
    assert rules_for("0.11").leader_epoch_exchange and not rules_for("0.11").epoch_truncation
    assert rules_for("2.1").isr_equal_leo_in_sync and not rules_for("2.0").isr_equal_leo_in_sync
    assert rules_for("2.7").alter_isr and not rules_for("2.7").fetch_divergence
    assert rules_for("2.8").fetch_divergence


@pytest.mark.parametrize("version, profile", [("2.8", "2.8"), ("2.7-IV2", "2.7"), ("0.10.2", "0.10"), ("1.1", "0.11"),
                                              ("2.5", "2.1"), ("0.9.0", "0.8"), ("2.8-IV1", "2.8")])
def test_versions_map_to_one_shared_instance_per_profile(version, profile):
    r = rules_for(version)
    assert r.profile == profile
    assert r is rules_for(profile)
    assert rules_for(r) is r


def test_frozen_hashable_picklable():
    r = rules_for("2.1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.alter_isr = True  # type: ignore[misc]
    assert hash(r) == hash(rules_for("2.1"))
    assert len({rules_for(p) for p in PROFILES}) == len(PROFILES)
    back = pickle.loads(pickle.dumps(r))
    assert back == r and hash(back) == hash(r) and isinstance(back, Rules)


@pytest.mark.parametrize("bad", ["3.0", "0.7", "banana", "", 0.1, True, None])
def test_unknown_versions_are_rejected_like_the_loader(bad):
    with pytest.raises(ScenarioError, match="unknown inter.broker.protocol.version") as e:
        rules_for(bad)
    assert e.value.field == "inter.broker.protocol.version"
    assert "0.8, 0.10, 0.11, 2.0, 2.1, 2.7, 2.8" in str(e.value)


def test_version_defaults_come_from_the_table():
    assert version_defaults("0.8") == {"unclean.leader.election.enable": True, "delete.topic.enable": False,
                                       "replica.lag.time.max.ms": 10000, "zookeeper.session.timeout.ms": 6000}
    assert version_defaults("0.11") == {"replica.lag.time.max.ms": 10000, "zookeeper.session.timeout.ms": 6000}
    assert version_defaults("2.1") == {}
    assert broker_config({"inter.broker.protocol.version": "0.10"})["replica.lag.time.max.ms"] == 10000


def test_table_and_format_table():
    t = table()
    assert list(t) == list(FLAGS)
    assert t["truncate_to_hw"] == {p: p in ("0.8", "0.10") for p in PROFILES}
    text = format_table()
    lines = text.splitlines()
    assert lines[0] == "| flag | what | changed by | " + " | ".join(PROFILES) + " |"
    assert len(lines) == 2 + len(FLAGS)
    assert ("| `alter_isr` | ISR changes via AlterIsr to the controller | KIP-497, IBP 2.7-IV2 "
            "| - | - | - | - | - | yes | yes |") in lines


def test_docs_hold_the_current_table():
    doc = (Path(__file__).resolve().parents[1] / "docs" / "versions.md").read_text()
    assert format_table() in doc, "regenerate docs/versions.md's table with rules.format_table()"
