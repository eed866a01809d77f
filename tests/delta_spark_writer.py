"""Runs scenarios with each Delta writer (emulator delta.writer); run by tests/test_delta_writer.py in its side
venv (pyspark 4.2.0 + delta-spark 4.4.1 + sparkkafka's other dependencies, sparkkafka itself from this
worktree on PYTHONPATH), in one SparkSession with Delta's connector.

    python delta_spark_writer.py SPEC.json

SPEC: {"ivy": DIR, "runs": [{"scenario": {...}, "writer": "deltalake"|"delta-spark", "out": DIR}],
       "recommit": DIR, "reference": {"writers": [...], "workdir": DIR} (optional)}. Each run is Cluster.from_scenario(...).run() with the scenario's delta.writer set to
the run's writer, timed. `recommit` (a delta-spark run's directory) then gets a round it already committed
again, through a TableWriter with the delta-spark committer. `reference` runs bench.measure_reference (12
brokers x 3 dirs, 3,000 partitions RF 3, resident) with each writer in turn. Prints one JSON line: per run its
wall seconds and the Delta commits' count and seconds, the recommit's answer and the metrics table's versions
before and after, and the reference measurements.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import time
from pathlib import Path


def session(ivy: str):
    from sparkkafka.delta_spark import configure_delta
    from sparkkafka.engine.session import get_spark

    class Builder:  # configure_delta's settings, handed to get_spark (sparkkafka's measured configuration)
        conf: dict[str, str] = {}

        def config(self, key: str, value: str) -> Builder:
            self.conf[key] = value
            return self

    conf = configure_delta(Builder()).conf
    # Delta rebuilds a snapshot's state over 50 partitions by default: ~5 s a commit's snapshot on 2 cores
    conf.update({"spark.jars.ivy": ivy, "spark.databricks.delta.snapshotPartitions": "2"})
    return get_spark(conf=conf)


def recommit(run: str, spark) -> dict:
    """Commit once more a metrics row of the last round the delta-spark run committed: refused by Delta's
    txnVersion, nothing written."""
    from deltalake import DeltaTable

    from sparkkafka.storage import tables as T
    from sparkkafka.storage.delta_jvm import DeltaSparkCommitter

    tables_dir = os.path.join(run, "tables")
    run_id = json.loads(Path(run, "run.json").read_text())["run_id"]
    writer = T.TableWriter(tables_dir, run_id, 0, DeltaSparkCommitter(lambda: spark))
    done = writer.table("metrics").transaction_version(writer.app_id)
    before = DeltaTable(T.table_path(tables_dir, "metrics")).version()
    row = T.read_table(tables_dir, "metrics").slice(0, 1)
    accepted = writer.commit("metrics", [T.write_file(tables_dir, "metrics", row.cast(T.SCHEMAS["metrics"]),
                                                      f"{done:08d}-recommit")], done)
    after = DeltaTable(T.table_path(tables_dir, "metrics")).version()
    return {"round": done, "accepted": accepted, "before": before, "after": after}


def main(spec_path: str) -> None:
    from sparkkafka import Cluster
    from sparkkafka.scenario import parse_scenario
    from sparkkafka.storage.delta_jvm import DeltaSparkCommitter

    commits = {"n": 0, "s": 0.0}
    real_commit = DeltaSparkCommitter.commit

    def timed(self, *a, **k):  # the seconds the delta-spark runs spend inside Delta's commits
        t = time.perf_counter()
        try:
            return real_commit(self, *a, **k)
        finally:
            commits["n"] += 1
            commits["s"] += time.perf_counter() - t

    DeltaSparkCommitter.commit = timed
    spec = json.loads(Path(spec_path).read_text())
    t0 = time.perf_counter()
    spark = session(spec["ivy"])
    started = time.perf_counter() - t0
    runs = []
    for r in spec["runs"]:
        sc = copy.deepcopy(r["scenario"])
        sc["cluster"].setdefault("emulator", {})["delta.writer"] = r["writer"]
        t, commits["n"], commits["s"] = time.perf_counter(), 0, 0.0
        Cluster.from_scenario(parse_scenario(sc), spark=spark, out=r["out"]).run()
        runs.append({"out": r["out"], "writer": r["writer"], "wall_s": round(time.perf_counter() - t, 1),
                     "delta_commits": commits["n"], "delta_commit_s": round(commits["s"], 1)})
    out = {"pyspark": spark.version, "session_start_s": round(started, 1), "runs": runs,
           "recommit": recommit(spec["recommit"], spark) if spec.get("recommit") else None}
    if spec.get("reference"):
        from sparkkafka.bench import measure_reference

        out["reference"] = []
        for writer in spec["reference"]["writers"]:
            commits["n"], commits["s"] = 0, 0.0
            m = measure_reference(spark, 12, 3000, 60.0, spec["reference"]["workdir"], engine="resident",
                                  delta_writer=writer)
            out["reference"].append({"writer": writer, "delta_commits": commits["n"],
                                     "delta_commit_s": round(commits["s"], 1), **m})
    print(json.dumps(out))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
