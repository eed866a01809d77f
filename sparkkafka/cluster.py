"""The Cluster facade: build an emulated cluster from a scenario, run its rounds, and read it back.

The driver loop per round: apply the events due, let the controller act, route last round's
messages (dropping those to crashed or cut-off brokers), run one `mapInPandas` over all brokers
grouped into a few Spark partitions, commit the round's log files in one Delta transaction, and
keep the brokers' state for the next round as a local checkpoint. Nothing the executors need
lives only here: state travels in the DataFrame, logs in Delta, checkpoints on disk.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re
import shutil
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as Fn

from . import admin, run_lock
from .controller.control_plane import ControlPlane
from .engine import rows as W
from .engine.broker_round import BrokerRound, RoundParams, expand_results
from .errors import ScenarioError
from .protocol import errors as kerr
from .protocol import idle, replication_quota
from .protocol.config import LONG_MAX, RoundConfig, broker_config, profile_of
from .protocol.frames import PRODUCE, RESULT, concat, conform
from .protocol.rules import rules_for
from .run_dir import CLIENT, RUN_FORMAT_VERSION, DriverState, RunDir
from .run_views import (
    audit_run,
    describe_run,
    latest_partitions,
    read_table_df,
    spark_schema_of,
    summarize,
    violations_current,
    write_violations,
)
from .scenario import Scenario, load_scenario, parse_scenario
from .scenario.workload import Workload
from .storage import tables as T
from .storage.tables import TableWriter

CONTROL_KINDS = {"leader_and_isr": W.LEADER_AND_ISR, "stop_replica": W.STOP_REPLICA,
                 "update_metadata": W.UPDATE_METADATA, "isr_results": W.ISR_RESULT}


class _Stopwatch:
    """Adds the wall time of successive phases into a dict (the benchmark reports them)."""

    def __init__(self, into: dict[str, float]) -> None:
        self.into = into
        self.t = time.perf_counter()

    def lap(self, name: str) -> None:
        t = time.perf_counter()
        self.into[name] += t - self.t
        self.t = t


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


class _Driven:
    """A Cluster attribute that is a field of its DriverState (run_dir.py), which the run directory saves."""

    def __init__(self, field: str | None = None) -> None:
        self.field = field

    def __set_name__(self, owner: type, name: str) -> None:
        self.field = self.field or name

    def __get__(self, obj: Cluster | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        if obj.driver is None:
            raise AttributeError(f"{self.field}: run {obj.out} has no driver state this version can continue")
        return getattr(obj.driver, self.field)

    def __set__(self, obj: Cluster, value: Any) -> None:
        setattr(obj.driver, self.field, value)


class Cluster:
    """An emulated Kafka cluster whose state lives in a run directory (`out`): a facade over the run
    directory (run_dir.py), the controller (controller/) and the round engine (engine/)."""

    RUN_FORMAT_VERSION = RUN_FORMAT_VERSION

    # the driver's state, a DriverState the run directory saves; these names read and write its fields
    scenario, run_id, round_ms, control, workload, spark_partitions = (
        _Driven(), _Driven(), _Driven(), _Driven(), _Driven(), _Driven())
    round, events, next_event, crashed, stopping, paused_until = (
        _Driven(), _Driven(), _Driven(), _Driven(), _Driven(), _Driven())
    isolations, offline_dirs, alter_dir_responses, tool_state = _Driven(), _Driven(), _Driven(), _Driven()
    _outbox, _produced, _driver_rows = _Driven("outbox"), _Driven("produced"), _Driven("driver_rows")
    _log_actions, _flushed_round = _Driven("log_actions"), _Driven("flushed_round")
    _idle_round = _Driven("idle_round")

    def __init__(self, spark: SparkSession | None, out: str, driver: DriverState | None = None) -> None:
        self.spark = spark
        self.run_dir = RunDir(out)
        self.out = self.run_dir.path
        self.tables_dir = self.run_dir.tables_dir
        self.brokers_dir = self.run_dir.brokers_dir
        self.driver = driver
        # the brokers' rows after the last round: lazy Spark rows, or pandas with the in-process engine
        self.state: DataFrame | pd.DataFrame | None = None
        self._saved_state: DataFrame | pd.DataFrame | None = None  # the `state` in driver.state_folder (read or written)
        self._seen = self.run_dir.stamp()  # the last save this Cluster knows of (run_lock.writing)
        self._recovered = True  # False: reopened, not yet recovered (_recover)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_scenario(cls, scenario: str | os.PathLike | Scenario | dict, spark: SparkSession | None = None,
                      out: str | None = None, overwrite: bool = False, master: str | None = None) -> Cluster:
        """Validate the scenario (a YAML path, a parsed Scenario, or the same mapping as a dict), then
        create its run directory and tables (nothing is written when the scenario is invalid or `out`
        already holds a run and overwrite is False). The in-process engine (emulator.engine: local)
        starts no SparkSession: its cluster's views that return DataFrames need one passed in."""
        if isinstance(scenario, Scenario):
            sc = scenario
        elif isinstance(scenario, dict):
            sc = parse_scenario(scenario)
        else:
            sc = load_scenario(scenario)
        out = out or os.path.join("runs", sc.name)
        if RunDir(out).is_run() and not overwrite:
            raise ScenarioError("out", out, "directory already holds a run (pass overwrite=True / --overwrite)")
        os.makedirs(out, exist_ok=True)
        with run_lock.writing(out):  # refused while another process writes there, before Spark starts
            if RunDir(out).is_run() and not overwrite:
                raise ScenarioError("out", out, "directory already holds a run (pass overwrite=True / --overwrite)")
            if spark is None and sc.emulator.get("engine") != "local":  # the in-process engine needs no session
                from .engine.session import get_spark

                spark = get_spark(master)
            for name in os.listdir(out) if overwrite else ():
                if name != run_lock.LOCK:  # the lock this process holds stays
                    path = os.path.join(out, name)
                    if os.path.isdir(path) and not os.path.islink(path):
                        shutil.rmtree(path)
                    else:
                        os.unlink(path)
            RunDir(out).clear_unfinished()  # what a creation killed before its run.json left
            c = cls(spark, out)
            T.create_tables(c.tables_dir, sc.emulator["delta.checkpoint.interval"])
            c._start(sc)
            c._seen = c.run_dir.stamp()
        return c

    @classmethod
    def for_path(cls, spark: SparkSession | None, path: str) -> Cluster:
        """Reopen a run directory: its tables can be read, and (runs saved in this run format) it can be
        continued with run(until_ms) / step() and acted on by apply() and the operator tools. With no
        `spark`, a session is started unless the run is on the in-process engine (engine/local.py)."""
        rd = cls.require_complete(path)
        c = cls(spark, path)
        c.meta = rd.meta()
        c._restore()
        if c.spark is None and not (c.resumable and c._local):  # the in-process engine needs no session
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

    # ------------------------------------------------------------------ the run directory is the cluster
    @property
    def resumable(self) -> bool:
        return self.driver is not None

    @property
    def broker_cfg(self) -> dict:
        """The cluster's broker configs (static, and dynamic cluster-wide defaults): the controller's."""
        return self.control.broker_cfg

    @property
    def profile(self) -> str:
        return self.control.profile

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """Hold the run directory's lock (run_lock.py) while changing it; refused when another process has
        saved the run since this Cluster read or saved it (its view would overwrite that change)."""
        with run_lock.writing(self.out, seen=self._seen):
            try:
                yield
            finally:
                self._seen = self.run_dir.stamp()  # under the lock: this process's own saves

    @_writer
    def save(self) -> None:
        """Write what the driver holds (controller, ZooKeeper, producers, timeline position) and the
        brokers' in-memory state (the last round's output rows) into the run directory, so another
        process can continue the run or act on it. A save writes the brokers' rows into a new state
        folder, then drops the older ones (a reader of the old one is never overwritten underneath);
        rows already in the state folder (a second save in the same round, a reopened run) are not
        written again. The driver state is the run's commit point: written last, it records the
        tables' versions it goes with."""
        self._recover()
        self.flush()
        if self.state is not None and self.state is not self._saved_state:
            folder = self.run_dir.new_state_folder(self.round)
            path = os.path.join(self.out, folder)
            if isinstance(self.state, pd.DataFrame):  # the in-process engine's rows
                from .engine import local

                local.save_state(self.state, path)
            else:
                self.state.where(Fn.col("kind").isin(list(W.CARRY_KINDS))).write.parquet(path)
            self.driver.state_folder = folder
            self._saved_state = self.state
        self._save_driver()

    def _save_driver(self) -> None:
        self.driver.table_versions = T.table_versions(self.tables_dir)
        self.run_dir.save_driver(self.driver)

    def _restore(self) -> None:
        if self.run_dir.format_version() != RUN_FORMAT_VERSION:
            return  # its tables can be read; continuing it is refused (_require_resumable)
        self.driver = self.run_dir.load()
        self._transient()
        self._recovered = False  # a reopened run is recovered when first continued or acted on (_recover)
        folder = self.run_dir.state_path(self.driver)
        if folder is not None and self._local:
            from .engine import local

            self.state = self._saved_state = local.load_state(folder)
        elif folder is not None:
            if self.spark is None:
                from .engine.session import get_spark

                self.spark = get_spark()
            self.state = self._saved_state = self.spark.read.schema(W.SPARK_DDL).parquet(folder)

    def _recover(self) -> None:
        """Before a reopened run is continued or changed: undo what was written after its driver state
        was saved (a run killed mid-round, RunDir.recover), so it goes on as an uninterrupted run does.
        Not on open: a reader of a run that another process is running must not undo its commits."""
        if self._recovered:
            return
        self._recovered = True
        self.rolled_back = self.run_dir.recover(self.driver)
        if self.rolled_back:
            self.writer = self._table_writer()  # handles opened before the rollback

    def _require_resumable(self) -> None:
        if not self.resumable:
            self.run_dir.check_format()
        self._recover()

    def _table_writer(self) -> TableWriter:
        """The run's committer, compacting mid-run as the scenario says (runs saved before the setting: default)."""
        from .protocol.config import EMULATOR_DEFAULTS

        emu = {**EMULATOR_DEFAULTS, **self.scenario.emulator}
        return TableWriter(self.tables_dir, self.run_id, int(emu["delta.compact.min.files"]))

    def _transient(self) -> None:
        """What the driver rebuilds rather than saves: table handles, this round's cuts, timings."""
        self.writer = self._table_writer()
        self._cut: dict[int, frozenset] = {}  # who cannot reach whom this round
        self._placed: int | None = None  # the resident tasks `state` is placed over (None: not placed)
        self._before_jump: DataFrame | None = None  # the rows an idle jump's job reads, until it has run
        self._history_adds: dict[str, list[dict]] = defaultdict(list)
        self.timings: dict[str, float] = defaultdict(float)  # seconds per round phase, for bench

    def _start(self, sc: Scenario) -> None:
        broker_cfg = broker_config(sc.config)
        profile = profile_of(broker_cfg["inter.broker.protocol.version"])
        n = int(sc.emulator.get("spark.partitions") or 0)
        if n <= 0:
            n = 1 if self.spark is None else int(self.spark.conf.get("spark.sql.shuffle.partitions", "2"))
        self.driver = DriverState(
            scenario=sc, run_id=uuid.uuid4().hex[:12], round_ms=sc.round_ms,
            control=ControlPlane(list(sc.brokers), sc.racks, broker_cfg, sc.seed, profile, emulator=dict(sc.emulator)),
            workload=Workload(sc.round_ms, int(broker_cfg["request.timeout.ms"])),
            spark_partitions=max(1, min(n, len(sc.brokers))),
            events=sorted(sc.timeline, key=lambda e: (e.time_ms(sc.round_ms), e.index)),
            outbox=[(W.START, pd.DataFrame({"broker": list(sc.brokers)}), CLIENT)])
        self._transient()
        for spec in sc.topics:
            self.control.create_topic(spec, 0)
        if any(spec.state for spec in sc.topics):  # an imported cluster: its logs exist before the brokers start
            from .scenario.initial_logs import write_initial_logs

            self.workload.next_record_id = write_initial_logs(
                self.tables_dir, self.brokers_dir, sc.topics, int(sc.emulator["initial.record.bytes"]),
                sc.log_dirs, sc.brokers)
        self.control.start(-self.round_ms)  # the scenario's cluster and topics exist when the run starts
        self.control.save(self.out)
        self._save_driver()
        self._save_meta()  # run.json last: from here on the directory is a run, continued whenever it stops

    def _save_meta(self) -> None:
        self.meta = self.driver.meta()
        self.run_dir.write_meta(self.meta)

    # ------------------------------------------------------------------ events
    def _send(self, kind: int, frame: pd.DataFrame, src: int = CLIENT) -> None:
        self.driver.send(kind, frame, src)

    def apply(self, event: dict) -> None:
        """Inject one event now, written as a timeline entry without its time (e.g. {"crash": 2})."""
        from .scenario.loader import parse_scenario

        self._require_resumable()

        probe = {"cluster": {"brokers": list(self.scenario.brokers), "log_dirs": list(self.scenario.log_dirs),
                             "config": self.scenario.config},
                 "topics": [{"name": s.name, "partitions": s.partitions, "replication_factor": s.replication_factor,
                             **({"assignment": {k: list(v) for k, v in s.assignment.items()}} if s.assignment else {})}
                            for s in self.scenario.topics],
                 "timeline": [{"at": 0, **event}]}
        if self.scenario.racks:
            probe["cluster"]["racks"] = self.scenario.racks
        ev = parse_scenario(probe, name=self.scenario.name).timeline[0]
        self.driver.outside_change()
        self._apply(ev.type, ev.args, self.round * self.round_ms)

    def _apply(self, kind: str, a: dict, now: int) -> None:
        c = self.control
        b = a.get("broker")
        if kind == "produce":
            self.workload.add(a, now, c.partition_count(a["topic"]))
        elif kind == "crash" and b not in self.crashed:
            self.crashed.add(b)
            self.paused_until.pop(b, None)
            c.crash(b, now)
            if a.get("power_loss"):
                self._lose_power(b, now)
        elif kind == "restart" and b in self.crashed:
            self.crashed.discard(b)
            self._send(W.START, pd.DataFrame({"broker": [b]}))
            c.restart(b, now)
        elif kind == "shutdown" and b not in self.crashed:
            self._send(W.SHUTDOWN, pd.DataFrame({"broker": [b]}))
            self.stopping.add(b)
            c.shutdown(b, now)
        elif kind == "pause" and b not in self.crashed:
            self.paused_until[b] = now + int(a["duration_ms"])
            c.pause(b, now, self.paused_until[b])
        elif kind == "isolate":
            other = frozenset([c.controller_id()]) if a["from"] == "controller" else frozenset(a["from"])
            end = now + a["duration_ms"] if a.get("duration_ms") else None
            self.isolations.append((frozenset(a["brokers"]), other, end))
        elif kind == "heal":
            self.isolations.clear()
        elif kind == "create_topic":
            c.create_topic(a["topic"], now)
        elif kind == "delete_topic":
            c.delete_topic(a["topic"], now)
        elif kind == "set_config":
            c.set_config(a, now)
        elif kind == "controller_failover":
            c.controller_failover(now)
        elif kind == "reassign":
            self.reassign(a["plan"], a.get("throttle"), a.get("log_dirs_throttle"), via=a.get("via", "api"), now=now)
        elif kind == "elect_leaders":
            parts = None if a.get("partitions") is None else [tuple(x) for x in a["partitions"]]
            self.elect_leaders(a["election_type"], parts, now=now)
        elif kind == "fail_log_dir":
            self.offline_dirs.setdefault(b, set()).add(a["log_dir"])
            self._send(W.LOG_DIR_FAILURE, pd.DataFrame({"broker": [b], "log_dir": [a["log_dir"]]}))
        elif kind in ("crash", "restart", "shutdown", "pause"):
            pass  # crashing a crashed broker, restarting a running one: nothing happens
        else:  # the loader refuses what this version cannot do, before anything runs
            raise ScenarioError(kind, a, f"{kind} is not yet supported by this version of sparkkafka")

    def _lose_power(self, b: int, now: int) -> None:
        """The broker's machine loses power: its logs keep only what was on disk (protocol/flush.py).
        The cut is staged into this round's log commit; the broker is down, so no task reads its log."""
        from .protocol.flush import power_loss_cuts
        from .storage import broker_disk, log_truncation

        version = self.writer.table("log").version()
        log = broker_disk.read_log(self.tables_dir, version, b,
                                   ["log_dir", "topic", "partition", "offset", "append_ms"]).to_pandas()
        flushed = {(d, t, p): o for d in self.scenario.log_dirs
                   for (t, p), o in broker_disk.read_flushed(self.brokers_dir, b, d, self.round).items()}
        writeback = int(self.scenario.emulator["page.cache.writeback.ms"])
        cuts = power_loss_cuts(log, flushed, now, writeback)
        adds, removes = log_truncation.truncate(self.tables_dir, version, b, cuts,
                                                f"powerloss-{self.round:08d}-b{b}")
        self._log_actions += adds + [{**r, "remove": True} for r in removes]
        self._driver_rows["state_change_log"] += [
            {"time_ms": now, "broker": b, "controller_epoch": -1, "topic": r.topic, "partition": int(r.partition),
             "message": f"Power loss: log {r.topic}-{int(r.partition)} in {r.log_dir} lost its unflushed tail "
                        f"from offset {int(r.offset)}"} for r in cuts.itertuples()]

    def _apply_due(self, now: int) -> None:
        while self.next_event < len(self.events) and self.events[self.next_event].time_ms(self.round_ms) <= now:
            e = self.events[self.next_event]
            self._apply(e.type, e.args, now)
            self.next_event += 1
        for b in sorted(b for b, t in self.paused_until.items() if t <= now):
            del self.paused_until[b]
            self.control.resume(b, now)
        self.isolations = [i for i in self.isolations if i[2] is None or i[2] > now]

    # ------------------------------------------------------------------ the round
    def _unreachable(self) -> dict[int, frozenset]:
        out = {}
        for b in self.scenario.brokers:
            cut = set(self.crashed)
            for a, o, _ in self.isolations:
                if b in a:
                    cut |= o
                if b in o:
                    cut |= a
            cut.discard(b)
            if cut:
                out[b] = frozenset(cut)
        return out

    def _route(self, prev: DataFrame) -> DataFrame:
        """Last round's output as this round's input: state and messages in flight, less what a
        crash destroys (the broker's memory and everything sent to it) and what a network
        partition cuts (messages between the two sides). Rows for the driver that the round also
        produced ride along and are ignored; with no fault in force nothing is filtered, which
        spares the plan analysis of a filter every round (~20 ms)."""
        if not self.crashed and not self.isolations:
            return prev
        if isinstance(prev, pd.DataFrame):
            from .engine import local

            return local.route(prev, self.crashed, self.isolations)
        ids = lambda xs: ", ".join(str(int(x)) for x in sorted(xs))  # noqa: E731
        cond = [f"kind IN ({ids(W.CARRY_KINDS)})"]
        if self.crashed:
            cond.append(f"broker NOT IN ({ids(self.crashed)})")
        for a, o, _ in self.isolations:
            cut = (f"(src IN ({ids(a)}) AND broker IN ({ids(o)})) OR (src IN ({ids(o)}) AND broker IN ({ids(a)}))")
            cond.append(f"NOT (kind IN ({ids(W.MESSAGE_KINDS)}) AND ({cut}))")
        return prev.where(" AND ".join(cond))

    def _produce_batches(self, now: int, send: bool = True) -> None:
        """The round's produce batches to their leaders; those with no leader or a crashed one fail at
        once. `send=False`: the resident engine's tasks sent them (they make the same batches from a copy
        of the workload); the driver only advances its workload and answers the failed ones."""
        b = self.workload.batches(now)
        if b.empty:
            return
        self._produced += int(b["count"].sum())
        b["broker"] = self.control.leaders_of(b["topic"], b["partition"])
        down = (b["broker"] < 0) | b["broker"].isin(sorted(self.crashed))
        if down.any():
            failed = b[down]
            err = ["LEADER_NOT_AVAILABLE" if x < 0 else kerr.NETWORK_EXCEPTION for x in failed["broker"]]
            res = failed.assign(error=[None if a == 0 else e for a, e in zip(failed["acks"], err, strict=True)],
                                base_offset=-1, acked=False, time_ms=now)
            self._driver_rows["produce_results_batches"].append(conform(res, RESULT))
        if send:
            self._send(W.PRODUCE, conform(b[~down], PRODUCE))

    def _throttles(self, tcfg: dict[str, dict]) -> dict:
        """KIP-73 / KIP-113 quotas per broker (only brokers with a finite rate) and the topics' throttled
        replica lists, as the round configuration's `quota` and `throttled_replicas`."""
        quota: dict[str, dict[int, int]] = {}
        for key, name in (("leader", "leader.replication.throttled.rate"),
                          ("follower", "follower.replication.throttled.rate"),
                          ("alter_dirs", "replica.alter.log.dirs.io.max.bytes.per.second")):
            rates = {b: int(self.control.broker_value(b, name)) for b in self.scenario.brokers}
            rates = {b: r for b, r in rates.items() if r < LONG_MAX}
            if rates:
                quota[key] = rates
        return {"quota": quota, "throttled_replicas": {
            t: (c["leader.replication.throttled.replicas"], c["follower.replication.throttled.replicas"])
            for t, c in tcfg.items()
            if c["leader.replication.throttled.replicas"] or c["follower.replication.throttled.replicas"]}}

    def _params(self, now: int) -> RoundParams:
        tcfg = {t: self.control.topic_config(t) for t in self.control.topics()}
        min_isr = {t: int(c["min.insync.replicas"]) for t, c in tcfg.items()}
        cfg = RoundConfig.of(
            self.broker_cfg, self.scenario.emulator, profile=self.profile,
            rules=rules_for(self.profile),  # the version flags the executors read (protocol/rules.py)
            round_ms=self.round_ms,
            topic_unclean={t: bool(c["unclean.leader.election.enable"]) for t, c in tcfg.items()},
            topic_flush={t: (c["flush.messages"], c["flush.ms"]) for t, c in tcfg.items()},
            **self._throttles(tcfg))
        log_version = self.writer.table("log").version()
        return RoundParams(
            run_id=self.run_id, round_no=self.round, now=now, tables_dir=self.tables_dir,
            brokers_dir=self.brokers_dir, log_version=log_version, log_dirs=tuple(self.scenario.log_dirs),
            cfg=cfg, min_isr=min_isr,
            paused=frozenset(b for b in self.paused_until if b not in self.crashed),
            unreachable=self._cut,
            offline_dirs={b: frozenset(d) for b, d in self.offline_dirs.items()},
        )

    def _outbox_wire(self) -> pd.DataFrame | None:
        """The driver's messages for this round, packed (None: none), and the outbox emptied."""
        if not self._outbox:
            return None
        packed = []
        for kind, frame, src in self._outbox:
            # what is sent to a crashed or cut-off broker is lost, as in _route; a START only to a crashed
            # one (a restart event takes its broker out of `crashed` first): the brokers' first START must
            # not start a broker the timeline crashed at time 0 (it ran round 0, then started again)
            lost = set(self.crashed) | (set() if kind == W.START else set(self._cut.get(src, ())))
            frame = frame[~frame["broker"].isin(sorted(lost))]
            w = W.pack(kind, frame)
            w["src"] = np.int32(src)
            packed.append(w)
        self._outbox = []
        return pd.concat(packed, ignore_index=True)

    def _input(self, outbox: bool = True) -> DataFrame:
        """The round's input: the brokers' state and messages in flight, plus (`outbox`) the driver's."""
        parts = []
        if self.state is not None:
            parts.append(self._route(self.state))
        wire = self._outbox_wire() if outbox else None
        if self._local:
            return pd.concat([*parts, *([] if wire is None else [wire])], ignore_index=True) if parts or (
                wire is not None) else W.pack_all([])
        if wire is not None:
            parts.append(self.spark.createDataFrame(pa.Table.from_pandas(wire, schema=W.ARROW_SCHEMA,
                                                                         preserve_index=False)))
        if not parts:
            return self.spark.createDataFrame(W.pack_all([]), schema=W.SPARK_DDL)
        df = parts[0]
        for p in parts[1:]:
            df = df.unionByName(p)
        return df

    def _control_messages(self) -> None:
        """The controllers' requests and ISR answers this round, from the broker that sends them."""
        paused = frozenset(self.paused_until)
        now = self.round * self.round_ms
        for kind, src, frame in self.control.take_messages(now, paused, self.crashed):
            self._send(CONTROL_KINDS[kind], frame, src)

    # ------------------------------------------------------------------ admin requests (admin.py)
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

    def _reachable(self, a: int, b: int) -> bool:
        return b not in self._cut.get(a, ()) and a not in self.crashed

    @_writer
    def step(self, rounds: int = 1) -> Cluster:
        """Run `rounds` rounds, then commit everything buffered."""
        _require_count("rounds", rounds, "must be an integer >= 0")
        self._require_resumable()
        while rounds > 0:
            rounds -= self._advance(min(rounds, self._window_limit()), rounds)
        self.save()
        return self

    @property
    def _local(self) -> bool:
        """Whether rounds run in this process (engine/local.py) rather than as Spark jobs."""
        return self.scenario.emulator.get("engine") == "local"

    def _round(self) -> None:
        self._advance(1)

    def _advance(self, limit: int, horizon: int | None = None) -> int:
        """Run the next round, or with the resident engine (emulator.engine: resident) a window of up to
        `limit` rounds in one Spark job; returns the rounds run. The driver's part is the same either way:
        events due, the controller, produce batches and messages before; commits and the controller's
        inputs after. When the last round left the cluster idle, the rounds up to the next thing due
        (within `horizon` rounds, default `limit`) are first skipped (_jump) and count as advanced."""
        jumped = self._jump(limit if horizon is None else horizon)
        if jumped:
            limit = min(limit, (limit if horizon is None else horizon) - jumped)
        clock = _Stopwatch(self.timings)
        now = self.round * self.round_ms
        self._apply_due(now)
        self._cut = self._unreachable()  # who cannot reach whom this round
        self.control.tick(now, frozenset(self.paused_until))
        self._control_messages()
        self._produce_batches(now)
        params = self._params(now)
        if self.scenario.emulator.get("engine") == "resident":
            from .engine.resident import ResidentRounds, Window

            n = self._quiet_rounds(now, limit)
            tasks = self._resident_tasks()
            # Once placed by a window (task b % tasks hosts broker b), the state stays where it is and the
            # driver's messages travel with the function: no shuffle. (A shuffle over a union with that
            # state would also make Spark ask for a barrier map stage as wide as both inputs, more than
            # the slots.) Otherwise (the first window, a reopened run) everything is shuffled into place;
            # the input is then never empty, which Spark Connect would plan as no tasks at all.
            placed = self._placed == tasks
            inp = self._input(outbox=not placed)
            if not placed:
                inp = inp.repartitionById(tasks, "broker")
            window = Window(first=params, rounds=n, round_ms=self.round_ms,
                            workload=copy.deepcopy(self.workload) if n > 1 else None,
                            leaders=self.control.partition_frame()[["topic", "partition", "leader"]],
                            crashed=frozenset(self.crashed), isolations=tuple((a, o) for a, o, _ in self.isolations),
                            inbox=self._outbox_wire() if placed else None,
                            jump_last=self._jump_last(self.round, limit if horizon is None else horizon - jumped),
                            cycle=self._fetch_cycle())
            clock.lap("driver")
            out = inp.mapInPandas(ResidentRounds(window), W.SPARK_DDL, barrier=True).localCheckpoint(eager=False)
            where: int | None = tasks
        elif self._local:
            from .engine import local

            inp = self._input()
            clock.lap("driver")
            out, side = local.run_round(params, inp)
            where = None
        else:
            inp = self._input()
            clock.lap("driver")
            out = (inp.repartitionById(self.spark_partitions, "broker")
                   .mapInPandas(BrokerRound(params), W.SPARK_DDL)
                   .localCheckpoint(eager=False))
            where = None
        clock.lap("job")
        if not self._local:  # one Spark job: collecting the driver's rows materialises the lazy local checkpoint
            side = pd.DataFrame(out.where(Fn.col("kind").isin(list(W.DRIVER_KINDS))).collect(), columns=list(W.WIRE))
        clock.lap("collect")
        adds = [json.loads(p) for p in side.loc[side["kind"] == W.ADD, "payload"]]
        gauges: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        halted: list[int] = []
        for p in side.loc[side["kind"] == W.RESULT_SUMMARY, "payload"]:
            summary = json.loads(p)
            r = summary.pop("round", self.round)
            halted += summary.pop("halted", [])
            for k, v in summary.pop("timings").items():
                self.timings[f"task.{k}"] += v
            for k, v in summary.items():
                gauges[r][k] += v
        ran = max([*gauges, self.round]) - self.round + 1
        last = self.round + ran - 1
        self._idle_round = last if idle.cluster_idle(gauges[last]) else None
        for r in range(self.round + 1, last + 1):  # the rounds the tasks produced for on their own
            self._produce_batches(r * self.round_ms, send=False)
        now = last * self.round_ms
        self.control.isr_changes(W.unpack(W.ISR_CHANGE, side), now, self._reachable)
        offline = W.unpack(W.OFFLINE_REPLICA, side)
        if len(offline):
            self.control.offline_replicas(offline, now)
        answers = W.unpack(W.ALTER_LOG_DIRS_RESPONSE, side)
        if len(answers):
            self.alter_dir_responses.append(answers.assign(time_ms=now))
        for b in sorted(set(halted) - self.crashed):  # it exited: down until a restart event
            self.crashed.add(b)
            self.control.crash(b, now)
        # one commit for the whole window: a file added and removed inside it never reaches the table
        log = [a for a in adds if a["table"] == "log"] + self._log_actions
        self._log_actions = []
        removed = {a["path"] for a in log if a.get("remove")}
        added = {a["path"] for a in log if not a.get("remove")}
        self.writer.commit("log", [a for a in log if not a.get("remove") and a["path"] not in removed], last,
                           [a for a in log if a.get("remove") and a["path"] not in added])
        clock.lap("commit")
        for a in adds:
            if a["table"] != "log":
                self._history_adds[a["table"]].append(a)
        for r in range(self.round, last + 1):
            g = gauges[r]
            self._driver_rows["metrics"].append({
                "round": r, "time_ms": r * self.round_ms, "under_replicated": g["under_replicated"],
                "under_min_isr": g["under_min_isr"], "isr_shrinks": g["isr_shrinks"],
                "isr_expands": g["isr_expands"], **self.control.metrics()})
        self._driver_rows["partition_state"] += self.control.take_writes()
        self._driver_rows["state_change_log"] += [
            dict(zip(["time_ms", "broker", "controller_epoch", "topic", "partition", "message"], x, strict=True))
            for x in self.control.take_lines()]
        for old in (self.state, self._before_jump):
            if old is not None and not isinstance(old, pd.DataFrame):
                old.unpersist()
        self._before_jump = None
        self.state = out
        self._placed = where
        before = self.round
        self.round = last + 1
        # brokers that shut down this round are gone now (not at the next round's start: a shutdown
        # applied between rounds, Cluster.apply, must still reach its broker in the next round)
        self.crashed |= self.stopping
        self.stopping = set()
        every = int(self.scenario.emulator["history.commit.rounds"])
        if self.round // every > before // every:
            self.flush()
        every = int(self.scenario.emulator.get("checkpoint.rounds", 0))
        if every and self.round // every > before // every:
            self.save()
        clock.lap("history")
        return ran + jumped

    # ------------------------------------------------------------------ the idle jump (protocol/idle.py)
    def _fetch_cycle(self) -> int:
        return idle.fetch_cycle_rounds(self.broker_cfg, self.round_ms)

    def _due_ms(self, now: int) -> int | None:
        """The first emulated time after `now` at which the driver has something to do: a timeline event,
        a controller action or request to deliver, the end of a network partition (None: none)."""
        due = [self.control.next_action_ms(now)]
        if self.next_event < len(self.events):
            due.append(self.events[self.next_event].time_ms(self.round_ms))
        due += [end for _, _, end in self.isolations if end is not None]
        due = [t for t in due if t is not None]
        return min(due) if due else None

    def _jump_last(self, first: int, horizon: int) -> int | None:
        """The round an idle span from round `first` on may skip to, at most: the first round that needs
        the driver, or the last of the `horizon` rounds to run (None: jumping is off). The resident
        tasks get it too, to end a window where the driver would jump."""
        if not self.scenario.emulator.get("idle.jump") or self._throttling():
            return None
        last = first + horizon - 1
        due = self._due_ms(first * self.round_ms - 1)
        return last if due is None else min(last, -(-due // self.round_ms))

    def _throttling(self) -> bool:
        """Whether a KIP-73 throttle is set (a rate and a throttled replica list): then no round is
        skipped. An idle broker's quota sensors still change as time passes (every throttled fetch,
        even an empty one, keeps a sample alive, and the allowance a request carries grows with the
        window), so the state after skipped rounds is not the idle state moved along. Kafka's
        `kafka-reassign-partitions --verify` removes the throttles once a move is done."""
        tcfg = {t: self.control.topic_config(t) for t in self.control.topics()}
        return replication_quota.active(self._throttles(tcfg))

    def _pass_controller_timers(self, last: int, end: int) -> int:
        """Extend an idle span over controller timers that find nothing to do (an auto leader-rebalance
        check of a balanced cluster, every leader.imbalance.check.interval.seconds): the timer runs at
        its round's time on the driver, as it would have (it reads only ZooKeeper, which idle brokers
        do not change), and the span goes on to the next thing due. A timer that would act (send a
        request, write ZooKeeper, change a gauge) is not run here: its round runs. Returns the span's
        new last round (at most `end`)."""
        r = self.round_ms
        while last < end:
            t = self.control.next_action_ms(last * r - 1)
            ev = self.events[self.next_event].time_ms(r) if self.next_event < len(self.events) else None
            others = [x for x in [ev, *(e for _, _, e in self.isolations)] if x is not None]
            if t is None or -(-t // r) != last or any(-(-x // r) <= last for x in others):
                break
            probe = copy.deepcopy(self.control)
            probe.tick(last * r, frozenset())
            nxt = probe.next_action_ms(last * r)
            if (nxt is not None and nxt <= last * r + 1) or probe.writes or _gauges(probe) != _gauges(self.control):
                break
            self.control = probe
            last = self._jump_last(last + 1, end - last)
        return last

    def _jump(self, horizon: int) -> int:
        """Skip the idle rounds before the next thing due: when every task reported the last round run
        quiescent (idle.cluster_idle) and the driver sends nothing (no producer, no shutdown or pause in
        progress), whole fetch cycles up to _jump_last are not run. The brokers' rows are moved along
        by idle.shift_time inside the next round's Spark job; the skipped rounds leave no rows in the
        per-round tables (metrics, replica_state, follower_state). Returns the rounds skipped."""
        if self._idle_round != self.round - 1 or self.state is None:
            return 0
        if self._outbox or self.stopping or self.paused_until or self.workload.active:
            return 0
        last = self._jump_last(self.round, horizon)
        if last is None or idle.jump_rounds(last - self.round, self._fetch_cycle()) == 0:
            return 0
        last = self._pass_controller_timers(last, self.round + horizon - 1)
        d = idle.jump_rounds(last - self.round, self._fetch_cycle())
        from .engine.idle_jump import IdleJump

        before = (self.round - 1) * self.round_ms
        p = self._params(before)
        fn = IdleJump(rounds=d, last_ms=before, round_no=self.round, cfg=p.cfg, brokers_dir=self.brokers_dir,
                      log_dirs=p.log_dirs, offline_dirs=p.offline_dirs, unreachable=self._cut)
        self._before_jump = self.state
        if self._local:
            from .engine import local

            self.state = local.jump(fn, self.state)
        else:
            self.state = self.state.mapInPandas(fn, W.SPARK_DDL)
        self.round += d
        self._idle_round = None
        return d

    def _window_limit(self) -> int:
        emu = self.scenario.emulator
        return int(emu.get("resident.rounds", 1)) if emu.get("engine") == "resident" else 1

    def _quiet_rounds(self, now: int, limit: int) -> int:
        """How many rounds from `now` on may run without the driver: none of them (but the first) has a
        timeline event due, a pause or network partition ending, a controller action or request to deliver,
        or a shutdown in progress."""
        if limit <= 1 or self.stopping or self.paused_until:
            return 1
        first = self._due_ms(now)  # the first round at or after it needs the driver
        if first is None:
            return limit
        return int(max(1, min(limit, -(-(first - now) // self.round_ms))))

    def _resident_tasks(self) -> int:
        """Tasks of a resident window: the Spark partitions, but no more than the cluster's task slots
        (a barrier stage needs all its tasks running at once)."""
        master = self.spark.conf.get("spark.master", "") or ""
        m = re.fullmatch(r"local\[(\d+|\*)(?:,\d+)?\]", master)
        if m:
            slots = (os.cpu_count() or 1) if m.group(1) == "*" else int(m.group(1))
        elif master == "local":
            slots = 1
        else:
            m = re.fullmatch(r"local-cluster\[(\d+),\s*(\d+),\s*\d+\]", master)
            if m:
                slots = int(m.group(1)) * int(m.group(2))
            else:  # a real cluster: its cores now (classic sessions; Spark Connect has no SparkContext)
                try:
                    slots = int(self.spark.sparkContext.defaultParallelism)
                except Exception:
                    slots = self.spark_partitions
        return max(1, min(self.spark_partitions, slots))

    @_writer
    def flush(self) -> None:
        """Commit buffered history files and driver-side rows (one transaction per table). Rows an
        operator tool adds after the round's commit stay buffered (and saved) until the next round."""
        if getattr(self, "_flushed_round", None) == self.round:
            self.control.save(self.out)
            self._save_meta()
            return
        self._flushed_round = self.round
        last = self.round - 1
        tag = f"{last:08d}-driver"
        if self._driver_rows.get("produce_results_batches"):
            res = concat(self._driver_rows.pop("produce_results_batches"), RESULT)
            self._history_adds["produce_results"].append(
                T.write_file(self.tables_dir, "produce_results", expand_results(res), tag))
        for r in self._driver_rows.get("partition_state", []):
            r.setdefault("adding", [])
            r.setdefault("removing", [])
        for name in ("partition_state", "metrics", "state_change_log"):
            rows = self._driver_rows.pop(name, [])
            if rows:
                t = pa.Table.from_pylist(rows, schema=T.SCHEMAS[name])
                self._history_adds[name].append(T.write_file(self.tables_dir, name, t, tag))
        for name, adds in sorted(self._history_adds.items()):
            if adds:
                self.writer.commit(name, adds, last)
        self._history_adds.clear()
        self.control.save(self.out)
        self._save_meta()

    @_writer
    def run(self, until_ms: int | None = None, progress: bool = False) -> Cluster:
        """Run until `until_ms` (default: the scenario's end), then write OUT/summary.json."""
        if until_ms is not None:
            _require_count("until_ms", until_ms, "must be an integer >= 0 (emulated milliseconds)")
        self._require_resumable()
        end = self.scenario.end_ms if until_ms is None else until_ms
        total = max(0, end // self.round_ms + 1 - self.round)
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=total, unit="round", desc=self.scenario.name, leave=False)
        while total > 0:
            ran = self._advance(min(total, self._window_limit()), total)
            total -= ran
            if bar is not None:
                bar.update(ran)
        if bar is not None:
            bar.close()
        self.flush()
        self.compact()
        summary, found = audit_run(self.out)  # the summary and the violations, from one read of the tables
        write_violations(self.tables_dir, found, summary["rounds"])
        self.writer.refresh("violations")
        self.save()  # the commit point: after every commit of the run, before the summary it leads to
        self.run_dir.write_summary(summary)
        self._summary = (self.round, summary)  # summary() needs no second read of the tables
        return self

    @_writer
    def compact(self) -> None:
        """Fold each table's small per-round files (reads over many small files are slow)."""
        for name in T.SCHEMAS:
            self.writer.table(name).optimize.compact()
        self.writer.refresh()

    # ------------------------------------------------------------------ views
    def _df(self, name: str) -> DataFrame:
        return read_table_df(self.spark, self.tables_dir, name)

    def log(self, topic: str | None = None, partition: int | None = None) -> DataFrame:
        df = self._df("log")
        if topic is not None:
            df = df.where(Fn.col("topic") == topic)
        if partition is not None:
            df = df.where(Fn.col("partition") == partition)
        return df.orderBy("topic", "partition", "broker", "offset")

    def consume(self, topic: str | None = None, partition: int | None = None) -> DataFrame:
        """The records a consumer reads now: each partition's leader's log below its HW."""
        from .protocol.consumer import visible_records
        from .scenario.checker import final_replicas

        log = T.read_table(self.tables_dir, "log").to_pandas()
        if topic is not None:
            log = log[log["topic"] == topic]
        if partition is not None:
            log = log[log["partition"] == partition]
        reps = final_replicas(self.tables_dir)
        names = T.SCHEMAS["log"].names
        rows = visible_records(log, reps)[names] if len(reps) and len(log) else log.iloc[0:0][names]
        return self.spark.createDataFrame(rows, schema=spark_schema_of("log"))

    def replica_state(self) -> DataFrame:
        """One row per replica per round, with the leader's view of each follower (`remote_leo`,
        `last_caught_up_ms`; null on the leader's own row) joined in from follower_state."""
        rs = self._df("replica_state")
        fs = self._df("follower_state").select(
            "round", "topic", "partition", Fn.col("replica").alias("broker"), "remote_leo", "last_caught_up_ms")
        return rs.join(fs, ["round", "topic", "partition", "broker"], "left").select(
            *T.SCHEMAS["replica_state"].names, "remote_leo", "last_caught_up_ms").orderBy(
            "round", "topic", "partition", "broker")

    def follower_state(self) -> DataFrame:
        return self._df("follower_state").orderBy("round", "topic", "partition", "replica")

    def partition_state(self) -> DataFrame:
        return self._df("partition_state").orderBy("time_ms", "topic", "partition", "version")

    def state_change_log(self) -> DataFrame:
        return self._df("state_change_log").orderBy("time_ms", "broker", "topic", "partition")

    def produce_results(self) -> DataFrame:
        return self._df("produce_results").orderBy("record_id")

    def metrics(self) -> DataFrame:
        return self._df("metrics").orderBy("round")

    def describe_topics(self) -> DataFrame:
        """The latest state of every partition: topic, partition, leader, replicas, isr, epochs."""
        pdf = latest_partitions(self.tables_dir, self._uncommitted_partition_state())
        schema = "topic string, partition int, leader int, replicas array<int>, isr array<int>, " \
                 "leader_epoch int, controller_epoch int, version int"
        return self.spark.createDataFrame(pdf[["topic", "partition", "leader", "replicas", "isr", "leader_epoch",
                                               "controller_epoch", "version"]], schema=schema)

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
        if violations_current(self.out):
            df = self._df("violations")
        else:
            from .scenario.checker import violations_table

            df = self.spark.createDataFrame(violations_table(audit_run(self.out)[1]))
        return df.orderBy("round", "topic", "partition", "kind")

    def verify_replicas(self, topic_white_list: str = ".*") -> list[str]:
        """kafka-replica-verification's lines over the run's final state (tools/replica_verification.py)."""
        from .tools.replica_verification import verify_run

        return verify_run(self.out, topic_white_list).lines


def _gauges(control: ControlPlane) -> dict:
    """The controller's metrics row as it is now (metrics() also resets the unclean-election count)."""
    n = control.unclean_elections
    out = control.metrics()
    control.unclean_elections = n
    return out


__all__ = ["Cluster", "audit_run", "describe_run", "latest_partitions", "read_table_df", "summarize",
           "violations_current", "write_violations"]  # the readers stay importable from here
