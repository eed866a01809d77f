"""The driver's round loop: what a run does between the Cluster facade's calls (cluster.py) and the engine's
Spark jobs (engine/). Per round or resident window: apply the events due (timeline.py), let the controller
act, route last round's messages (dropping those to crashed or cut-off brokers), run the brokers' rounds
(one `mapInPandas` over all brokers grouped into a few Spark partitions, a barrier window of rounds with the
resident engine, or in this process), commit the window's log files in one Delta transaction, hand the
controller its inputs, and keep the brokers' rows for the next round. Nothing the executors need lives
only here: state travels in the DataFrame, logs in Delta, checkpoints on disk. Persistence is the run
directory's (run_dir.py): the loop's fields are a DriverState it saves and reopens."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import threading
import time
import uuid
from collections import defaultdict
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as Fn

from ..controller.control_plane import ControlPlane
from ..engine import rows as W
from ..engine.broker_round import BrokerRound, RoundParams, WindowFiles, expand_results
from ..protocol import idle, produce, replica_marks
from ..protocol.broker import RoundFacts
from ..protocol.config import (
    LONG_MAX,
    ClusterSettings,
    EmulatorSettings,
    RoundSettings,
    TopicSettings,
    broker_config,
    profile_of,
    topic_settings,
)
from ..protocol.frames import PRODUCE, RESULT, concat, conform
from ..run_dir import CLIENT, RUN_FORMAT_VERSION, DriverState, RunDir
from ..scenario import Scenario
from ..scenario.checker import Checks
from ..scenario.workload import Workload
from ..storage import tables as T
from ..storage.tables import TableWriter
from .idle_jumps import IdleJumps
from .timeline import Timeline

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


class _Driven:
    """A RoundLoop attribute that is a field of its DriverState (run_dir.py), which the run directory saves."""

    def __init__(self, field: str | None = None) -> None:
        self.field = field

    def __set_name__(self, owner: type, name: str) -> None:
        self.field = self.field or name

    def __get__(self, obj: RoundLoop | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        if obj.driver is None:
            raise AttributeError(f"{self.field}: run {obj.out} has no driver state this version can continue")
        return getattr(obj.driver, self.field)

    def __set__(self, obj: RoundLoop, value: Any) -> None:
        setattr(obj.driver, self.field, value)


PER_REPLICA_ROUND = ("replica_state", "follower_state")  # history tables of a row per replica (or follower) per round


class RoundLoop(Timeline, IdleJumps):
    """A run's driver side: its DriverState (the fields below), the brokers' rows after the last round,
    the table writer, and the round loop over them. Cluster (cluster.py) is the facade users hold."""

    # the driver's state, a DriverState the run directory saves; these names read and write its fields
    scenario, run_id, round_ms, control, workload, spark_partitions = (
        _Driven(), _Driven(), _Driven(), _Driven(), _Driven(), _Driven())
    round, events, next_event, crashed, stopping, paused_until = (
        _Driven(), _Driven(), _Driven(), _Driven(), _Driven(), _Driven())
    isolations, offline_dirs, alter_dir_responses, tool_state = _Driven(), _Driven(), _Driven(), _Driven()
    _outbox, _produced, _driver_rows = _Driven("outbox"), _Driven("produced"), _Driven("driver_rows")
    _log_actions, _flushed_round = _Driven("log_actions"), _Driven("flushed_round")
    _idle_round = _Driven("idle_round")
    checks = _Driven()  # the checker's incremental state (scenario/checker.Checks), None for a run saved before it

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
        self._recovered = True  # False: reopened, not yet recovered (recover)

    @property
    def resumable(self) -> bool:
        return self.driver is not None

    @property
    def reopened(self) -> bool:
        """Reopened from its files and not recovered yet: its first write checks and recovers the directory."""
        return not self._recovered

    @property
    def broker_cfg(self) -> dict:
        """The cluster's broker configs (static, and dynamic cluster-wide defaults): the controller's."""
        return self.control.broker_cfg

    @property
    def profile(self) -> str:
        return self.control.profile

    def save(self) -> None:
        """Write what the driver holds (controller, ZooKeeper, producers, timeline position) and the
        brokers' in-memory state (the last round's output rows) into the run directory, so another
        process can continue the run or act on it. A save writes the brokers' rows into a new state
        folder, then drops the older ones (a reader of the old one is never overwritten underneath);
        rows already in the state folder (a second save in the same round, a reopened run) are not
        written again. The driver state is the run's commit point: written last, it records the
        tables' versions it goes with."""
        self.recover()
        self.flush()
        if self.state is not None and self.state is not self._saved_state:
            folder = self.run_dir.new_state_folder(self.round)
            path = os.path.join(self.out, folder)
            if isinstance(self.state, pd.DataFrame):  # the in-process engine's rows
                from ..engine import local

                local.save_state(self.state, path)
            else:
                self.state_rows().where(Fn.col("kind").isin(list(W.CARRY_KINDS))).write.parquet(path)
            self.driver.state_folder = folder
            self._saved_state = self.state
        self.save_driver()

    def save_driver(self) -> None:
        self.driver.table_versions = T.table_versions(self.tables_dir)
        self.run_dir.save_driver(self.driver)

    def restore(self) -> None:
        if self.run_dir.format_version() != RUN_FORMAT_VERSION:
            return  # its tables can be read; continuing it is refused (require_resumable)
        self.driver = self.run_dir.load()
        self._transient()
        self._recovered = False  # a reopened run is recovered when first continued or acted on (recover)
        folder = self.run_dir.state_path(self.driver)
        if folder is not None and self.local:
            from ..engine import local

            self.state = self._saved_state = local.load_state(folder)
        elif folder is not None:
            if self.spark is None:
                from ..engine.session import get_spark

                self.spark = get_spark()
            self.state = self._saved_state = self.spark.read.schema(W.SPARK_SCHEMA).parquet(folder)

    def recover(self) -> None:
        """Before a reopened run is continued or changed: undo what was written after its driver state
        was saved (a run killed mid-round, RunDir.recover), so it goes on as an uninterrupted run does.
        Not on open: a reader of a run that another process is running must not undo its commits."""
        if self._recovered:
            return
        self._recovered = True
        self.rolled_back = self.run_dir.recover(self.driver)
        if self.rolled_back:
            self.writer = self._table_writer()  # handles opened before the rollback

    def require_resumable(self) -> None:
        if not self.resumable:
            self.run_dir.check_format()
        self.require_delta_writer()
        self.recover()

    def require_delta_writer(self) -> None:
        """ScenarioError when the run commits through delta-spark and this session cannot (storage/delta_jvm)."""
        if self.emulator.delta_writer == "delta-spark":
            from ..storage.delta_jvm import require_delta_session

            require_delta_session(self.spark)

    @property
    def emulator(self) -> EmulatorSettings:
        """The scenario's emulator settings (a run saved before a setting existed: its default)."""
        return self.scenario.emulator_settings

    def _table_writer(self) -> TableWriter:
        """The run's committer, compacting mid-run as the scenario says, through the Delta writer it names."""
        committer = None
        if self.emulator.delta_writer == "delta-spark":
            from ..storage.delta_jvm import DeltaSparkCommitter

            committer = DeltaSparkCommitter(lambda: self.spark)
        return TableWriter(self.tables_dir, self.run_id, self.emulator.delta_compact_min_files, committer)

    def _transient(self) -> None:
        """What the driver rebuilds rather than saves: table handles, this round's cuts, timings."""
        self.writer = self._table_writer()
        self._cut: dict[int, frozenset] = {}  # who cannot reach whom this round
        self._placed: int | None = None  # the resident tasks `state` is placed over (None: not placed)
        self._ahead: dict[int, list] = {}  # the controller's ticks a window's plan ran ahead (plan_window)
        self._crashes_ahead: dict[int, tuple[int, ...]] = {}  # the crashes in it (round offset -> brokers)
        self._before_jump: DataFrame | None = None  # the rows an idle jump's job reads, until it has run
        self._history_adds: dict[str, list[dict]] = defaultdict(list)
        self._held: WindowFiles | None = None  # the in-process engine's unwritten rows (commit_held)
        self.timings: dict[str, float] = defaultdict(float)  # seconds per round phase, for bench
        self._warm: threading.Thread | None = None  # engine/warm_up.py, joined before the first window

    def start(self, sc: Scenario) -> None:
        broker_cfg = broker_config(sc.config)
        settings = ClusterSettings.of(broker_cfg, sc.emulator_settings)
        profile = profile_of(settings.inter_broker_protocol_version)
        n = sc.emulator_settings.spark_partitions
        if n <= 0:
            n = 1 if self.spark is None else int(self.spark.conf.get("spark.sql.shuffle.partitions", "2"))
        self.driver = DriverState(
            scenario=sc, run_id=uuid.uuid4().hex[:12], round_ms=sc.round_ms,
            control=ControlPlane(list(sc.brokers), sc.racks, broker_cfg, sc.seed, profile, emulator=dict(sc.emulator)),
            workload=Workload(sc.round_ms, int(settings.request_timeout_ms)),
            spark_partitions=max(1, min(n, len(sc.brokers))),
            events=sorted(sc.timeline, key=lambda e: (e.time_ms(sc.round_ms), e.index)),
            outbox=[(W.START, pd.DataFrame({"broker": list(sc.brokers)}), CLIENT)], checks=Checks())
        self._transient()
        if self.spark is not None and self.engine == "resident":  # the session's cold costs, paid while the cluster is set up
            from ..engine.resident import placing_rows
            from ..engine.warm_up import warm_up

            tasks = self.resident_tasks()
            self._warm = warm_up(self.spark, lambda: placing_rows(self.spark, tasks).repartitionById(tasks, "broker"))
        for spec in sc.topics:
            self.control.create_topic(spec, 0)
        if any(spec.state for spec in sc.topics):  # an imported cluster: its logs exist before the brokers start
            from ..scenario.initial_logs import write_initial_logs

            self.workload.next_record_id = write_initial_logs(
                self.tables_dir, self.brokers_dir, sc.topics, sc.emulator_settings.initial_record_bytes,
                sc.log_dirs, sc.brokers)
        self.control.start(-self.round_ms)  # the scenario's cluster and topics exist when the run starts
        self.control.save(self.out)
        self.save_driver()
        self.save_meta()  # run.json last: from here on the directory is a run, continued whenever it stops

    def save_meta(self) -> None:
        self.meta = self.driver.meta()
        self.run_dir.write_meta(self.meta)

    @staticmethod
    def _blobs(state: DataFrame | pd.DataFrame | None) -> bool:
        """Whether `state` is a resident window's output: the carried frames in STATE_BLOB rows."""
        return state is not None and not isinstance(state, pd.DataFrame) and "blob" in state.columns

    def state_rows(self) -> DataFrame | pd.DataFrame | None:
        """The brokers' rows as wire rows (SPARK_SCHEMA), whichever engine left them: a resident window's
        blobs are unpacked in a narrow map (each partition stays where it is)."""
        if self._blobs(self.state):
            return self.state.mapInPandas(W.Unblob(), W.SPARK_SCHEMA)
        return self.state

    def route(self, prev: DataFrame) -> DataFrame:
        """Last round's output as this round's input: state and messages in flight, less what a
        crash destroys (the broker's memory and everything sent to it) and what a network
        partition cuts (messages between the two sides). Rows for the driver that the round also
        produced ride along and are ignored; with no fault in force nothing is filtered, which
        spares the plan analysis of a filter every round (~20 ms)."""
        if not self.crashed and not self.isolations:
            return prev
        if isinstance(prev, pd.DataFrame):
            from ..engine import local

            return local.route(prev, self.crashed, self.isolations)
        ids = lambda xs: ", ".join(str(int(x)) for x in sorted(xs))  # noqa: E731
        cond = [f"kind IN ({ids(W.CARRY_KINDS)})"]
        if self.crashed:
            cond.append(f"broker NOT IN ({ids(self.crashed)})")
        for a, o, _ in self.isolations:
            cut = (f"(src IN ({ids(a)}) AND broker IN ({ids(o)})) OR (src IN ({ids(o)}) AND broker IN ({ids(a)}))")
            cond.append(f"NOT (kind IN ({ids(W.MESSAGE_KINDS)}) AND ({cut}))")
        return prev.where(" AND ".join(cond))

    def produce_batches(self, now: int | list[int], send: bool = True) -> None:
        """The round's produce batches to their leaders; those with no leader or a crashed one fail at
        once. `send=False`: the resident engine's tasks sent them (they make the same batches from a copy
        of the workload); the driver only advances its workload and answers the failed ones, for all the
        rounds of a window at once (`now` a list: leaders and crashes are fixed within a window, so the
        rounds' batches are routed together, not one lookup per round, in runs of at most ROUTE_ROWS batches:
        a 1M-replica window's rounds at once held ~1.3M rows on a driver that must stay under 2 GiB)."""
        times = [now] if isinstance(now, int) else now
        if not send and not self._may_fail():  # nothing to answer: the workload only moves on
            self._produced += sum(self.workload.advance(t) for t in times)
            return
        run: list[pd.DataFrame] = []
        rows = 0
        for t in times:
            run.append(self.workload.batches(t))
            rows += len(run[-1])
            if rows >= self.ROUTE_ROWS:
                self._route(concat(run, PRODUCE), send)
                run, rows = [], 0
        if run:
            self._route(concat(run, PRODUCE), send)

    ROUTE_ROWS = 200_000

    def _may_fail(self) -> bool:
        """Whether a batch of the active producers can fail at once: a partition they write to has no leader,
        or a crashed one (leaders and crashes stay as they are within a window)."""
        topics, parts = self.workload.written()
        if not len(parts):
            return False
        return bool(self._down(self.control.leaders_of(pd.Series(topics, dtype=object), pd.Series(parts))).any())

    def _down(self, leaders: np.ndarray) -> np.ndarray:
        """Whether a batch sent to each leader fails at once: no leader (-1), or a crashed one."""
        return (leaders < 0) | np.isin(leaders, sorted(self.crashed))

    def _route(self, b: pd.DataFrame, send: bool) -> None:
        if b.empty:
            return
        self._produced += int(b["count"].sum())
        b["broker"] = self.control.leaders_of(b["topic"], b["partition"])
        down = self._down(b["broker"].to_numpy())
        if down.any():
            failed = b[down]
            res = failed.assign(error=produce.unsent_batch_errors(failed["broker"], failed["acks"]),
                                base_offset=-1, acked=False, time_ms=failed["sent_ms"])  # sent in its round
            self._driver_rows["produce_results_batches"].append(conform(res, RESULT))
        if send:
            self.send(W.PRODUCE, conform(b[~down], PRODUCE))

    def throttles(self, tcfg: dict[str, TopicSettings]) -> dict:
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
            t: (c.leader_replication_throttled_replicas, c.follower_replication_throttled_replicas)
            for t, c in tcfg.items()
            if c.leader_replication_throttled_replicas or c.follower_replication_throttled_replicas}}

    def params(self, now: int) -> RoundParams:
        tcfg = {t: self.control.topic_config(t) for t in self.control.topics()}
        min_isr = {t: c.min_insync_replicas for t, c in tcfg.items()}
        cfg = RoundSettings.of(self.broker_cfg, self.emulator, self.profile, round_ms=self.round_ms,
                               **topic_settings(tcfg), **self.throttles(tcfg))
        log_version = self.writer.table("log").version()
        return RoundParams(
            run_id=self.run_id, round_no=self.round, now=now, tables_dir=self.tables_dir,
            brokers_dir=self.brokers_dir, log_version=log_version, facts=RoundFacts(
                cfg=cfg, min_isr=min_isr, log_dirs=tuple(self.scenario.log_dirs),
                offline_dirs={b: frozenset(d) for b, d in self.offline_dirs.items()},
                unreachable=self._cut, paused=frozenset(b for b in self.paused_until if b not in self.crashed)))

    def outbox_wire(self, outbox: list | None = None) -> pd.DataFrame | None:
        """The driver's messages for this round, packed (None: none), and the outbox emptied; or those of
        `outbox` ((kind, frame, sending broker) as the outbox holds them), the driver's outbox left alone."""
        if outbox is None:
            outbox, self._outbox = self._outbox, []
        if not outbox:
            return None
        packed = []
        for kind, frame, src in outbox:
            # what is sent to a crashed or cut-off broker is lost, as in _route; a START only to a crashed
            # one (a restart event takes its broker out of `crashed` first): the brokers' first START must
            # not start a broker the timeline crashed at time 0 (it ran round 0, then started again)
            lost = set(self.crashed) | (set() if kind == W.START else set(self._cut.get(src, ())))
            frame = frame[~frame["broker"].isin(sorted(lost))]
            w = W.pack(kind, frame)
            w["src"] = np.int32(src)
            packed.append(w)
        return W.concat(packed)  # (pd.concat checks every value of the all-null slots: ~1.8 s at 300k replicas)

    def input(self, outbox: bool = True) -> DataFrame:
        """The round's input: the brokers' state and messages in flight, plus (`outbox`) the driver's."""
        parts = []
        if self.state is not None:
            parts.append(self.route(self.state_rows()))
        wire = self.outbox_wire() if outbox else None
        if self.local:
            # column by column (W.concat): pd.concat checks every null slot, ~0.5 s a round at 60k replicas
            return W.concat([*parts, *([] if wire is None else [wire])]) if parts or (
                wire is not None) else W.pack_all([])
        if wire is not None:
            parts.append(self.spark.createDataFrame(pa.Table.from_pandas(wire, schema=W.ARROW_SCHEMA,
                                                                         preserve_index=False)))
        if not parts:
            return self.spark.createDataFrame(W.pack_all([]), schema=W.SPARK_SCHEMA)
        df = parts[0]
        for p in parts[1:]:
            df = df.unionByName(p)
        return df

    def control_messages(self) -> None:
        """The controllers' requests and ISR answers this round, from the broker that sends them."""
        paused = frozenset(self.paused_until)
        now = self.round * self.round_ms
        for kind, src, frame in self.control.take_messages(now, paused, self.crashed):
            self.send(CONTROL_KINDS[kind], frame, src)

    def _reachable(self, a: int, b: int) -> bool:
        return b not in self._cut.get(a, ()) and a not in self.crashed

    @property
    def engine(self) -> str:
        """The engine the rounds run on: the scenario's `emulator.engine`, except that Spark refuses barrier
        jobs while dynamic allocation is on (BarrierJobRunWithDynamicAllocationException), so on such a
        cluster the resident engine's windows become one job per round (same tables, slower)."""
        engine = self.emulator.engine
        if engine == "resident" and self.spark is not None and self._dynamic_allocation():
            return "rounds"
        return engine

    def _dynamic_allocation(self) -> bool:
        if not hasattr(self, "_dynamic"):
            try:
                on = str(self.spark.conf.get("spark.dynamicAllocation.enabled", "false")).lower() == "true"
                master = str(self.spark.conf.get("spark.master", "") or "")
            except Exception:  # a session whose conf cannot be read: assume a plain cluster
                on, master = False, ""
            self._dynamic = on and not master.startswith("local")  # Spark ignores it in local mode
        return self._dynamic

    @property
    def local(self) -> bool:
        """Whether rounds run in this process (engine/local.py) rather than as Spark jobs."""
        return self.engine == "local"

    def advance(self, limit: int, horizon: int | None = None) -> int:
        """Run the next round, or with the resident engine (emulator.engine: resident) a window of up to
        `limit` rounds in one Spark job; returns the rounds run. The driver's part is the same either way:
        events due, the controller, produce batches and messages before (prepare); commits and the
        controller's inputs after (take_results). When the last round left the cluster idle, the rounds up
        to the next thing due (within `horizon` rounds, default `limit`) are first skipped (jump) and count
        as advanced."""
        horizon = limit if horizon is None else horizon
        jumped = self.jump(horizon)
        if jumped:
            limit = min(limit, horizon - jumped)
        clock = _Stopwatch(self.timings)
        now = self.round * self.round_ms
        self.prepare(now)
        params = self.params(now)
        out, side, where = self._job(params, limit, horizon - jumped, clock)
        clock.lap("job")
        if not self.local:  # one Spark job: collecting the driver's rows materialises the lazy local checkpoint
            side = W.driver_rows(out)
        clock.lap("collect")
        if where is not None:  # a resident window's job has run: its tasks have met
            shutil.rmtree(self._meetings, ignore_errors=True)
        ran = self.take_results(out, side, where, clock)
        clock.lap("history")
        return ran + jumped

    @property
    def _meetings(self) -> str:
        return os.path.join(os.path.abspath(self.out), "mesh")

    def _meeting_folder(self) -> str:
        """A new folder for a resident window's tasks to exchange their addresses in (the run directory is
        shared by every executor; a name of its own per window, so no task reads an earlier job's files)."""
        return os.path.join(self._meetings, uuid.uuid4().hex)

    def prepare(self, now: int) -> None:
        """The driver's part before a round: the events due, who cannot reach whom, the controller's timers
        and requests, and the round's produce batches (all into the outbox)."""
        self.apply_due(now)
        self._cut = self.unreachable()  # who cannot reach whom this round
        self.control.tick(now, frozenset(self.paused_until))
        self.control_messages()
        self.produce_batches(now)

    def _job(self, params: RoundParams, limit: int, horizon: int,
             clock: _Stopwatch) -> tuple[DataFrame | pd.DataFrame, pd.DataFrame | None, int | None]:
        """Start the round's (or window's) job: (the brokers' rows out, the driver's rows when they are
        already here, the resident tasks the rows are placed over)."""
        side = None
        if self.engine == "resident":
            from ..engine.resident import ResidentRounds, Window, placing_rows, window_job, write_inbox

            if self._warm is not None:
                self._warm.join()
                self._warm = None
            plan = self.plan_window(params.now, limit)
            self._ahead = plan.ticks  # the controller's ticks to catch up with after the window (take_results)
            self._crashes_ahead = plan.crashes  # and the crashes the tasks carry out
            tasks = self.resident_tasks()
            # Once placed by a window (task b % tasks hosts broker b), the state stays where it is: no
            # shuffle. (A shuffle over a union with that state would also make Spark ask for a barrier map
            # stage as wide as both inputs, more than the slots.) Otherwise (the first window, a reopened
            # run) the state is shuffled into place with one PLACE row per task, so the input is never
            # empty, which Spark Connect would plan as no tasks at all. The driver's messages go to each
            # task in a file of the window's folder (write_inbox), never through Spark.
            placed = self._placed == tasks
            if placed and self._blobs(self.state):  # the last window's output as it is: its tasks route it
                inp = self.state
            elif placed:
                inp = self.route(self.state_rows())
            else:
                inp = placing_rows(self.spark, tasks)
                if self.state is not None:
                    inp = self.route(self.state_rows()).unionByName(inp)
                inp = inp.repartitionById(tasks, "broker")
            meet = self._meeting_folder()
            # the controller's requests of the ticks run ahead, each in its round, as control_messages sends them
            wires = {0: self.outbox_wire(), **{k: self.outbox_wire([(CONTROL_KINDS[kind], frame, src)
                                                                    for kind, src, frame in msgs])
                                               for k, msgs in plan.ticks.items()}}
            inbox, sends = write_inbox(meet, wires, tasks)
            n = plan.rounds
            window = Window(first=params, rounds=n, round_ms=self.round_ms,
                            workload=copy.deepcopy(self.workload) if n > 1 else None,
                            leaders=self.control.partition_frame()[["topic", "partition", "leader"]],
                            crashed=frozenset(self.crashed), isolations=tuple((a, o) for a, o, _ in self.isolations),
                            inbox=inbox, sends=sends, ticks=tuple(sorted(plan.ticks)),
                            jump_last=self.jump_last(self.round, horizon, plan if plan.ticks or plan.crashes else None),
                            cycle=self.fetch_cycle(), meet=meet, crashes=self._crashing(plan.crashes),
                            history_rows=self.emulator.resident_history_rows)
            clock.lap("driver")
            out = window_job(inp, ResidentRounds(window))
            where: int | None = tasks
        elif self.local:
            from ..engine import local

            inp = self.input()
            clock.lap("driver")
            if self._held is None:
                self._held = WindowFiles(writer=0)
            out, side = local.run_round(params, inp, self._held)
            where = None
        else:
            inp = self.input()
            clock.lap("driver")
            out = (inp.repartitionById(self.spark_partitions, "broker")
                   .mapInPandas(BrokerRound(params), W.SPARK_SCHEMA)
                   .localCheckpoint(eager=False))
            where = None
        return out, side, where

    def _crashing(self, crashes: dict[int, tuple[int, ...]]) -> tuple:
        """A window's crashes for its tasks: (round offset, brokers, who cannot reach whom from then on)."""
        out, down = [], set(self.crashed)
        for k in sorted(crashes):
            down |= set(crashes[k])
            out.append((k, tuple(crashes[k]), self.unreachable(down)))
        return tuple(out)

    def take_results(self, out: DataFrame | pd.DataFrame, side: pd.DataFrame, where: int | None,
                     clock: _Stopwatch) -> int:
        """The driver's part after a job: the tasks' gauges and timings, the controller's inputs (ISR
        changes, offline replicas, halted brokers), one log commit for the whole window, the history rows;
        `out` becomes the brokers' rows for the next round. Returns the rounds the job ran."""
        adds = [json.loads(p) for p in side.loc[side["kind"] == W.ADD, "payload"]]
        gauges: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        halted: list[int] = []
        marked: list[tuple[int, dict]] = []
        for p in side.loc[side["kind"] == W.RESULT_SUMMARY, "payload"]:
            summary = json.loads(p)
            r = summary.pop("round", self.round)
            halted += summary.pop("halted", [])
            marked.append((r, summary.pop(replica_marks.MARKS, None)))
            for k, v in summary.pop("timings").items():
                self.timings[f"task.{k}"] += v
            for k, v in summary.items():
                gauges[r][k] += v
        if self.checks is not None:  # the checker's state folds the rounds' marked replica_state rows in
            self.checks = self.checks.fold(replica_marks.from_summaries(marked), self.round_ms)
        ran = max([*gauges, self.round]) - self.round + 1
        last = self.round + ran - 1
        # before the window's reports reach the controller: its ticks run ahead and the rounds the tasks produced
        # for on their own, each crash the tasks carried out applied at its round (before that round's tick and
        # batches, as prepare orders them)
        ahead, crashes = self._ahead, {k: v for k, v in self._crashes_ahead.items() if k < ran}
        self._ahead, self._crashes_ahead = {}, {}
        start = 0
        for k in [*sorted(crashes), ran]:
            self.catch_up({j: v for j, v in ahead.items() if start <= j < k}, self.round, ran)
            self.produce_batches([(self.round + j) * self.round_ms for j in range(max(start, 1), k)], send=False)
            if k < ran:
                self.apply_due((self.round + k) * self.round_ms)
            start = k
        self._idle_round = last if idle.cluster_idle(gauges[last]) else None
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
        if log and self._held is not None and self._held.log:  # this round commits the log: the held rows too
            log += self._held.flush(self.tables_dir, history=False)  # (commit_held relies on it)
        removed = {a["path"] for a in log if a.get("remove")}
        added = {a["path"] for a in log if not a.get("remove")}
        self.writer.commit("log", [a for a in log if not a.get("remove") and a["path"] not in removed], last,
                           [a for a in log if a.get("remove") and a["path"] not in added])
        clock.lap("commit")
        self._stage_history(adds)
        if self._held is not None and self._held.history_rows >= self.emulator.resident_history_rows:
            self._stage_history(self._held.flush(self.tables_dir, log=False))  # the driver's memory stays bounded
        # the controller is as it is for every round of the window: its gauges once (metrics() hands the unclean
        # elections since it was last asked to the window's first round, then counts none)
        first = self.control.metrics()
        rest = self.control.metrics() if last > self.round else first
        for r in range(self.round, last + 1):
            g = gauges[r]
            self._driver_rows["metrics"].append({
                "round": r, "time_ms": r * self.round_ms, "under_replicated": g["under_replicated"],
                "under_min_isr": g["under_min_isr"], "isr_shrinks": g["isr_shrinks"],
                "isr_expands": g["isr_expands"], **(first if r == self.round else rest)})
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
        every = self.emulator.history_commit_rounds
        if self.round // every > before // every:
            self.flush()
        every = self.emulator.checkpoint_rounds
        if every and self.round // every > before // every:
            self.save()
        return ran

    def window_limit(self) -> int:
        return self.emulator.resident_rounds if self.engine == "resident" else 1

    def resident_tasks(self) -> int:
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

    def commit_held(self) -> None:
        """The in-process engine's held rows (engine/local.run_round) written: their log files committed
        now, as the last round's (a round that committed log files wrote the held ones with them, so the
        last round committed none when some are held), their history files staged for `flush`. Before
        anything reads the log table: a flush, an event that reads a broker's log, the end of `jobs`."""
        if self._held is None:
            return
        adds = self._held.flush(self.tables_dir)
        log = [a for a in adds if a["table"] == "log"]
        if log:
            self.writer.commit("log", log, self.round - 1)
        self._stage_history(adds)

    def _stage_history(self, adds: list[dict]) -> None:
        for a in adds:
            if a["table"] != "log":
                self._history_adds[a["table"]].append(a)

    def flush(self) -> None:
        """Commit buffered history files and driver-side rows (one transaction per table). Rows an
        operator tool adds after the round's commit stay buffered (and saved) until the next round."""
        self.commit_held()
        if getattr(self, "_flushed_round", None) == self.round:
            self.control.save(self.out)
            self.save_meta()
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
        self.save_meta()

    def compact(self, end: bool = False) -> None:
        """Fold each table's small per-round files (reads over many small files are slow): delta-rs's
        optimize, or with the delta-spark writer the tiered folds of storage/compaction.py down to one file
        per tier and partition, committed through Delta's JVM API as OPTIMIZE (dataChange false). At a run's
        `end`, with mid-run compaction on, the tables of a row per replica per round (PER_REPLICA_ROUND) are
        left as its tiers keep them (fewer than delta.compact.min.files files a tier): rewriting them whole was
        most of a large run's end (30,000 replicas: 15.5 of 19.1 s) and made no read faster (the audit 7.0 s
        against 3.1 s on the tiers, a whole replica_state read 1.1 s against 0.4 s)."""
        from ..storage.compaction import compact

        skip = PER_REPLICA_ROUND if end and self.writer.compact_min_files > 0 else ()
        for name in T.SCHEMAS:
            if name in skip:
                continue
            if self.writer.delta_spark is None:
                self.writer.table(name).optimize.compact()
            else:
                compact(self.writer, name, 2)
        self.writer.refresh()
