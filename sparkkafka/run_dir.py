"""The run directory: its layout, and the driver's state saved in it as typed, versioned data.

A run directory is the cluster (docs/cli.md, "Operating on a run"):

    OUT/run.json            what the run is now (RunDir.meta): scenario name, round, brokers, topics ...
    OUT/tables/             the Delta tables (storage/tables.py)
    OUT/brokers/            the brokers' own files (flush checkpoints, storage/broker_disk.py)
    OUT/zookeeper.json      ZooKeeper's znodes (controller/zookeeper.py)
    OUT/driver-state.json   DriverState: controller, producers, timeline position, messages not yet sent,
                            the tables' versions it goes with (the run's commit point, docs/run-directory.md)
    OUT/driver.json         {"format_version", "round"}: the format of driver-state.json, read first
    OUT/state/round-N-*/    the brokers' in-memory rows after round N-1 (Parquet, written by Spark)
    OUT/mesh/<id>/          while a resident window runs: its tasks' addresses (engine/exchange.py), then removed

The driver's state is plain data (plaindata.py), never a pickle of live objects, so a run can be read
without running any of its code, and a run saved by another format is refused by number
(`RUN_FORMAT_VERSION`), naming the version, while its tables stay readable. Every file is written
to a temporary name, fsynced and renamed into place. A run killed at any moment is continued from
its last saved driver state: `recover` first undoes what was written after it. Nothing here needs Spark: the operator tools
(tools/operator.py) load, act on and save a run with this module alone.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import pandas as pd

from .controller.control_plane import ControlPlane
from .errors import DamagedRunError, ScenarioError
from .plaindata import Text, dump_fields, dumps, from_plain, to_plain
from .scenario.loader import MAX_TIME_MS
from .scenario.model import Event, Scenario
from .scenario.workload import Workload
from .storage import broker_disk
from .storage import tables as T

# The format of the driver's state: 1 was written before it had a number (driver.pkl, no driver.json);
# 2 pickled the Cluster's attributes with typed controller events (driver.pkl); 3 is DriverState as
# plain data (driver-state.json). Another format is refused by number.
RUN_FORMAT_VERSION = 3

RUN_JSON = "run.json"
MANIFEST = "driver.json"
DRIVER_STATE = "driver-state.json"
PICKLED = "driver.pkl"  # formats 1 and 2
STATE_DIR = "state"
CLIENT = -1  # the sender of driver-made messages that come from no broker (producers, admin requests)
_RUN_FOLDERS = ("tables", "brokers", STATE_DIR)
_RUN_FILES = ("zookeeper.json", DRIVER_STATE, MANIFEST, "summary.json")
Isolation = tuple[frozenset, frozenset, int | None]  # (brokers, cut off from, until ms or None)


def check_emulated_ms(field_name: str, value: int, what: str = "emulated milliseconds") -> None:
    """ScenarioError naming `field_name` unless `value` is an emulated time from 0 to MAX_TIME_MS, the bound of
    a scenario's times (a week): a command-line time sizes the work as the scenario's do."""
    if value < 0:
        raise ScenarioError(field_name, value, f"must be >= 0 ({what})")
    if value > MAX_TIME_MS:
        raise ScenarioError(field_name, value, f"must be <= {MAX_TIME_MS} (a run spans at most {MAX_TIME_MS} "
                                               "emulated ms, a week)")


def check_until_ms(field_name: str, until_ms: int, reached_ms: int | None = None, run: str = "the run",
                   source: str = "") -> None:
    """A run's end (`run --until-ms`, Cluster.run(until_ms)): an emulated time (check_emulated_ms) and, continuing
    a run, not before `reached_ms`, the time `run` has already reached (`source`: where that was read)."""
    check_emulated_ms(field_name, until_ms)
    if reached_ms is not None and until_ms < reached_ms:
        raise ScenarioError(field_name, until_ms, f"is before the time {run} has already reached ({reached_ms} ms"
                                                  f"{source}); a run does not go back")


def require_out_dir(out: str | os.PathLike, field_name: str = "out") -> None:
    """ScenarioError naming `field_name` when `out` cannot be a run directory: it, or the nearest part of
    its path that exists, is not a directory (checked before anything is created or Spark starts)."""
    path = os.path.abspath(out)
    while not os.path.lexists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    if not os.path.isdir(path):
        what = "is" if path == os.path.abspath(out) else f"is under {path}, which is"
        raise ScenarioError(field_name, str(out), f"{what} a file, not a directory: name a directory for the run")


def run_exists_error(out: str | os.PathLike, field_name: str = "out", scenario: str | os.PathLike | None = None
                     ) -> ScenarioError:
    """The refusal to create a run where one is, saying both ways on: replace it (a failed run's too), or
    continue it."""
    again = f"sparkkafka run {scenario or 'SCENARIO.yaml'} --out {out} --overwrite"
    return ScenarioError(field_name, str(out), f"directory already holds a run (a finished, stopped or failed one): "
                                               f"replace it with --overwrite ({again}; Python: overwrite=True), or "
                                               f"continue it with sparkkafka run {out}")


@dataclass
class DriverState:
    """What the driver holds between rounds; the brokers' own state lives in `state_folder` and the tables.

    `outbox` holds the driver's messages for the next round as (row kind of engine/rows.py, frame,
    sending broker); `driver_rows` the table rows it made after the last commit; `tool_state` what the
    operator tools remember between calls."""

    scenario: Scenario
    run_id: str
    round_ms: int
    control: ControlPlane
    workload: Workload
    spark_partitions: int
    round: int = 0
    events: list[Event] = field(default_factory=list)  # the timeline in the order it applies
    next_event: int = 0
    crashed: set[int] = field(default_factory=set)
    stopping: set[int] = field(default_factory=set)  # clean shutdowns in progress this round
    paused_until: dict[int, int] = field(default_factory=dict)
    isolations: list[Isolation] = field(default_factory=list)
    offline_dirs: dict[int, set[str]] = field(default_factory=dict)  # failed log dirs per broker (KIP-112)
    alter_dir_responses: list[pd.DataFrame] = field(default_factory=list)  # AlterReplicaLogDirs answers
    outbox: list[tuple[int, pd.DataFrame, int]] = field(default_factory=list)
    produced: int = 0
    driver_rows: dict[str, list] = field(default_factory=lambda: defaultdict(list))
    log_actions: list[dict] = field(default_factory=list)  # log-table actions the driver made (a power loss)
    tool_state: dict[str, Any] = field(default_factory=dict)
    flushed_round: int | None = None
    idle_round: int | None = None  # the last round run, when every task reported it quiescent (the idle jump)
    state_folder: str | None = None  # the brokers' rows, relative to the run directory
    # each table's Delta version when this state was saved: later commits are undone on recovery
    # (None: a state saved before it was recorded, continued as it is)
    table_versions: dict[str, int] | None = None
    # the checker's incremental state (scenario/checker.Checks): the marked replica_state rows so far; None in
    # a state saved before it was kept (its run's end audits the whole history)
    checks: Any = None

    def __post_init__(self) -> None:
        if not isinstance(self.driver_rows, defaultdict):
            self.driver_rows = defaultdict(list, self.driver_rows)

    def uncommitted_partition_state(self) -> list[dict]:
        """partition_state rows not in the table yet: those made since the last commit, and the ZooKeeper
        writes of admin requests the controller handled since the last round (an operator tool's: the
        controller acts at once, as Kafka's does; the next round's commit writes them)."""
        return [*self.driver_rows.get("partition_state", []), *self.control.writes]

    def outside_change(self) -> None:
        """An event or admin request applied between rounds: the last round's quiescence no longer says
        what the next rounds do, so they are not skipped by the idle jump (the next round reports afresh)."""
        self.idle_round = None

    def send(self, kind: int, frame: pd.DataFrame, src: int = CLIENT) -> None:
        """Queue a driver-made message for the next round; `src` is the sending broker (the controller's
        for its requests), which network partitions are checked against."""
        if len(frame):
            self.outbox.append((kind, frame, src))

    def to_dict(self) -> dict[str, Any]:
        return {name: to_plain(v) for name, v in self.plain_fields()}

    def plain_fields(self) -> Iterator[tuple[str, Any]]:
        """The fields to_dict makes plain, as they are (RunDir.save_driver writes them one by one)."""
        return ((name, getattr(self, name)) for name in self.__dataclass_fields__)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DriverState:
        return cls(**{k: from_plain(v) for k, v in d.items()})

    def meta(self) -> dict[str, Any]:
        """OUT/run.json: what the run is now, for readers that open no driver state."""
        sc, c = self.scenario, self.control
        ids = {t.name: t.topic_id for t in sc.topics if t.topic_id}  # imported topics keep theirs
        return {"run_id": self.run_id, "scenario": sc.name, "seed": sc.seed,
                "round": self.round, "time_ms": self.round * self.round_ms, "round_ms": self.round_ms,
                "brokers": list(sc.brokers), "log_dirs": list(sc.log_dirs),
                "live_brokers": sorted(c.live()), "controller": c.controller_id(),
                "broker_config": dict(sc.config), "controller_epoch": c.zk.controller_epoch()[0],
                "topics": {t: {"partitions": c.partition_count(t), "topic_id": ids.get(t),
                               "overrides": c.overrides.get(t, {}),
                               "min.insync.replicas": c.topic_config(t).min_insync_replicas}
                           for t in c.topics()}}


class RunDir:
    """The files of one run directory (the layout in the module docstring)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.path.abspath(path)
        self.tables_dir = os.path.join(self.path, "tables")
        self.brokers_dir = os.path.join(self.path, "brokers")
        self._scenario: tuple[Scenario, Text] | None = None  # the last scenario saved, and its JSON text

    def _file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def is_run(self) -> bool:
        return os.path.exists(self._file(RUN_JSON))

    def require_run(self, field_name: str = "path") -> RunDir:
        if not self.is_run():
            raise ScenarioError(field_name, self.path, "is not a sparkkafka run directory (no run.json)")
        return self

    def clear_unfinished(self) -> None:
        """Remove what the creation of a run killed before it wrote run.json left (a directory is a run
        from its run.json on, written last), so the scenario can be run into it again; other files in
        the directory are not the run's and stay."""
        if self.is_run() or not os.path.isdir(self.path):
            return
        for name in (*_RUN_FOLDERS, *_RUN_FILES):
            path = self._file(name)
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.exists(path):
                os.unlink(path)

    # ------------------------------------------------------------------ run.json
    def meta(self) -> dict[str, Any]:
        with open(self._file(RUN_JSON)) as f:
            return json.load(f)

    def write_meta(self, meta: dict[str, Any]) -> None:
        self._write_json(RUN_JSON, meta, indent=2, sort_keys=True)

    def write_summary(self, summary: dict[str, Any]) -> None:
        """OUT/summary.json: what happened to the records (Cluster.run writes it at the end)."""
        self._write_json("summary.json", summary, indent=2, sort_keys=True)

    # ------------------------------------------------------------------ the driver's state
    def format_version(self) -> int | None:
        """The driver state's format: driver.json's number, 1 for a pickle saved before it had one,
        None when the run holds no driver state (written before runs could be continued)."""
        if os.path.exists(self._file(MANIFEST)):
            with open(self._file(MANIFEST)) as f:
                return int(json.load(f).get("format_version", 1))
        if os.path.exists(self._file(PICKLED)) or os.path.exists(self._file(DRIVER_STATE)):
            return 1
        return None

    def check_format(self) -> None:
        """The clear error for a run whose driver state this version cannot continue."""
        found = self.format_version()
        if found is None:
            raise ScenarioError("run", self.path, "was written by an older sparkkafka (no driver state): it can be "
                                                  "read but not continued")
        if found != RUN_FORMAT_VERSION:
            raise ScenarioError("driver.json format_version", found,
                                f"run directory {self.path} was saved in run format {found}; this sparkkafka "
                                f"continues format {RUN_FORMAT_VERSION} only (its tables can still be read): run "
                                "the scenario again to continue it")

    def stamp(self) -> tuple[int, int, int] | None:
        """The identity of the last save (driver.json, rewritten by each): a writer that loaded the run
        compares it before saving, so a save by another process in between is not overwritten unseen."""
        try:
            st = os.stat(self._file(MANIFEST))
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def load(self) -> DriverState:
        """The driver's state (ScenarioError naming driver.json's format_version for another format)."""
        self.check_format()
        path = self._file(DRIVER_STATE)
        try:
            with open(path) as f:
                return DriverState.from_dict(json.load(f))
        except FileNotFoundError:
            raise DamagedRunError(self.path, path, "is missing") from None
        except (ValueError, KeyError, TypeError, AttributeError) as e:  # cut, or not the state's fields
            raise DamagedRunError(self.path, path, f"is not a whole driver state ({type(e).__name__}: {e})") from None

    def save(self, d: DriverState) -> None:
        """Write ZooKeeper, run.json and the driver's state (what a tool that changed the cluster saves),
        after undoing what a killed run wrote after `d` was saved (`recover`: a tool is a writer too)."""
        self.recover(d)  # it writes ZooKeeper and run.json from d
        self.save_driver(d)

    def save_driver(self, d: DriverState) -> None:
        """Write the driver's manifest, then its state (the run's commit point: the manifest's round is
        informational); then tidy what the state no longer needs: the brokers' row folders other than
        `d.state_folder` (a reader of an older one is never overwritten underneath), and the brokers'
        file versions of the rounds it covers, folded into their files (broker_disk.settle), and the
        tables' Delta log history older than emulator delta.log.retention.commits before the versions
        it records, thinned (tables.trim_logs)."""
        self._write_json(MANIFEST, {"format_version": RUN_FORMAT_VERSION, "round": d.round})
        self._write(DRIVER_STATE, lambda f: dump_fields(self._fields(d), f))  # d.to_dict()'s text, as it goes
        self._tidy(d)

    def _fields(self, d: DriverState) -> Iterator[tuple[str, Any]]:
        """d's fields to write, its scenario as the text written last time when it is the same object (a
        Scenario is frozen): made plain once per run, not at every save (at 30,000 imported replicas, 7 of
        the driver state's 12 MB, most of a save's JSON time)."""
        for name, v in d.plain_fields():
            if name == "scenario":
                if self._scenario is None or self._scenario[0] is not v:
                    self._scenario = (v, Text(dumps(v)))
                v = self._scenario[1]
            yield name, v

    def _tidy(self, d: DriverState) -> None:
        root = self._file(STATE_DIR)
        if os.path.isdir(root):
            keep = None if d.state_folder is None else os.path.normpath(self._file(d.state_folder))
            for old in os.listdir(root):
                if os.path.join(root, old) != keep:
                    shutil.rmtree(os.path.join(root, old), ignore_errors=True)
        broker_disk.settle(self.brokers_dir, d.round)
        if d.table_versions is not None:
            T.trim_logs(self.tables_dir, d.table_versions, d.scenario.emulator_settings.delta_log_retention_commits)

    def recover(self, d: DriverState) -> list[str]:
        """Undo what a run killed after saving `d` wrote since (docs/run-directory.md, "Crash safety"), so
        continuing from `d` gives the tables an uninterrupted run gives: Delta commits after
        `d.table_versions`, the brokers' file versions of rounds >= `d.round`, temporary files, row
        folders other than d's; ZooKeeper's file and run.json rewritten from `d`. Only the run's one
        writer may call it (a reader of a running run would see its commits undone). Returns what it
        rolled back (table names, and "brokers" when broker files went)."""
        rolled = [] if d.table_versions is None else T.rollback(self.tables_dir, d.table_versions)
        if broker_disk.rollback(self.brokers_dir, d.round):
            rolled.append("brokers")
        for name in os.listdir(self.path):
            if name.startswith(".") and name.endswith(".tmp"):
                os.unlink(self._file(name))
        d.control.save(self.path)
        self.write_meta(d.meta())
        self._tidy(d)
        return rolled

    # ------------------------------------------------------------------ the brokers' rows
    def new_state_folder(self, round_no: int) -> str:
        """A fresh folder name (relative) for the brokers' rows after `round_no` - 1."""
        return os.path.join(STATE_DIR, f"round-{round_no:08d}-{uuid.uuid4().hex[:6]}")

    def state_path(self, d: DriverState) -> str | None:
        """The absolute folder of the brokers' saved rows, None when there are none."""
        if d.state_folder is None:
            return None
        path = self._file(d.state_folder)
        return path if os.path.isdir(path) else None

    def _write_json(self, name: str, data: Any, **kw: Any) -> None:
        self._write(name, lambda f: json.dump(data, f, **kw))

    def _write(self, name: str, write: Callable[[IO[str]], None]) -> None:
        """Write file `name` durably and atomically (storage/tables.write_durably): `write` fills a temporary
        file as it goes, which then replaces it."""
        T.write_durably(self._file(name), write, tmp=self._file(f".{name}.{uuid.uuid4().hex[:6]}.tmp"))
