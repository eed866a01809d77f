"""Crash benchmark (docs/benchmarks.md): kill runs at seeded I/O points, continue them, count how many end
with the uninterrupted run's tables and summary.

    PYTHONPATH=. python tests/crash_bench.py [--kills 100] [--per-run 10] [--seed 1301] [--master local[2]]

`--per-run K`: each run is killed K times in a row (each continuation killed again, its recovery
included) before it runs to its end; runs alternate between the round and the resident engine. The
kill points are drawn as in tests/test_crash.py (crash_util.killed_and_continued).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from crash_util import killed_and_continued, outcome, scenario, uninterrupted  # noqa: E402
from test_determinism import assert_same  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--per-run", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1301)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()

    from sparkkafka.engine.session import get_spark

    spark = get_spark(args.master)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        want_tables, want_summary, points = uninterrupted(spark, scenario("rounds"), os.path.join(tmp, "ref"))
        print(f"uninterrupted run: {points} I/O points, {time.perf_counter() - t0:.1f} s", flush=True)
        done = matched = runs = 0
        while done < args.kills:
            engine = ("rounds", "resident")[runs % 2]
            k = min(args.per_run, args.kills - done)
            out = os.path.join(tmp, f"run{runs}")
            t = time.perf_counter()
            _, at = killed_and_continued(spark, scenario(engine), out, random.Random(f"{args.seed}-{runs}"),
                                         points, k)
            got_tables, got_summary = outcome(out)
            try:
                assert_same(got_tables, want_tables)
                ok = got_summary == want_summary
            except AssertionError:
                ok = False
            done += len(at)
            matched += len(at) if ok else 0
            runs += 1
            print(f"run {runs} ({engine}): killed at {at}: {'same tables' if ok else 'DIFFERENT'} "
                  f"({time.perf_counter() - t:.1f} s)", flush=True)
    print(f"{matched}/{done} kills continued to the uninterrupted tables and summary, {runs} runs, "
          f"{time.perf_counter() - t0:.0f} s wall", flush=True)
    return 0 if matched == done else 1


if __name__ == "__main__":
    sys.exit(main())
