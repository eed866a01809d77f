"""`sparkkafka bench`: the cost of a round against the engine floor.

For each (brokers, partitions) at RF 3 under a steady acks=1 producer (one record per partition
per round), it runs warm-up rounds, then times `--rounds` rounds, and in the same process times
the engine floor: the very same input rows (replica state and messages) pushed through an
identity round, i.e. `repartitionById` by broker + `mapInPandas` returning its input +
`localCheckpoint`, on the same number of Spark partitions. It prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Iterator

import pandas as pd

WARMUP = 5


def _identity(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    yield from batches


def _scenario(brokers: int, partitions: int, rounds: int):
    from .scenario import parse_scenario

    horizon = (WARMUP + rounds + 10) * 100
    return parse_scenario({
        "seed": 1,
        "cluster": {"brokers": brokers},
        "topics": [{"name": "bench", "partitions": partitions, "replication_factor": 3}],
        "timeline": [{"at": 0, "produce": {"topic": "bench", "partition": "all", "acks": 1, "value_bytes": 100,
                                           "rate_per_sec": partitions * 10, "duration_ms": horizon}}],
        "run": {"until_ms": horizon},
    }, name=f"bench-{brokers}x{partitions}")


def measure(spark, brokers: int, partitions: int, rounds: int, workdir: str) -> dict:
    """Time `rounds` emulator rounds and as many identity rounds over the same input."""
    from .cluster import Cluster
    from .engine import rows as W

    c = Cluster.from_scenario(_scenario(brokers, partitions, rounds), spark=spark,
                              out=os.path.join(workdir, f"{brokers}x{partitions}"), overwrite=True)
    c.step(WARMUP)
    c.timings.clear()
    walls = []
    for _ in range(rounds):
        t = time.perf_counter()
        c._round()
        walls.append(time.perf_counter() - t)
    c.flush()
    phases = {k: v / rounds * 1000 for k, v in c.timings.items()}
    state = c._route(c.state).localCheckpoint(eager=True)
    n_rows = state.count()
    floors = []
    for _ in range(rounds):
        t = time.perf_counter()
        out = state.repartitionById(c.spark_partitions, "broker").mapInPandas(_identity, W.SPARK_DDL)
        out.localCheckpoint(eager=True)
        floors.append(time.perf_counter() - t)
    rnd, floor = statistics.median(walls), statistics.median(floors)
    return {"brokers": brokers, "partitions": partitions, "replicas": partitions * 3, "rows": n_rows,
            "spark_partitions": c.spark_partitions, "round_ms": rnd * 1000, "floor_ms": floor * 1000,
            "ratio": rnd / floor, "replica_rounds_per_s": partitions * 3 / rnd, "phases": phases}


def table(results: list[dict]) -> str:
    head = ("| brokers | partitions | replicas | rows/round | Spark partitions | round (ms) | floor (ms) | "
            "round/floor | replica-rounds/s | driver / job / collect / commit / history (ms) |\n"
            "|---|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in results:
        ph = r["phases"]
        split = " / ".join(f"{ph.get(k, 0):.0f}" for k in ("driver", "job", "collect", "commit", "history"))
        lines.append(f"| {r['brokers']} | {r['partitions']} | {r['replicas']} | {r['rows']} | "
                     f"{r['spark_partitions']} | {r['round_ms']:.0f} | {r['floor_ms']:.0f} | {r['ratio']:.2f} | "
                     f"{r['replica_rounds_per_s']:.0f} | {split} |")
    return head + "\n".join(lines) + "\n"


def main(args: argparse.Namespace) -> int:
    from .engine.session import get_spark

    spark = get_spark(args.master)
    results = []
    with tempfile.TemporaryDirectory(prefix="sparkkafka-bench-") as work:
        for b in [int(x) for x in args.brokers.split(",")]:
            for p in [int(x) for x in args.partitions.split(",")]:
                r = measure(spark, b, p, args.rounds, work)
                results.append(r)
                print(f"brokers={b} partitions={p}: round {r['round_ms']:.0f} ms, floor {r['floor_ms']:.0f} ms, "
                      f"ratio {r['ratio']:.2f}", flush=True)
    md = table(results)
    print(md)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(md)
    return 0
