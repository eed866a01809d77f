"""What survives a broker crash besides its Delta log: the per-log-dir files Kafka keeps.

Under OUT/brokers/<id>/<log_dir>/ (the log dir's name escaped into one folder name, tables.path_component:
/var/kafka/d0 is OUT/brokers/<id>/%2Fvar%2Fkafka%2Fd0; tables and tools show the name itself):
- `replication-offset-checkpoint`: the HW of every log in the dir, in Kafka's text layout
  (version line `0`, entry count, then `topic partition offset`), rewritten every
  replica.high.watermark.checkpoint.interval.ms (LogManager / ReplicaManager).
- `partitions`: the logs that exist in the dir (Kafka sees them as `<topic>-<p>` directories),
  rewritten whenever a log is created, so an empty log is found again after a restart.
- `future-partitions`: the future logs (KIP-113 moves in progress) in the dir (Kafka's
  `<topic>-<p>.<uuid>-future` directories), rewritten whenever one is created, swapped in or dropped.
- `leader-epoch-checkpoints` (the emulator's layout of Kafka's per-log `<topic>-<p>/leader-epoch-checkpoint`):
  the leader-epoch cache of every log in the dir (LeaderEpochFileCache), a line per log, `+ <future> <p>
  <epoch:start,...> <topic>` (`.` for an empty cache; future 1 for a future log of a KIP-113 move). Kafka
  writes one file in each log's folder; one file per dir keeps a run's end from creating a folder and a file
  per replica. No Kafka tool reads the file. Per-log files a run of the older layout left are still read,
  and folded into it at the next save. Inside a run a round writes the dir's changed entries as one
  version, `leader-epoch-checkpoints.r<round>` (below).
- `flushed-offsets` (the emulator's, not Kafka's): per log, the offset below which its records were
  flushed (fsync) by Kafka's flush rules or a clean shutdown; a power loss keeps those records and
  the ones the operating system wrote back, and nothing else (protocol/flush.py).
Also, executor-side reads of a broker's log from a pinned Delta snapshot (restart recovery and
catch-up reads for lagging followers).

Crash safety (docs/run-directory.md): a round's task writes each file as a version keyed by the round,
`<file>.r<round>`, and reads at round R the newest version before R, else the file itself. The
leader-epoch checkpoints a round changes in one dir (and the logs it removes there, as tombstones) are
one version, the dir's `leader-epoch-checkpoints.r<round>` journal: a new cluster's first rounds change
every replica's, and a file each (a folder each) was ~40% of a 60,000-replica task's first window. A task Spark re-runs (executor
lost) so reads what the round read the first time and rewrites the same versions; a run continued
from its last saved driver state (round S) drops the versions of rounds >= S (`rollback`). After the
driver saved its state, `settle` folds the versions before S into the files without a round suffix, so a
run at rest holds no versions. Every file is written to a temporary name, fsynced and renamed.
"""

from __future__ import annotations

import os
import re
from collections import OrderedDict
from collections.abc import Iterable
from urllib.parse import unquote

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..protocol import leader_epoch
from .tables import (
    LogSnapshot,
    durable_batch,
    files_overlapping,
    log_file_actions,
    path_component,
    table_path,
    write_durably,
)

HW_CHECKPOINT = "replication-offset-checkpoint"
PARTITIONS = "partitions"
FUTURE_PARTITIONS = "future-partitions"
EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
FLUSHED = "flushed-offsets"


def dir_path(brokers_dir: str, broker: int, log_dir: str) -> str:
    return os.path.join(brokers_dir, str(int(broker)), path_component(log_dir))


_VERSION = re.compile(r"^(?P<base>.+)\.r(?P<round>\d{10})$")
_DATA, _GONE = "+\n", "-\n"  # a version's first line: the file's text follows / the log was removed


def _write(path: str, text: str, round_no: int | None) -> None:
    """Write `path`'s text as round `round_no`'s version of it; with no round (a cluster imported before its
    first round) the file itself. (A version starting with _GONE, an older layout's removed log, is still
    read and settled.)"""
    if round_no is None:
        write_durably(path, text, make_dirs=True)
    else:
        write_durably(_version(path, round_no), _DATA + text, make_dirs=True)


def _version(path: str, round_no: int) -> str:
    """The name of round `round_no`'s version of `path` (what _VERSION matches)."""
    return f"{path}.r{int(round_no):010d}"


def _versions(path: str) -> list[tuple[int, str]]:
    """The round versions of `path`, as (round, file), oldest first."""
    folder, name = os.path.split(path)
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    out = []
    for n in names:
        m = _VERSION.match(n)
        if m and m.group("base") == name:
            out.append((int(m.group("round")), os.path.join(folder, n)))
    return sorted(out)


def _read(path: str, before: int | None = None) -> str | None:
    """`path`'s text as a task of round `before` sees it (None: all versions): the newest version of an
    earlier round, else the file itself; None when there is none or the log was removed."""
    found = [f for r, f in _versions(path) if before is None or r < before]
    if found:
        with open(found[-1]) as f:
            text = f.read()
        return text[len(_DATA):] if text.startswith(_DATA) else None
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return f.read()


def _versioned(brokers_dir: str) -> dict[str, list[tuple[int, str]]]:
    """Every file with round versions under brokers_dir: its path -> its versions, oldest first."""
    out: dict[str, list[tuple[int, str]]] = {}
    for folder, _, names in os.walk(brokers_dir):
        for n in names:
            m = _VERSION.match(n)
            if m:
                out.setdefault(os.path.join(folder, m.group("base")), []).append(
                    (int(m.group("round")), os.path.join(folder, n)))
    return {k: sorted(v) for k, v in out.items()}


def rollback(brokers_dir: str, round_no: int) -> int:
    """Drop what rounds >= `round_no` wrote (a run continued from its driver state saved before that round:
    those rounds run again) and any temporary file a killed writer left; returns the files removed."""
    n = 0
    for folder, _, names in os.walk(brokers_dir):
        for name in names:
            m = _VERSION.match(name)
            if name.endswith(".tmp") or (m and int(m.group("round")) >= round_no):
                os.unlink(os.path.join(folder, name))
                n += 1
    return n


def settle(brokers_dir: str, round_no: int) -> None:
    """Fold each file's versions of rounds before `round_no` into the file without a round suffix (a
    tombstone removes it). Every step leaves what `_read` returns unchanged, so a kill anywhere in it is
    harmless, and running it again finishes the job: the new files are written first, synced together,
    and only then are the versions they replace removed."""
    folded, journals = [], []
    with durable_batch():
        for path, versions in sorted(_versioned(brokers_dir).items()):
            done = [(r, f) for r, f in versions if r < round_no]
            if not done:
                continue
            if os.path.basename(path) == EPOCH_JOURNAL:
                journals.append((path, [f for _, f in done]))
                continue
            for _, f in done[:-1]:
                os.unlink(f)
            newest = done[-1][1]
            with open(newest) as f:
                text = f.read()
            if text.startswith(_DATA):
                write_durably(path, text[len(_DATA):], make_dirs=True)
                folded.append(newest)
            else:
                if os.path.exists(path):
                    os.unlink(path)
                os.unlink(newest)
                folder = os.path.dirname(path)
                if not os.listdir(folder):
                    os.rmdir(folder)
    _fold_journals(journals)
    for newest in folded:
        os.unlink(newest)


def _fold_journals(journals: list[tuple[str, list[str]]]) -> None:
    """Settle's part for the epoch journals (per dir: the journal's at-rest path and its versions to fold,
    oldest first): each dir's entries, the at-rest file's and the versions', written as its new at-rest file
    (removed logs dropped; all synced together), then the versions removed. Per-log files a run of the older
    layout left (`<topic>-<p>/leader-epoch-checkpoint`) are folded in too: a removed log's first (its
    tombstone is still in a version, so a kill then changes nothing a reader sees), the others once the new
    file shadows them. One dir's entries are held at a time (a 1M-replica run's, all at once, were ~400 MB on
    a driver that must stay under 2 GiB)."""
    shadowed: list[str] = []
    with durable_batch():
        for path, files in journals:
            entries = _journal_entries(_at_rest(path) + files)
            for key, folder in _legacy_logs(os.path.dirname(path)).items():
                if key not in entries:
                    entries[key] = _legacy_cache(folder)
                elif entries[key] is None:
                    _remove_legacy(folder)
                    continue
                shadowed.append(folder)
            _write_at_rest(path, entries)
    for folder in shadowed:
        _remove_legacy(folder)
    for _, files in journals:
        for f in files:
            os.unlink(f)


def _at_rest(path: str) -> list[str]:
    """The journal's at-rest file (`path` without a round suffix), if there is one: read before its versions."""
    return [path] if os.path.exists(path) else []


def _legacy_logs(base: str) -> dict[tuple[str, int, bool], str]:
    """The per-log folders of a dir a run of the older layout left, keyed as journal entries are."""
    out = {}
    with os.scandir(base) as it:
        for e in it:
            if not e.is_dir():
                continue
            name, future = (e.name[:-len("-future")], True) if e.name.endswith("-future") else (e.name, False)
            topic, _, p = name.rpartition("-")
            if topic and p.isdigit():
                out[(topic, int(p), future)] = e.path
    return out


def _legacy_cache(folder: str) -> list[tuple[int, int]]:
    path = os.path.join(folder, EPOCH_CHECKPOINT)
    return leader_epoch.parse_checkpoint(open(path).read()) if os.path.exists(path) else []


def _remove_legacy(folder: str) -> None:
    path = os.path.join(folder, EPOCH_CHECKPOINT)
    if os.path.exists(path):
        os.unlink(path)
    if not os.listdir(folder):
        os.rmdir(folder)


def format_checkpoint(entries: Iterable[tuple[str, int, int]]) -> str:
    """Kafka's OffsetCheckpointFile text: version 0, count, then `topic partition offset` lines."""
    rows = sorted(entries)
    return "0\n" + f"{len(rows)}\n" + "".join(f"{t} {p} {o}\n" for t, p, o in rows)


def parse_checkpoint(text: str) -> list[tuple[str, int, int]]:
    lines = text.splitlines()
    if not lines or lines[0].strip() != "0":
        raise ValueError(f"unrecognised checkpoint version: {lines[:1]}")
    n = int(lines[1])
    out = []
    for line in lines[2:2 + n]:
        t, p, o = line.rsplit(" ", 2)
        out.append((t, int(p), int(o)))
    return out


def write_hw_checkpoint(brokers_dir: str, broker: int, log_dir: str, entries: Iterable[tuple[str, int, int]],
                        round_no: int | None = None) -> None:
    _write(os.path.join(dir_path(brokers_dir, broker, log_dir), HW_CHECKPOINT), format_checkpoint(entries), round_no)


def write_partitions(brokers_dir: str, broker: int, log_dir: str, parts: Iterable[tuple[str, int]],
                     future: bool = False, round_no: int | None = None) -> None:
    """The dir's listing of its logs (`future`: of its future logs)."""
    _write(os.path.join(dir_path(brokers_dir, broker, log_dir), FUTURE_PARTITIONS if future else PARTITIONS),
           "".join(f"{t} {p}\n" for t, p in sorted(parts)), round_no)


def _epoch_path(brokers_dir: str, broker: int, log_dir: str, topic: str, partition: int, future: bool = False) -> str:
    """The older layout's per-log leader-epoch-checkpoint (`<topic>-<p>[-future]/` in the dir): read when the
    dir's journal has no entry for the log."""
    name = f"{topic}-{int(partition)}" + ("-future" if future else "")
    return os.path.join(dir_path(brokers_dir, broker, log_dir), name, EPOCH_CHECKPOINT)


EPOCH_JOURNAL = "leader-epoch-checkpoints"  # the emulator's: a round's leader-epoch checkpoints of a dir's logs
EpochWrite = tuple[int, str, str, int, bool, "Iterable[tuple[int, int]] | None"]  # broker, dir, topic, p, future, cache


def write_epoch_checkpoints(brokers_dir: str, round_no: int | None, writes: Iterable[EpochWrite]) -> None:
    """Leader-epoch checkpoint writes (a cache, or None: the log removed), one file per dir: round `round_no`'s
    version of the dir's journal, `leader-epoch-checkpoints.r<round>`, merged into what the round already
    wrote there (a re-run task writes the same entries again); with no round (a cluster imported before its
    first round, a tool's change at rest) the at-rest file itself. In order: a log written twice keeps the
    later."""
    by_dir: dict[tuple[int, str], dict[tuple[str, int, bool], list[tuple[int, int]] | None]] = {}
    for broker, log_dir, topic, partition, future, cache in writes:
        by_dir.setdefault((int(broker), log_dir), {})[(topic, int(partition), bool(future))] = (
            None if cache is None else list(cache))
    for (broker, log_dir), entries in sorted(by_dir.items()):
        path = os.path.join(dir_path(brokers_dir, broker, log_dir), EPOCH_JOURNAL)
        if round_no is None:
            legacy = _legacy_logs(os.path.dirname(path)) if os.path.isdir(os.path.dirname(path)) else {}
            for key in entries:
                if key in legacy:
                    _remove_legacy(legacy[key])
            _write_at_rest(path, {**_journal_entries(_at_rest(path)), **entries})
            continue
        path = _version(path, round_no)
        merged = {**_journal_entries([path]), **entries} if os.path.exists(path) else entries
        write_durably(path, "".join(_journal_line(k, v) for k, v in merged.items()), make_dirs=True)


def _write_at_rest(path: str, entries: dict[tuple[str, int, bool], list[tuple[int, int]] | None]) -> None:
    """The dir's at-rest epoch file: the live logs' entries in (topic, partition, future) order; none, no file."""
    text = "".join(_journal_line(k, v) for k, v in sorted(entries.items()) if v is not None)
    if text:
        write_durably(path, text, make_dirs=True)
    elif os.path.exists(path):
        os.unlink(path)


def _journal_line(key: tuple[str, int, bool], cache: list[tuple[int, int]] | None) -> str:
    topic, partition, future = key  # the topic last: a Kafka topic name holds no space, but it is never split
    if cache is None:
        return f"- {int(future)} {partition} - {topic}\n"
    return f"+ {int(future)} {partition} {leader_epoch.encode(cache) or '.'} {topic}\n"


def _journal_entries(files: list[str]) -> dict[tuple[str, int, bool], list[tuple[int, int]] | None]:
    """The entries of journals (oldest first): each log's newest, None for a removed one."""
    out: dict[tuple[str, int, bool], list[tuple[int, int]] | None] = {}
    for name in files:
        with open(name) as f:
            for line in f:
                kind, future, partition, cache, topic = line.rstrip("\n").split(" ", 4)
                out[(topic, int(partition), future == "1")] = (
                    None if kind == "-" else leader_epoch.decode("" if cache == "." else cache))
    return out


def _dir_journal(brokers_dir: str, broker: int, log_dir: str, before: int | None
                 ) -> dict[tuple[str, int, bool], list[tuple[int, int]] | None]:
    """The epoch entries the dir's journals hold for a task of round `before` (None: all)."""
    path = os.path.join(dir_path(brokers_dir, broker, log_dir), EPOCH_JOURNAL)
    return _journal_entries(_at_rest(path) + [f for r, f in _versions(path) if before is None or r < before])


def write_epoch_checkpoint(brokers_dir: str, broker: int, log_dir: str, topic: str, partition: int,
                           entries: Iterable[tuple[int, int]], future: bool = False, round_no: int | None = None) -> None:
    """One log's leader-epoch-checkpoint: an entry of the dir's journal of round `round_no`, or of its
    at-rest file."""
    write_epoch_checkpoints(brokers_dir, round_no, [(broker, log_dir, topic, partition, future, entries)])


def remove_log_files(brokers_dir: str, broker: int, log_dir: str, topic: str, partition: int,
                     future: bool = False, round_no: int | None = None) -> None:
    """Drop one log's leader-epoch-checkpoint: the old log after a move's swap, a dropped or swapped-in
    future log (in a round: a tombstone in the dir's journal, the entry goes when `settle` folds it)."""
    write_epoch_checkpoints(brokers_dir, round_no, [(broker, log_dir, topic, partition, future, None)])


def epoch_checkpoints(brokers_dir: str, broker: int, log_dir: str) -> dict[tuple[str, int, bool], list[tuple[int, int]]]:
    """The leader-epoch checkpoints the dir's journal holds now ((topic, partition, future) -> cache; the older
    layout's per-log files not included)."""
    return {k: v for k, v in _dir_journal(brokers_dir, broker, log_dir, None).items() if v is not None}


def read_epoch_checkpoint(brokers_dir: str, broker: int, log_dir: str, topic: str, partition: int,
                          future: bool = False, before: int | None = None) -> list[tuple[int, int]]:
    return _read_epochs(brokers_dir, broker, log_dir, topic, partition, future, before,
                        _dir_journal(brokers_dir, broker, log_dir, before))


def _read_epochs(brokers_dir: str, broker: int, log_dir: str, topic: str, partition: int, future: bool,
                 before: int | None, journal: dict) -> list[tuple[int, int]]:
    """A log's cache as a task of round `before` sees it: its newest journal entry (`journal`: its dir's,
    `_dir_journal`), else its own file (or a version of it a run of an older format left)."""
    key = (topic, int(partition), bool(future))
    if key in journal:
        return journal[key] or []
    text = _read(_epoch_path(brokers_dir, broker, log_dir, topic, partition, future), before)
    return [] if text is None else leader_epoch.parse_checkpoint(text)


def write_flushed(brokers_dir: str, broker: int, log_dir: str, entries: Iterable[tuple[str, int, int]],
                  round_no: int | None = None) -> None:
    _write(os.path.join(dir_path(brokers_dir, broker, log_dir), FLUSHED), format_checkpoint(entries), round_no)


def _read_offsets(path: str, before: int | None = None) -> dict[tuple[str, int], int]:
    text = _read(path, before)
    return {} if text is None else {(t, p): o for t, p, o in parse_checkpoint(text)}


def read_flushed(brokers_dir: str, broker: int, log_dir: str, before: int | None = None) -> dict[tuple[str, int], int]:
    return _read_offsets(os.path.join(dir_path(brokers_dir, broker, log_dir), FLUSHED), before)


def read_disk(brokers_dir: str, broker: int, log_dirs: list[str], future: bool = False,
              before: int | None = None) -> pd.DataFrame:
    """Logs a starting broker finds in its dirs (`future`: its future logs), with their checkpointed HW
    (0 when missing), their flushed offset (0 when missing) and their leader-epoch checkpoint (as
    leader_epoch.encode text); as a task of round `before` sees them (None: the newest versions)."""
    rows = []
    for d in log_dirs:
        base = dir_path(brokers_dir, broker, d)
        hw = _read_offsets(os.path.join(base, HW_CHECKPOINT), before)
        flushed = _read_offsets(os.path.join(base, FLUSHED), before)
        listing = _read(os.path.join(base, FUTURE_PARTITIONS if future else PARTITIONS), before)
        if listing is not None:
            journal = _dir_journal(brokers_dir, broker, d, before)
            for line in listing.splitlines():
                if line.strip():
                    t, p = line.rsplit(" ", 1)
                    cache = _read_epochs(brokers_dir, broker, d, t, int(p), future, before, journal)
                    rows.append((int(broker), t, int(p), d, hw.get((t, int(p)), 0),
                                 flushed.get((t, int(p)), 0), leader_epoch.encode(cache)))
    return pd.DataFrame(rows, columns=["broker", "topic", "partition", "log_dir", "hw", "recovery_point",
                                       "epoch_cache"])


def read_log(tables_dir: str, version: int | LogSnapshot, broker: int, columns: list[str],
             ranges: pd.DataFrame | None = None, future: bool | None = None,
             unwritten: Iterable[tuple[str, pa.Table]] = ()) -> pa.Table:
    """Rows of one broker's log at a committed Delta version (or a LogSnapshot: that version and the
    writer's own uncommitted actions since).

    `ranges` (topic, partition, from_offset, to_offset) limits the read to those offset ranges;
    `future` True/False keeps only the future / current logs' rows (is_future), None both.
    Files are pruned by partition values, then the files the Delta log lists are read
    with pyarrow; log_dir comes from the add actions' partition values, as Delta keeps partition
    values out of files (and their folder names are escaped). `unwritten`: (log_dir, rows) the writer
    holds in memory for files it has not written yet (engine/broker_round.WindowFiles), read after the
    files, in that order, as if they had been written.
    """
    root = table_path(tables_dir, "log")
    acts = log_file_actions(tables_dir, version)
    files: list[tuple[str, str]] = []
    if acts.num_rows:
        mine = acts.filter(pc.equal(acts["partition.broker"].cast(pa.int64()), int(broker)))
        if ranges is not None and len(ranges) and mine.num_rows:
            mine = mine.filter(files_overlapping(mine, ranges))
        # add paths are URL-encoded relative paths (Delta protocol); unquote gives the file's own path
        files = [(os.path.join(root, unquote(p)), d)
                 for p, d in zip(mine["path"].to_pylist(), mine["partition.log_dir"].to_pylist(), strict=True)]
    want = [c for c in columns if c not in ("broker", "log_dir")]
    read = want if "is_future" in want else [*want, "is_future"]  # the cut needs is_future
    tables = [(_read_file(path, tuple(read)), d) for path, d in files]
    tables += [(t.select(read), d) for d, t in unwritten if t.num_rows]
    wanted = _Ranges(ranges) if ranges is not None and len(ranges) else None
    parts = []
    for t, log_dir in tables:
        t = t.filter(_wanted(t, wanted, future))
        if t.num_rows:
            t = pa.table({c: t[c].cast(_type(c)) if c in _CODED else t[c] for c in want})
            parts.append(t.append_column("log_dir", pa.repeat(pa.scalar(log_dir, pa.string()), t.num_rows)))
    if not parts:
        return pa.table({c: pa.array([], type=_type(c)) for c in columns})
    tab = pa.concat_tables(parts)
    tab = tab.append_column("broker", pa.array(np.full(tab.num_rows, int(broker), dtype="int32")))
    return tab.select(columns)


# read as dictionaries (one topic in every row, keys mostly null): ~2x cheaper to decode, cast back after the cut
_CODED = ["topic", "key"]


class _FileCache:
    """The columns read from log data files, kept per process up to `budget` bytes (least recently used
    dropped first). A log's data file never changes once written: a fetch or a move reads the same files
    of the leader's log round after round (a KIP-113 move of a log of 1 GB records read each of ~60 files
    of its broker in every round: ~0.8 ms a file, most of a round of the local engine). A file rewritten
    under its name (a retried task, a continued run's rounds again) is a new inode with a new mtime, and
    those are in the key."""

    def __init__(self, budget: int) -> None:
        self.budget, self.used = budget, 0
        self.tables: OrderedDict[tuple, pa.Table] = OrderedDict()

    def read(self, path: str, columns: tuple[str, ...]) -> pa.Table:
        st = os.stat(path)
        key = (path, st.st_ino, st.st_mtime_ns, st.st_size, columns)
        t = self.tables.get(key)
        if t is not None:
            self.tables.move_to_end(key)
            return t
        t = pq.ParquetFile(path, read_dictionary=_CODED).read(columns=list(columns), use_threads=False)
        if t.nbytes <= self.budget:
            self.tables[key] = t
            self.used += t.nbytes
            while self.used > self.budget:
                self.used -= self.tables.popitem(last=False)[1].nbytes
        return t


_FILES = _FileCache(int(os.environ.get("SPARKKAFKA_LOG_FILE_CACHE_BYTES", 128 << 20)))


def _read_file(path: str, columns: tuple[str, ...]) -> pa.Table:
    return _FILES.read(path, columns)


class _Ranges:
    """`ranges` (topic, partition, from_offset, to_offset) as sorted (topic code, partition) keys, built
    once per read and matched against each file's rows with a binary search, not a join: a restarted
    follower's catch-up reads every leader's whole log files, ~250,000 rows a broker at 60k replicas, for
    a few partitions."""

    def __init__(self, ranges: pd.DataFrame) -> None:
        self.topics = pd.Index(sorted(set(ranges["topic"])))
        self.names = pa.array(self.topics, pa.string())
        key = ((self.topics.get_indexer(ranges["topic"]).astype("int64") << 32)
               | ranges["partition"].to_numpy().astype("int64"))
        if len(np.unique(key)) < len(key):  # one range per partition is what the reads ask; else the join's rows
            raise ValueError("read_log: more than one range for a partition")
        order = np.argsort(key, kind="stable")
        self.key = key[order]
        self.lo = ranges["from_offset"].to_numpy()[order]
        self.hi = ranges["to_offset"].to_numpy()[order]

    def mask(self, t: pa.Table) -> np.ndarray:
        topic = t["topic"]
        if topic.num_chunks == 1 and pa.types.is_dictionary(topic.type):
            topic = topic.chunk(0)
        else:  # the writer's own rows, or chunks with their own dictionaries
            topic = pc.dictionary_encode(topic.cast(pa.string()).combine_chunks())
        known = pc.index_in(topic.dictionary, value_set=self.names).fill_null(-1).to_numpy()
        codes = known.astype("int64")[topic.indices.to_numpy(zero_copy_only=False)]
        rows = (codes << 32) | t["partition"].to_numpy(zero_copy_only=False).astype("int64")
        at = np.minimum(np.searchsorted(self.key, rows), len(self.key) - 1)
        offset = t["offset"].to_numpy(zero_copy_only=False)
        return (codes >= 0) & (self.key[at] == rows) & (offset >= self.lo[at]) & (offset < self.hi[at])


def _wanted(t: pa.Table, ranges: _Ranges | None, future: bool | None) -> np.ndarray:
    """Which rows of log rows `t` (with is_future) a read keeps: those of a current / future log as
    `future` says (None: both), inside their partition's [from_offset, to_offset) of `ranges` (None: all)."""
    keep = np.ones(t.num_rows, dtype=bool)
    if future is not None:
        keep &= t["is_future"].to_numpy(zero_copy_only=False) == bool(future)
    return keep if ranges is None else keep & ranges.mask(t)


def _type(col: str) -> pa.DataType:
    from .tables import SCHEMAS

    return SCHEMAS["log"].field(col).type
