"""Reads Delta tables with Delta Lake's own Spark reader; run by tests/test_delta_spark.py in its side venv
(pyspark 4.2.0 + delta-spark 4.4.1, no sparkkafka installed), so it imports only pyspark and the helper
sparkkafka/delta_spark.py, loaded from its file.

    python delta_spark_reader.py SPEC.json

SPEC: {"ivy": DIR, "reads": [{"path": TABLE, "version": V or null, "out": DIR}],
       "history": [{"path": TABLE, "out": FILE.json}], "parquet_counts": [{"path": TABLE, "out": FILE.json}]}.
Each read is ``spark.read.format("delta")`` (with ``versionAsOf`` when V is given) written as Parquet to its
out; a read Delta refuses writes {"error": ...} to out + ".error.json" instead, so the test names what failed.
Each history is ``DESCRIBE HISTORY`` (version, operation); each parquet count is ``spark.read.parquet`` on the
table's folder, the wrong way to read a table (docs/tables.md).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

HELPER = Path(__file__).resolve().parents[1] / "sparkkafka" / "delta_spark.py"


def _helper():
    spec = importlib.util.spec_from_file_location("delta_spark", HELPER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def session(ivy: str):
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[2]").appName("delta-spark-reader")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.shuffle.partitions", "2").config("spark.log.level", "WARN")
               # Delta rebuilds a snapshot's state over 50 partitions by default: ~5 s a read of these small
               # tables on 2 cores, ~1 s over 2
               .config("spark.databricks.delta.snapshotPartitions", "2")
               .config("spark.jars.ivy", ivy))
    return _helper().configure_delta(builder).getOrCreate()


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    t0 = time.perf_counter()
    spark = session(spec["ivy"])
    started = time.perf_counter() - t0
    for r in spec["reads"]:
        reader = spark.read.format("delta")
        if r["version"] is not None:
            reader = reader.option("versionAsOf", r["version"])
        try:
            reader.load(r["path"]).write.mode("overwrite").parquet(r["out"])
        except Exception as e:  # noqa: BLE001 - recorded for the test to name
            Path(r["out"] + ".error.json").write_text(json.dumps({"error": f"{type(e).__name__}: {e}"[:2000]}))
    for h in spec["history"]:
        rows = spark.sql(f"DESCRIBE HISTORY delta.`{h['path']}`").select("version", "operation").collect()
        Path(h["out"]).write_text(json.dumps([[row.version, row.operation] for row in rows]))
    for p in spec["parquet_counts"]:
        Path(p["out"]).write_text(json.dumps(spark.read.parquet(p["path"]).count()))
    import pyspark

    print(json.dumps({"pyspark": pyspark.__version__, "session_start_s": round(started, 1),
                      "reads_s": round(time.perf_counter() - t0 - started, 1)}))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
