"""`sparkkafka whatif`'s questions, each registered once: the flags that ask it, whether the command line
asks it, and its answer (the prediction from the snapshot, then, unless `--no-emulate`, the emulated run that
confirms it; sparkkafka/whatif.py computes both). The CLI only parses, dispatches and prints: a new question
is one more `register(Question(...))` (tests/toy_question.py is one in one file).

Kafka's questions: the loss of brokers, a rack or a log dir (`--lose-*`, `--unclean`; the default),
`--balance-dirs` (KIP-113 moves evening out each broker's dirs) and `--reassign PLAN --throttle T` (how long
a move takes); when flags of several are given, the last of these answers and refuses the others'.
Docs: docs/whatif.md.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ScenarioError

Out = Callable[[str], Any]  # where the answer's text goes (the CLI: sys.stdout.write)
SparkFor = Callable[[], AbstractContextManager]  # the session an emulated run needs (None on --engine local)


@dataclass(frozen=True)
class Question:
    """One what-if question: `add_arguments(parser)` adds its flags, `asked(args)` says whether a command line
    asks it, `answer(args, out, spark)` prints the answer through `out` and returns the exit code."""

    name: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    asked: Callable[[argparse.Namespace], bool]
    answer: Callable[[argparse.Namespace, Out, SparkFor], int]
    precedence: int = 0  # of two questions asked, the higher answers (its own check refuses the other's flags)


QUESTIONS: dict[str, Question] = {}
DEFAULT = "loss"  # answered when no question's flag is given (its own check names what is missing)


def register(q: Question) -> Question:
    if q.name in QUESTIONS:
        raise ValueError(f"what-if question {q.name!r} is already registered")
    QUESTIONS[q.name] = q
    return q


def unregister(name: str) -> None:
    del QUESTIONS[name]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for q in QUESTIONS.values():
        q.add_arguments(parser)


def add_whatif_arguments(w: argparse.ArgumentParser) -> None:
    """`sparkkafka whatif`'s arguments: the snapshot, each question's flags, the emulated run's."""
    from .protocol.config import ENGINES

    w.add_argument("snapshot", metavar="SNAPSHOT", help="a directory with topics-describe.txt[, log-dirs.txt, "
                                                        "racks.txt, server.properties, rates.csv]")
    add_arguments(w)  # each question's flags
    w.add_argument("--no-emulate", action="store_true", help="the prediction only, no emulated run")
    w.add_argument("--format", choices=("text", "markdown", "csv"), default="text", help="the table's format")
    w.add_argument("--record-bytes", type=int, default=None,
                   help="record size the logs are expanded to in the emulated run (default 2^31-1: few rows; "
                        "with --reassign, what the throttle moves in one fetch cycle, at least 1 MiB)")
    w.add_argument("--at-ms", type=int, default=1000, help="when the loss (or the --reassign plan) happens in the "
                                                           "emulated run")
    w.add_argument("--settle-ms", type=int, default=2000,
                   help="emulated time after zookeeper.session.timeout.ms before the state is read")
    w.add_argument("--recover-ms", type=int, default=60000,
                   help="bound on the emulated recovery after the brokers return (0: skip)")
    w.add_argument("--run-dir", help="emulated run directory (default runs/whatif-<snapshot name>)")
    w.add_argument("--master", help="Spark master URL")
    w.add_argument("--engine", choices=ENGINES,
                   help="override cluster.emulator.engine for the emulated run: rounds (one Spark job per round), "
                        "resident (many rounds per job) or local (every round in this process, no Spark); all give "
                        "the same tables")


def answer(args: argparse.Namespace, out: Out, spark: SparkFor) -> int:
    """The first registered question the command line asks (else the default) answers; bad input raises
    ScenarioError naming the flag before a snapshot is read or Spark starts."""
    check_sizes(args)
    asked = sorted((q for q in QUESTIONS.values() if q.asked(args)), key=lambda q: -q.precedence)
    q = asked[0] if asked else QUESTIONS[DEFAULT]
    return q.answer(args, out, spark)


# ------------------------------------------------------------------ shared checks


def check_sizes(args: argparse.Namespace) -> None:
    """whatif's integers that size the emulated run, checked before a snapshot is read or Spark starts: times
    from 0 to a week (run_dir.check_emulated_ms, as a scenario's), a record size a log row holds."""
    from .run_dir import check_emulated_ms
    from .scenario.loader import INT_MAX

    for flag in ("at_ms", "settle_ms", "recover_ms", "until_ms"):
        if getattr(args, flag, None) is not None:
            check_emulated_ms("--" + flag.replace("_", "-"), getattr(args, flag))
    if getattr(args, "until_ms", None) is not None and args.until_ms < args.at_ms:
        raise ScenarioError("--until-ms", args.until_ms, f"is before --at-ms ({args.at_ms}), when the plan is "
                                                         "submitted: the run would not see the move")
    if args.record_bytes is not None and not 1 <= args.record_bytes <= INT_MAX:
        raise ScenarioError("--record-bytes", args.record_bytes, f"must be from 1 to {INT_MAX} (bytes of one "
                                                                 "record: the log table's value_bytes is an int32)")


def check_run_end(field: str, value: int, end: int, how: str) -> None:
    """ScenarioError naming `field` when the emulated run its flags make would end past MAX_TIME_MS."""
    from .scenario.loader import MAX_TIME_MS

    if end > MAX_TIME_MS:
        raise ScenarioError(field, value, f"the emulated run would end at {end} ms ({how}), past the "
                                          f"{MAX_TIME_MS} ms a run spans at most (a week)")


def snapshot_mapping(args: argparse.Namespace, record_bytes: int) -> dict:
    """The snapshot's scenario mapping for the emulated run, on ``--engine`` when given
    (cluster.emulator.engine, as ``run --engine`` overrides it)."""
    from . import whatif as W

    mapping = W.load_snapshot(args.snapshot, record_bytes=record_bytes)
    if args.engine:
        mapping["cluster"].setdefault("emulator", {})["engine"] = args.engine
    return mapping


def snapshot_scenario(args: argparse.Namespace, record_bytes: int | None = None):
    """(the mapping, its parsed scenario) at `record_bytes` (default: --record-bytes, else 2^31-1)."""
    from .scenario.loader import INT_MAX, parse_scenario

    mapping = snapshot_mapping(args, record_bytes or args.record_bytes or INT_MAX)
    return mapping, parse_scenario(mapping, name=mapping["name"])


# ------------------------------------------------------------------ the loss of brokers, a rack or a dir


def _loss_flags(w: argparse.ArgumentParser) -> None:
    w.add_argument("--lose-broker", type=int, action="append", default=[], metavar="B", help="repeatable")
    w.add_argument("--lose-rack", metavar="R")
    w.add_argument("--lose-dir", metavar="B:DIR")
    w.add_argument("--unclean", action="store_true", help="for each partition offline after the loss, each "
                                                          "candidate leader and the acked records it would lose")


def _loss_asked(args: argparse.Namespace) -> bool:
    return bool(args.lose_broker or args.lose_rack or args.lose_dir or args.unclean)


def loss_run(args: argparse.Namespace, spark: SparkFor) -> tuple[Any, Any, Any, Any]:
    """The loss the flags ask for, its prediction from the snapshot and, unless --no-emulate, its emulated
    run (whatif.Emulated, with the run's wall time per phase: wall_s): (loss, predicted, emulated or None, the
    snapshot's scenario). `whatif --lose-*` prints them; `sparkkafka bench --operator` times them."""
    from . import whatif as W

    mapping, sc = snapshot_scenario(args)
    parts = W.partitions_frame(sc)
    loss = W.resolve_loss(sc, args.lose_broker, args.lose_rack, args.lose_dir)
    if args.unclean and args.no_emulate:
        raise ScenarioError("--unclean", True, "needs the emulated run's logs (drop --no-emulate)")
    predicted = W.predict_loss(parts, loss)
    emulated = None
    if not args.no_emulate:
        recover = 0 if args.unclean else args.recover_ms
        end = W.loss_acted_ms(sc, loss, args.at_ms, args.settle_ms) + recover
        check_run_end("--at-ms/--settle-ms/--recover-ms", end, end, "the loss at --at-ms, the session timeout, "
                                                                    "--settle-ms, then at most --recover-ms")
        run_dir = args.run_dir or str(Path("runs") / f"whatif-{mapping['name']}")
        with spark() as session:
            emulated = W.emulate_loss(mapping, loss, spark=session, out=run_dir, at_ms=args.at_ms,
                                      settle_ms=args.settle_ms, recover_ms=recover)
    return loss, predicted, emulated, sc


def _loss(args: argparse.Namespace, out: Out, spark: SparkFor) -> int:
    from . import whatif as W

    loss, predicted, emulated, sc = loss_run(args, spark)
    out(W.loss_text(loss, predicted, emulated, W.rates_at_risk(sc, predicted)))
    out(W.table_text(W.compare(predicted, emulated.state if emulated else None), args.format))
    if args.unclean and emulated is not None:
        cands = W.unclean_of_run(emulated.run_dir, emulated.state)
        out("Unclean election candidates (acked records absent from each candidate's log):\n")
        for (t, p), g in cands.groupby(W.TP, sort=True):
            best = g[g["best"]]
            out(f"  {t}-{p}: " + (f"elect {int(best['candidate'].iloc[0])}, losing "
                                  f"{int(best['lost_if_elected'].iloc[0])} of {int(g['acked'].iloc[0])} acked"
                                  if len(best) else "no live replica to elect") + "\n")
        out(W.table_text(cands, args.format))
    return 0


# ------------------------------------------------------------------ KIP-113 dir balancing


def _balance_flags(w: argparse.ArgumentParser) -> None:
    w.add_argument("--balance-dirs", action="store_true", help="KIP-113 moves evening out each broker's dirs")
    w.add_argument("--plan", help="--balance-dirs: write the reassignment JSON here (default: print it)")


def _balance_dirs(args: argparse.Namespace, out: Out, spark: SparkFor) -> int:
    from . import whatif as W

    _, sc = snapshot_scenario(args)
    parts = W.partitions_frame(sc)
    if _loss_asked(args):
        raise ScenarioError("--balance-dirs", True, "is asked alone (not with --lose-* or --unclean)")
    if not any(parts["dirs"].map(len)):
        raise ScenarioError("--balance-dirs", args.snapshot, "the snapshot has no log-dirs.txt")
    moves = W.balance_dirs(parts, sc.log_dirs)
    before, after = W.dir_usage(parts), W.dir_usage(parts, moves, settled=True)
    out(f"{len(moves)} KIP-113 move(s); the widest gap between a broker's dirs: {W.widest_gap(before)} -> "
        f"{W.widest_gap(after)} bytes\n")
    out(W.table_text(W.moves_frame(moves), args.format))
    text = W.plan_json(parts, moves)
    if args.plan:
        Path(args.plan).write_text(text + "\n")
        out(f"Wrote {args.plan}: kafka-reassign-partitions --execute --reassignment-json-file {args.plan}\n")
    else:
        out(text + "\n")
    return 0


# ------------------------------------------------------------------ a throttled reassignment's ETA


def _reassign_flags(w: argparse.ArgumentParser) -> None:
    w.add_argument("--reassign", metavar="PLAN", help="a kafka-reassign-partitions --reassignment-json-file: its "
                                                      "predicted ETA per partition and total, then the emulated move")
    w.add_argument("--throttle", type=int, metavar="T", help="--reassign: the replication throttle in B/s "
                                                               "(kafka-reassign-partitions --throttle)")
    w.add_argument("--until-ms", type=int, help="--reassign: end of the emulated run (default: the plan's time "
                                                "plus 1.5 x the predicted completion plus 2 s)")


def _reassign(args: argparse.Namespace, out: Out, spark: SparkFor) -> int:
    """The predicted ETA per partition and total before the move, then the emulated move and predicted vs
    emulated completion side by side."""
    from . import whatif as W

    if args.reassign is None:
        raise ScenarioError("--throttle", args.throttle, "is asked with --reassign PLAN")
    if _loss_asked(args) or args.balance_dirs:
        raise ScenarioError("--reassign", args.reassign, "is asked alone (not with --lose-*, --unclean or "
                                                         "--balance-dirs)")
    if args.throttle is None or args.throttle <= 0:
        raise ScenarioError("--throttle", args.throttle, "expected a rate in bytes/s above 0")
    try:
        text = Path(args.reassign).read_text()
    except OSError as e:
        raise ScenarioError("--reassign", args.reassign, f"cannot read the plan: {e.strerror}") from None
    mapping, entries, predicted, record_bytes = W.reassign_prediction(args.snapshot, text, args.throttle,
                                                                      args.record_bytes)
    if args.engine:
        mapping["cluster"].setdefault("emulator", {})["engine"] = args.engine
    out(f"Predicted before the move (records of {record_bytes} bytes in the emulated logs):\n")
    out(W.reassign_text(predicted, args.throttle, None))
    out(W.table_text(W.reassign_table(predicted, None), args.format))
    if args.no_emulate:
        return 0
    p_total = W.total_ms(predicted["eta_ms"])
    until = args.until_ms or args.at_ms + (int(1.5 * p_total) + 2000 if p_total is not None else 60000)
    check_run_end("--throttle", args.throttle, until, "--at-ms plus 1.5 x the predicted move plus 2 s; give "
                                                      "--until-ms, a larger --throttle or --no-emulate")
    run_dir = args.run_dir or str(Path("runs") / f"whatif-{mapping['name']}-reassign")
    t0 = time.perf_counter()
    with spark() as session:
        emulated = W.emulate_reassign(mapping, entries, args.throttle, spark=session, out=run_dir,
                                      at_ms=args.at_ms, until_ms=until)
    out("\nPredicted vs emulated:\n")
    out(W.reassign_text(predicted, args.throttle, emulated, time.perf_counter() - t0))
    out(W.table_text(W.reassign_table(predicted, emulated), args.format))
    return 0


register(Question("loss", _loss_flags, _loss_asked, _loss))
register(Question("balance-dirs", _balance_flags, lambda a: a.balance_dirs, _balance_dirs, precedence=1))
register(Question("reassign", _reassign_flags, lambda a: a.reassign is not None or a.throttle is not None, _reassign,
                  precedence=2))
