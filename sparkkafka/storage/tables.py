"""The run's Delta tables (docs/tables.md), written through delta-rs.

Executors write Parquet files straight into a table's folder (`write_file`) and hand back the
Delta add action; the driver commits a round's actions in one transaction per table
(`TableWriter.commit`) tagged with the run's app id and the round, so a re-run round is refused
rather than duplicated and files of a failed attempt never become live. A run continued after a
kill drops the commits its saved driver state does not know of (`rollback`, docs/run-directory.md).
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import functools
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING
from urllib.parse import quote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake.transaction import AddAction, CommitProperties, RemoveAction, Transaction

if TYPE_CHECKING:
    from .delta_jvm import DeltaSparkCommitter

# the schemas and data files are data_files.py's (compaction.py builds on them too); re-exported here
from .data_files import (  # noqa: F401
    LIST,
    PARTITION_BY,
    SCHEMAS,
    _stats,
    _tmp_name,
    path_component,
    table_path,
    write_file,
)

APP_ID = "sparkkafka"
TABLE_CONFIG = {"delta.checkpointInterval": "10"}  # emulator delta.checkpoint.interval sets it per run


_BATCH: contextvars.ContextVar[list[tuple[str, str]] | None] = contextvars.ContextVar("durable_batch", default=None)


def write_durably(path: str, text: str | Callable[[IO[str]], object], tmp: str | None = None,
                  make_dirs: bool = False) -> None:
    """Write `text` (or what `text(file)` writes) to `path` as Kafka's CheckpointFile does: into a
    temporary file beside it (`tmp`, by default `_tmp_name(path)`), fsynced, then renamed over `path`
    (atomic on POSIX), so a reader sees the old file or the new one, never a torn one. `make_dirs`:
    create the folder when it is missing (tried only then). Inside `durable_batch()` the sync and the
    rename wait for the batch's end."""
    tmp = tmp or _tmp_name(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    try:
        fd = os.open(tmp, flags, 0o644)
    except FileNotFoundError:
        if not make_dirs:
            raise
        folder = os.path.dirname(path)
        try:  # one level missing (a new log's folder, settle's common case): one mkdir, not makedirs' walk
            os.mkdir(folder)
        except FileNotFoundError:
            os.makedirs(folder, exist_ok=True)
        except FileExistsError:
            pass
        fd = os.open(tmp, flags, 0o644)
    batch = _BATCH.get()
    try:
        with open(fd, "w", encoding="utf-8") as f:  # closes fd
            text(f) if callable(text) else f.write(text)
            if batch is None:
                f.flush()
                os.fsync(fd)
        if batch is None:
            os.replace(tmp, path)
        else:
            batch.append((tmp, path))
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def durable_batch() -> Iterator[None]:
    """Defer the fsync and rename of every `write_durably` inside to the end: one `syncfs` of the files'
    filesystem, then the renames in order (a new cluster's first round writes a leader-epoch checkpoint
    per replica: 30,000 fsyncs per task at 60k replicas, 11.6 s of it). Every file is still on disk
    before its rename, as with one fsync each; where syncfs is missing (not Linux), each file is fsynced.
    On an error inside, nothing is renamed; the temporary files an error leaves are removed."""
    if _BATCH.get() is not None:  # nested: the outer batch syncs
        yield
        return
    batch: list[tuple[str, str]] = []
    token = _BATCH.set(batch)
    renamed = 0
    try:
        try:
            yield
        finally:
            _BATCH.reset(token)
        if batch:
            _sync_all([tmp for tmp, _ in batch])
        for tmp, path in batch:
            os.replace(tmp, path)
            renamed += 1
    finally:
        for tmp, _ in batch[renamed:]:  # what an error left behind
            if os.path.exists(tmp):
                os.unlink(tmp)


def _sync_all(files: list[str]) -> None:
    """Make `files` durable: one syncfs(2) of their filesystem (all are under one brokers folder), else
    one fsync each."""
    syncfs = getattr(_libc(), "syncfs", None)
    if syncfs is not None:
        fd = os.open(files[0], os.O_RDONLY)
        try:
            if syncfs(fd) == 0:
                return
        finally:
            os.close(fd)
    for name in files:
        fd = os.open(name, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def create_tables(tables_dir: str, checkpoint_interval: int | None = None) -> None:
    """Create every table of a run, empty, with its fixed schema. Each commit whose version is a multiple
    of `checkpoint_interval` (delta.checkpointInterval; default TABLE_CONFIG's) writes a Delta checkpoint,
    so loading a table reads one Parquet file and the commits since, not the whole log."""
    config = dict(TABLE_CONFIG)
    if checkpoint_interval is not None:
        config["delta.checkpointInterval"] = str(int(checkpoint_interval))
    for name, schema in SCHEMAS.items():
        DeltaTable.create(table_path(tables_dir, name), schema, mode="error",
                          partition_by=PARTITION_BY.get(name), configuration=config)


_LOG_ENTRY = re.compile(r"^(\d{20})\.")
_CHECKSUM = ".crc"  # a version's checksum file: Delta's JVM writer leaves one beside each commit, delta-rs none


def _log_entries(log: str, checksums: bool = False) -> list[tuple[int, bool, str]]:
    """(version, is a checkpoint, file name) of each commit and checkpoint file in a `_delta_log`; with
    `checksums`, each version's checksum file too (as no checkpoint), for those that delete a version's files:
    a checksum left behind a rolled-back version would describe another commit of that version to Delta."""
    out = []
    for entry in os.listdir(log):
        m = _LOG_ENTRY.match(entry)
        if m and (checksums or not entry.endswith(_CHECKSUM)):
            out.append((int(m.group(1)), ".checkpoint." in entry, entry))
    return out


def _unlink_log_file(log: str, name: str) -> None:
    """Delete a `_delta_log` file and the checksum sidecar (`.NAME.crc`) Hadoop's local file system writes
    beside each file Delta's JVM writer makes: a sidecar left behind a name written again (a rolled-back
    version committed anew, a new `_last_checkpoint`) fails Hadoop's read of it with a checksum error."""
    os.unlink(os.path.join(log, name))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(log, f".{name}.crc"))


def table_versions(tables_dir: str) -> dict[str, int]:
    """Every table's current version (what a run's saved driver state records: its commit point)."""
    return {name: DeltaTable(table_path(tables_dir, name)).version() for name in SCHEMAS}


def rollback(tables_dir: str, versions: Mapping[str, int]) -> list[str]:
    """Make each table what it was at `versions` (the driver state's record): drop the commits after it,
    their checkpoints, and the temporary files a killed writer left (Delta's `_delta_log` and the data
    folders). Commits go newest first, a version's checkpoint before its commit file, and
    `_last_checkpoint` before any, so a kill inside leaves a table at some version between. The data
    files those commits added stay, unreferenced: a re-run round writes them again under the same
    names. Returns the tables rolled back."""
    rolled = []
    for name, keep in sorted(versions.items()):
        root = table_path(tables_dir, name)
        log = os.path.join(root, "_delta_log")
        late = [(-v, entry.endswith(".json"), entry) for v, _, entry in _log_entries(log, checksums=True) if v > keep]
        if late:
            rolled.append(name)
            last = os.path.join(log, "_last_checkpoint")
            if os.path.exists(last):
                with open(last) as f:
                    if int(json.load(f)["version"]) > keep:
                        _unlink_log_file(log, "_last_checkpoint")  # readers list the log for the newest checkpoint
            for _, _, entry in sorted(late):
                _unlink_log_file(log, entry)
        for folder, _, names in os.walk(root):
            for n in names:
                if n.endswith(".tmp"):
                    os.unlink(os.path.join(folder, n))
    return rolled


def trim_logs(tables_dir: str, versions: Mapping[str, int], keep: int) -> int:
    """Thin each table's `_delta_log` once the driver state recording `versions` is saved: delta-rs lists
    the whole folder on every commit and load, so a log of 10,000 commits costs ~180 ms a commit
    (docs/benchmarks.md, "Long runs"). Kept: every entry from the newest checkpoint at or before
    `versions[name] - keep` on (so the saved version and the `keep` commits before it load, and a
    rollback to the saved version finds its checkpoint), and of the older history the first checkpoint
    of each `keep` versions, which time travel still loads (the report's "before" picture, thinned).
    This is what Delta's log cleanup does at a checkpoint (delta.logRetentionDuration), bounded by the
    commit point instead of a wall-clock age. Entries go oldest first, so a kill inside leaves a log that
    loads as before (its newest checkpoint and the commits after it stay) and that the next save trims
    again. Returns the entries deleted."""
    gone = 0
    for name, saved in sorted(versions.items()):
        log = os.path.join(table_path(tables_dir, name), "_delta_log")
        entries = _log_entries(log, checksums=True)
        base = max((v for v, cp, _ in entries if cp and v <= saved - keep), default=None)
        if base is None:
            continue
        sparse: dict[int, int] = {}
        for v, cp, _ in entries:
            if cp and v < base:
                sparse[v // keep] = min(v, sparse.get(v // keep, v))
        kept = set(sparse.values())
        for v, cp, entry in sorted(entries):
            if v < base and not (cp and v in kept):
                _unlink_log_file(log, entry)
                gone += 1
    return gone


def loadable_versions(tables_dir: str, name: str) -> list[int]:
    """The versions of a table that still load after `trim_logs` with deltalake: `unbroken_versions` and the
    older checkpoints kept. Ascending."""
    points = set(checkpoint_versions(tables_dir, name))
    unbroken = unbroken_versions(tables_dir, name)
    first = unbroken[0] if unbroken else max(points, default=-1) + 1
    return sorted({p for p in points if p < first} | set(unbroken))


def unbroken_versions(tables_dir: str, name: str) -> list[int]:
    """Each version from the oldest commit of the unbroken run of commits ending at the current version (from
    its checkpoint on, when a commit before it is gone): the versions Delta's own Spark reader time-travels
    to. It refuses the older checkpoints `trim_logs` keeps (DELTA_VERSION_NOT_FOUND, "Available versions:
    [first, current]"), as it only rebuilds a version from a checkpoint followed by every commit since, which
    Delta's log cleanup guarantees by deleting everything older. Ascending."""
    entries = _log_entries(os.path.join(table_path(tables_dir, name), "_delta_log"))
    commits = {v for v, cp, _ in entries if not cp}
    points = {v for v, cp, _ in entries if cp}
    if not commits:
        return []
    first = max(commits)
    while first - 1 in commits:
        first -= 1
    if first > 0 and first not in points:  # the run of commits starts after a gap: loads from a checkpoint
        first = min((p for p in points if p >= first), default=max(commits) + 1)
    return list(range(first, max(commits) + 1))


def checkpoint_versions(tables_dir: str, name: str) -> list[int]:
    """The versions with a checkpoint in a table's `_delta_log`, ascending."""
    return sorted({v for v, cp, _ in _log_entries(os.path.join(table_path(tables_dir, name), "_delta_log")) if cp})


def checkpoint_round(tables_dir: str, name: str, version: int) -> int | None:
    """The round the run had committed to a table by `version`, read from its checkpoint's app transaction
    (None: no round yet). A checkpoint keeps no commitInfo, so this is the round of a thinned history's
    checkpoint. delta-rs writes single-file checkpoints."""

    path = os.path.join(table_path(tables_dir, name), "_delta_log", f"{version:020d}.checkpoint.parquet")
    txns = pq.read_table(path, columns=["txn"])["txn"].to_pylist()
    return max((t["version"] for t in txns if t is not None and str(t.get("appId", "")).startswith(APP_ID)),
               default=None)


@dataclass
class TableWriter:
    """Driver-side committer for one run: one DeltaTable handle per table, reused across rounds. With
    `delta_spark` (a storage.delta_jvm.DeltaSparkCommitter: emulator delta.writer delta-spark) the same
    actions are committed through Delta's JVM transaction API instead of delta-rs; the handles still read."""

    tables_dir: str
    run_id: str
    compact_min_files: int = 0  # emulator delta.compact.min.files (storage/compaction.py); 0: never mid-run
    delta_spark: DeltaSparkCommitter | None = None

    def __post_init__(self) -> None:
        self._tables: dict[str, DeltaTable] = {}
        self._added: dict[str, int] = {}  # files committed per table since its last compaction check
        self.upkeep_s = 0.0  # wall seconds spent compacting (bench)

    def table(self, name: str) -> DeltaTable:
        """The table's handle, current as of this writer's last commit (see `refresh`)."""
        dt = self._tables.get(name)
        if dt is None:
            dt = self._tables[name] = DeltaTable(table_path(self.tables_dir, name))
        return dt

    def refresh(self, name: str | None = None) -> None:
        """Reload handles after someone else committed (compaction); this writer's own commits
        keep them current (create_write_transaction does not advance the handle by itself)."""
        for n in [name] if name else list(self._tables):
            self.table(n).update_incremental()

    @property
    def app_id(self) -> str:
        return f"{APP_ID}-{self.run_id}"

    def commit(self, name: str, adds: Iterable[dict], round_no: int, removes: Iterable = ()) -> bool:
        """Commit the files of one round (or a batch of rounds ending at round_no) in one transaction.

        `removes` are deltalake RemoveActions or remove dicts as returned by log_truncation.truncate.

        Refuses (returns False) when this run already committed round_no or a later one, which is
        what makes a re-run round idempotent (through delta-spark: Delta's own txnVersion check, inside
        the transaction).
        """
        adds = list(adds)
        removes = list(removes)
        for r in removes:  # remove dicts from log_truncation.truncate (JSON-friendly, shipped from executors)
            if isinstance(r, dict) and r.get("table", name) != name:
                raise ValueError(f"remove of table {r['table']!r} given to commit of {name!r}")
        removes = [remove_actions([r])[0] if isinstance(r, dict) else r for r in removes]
        if not adds and not removes:
            done = self.table(name).transaction_version(self.app_id)
            return done is None or done < round_no
        if not self._transact(name, adds, removes, True, {"sparkkafka.round": str(round_no)}, (self.app_id, round_no)):
            return False
        self._maybe_compact(name, len(adds))
        return True

    def _transact(self, name: str, adds: list[dict], removes: list[RemoveAction], data_change: bool,
                  tags: dict[str, str], app: tuple[str, int] | None = None) -> bool:
        """One transaction of `adds` (write_file dicts) and `removes` on table `name`, through delta-rs or
        the delta-spark committer; with `app` (app id, version) refused (False) when the table already holds
        that app's version or a later one, else its SetTransaction is committed too. The handle is reloaded
        after (readers of version() need no other reload)."""
        if self.delta_spark is not None:
            if not self.delta_spark.commit(table_path(self.tables_dir, name),
                                           [delta_add(a, data_change) for a in adds] + [delta_remove(r) for r in removes],
                                           tags, PARTITION_BY.get(name), app=app, compaction=not data_change):
                return False
        else:
            dt = self.table(name)
            if app is not None and (done := dt.transaction_version(app[0])) is not None and done >= app[1]:
                return False
            actions = [AddAction(a["path"], a["size"], a["partition_values"], a["modification_time"], data_change,
                                 a["stats"]) for a in adds] + removes
            dt.create_write_transaction(
                actions, mode="append", schema=SCHEMAS[name], partition_by=PARTITION_BY.get(name),
                commit_properties=CommitProperties(app_transactions=[Transaction(*app)] if app else None,
                                                   custom_metadata=tags))
        self.table(name).update_incremental()
        return True

    def _maybe_compact(self, name: str, added: int) -> None:
        """Compact `name` (storage/compaction.py) once compact_min_files files were committed to it since
        the last look: no partition can have filled a tier before that."""
        if self.compact_min_files <= 0:
            return
        self._added[name] = self._added.get(name, 0) + added
        if self._added[name] < self.compact_min_files:
            return
        from .compaction import compact

        t = time.perf_counter()
        self._added[name] = 0
        compact(self, name, self.compact_min_files)
        self.upkeep_s += time.perf_counter() - t

    def rearrange(self, name: str, adds: Iterable[dict], removes: Iterable[dict]) -> None:
        """Commit files that replace others with the same rows (compaction): dataChange = false, and no
        app transaction (the run's committed round stays what it was)."""
        now = int(time.time() * 1000)
        removed = [RemoveAction(r["path"], False, now, int(r["size"]), dict(r["partition_values"])) for r in removes]
        self._transact(name, list(adds), removed, False, {"sparkkafka.compaction": "1"})

    def append(self, name: str, table: pa.Table, round_no: int, tag: str) -> None:
        """Write and commit a driver-side batch of rows (small tables: metrics, partition_state)."""
        if table.num_rows:
            self.commit(name, [write_file(self.tables_dir, name, table.cast(SCHEMAS[name]), tag)], round_no)


def remove_actions(removes: list[dict]) -> list[RemoveAction]:
    """deltalake RemoveActions (data change) for remove dicts (log_truncation.truncate makes them)."""
    return [RemoveAction(r["path"], True, int(r["deletion_timestamp"]), int(r["size"]),
                         {k: (None if v is None else str(v)) for k, v in r["partition_values"].items()})
            for r in removes]


def delta_path(path: str) -> str:
    """A data file's relative path as a Delta log holds it: a URI path, so the `%` of the escaped partition
    folders (path_component) is `%25`; every other character write_file and compaction put in a path
    (ASCII letters, digits, `_.-~`, `=`, `/`) stands for itself, as delta-rs writes them."""
    return quote(path, safe="/=")


def delta_add(a: Mapping, data_change: bool) -> dict:
    """A write_file dict as Delta's AddFile JSON action (what delta-rs writes for the same file)."""
    return {"add": {"path": delta_path(a["path"]), "partitionValues": dict(a["partition_values"]),
                    "size": int(a["size"]), "modificationTime": int(a["modification_time"]),
                    "dataChange": data_change, "stats": a["stats"]}}


def delta_remove(r: RemoveAction) -> dict:
    """A deltalake RemoveAction as Delta's RemoveFile JSON action."""
    return {"remove": {"path": delta_path(r.path), "deletionTimestamp": r.deletion_timestamp,
                       "dataChange": r.data_change, "extendedFileMetadata": True,
                       "partitionValues": dict(r.partition_values or {}), "size": r.size}}


def read_table(tables_dir: str, name: str, version: int | None = None, columns: list[str] | None = None,
               filter: pc.Expression | None = None) -> pa.Table:  # noqa: A002 - pyarrow's name
    """Read a whole table's current snapshot as Arrow (partition columns included), or its `columns`; only
    the rows `filter` (a pyarrow dataset expression) keeps, when given (Parquet statistics skip row groups)."""
    dt = DeltaTable(table_path(tables_dir, name), version=version)
    if filter is None:
        return dt.to_pyarrow_table(columns=columns)
    return dt.to_pyarrow_dataset().to_table(columns=columns, filter=filter)


def column_max(tables_dir: str, name: str, column: str) -> int | None:
    """The largest value of an integer `column` in the table's current snapshot, from the add actions'
    statistics (no data file read; None for an empty table). Falls back to reading the column when some
    file has no statistics."""
    acts = pa.table(DeltaTable(table_path(tables_dir, name)).get_add_actions(flatten=True))
    if not acts.num_rows:
        return None
    stat = f"max.{column}"
    if stat in acts.column_names and acts.column(stat).null_count == 0:
        return int(pc.max(acts.column(stat)).as_py())
    col = read_table(tables_dir, name, columns=[column]).column(column)
    return None if len(col) == 0 else int(pc.max(col).as_py())


def scan_table(tables_dir: str, name: str, columns: list[str]) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """A table's current snapshot as a stream of Arrow batches of `columns`, in read_table's row order, and
    their schema: for a reader that must not hold the whole table. pyarrow's scanner reads ahead 16 batches
    of each of 4 files by default, most of the driver's peak memory in the end-of-run audit, which streams
    every history table through here: 1,458-1,519 -> 1,116-1,169 MiB at 60k replicas over 60 emulated s,
    in the same time (~50 s), with 2 batches of one file (docs/benchmarks.md)."""
    scanner = DeltaTable(table_path(tables_dir, name)).to_pyarrow_dataset().scanner(
        columns=columns, batch_readahead=SCAN_BATCHES_AHEAD, fragment_readahead=1)
    return scanner.projected_schema, scanner.to_batches()


SCAN_BATCHES_AHEAD = 2  # batches scan_table's scanner decodes ahead of its reader


def snapshot_files(tables_dir: str, name: str) -> list[str]:
    """The data files of the table's current snapshot (for spark.read.parquet)."""
    return DeltaTable(table_path(tables_dir, name)).file_uris()


@dataclass(frozen=True)
class LogSnapshot:
    """A committed version of the `log` table plus the actions the same writer made since, which the
    driver has not committed yet: the resident engine runs many rounds per Spark job and commits the
    job's files once, so a task's reads in a later round of the job must see its own earlier appends
    and truncations. Only the task hosting a broker writes that broker's log, so its own actions are
    all it needs. `adds` are write_file dicts, `removes` the raw relative paths of removed files."""

    version: int
    adds: tuple[dict, ...] = ()
    removes: frozenset[str] = frozenset()

    def then(self, actions: Iterable[dict]) -> LogSnapshot:
        """This snapshot after more of the writer's own log actions (adds, and removes with remove=True)."""
        adds, removes = list(self.adds), set(self.removes)
        for a in actions:
            if a.get("table", "log") != "log":
                continue
            if a.get("remove"):
                removes.add(a["path"])
            else:
                adds.append(a)
        return LogSnapshot(self.version, tuple(a for a in adds if a["path"] not in removes), frozenset(removes))


# get_add_actions(flatten=True) columns the log readers use, with fixed types
LOG_ACTION_TYPES = {
    "path": pa.string(), "size_bytes": pa.int64(), "partition.broker": pa.int32(), "partition.log_dir": pa.string(),
    "min.topic": pa.string(), "max.topic": pa.string(), "min.partition": pa.int32(),
    "max.partition": pa.int32(), "min.offset": pa.int64(), "max.offset": pa.int64(),
}


def files_overlapping(files: pa.Table, ranges: Mapping[str, Iterable]) -> np.ndarray:
    """Which log files (add actions, LOG_ACTION_TYPES columns) may hold a row of `ranges` (topic,
    partition, from_offset, to_offset exclusive): those whose stats overlap some range's topic,
    partition and offsets; a missing stat never excludes. Topics compare by their rank among the names
    involved. Past _PAIRS (file, range) pairs, each file is checked against the ranges' bounds instead
    (a superset). Serves a ranged read (broker_disk.read_log: a new leader's followers ask for its last
    few records, and each read opened every window's file of the broker) and a truncation's candidate
    files (log_truncation)."""
    topics = np.asarray(ranges["topic"], dtype=object)
    names = np.unique(np.concatenate([topics, *(files[c].drop_null().to_numpy(zero_copy_only=False)
                                                for c in ("min.topic", "max.topic"))]))
    lowest, highest = np.iinfo(np.int64).min, np.iinfo(np.int64).max

    def stat(col: str, missing: int) -> np.ndarray:
        v = files[col]
        if pa.types.is_string(v.type):
            ranks = np.searchsorted(names, v.fill_null("").to_numpy(zero_copy_only=False))
            return np.where(v.is_null().to_numpy(zero_copy_only=False), missing, ranks)
        return v.cast(pa.int64()).fill_null(missing).to_numpy()

    f_topic, f_part, f_off = ((stat(f"min.{c}", lowest), stat(f"max.{c}", highest))
                              for c in ("topic", "partition", "offset"))
    topic = np.searchsorted(names, topics)
    part = np.asarray(ranges["partition"], dtype=np.int64)
    first = np.asarray(ranges["from_offset"], dtype=np.int64)
    last = np.asarray(ranges["to_offset"], dtype=np.int64) - 1
    r_topic, r_part, r_off = (topic, topic), (part, part), (first, last)
    if files.num_rows * len(topics) > _PAIRS:
        r_topic, r_part, r_off = (topic.min(), topic.max()), (part.min(), part.max()), (first.min(), last.max())
    else:
        f_topic, f_part, f_off = ((lo[:, None], hi[:, None]) for lo, hi in (f_topic, f_part, f_off))
    ok = np.ones((), dtype=bool)
    for (f_lo, f_hi), (r_lo, r_hi) in ((f_topic, r_topic), (f_part, r_part), (f_off, r_off)):
        ok = ok & (f_lo <= r_hi) & (r_lo <= f_hi)
    return ok if ok.ndim == 1 else ok.any(axis=1)


_PAIRS = 2_000_000  # (file, range) pairs checked one by one at most (~25 ms)


@functools.lru_cache(maxsize=8)
def _committed_log_actions(root: str, version: int, stamp: tuple | None) -> pa.Table:
    """The add actions of the log table at a committed version (cached per process: the resident engine
    reads the same version in every round of a window, the round engine in every call of a round)."""
    acts = pa.table(DeltaTable(root, version=version).get_add_actions(flatten=True))
    return pa.table({c: (acts[c].cast(t) if c in acts.column_names else pa.nulls(acts.num_rows, t))
                     for c, t in LOG_ACTION_TYPES.items()})


def log_file_actions(tables_dir: str, version: int | LogSnapshot) -> pa.Table:
    """The live files of the `log` table at `version` (a committed version, or a LogSnapshot with a
    writer's uncommitted actions on top): the add actions' columns in LOG_ACTION_TYPES, paths URL-encoded
    as delta-rs gives them."""
    from urllib.parse import unquote

    snap = version if isinstance(version, LogSnapshot) else LogSnapshot(int(version))
    root = table_path(tables_dir, "log")
    try:  # a committed version never changes; a run rewritten in place has new commit files
        st = os.stat(os.path.join(root, "_delta_log", f"{snap.version:020d}.json"))
        base = _committed_log_actions(root, snap.version, (st.st_ino, st.st_mtime_ns, st.st_size))
    except FileNotFoundError:  # its commit file is gone (log cleanup): read through the checkpoint
        base = _committed_log_actions.__wrapped__(root, snap.version, None)
    if not snap.adds and not snap.removes:
        return base
    if snap.removes and base.num_rows:
        raw = [unquote(p) for p in base["path"].to_pylist()]
        base = base.filter(pa.array([p not in snap.removes for p in raw]))
    rows = []
    for a in snap.adds:
        st = json.loads(a["stats"])
        lo, hi = st.get("minValues", {}), st.get("maxValues", {})
        rows.append({"path": quote(a["path"], safe="/"), "size_bytes": a["size"],
                     "partition.broker": int(a["partition_values"]["broker"]),
                     "partition.log_dir": a["partition_values"]["log_dir"],
                     "min.topic": lo.get("topic"), "max.topic": hi.get("topic"), "min.partition": lo.get("partition"),
                     "max.partition": hi.get("partition"), "min.offset": lo.get("offset"),
                     "max.offset": hi.get("offset")})
    mine = pa.Table.from_pylist(rows, schema=pa.schema(list(LOG_ACTION_TYPES.items())))
    return pa.concat_tables([base, mine])
