"""`sparkkafka` command line (contract section 4).

Exit codes: 0 done, 2 bad input (the message names the field and value), 1 anything else.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from .errors import ScenarioError

FILTERS = ("under_replicated_partitions", "unavailable_partitions", "under_min_isr_partitions",
           "at_min_isr_partitions")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own exit code is also 2
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="sparkkafka", description="Emulate Apache Kafka's replication layer on Spark.")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run a scenario and print the topic description and summary")
    r.add_argument("scenario")
    r.add_argument("--out", help="run directory (default runs/<scenario name>)")
    r.add_argument("--master", help="Spark master URL (default local[2]; sc://host:port for Spark Connect)")
    r.add_argument("--overwrite", action="store_true", help="replace an existing run in --out")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
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
    b = sub.add_parser("bench", help="round cost against the engine floor (docs/benchmarks.md)")
    b.add_argument("--brokers", default="3,12,48")
    b.add_argument("--partitions", default="100,1000,10000")
    b.add_argument("--rounds", type=int, default=10)
    b.add_argument("--master")
    b.add_argument("--markdown", help="also write the table to this file")
    return p


def _run(args: argparse.Namespace) -> int:
    from pyspark.sql import SparkSession

    from .cluster import Cluster
    from .scenario import load_scenario

    sc = load_scenario(args.scenario)  # validate before any Spark job starts
    ours = SparkSession.getActiveSession() is None and os.environ.get("PYSPARK_GATEWAY_PORT") is None
    c = Cluster.from_scenario(sc, out=args.out, overwrite=args.overwrite, master=args.master)
    c.run(progress=not args.no_progress and sys.stderr.isatty())
    print("\n".join(c.describe()))
    print(json.dumps(c.summary(), indent=2, sort_keys=True), flush=True)
    if ours and not (args.master or os.environ.get("SPARK_REMOTE", "")).startswith("sc://"):
        from .engine.session import stop_spark

        stop_spark()  # a session we started: stopping it lets Python workers exit before the JVM does
    return 0


def _describe(args: argparse.Namespace) -> int:
    from .cluster import describe_run

    if not os.path.exists(os.path.join(args.run, "run.json")):
        raise ScenarioError("run", args.run, "is not a sparkkafka run directory (no run.json)")
    lines = describe_run(args.run, **{k.removesuffix("_partitions"): getattr(args, k) for k in FILTERS})
    if lines:
        print("\n".join(lines))
    return 0


def _verify_replicas(args: argparse.Namespace) -> int:
    """kafka-replica-verification.sh (ReplicaVerificationTool): exit 1 when two replicas' batch
    offsets differ, as Kafka's tool does; checksum mismatches are printed and exit 0."""
    from .tools.replica_verification import verify_run

    regex, name = ((args.topics_include, "topics-include") if args.topics_include is not None
                   else (args.topic_white_list, "topic-white-list"))
    result = verify_run(args.run, regex, name)
    if result.lines:
        print("\n".join(result.lines), flush=True)
    if result.error:
        print(f"sparkkafka: {result.error}", file=sys.stderr)
    return result.exit_code


def _bench(args: argparse.Namespace) -> int:
    from .bench import main as bench_main

    return bench_main(args)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return {"run": _run, "describe": _describe, "verify-replicas": _verify_replicas,
                "bench": _bench}[args.cmd](args)
    except ScenarioError as e:
        print(f"sparkkafka: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - the contract's exit code 1 for anything else
        print(f"sparkkafka: {type(e).__name__}: {e}", file=sys.stderr)
        if os.environ.get("SPARKKAFKA_DEBUG"):
            raise
        return 1


if __name__ == "__main__":
    sys.exit(main())
