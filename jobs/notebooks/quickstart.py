# Databricks notebook source
# MAGIC %md
# MAGIC # sparkkafka quickstart
# MAGIC Runs `conf/scenarios/quickstart.yaml` (three brokers, a topic at RF 3, a follower that crashes
# MAGIC and comes back), checks with chispa what a Kafka operator would check afterwards and draws the
# MAGIC operator's plots (`sparkkafka report`): partition health, ISR and HW lag, leadership, bytes moved, disk.
# MAGIC
# MAGIC **On Databricks**: open it from a Git folder holding this repository (the notebook's directory is the
# MAGIC working directory, so `../..` is the repository). The next two cells install sparkkafka's dependencies
# MAGIC and sparkkafka itself with `--no-deps`: the cluster's own PySpark must stay (installing PySpark from
# MAGIC PyPI replaces the runtime's and breaks the session). `spark`, `dbutils` and `display` are Databricks'.
# MAGIC On a multi-node cluster, set the `out` widget to a path every node shares (a Unity Catalog volume).
# MAGIC
# MAGIC **Locally / in CI**: `pip install -e '.[test]'`, then `python jobs/notebooks/quickstart.py` from the
# MAGIC repository root; the `MAGIC` lines are comments there and a local SparkSession is built.

# COMMAND ----------

# MAGIC %pip install "pandas>=2.3,<3" "pyarrow>=18" "numpy>=2.0" "deltalake>=1.6,<2" "pyyaml>=6" "pydantic>=2.7,<3" "tqdm>=4.66" "matplotlib>=3.8,<4" "chispa>=0.12"

# COMMAND ----------

# MAGIC %pip install --no-deps ../..

# COMMAND ----------

try:
    dbutils.library.restartPython()  # noqa: F821 - Databricks: load the packages just installed
except NameError:  # a plain Python run: nothing was installed here
    pass

# COMMAND ----------

# DBTITLE 1,Parameters
import os
from pathlib import Path

try:
    dbutils.widgets.text("scenario", "conf/scenarios/quickstart.yaml")  # noqa: F821
    dbutils.widgets.text("out", "runs/quickstart-notebook")  # noqa: F821
    scenario = dbutils.widgets.get("scenario")  # noqa: F821
    out = dbutils.widgets.get("out")  # noqa: F821
except NameError:  # a plain Python run: parameters from the environment
    scenario = os.environ.get("SPARKKAFKA_SCENARIO", "conf/scenarios/quickstart.yaml")
    out = os.environ.get("SPARKKAFKA_OUT", "runs/quickstart-notebook")

# COMMAND ----------

# DBTITLE 1,Setup
from chispa import assert_df_equality
from pyspark.sql import functions as F

from sparkkafka import Cluster, get_spark
from sparkkafka.reporting import figures, report

# Relative paths are the repository's: the working directory is its root locally, this notebook's
# directory (jobs/notebooks) in a Databricks Git folder.
root = next((d for d in (Path.cwd(), *Path.cwd().parents) if (d / "conf" / "scenarios").is_dir()), Path.cwd())
scenario, out = (p if os.path.isabs(p) else str(root / p) for p in (scenario, out))

try:
    spark  # noqa: B018 - given by Databricks
except NameError:
    spark = get_spark()

try:
    display  # noqa: B018
except NameError:
    def display(obj):
        if hasattr(obj, "savefig"):  # a matplotlib Figure, with no screen to show it on: a PNG beside the run
            os.makedirs(os.path.join(out, "notebook"), exist_ok=True)
            obj.savefig(os.path.join(out, "notebook", f"{obj.get_label()}.png"))
        else:
            obj.show(truncate=False)

# COMMAND ----------

# DBTITLE 1,1. Run the scenario
cluster = Cluster.from_scenario(scenario, spark=spark, out=out, overwrite=True)
cluster.run()
display(cluster.describe_topics())
print("\n".join(cluster.describe()))

# COMMAND ----------

# DBTITLE 1,2. Every replica's log equals its leader's
topics = cluster.describe_topics().collect()
for p in topics:
    log = cluster.log(topic=p.topic, partition=p.partition).select("broker", "offset", "leader_epoch", "record_id")
    leader = log.where(F.col("broker") == p.leader).drop("broker")
    for b in p.replicas:
        assert_df_equality(log.where(F.col("broker") == b).drop("broker"), leader)

# COMMAND ----------

# DBTITLE 1,3. Nothing acknowledged was lost, and every partition is back in sync
summary = cluster.summary()
print(summary)
assert summary["lost_acked"] == 0 and summary["divergent_replicas"] == 0
assert summary["acked"] > 0
final = cluster.metrics().orderBy(F.desc("round")).limit(1).select("under_replicated", "offline")
assert_df_equality(final, spark.createDataFrame([(0, 0)], final.schema))

# COMMAND ----------

# DBTITLE 1,4. Pictures: partition health, ISR and HW lag, leadership, bytes moved vs throttle, disk
# The same plots as `sparkkafka report RUN` (read from the run's Delta tables, no Spark needed).
figs = figures(out)
for fig in figs.values():
    display(fig)
written = report(out)  # RUN/report/index.html: one self-contained page with every plot, and the PNGs
print(written.html)
