"""The pandas frames the protocol functions consume and produce, one kind of row each.

Every frame has a `broker` column: the broker that owns the row (state) or receives it (a
message), so one call can process all the brokers a Spark task hosts at once. Integer columns
never hold nulls: -1 stands for "unknown"/"none", as Kafka itself uses it (leader -1, LEO -1).
Lists of broker ids (ISR, replicas) travel as comma-joined strings, the cheapest Arrow form.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pandas._libs.internals import BlockPlacement
from pandas.core.internals.blocks import NumpyBlock
from pandas.core.internals.managers import BlockManager

I32, I64, STR, BOOL = "int32", "int64", "object", "bool"

# A hosted replica (Kafka's Partition + Log on one broker).
REPLICA = {
    "broker": I32, "topic": STR, "partition": I32, "log_dir": STR,
    "leader": I32, "leader_epoch": I32, "controller_epoch": I32,
    "isr": STR, "replicas": STR,
    "leo": I64, "hw": I64, "log_start_offset": I64,
    "last_fetched_epoch": I32,  # epoch of the last record in the log (-1 = empty)
    "epoch_start_offset": I64,  # leaderEpochStartOffset while leader, else -1
    "fetch_in_flight": BOOL, "fetch_sent_ms": I64, "backoff_until_ms": I64,
    "zk_version": I32,  # the partition state's zkVersion as this broker knows it (-1 = unknown)
    "pending_isr": STR,  # "" when the ISR is committed, else the proposed ISR of the change in flight
    "isr_check_ms": I64,  # when the leader's shrink check last ran for it (-1 = never)
    "epoch_cache": STR,  # leader-epoch cache "epoch:start,epoch:start" ("" = empty; leader_epoch.py)
    "fetch_state": I32,  # as a follower: FETCHING or TRUNCATING (AbstractFetcherThread's PartitionFetchState)
    "recovery_point": I64,  # offsets below it are flushed to disk (Log.recoveryPoint)
    "last_flush_ms": I64,  # when the log was last flushed (Log.lastFlushTime)
}
FETCHING, TRUNCATING = 0, 1
# A replica's state before any LeaderAndIsr: no role, an empty log, nothing in flight.
REPLICA_DEFAULTS = {
    "leader": -1, "leader_epoch": -1, "controller_epoch": -1, "isr": "", "replicas": "",
    "leo": 0, "hw": 0, "log_start_offset": 0, "last_fetched_epoch": -1, "epoch_start_offset": -1,
    "fetch_in_flight": False, "fetch_sent_ms": -1, "backoff_until_ms": -1,
    "zk_version": -1, "pending_isr": "", "isr_check_ms": -1,
    "epoch_cache": "", "fetch_state": FETCHING, "recovery_point": 0, "last_flush_ms": -1,
}
# The leader's view of one follower (Kafka's Replica: remote LEO, lastCaughtUpTimeMs ...).
REMOTE = {
    "broker": I32, "topic": STR, "partition": I32, "replica": I32,
    "leo": I64, "log_start_offset": I64,
    "last_caught_up_ms": I64, "last_fetch_leader_leo": I64, "last_fetch_ms": I64,
    "in_isr": BOOL,  # in the leader's maximal ISR: committed ISR plus a pending expansion
    "leo_changed_ms": I64,  # when a fetch last set this LEO (0.8's logEndOffsetUpdateTimeMs)
}
# One record: in a leader's tail buffer, in a fetch response, or just appended to a log.
RECORD = {
    "broker": I32, "src": I32, "topic": STR, "partition": I32, "offset": I64,
    "leader_epoch": I32, "record_id": I64, "value_bytes": I32, "key": STR, "timestamp": I64,
}
# A follower's fetch request for one partition (all partitions one follower fetches from one
# leader travel together as one request: same src, broker and sent_ms).
FETCH = {
    "broker": I32, "src": I32, "topic": STR, "partition": I32, "fetch_offset": I64,
    "current_leader_epoch": I32, "last_fetched_epoch": I32, "log_start_offset": I64,
    "sent_ms": I64, "deadline_ms": I64,
    # the follower's replication quota (KIP-73) as it sends: bytes its throttled partitions that are not in
    # sync may still take (replication_quota.bytes_left; Long.MaxValue when it has no rate)
    "quota_bytes": I64,
}
# The per-partition header of a fetch response (its records travel as RECORD rows).
FETCH_RESPONSE = {
    "broker": I32, "src": I32, "topic": STR, "partition": I32, "fetch_offset": I64,
    "hw": I64, "log_start_offset": I64, "leo": I64, "leader_epoch": I32, "error": STR,
    "sent_ms": I64,  # echoes the request's, so the follower matches it to its outstanding fetch
    "diverging_epoch": I32, "diverging_end_offset": I64,  # Fetch v12 DivergingEpoch (-1 = none)
}
# An OffsetsForLeaderEpoch request's entry (0.11+; current_leader_epoch from v2, 2.1) and its answer.
EPOCH_REQUEST = {
    "broker": I32, "src": I32, "topic": STR, "partition": I32, "leader_epoch": I32,
    "current_leader_epoch": I32, "sent_ms": I64,
}
EPOCH_RESPONSE = {
    "broker": I32, "src": I32, "topic": STR, "partition": I32, "leader_epoch": I32, "end_offset": I64,
    "error": STR, "sent_ms": I64,
}
# A produce request's batch for one partition: `count` records with ids record_id.. +count-1.
PRODUCE = {
    "broker": I32, "topic": STR, "partition": I32, "record_id": I64, "count": I32,
    "acks": I32, "value_bytes": I32, "key": STR, "sent_ms": I64, "deadline_ms": I64,
}
# An acks=all batch appended and waiting in the leader's produce purgatory (DelayedProduce).
PENDING = {**PRODUCE, "base_offset": I64, "required_offset": I64}
# The producer-visible outcome of one batch.
RESULT = {
    "broker": I32, "topic": STR, "partition": I32, "record_id": I64, "count": I32, "acks": I32,
    "base_offset": I64, "error": STR, "time_ms": I64, "acked": BOOL,
}
# A LeaderAndIsr request's entry for one partition, addressed to one broker. Every controller request
# carries its controller's id and the correlation id of the request it belongs to: the next id of the
# controller's NetworkClient to that broker (ControllerChannelManager), the same on every entry of it.
LEADER_AND_ISR = {
    "broker": I32, "topic": STR, "partition": I32, "leader": I32, "leader_epoch": I32,
    "controller_epoch": I32, "isr": STR, "replicas": STR, "is_new": BOOL, "log_dir": STR,
    "zk_version": I32, "controller_id": I32, "correlation_id": I32,
}
# An ISR change a leader proposes (AlterIsr item from 2.7, its own conditional ZK write before).
ISR_CHANGE = {
    "broker": I32, "topic": STR, "partition": I32, "leader_epoch": I32, "zk_version": I32,
    "controller_epoch": I32, "isr": STR, "kind": STR,  # kind: "expand" | "shrink"
}
# The answer to one ISR_CHANGE: the committed state (error None) or why it failed.
ISR_RESULT = {
    "broker": I32, "topic": STR, "partition": I32, "leader_epoch": I32, "isr": STR,
    "zk_version": I32, "error": STR,
}
# A StopReplica request's entry (KIP-570 leader epoch; delete removes the log).
STOP_REPLICA = {
    "broker": I32, "topic": STR, "partition": I32, "leader_epoch": I32, "controller_epoch": I32, "delete": BOOL,
    "controller_id": I32, "correlation_id": I32,
}
# An UpdateMetadata request: who the controller is and which brokers are live.
UPDATE_METADATA = {"broker": I32, "controller_epoch": I32, "controller_id": I32, "live_brokers": STR,
                   "correlation_id": I32}
# Columns `conform` fills when a controller request's frame lacks them: a request built by hand (a test, a
# tool) rather than by the controller comes from no known controller (-1), its connection's first (id 0).
OPTIONAL = {"controller_id": -1, "correlation_id": 0}
CONTROLLER_REQUESTS = (LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA)
# AlterReplicaLogDirs entry (KIP-113): move the broker's replica of topic-partition to log_dir.
ALTER_LOG_DIRS = {"broker": I32, "topic": STR, "partition": I32, "log_dir": STR}
# Its per-replica answer (error None, or Kafka's error name), reported to the driver.
ALTER_LOG_DIRS_RESPONSE = {"broker": I32, "topic": STR, "partition": I32, "log_dir": STR, "error": STR}
# A log dir of a broker fails (KIP-112): an I/O error marks it offline.
LOG_DIR_FAILURE = {"broker": I32, "log_dir": STR}
# A replica a broker reports offline to the controller (KAFKA_STORAGE_ERROR; KIP-112's notification).
OFFLINE_REPLICA = {"broker": I32, "topic": STR, "partition": I32, "log_dir": STR}
# A broker's future replica (KIP-113): the copy of its replica's log that an AlterReplicaLogDirs move builds in
# another log dir of the same broker (log_dir = the destination), filled by its ReplicaAlterLogDirsThread
# (protocol/alter_log_dirs.py). Its records are `log` rows of (broker, log_dir) with is_future = true.
FUTURE = {
    "broker": I32, "topic": STR, "partition": I32, "log_dir": STR,
    "leader_epoch": I32,  # the partition's leader epoch its mover was (re)started at (-1 = not started)
    "leo": I64, "hw": I64, "log_start_offset": I64, "recovery_point": I64,
    "last_fetched_epoch": I32, "epoch_cache": STR,
    "fetch_state": I32,  # FETCHING, TRUNCATING or FUTURE_IDLE (loaded at restart or stopped: in no thread)
    "fetch_offset": I64,  # the mover's fetch offset while Truncating (initial or truncation offset)
    "in_progress": BOOL,  # the partition its thread is copying (2.3+ stickiness)
}
FUTURE_IDLE = -1
# A destination dir AlterReplicaLogDirs remembered for a partition (LogManager.preferredLogDirs, in memory only):
# the next log created for it (current or future) goes there.
PREFERRED_DIR = {"broker": I32, "topic": STR, "partition": I32, "log_dir": STR}
# Broker-wide state.
BROKER = {"broker": I32, "controller_epoch": I32, "hw_checkpoint_ms": I64, "controller_id": I32,
          "leader_quota": STR, "follower_quota": STR}  # the KIP-73 sensors' samples (replication_quota.py)

KEY = ["broker", "topic", "partition"]


_EMPTY: dict[tuple, pd.DataFrame] = {}


def empty(spec: dict[str, str]) -> pd.DataFrame:
    """An empty frame with the spec's columns and dtypes: a shallow copy of one built once per spec (a
    round asks for hundreds; copying is ~20x cheaper than building a frame). Shallow is enough: the copy
    has its own blocks and axes, so what a caller sets or adds stays in it, and the arrays it shares with
    the original hold no values to write (~8 us against ~15 us for a deep copy)."""
    key = tuple(spec.items())
    if key not in _EMPTY:
        _EMPTY[key] = pd.DataFrame({c: np.empty(0, dtype=t) for c, t in spec.items()})
    return _EMPTY[key].copy(deep=False)


_NO_ROWS: dict[tuple, pd.DataFrame] = {}


def from_rows(rows: list, columns: list[str]) -> pd.DataFrame:
    """pd.DataFrame(rows, columns=columns); with no rows (the common case: a round with no halts, no
    state-change lines, no swaps) a copy of the empty frame built once, ~30x cheaper than building it."""
    if len(rows):
        return pd.DataFrame(rows, columns=columns)
    key = tuple(columns)
    if key not in _NO_ROWS:
        _NO_ROWS[key] = pd.DataFrame(columns=columns)
    return _NO_ROWS[key].copy(deep=False)  # as `empty`: the copy's own blocks and axes, no values to share


def array(df: pd.DataFrame, c: str) -> np.ndarray:
    """`df[c].to_numpy()` without building the column's Series: the same array (a view, as to_numpy gives),
    ~2 us instead of ~25 us for a frame's first read of a column (~5 us from pandas' item cache). A round
    reads ~450 columns, most of them once per frame, so at any size ~10 ms of its pandas overhead was
    spent boxing Series. Columns that are not one plain numpy array (an extension dtype, a repeated
    name) and objects that are not frames take the usual way."""
    if type(df) is pd.DataFrame:
        i = df.columns.get_loc(c)
        if type(i) is int:
            v = df._mgr.iget_values(i)  # pandas < 3 (pinned): the block's column
            if type(v) is np.ndarray:
                return v
    return df[c].to_numpy()




def filled(n: int, value, dtype) -> np.ndarray:
    """np.full(n, value, dtype), but an object column holds the one `value` object in every row: numpy 2's
    np.full stores a new copy of a string in each row, so a round's produce batches, and the records, tail
    and results made from them, carried a topic object per row, and every lookup on them factorized the
    strings instead of taking `distinct`'s one-object shortcut (a 9,000-replica step: 78 ms -> 63 ms)."""
    if np.dtype(dtype) != object:
        return np.full(n, value, dtype=dtype)
    out = np.empty(n, dtype=object)
    out.fill(value)
    return out


def conform(df: pd.DataFrame, spec: dict[str, str], copy: bool = True) -> pd.DataFrame:
    """Select and cast `df` to the spec (missing columns are an error, but for a controller request's OPTIONAL
    ones, which take their default; extra ones dropped); always a new frame with a fresh index. `copy=False`:
    a frame already in shape keeps its arrays (`positional`), for callers that only replace columns of it."""
    if list(df.columns) == list(spec) and all(a == np.dtype(t) for a, t in zip(df.dtypes, spec.values(), strict=True)):
        if not copy:
            return positional(df)
        out = df.copy()  # already in shape: a copy is ~4x cheaper than building the frame again
        idx = out.index
        if not (isinstance(idx, pd.RangeIndex) and idx.start == 0 and idx.step == 1):
            out = out.reset_index(drop=True)
        return out
    fill = OPTIONAL if any(spec is r for r in CONTROLLER_REQUESTS) else {}
    return pd.DataFrame({c: _cast(array(df, c), t) if c in df.columns or c not in fill
                         else np.full(len(df), fill[c], dtype=t) for c, t in spec.items()})


def positional(df: pd.DataFrame) -> pd.DataFrame:
    """df.reset_index(drop=True) without copying the data: a new frame over the same arrays, indexed
    0..n-1 so that labels are row positions. Replacing a column of it (`out[c] = values`) leaves `df`
    alone; writing into one (`.loc[rows, c] = ...`) would change `df` too, so a caller that does takes a
    copy first. A deep copy of a frame of one block per column (as `owned` builds them) first stacks its
    blocks: ~2 ms for a 9,000-replica frame, paid by every function that only wants positions."""
    out = df.copy(deep=False)
    idx = out.index
    if not (isinstance(idx, pd.RangeIndex) and idx.start == 0 and idx.step == 1 and len(idx) == len(out)):
        out.index = pd.RangeIndex(len(out))
    return out


def with_values(df: pd.DataFrame, column: str, rows: np.ndarray, values) -> pd.DataFrame:
    """`df` with `column` set to `values` at `rows` (positions or a boolean mask): df.copy() then
    .loc[rows, column] = values on a positional index, but only that column is copied (a shallow copy
    of the frame, the column replaced by a changed copy of its array); `df` is left as it was."""
    v = array(df, column).copy()
    v[rows] = values
    out = df.copy(deep=False)
    out[column] = v
    return out


def owned(columns: dict[str, np.ndarray], spec: dict[str, str] | None = None) -> pd.DataFrame:
    """A frame of the spec's columns from arrays no other frame or caller holds (fresh results of a
    take, a concatenation or a computation), cast where their dtype differs (no spec: every column of
    `columns`, in its own dtype). It owns them as they are:
    pandas' default copies every column and stacks the columns of a dtype into one block, ~4x more.
    One-dimensional numpy arrays of one length and a plain dtype (every caller's: numbers, bools,
    objects) become one block each, handed to pandas' block manager as pandas itself makes them
    (NumpyBlock over the array as a 1 x n view): pd.DataFrame(..., copy=False) first runs each through
    sanitize_array, and arrays_to_mgr through three checks per column, ~75 us for a 24-column frame
    against ~37 us; a round builds ~18 of them."""
    if spec is None:
        spec = {c: v.dtype.str for c, v in columns.items()}
    arrays = [_cast(columns[c], t) for c, t in spec.items()]
    n = len(arrays[0]) if arrays else 0
    if arrays and all(type(v) is np.ndarray and v.ndim == 1 and len(v) == n and v.dtype.kind in _PLAIN
                      for v in arrays):
        blocks = tuple(NumpyBlock(v.reshape(1, n), BlockPlacement(slice(i, i + 1, 1)), 2)
                       for i, v in enumerate(arrays))
        mgr = BlockManager(blocks, [pd.Index(list(spec)), pd.RangeIndex(n)], verify_integrity=False)
        return pd.DataFrame._from_mgr(mgr, axes=mgr.axes)  # pandas < 3 (pinned)
    return pd.DataFrame(dict(zip(spec, arrays, strict=True)), copy=False)


_PLAIN = frozenset("biufcO")  # dtypes pandas keeps in a NumpyBlock as they are (no datetimes, no unicode)


def _cast(v: np.ndarray, t: str) -> np.ndarray:
    return v if t == STR or v.dtype == t else v.astype(t)


def concat(frames: Iterable[pd.DataFrame], spec: dict[str, str]) -> pd.DataFrame:
    """Concatenate frames of one spec, keeping dtypes even when all are empty. The result may share its
    arrays with a part (one part with rows, in shape): replace its columns, do not write into them."""
    parts = [f for f in frames if len(f)]
    if not parts:
        return empty(spec)
    if len(parts) == 1:
        return conform(parts[0], spec, copy=False)
    # column by column: pd.concat checks every value of an object column for a null (~1 us each)
    return owned({c: np.concatenate([_cast(array(f, c), t) for f in parts]) for c, t in spec.items()}, spec)


def stack(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate frames of one shape, keeping the first's columns when all are empty. One frame with rows
    (or none) is that frame indexed 0..n-1 (`positional`), not a concatenation (~80 us each, several a round:
    most rounds have no cuts, halts or dropped futures)."""
    parts = [f for f in frames if len(f)] or frames[:1]
    return positional(parts[0]) if len(parts) == 1 else pd.concat(parts, ignore_index=True)


def new_replicas(df: pd.DataFrame) -> pd.DataFrame:
    """REPLICA rows from a frame holding at least broker, topic, partition and log_dir: every
    column it lacks takes its REPLICA_DEFAULTS value."""
    return conform(df.assign(**{c: v for c, v in REPLICA_DEFAULTS.items() if c not in df.columns}), REPLICA)


def rows(frame: pd.DataFrame, cols: list[str]) -> Iterable[tuple]:
    """The rows of `frame`'s `cols` as tuples of Python values (frame[cols].itertuples(index=False)):
    itertuples builds a frame of the columns and a namedtuple class on every call."""
    return zip(*(array(frame, c).tolist() for c in cols), strict=True)


def select_str(conditions: list[np.ndarray], choices: list[str], default: str) -> np.ndarray:
    """np.select(conditions, choices, default) for string choices, as the object array a frame column
    holds: each row points to one of the few strings. np.select gives a unicode array, which a frame
    turns into a new string per row (~60 ns each)."""
    codes = np.select(conditions, np.arange(1, len(choices) + 1), 0)
    return np.array([default, *choices], dtype=object)[codes]


def ids(csv: str | None) -> list[int]:
    """Parse a comma-joined broker id list."""
    return [int(x) for x in csv.split(",")] if csv else []


def csv(ids_: Iterable[int]) -> str:
    """Join broker ids with commas (Kafka's describe order is kept)."""
    return ",".join(str(int(i)) for i in ids_)


def isr_size(isr: pd.Series | np.ndarray) -> np.ndarray:
    """Number of ids in each comma-joined list (0 for empty or null)."""
    return per_value(isr, _isr_size)


def remembered(values: np.ndarray, fn, null=0) -> np.ndarray:
    """per_value(values, fn, null) of a whole column, remembered while it holds the same objects (`_Remembered`)."""
    return _Remembered.of(values, fn, null)


def isr_sizes(frame: pd.DataFrame, column: str = "isr") -> np.ndarray:
    """isr_size of every row of a frame's comma-joined id column, remembered while the column holds the same
    string objects (`remembered`): a round counts its replicas' ISR four times, on different rows, and the
    next round's replicas hold the same ISR strings unless one changed (~1 ms each at 30,000 replicas)."""
    return remembered(array(frame, column), _isr_size)


def _recall(entries: list, match: Callable[[Any], bool]) -> Any:
    """The first of `entries` (newest first) that `match` accepts, moved to the front; None when none does:
    the lookup of the memos below."""
    for i, e in enumerate(entries):
        if match(e):
            entries.insert(0, entries.pop(i))
            return e
    return None


class _Memo:
    """A pure function's answer over key columns, kept for the next call on the same keys (`_same_rows`:
    equal numbers, the very same objects), newest first, over private copies of the keys (a later write into
    a caller's array is seen as a change; a kept object's pointer is not reused while its answer is kept).
    Small and large keys are not kept. Each subclass keeps its own answers."""

    SLOTS = 4
    MAX_ROWS = 1 << 18
    _kept: list[tuple[Any, list[np.ndarray], np.ndarray]]  # (tag, key copies, answer), newest first

    @classmethod
    def answer(cls, tag: Any, keys: list[np.ndarray], compute: Callable[[], np.ndarray]) -> np.ndarray:
        if not _TableKeys.MIN_ROWS <= len(keys[0]) <= cls.MAX_ROWS:
            return compute()
        hit = _recall(cls._kept, lambda e: e[0] == tag and len(e[1]) == len(keys) and _same_rows(e[1], keys))
        if hit is not None:
            return hit[2].copy()
        out = compute()
        cls._kept = [(tag, [v.copy() for v in keys], out.copy()), *cls._kept[:cls.SLOTS - 1]]
        return out


class _Remembered(_Memo):
    """per_value(values, fn) of whole object columns, kept while a column holds the very same objects
    (`_same_rows` compares their pointers, ~10 us for 30,000 rows: strings do not change, so the same objects
    give the same answer)."""

    MAX_ROWS = 1 << 21  # ~16 MB of pointers a column at most
    _kept = []

    @classmethod
    def of(cls, values: np.ndarray, fn, null=0) -> np.ndarray:
        values = np.ascontiguousarray(values)
        if values.dtype != object:
            return per_value(values, fn, null)
        return cls.answer((fn, null), [values], lambda: per_value(values, fn, null))


def _isr_size(isr: np.ndarray) -> np.ndarray:
    if _few_strings(isr):
        return np.array([s.count(",") + 1 if isinstance(s, str) and s else 0 for s in isr], dtype="int32")
    a = _arrow_strings(isr)
    if a is None:
        s = pd.Series(_values(isr)).fillna("").astype(str)
        return np.where(s.str.len() > 0, s.str.count(",") + 1, 0)
    commas = pc.count_substring(a, ",").fill_null(0).to_numpy(zero_copy_only=False)
    chars = pc.utf8_length(a).fill_null(0).to_numpy(zero_copy_only=False)
    return np.where(chars > 0, commas + 1, 0)


def str_len(values: pd.Series | np.ndarray) -> np.ndarray:
    """Characters of each string, 0 for a null (values.fillna("").astype(str).str.len())."""
    return per_value(values, _str_len)


def _str_len(values: np.ndarray) -> np.ndarray:
    if _few_strings(values):
        return np.array([len(s) if isinstance(s, str) else 0 for s in values], dtype="int64")
    a = _arrow_strings(values)
    if a is None:
        return pd.Series(_values(values)).fillna("").astype(str).str.len().to_numpy()
    return pc.utf8_length(a).fill_null(0).to_numpy(zero_copy_only=False).astype("int64")


_FEW_STRINGS = 128  # below, a Python loop over the strings beats Arrow's kernels (~70 us a call, a few a value)


def _few_strings(values: np.ndarray) -> bool:
    """Whether `values` are few, and each a string or a null (None, NaN) as `_arrow_strings` reads them: the
    distinct ISRs of a round are a handful, and its Arrow calls cost ~0.3 ms for each of a round's ~4 counts."""
    return len(values) <= _FEW_STRINGS and all(
        isinstance(v, str) or v is None or (isinstance(v, float) and v != v) for v in values)


def _arrow_strings(values: pd.Series | np.ndarray) -> pa.Array | None:
    """`values` as an Arrow string array (nulls from None / NaN), or None when one is not a string. Arrow's
    string kernels are ~10x cheaper than pandas' .str, which calls Python per value."""
    try:
        return pa.array(_values(values), type=pa.string(), from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None


def _values(values: pd.Series | np.ndarray) -> np.ndarray:
    return values.to_numpy() if isinstance(values, pd.Series) else np.asarray(values)


def _fold(columns: list[np.ndarray]) -> np.ndarray | None:
    """One int64 per row standing for its values in `columns`: each column becomes dense codes
    (`_column_codes`, nulls a code of their own) and the codes are folded together. None when the codes
    would overflow."""
    coded = []
    for v in columns:
        codes, k, _, uniques = _column_codes(v)
        if uniques is not None:  # nulls get the code after the values' (use_na_sentinel=False costs an isna pass, 2x)
            null = codes < 0
            if null.any():
                codes[null] = k
                k += 1
        coded.append((codes, k))
    return _folded(coded)


def _column_codes(v: np.ndarray) -> tuple[np.ndarray, int, int, np.ndarray | None]:
    """One key column as dense codes: (codes, how many, offset, distinct values). An integer column is coded
    by its offset from the minimum (no distinct values), any other by one factorize (`distinct`, nulls -1)."""
    if v.dtype.kind in "iub":
        v = v.astype("int64")
        lo = int(v.min())
        return v - lo, int(v.max()) - lo + 1, lo, None
    codes, uniques = distinct(v)
    return codes, len(uniques), 0, uniques


def _folded(coded: list[tuple[np.ndarray, int]]) -> np.ndarray | None:
    """(codes, how many) per column folded into one int64 per row; None when they would overflow."""
    key, size = None, 1
    for codes, k in coded:
        size *= max(k, 1)
        if size >= 2**62:
            return None
        key = codes.astype("int64") if key is None else key * k + codes
    return key


def distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """pd.factorize(values): (codes, uniques), nulls -1. An object array holds pointers to its values:
    the pointers are factorized as integers, then only the distinct pointers' values as objects (equal
    strings held by several objects get one code), ~4x cheaper on few distinct strings. When most rows
    hold an object of their own (an ISR column: each row's string built apart) the values are factorized
    as they are: the pointers would save nothing and the detour costs ~2x."""
    values = np.ascontiguousarray(values)
    if values.dtype != object or len(values) == 0:
        return pd.factorize(values)
    if one_object(values):  # a topic column of one topic
        if isinstance(values[0], str):  # pd.factorize of one value costs ~8 us, ~20 times a round
            return np.zeros(len(values), dtype=np.intp), values[:1].copy()
        codes, uniques = pd.factorize(values[:1])
        return np.repeat(codes, len(values)), uniques
    at, one = _by_pointer(values)
    if 2 * len(one) > len(values):
        return pd.factorize(values)
    codes, uniques = pd.factorize(values[one])  # in the pointers' order of first appearance, as the rows'
    return codes[at], uniques


def _by_pointer(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes, rows) of a C-contiguous object array: a code per row by the object it holds (its pointer), in
    order of first appearance, and a row holding each code's object (any: they all hold the one object)."""
    at, pointers = pd.factorize(_addresses(values))
    one = np.empty(len(pointers), dtype=np.intp)
    one[at] = np.arange(len(at))
    return at, one


def one_object(values: np.ndarray) -> bool:
    """Whether every row of a non-empty object array holds the same object (compared by pointer: cheap)."""
    address = _addresses(np.ascontiguousarray(values))
    return bool((address == address[0]).all())


def to_arrow(v: np.ndarray, t: pa.DataType | None = None) -> pa.Array:
    """pa.array(v, t, from_pandas=True) (the type inferred when `t` is None). An object column converts
    each distinct object once: one object in every row (a topic, since `filled`; a key column of None) is
    converted and repeated (~0.5 ms for 9,000 rows against ~0.05 ms); one of a few objects (log dirs,
    roles, a log's topic from two sources) is taken by the rows' pointer codes (~2x cheaper from ~1,000
    rows: 1.6 -> 0.6 ms for 50,000 rows). The rows get the very values and type each object's own
    conversion gives."""
    if v.dtype != object or not len(v):
        return pa.array(v, type=t, from_pandas=True)
    if one_object(v):
        return pa.repeat(pa.array(v[:1], type=t, from_pandas=True)[0], len(v))
    if len(v) >= _FEW_OBJECTS_ROWS:
        codes, rows = _by_pointer(np.ascontiguousarray(v))
        if len(rows) * 8 <= len(v):
            return pa.array(v[rows], type=t, from_pandas=True).take(pa.array(codes))
    return pa.array(v, type=t, from_pandas=True)


_FEW_OBJECTS_ROWS = 1024  # below, converting every row costs about what coding the pointers does


def _addresses(values: np.ndarray) -> np.ndarray:
    """The pointers a C-contiguous object array holds, as integers (a read-only view of its memory, no
    copy, that keeps `values` alive). Through the buffer protocol: a ctypes array type per length, as
    `.ctypes` needs, costs ~12 us a call once lengths vary (~1 us here)."""
    view = np.frombuffer(memoryview(values).cast("B"), dtype=np.intp)
    view.flags.writeable = False
    return view


def per_value(values: pd.Series | np.ndarray, fn, null=0) -> np.ndarray:
    """fn(values) for an elementwise `fn` of an array, computed on the distinct values only (a replica's ISR
    is one of a few lists) and spread to the rows; a null row gets `null`, in fn's result dtype."""
    codes, uniques = distinct(_values(values))
    out = fn(uniques)
    return np.concatenate([out, np.full(1, null, dtype=out.dtype)])[codes]


def distinct_rows(*columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes, first): a dense code per row by its values in `columns`, in order of first appearance,
    and the position of each code's first row (non-empty columns)."""
    key = _fold(list(columns))
    codes = pd.factorize(key if key is not None else pd.MultiIndex.from_arrays(columns))[0]
    first = np.empty(int(codes.max()) + 1, dtype=np.intp)
    first[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)
    return codes, first


def per_row(fn, *columns: np.ndarray) -> np.ndarray:
    """[fn(*row) for row in zip(*columns)] as an object array, `fn` called once per distinct row: a round's
    epoch-cache updates repeat one (cache, epoch, offset) over thousands of replicas (a new cluster's
    LeaderAndIsr: 30,000 parses and encodes per task became one)."""
    if len(columns[0]) == 0:
        return np.empty(0, dtype=object)
    codes, first = distinct_rows(*columns)
    out = np.empty(len(first), dtype=object)
    out[:] = [fn(*(c[i] for c in columns)) for i in first]
    return out[codes]


def group_ids(frame: pd.DataFrame, cols: list[str]) -> np.ndarray:
    """A dense group number per row of `frame` by its values in `cols` (groupby(...).ngroup(), cheaper)."""
    if frame.empty:
        return np.zeros(0, dtype="int64")
    key = _fold([array(frame, c) for c in cols])
    if key is None:
        return frame.groupby(cols, sort=False).ngroup().to_numpy()
    return pd.factorize(key)[0]


def group_any(flag: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Per row: whether any row of its group (`group_ids`) has `flag` set (groupby transform("any"))."""
    if len(ids) == 0:
        return np.zeros(0, dtype=bool)
    return (np.bincount(ids, weights=flag.astype("float64")) > 0)[ids]


def locate(table: pd.DataFrame, probe: pd.DataFrame, on: list[str] = KEY,
           probe_on: list[str] | None = None) -> np.ndarray:
    """Row positions in `table` of each `probe` row's key (-1 where absent). Keys in `table`
    are unique (a table probed with its own keys, row for row, is not checked for repeats). A hash
    lookup, much cheaper than merging or MultiIndex .loc on every step."""
    if table.empty or probe.empty:
        return np.full(len(probe), -1, dtype="int64")
    return _positions([array(table, c) for c in on], [array(probe, c) for c in (probe_on or on)])


def contains(table: pd.DataFrame, probe: pd.DataFrame, on: list[str], probe_on: list[str] | None = None
             ) -> np.ndarray:
    """Whether each `probe` row's key occurs in `table` (whose keys may repeat)."""
    if table.empty or probe.empty:
        return np.zeros(len(probe), dtype=bool)
    n = len(table)
    key = _fold([np.concatenate([array(table, a), array(probe, b)])
                 for a, b in zip(on, probe_on or on, strict=True)])
    if key is None:
        return probe.set_index(probe_on or on).index.isin(table.set_index(on).index)
    return np.isin(key[n:], key[:n])


def _positions(table: list[np.ndarray], probe: list[np.ndarray]) -> np.ndarray:
    """`locate` on key columns: the folded keys (`_fold`) of table and probe together, found by one
    integer hash lookup: ~4x cheaper than a MultiIndex, which builds a Categorical per level."""
    n = len(table[0])
    if _same_rows(table, probe):  # a frame's rows looked up in an earlier version of itself
        return np.arange(n)
    index = _TableKeys.of(table) if n >= _TableKeys.MIN_ROWS else None
    if index is not None:
        found = index.find(probe)
        if found is not None:
            return found
    key = _fold([np.concatenate([x, y]) for x, y in zip(table, probe, strict=True)])
    if key is None:  # too wide to fold: the MultiIndex handles any width
        return pd.MultiIndex.from_arrays(table).get_indexer(pd.MultiIndex.from_arrays(probe))
    size = int(key.max()) + 1 if len(key) else 0
    if size <= 8 * len(key) + 1024:  # dense keys: a lookup array instead of a hash table, ~5x cheaper
        at = np.full(size, -1, dtype=np.intp)
        at[key[:n]] = np.arange(n)
        if (at[key[:n]] == np.arange(n)).all():  # the table's keys are unique (else the Index raises)
            return at[key[n:]]
    return pd.Index(key[:n]).get_indexer(key[n:])


class _TableKeys:
    """A table's key columns coded once (each int column by its offset from the minimum, each string column
    by its distinct values) with their lookup (an array over the folded codes, or a hash index), kept for the
    next `locate` in the same keys: a round probes its replicas a dozen times, and from one round to the
    next their keys rarely change. A probe then codes only its own columns against the table's values
    (~2x cheaper than coding both together; at 60,000 replicas the lookups were ~20% of a step). A pure
    memo: the answer is the one `_fold` gives. The table's arrays are copied, so a later write into a
    frame's array is seen as a change of keys, never read as the old ones."""

    MIN_ROWS = 256  # smaller tables cost less to code than to compare
    PROBES = 4  # the answers kept per table (`find`)
    SLOTS = 4  # the tables kept: the replicas as several steps of a round hold them, the remotes, the tail
    DENSE = 32  # a lookup array while the codes' span is at most this many times the rows: 48 brokers' replicas
    # of 20,000 partitions span 960,000 codes, an ~8 MB array (a find of 100,000 records 1.5 -> 1.3 ms)
    BUDGET = 64 << 20  # bytes kept at most (a 1M-replica driver must stay under 2 GiB): bigger tables are not kept
    _kept: list[_TableKeys] = []

    def __init__(self, cols: list[np.ndarray], kinds: list[str], lows: list[int], sizes: list[int],
                 values: list[pd.Index | None], key: np.ndarray) -> None:
        self.cols, self.kinds, self.lows, self.sizes, self.values = cols, kinds, lows, sizes, values
        self.probes: list[tuple[list[np.ndarray], np.ndarray]] = []  # (a probe's columns, its answer), newest first
        n, size = len(key), int(np.prod(sizes, dtype=object))
        self.at: np.ndarray | None = None
        self.index: pd.Index | None = None
        if size <= self.DENSE * n + 1024:
            at = np.full(size, -1, dtype=np.intp)
            at[key] = np.arange(n)
            if (at[key] == np.arange(n)).all():
                self.at = at
        if self.at is None:
            self.index = pd.Index(key)
            if not self.index.is_unique:  # repeated keys: the general path raises as pandas does
                raise ValueError("repeated keys")

    @classmethod
    def of(cls, table: list[np.ndarray]) -> _TableKeys | None:
        kept = _recall(cls._kept, lambda k: _same_rows(k.cols, table))  # k.cols are private copies: by value
        if kept is not None:
            return kept
        made = cls.build(table)
        if made is not None and made.nbytes <= cls.BUDGET:
            kept, used = [made], made.nbytes
            for old in cls._kept[:cls.SLOTS - 1]:
                if used + old.nbytes <= cls.BUDGET:
                    kept.append(old)
                    used += old.nbytes
            cls._kept = kept
        return made

    @property
    def nbytes(self) -> int:
        lookup = self.at.nbytes if self.at is not None else 3 * self.index.nbytes  # with its hash table
        return lookup + sum(v.nbytes for v in self.cols) + self._probe_bytes(self.probes)

    @staticmethod
    def _probe_bytes(probes: list[tuple[list[np.ndarray], np.ndarray]]) -> int:
        return sum(sum(v.nbytes for v in cols) + pos.nbytes for cols, pos in probes)

    @classmethod
    def build(cls, table: list[np.ndarray]) -> _TableKeys | None:
        """None where the general path must decide: a null or float key, codes too wide, repeated keys."""
        if any(v.dtype.kind not in "iub" and v.dtype != object for v in table):
            return None
        coded = [_column_codes(v) for v in table]
        if any(u is not None and (c < 0).any() for c, _, _, u in coded):
            return None
        key = _folded([(c, k) for c, k, _, _ in coded])
        if key is None:
            return None
        try:
            return cls([v.copy() for v in table], ["i" if u is None else "o" for *_, u in coded],
                       [lo for _, _, lo, _ in coded], [max(k, 1) for _, k, _, _ in coded],
                       [None if u is None else pd.Index(u, dtype=object) for *_, u in coded], key)
        except ValueError:
            return None

    def find(self, probe: list[np.ndarray]) -> np.ndarray | None:
        """Each probe row's position in the table, -1 where absent; None for a probe column of another kind.
        The answers for the last few probes are kept (`PROBES`): a round looks its remotes up in its replicas
        three times (each HW check) and from one round to the next the same follower rows come back. The
        probe's columns are compared by value (`_same_rows`, ~20 us) against a coding of ~150 us."""
        hit = _recall(self.probes, lambda e: _same_rows(e[0], probe))
        if hit is not None:
            return hit[1].copy()
        pos = self._find(probe)
        if pos is not None and len(pos) >= self.MIN_ROWS:
            kept = [([v.copy() for v in probe], pos.copy()), *self.probes[:self.PROBES - 1]]
            grown = self._probe_bytes(kept) - self._probe_bytes(self.probes)
            if sum(t.nbytes for t in self._kept) + grown <= self.BUDGET:  # the budget is for all tables kept
                self.probes = kept
        return pos

    def _find(self, probe: list[np.ndarray]) -> np.ndarray | None:
        key, miss = None, None
        for v, kind, lo, k, uniq in zip(probe, self.kinds, self.lows, self.sizes, self.values, strict=True):
            if kind == "i":
                if v.dtype.kind not in "iub":
                    return None
                codes = np.subtract(v, lo, dtype="int64")
                out = (codes < 0) | (codes >= k) if len(codes) and (codes.min() < 0 or codes.max() >= k) else None
            else:
                if v.dtype != object:
                    return None
                pc_, pu = distinct(v)
                codes = np.append(uniq.get_indexer(pu), -1)[pc_]  # a null is a miss: the table holds none
                out = codes < 0 if len(codes) and codes.min() < 0 else None  # nulls coded -1 too
            if out is not None:
                codes[out] = 0
                miss = out if miss is None else miss | out
            if key is None:
                key = codes
            else:
                key *= k
                key += codes
        pos = self.at[key] if self.at is not None else self.index.get_indexer(key)
        if miss is not None:
            pos[miss] = -1
        return pos


def _same_rows(table: list[np.ndarray], probe: list[np.ndarray]) -> bool:
    """Whether the probe's key columns hold the table's keys row for row: the same arrays, equal numbers,
    or the same objects (cheap; equal strings held by other objects answer no, and the lookup decides)."""
    for x, y in zip(table, probe, strict=True):
        if x is y:
            continue
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if x.dtype == object:
            if len(x) and not (_addresses(np.ascontiguousarray(x)) == _addresses(np.ascontiguousarray(y))).all():
                return False
        elif not np.array_equal(x, y):
            return False
    return True


def join(left: pd.DataFrame, right: pd.DataFrame, on: list[str], right_on: list[str] | None = None,
         how: str = "inner") -> tuple[np.ndarray, np.ndarray]:
    """Row positions (in `left`, in `right`) of the join on key columns (keys may repeat on both sides),
    in pd.merge's order: left rows in order, each with its matches in right's order; `how="left"` keeps
    a left row without a match once, with right position -1. The folded keys (`_fold`) found by one
    stable sort, instead of a merge building both frames' rows."""
    n, right_on = len(left), right_on or on
    if n == 0 or right.empty:
        keep = n if how == "left" else 0
        return np.arange(keep, dtype="int64"), np.full(keep, -1, dtype="int64")
    key = _fold([np.concatenate([array(left, a), array(right, b)]) for a, b in zip(on, right_on, strict=True)])
    if key is None:  # too wide to fold: the merge itself, on the rows' positions
        m = pd.DataFrame({**{f"_k{i}": array(left, c) for i, c in enumerate(on)}, "_l": np.arange(n)}).merge(
            pd.DataFrame({**{f"_k{i}": array(right, c) for i, c in enumerate(right_on)},
                          "_r": np.arange(len(right))}), on=[f"_k{i}" for i in range(len(on))], how=how)
        return m["_l"].to_numpy(dtype="int64"), m["_r"].fillna(-1).to_numpy(dtype="int64")
    lk, rk = key[:n], key[n:]
    order = np.argsort(rk, kind="stable")
    sk = rk[order]
    lo = np.searchsorted(sk, lk, "left")
    found = np.searchsorted(sk, lk, "right") - lo
    rows = np.maximum(found, 1) if how == "left" else found
    within = np.arange(rows.sum()) - np.repeat(np.cumsum(rows) - rows, rows)
    at = np.repeat(lo, rows) + within
    ri = order[np.minimum(at, len(order) - 1)]
    return np.repeat(np.arange(n), rows), np.where(np.repeat(found > 0, rows), ri, -1)


def run_ids(columns: list[np.ndarray]) -> np.ndarray:
    """A run number (0, 1, ...) per row of rows sorted by `columns`: it grows where any value changes."""
    change = np.zeros(len(columns[0]), dtype=bool)
    for v in columns:
        change[1:] |= v[1:] != v[:-1]
    return np.cumsum(change)


def joined_order(keys: list[np.ndarray], li: np.ndarray, off: np.ndarray) -> np.ndarray | None:
    """Positions that sort the rows of a join, grouped by left row `li` as `join(left, right)` gives them,
    by the left rows' `keys` and then `off` (stably); None when they already are in that order. When each
    left row's rows come in increasing `off` (a partition's records in offset order) and no two left rows
    share their keys, only the left rows are sorted (fewer rows and columns) and each one's run of rows is
    taken in their order; otherwise every row is sorted."""
    if len(li) < 2:
        return None
    order = sort_order(keys)
    same = li[1:] == li[:-1]
    if not (off[1:][same] > off[:-1][same]).all() or run_ids([k[order] for k in keys])[-1] < len(order) - 1:
        return sort_order([*(k[li] for k in keys), off])
    if (order[1:] > order[:-1]).all():
        return None
    count = np.bincount(li, minlength=len(order))
    start = np.cumsum(count) - count
    n = count[order]
    return np.repeat(start[order] - (np.cumsum(n) - n), n) + np.arange(len(li))


def sort_order(columns: list[np.ndarray], remember: bool = False) -> np.ndarray:
    """Positions that sort rows by `columns` (first the most significant) ascending, stably, nulls
    last: frame.sort_values(cols, kind="stable") as positions. Object columns are ranked by their
    distinct values (`distinct`), sorted as a sorted factorize sorts them; pandas builds a Categorical
    per column, and a sorted factorize of every row hashes every string (a topic column: one object).
    The ranks are folded into one int64 per row (`_folded`), so one stable argsort does what a lexsort
    over every column did (~2x cheaper), and rows already in order (a third of a round's sorts) cost one
    comparison pass. `remember`: the answer is kept for the next call on the same keys (`_Sorts`), for
    callers whose keys rarely change from one round to the next (the history rows' replicas)."""
    n = len(columns[0]) if columns else 0
    if n == 0:
        return np.arange(0)
    if remember:
        return _Sorts.answer(None, list(columns), lambda: sort_order(columns))
    ranked = []
    for v in columns:
        if v.dtype.kind in "iub":  # its offset from the minimum, as the lookups code it
            codes, k, _, _ = _column_codes(v)
            ranked.append((codes, k))
        else:
            codes, uniques = distinct(v)
            rank = pd.factorize(uniques, sort=True)[0]  # each distinct value's place in sorted order
            ranked.append((np.append(rank, len(uniques))[codes], len(uniques) + 1))  # a null (-1) after every value
    key = _folded(ranked)
    if key is None:  # more distinct combinations than an int64 holds
        return np.lexsort([r for r, _ in ranked][::-1])
    if bool((key[1:] >= key[:-1]).all()):
        return np.arange(n)
    return np.argsort(key, kind="stable")


class _Sorts(_Memo):
    """sort_order of key columns, kept for the next call on the same keys (compared by value: ~20 us against a
    sort's ~150 us at 4,500 rows; a round's history sorts its replicas and its remotes, whose keys change only
    when a replica comes or goes)."""

    _kept = []


def sorted_by(frame: pd.DataFrame, cols: list[str], keep: list[str] | None = None) -> pd.DataFrame:
    """frame.sort_values(cols, kind="stable"), by sort_order; with `keep`, only those columns, indexed
    0..n-1 (frame.sort_values(...)[keep].reset_index(drop=True)): only they are taken, and a frame's
    take of every column costs ~2x its numpy takes (18 vs ~9 ms for 60,000 replicas)."""
    order = sort_order([array(frame, c) for c in cols])
    return frame.take(order) if keep is None else select(frame, keep, order)


def select(frame: pd.DataFrame, cols: list[str], rows: np.ndarray) -> pd.DataFrame:
    """frame[cols] at `rows` (positions or a boolean mask), indexed 0..n-1: one numpy take per column kept
    (frame.loc[mask, cols] builds a frame of every column first, and aligns on labels: ~1 ms a fetch round
    at 9,000 replicas, against ~0.1 ms)."""
    taken = {c: array(frame, c)[rows] for c in cols}
    return owned(taken)


def take(table: pd.DataFrame, column: str, pos: np.ndarray, default) -> np.ndarray:
    """table[column] at positions `pos` (from `locate`), `default` where a position is -1."""
    if len(table) == 0:
        return np.full(len(pos), default)
    return np.where(pos >= 0, array(table, column)[np.maximum(pos, 0)], default)


def per_topic(topics: pd.Series | np.ndarray, values: pd.Series, default: int) -> np.ndarray:
    """values[topic] of each row as int64, `default` where the topic (or a null) is not in `values`:
    topics.map(values).fillna(default), mapping each distinct topic once by the lookup map does
    (values.index.get_indexer) without its Series (a map costs ~150 us, most rounds have one topic)."""
    codes, uniques = distinct(np.asarray(topics))
    at = values.index.get_indexer(uniques)
    got = values.to_numpy()[np.maximum(at, 0)] if len(values) else np.full(len(at), default)
    found = np.where((at >= 0) & pd.notna(got), got, default).astype("int64")
    return np.append(found, np.int64(default))[codes]  # a null's code -1 takes the default


def leaders_by_key(known: pd.DataFrame, topics: pd.Series | np.ndarray, partitions: pd.Series | np.ndarray
                   ) -> np.ndarray:
    """The `leader` of each (topic, partition) in `known` (topic, partition, leader rows), -1 where the
    partition is not there: the controller's ZooKeeper view on the driver, and the resident engine's
    tasks routing the produce batches they make."""
    if known.empty or len(topics) == 0:
        pos = np.full(len(topics), -1, dtype="int64")
    else:
        pos = _positions([array(known, "topic"), array(known, "partition")],
                         [np.asarray(topics), np.asarray(partitions)])
    leaders = np.append(known["leader"].to_numpy(dtype="int32"), np.int32(-1))
    return leaders[np.where(pos >= 0, pos, -1)]
