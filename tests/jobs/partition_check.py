"""Check job: brokers land in Spark partition ``broker mod P`` and workers run sparkkafka's code.

Run it any way Spark runs Python:

    spark-submit --master local-cluster[2,1,1024] tests/jobs/partition_check.py
    spark-submit --master spark://127.0.0.1:7077 tests/jobs/partition_check.py
    python tests/jobs/partition_check.py --remote sc://127.0.0.1:15002      # Spark Connect

It builds its session with ``sparkkafka.engine.session.get_spark`` (so spark-submit's master and
``--conf`` win), runs one ``repartitionById(P, "broker").mapInPandas`` over B broker rows (DataFrame
API only: no SparkContext, no RDD, so it also runs on Spark Connect), prints one line
``RESULT {json}`` and exits 1 if a check fails. ``run_check`` is also imported by the in-process
test, with the shared session.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

FASTDAEMON = "sparkkafka.engine.fastdaemon"


def run_check(spark, brokers: int = 12, partitions: int = 2) -> dict:
    """Run the job on ``spark``; return what the workers saw and the list of failed checks."""
    import pandas as pd

    def where_am_i(batches):
        # Runs in a Python worker. Nested function: cloudpickle ships it by value.
        import gc
        import os
        import sys

        import pandas as pd
        import pyspark

        import sparkkafka.engine.session as sk_session  # the package must import on the workers

        ctx = pyspark.TaskContext.get()
        main_spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        for pdf in batches:
            n = len(pdf)
            yield pd.DataFrame(
                {
                    "broker": pdf["broker"].astype("int32"),
                    "partition": [ctx.partitionId()] * n,
                    "pid": [os.getpid()] * n,
                    "daemon": [getattr(main_spec, "name", None) or ""] * n,
                    "frozen": [gc.get_freeze_count()] * n,
                    "sparkkafka": [sk_session.__file__] * n,
                    "pyspark": [pyspark.__file__] * n,
                }
            )

    src = spark.createDataFrame(pd.DataFrame({"broker": pd.Series(range(brokers), dtype="int32")}))
    schema = "broker int, partition int, pid long, daemon string, frozen long, sparkkafka string, pyspark string"
    t0 = time.perf_counter()
    out = src.repartitionById(partitions, "broker").mapInPandas(where_am_i, schema).toPandas()
    job_s = time.perf_counter() - t0

    failures = []
    if sorted(out["broker"]) != list(range(brokers)):
        failures.append(f"brokers returned: {sorted(out['broker'])}")
    wrong = out[out["partition"] != out["broker"] % partitions]
    if len(wrong):
        failures.append(
            f"broker != partition mod {partitions}: {wrong[['broker', 'partition']].values.tolist()}"
        )
    return {
        "ok": not failures,
        "failures": failures,
        "rows": len(out),
        "job_s": round(job_s, 3),
        "partition_of_broker": {int(b): int(p) for b, p in zip(out["broker"], out["partition"], strict=True)},
        "worker_pids": sorted({int(p) for p in out["pid"]}),
        "daemons": sorted(set(out["daemon"])),
        "max_frozen": int(out["frozen"].max()),
        "sparkkafka_files": sorted(set(out["sparkkafka"])),
        "pyspark_files": sorted(set(out["pyspark"])),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--remote", help="Spark Connect URL (sc://host:port)")
    parser.add_argument("--brokers", type=int, default=12)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=2, help="run the check this many times")
    parser.add_argument("--expect-daemon", default=FASTDAEMON, help="'' to accept any daemon")
    args = parser.parse_args(argv)

    from sparkkafka.engine.session import get_spark

    t0 = time.perf_counter()
    spark = get_spark(remote=args.remote)
    session_s = time.perf_counter() - t0
    is_connect = type(spark).__module__.startswith("pyspark.sql.connect")

    results = [run_check(spark, args.brokers, args.partitions) for _ in range(args.jobs)]
    result = dict(results[-1])
    result["job_s"] = [r["job_s"] for r in results]
    result["failures"] = [f for r in results for f in r["failures"]]
    result.update(session_s=round(session_s, 3), connect=is_connect)
    result["sql_conf"] = {
        k: spark.conf.get(k, None) for k in ("spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled")
    }
    if not is_connect:
        sc = spark.sparkContext
        result["master"] = sc.master
        result["conf"] = {
            k: sc.getConf().get(k)
            for k in (
                "spark.python.daemon.module",
                "spark.python.unix.domain.socket.enabled",
                "spark.pyspark.python",
            )
        }
    if args.expect_daemon and result["daemons"] != [args.expect_daemon]:
        result["failures"].append(f"daemon modules {result['daemons']} != [{args.expect_daemon!r}]")
    result["ok"] = not result["failures"]
    print("RESULT " + json.dumps(result), flush=True)
    spark.stop()
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
