"""The one row schema every round reads and writes, and the packing of protocol frames into it.

A round is one `mapInPandas` over a DataFrame of rows of many kinds (replica state, messages in
flight, file actions ...). Spark needs one schema, so each protocol frame (protocol/frames.py) is
packed into shared columns: the columns most kinds have keep their names, and the rest go, in
order, into typed slots (l0.. for int64, i0.. for int32, f0 for bool, s0 for strings). The
mapping is derived from the frame specs, so a new frame column needs no edit here.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema

from ..protocol import frames as F

COMMON = {
    "broker": F.I32, "src": F.I32, "topic": F.STR, "partition": F.I32, "replica": F.I32, "log_dir": F.STR,
    "leader": F.I32, "leader_epoch": F.I32, "controller_epoch": F.I32, "isr": F.STR, "replicas": F.STR,
}
SLOTS = {F.I64: ["l0", "l1", "l2", "l3", "l4", "l5", "l6", "l7", "l8"], F.I32: ["i0", "i1", "i2"], F.BOOL: ["f0"],
         F.STR: ["s0", "s1", "payload"]}

# Kinds of rows. State kinds are a broker's memory and vanish when it crashes; message kinds are
# in flight to `broker`; output-only kinds go to the driver.
REPLICA, REMOTE, TAIL, BROKER, PARKED_FETCH, PENDING_PRODUCE = 1, 2, 3, 4, 5, 6
FETCH, FETCH_RESPONSE, FETCH_RECORD, PRODUCE, LEADER_AND_ISR, START = 10, 11, 12, 13, 14, 15
STOP_REPLICA, UPDATE_METADATA, ISR_RESULT, SHUTDOWN = 16, 17, 18, 19
EPOCH_REQUEST, EPOCH_RESPONSE = 23, 24
ADD, RESULT_SUMMARY, ISR_CHANGE = 20, 21, 22
ALTER_LOG_DIRS, LOG_DIR_FAILURE = 25, 26  # driver -> broker (admin request, a disk dies)
ALTER_LOG_DIRS_RESPONSE, OFFLINE_REPLICA = 27, 28  # broker -> driver
FUTURE, PREFERRED_DIR, OFFLINE = 29, 30, 31  # broker state: future replicas, remembered dirs, offline replicas
STATE_BLOB = 40  # a resident task's carried frames between windows, in the `blob` column (state_blobs)
PLACE = 41  # no content: a row that only gives a resident task its Spark partition (resident.placing_rows)

KIND_SPECS: dict[int, dict[str, str]] = {
    REPLICA: F.REPLICA, REMOTE: F.REMOTE, TAIL: F.RECORD, BROKER: F.BROKER, PARKED_FETCH: F.FETCH,
    PENDING_PRODUCE: F.PENDING, FETCH: F.FETCH, FETCH_RESPONSE: F.FETCH_RESPONSE, FETCH_RECORD: F.RECORD,
    PRODUCE: F.PRODUCE, LEADER_AND_ISR: F.LEADER_AND_ISR, START: {"broker": F.I32},
    STOP_REPLICA: F.STOP_REPLICA, UPDATE_METADATA: F.UPDATE_METADATA, ISR_RESULT: F.ISR_RESULT,
    SHUTDOWN: {"broker": F.I32}, EPOCH_REQUEST: F.EPOCH_REQUEST, EPOCH_RESPONSE: F.EPOCH_RESPONSE,
    ADD: {"broker": F.I32, "payload": F.STR}, RESULT_SUMMARY: {"broker": F.I32, "payload": F.STR},
    ISR_CHANGE: F.ISR_CHANGE, ALTER_LOG_DIRS: F.ALTER_LOG_DIRS, LOG_DIR_FAILURE: F.LOG_DIR_FAILURE,
    ALTER_LOG_DIRS_RESPONSE: F.ALTER_LOG_DIRS_RESPONSE, OFFLINE_REPLICA: F.OFFLINE_REPLICA,
    FUTURE: F.FUTURE, PREFERRED_DIR: F.PREFERRED_DIR, OFFLINE: F.OFFLINE_REPLICA,
}
STATE_KINDS = (REPLICA, REMOTE, TAIL, BROKER, PARKED_FETCH, PENDING_PRODUCE, FUTURE, PREFERRED_DIR, OFFLINE)
MESSAGE_KINDS = (FETCH, FETCH_RESPONSE, FETCH_RECORD, PRODUCE, LEADER_AND_ISR, START, STOP_REPLICA,
                 UPDATE_METADATA, ISR_RESULT, SHUTDOWN, EPOCH_REQUEST, EPOCH_RESPONSE, ALTER_LOG_DIRS,
                 LOG_DIR_FAILURE)
CARRY_KINDS = STATE_KINDS + MESSAGE_KINDS
DRIVER_KINDS = (ADD, RESULT_SUMMARY, ISR_CHANGE, ALTER_LOG_DIRS_RESPONSE, OFFLINE_REPLICA)

WIRE: dict[str, str] = {"kind": "int8", **COMMON}
for _dtype, _names in SLOTS.items():
    for _n in _names:
        WIRE[_n] = _dtype

_ARROW = {"int8": pa.int8(), F.I32: pa.int32(), F.I64: pa.int64(), F.BOOL: pa.bool_(), F.STR: pa.string()}
ARROW_SCHEMA = pa.schema([(c, _ARROW[t]) for c, t in WIRE.items()])
# The wire schema for Spark, converted from the Arrow one rather than parsed from DDL: a process's first
# DDL parse starts Spark's SQL parser in the JVM, ~0.7-1.2 s inside the first window of every run.
SPARK_SCHEMA = from_arrow_schema(ARROW_SCHEMA)
DEFAULTS = {F.I32: -1, F.I64: -1, F.BOOL: False, "int8": 0}
# a resident window's output: the wire columns and `blob` (null but on STATE_BLOB rows)
BLOB_SCHEMA = T.StructType([*SPARK_SCHEMA.fields, T.StructField("blob", T.BinaryType())])
BLOB_WIRE = {**WIRE, "blob": F.STR}  # (its pandas columns: a blob is a bytes object)
BLOB_ROWS = 100_000  # frame rows per blob: an Arrow binary value must stay far below 2 GiB


def _mapping(spec: dict[str, str]) -> dict[str, str]:
    """frame column -> wire column for one kind."""
    free = {t: list(v) for t, v in SLOTS.items()}
    out = {}
    for col, t in spec.items():
        if col in COMMON and COMMON[col] == t:
            out[col] = col
        elif col == "payload":
            out[col] = free[F.STR].pop(free[F.STR].index("payload"))
        else:
            out[col] = free[t].pop(0)
    return out


MAPPINGS = {k: _mapping(s) for k, s in KIND_SPECS.items()}


def _blank(n: int) -> dict[str, np.ndarray]:
    """`n` wire rows' columns, each allocated once with its default (an object column all None)."""
    return {c: np.empty(n, dtype=object) if t == F.STR else np.full(n, DEFAULTS[t], dtype=t) for c, t in WIRE.items()}


def pack_all(parts: list[tuple[int, pd.DataFrame]]) -> pd.DataFrame:
    """Protocol frames -> one wire frame. Each wire column is allocated once with its default (unused
    slots keep it; an object column starts as all None) and every kind's columns are copied into their
    rows: cheaper than concatenating per-kind frames with all-null columns, or per-kind filled arrays."""
    parts = [(k, f) for k, f in parts if len(f)]
    data = _blank(sum(len(f) for _, f in parts))
    lo = 0
    for kind, frame in parts:
        hi = lo + len(frame)
        data["kind"][lo:hi] = kind
        for src, dst in MAPPINGS[kind].items():
            data[dst][lo:hi] = frame[src].to_numpy()
        lo = hi
    return pd.DataFrame(data, copy=False)


def concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Wire frames -> one, column by column: pd.concat checks every value of the many all-null string
    slots for a null, which cost a resident round ~80 ms at 9,000 replicas."""
    return F.concat(frames, WIRE)


def pack(kind: int, frame: pd.DataFrame) -> pd.DataFrame:
    """Protocol frame -> wire rows of `kind`."""
    return pack_all([(kind, frame)])


def by_kind(parts: Iterable[tuple[int, pd.DataFrame]], empty: bool = True) -> dict[int, pd.DataFrame]:
    """Protocol frames by kind, the parts of a kind concatenated in order: what `split` would give for the
    wire rows `pack_all(parts)` makes, without the wire. `empty`: every kind present (empty when absent),
    as split gives them; otherwise only the kinds with rows."""
    pieces: dict[int, list[pd.DataFrame]] = {}
    for kind, frame in parts:
        if len(frame):
            pieces.setdefault(kind, []).append(frame)
    kinds = KIND_SPECS if empty else [k for k in KIND_SPECS if k in pieces]
    return {kind: F.concat(pieces.get(kind, []), KIND_SPECS[kind]) for kind in kinds}


def split(wire: pd.DataFrame, only: tuple[int, ...] | None = None) -> dict[int, pd.DataFrame]:
    """Wire rows -> one protocol frame per kind (every kind present, empty when absent). `only`: the kinds
    to unpack, the others left empty as if their rows were not there (split(wire[wire.kind in only]),
    without selecting the rows of the whole wire frame first)."""
    kinds = wire["kind"].to_numpy()
    order = np.argsort(kinds, kind="stable")
    sk = kinds[order]
    every = np.array(list(KIND_SPECS), dtype=sk.dtype)  # one search for all kinds, in the wire's dtype
    los, his = np.searchsorted(sk, every, "left"), np.searchsorted(sk, every, "right")
    columns: dict[str, np.ndarray] = {}
    out = {}
    for kind, lo, hi in zip(KIND_SPECS, los, his, strict=True):
        if only is not None and kind not in only:
            lo = hi
        out[kind] = _frame(kind, wire, order[lo:hi], columns)
    return out


def _frame(kind: int, wire: pd.DataFrame, idx: np.ndarray, columns: dict[str, np.ndarray] | None = None
           ) -> pd.DataFrame:
    """The protocol frame of the wire rows at positions `idx` (all of `kind`). `columns`: the wire's
    columns as arrays, filled as they are first read (split reads each once for all kinds)."""
    spec = KIND_SPECS[kind]
    if not len(idx):
        return F.empty(spec)
    columns = {} if columns is None else columns
    for dst in MAPPINGS[kind].values():
        if dst not in columns:
            columns[dst] = wire[dst].to_numpy()
    # positions taken from the wire are fresh arrays: the frame may own them as they are
    return F.owned({src: columns[dst][idx] for src, dst in MAPPINGS[kind].items()}, spec)


def unpack(kind: int, wire: pd.DataFrame) -> pd.DataFrame:
    """Wire rows of one kind -> protocol frame (only that kind's frame is built)."""
    return _frame(kind, wire, np.flatnonzero(wire["kind"].to_numpy() == kind))


def state_blobs(parts: dict[int, pd.DataFrame]) -> pd.DataFrame:
    """A resident task's carried frames (state and messages in flight, by kind) as a few STATE_BLOB rows,
    each an Arrow IPC body of one kind's rows (exchange.pack_parts), for the next window's task. Spark
    moves a handful of binary values instead of converting every row of a 40-column schema to and from
    its own rows (at 60,000 replicas, ~1.5 s a window each way)."""
    from .exchange import pack_parts

    blobs = [pack_parts({kind: f.iloc[lo:lo + BLOB_ROWS]}) for kind, f in parts.items()
             for lo in range(0, len(f), BLOB_ROWS)]
    data = _blank(len(blobs))
    data["kind"][:] = STATE_BLOB
    data["blob"] = np.array(blobs + [None], dtype=object)[:-1]  # (a list of bytes, not a 2-d array)
    return pd.DataFrame(data, copy=False)


def blob_parts(frames: Iterable[pd.DataFrame]) -> tuple[list[tuple[int, pd.DataFrame]], list[pd.DataFrame]]:
    """Frames of a resident window's output (BLOB_SCHEMA) -> (the carried frames of its STATE_BLOB rows as
    (kind, frame), in order; the other rows as wire frames)."""
    from .exchange import unpack_parts

    parts: list[tuple[int, pd.DataFrame]] = []
    rest: list[pd.DataFrame] = []
    for b in frames:
        blobs = b["kind"].to_numpy() == STATE_BLOB
        for body in b["blob"].to_numpy()[blobs]:
            parts += list(unpack_parts(body))
        if not blobs.all():
            rest.append(b.loc[~blobs, list(WIRE)].reset_index(drop=True))
    return parts, rest


def unblob(frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """A resident window's output rows as wire rows: each blob's frames packed in place of its row."""
    parts, rest = blob_parts(frames)
    return concat([pack_all(parts), *rest])


class Unblob:
    """The function given to mapInPandas to read a resident window's output as wire rows (SPARK_SCHEMA):
    for a save, an idle jump or another engine."""

    def __call__(self, batches: Iterable[pd.DataFrame]) -> Iterable[pd.DataFrame]:
        frames = [b for b in batches if len(b)]
        if frames:
            yield unblob(frames)


def driver_rows(out) -> pd.DataFrame:
    """The wire rows of a round's or window's job output that are meant for the driver (DRIVER_KINDS), as
    pandas: collecting them runs the job (and fills its lazy local checkpoint)."""
    from pyspark.sql import functions as Fn

    return pd.DataFrame(out.where(Fn.col("kind").isin(list(DRIVER_KINDS))).select(*WIRE).collect(),
                        columns=list(WIRE))
