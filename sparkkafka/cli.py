"""`sparkkafka` command line (docs/cli.md).

Exit codes: 0 done, 2 bad input (the message names the field and value), 1 anything else.

The operator verbs (reassign, leader-election, log-dirs, state-change-log) take a run directory as the
cluster and Kafka 2.8's flags (``--bootstrap-server`` is accepted and ignored); their usage errors print
Kafka's message alone on stderr (exit 2), and the tools' own failures (an invalid reassignment plan, a
refused --execute, elections that failed) print what Kafka prints where it prints it, with Kafka's exit
code 1. tools/operator.py does the work; acting verbs save the run directory.

Verbs that change a run directory (run, reassign --execute / --cancel / --verify, leader-election) hold
its lock (run_lock.py) from before they read it until they exit, and are refused (exit 2, naming the
holder) while another process holds it; the read-only verbs take no lock.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from . import run_lock, whatif_questions
from .errors import ScenarioError
from .protocol.config import ENGINES, EmulatorSettings

FILTERS = ("under_replicated_partitions", "unavailable_partitions", "under_min_isr_partitions",
           "at_min_isr_partitions")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own exit code is also 2
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="sparkkafka", description="Emulate Apache Kafka's replication layer on Spark.")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run a scenario (or continue a run directory) and print the topic "
                                   "description and summary")
    r.add_argument("scenario", help="a scenario file, or a run directory (with run.json) to continue")
    r.add_argument("--until-ms", type=int, help="run until this emulated time (default: the scenario's end)")
    r.add_argument("--out", help="run directory (default runs/<scenario name>)")
    r.add_argument("--master", help="Spark master URL (default local[2]; sc://host:port for Spark Connect)")
    r.add_argument("--overwrite", action="store_true", help="replace an existing run in --out")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.add_argument("--engine", choices=ENGINES,
                   help="override cluster.emulator.engine: rounds (one Spark job per round), resident (many "
                        "rounds per job) or local (every round in this process, no Spark); all give the same tables")
    d = sub.add_parser("describe", help="kafka-topics --describe over a run directory")
    d.add_argument("run")
    for f in FILTERS:
        d.add_argument("--" + f.replace("_", "-"), action="store_true", dest=f)
    v = sub.add_parser("verify-replicas", help="kafka-replica-verification over a run directory's final state")
    v.add_argument("run")
    v.add_argument("--topic-white-list", default=".*", help="regex of the topics to verify (default .*)")
    v.add_argument("--topics-include", help="the same, by its Kafka 3.0+ name; wins over --topic-white-list")
    v.add_argument("--report-interval-ms", type=int, default=30000,
                   help="accepted for Kafka's flags; the one pass over the final state reports once")
    _tool_parsers(sub)
    rp = sub.add_parser("report", help="plots of a run directory: RUN/report/index.html (self-contained) and "
                                       "one PNG per plot; prints their paths")
    rp.add_argument("run")
    rp.add_argument("--out", help="where to write them (default RUN/report)")
    rp.add_argument("--before-ms", type=int,
                    help="the 'before' of the disk-usage plot (default: the first reassignment's start, else "
                         "the first metadata change)")
    i = sub.add_parser("import", help="build a scenario from a real cluster's kafka-topics --describe and "
                                      "kafka-log-dirs --describe output (docs/scenario-format.md)")
    i.add_argument("topics_describe", metavar="TOPICS_DESCRIBE", help="kafka-topics.sh --describe output (2.x/3.x)")
    i.add_argument("--log-dirs", help="kafka-log-dirs.sh --describe output: each replica's dir and size, future logs")
    i.add_argument("--racks", help="broker racks, one 'BROKER_ID=RACK' a line")
    i.add_argument("--configs", action="append", default=[],
                   help="server.properties or kafka-configs --describe output (repeatable)")
    i.add_argument("--rates", help="per-topic produce rates, CSV topic,records_per_sec[,value_bytes[,acks]]")
    i.add_argument("--name", help="scenario name (default: the --out file's stem, else 'imported')")
    i.add_argument("--seed", type=int, default=0)
    i.add_argument("--record-bytes", type=int,
                   help="bytes per record the log sizes are expanded to (cluster.emulator.initial.record.bytes; "
                        "default 1048576); larger means fewer log rows")
    i.add_argument("--duration-ms", type=int, default=60000, help="run length and produce duration (default 60000)")
    i.add_argument("--out", help="write the scenario YAML here (default: print it)")
    w = sub.add_parser("whatif", help="what-if questions over a cluster snapshot directory: lose brokers, a rack or a "
                                      "log dir; unclean election candidates; a KIP-113 dir balancing plan (docs/whatif.md)")
    whatif_questions.add_whatif_arguments(w)
    _campaign_parsers(sub)
    _replay_parser(sub)
    b = sub.add_parser("bench", help="benchmarks: round cost against the engine floor, the reference "
                                           "scenario, long runs, an idle hour, the exchange (docs/benchmarks.md)")
    b.add_argument("--brokers", help="the round-cost table's broker counts (default 3,12,48)")
    b.add_argument("--partitions", help="the round-cost table's partition counts (default 100,1000,10000)")
    b.add_argument("--rounds", type=int, help="rounds measured: round-cost table 10, --long-run 10000, --exchange 200")
    b.add_argument("--master")
    b.add_argument("--markdown", help="also write the table to this file")
    b.add_argument("--reference", action="store_true",
                   help="run the reference scenario (12 brokers x 3 dirs, 3,000 partitions RF 3, "
                        "acks=all on every partition, a crash at 20 s and restart at 40 s, 60 emulated s)")
    b.add_argument("--scale", help="with --reference: BROKERS,PARTITIONS (default 12,3000); with --long-run: "
                                   "(default 3,6); with --idle-hour: (default 3,30); with --operator: (default "
                                   "200,100000)")
    b.add_argument("--seconds", type=float, help="with --reference: emulated seconds (default 60); with --operator: "
                                                 "the emulated seconds of the move run (default 60)")
    b.add_argument("--engine",
                   help="with --reference and --idle-hour: the engines to run side by side, comma-separated (default "
                        "rounds,resident); with --long-run and --operator: the one engine (default resident)")
    b.add_argument("--repeat", type=int,
                   help="with --reference: run the engines this many times in turn, in one Spark session (default "
                        "1); the table has a row per run and, from 2, each engine's median")
    b.add_argument("--no-progress", action="store_true", help="no progress bar")
    b.add_argument("--long-run", action="store_true",
                   help="a long run on the resident engine (--rounds, default 10000; --scale): per-round wall "
                        "and CPU time around round 100 against the last rounds, by phase, and files per table")
    b.add_argument("--idle-hour", action="store_true",
                   help="an idle emulated hour (a burst of one record per partition, then nothing): rounds of work "
                        "and wall time with the idle jump (--scale, --engine)")
    b.add_argument("--operator", action="store_true",
                   help="an operator's questions on a generated snapshot (--scale, default 200 brokers, 100,000 "
                        "partitions): its import, whatif --lose-rack end to end, and a reassignment of a tenth of "
                        "the partitions under a throttle predicted to take two hours (its first --seconds), wall "
                        "time per phase")
    b.add_argument("--exchange", action="store_true",
                   help="the resident engine's per-round message exchange between barrier tasks (--rounds, default 200)")
    return p


def _campaign_parsers(sub) -> None:
    """`campaign` and `explore` (campaign.py, docs/campaigns.md)."""
    from .scenario.faults import KINDS

    c = sub.add_parser("campaign", help="run N seeded fault schedules of a scenario, each cluster inside one Spark "
                                        "task; OUT/tables/campaign, OUT/summary.json, OUT/failing/*.yaml")
    c.add_argument("scenario", help="the base scenario: cluster, topics, workload (conf/campaigns/safe.yaml)")
    c.add_argument("--schedules", type=int, default=100, help="how many schedules to draw (default 100)")
    c.add_argument("--seed", type=int, default=0, help="schedule i of seed S is the same whatever N is")
    c.add_argument("--first", type=int, default=0, help="run schedules FIRST .. FIRST+N-1 (a long campaign in parts)")
    c.add_argument("--max-faults", type=int, default=3, help="faults per schedule: 1 to this many (default 3)")
    c.add_argument("--kinds", default=",".join(KINDS), help=f"fault kinds to draw from (default {','.join(KINDS)})")
    c.add_argument("--window", help="FROM:UNTIL emulated ms the faults start in (default: while the workload runs)")
    c.add_argument("--max-down-ms", type=int, default=1500, help="longest crash, pause or isolation (default 1500)")
    c.add_argument("--max-crashed", type=int,
                   help="at most this many brokers down at once (crash, power loss); default: no limit")
    c.add_argument("--settle-ms", type=int, default=3000,
                   help="emulated ms the run goes on after every broker is back (default 3000)")
    e = sub.add_parser("explore", help="every sequence of crash / power loss / restart steps up to a depth at fixed "
                                       "slots, per inter.broker.protocol.version: which invariants break")
    e.add_argument("scenario", help="the base scenario (conf/campaigns/explore.yaml)")
    e.add_argument("--depth", type=int, default=3, help="the most fault steps in a sequence (default 3)")
    e.add_argument("--slots", default="3000,3100,3500", help="emulated ms of step 1, 2, ... (default 3000,3100,3500)")
    e.add_argument("--versions", default="0.10,2.8", help="inter.broker.protocol.versions to explore (default 0.10,2.8)")
    e.add_argument("--no-power-loss", action="store_true", help="crash and restart steps only")
    e.add_argument("--failover", action="store_true", help="a controller failover step too")
    e.add_argument("--settle-ms", type=int, default=3000, help="emulated ms after every broker is back (default 3000)")
    for x in (c, e):
        x.add_argument("--out", help="output directory (default runs/campaign-<name> / runs/explore-<name>)")
        x.add_argument("--set", action="append", default=[], metavar="CONFIG=VALUE",
                       help="override a broker config of the base scenario (repeatable), e.g. "
                            "inter.broker.protocol.version=0.10")
        x.add_argument("--master", help="Spark master URL (default local[2])")
        x.add_argument("--tasks", type=int, help="task slots to spread schedules over (default: the cluster's)")
        x.add_argument("--in-process", action="store_true", help="no Spark: run the schedules one after another here")


def _replay_parser(sub) -> None:
    """`replay` (realkafka/replay.py, docs/replay.md)."""
    x = sub.add_parser("replay", help="run a scenario on a real Kafka cluster (local JVMs) and on the emulator and "
                                      "compare each partition's leader, epoch and ISR over time; exit 0 within "
                                      "the tolerance, 1 on a mismatch (docs/replay.md)")
    x.add_argument("scenario", help="a scenario file")
    x.add_argument("--on-kafka", required=True, metavar="VERSION", help="the real Kafka to run it on: 2.8.2")
    x.add_argument("--out", help="output directory: DIR/emulator, DIR/kafka, DIR/comparison.json "
                                 "(default runs/replay-<scenario name>)")
    x.add_argument("--overwrite", action="store_true", help="replace an earlier replay in --out")
    x.add_argument("--master", help="Spark master URL of the emulator's run (default local[2])")
    x.add_argument("--engine", choices=ENGINES, help="override cluster.emulator.engine for the emulator's run")


REASSIGN_ACTIONS = ("generate", "execute", "verify", "cancel", "list")
# ReassignPartitionsCommand.validateAndParseArgs (2.8): what each action requires and permits
REASSIGN_REQUIRED = {"verify": ("reassignment-json-file",), "generate": ("topics-to-move-json-file", "broker-list"),
                     "execute": ("reassignment-json-file",), "cancel": ("reassignment-json-file",), "list": ()}
REASSIGN_PERMITTED = {
    "verify": ("bootstrap-server", "command-config", "preserve-throttles"),
    "generate": ("bootstrap-server", "broker-list", "command-config", "disable-rack-aware"),
    "execute": ("additional", "bootstrap-server", "command-config", "throttle", "replica-alter-log-dirs-throttle",
                "timeout"),
    "cancel": ("bootstrap-server", "command-config", "preserve-throttles", "timeout"),
    "list": ("bootstrap-server", "command-config"),
}


class _ToolUsage(ScenarioError):
    """A Kafka tool's own usage error (CommandLineUtils.printUsageAndDie): its message alone on stderr."""


def _tool_parsers(sub) -> None:
    g = sub.add_parser("reassign", help="kafka-reassign-partitions.sh (Kafka 2.8) against a run directory",
                       allow_abbrev=False)
    g.add_argument("run", help="the run directory: the cluster the tool talks to")
    for a in REASSIGN_ACTIONS:
        g.add_argument("--" + a, action="store_true")
    g.add_argument("--reassignment-json-file")
    g.add_argument("--topics-to-move-json-file")
    g.add_argument("--broker-list")
    g.add_argument("--throttle", type=int, default=-1, help="inter-broker throttle, B/s (default -1: none)")
    g.add_argument("--replica-alter-log-dirs-throttle", type=int, default=-1,
                   help="log-dir move throttle, B/s (default -1: none)")
    g.add_argument("--additional", action="store_true")
    g.add_argument("--preserve-throttles", action="store_true")
    g.add_argument("--disable-rack-aware", action="store_true")
    g.add_argument("--timeout", type=int, default=10000,
                   help="accepted; log-dir moves are requested at once (the run is not advanced)")
    _ignored(g, "--command-config")
    e = sub.add_parser("leader-election", help="kafka-leader-election.sh (Kafka 2.8) against a run directory")
    e.add_argument("run")
    e.add_argument("--election-type")
    e.add_argument("--topic")
    e.add_argument("--partition", type=int)
    e.add_argument("--all-topic-partitions", action="store_true")
    e.add_argument("--path-to-json-file")
    _ignored(e, "--admin.config")
    ld = sub.add_parser("log-dirs", help="kafka-log-dirs.sh --describe (Kafka 2.8) over a run directory")
    ld.add_argument("run")
    ld.add_argument("--describe", action="store_true")
    ld.add_argument("--topic-list")
    ld.add_argument("--broker-list")
    _ignored(ld, "--command-config")
    s = sub.add_parser("state-change-log", help="StateChangeLogMerger (Kafka 2.8) over a run's state_change_log")
    s.add_argument("run")
    s.add_argument("--topic")
    s.add_argument("--partitions")
    s.add_argument("--start-time")
    s.add_argument("--end-time")


def _ignored(p: argparse.ArgumentParser, config_flag: str) -> None:
    """Kafka's connection flags, accepted so Kafka command lines work unchanged: RUN is the cluster."""
    p.add_argument("--bootstrap-server", help="accepted and ignored: RUN is the cluster")
    p.add_argument(config_flag, dest=config_flag.lstrip("-").replace(".", "_").replace("-", "_"),
                   help="accepted and ignored")


def _given_options(argv: Sequence[str], after: str) -> list[str]:
    """Long options given on the command line after the verb, in order (jopt-simple's OptionSet.specs())."""
    out = []
    for tok in argv[list(argv).index(after) + 1:] if after in argv else argv:
        if tok.startswith("--") and len(tok) > 2:
            name = tok[2:].split("=", 1)[0]
            if name not in out:
                out.append(name)
    return out


def _check_reassign_args(args: argparse.Namespace) -> str:
    actions = [a for a in REASSIGN_ACTIONS if getattr(args, a)]
    if len(actions) != 1:
        raise _ToolUsage("action", actions, "Command must include exactly one action: "
                         + ", ".join("--" + a for a in REASSIGN_ACTIONS))
    action = actions[0]
    given = _given_options(args.argv, "reassign")
    for req in REASSIGN_REQUIRED[action]:
        if req not in given:
            raise _ToolUsage(req, None, f'Missing required argument "[{req}]"')
    for opt in given:
        if opt != action and opt not in REASSIGN_REQUIRED[action] and opt not in REASSIGN_PERMITTED[action]:
            raise _ToolUsage(opt, action, f'Option "[{opt}]" can\'t be used with action "[{action}]"')
    return action


def _is_run_dir(path: str) -> bool:
    return os.path.isdir(path) and os.path.exists(os.path.join(path, "run.json"))


def _require_run(path: str, check: bool = True) -> None:
    """A run directory (run.json), and whole for a reader (run_check.py) unless `check` is False: a writer
    checks it under its lock (_check_writable)."""
    if not _is_run_dir(path):
        raise ScenarioError("run", path, "is not a sparkkafka run directory (no run.json)")
    if check:
        from .run_check import check_run

        check_run(path)


def _check_writable(path: str) -> None:
    """A writer's check of the run directory, under its lock and before it loads or writes anything: a damaged
    run is refused (exit 2, naming the file) and left as it is."""
    from .run_check import check_run

    check_run(path, writes=True)


def _emit(out) -> int:
    if out.stdout:
        sys.stdout.write(out.stdout)
        sys.stdout.flush()
    if out.stderr:
        sys.stderr.write(out.stderr)
        sys.stderr.flush()
    return out.code


def _reassign(args: argparse.Namespace) -> int:
    """kafka-reassign-partitions.sh: usage errors as Kafka words them (exit 2, the contract's bad input);
    the tool's own failures (an invalid plan, a refusal) on stdout with exit 1, as Kafka's tool."""
    from .tools import operator as op

    action = _check_reassign_args(args)
    writes = action in ("execute", "cancel") or (action == "verify" and not args.preserve_throttles)
    _require_run(args.run, check=not writes)
    plan = topics = None
    if args.reassignment_json_file is not None and action != "generate":
        plan = op.read_text_file(args.reassignment_json_file, "--reassignment-json-file")
    if action == "generate":
        topics = op.read_text_file(args.topics_to_move_json_file, "--topics-to-move-json-file")
    with _writing(args.run, writes):
        if writes:
            _check_writable(args.run)
        run = op.Run.open(args.run, checked=True)  # the run directory's driver state: no Spark needed
        if action == "generate":
            out = op.reassign_generate(run, topics, args.broker_list, args.disable_rack_aware)
        elif action == "execute":
            out = op.reassign_execute(run, plan, args.additional, args.throttle,
                                      args.replica_alter_log_dirs_throttle)
        elif action == "verify":
            out = op.reassign_verify(run, plan, args.preserve_throttles)
        elif action == "cancel":
            out = op.reassign_cancel(run, plan, args.preserve_throttles)
        else:
            out = op.reassign_list(run)
    return _emit(out)


def _writing(run: str, writes: bool = True):
    """The run directory's lock (run_lock.py) for a verb that changes it; nothing for one that only reads."""
    import contextlib

    return run_lock.writing(run, "sparkkafka " + " ".join(sys.argv[1:])) if writes else contextlib.nullcontext()


def _leader_election(args: argparse.Namespace) -> int:
    from .tools import operator as op
    from .tools.leader_election import validate_election_args

    _require_run(args.run, check=False)
    try:  # the tool's option checks and JSON file, before the cluster is reopened
        validate_election_args(args.election_type, topic=args.topic, partition=args.partition,
                               all_topic_partitions=args.all_topic_partitions,
                               path_to_json_file=args.path_to_json_file)
    except OSError as e:
        raise ScenarioError("--path-to-json-file", args.path_to_json_file, f"cannot read the file: {e}") from None
    except ScenarioError as e:
        raise _ToolUsage(e.field, e.value, e.message) from None
    with _writing(args.run):
        _check_writable(args.run)
        out = op.leader_election_tool(op.Run.open(args.run, checked=True), args.election_type, args.topic, args.partition,
                                      args.all_topic_partitions, args.path_to_json_file)
    return _emit(out)


def _log_dirs(args: argparse.Namespace) -> int:
    from .tools import operator as op

    if not args.describe:
        raise _ToolUsage("--describe", None, "Missing required argument \"[describe]\"")
    _require_run(args.run)
    run = op.Run.open(args.run, checked=True)
    try:
        out = op.log_dirs_tool(run, args.topic_list, args.broker_list)
    except ScenarioError as e:
        raise _ToolUsage(e.field, e.value, e.message) from None
    return _emit(out)


def _state_change_log(args: argparse.Namespace) -> int:
    from .tools import operator as op

    _require_run(args.run)
    try:
        out = op.state_change_log_tool(args.run, args.topic, args.partitions, args.start_time, args.end_time)
    except ScenarioError as e:
        raise _ToolUsage(e.field, e.value, e.message) from None
    return _emit(out)


def _check_until(until_ms: int | None, run: str | None) -> None:
    """--until-ms: an emulated time from 0 to a week (run_dir.check_until_ms) and, continuing a run, not before
    the last round it has run."""
    if until_ms is None:
        return
    from .run_dir import RunDir, check_until_ms

    if run is None:
        check_until_ms("--until-ms", until_ms)
        return
    meta = RunDir(run).meta()
    reached = (int(meta.get("round", 0)) - 1) * int(meta.get("round_ms", 1))
    check_until_ms("--until-ms", until_ms, reached, f"run {run}", ", run.json")


def _run(args: argparse.Namespace) -> int:
    from .run_dir import require_out_dir, run_exists_error
    from .scenario import load_scenario

    _check_until(args.until_ms, None)
    if _is_run_dir(args.scenario):  # a run directory: continue it
        for flag in ("out", "overwrite"):
            if getattr(args, flag):
                raise ScenarioError("--" + flag, getattr(args, flag), "not used when continuing a run directory")
        sc, out = None, args.scenario
    else:
        if args.out is not None:
            require_out_dir(args.out, "--out")  # before the scenario is read, a directory made or Spark started
        sc = load_scenario(args.scenario)  # validate before any Spark job starts
        if args.engine:
            sc = sc.on_engine(args.engine)
        out = args.out or os.path.join("runs", sc.name)
        require_out_dir(out, "--out")
        if _is_run_dir(out) and not args.overwrite:
            raise run_exists_error(out, "--out", args.scenario)
        os.makedirs(out, exist_ok=True)
    with _writing(out):  # one writer per run directory, refused before Spark (or its imports) starts
        from .cluster import Cluster

        if sc is None:
            Cluster.require_complete(out)
            _check_writable(out)  # a damaged run is refused before anything reads or writes it
            _check_until(args.until_ms, out)
        ours = _no_session_yet()
        if sc is None:
            from .engine.session import get_spark

            c = Cluster.for_path(get_spark(args.master), out, checked=True)  # _check_writable, under the lock
            if args.engine and c.resumable:  # the rest of the run on the other engine: the same tables either way
                c.scenario = c.scenario.on_engine(args.engine)
        else:
            c = Cluster.from_scenario(sc, out=out, overwrite=args.overwrite, master=args.master)
        c.run(until_ms=args.until_ms, progress=not args.no_progress and sys.stderr.isatty())
    print("\n".join(c.describe()))
    print(json.dumps(c.summary(), indent=2, sort_keys=True), flush=True)
    if ours and not (args.master or os.environ.get("SPARK_REMOTE", "")).startswith("sc://"):
        from .engine.session import stop_spark

        stop_spark()  # a session we started: stopping it lets Python workers exit before the JVM does
    return 0


def _describe(args: argparse.Namespace) -> int:
    from .run_dir import RUN_FORMAT_VERSION, RunDir
    from .run_views import describe_run

    _require_run(args.run)
    rd = RunDir(args.run)
    # what the controller did since the last round (a reassign --execute) shows at once, as in Kafka
    uncommitted = rd.load().uncommitted_partition_state() if rd.format_version() == RUN_FORMAT_VERSION else []
    lines = describe_run(args.run, uncommitted, **{k.removesuffix("_partitions"): getattr(args, k) for k in FILTERS})
    if lines:
        print("\n".join(lines))
    return 0


def _verify_replicas(args: argparse.Namespace) -> int:
    """kafka-replica-verification.sh (ReplicaVerificationTool): exit 1 when two replicas' batch
    offsets differ, as Kafka's tool does; checksum mismatches are printed and exit 0."""
    from .tools.replica_verification import verify_run

    regex, name = ((args.topics_include, "topics-include") if args.topics_include is not None
                   else (args.topic_white_list, "topic-white-list"))
    _require_run(args.run)
    result = verify_run(args.run, regex, name)
    if result.lines:
        print("\n".join(result.lines), flush=True)
    if result.error:
        print(f"sparkkafka: {result.error}", file=sys.stderr)
    return result.exit_code


def _import(args: argparse.Namespace) -> int:
    """Build the scenario of a real cluster; on bad input nothing is written (exit 2)."""
    from pathlib import Path

    from .scenario.kafka_import import import_cluster

    name = args.name or (Path(args.out).stem if args.out else "imported")
    sc = import_cluster(args.topics_describe, args.log_dirs, racks=args.racks, configs=args.configs,
                        rates=args.rates, name=name, seed=args.seed, record_bytes=args.record_bytes,
                        duration_ms=args.duration_ms, out=args.out or "-")
    if args.out is not None:
        print(f"Wrote {args.out}: {len(sc['cluster']['brokers'])} brokers, {len(sc['topics'])} topics, "
              f"{sum(len(t['assignment']) for t in sc['topics'])} partitions")
    return 0


def _no_session_yet() -> bool:
    """Whether this process has no Spark yet (the command's session is then its own, stopped at its end): no
    SparkContext in it, and not in a pyspark shell. SparkSession.getActiveSession() alone is the JVM's
    thread-local session: a SparkContext already in the process is the surer sign that the session is another's
    (the test run's shared session was found stopped by some in-process command in two fresh-clone runs)."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if SparkContext._active_spark_context is not None or os.environ.get("PYSPARK_GATEWAY_PORT") is not None:
        return False
    return SparkSession.getActiveSession() is None


class _Spark:
    """The SparkSession an emulated what-if run needs, stopped at the end when this process started it; none
    on the in-process engine (``--engine local``: the run and its reading need no session)."""

    def __init__(self, master: str | None = None, engine: str | None = None) -> None:
        self.master = master
        self.local = engine == "local"

    def __enter__(self):
        if self.local:
            self.ours = False
            return None
        from .engine.session import get_spark

        self.ours = _no_session_yet()
        return get_spark(self.master)

    def __exit__(self, *exc) -> None:
        if self.ours and not (self.master or os.environ.get("SPARK_REMOTE", "")).startswith("sc://"):
            from .engine.session import stop_spark

            stop_spark()  # a session we started: stopping it lets Python workers exit before the JVM does


def _whatif(args: argparse.Namespace) -> int:
    """The question the flags ask (sparkkafka/whatif_questions.py), answered on stdout; exit 2 on bad input."""
    return whatif_questions.answer(args, lambda text: sys.stdout.write(text), lambda: _Spark(args.master, args.engine))


def _report(args: argparse.Namespace) -> int:
    from .reporting import report

    _require_run(args.run)
    written = report(args.run, out=args.out, before_ms=args.before_ms)
    print("\n".join(written.paths()), flush=True)
    return 0


def _campaign_base(args: argparse.Namespace) -> dict:
    """The base scenario as a mapping, validated, with --set overrides applied."""
    import yaml

    from .scenario.loader import parse_scenario

    try:
        with open(args.scenario) as f:
            base = yaml.safe_load(f)
    except OSError as e:
        raise ScenarioError("scenario", args.scenario, f"cannot be read: {e.strerror}") from None
    if not isinstance(base, dict) or not isinstance(base.get("cluster"), dict):
        raise ScenarioError("scenario", args.scenario, "is not a scenario mapping with a cluster")
    base.setdefault("name", os.path.splitext(os.path.basename(args.scenario))[0])
    for kv in args.set:
        key, eq, value = kv.partition("=")
        if not eq or not key:
            raise ScenarioError("--set", kv, "expected CONFIG=VALUE")
        # a version stays as typed: YAML would read 0.10 as the number 0.1
        base["cluster"].setdefault("config", {})[key] = value if key.endswith(".version") else yaml.safe_load(value)
    parse_scenario(dict(base), name=base["name"], base_dir=os.path.dirname(os.path.abspath(args.scenario)))
    return base


def _ints(text: str, flag: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ScenarioError(flag, text, "expected comma-separated integers") from None


def _campaign(args: argparse.Namespace) -> int:
    from . import campaign as C
    from .scenario import faults

    base = _campaign_base(args)
    if args.schedules < 1:
        raise ScenarioError("--schedules", args.schedules, "must be >= 1")
    if args.first < 0:
        raise ScenarioError("--first", args.first, "must be >= 0")
    kw = {"max_faults": args.max_faults, "max_down_ms": args.max_down_ms, "settle_ms": args.settle_ms,
          "max_crashed": args.max_crashed,
          "kinds": tuple(k.strip() for k in args.kinds.split(",") if k.strip())}
    if args.window:
        w = _ints(args.window.replace(":", ","), "--window")
        if len(w) != 2:
            raise ScenarioError("--window", args.window, "expected FROM:UNTIL")
        round_ms = int(EmulatorSettings.of(base["cluster"].get("emulator")).round_ms)
        plan = faults.Plan(window_ms=(w[0], w[1]), round_ms=round_ms, **kw)
    else:
        plan = faults.default_plan(base, **kw)
    out = args.out or os.path.join("runs", f"campaign-{base['name']}")
    with _campaign_spark(args) as spark:
        s = C.campaign(spark, base, out, args.schedules, args.seed, plan, tasks=args.tasks, first=args.first)
    print(json.dumps({k: s[k] for k in ("schedules", "failing", "errors", "violations", "wall_s",
                                        "schedules_per_s")}, indent=2, sort_keys=True))
    print(f"Wrote {out}/summary.json, {out}/tables/campaign" + (f", {s['failing']} file(s) in {out}/failing"
                                                                 if s["failing"] else ""), flush=True)
    return 0


def _explore(args: argparse.Namespace) -> int:
    from . import campaign as C

    base = _campaign_base(args)
    slots = _ints(args.slots, "--slots")
    versions = [v.strip() for v in args.versions.split(",") if v.strip()]
    from .scenario.loader import parse_scenario

    for v in versions:  # an unknown version is refused before anything runs
        cfg = {**base["cluster"].get("config", {}), "inter.broker.protocol.version": v}
        parse_scenario({**base, "cluster": {**base["cluster"], "config": cfg}}, name=base["name"])
    out = args.out or os.path.join("runs", f"explore-{base['name']}")
    with _campaign_spark(args) as spark:
        r = C.explore(spark, base, out, args.depth, slots, versions, settle_ms=args.settle_ms,
                      power_loss=not args.no_power_loss, failover=args.failover, tasks=args.tasks)
    print(json.dumps(r, indent=2, sort_keys=True))
    print(f"Wrote {out}/exploration.json", flush=True)
    return 0


class _campaign_spark(_Spark):
    """The session of a campaign (None with --in-process)."""

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args.master)
        self.skip = args.in_process

    def __enter__(self):
        return None if self.skip else super().__enter__()

    def __exit__(self, *exc) -> None:
        if not self.skip:
            super().__exit__(*exc)


def _replay(args: argparse.Namespace) -> int:
    """Refuse bad input (version, events real Kafka cannot drive, a non-empty --out) before any directory or
    process, then the emulator's run through `_run` and the real cluster's (realkafka/replay.py)."""
    from .realkafka import jars
    from .realkafka import replay as R
    from .realkafka.timeline import check_supported
    from .scenario import load_scenario

    R.check_version(args.on_kafka)
    sc = load_scenario(args.scenario)
    check_supported(sc)
    out = args.out or os.path.join("runs", f"replay-{sc.name}")
    R.check_out(out, args.overwrite, args.scenario, args.on_kafka)
    jars.classpath(args.on_kafka)  # no java or mvn: said before anything is made
    if args.overwrite:
        R.clear_out(out)
    run_args = argparse.Namespace(scenario=args.scenario, until_ms=None, master=args.master, overwrite=False,
                                  no_progress=True, engine=args.engine)
    return R.replay(sc, out, args.on_kafka, args.engine or sc.emulator_settings.engine,
                    lambda emu_dir: _run(argparse.Namespace(**vars(run_args), out=emu_dir)))


def _bench(args: argparse.Namespace) -> int:
    from .bench import main as bench_main

    return bench_main(args)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    args.argv = argv
    try:
        if getattr(args, "master", None) is not None:  # before any command makes a directory or starts Spark
            from .engine.session import check_master

            check_master(args.master)
        return {"run": _run, "describe": _describe, "verify-replicas": _verify_replicas,
                "reassign": _reassign, "leader-election": _leader_election, "log-dirs": _log_dirs,
                "state-change-log": _state_change_log, "import": _import, "report": _report,
                "bench": _bench, "whatif": _whatif, "campaign": _campaign, "explore": _explore,
                "replay": _replay}[args.cmd](args)
    except _ToolUsage as e:
        print(e.message, file=sys.stderr)
        return 2
    except ScenarioError as e:
        print(f"sparkkafka: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - the contract's exit code 1 for anything else
        print(f"sparkkafka: {type(e).__name__}: {e}", file=sys.stderr)
        if os.environ.get("SPARKKAFKA_DEBUG"):
            raise
        return 1


def entry() -> None:
    """The ``sparkkafka`` console script: main(), then leave at once with its exit code.

    Native libraries keep threads past main(): delta-rs' and Arrow's thread pools, Py4J's callback
    server. At interpreter shutdown their C++ destructors can run while such a thread is still
    joinable, and the process aborts with SIGABRT (``terminate called without an active exception``,
    https://github.com/delta-io/delta-rs/issues/2184) after the command has done its work. Everything a
    command writes is flushed and closed by then (Delta commits and run files are written and fsynced before
    main returns), so the console script flushes stdout and stderr and ends with ``os._exit``: no finalizer
    runs that could turn a finished command into an abort. ``main`` itself returns normally for in-process
    callers."""
    try:
        code = main()
    except SystemExit as e:  # argparse's usage errors and --help
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (sparkkafka ... | head): nothing left to say
            pass
    os._exit(code)


if __name__ == "__main__":
    entry()
