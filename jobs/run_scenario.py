"""spark-submit entry point: run a scenario on whatever master spark-submit was given.

    spark-submit --master local-cluster[2,1,1024] jobs/run_scenario.py conf/scenarios/quickstart.yaml \
        --out runs/q --overwrite

Arguments are those of `sparkkafka run`; the session comes from spark-submit (its master and
--conf settings are never overridden). Exits non-zero on failure so jobs are marked failed. The
session is stopped before the exit: left to the JVM's shutdown hook, a standalone or local-cluster
master reports its executors killed mid-flight as ERROR lines after a good run.
"""

import sys

from pyspark.sql import SparkSession

from sparkkafka.cli import main

if __name__ == "__main__":
    try:
        code = main(["run", *sys.argv[1:], "--no-progress"])
    finally:
        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()
    sys.exit(code)
