"""spark-submit entry point: run a scenario on whatever master spark-submit was given.

    spark-submit --master local-cluster[2,1,1024] jobs/run_scenario.py conf/scenarios/quickstart.yaml \
        --out runs/q --overwrite

Arguments are those of `sparkkafka run`; the session comes from spark-submit (its master and
--conf settings are never overridden). Exits non-zero on failure so jobs are marked failed.
"""

import sys

from sparkkafka.cli import main

if __name__ == "__main__":
    sys.exit(main(["run", *sys.argv[1:], "--no-progress"]))
