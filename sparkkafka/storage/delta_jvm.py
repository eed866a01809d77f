"""Commits through Delta Lake's own JVM transaction API (emulator ``delta.writer: delta-spark``).

TableWriter (storage/tables.py) commits a round's add and remove actions, which executors wrote as Parquet
files, in one transaction per table. With ``delta.writer: delta-spark`` those same actions go through the
running SparkSession's Delta connector instead of delta-rs, as a Databricks job would write them: from the
driver, over py4j, ``DeltaLog.forTable(spark, path).startTransaction()``, the run's app transaction read with
``txn.txnVersion(appId)`` (Delta's idempotent-write check: the round is refused when this run already
committed it or a later one) and ``txn.commit(actions, operation, tags)``. Each action is Delta's own JSON
form read by ``Action.fromJson`` (AddFile with stats and partition values, RemoveFile, SetTransaction), the
operation ``WRITE`` (Append) for a round and ``OPTIMIZE`` (auto) for a compaction, whose files carry
dataChange = false. The commit's ``sparkkafka.*`` metadata goes to commitInfo.tags (Delta's commitInfo has
no free keys). Only a classic session can: Spark Connect has no py4j gateway to the driver JVM.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..delta_spark import SQL_EXTENSION
from ..errors import ScenarioError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FIELD = "cluster.emulator.delta.writer"
DELTA_LOG = "org.apache.spark.sql.delta.DeltaLog"


def require_delta_session(spark: SparkSession | None) -> None:
    """ScenarioError unless `spark` is a classic session whose JVM has Delta's connector and SQL extension:
    what ``delta.writer: delta-spark`` commits through."""
    how = ("start the session with Delta's connector and SQL extension "
           "(sparkkafka.delta_spark.configure_delta, or a Databricks cluster), or use delta.writer: deltalake")
    if spark is None:
        raise ScenarioError(FIELD, "delta-spark", f"needs a SparkSession to commit through: {how}")
    if getattr(spark, "_jsparkSession", None) is None:
        raise ScenarioError(FIELD, "delta-spark", "cannot commit through a Spark Connect session (no py4j "
                            "gateway to Delta's JVM classes): use a classic session or delta.writer: deltalake")
    extensions = spark.conf.get("spark.sql.extensions", "") or ""
    if SQL_EXTENSION not in [e.strip() for e in extensions.split(",")]:
        raise ScenarioError(FIELD, "delta-spark", f"the SparkSession has no Delta SQL extension "
                            f"(spark.sql.extensions={extensions!r}): {how}")
    try:
        _load(spark, DELTA_LOG)
    except Exception as e:  # noqa: BLE001 - py4j wraps the JVM's ClassNotFoundException
        raise ScenarioError(FIELD, "delta-spark", f"the SparkSession's JVM has no {DELTA_LOG} "
                            f"({type(e).__name__}): {how}") from None


def _load(spark: SparkSession, name: str) -> Any:
    """The JVM class `name` as Spark's classloader sees it (spark.jars.packages JARs are not on the system
    classloader that Class.forName(name) uses)."""
    jvm = spark._jvm
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    return jvm.java.lang.Class.forName(name, True, loader)


class DeltaSparkCommitter:
    """One run's committer through Delta's JVM API: builds the actions' JSON and commits them."""

    def __init__(self, session: Callable[[], SparkSession | None]) -> None:
        """`session` gives the run's SparkSession when the first commit comes (a reopened run may start its
        session after its writer is made); it is checked (require_delta_session) then, not here: a run
        opened to be read only makes a writer too, and may be read with any session."""
        self._session = session
        self._jvm: Any = None
        self._logs: dict[str, Any] = {}

    def _ready(self) -> None:
        if self._jvm is None:
            self._spark = self._session()
            require_delta_session(self._spark)
            self._jvm = self._spark._jvm
            self._py = self._jvm.org.apache.spark.api.python.PythonUtils
            self._delta = self._jvm.org.apache.spark.sql.delta

    def _log(self, path: str) -> Any:
        log = self._logs.get(path)
        if log is None:
            log = self._logs[path] = self._delta.DeltaLog.forTable(self._spark._jsparkSession, path)
        return log

    def _seq(self, items: Iterable) -> Any:
        return self._py.toSeq(self._jvm.java.util.ArrayList(list(items)))

    def _operation(self, compaction: bool, partition_by: list[str] | None) -> Any:
        """WRITE (Append, the table's partition columns) for a round, OPTIMIZE (auto) for a compaction: what
        Delta's own writer and auto compaction record."""
        ops, none = self._delta.DeltaOperations, self._jvm.scala.Option.apply(None)
        if compaction:
            return ops.Optimize(self._seq([]), self._seq([]), True, none, False)
        parts = self._jvm.scala.Option.apply(self._seq(partition_by or []))
        return ops.Write(self._jvm.org.apache.spark.sql.SaveMode.Append, parts, *[none] * 7)

    def commit(self, path: str, actions: list[dict], tags: Mapping[str, str], partition_by: list[str] | None,
               app: tuple[str, int] | None = None, compaction: bool = False) -> bool:
        """Commit `actions` (Delta JSON action objects) to the table at `path` in one transaction; with `app`
        (app id, version) its SetTransaction too, refused (False) when the table already holds that app's
        version or a later one."""
        self._ready()
        txn = self._log(path).startTransaction()
        if app is not None:
            if txn.txnVersion(app[0]) >= app[1]:
                return False
            actions = [*actions, {"txn": {"appId": app[0], "version": int(app[1])}}]
        action = self._delta.actions.Action
        jactions = self._seq(action.fromJson(json.dumps(a)) for a in actions)
        tags_map = self._py.toScalaMap(self._jvm.java.util.HashMap(dict(tags)))
        txn.commit(jactions, self._operation(compaction, partition_by), tags_map)
        return True
