"""Glue between a run directory (the cluster) and the Kafka tool text modules.

Each ``*_tool`` function is one invocation of a Kafka 2.8 operator tool against a run directory (a path):
it loads the driver's state (run_dir.py; no Spark), asks the emulated cluster what the tool's admin calls
would (ListPartitionReassignments, DescribeTopics, DescribeCluster, DescribeReplicaLogDirs, DescribeLogDirs),
acts through the Admin API's calls (admin.py: AlterPartitionReassignments, AlterReplicaLogDirs,
IncrementalAlterConfigs, ElectLeaders), saves the run when it changed something, and returns what the tool
prints and its exit code as a ``ToolOutput``. The text itself comes from the pure modules (reassign_partitions, log_dirs,
leader_election, state_change_log).

Kafka's failures of the tool itself (an invalid plan, a refused or partly failed action) are the tool's
``TerseReassignmentFailureException`` / ``AdminCommandFailedException``: printed on stdout, exit code 1. A
plan that fails validation changes nothing in the run directory (nothing is saved).

Where the brokers' dirs come from (DescribeReplicaLogDirs / DescribeLogDirs):

* a replica's *current* dir: its row in the broker's latest round of ``replica_state`` (the replicas the
  broker holds now); a dir the broker has marked offline (``DriverState.offline_dirs``) holds no live log;
* its *future* dir (a KIP-113 move in progress): ``replica_state.future_dir`` when the table has it, else
  the dir of the replica's ``is_future`` rows in the ``log`` table (an empty future log is then not seen);
* a log's size: the bytes its records cost (``fetch.record_bytes``: value plus key, at least one byte);
  Kafka counts the segment files, batch headers included. offsetLag: current LEO minus the future log's
  LEO for a future log, ``max(HW - LEO, 0)`` for a current one (ReplicaManager.getLogEndOffsetLag).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .. import admin, run_access
from ..errors import ScenarioError
from ..run_access import DriverState, RunDir
from ..run_check import check_run
from . import reassign_partitions as R

TP = tuple[str, int]
TPR = tuple[str, int, int]
KAFKA_STORAGE_EXCEPTION = "org.apache.kafka.common.errors.KafkaStorageException"
_ACTIVE_DIR_STATES = frozenset({"in_progress", "moving_elsewhere"})  # Kafka's ActiveMoveState (done = false)

__all__ = [
    "Run",
    "RunLike",
    "ToolOutput",
    "current_assignment",
    "dir_move_statuses",
    "leader_election_tool",
    "log_dirs_frames",
    "log_dirs_tool",
    "read_text_file",
    "reassign_cancel",
    "reassign_execute",
    "reassign_generate",
    "reassign_list",
    "reassign_verify",
    "replica_dirs",
    "state_change_log_tool",
]


@dataclass
class ToolOutput:
    """What one tool invocation printed and its exit code; `changed`: the run directory was saved."""

    stdout: str = ""
    stderr: str = ""
    code: int = 0
    changed: bool = False


def read_text_file(path: str, option: str) -> str:
    """``Utils.readFileAsString`` of a tool's JSON file option."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise ScenarioError(option, path, f"cannot read the file: {exc.strerror or exc}") from None


@dataclass
class Run:
    """A run directory a tool works on: its files and the driver's state loaded from it (or, for a Cluster
    open in this process, its state, saved through the Cluster so its brokers' rows are saved too)."""

    dir: RunDir
    state: DriverState
    saver: Callable[[], None] | None = None
    seen: tuple[int, int, int] | None = None  # the run's save stamp when it was loaded (RunDir.stamp)
    checked: bool = False  # the caller checked the directory for writing (run_check.py) under its lock
    tables_checked: bool = False  # `open` checked its tables (run_check.py) when it loaded it

    @classmethod
    def open(cls, path: str | os.PathLike, checked: bool = False) -> Run:
        """Load a run directory's driver state (ScenarioError for no run, or a run of another format; a
        damaged run's DamagedRunError unless the caller has `checked` it)."""
        rd = RunDir(path).require_run("run")
        if not checked:
            check_run(rd.path)
        seen = rd.stamp()
        return cls(rd, rd.load(), seen=seen, checked=checked, tables_checked=True)

    def save(self) -> None:
        """Save under the run's lock (run_lock.py): refused when another process holds it or saved since, and
        when the directory is damaged (run_check.py: nothing is written then; the tables `open` checked are
        not read again, the lock's stamp saying no one saved since)."""
        if self.saver is not None:
            self.saver()
            return
        with run_access.writing(self.dir.path, seen=self.seen):
            if not self.checked:
                check_run(self.dir.path, writes=True, tables=not self.tables_checked)
            self.dir.save(self.state)
            self.seen = self.dir.stamp()


RunLike = Any  # a run directory's path, a Run, or an open Cluster (anything with run_dir, driver and save())


def _run(run: RunLike) -> Run:
    if isinstance(run, Run):
        return run
    if hasattr(run, "run_dir") and hasattr(run, "driver"):  # the Cluster facade, open in this process
        if run.driver is None:
            run.run_dir.check_format()
        return Run(run.run_dir, run.driver, run.save)
    return Run.open(run)


# ---------------------------------------------------------------------------------------- cluster queries
def current_assignment(run: RunLike, topics: Iterable[str] | None = None) -> dict[TP, list[int]]:
    """The replica assignment (DescribeTopics) of `topics` (default all), from the controller's ZooKeeper."""
    c = _run(run)
    zk = c.state.control.zk
    names = c.state.control.topics() if topics is None else [t for t in dict.fromkeys(topics) if t in zk.topics()]
    return {(t, int(p)): [int(b) for b in reps] for t in names for p, reps in zk.topic_assignment(t).items()}


def _live(c: Run) -> list[int]:
    return sorted(int(b) for b in c.state.control.live())


def _offline(c: Run, broker: int) -> set[str]:
    return set(c.state.offline_dirs.get(broker, ()))


def _dataset(c: Run, name: str):
    from deltalake import DeltaTable

    from ..storage.tables import table_path

    return DeltaTable(table_path(c.dir.tables_dir, name)).to_pyarrow_dataset()


def _latest_replica_rows(c: Run) -> pd.DataFrame:
    """Each broker's rows of its latest round in ``replica_state``: the replicas it holds now."""
    ds = _dataset(c, "replica_state")
    cols = [n for n in ("round", "broker", "topic", "partition", "log_dir", "leo", "hw", "future_dir")
            if n in ds.schema.names]
    df = ds.to_table(columns=cols).to_pandas()
    if df.empty:
        return df
    last = df.groupby("broker")["round"].transform("max")
    return df[df["round"] == last].reset_index(drop=True)


def _log_rows(c: Run, future_only: bool = False) -> pd.DataFrame:
    """The ``log`` table's rows (the columns sizes and LEOs need); only future logs' rows if `future_only`."""
    import pyarrow.compute as pc

    cols = ["broker", "log_dir", "topic", "partition", "offset", "key", "value_bytes", "is_future"]
    return _dataset(c, "log").to_table(
        columns=cols, filter=(pc.field("is_future") == True) if future_only else None).to_pandas()  # noqa: E712


def _record_bytes(rows: pd.DataFrame) -> np.ndarray:
    from ..protocol.fetch import record_bytes

    return record_bytes(rows) if len(rows) else np.zeros(0, dtype="int64")


@dataclass(frozen=True)
class _Log:
    current_dir: str | None
    future_dir: str | None
    leo: int
    hw: int


def _requested_dirs(c: Run) -> tuple[dict[TPR, str], dict[TPR, str]]:
    """AlterReplicaLogDirs targets per replica: (the latest each broker accepted, those still on their way).

    A broker creates the future log when it accepts the request, which Kafka's tool sees at once; here the
    request reaches the broker in the next round, and a future log holds no ``log`` rows before its first
    copy, so both count as the replica's future dir while it differs from the current one."""
    accepted: dict[TPR, str] = {}
    for frame in c.state.alter_dir_responses:
        ok = frame[frame["error"].isna()] if "error" in frame.columns else frame
        for r in ok.itertuples(index=False):
            accepted[(str(r.topic), int(r.partition), int(r.broker))] = str(r.log_dir)
    pending: dict[TPR, str] = {}
    for kind, frame, _ in c.state.outbox:
        if kind == run_access.ALTER_LOG_DIRS:
            for r in frame.itertuples(index=False):
                pending[(str(r.topic), int(r.partition), int(r.broker))] = str(r.log_dir)
    return accepted, pending


def replica_dirs(run: RunLike, rows: pd.DataFrame | None = None,
                 log: pd.DataFrame | None = None) -> dict[TPR, _Log]:
    """(topic, partition, broker) -> its current and future dir on the broker, for every replica a live
    broker holds now (offline dirs hold no live log: current/future None there).

    The future dir: an AlterReplicaLogDirs request not yet delivered, else ``replica_state.future_dir`` when
    the table has it, else the last accepted request's dir, else the dir of ``is_future`` log rows; none
    when that is the current dir (a finished or cancelled move)."""
    c = _run(run)
    rows = _latest_replica_rows(c) if rows is None else rows
    live = set(_live(c))
    accepted, pending = _requested_dirs(c)
    has_column = "future_dir" in rows.columns
    futures: dict[TPR, str] = {}
    if not has_column and len(rows):
        log = _log_rows(c, future_only=True) if log is None else log
        fut = log[log["is_future"].astype(bool)]
        for (b, d, t, p), _ in fut.groupby(["broker", "log_dir", "topic", "partition"], sort=True):
            futures[(str(t), int(p), int(b))] = str(d)
    out: dict[TPR, _Log] = {}
    for r in rows.itertuples(index=False):
        b = int(r.broker)
        if b not in live:
            continue
        tpr = (str(r.topic), int(r.partition), b)
        cur = None if _missing(r.log_dir) else str(r.log_dir)
        if tpr in pending:
            fut_dir = pending[tpr]
        elif has_column:
            fut_dir = None if _missing(r.future_dir) else str(r.future_dir)
        else:
            fut_dir = accepted.get(tpr, futures.get(tpr))
        if fut_dir == cur:
            fut_dir = None
        off = _offline(c, b)
        out[tpr] = _Log(None if cur in off else cur, None if fut_dir in off else fut_dir, int(r.leo), int(r.hw))
    return out


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA


def dir_move_statuses(run: RunLike, targets: Mapping[TPR, str]) -> list[R.DirMoveStatus]:
    """``findLogDirMoveStates``: each targeted replica's move state, as DescribeReplicaLogDirs reports it.

    A live broker answers for every replica asked about (one it does not hold has no current dir:
    ``missing_log_dir``); a broker that is down does not answer (Kafka's call would fail): ``missing_replica``.
    """
    c = _run(run)
    if not targets:
        return []
    dirs = replica_dirs(c)
    live = set(_live(c))
    out = []
    for (t, p, b), target in targets.items():
        info = dirs.get((t, p, b))
        cur = info.current_dir if info else None
        fut = info.future_dir if info else None
        state = R.log_dir_move_state(b in live, cur, fut, target)
        out.append(R.DirMoveStatus(t, p, b, state, cur, target, fut))
    return out


def _dir_targets(entries: Sequence[dict]) -> dict[TPR, str]:
    """``parsePartitionReassignmentData``'s replica -> dir map: the explicit (non-"any") log dirs."""
    return {(e["topic"], int(e["partition"]), int(b)): d for e in entries
            for b, d in zip(e["replicas"], e["log_dirs"], strict=True) if d != R.ANY_LOG_DIR}


def _clearing(c: Run, entries: Sequence[dict]) -> tuple[list[int], list[str]]:
    """``clearAllThrottles``: clear the five throttle settings; returns the lists the tool prints."""
    brokers = R.throttle_clearing_brokers(_live(c), [e["replicas"] for e in entries])
    topics = [e["topic"] for e in entries]
    admin.clear_throttles(c.state, sorted(set(brokers)), list(dict.fromkeys(topics)))
    return brokers, topics


def _accepted(results: Mapping[TP, Any]) -> bool:
    """Whether the controller accepted some partition of an AlterPartitionReassignments (None: no error). A
    request refused for every partition changed no partition, so the tool saves nothing (its queued
    messages and log lines stay unwritten) and the run directory stays byte-identical."""
    return any(r is None for r in results.values())


def _failure(e: R.ReassignError, stdout: str = "", changed: bool = False) -> ToolOutput:
    """Kafka's text on stdout. Input refused before anything changed is bad input: exit 2 and the
    field and value on stderr (docs/cli.md, "Exit codes"); a failure after the move started exits 1."""
    if changed:
        return ToolOutput(stdout=stdout + e.tool_output(), code=1, changed=True)
    return ToolOutput(stdout=stdout + e.tool_output(), stderr=f"sparkkafka: error: {e}\n", code=2)


# ---------------------------------------------------------------------------------------- reassign
def reassign_generate(run: RunLike, topics_json: str, broker_list: str, disable_rack_aware: bool = False) -> ToolOutput:
    """``--generate``: a proposal only; nothing changes."""
    c = _run(run)
    try:
        brokers = R.parse_broker_list(broker_list)
        topics = R.parse_topics_to_move_json(topics_json)
        text, _ = R.generate(current_assignment(c), topics, brokers, c.state.scenario.racks, c.state.scenario.seed,
                             disable_rack_aware, live_brokers=_live(c))
    except R.ReassignError as e:
        return _failure(e)
    return ToolOutput(stdout=text)


def reassign_execute(run: RunLike, plan_json: str, additional: bool = False, throttle: int = -1,
                     log_dirs_throttle: int = -1) -> ToolOutput:
    """``--execute`` (ReassignPartitionsCommand.executeAssignment, 2.8), checks in Kafka's order: the plan
    (parse, empty lists, duplicates), the refusal while reassignments run (unless --additional), unknown
    broker ids, unknown topics; any of these changes nothing. Then the throttles, AlterPartitionReassignments
    and AlterReplicaLogDirs. A dir the broker does not have (or has offline) fails its AlterReplicaLogDirs
    *after* the partition moves started, as in Kafka: ``Error: Failed to alter dir for t-p-b``, exit 1."""
    c = _run(run)
    try:
        entries = R.parse_reassignment_json(plan_json)
        if not additional and c.state.control.reassignments():  # the cluster's state, not bad input: exit 1
            return ToolOutput(stdout=R.existing_refusal_text(), code=1)
        R.parse_reassignment_json(plan_json, brokers=_live(c), topics=c.state.control.topics())
    except R.ReassignError as e:
        return _failure(e)
    tps = [(e["topic"], int(e["partition"])) for e in entries]
    current = {tp: reps for tp, reps in current_assignment(c, [t for t, _ in tps]).items() if tp in set(tps)}
    configured = set(c.state.scenario.log_dirs)
    bad = {tpr for tpr, d in _dir_targets(entries).items() if d not in configured or d in _offline(c, tpr[2])}
    plan = {"version": 1, "partitions": [
        {"topic": e["topic"], "partition": int(e["partition"]), "replicas": list(e["replicas"]),
         "log_dirs": [R.ANY_LOG_DIR if (e["topic"], int(e["partition"]), int(b)) in bad else d
                      for b, d in zip(e["replicas"], e["log_dirs"], strict=True)]}
        for e in entries]}
    results = admin.reassign(c.state, plan, throttle if throttle >= 0 else None,
                             log_dirs_throttle if log_dirs_throttle >= 0 else None, via="api")
    started = _dir_targets(plan["partitions"])
    full = R.execute_text(current, tps, throttle, log_dirs_throttle, list(started))
    errors = {tp: r[1] or r[0] for tp, r in results.items() if r is not None}
    accepted = _accepted(results)
    if accepted:
        c.save()
    if errors:
        head = full[:full.index("Successfully started partition reassignment")]
        return ToolOutput(stdout=head + R.reassign_errors_text(errors), code=1, changed=accepted)
    if bad:
        t, p, b = min(bad, key=lambda r: (r[2], r[0], r[1]))
        moves_line = R.log_dir_moves_line(list(started))
        head = full[:len(full) - len(moves_line)] if moves_line else full
        err = R.ReassignError("log_dirs", (t, p, b), f"Failed to alter dir for {t}-{p}-{b}")
        return _failure(err, head, changed=True)
    return ToolOutput(stdout=full, changed=True)


def reassign_verify(run: RunLike, plan_json: str, preserve_throttles: bool = False) -> ToolOutput:
    """``--verify``: each plan partition complete / in progress / mismatch, each explicit log dir's move
    state; when no reassignment runs anywhere and none of the plan's dir moves is active (and no
    --preserve-throttles), the five throttle settings are cleared and the run saved."""
    c = _run(run)
    try:
        entries = R.parse_reassignment_json(plan_json, validate=False)
    except R.ReassignError as e:
        return _failure(e)
    ongoing = c.state.control.reassignments()
    assignment = current_assignment(c, [e["topic"] for e in entries])
    status = []
    for e in entries:
        tp, target = (e["topic"], int(e["partition"])), list(e["replicas"])
        if tp in ongoing:
            status.append((tp, "in_progress", ongoing[tp][0], target))
        else:
            cur = assignment.get(tp, [])
            status.append((tp, "complete" if cur == target else "mismatch", cur, target))
    moves = dir_move_statuses(c, _dir_targets(entries))
    brokers = topics = None
    if not ongoing and not any(s.state in _ACTIVE_DIR_STATES for s in moves) and not preserve_throttles:
        brokers, topics = _clearing(c, entries)
        c.save()
    return ToolOutput(stdout=R.verify_text(status, moves, brokers, topics), changed=brokers is not None)


def reassign_cancel(run: RunLike, plan_json: str, preserve_throttles: bool = False) -> ToolOutput:
    """``--cancel`` (2.8): cancel the plan's partitions with adding or removing replicas, re-target the
    plan's active dir moves to their current dirs, clear throttles unless --preserve-throttles."""
    c = _run(run)
    try:
        entries = R.parse_reassignment_json(plan_json, validate=False)
    except R.ReassignError as e:
        return _failure(e)
    wanted = {(e["topic"], int(e["partition"])) for e in entries}
    moving = sorted(tp for tp, (_, adding, removing) in c.state.control.reassignments().items()
                    if tp in wanted and (adding or removing))
    if moving:
        results = admin.cancel_reassignments(c.state, moving)
        errors = {tp: r[1] or r[0] for tp, r in results.items() if r is not None}
        if errors:
            accepted = _accepted(results)
            if accepted:
                c.save()
            return ToolOutput(stdout=R.cancel_errors_text(errors), code=1, changed=accepted)
    active = [s for s in dir_move_statuses(c, _dir_targets(entries)) if s.state in _ACTIVE_DIR_STATES]
    if active:
        admin.alter_replica_log_dirs(c.state, pd.DataFrame(
            [(s.broker, s.topic, s.partition, s.current_dir) for s in active],
            columns=["broker", "topic", "partition", "log_dir"]))
        c.state.tool_state.setdefault("dir_moves", {}).update(
            {(s.topic, s.partition, s.broker): s.current_dir for s in active})
    brokers = topics = None
    if not preserve_throttles:
        brokers, topics = _clearing(c, entries)
    changed = bool(moving or active or brokers is not None)
    if changed:
        c.save()
    text = R.cancel_text(moving, [(s.topic, s.partition, s.broker) for s in active], brokers, topics)
    return ToolOutput(stdout=text, changed=changed)


def reassign_list(run: RunLike) -> ToolOutput:
    """``--list``: the reassignments in progress (ListPartitionReassignments)."""
    c = _run(run)
    return ToolOutput(stdout=R.list_text(c.state.control.reassignments()))


# ---------------------------------------------------------------------------------------- log dirs
def log_dirs_frames(run: RunLike) -> tuple[pd.DataFrame, pd.DataFrame, list[int]]:
    """DescribeLogDirs of every live broker: (dirs, logs, live brokers) for ``describe_log_dirs_text``.

    dirs: (broker, log_dir, error) per configured dir in ``log.dirs`` order, error the
    KafkaStorageException class name for a failed dir; logs: (broker, log_dir, topic, partition, size,
    offset_lag, is_future) for each current and future log in a live dir, empty ones included."""
    c = _run(run)
    live = _live(c)
    dirs = pd.DataFrame([(b, d, KAFKA_STORAGE_EXCEPTION if d in _offline(c, b) else None)
                         for b in live for d in c.state.scenario.log_dirs], columns=["broker", "log_dir", "error"])
    rows = _latest_replica_rows(c)
    log = _log_rows(c)
    info = replica_dirs(c, rows, log)
    size: dict[tuple, int] = {}
    end: dict[tuple, int] = {}
    if len(log):
        log = log.assign(_bytes=_record_bytes(log), is_future=log["is_future"].astype(bool))
        keys = ["broker", "log_dir", "topic", "partition", "is_future"]
        g = log.groupby(keys, sort=False)
        for k, v in g["_bytes"].sum().items():
            size[(int(k[0]), str(k[1]), str(k[2]), int(k[3]), bool(k[4]))] = int(v)
        for k, v in g["offset"].max().items():
            end[(int(k[0]), str(k[1]), str(k[2]), int(k[3]), bool(k[4]))] = int(v) + 1
    out = []
    for (t, p, b), r in sorted(info.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])):
        if r.current_dir is not None:
            out.append((b, r.current_dir, t, p, size.get((b, r.current_dir, t, p, False), 0),
                        max(r.hw - r.leo, 0), False))
        if r.future_dir is not None:
            key = (b, r.future_dir, t, p, True)
            out.append((b, r.future_dir, t, p, size.get(key, 0), max(r.leo - end.get(key, 0), 0), True))
    logs = pd.DataFrame(out, columns=["broker", "log_dir", "topic", "partition", "size", "offset_lag", "is_future"])
    return dirs, logs, live


def log_dirs_tool(run: RunLike, topic_list: str | None = None, broker_list: str | None = None) -> ToolOutput:
    """``kafka-log-dirs.sh --describe [--topic-list] [--broker-list]``."""
    c = _run(run)
    from .log_dirs import describe_log_dirs_text

    dirs, logs, live = log_dirs_frames(c)
    return ToolOutput(stdout=describe_log_dirs_text(dirs, logs, live, topic_list=topic_list,
                                                    broker_list=broker_list))


# ---------------------------------------------------------------------------------------- leader election
def leader_election_tool(run: RunLike, election_type: str | None, topic: str | None = None,
                         partition: int | None = None, all_topic_partitions: bool = False,
                         path_to_json_file: str | None = None) -> ToolOutput:
    """``kafka-leader-election.sh``: ElectLeaders through the controller; exit 1 when some failed. The run is
    saved only when the controller elected or tried to: a request whose partitions all do not exist (Kafka's
    ``UNKNOWN_TOPIC_OR_PARTITION``, "The partition does not exist.") or need no election changes nothing."""
    c = _run(run)
    from .leader_election import election_stderr, election_text, validate_election_args

    req = validate_election_args(election_type, topic=topic, partition=partition,
                                 all_topic_partitions=all_topic_partitions, path_to_json_file=path_to_json_file)
    parts = None if req.partitions is None else [(t, int(p)) for t, p in req.partitions]
    results = admin.elect_leaders(c.state, req.election_type.lower(), parts)
    changed = any(r is None or r[0] not in _NO_ELECTION for r in results.values())
    if changed:
        c.save()
    done = [tp for tp, r in results.items() if r is None]
    failed = {tp: (r[0], r[1]) for tp, r in results.items() if r is not None}
    text, code = election_text(req.election_type, done, [], failed)
    return ToolOutput(stdout=text, stderr=election_stderr(failed), code=code, changed=changed)


_NO_ELECTION = frozenset({"UNKNOWN_TOPIC_OR_PARTITION", "ELECTION_NOT_NEEDED"})  # the controller did nothing


# ---------------------------------------------------------------------------------------- state-change log
def state_change_log_tool(run: str, topic: str | None = None, partitions: str | None = None,
                          start_time: str | None = None, end_time: str | None = None) -> ToolOutput:
    """StateChangeLogMerger over the run's ``state_change_log`` table (no Spark needed)."""
    from ..storage.tables import read_table
    from .state_change_log import merge_text

    if not os.path.exists(os.path.join(run, "run.json")):
        raise ScenarioError("run", run, "is not a sparkkafka run directory (no run.json)")
    frame = read_table(os.path.join(run, "tables"), "state_change_log").to_pandas()
    return ToolOutput(stdout=merge_text(frame, topic, partitions, start_time, end_time))
