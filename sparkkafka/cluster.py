"""The Cluster facade: build an emulated cluster from a scenario, run its rounds, act on it, and read it back.

Users hold a Cluster; what it does is elsewhere: the run directory and its format (run_dir.py), the driver's
round loop over the controller and the engine (driver/), the admin calls (admin.py) and the views over the
tables (run_views.py). A Cluster method that changes the run holds the run directory's lock (run_lock.py).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession

from . import admin, run_lock
from . import run_views as V
from .driver import RoundLoop
from .engine.session import check_worker_python
from .errors import ScenarioError
from .protocol.config import ENGINES
from .run_check import check_run
from .run_dir import (
    RUN_FORMAT_VERSION,
    DriverState,
    RunDir,
    check_until_ms,
    require_out_dir,
    run_exists_error,
)
from .run_views import (
    audit_run,
    describe_run,
    latest_partitions,
    read_table_df,
    summarize,
    violations_current,
    write_violations,
)
from .scenario import Scenario, load_scenario, parse_scenario
from .storage import tables as T

_F = TypeVar("_F", bound=Callable[..., Any])


def _require_count(field: str, value: Any, message: str) -> None:
    """ScenarioError naming `field` unless `value` is an integer >= 0 (bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise ScenarioError(field, value, message)


def _writer(fn: _F) -> _F:
    """A Cluster method that changes the run directory: it holds the run's lock (run_lock.py) and is refused
    when another process holds it, or has saved the run since this Cluster read it."""

    @functools.wraps(fn)
    def wrapped(self: Cluster, *args: Any, **kwargs: Any) -> Any:
        with self._writing():
            return fn(self, *args, **kwargs)

    return wrapped  # type: ignore[return-value]


class _Loop:
    """A Cluster attribute that is its round loop's (driver/round_loop.py): the run's files, its DriverState
    fields, the brokers' rows after the last round, the table writer, the round timings."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Cluster | None, owner: type | None = None) -> Any:
        return self if obj is None else getattr(obj.loop, self.name)

    def __set__(self, obj: Cluster, value: Any) -> None:
        setattr(obj.loop, self.name, value)


def _check_delta_writer(sc: Scenario, spark: SparkSession | None) -> None:
    """ScenarioError when the scenario commits through delta-spark and `spark` cannot (storage/delta_jvm)."""
    if sc.emulator_settings.delta_writer == "delta-spark":
        from .storage.delta_jvm import require_delta_session

        require_delta_session(spark)


class Cluster:
    """An emulated Kafka cluster whose state lives in a run directory (`out`): create it (from_scenario), reopen
    it (for_path), run it (step, run), act on it (apply, reassign, elect_leaders, ...) and read it (the views).
    `loop` is its driver-side round loop, for benchmarks and tests that drive single rounds."""

    RUN_FORMAT_VERSION = RUN_FORMAT_VERSION

    spark, run_dir, out, tables_dir, brokers_dir, driver, state, timings, writer, meta = (
        _Loop(), _Loop(), _Loop(), _Loop(), _Loop(), _Loop(), _Loop(), _Loop(), _Loop(), _Loop())
    scenario, round_ms, control, workload, spark_partitions, round = (
        _Loop(), _Loop(), _Loop(), _Loop(), _Loop(), _Loop())
    crashed, paused_until, isolations, alter_dir_responses, rolled_back = (
        _Loop(), _Loop(), _Loop(), _Loop(), _Loop())
    resumable, broker_cfg, profile = _Loop(), _Loop(), _Loop()

    def __init__(self, spark: SparkSession | None, out: str, driver: DriverState | None = None) -> None:
        """`spark`: a session from_scenario or for_path has checked (check_worker_python), or None."""
        self.loop = RoundLoop(spark, out, driver)
        self._seen = self.run_dir.stamp()  # the last save this Cluster knows of (run_lock.writing)
        self._checked = False  # checked for writing (run_check.py) since it was reopened
        self._tables_checked = False  # its tables checked (run_check.py) when it was reopened
        # wall seconds this process spent on the run: creating it, its rounds (step, run), run's end (the
        # final commit, compaction, audit, save); what `sparkkafka bench` reports per phase
        self.wall_s = {"setup": 0.0, "loop": 0.0, "end": 0.0}
        self.end_s: dict[str, float] = {}  # run's end by part: the last commits and compaction, the audit, the save

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_scenario(cls, scenario: str | os.PathLike | Scenario | dict, spark: SparkSession | None = None,
                      out: str | None = None, overwrite: bool = False, master: str | None = None,
                      engine: str | None = None) -> Cluster:
        """Validate the scenario (a YAML path, a parsed Scenario, or the same mapping as a dict), then
        create its run directory and tables (nothing is written when the scenario is invalid or `out`
        already holds a run and overwrite is False). `engine` overrides cluster.emulator.engine, as
        `sparkkafka run --engine` does (all three give the same tables). The in-process engine
        (emulator.engine: local) starts no SparkSession: its cluster's views that return DataFrames need one
        passed in."""
        t0 = time.perf_counter()
        if isinstance(scenario, Scenario):
            sc = scenario
        elif isinstance(scenario, dict):
            sc = parse_scenario(scenario)
        else:
            sc = load_scenario(scenario)
        if engine is not None:
            if engine not in ENGINES:
                raise ScenarioError("engine", engine, f"expected one of: {', '.join(ENGINES)}")
            sc = sc.on_engine(engine)
        out = out or os.path.join("runs", sc.name)
        require_out_dir(out)
        if spark is not None:
            check_worker_python(spark)  # before the run directory exists: a wrong worker Python changes nothing
        if spark is not None or sc.emulator_settings.engine == "local":  # else: the session started below
            _check_delta_writer(sc, spark)
        if RunDir(out).is_run() and not overwrite:
            raise run_exists_error(out)
        os.makedirs(out, exist_ok=True)
        with run_lock.writing(out):  # refused while another process writes there, before Spark starts
            if RunDir(out).is_run() and not overwrite:
                raise run_exists_error(out)
            if spark is None and sc.emulator_settings.engine != "local":  # the in-process engine needs no session
                from .engine.session import get_spark

                spark = get_spark(master)
                check_worker_python(spark)
                _check_delta_writer(sc, spark)
            for name in os.listdir(out) if overwrite else ():
                if name != run_lock.LOCK:  # the lock this process holds stays
                    path = os.path.join(out, name)
                    if os.path.isdir(path) and not os.path.islink(path):
                        shutil.rmtree(path)
                    else:
                        os.unlink(path)
            RunDir(out).clear_unfinished()  # what a creation killed before its run.json left
            c = cls(spark, out)
            T.create_tables(c.tables_dir, sc.emulator_settings.delta_checkpoint_interval)
            c.loop.start(sc)
            c._seen = c.run_dir.stamp()
        c.wall_s["setup"] = time.perf_counter() - t0
        return c

    @classmethod
    def for_path(cls, spark: SparkSession | None, path: str, checked: bool = False) -> Cluster:
        """Reopen a run directory: its tables can be read, and (runs saved in this run format) it can be
        continued with run(until_ms) / step() and acted on by apply() and the operator tools. With no
        `spark`, a session is started unless the run is on the in-process engine (engine/local.py).
        `checked`: the caller holds the run's lock and has checked it for writing (run_check.py)."""
        rd = cls.require_complete(path)
        if spark is not None:
            check_worker_python(spark)
        if not checked:
            check_run(path)  # a damaged run: refused with the file named, not a failure deep in a read
        c = cls(spark, path)
        c._checked, c._tables_checked = checked, True
        c.meta = rd.meta()
        c.loop.restore()
        if c.spark is None and not (c.resumable and c.loop.local):  # the in-process engine needs no session
            from .engine.session import get_spark

            c.spark = get_spark()
        return c

    @staticmethod
    def require_complete(path: str) -> RunDir:
        """The run directory at `path`, with its run.json and every Delta table (ScenarioError naming what is
        missing, before anything reads it)."""
        rd = RunDir(path).require_run()
        missing = [n for n in T.SCHEMAS if not os.path.isdir(os.path.join(T.table_path(rd.tables_dir, n), "_delta_log"))]
        if missing:
            raise ScenarioError("path", rd.path, f"holds run.json but not the run's Delta tables ({', '.join(missing)} "
                                                 "missing under tables/): not a complete run directory")
        return rd

    # ------------------------------------------------------------------ running and saving (driver/)
    @contextmanager
    def _writing(self) -> Iterator[None]:
        """Hold the run directory's lock (run_lock.py) while changing it; refused when another process has
        saved the run since this Cluster read or saved it (its view would overwrite that change)."""
        with run_lock.writing(self.out, seen=self._seen):
            if self.loop.reopened and not self._checked:  # a reopened run's first write: refused if damaged
                check_run(self.out, writes=True, tables=not self._tables_checked)  # (for_path read the tables)
                self._checked = True
            try:
                yield
            finally:
                self._seen = self.run_dir.stamp()  # under the lock: this process's own saves

    def jobs(self, rounds: int) -> Iterator[int]:
        """Run `rounds` rounds one Spark job at a time (a round, or a resident window of rounds; rounds an idle
        cluster skips count too) and yield the rounds each job ran: what `step` and `run` do before they
        save, for a caller that times or reports each job (a progress bar, `sparkkafka bench`). Holds the
        run directory's lock until the last job; nothing is saved at the end (`save`, `step`, `run` do). The
        log table has every round's records once the jobs end (history tables: at `flush`); between two jobs
        of the in-process engine it may lag by the rounds since its last commit point."""
        _require_count("rounds", rounds, "must be an integer >= 0")
        with self._writing():
            self.loop.require_resumable()
            try:
                while rounds > 0:
                    ran = self.loop.advance(min(rounds, self.loop.window_limit()), rounds)
                    rounds -= ran
                    yield ran
            except GeneratorExit:  # the caller stopped early: the rounds run so far are in the log all the same
                self.loop.commit_held()
                raise
            self.loop.commit_held()

    @_writer
    def step(self, rounds: int = 1, save: bool = True) -> Cluster:
        """Run `rounds` rounds, then commit everything buffered and save the run (`save` False: only commit
        the tables, for a caller that reads them between steps and saves at its end: a save writes every
        broker's rows and the driver's state, ~50 s at 300,000 replicas)."""
        t0 = time.perf_counter()
        for _ in self.jobs(rounds):
            pass
        if save:
            self.loop.save()
        else:
            self.loop.flush()
        self.wall_s["loop"] += time.perf_counter() - t0
        return self

    @_writer
    def run(self, until_ms: int | None = None, progress: bool = False) -> Cluster:
        """Run until `until_ms` (default: the scenario's end), then write OUT/summary.json."""
        if until_ms is not None:
            _require_count("until_ms", until_ms, "must be an integer >= 0 (emulated milliseconds)")
        self.loop.require_resumable()
        if until_ms is not None:  # a week at most, as run.until_ms; and a run does not go back
            check_until_ms("until_ms", int(until_ms), (self.round - 1) * self.round_ms, f"run {self.out}")
        end = self.scenario.end_ms if until_ms is None else until_ms
        total = max(0, end // self.round_ms + 1 - self.round)
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=total, unit="round", desc=self.scenario.name, leave=False)
        t0 = time.perf_counter()
        for ran in self.jobs(total):
            if bar is not None:
                bar.update(ran)
        if bar is not None:
            bar.close()
        t1 = time.perf_counter()
        self.wall_s["loop"] += t1 - t0
        self.loop.flush()
        self.loop.compact(end=True)
        t2 = time.perf_counter()
        # the summary and the violations, from one read of the tables (of replica_state, the rows the checker's
        # state kept with the driver's makes it read: scenario/checker.reduced_replica_state)
        summary, found = audit_run(self.out, self.loop.checks)
        write_violations(self.tables_dir, found, summary["rounds"])
        self.writer.refresh("violations")
        t3 = time.perf_counter()
        self.loop.save()  # the commit point: after every commit of the run, before the summary it leads to
        self.run_dir.write_summary(summary)
        self._summary = (self.round, summary)  # summary() needs no second read of the tables
        t4 = time.perf_counter()
        self.wall_s["end"] += t4 - t1
        for k, v in (("commit and compaction", t2 - t1), ("audit", t3 - t2), ("save", t4 - t3)):
            self.end_s[k] = self.end_s.get(k, 0.0) + v
        return self

    @_writer
    def save(self) -> None:
        """Write what the driver holds and the brokers' rows into the run directory (RoundLoop.save), so
        another process can continue the run or act on it."""
        self.loop.save()

    @_writer
    def flush(self) -> None:
        """Commit buffered history files and driver-side rows (one transaction per table)."""
        self.loop.flush()

    @_writer
    def compact(self) -> None:
        """Fold each table's small per-round files (reads over many small files are slow)."""
        self.loop.compact()

    # ------------------------------------------------------------------ events and admin requests (admin.py)
    def apply(self, event: dict) -> None:
        """Inject one event now, written as a timeline entry without its time (e.g. {"crash": 2})."""
        self.loop.require_resumable()
        ev = self.loop.event_of(event)
        self.driver.outside_change()
        self.loop.apply_event(ev.type, ev.args, self.round * self.round_ms)

    def reassign(self, plan: dict, throttle: int | None = None, log_dirs_throttle: int | None = None,
                 via: str = "api", now: int | None = None) -> dict:
        """AlterPartitionReassignments for a Kafka reassignment plan with its throttles (admin.reassign)."""
        return admin.reassign(self.driver, plan, throttle, log_dirs_throttle, via, now)

    def cancel_reassignments(self, tps: list[tuple[str, int]], now: int | None = None) -> dict:
        return admin.cancel_reassignments(self.driver, tps, now)

    def elect_leaders(self, election_type: str, partitions: list[tuple[str, int]] | None = None,
                      now: int | None = None) -> dict:
        return admin.elect_leaders(self.driver, election_type, partitions, now)

    def clear_throttles(self, brokers: list[int], topics: list[str], now: int | None = None) -> None:
        admin.clear_throttles(self.driver, brokers, topics, now)

    def alter_replica_log_dirs(self, entries: pd.DataFrame) -> None:
        admin.alter_replica_log_dirs(self.driver, entries)

    # ------------------------------------------------------------------ views (run_views.py)
    def _df(self, name: str) -> DataFrame:
        return read_table_df(self.spark, self.tables_dir, name)

    def log(self, topic: str | None = None, partition: int | None = None) -> DataFrame:
        return V.log_view(self.spark, self.tables_dir, topic, partition)

    def consume(self, topic: str | None = None, partition: int | None = None) -> DataFrame:
        """The records a consumer reads now: each partition's leader's log below its HW."""
        return V.consume_view(self.spark, self.tables_dir, topic, partition)

    def replica_state(self) -> DataFrame:
        """One row per replica per round, with the leader's view of each follower (run_views.replica_state_view)."""
        return V.replica_state_view(self.spark, self.tables_dir)

    def follower_state(self) -> DataFrame:
        return V.table_view(self.spark, self.tables_dir, "follower_state")

    def partition_state(self) -> DataFrame:
        return V.table_view(self.spark, self.tables_dir, "partition_state")

    def state_change_log(self) -> DataFrame:
        return V.table_view(self.spark, self.tables_dir, "state_change_log")

    def produce_results(self) -> DataFrame:
        return V.table_view(self.spark, self.tables_dir, "produce_results")

    def metrics(self) -> DataFrame:
        return V.table_view(self.spark, self.tables_dir, "metrics")

    def describe_topics(self) -> DataFrame:
        """The latest state of every partition: topic, partition, leader, replicas, isr, epochs."""
        return V.describe_topics_view(self.spark, self.tables_dir, self._uncommitted_partition_state())

    def describe(self, **filters: bool) -> list[str]:
        """kafka-topics --describe lines for the run's current state."""
        return describe_run(self.out, self._uncommitted_partition_state(), **filters)

    def _uncommitted_partition_state(self) -> list[dict]:
        """The controller's writes since the last commit (an admin request's, applied between rounds)."""
        return self.driver.uncommitted_partition_state() if self.driver is not None else []

    def summary(self) -> dict:
        """What happened to the records (OUT/summary.json); works on any run dir, stepped or run."""
        cached = getattr(self, "_summary", None)
        if cached is not None and cached[0] == getattr(self, "round", None):
            return json.loads(json.dumps(cached[1]))  # a copy the caller may change
        return summarize(self.out)

    def violations(self) -> DataFrame:
        """Invariant violations (scenario/checker.py): the `violations` table written by run(), or
        computed now when the run was only stepped or has moved on since."""
        return V.violations_view(self.spark, self.out)

    def verify_replicas(self, topic_white_list: str = ".*") -> list[str]:
        """kafka-replica-verification's lines over the run's final state (tools/replica_verification.py)."""
        from .tools.replica_verification import verify_run

        return verify_run(self.out, topic_white_list).lines


__all__ = ["Cluster", "audit_run", "describe_run", "latest_partitions", "read_table_df", "summarize",
           "violations_current", "write_violations"]  # the readers stay importable from here
