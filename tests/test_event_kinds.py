"""Timeline event kinds as one registration each (sparkkafka/scenario/event_kind.py, events.py): the docs
table is the registry's, and a toy kind added in one file (tests/toy_event.py) is validated, checked in the
timeline's sequence, run and described through the CLI like Kafka's own kinds."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
import toy_event
import yaml

from sparkkafka.cli import main
from sparkkafka.scenario.event_kind import KINDS, docs_table, register, unregister

ROOT = Path(__file__).resolve().parents[1]


def test_the_docs_hold_the_registrys_events_table():
    doc = (ROOT / "docs" / "scenario-format.md").read_text()
    assert docs_table() in doc, "regenerate docs/scenario-format.md's events table with event_kind.docs_table()"
    assert docs_table().count("\n") == 1 + len(KINDS)


def test_a_kind_is_registered_once():
    with pytest.raises(ValueError, match="event kind 'crash' is already registered"):
        register(KINDS["crash"])


@pytest.fixture
def toy():
    kind = toy_event.install()
    yield kind
    unregister(kind.name)


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def _scenario(tmp_path: Path, *events: dict) -> Path:
    sc = {"name": "toy", "cluster": {"brokers": [1, 2, 3], "config": {"zookeeper.session.timeout.ms": 3000}},
          "topics": [{"name": "t", "partitions": 2, "replication_factor": 3}],
          "timeline": [{"at": 0, "produce": {"topic": "t", "records": 20, "acks": "all"}}, *events],
          "run": {"until_ms": 8000}}
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(sc))
    return path


def test_a_toy_kind_runs_through_the_cli_as_kafkas_own_do(toy, tmp_path):
    assert "| `crash_all_but: {keep}` | every broker but `keep` crashes at once |" in docs_table()
    sc = _scenario(tmp_path, {"at": 1000, "crash_all_but": {"keep": 1}})
    code, _, err = _cli("run", str(sc), "--out", str(tmp_path / "run"), "--engine", "local", "--no-progress")
    assert code == 0, err
    code, described, err = _cli("describe", str(tmp_path / "run"))
    assert code == 0, err
    parts = [line for line in described.splitlines() if "\tPartition: " in line]
    assert len(parts) == 2
    for line in parts:  # brokers 2 and 3 expired: broker 1 leads alone (clean: it was in every ISR)
        assert "\tLeader: 1\t" in line and line.endswith("\tIsr: 1"), line


def test_a_toy_kinds_bad_value_and_sequence_are_refused_naming_the_field(toy, tmp_path):
    code, _, err = _cli("run", str(_scenario(tmp_path, {"at": 1000, "crash_all_but": {"keep": 9}})),
                        "--out", str(tmp_path / "a"), "--engine", "local")
    assert code == 2 and "timeline[1].crash_all_but.keep" in err and "unknown broker 9" in err, err
    code, _, err = _cli("run", str(_scenario(tmp_path, {"at": 500, "crash": 2},
                                             {"at": 1000, "crash_all_but": {"keep": 1}})),
                        "--out", str(tmp_path / "b"), "--engine", "local")
    assert code == 2 and "timeline[2].crash_all_but.keep" in err and "broker 2 is already down" in err, err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_without_the_toy_its_key_is_an_unknown_event(tmp_path):
    code, _, err = _cli("run", str(_scenario(tmp_path, {"at": 1000, "crash_all_but": {"keep": 1}})),
                        "--out", str(tmp_path / "a"), "--engine", "local")
    assert code == 2 and "timeline[1].crash_all_but: unknown key 'crash_all_but'; expected one of: at, round, " \
                         "produce, crash, restart" in err, err
