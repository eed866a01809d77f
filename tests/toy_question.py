"""A toy what-if question, registered as a plugin would: `--leaders-per-broker` (how many partitions each
broker leads in the snapshot, prediction only). The whole question is this file: its flag, when it is asked
and its answer (tests/test_whatif_questions.py runs it through the CLI)."""

from __future__ import annotations

from sparkkafka import whatif as W
from sparkkafka.errors import ScenarioError
from sparkkafka.whatif_questions import Question, register, snapshot_scenario


def flags(parser) -> None:
    parser.add_argument("--leaders-per-broker", action="store_true", help="partitions each broker leads")


def answer(args, out, spark) -> int:
    if args.lose_broker or args.lose_rack or args.lose_dir:
        raise ScenarioError("--leaders-per-broker", True, "is asked alone (not with --lose-*)")
    _, sc = snapshot_scenario(args)
    leaders = W.partitions_frame(sc)["leader"].value_counts()
    out("Leaders per broker:\n")
    for b in sc.brokers:
        out(f"  broker {b}: {int(leaders.get(b, 0))}\n")
    return 0


QUESTION = Question("leaders-per-broker", flags, lambda a: a.leaders_per_broker, answer, precedence=3)


def install() -> Question:
    return register(QUESTION)
