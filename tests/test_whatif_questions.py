"""`sparkkafka whatif`'s questions as one registration each (sparkkafka/whatif_questions.py): the CLI asks
the registry, and a toy question added in one file (tests/toy_question.py) is parsed, dispatched and
answered through the CLI like Kafka's."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
import toy_question

from sparkkafka.cli import main
from sparkkafka.whatif_questions import QUESTIONS, register, unregister

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "snapshots" / "sample"


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), contextlib.suppress(SystemExit):
        code = main(list(args))
        return code, out.getvalue(), err.getvalue()
    return 2, out.getvalue(), err.getvalue()  # argparse refused the flags


@pytest.fixture
def toy():
    q = toy_question.install()
    yield q
    unregister(q.name)


def test_kafkas_questions_are_registered_once():
    assert list(QUESTIONS) == ["loss", "balance-dirs", "reassign"]
    with pytest.raises(ValueError, match="what-if question 'loss' is already registered"):
        register(QUESTIONS["loss"])


def test_a_toy_question_is_answered_through_the_cli(toy):
    code, out, err = _cli("whatif", str(SAMPLE), "--leaders-per-broker")
    assert code == 0, err
    described = (SAMPLE / "topics-describe.txt").read_text()
    want = {}
    for b in re.findall(r"\tLeader: (-?\d+)\t", described):
        want[int(b)] = want.get(int(b), 0) + 1
    got = {int(b): int(n) for b, n in re.findall(r"^  broker (\d+): (\d+)$", out, re.M)}
    assert got == {b: want.get(b, 0) for b in got} and len(got) == 12 and sum(got.values()) == 302


def test_a_toy_questions_conflict_is_refused_naming_its_flag(toy):
    code, _, err = _cli("whatif", str(SAMPLE), "--leaders-per-broker", "--lose-broker", "1")
    assert code == 2 and "--leaders-per-broker: is asked alone (not with --lose-*)" in err, err


def test_without_the_toy_its_flag_is_unknown():
    code, _, err = _cli("whatif", str(SAMPLE), "--leaders-per-broker")
    assert code == 2 and "unrecognized arguments: --leaders-per-broker" in err, err
