"""Views of a run directory from its files alone (run.json and the Delta tables): what the Cluster's views,
the CLI and the operator tools read, with no Cluster and no driver state (the callers that hold it pass its
uncommitted rows in). Only `read_table_df` needs Spark.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa

from .protocol.config import TOPIC_CONFIGS
from .run_dir import RunDir
from .storage import tables as T

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from .scenario.checker import Checks


def read_table_df(spark: SparkSession, tables_dir: str, name: str) -> DataFrame:
    """A table's current snapshot as a DataFrame with its fixed schema.

    Uses Delta's own reader where the session has Delta's JVM side (Databricks); elsewhere reads
    the snapshot's Parquet files, which gives the same rows (no deletion vectors or column
    mapping are ever written by delta-rs here, and this is checked).
    """
    from deltalake import DeltaTable
    from pyspark.sql import functions as Fn

    from .engine.schema import spark_schema

    path = T.table_path(tables_dir, name)
    schema = spark_schema(T.SCHEMAS[name])
    names = T.SCHEMAS[name].names
    if _has_delta_jvm(spark):
        return spark.read.format("delta").load(path).select(*names)
    dt = DeltaTable(path)
    feats = dt.protocol().reader_features or []
    if "deletionVectors" in feats or "columnMapping" in feats:
        raise RuntimeError(f"{path} uses {feats}; read it with Delta's reader")
    files = dt.file_uris()
    if not files:
        return spark.createDataFrame([], schema)
    df = spark.read.option("basePath", path).schema(schema).parquet(*files).select(*names)
    # string partition values come from folder names (`log_dir=%2Fvar%2Fkafka%2Fd0`, UTF-8 %XX-escaped,
    # tables.path_component); Spark decodes each %XX as one Latin-1 character, so the value is turned back
    # from those bytes to UTF-8 (the identity for ASCII names: no need to look at the values first)
    for col in T.PARTITION_BY.get(name, []):
        if T.SCHEMAS[name].field(col).type == pa.string():
            df = df.withColumn(col, Fn.decode(Fn.encode(col, "ISO-8859-1"), "UTF-8"))
    return df


def spark_schema_of(name: str):
    """Table `name`'s Spark schema."""
    from .engine.schema import spark_schema

    return spark_schema(T.SCHEMAS[name])


def _has_delta_jvm(spark: SparkSession) -> bool:
    try:
        return "DeltaSparkSessionExtension" in (spark.conf.get("spark.sql.extensions", "") or "")
    except Exception:  # noqa: BLE001 - some Connect servers refuse reading static confs
        return False


def latest_partitions(tables_dir: str, uncommitted: Sequence[dict] = ()) -> pd.DataFrame:
    """The newest partition_state row of every partition, counting `uncommitted` rows (the driver state's
    DriverState.uncommitted_partition_state) not in the table yet."""
    from .scenario.checker import latest_of

    rows = T.read_table(tables_dir, "partition_state").to_pandas()
    if uncommitted:
        rows = pd.concat([rows, pd.DataFrame(list(uncommitted))], ignore_index=True)
    return latest_of(rows)


def describe_run(out: str, uncommitted: Sequence[dict] = (), **filters: bool) -> list[str]:
    """kafka-topics --describe over a run directory; `uncommitted` as for latest_partitions."""
    from .tools.describe import describe_lines, topic_id

    meta = RunDir(out).meta()
    parts = latest_partitions(os.path.join(out, "tables"), uncommitted)
    parts = parts[parts["topic"].isin(list(meta["topics"]))] if len(parts) else parts  # deleted ones go
    static = meta.get("broker_config", {})
    # Configs: every entry that is not Kafka's default, so static broker settings of topic configs
    # show too (TopicCommand filters on ConfigEntry.isDefault), then the topic's own overrides.
    from_broker = {t: static[b] for t, b in TOPIC_CONFIGS.items() if b and b in static}
    topics = pd.DataFrame([{
        "topic": t, "topic_id": info.get("topic_id") or topic_id(meta["seed"], t), "partition_count": info["partitions"],
        "replication_factor": 0, "configs": {**from_broker, **info["overrides"]},
        "min_insync_replicas": info["min.insync.replicas"], "marked_for_deletion": False,
    } for t, info in meta["topics"].items()])
    none = pd.Series([[] for _ in range(len(parts))], index=parts.index, dtype=object)
    # KIP-455: a partition being reassigned prints Adding/Removing Replicas (ListPartitionReassignments)
    parts = parts.assign(replicas=parts["replicas"].map(list), isr=parts["isr"].map(list),
                         adding=parts["adding"].map(_ids) if "adding" in parts else none,
                         removing=parts["removing"].map(_ids) if "removing" in parts else none)
    return describe_lines(topics, parts, live_brokers=meta["live_brokers"], **filters)


def _ids(value: Any) -> list[int]:
    return [] if value is None or (np.isscalar(value) and pd.isna(value)) else [int(b) for b in value]


def summarize(out: str) -> dict:
    """What happened to the records of a run, from its tables alone."""
    return audit_run(out)[0]


def audit_run(out: str, checks: Checks | None = None) -> tuple[dict, pd.DataFrame]:
    """The summary and the violations frame of a run (one read of its tables); `checks`, the driver state's
    (DriverState.checks, of the tables' rounds): replica_state's history is read only where it marks it suspect."""
    from .scenario.checker import audit

    meta = RunDir(out).meta()
    return audit(os.path.join(out, "tables"), meta, checks=checks)


VIOLATIONS_ROUND = "sparkkafka.violations.round"  # commit metadata: the run round the table describes


def write_violations(tables_dir: str, found: pd.DataFrame, round_no: int) -> None:
    """Overwrite the `violations` Delta table (created first in run dirs made before it existed)."""
    from .scenario.checker import violations_table
    from .storage.delta_writes import overwrite

    overwrite(T.table_path(tables_dir, "violations"), violations_table(found), T.SCHEMAS["violations"],
              T.TABLE_CONFIG, {VIOLATIONS_ROUND: str(round_no)})


def violations_current(out: str) -> bool:
    """Whether OUT/tables/violations was written by run() for the run's current round."""
    from deltalake import DeltaTable

    path = T.table_path(os.path.join(out, "tables"), "violations")
    if not DeltaTable.is_deltatable(path):
        return False
    round_no = RunDir(out).meta().get("round", 0)
    last = DeltaTable(path).history(1)
    return bool(last) and last[0].get(VIOLATIONS_ROUND) == str(round_no)


# ---------------------------------------------------------------------------------------- the Cluster's DataFrames
ORDER = {  # the order each table's view is returned in (Cluster.<table>())
    "follower_state": ("round", "topic", "partition", "replica"),
    "partition_state": ("time_ms", "topic", "partition", "version"),
    "state_change_log": ("time_ms", "broker", "topic", "partition"),
    "produce_results": ("record_id",),
    "metrics": ("round",),
}


def table_view(spark: SparkSession, tables_dir: str, name: str) -> DataFrame:
    """Table `name` as a DataFrame, in its ORDER."""
    return read_table_df(spark, tables_dir, name).orderBy(*ORDER[name])


def log_view(spark: SparkSession, tables_dir: str, topic: str | None = None,
             partition: int | None = None) -> DataFrame:
    """Every replica's log records, optionally of one topic / partition."""
    from pyspark.sql import functions as Fn

    df = read_table_df(spark, tables_dir, "log")
    if topic is not None:
        df = df.where(Fn.col("topic") == topic)
    if partition is not None:
        df = df.where(Fn.col("partition") == partition)
    return df.orderBy("topic", "partition", "broker", "offset")


def consume_view(spark: SparkSession, tables_dir: str, topic: str | None = None,
                 partition: int | None = None) -> DataFrame:
    """The records a consumer reads now: each partition's leader's log below its HW."""
    from .protocol.consumer import visible_records
    from .scenario.checker import final_replicas

    log = T.read_table(tables_dir, "log").to_pandas()
    if topic is not None:
        log = log[log["topic"] == topic]
    if partition is not None:
        log = log[log["partition"] == partition]
    reps = final_replicas(tables_dir)
    names = T.SCHEMAS["log"].names
    rows = visible_records(log, reps)[names] if len(reps) and len(log) else log.iloc[0:0][names]
    return spark.createDataFrame(rows, schema=spark_schema_of("log"))


def replica_state_view(spark: SparkSession, tables_dir: str) -> DataFrame:
    """One row per replica per round, with the leader's view of each follower (`remote_leo`,
    `last_caught_up_ms`; null on the leader's own row) joined in from follower_state."""
    from pyspark.sql import functions as Fn

    rs = read_table_df(spark, tables_dir, "replica_state")
    fs = read_table_df(spark, tables_dir, "follower_state").select(
        "round", "topic", "partition", Fn.col("replica").alias("broker"), "remote_leo", "last_caught_up_ms")
    return rs.join(fs, ["round", "topic", "partition", "broker"], "left").select(
        *T.SCHEMAS["replica_state"].names, "remote_leo", "last_caught_up_ms").orderBy(
        "round", "topic", "partition", "broker")


def describe_topics_view(spark: SparkSession, tables_dir: str, uncommitted: Sequence[dict] = ()) -> DataFrame:
    """The latest state of every partition: topic, partition, leader, replicas, isr, epochs."""
    pdf = latest_partitions(tables_dir, uncommitted)
    schema = "topic string, partition int, leader int, replicas array<int>, isr array<int>, " \
             "leader_epoch int, controller_epoch int, version int"
    return spark.createDataFrame(pdf[["topic", "partition", "leader", "replicas", "isr", "leader_epoch",
                                      "controller_epoch", "version"]], schema=schema)


def violations_view(spark: SparkSession, out: str) -> DataFrame:
    """Invariant violations (scenario/checker.py): the `violations` table written by run(), or computed now
    when the run was only stepped or has moved on since."""
    if violations_current(out):
        df = read_table_df(spark, os.path.join(out, "tables"), "violations")
    else:
        from .scenario.checker import violations_table

        df = spark.createDataFrame(violations_table(audit_run(out)[1]))
    return df.orderBy("round", "topic", "partition", "kind")
