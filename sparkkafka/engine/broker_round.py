"""One round on the executors: every broker a Spark task hosts handles what arrived for it.

The thin I/O shell around the protocol core (protocol/broker.py, where the round's order is). Per
task it unpacks the wire rows into the brokers' state and inbox, reads the logs of brokers that
(re)start (a pre-pass), steps the brokers (answering the round's log reads from the Delta log at the
round's snapshot), executes the effects (the brokers' checkpoint files; the round's new log records,
truncations and history rows as Parquet files, committed later by the driver) and packs the brokers'
new state, the messages they send and the file actions back into wire rows. Brokers that are paused
(a stop-the-world stall) keep all their rows untouched: they process nothing and send nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
import pyarrow as pa

from ..protocol import broker as B
from ..protocol import frames as F
from ..storage import broker_disk, log_truncation
from ..storage.tables import SCHEMAS, durable_batch, write_file
from . import rows as W


@dataclass(frozen=True)
class RoundParams:
    """Everything a task needs for one round; pickled with the function, nothing else is shared."""

    run_id: str
    round_no: int
    now: int
    tables_dir: str
    brokers_dir: str
    log_version: int
    facts: B.RoundFacts  # the settings and the cluster's facts this round (protocol/broker.py)


def _recovered(p: RoundParams, starting: list[int]) -> dict[int, B.RecoveredLogs]:
    """The restart pre-pass: each starting broker's checkpoint files and log rows, from its live dirs
    only (RoundFacts.offline_dirs), current and future logs (protocol/broker.recover loads them)."""
    out = {}
    cols = ["broker", "log_dir", "topic", "partition", "offset", "leader_epoch"]
    for b in starting:
        live = B.live_dirs(p.facts, b)
        disk = broker_disk.read_disk(p.brokers_dir, b, live, before=p.round_no)
        log = broker_disk.read_log(p.tables_dir, p.log_version, b, cols, future=False).to_pandas()
        fdisk = broker_disk.read_disk(p.brokers_dir, b, live, future=True, before=p.round_no)
        flog = (broker_disk.read_log(p.tables_dir, p.log_version, b, cols, future=True).to_pandas()
                if len(fdisk) else log.iloc[:0])
        out[b] = B.RecoveredLogs(disk, log[log["log_dir"].isin(live)], fdisk, flog[flog["log_dir"].isin(live)])
    return out


def _recover(p: RoundParams, starting: list[int]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Logs of restarting brokers as Kafka's LogManager loads them: read (`_recovered`), then loaded
    (protocol/broker.recover). Returns (replicas, futures)."""
    return B.recover(_recovered(p, starting))


def _read(p: RoundParams, req: B.ReadLog, held: WindowFiles | None = None) -> pd.DataFrame:
    """Answer a ReadLog: the records of the brokers' current logs in req.ranges, read from the log table
    at the round's snapshot and from the rows a resident window `held` has not written yet, broker by
    broker in id order."""
    parts = []
    for b, g in req.ranges.groupby("broker"):
        t = broker_disk.read_log(p.tables_dir, p.log_version, int(b), B.READ_COLUMNS,
                                 g[["topic", "partition", "from_offset", "to_offset"]], future=False,
                                 unwritten=held.unwritten(int(b)) if held is not None else ())
        parts.append(t.to_pandas().assign(src=int(b)))
    return F.concat(parts, F.RECORD)


def _write_log(p: RoundParams, a: pd.DataFrame) -> list[dict]:
    """Append the round's new records (RECORD rows with their log_dir and is_future) to the log table,
    one file per (broker, log_dir)."""
    return [write_file(p.tables_dir, "log", t, f"{p.round_no:08d}-b{b}", {"broker": b, "log_dir": d})
            for b, d, t in _log_tables(p, a)]


def _log_tables(p: RoundParams, a: pd.DataFrame) -> list[tuple[int, str, pa.Table]]:
    """The round's new records as log table rows, one Arrow table per (broker, log_dir). The rows are
    sorted as numpy takes of the columns written (a frame's take of every column costs ~2x)."""
    if a.empty:
        return []
    order = F.sort_order([F.array(a, c) for c in ("broker", "log_dir", "topic", "partition", "offset")])

    def col(c: str) -> np.ndarray:
        return F.array(a, c)[order]

    n = len(order)
    t = pa.table({
        "topic": F.to_arrow(col("topic"), pa.string()), "partition": pa.array(col("partition"), pa.int32()),
        "offset": pa.array(col("offset"), pa.int64()), "leader_epoch": pa.array(col("leader_epoch"), pa.int32()),
        "record_id": pa.array(col("record_id"), pa.int64()), "key": F.to_arrow(col("key"), pa.string()),
        "value": pa.nulls(n, pa.binary()), "value_bytes": pa.array(col("value_bytes"), pa.int32()),
        "timestamp": pa.array(col("timestamp"), pa.int64()),
        "is_future": pa.array(col("is_future").astype(bool)),
        "append_ms": pa.array(np.full(n, p.now), pa.int64()),
    })
    # one file per (broker, log_dir): rows are sorted, so each is one contiguous slice
    bro, dirs = col("broker"), col("log_dir")
    codes = F.distinct(dirs)[0]
    starts = np.flatnonzero(np.r_[True, (bro[1:] != bro[:-1]) | (codes[1:] != codes[:-1])])
    ends = np.r_[starts[1:], n]
    return [(int(bro[lo]), dirs[lo], t.slice(lo, hi - lo)) for lo, hi in zip(starts.tolist(), ends.tolist(), strict=True)]


def _history(p: RoundParams, tag: str, rows: B.HistoryRows) -> dict:
    """Write one history table's rows of the round (protocol/broker.history), stamped with round and time."""
    return write_file(p.tables_dir, rows.table, _history_table(p, rows), tag)


def _history_table(p: RoundParams, rows: B.HistoryRows) -> pa.Table:
    """One history table's rows of the round as Arrow, stamped with round and time."""
    f, schema = rows.frame, SCHEMAS[rows.table]
    if rows.table == "produce_results":
        return expand_results(f)
    if rows.table == "state_change_log":
        return _table(f, schema, time_ms=p.now)
    return _table(f, schema, round=p.round_no, time_ms=p.now)


def _table(columns: pd.DataFrame | Mapping[str, np.ndarray], schema: pa.Schema, **stamps: int) -> pa.Table:
    """The columns of `schema` (from `columns`, or the constant `stamps`) as an Arrow table of that schema,
    converted column by column to their types, nulls from None / NaN: the table Table.from_pandas(...)
    .cast(schema) gives, without copying the frame into a new one and inferring every column's type first."""
    n = len(columns) if isinstance(columns, pd.DataFrame) else len(next(iter(columns.values())))
    try:
        return pa.Table.from_arrays(
            [pa.array(np.full(n, stamps[f.name], dtype="int64"), type=f.type) if f.name in stamps
             else F.to_arrow(np.asarray(columns[f.name]), f.type) for f in schema], schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # a column Arrow converts only by way of another type
        frame = pd.DataFrame({c: columns[c] for c in schema.names if c not in stamps}).assign(**stamps)
        return pa.Table.from_pandas(frame[schema.names], preserve_index=False).cast(schema)


def expand_results(results: pd.DataFrame) -> pa.Table:
    """One produce_results row per record of each answered batch (offset null for a failed batch)."""
    n = results["count"].to_numpy().astype("int64")
    rows = np.repeat(np.arange(len(results)), n)
    within = np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)
    base = results["base_offset"].to_numpy()[rows]

    def rep(c: str) -> np.ndarray:
        return results[c].to_numpy()[rows]

    t = _table({"time_ms": rep("time_ms"), "topic": rep("topic"), "partition": rep("partition"),
                "record_id": rep("record_id") + within, "acks": rep("acks"), "offset": np.where(base >= 0, base + within, 0),
                "error": rep("error"), "acked": rep("acked").astype(bool)}, SCHEMAS["produce_results"])
    offset = pa.array(t["offset"].to_numpy(), pa.int64(), mask=base < 0)
    return t.set_column(t.schema.get_field_index("offset"), SCHEMAS["produce_results"].field("offset"), offset)


def _truncate(p: RoundParams, cuts: pd.DataFrame, flips: pd.DataFrame | None = None) -> list[dict]:
    """Remove cut records from the brokers' Delta logs and turn swapped-in future logs' records into
    current ones (`flips`: broker, log_dir, topic, partition); add and remove actions for the commit."""
    actions = []
    flips = flips if flips is not None else pd.DataFrame(columns=["broker", "log_dir", "topic", "partition"])
    for b in sorted(set(cuts["broker"].astype(int)) | set(flips["broker"].astype(int))):
        g, fl = cuts[cuts["broker"] == b], flips[flips["broker"] == b]
        adds, removes = log_truncation.truncate(p.tables_dir, p.log_version, int(b), g,
                                                f"trunc-{p.round_no:08d}-b{int(b)}", flips=fl)
        actions += adds + [{**r, "remove": True} for r in removes]
    return actions


@dataclass
class WindowFiles:
    """The log and history rows of a resident window's rounds, kept in the task and written as one file
    per (broker, log_dir) and per history table when the window ends, or earlier when a round must cut
    the log or recover a restarting broker from it (`flush`); a fetch's read takes them from memory
    (`unwritten`). Written per round, a 12-broker x 3-dir round leaves ~40 small Parquet
    files, a third of its CPU at 9,000 replicas, which the window then merges anyway. The tables get
    the same rows; only the files differ. A window lost with its task loses nothing committed."""

    log: dict[tuple[int, str], list[pa.Table]] = field(default_factory=dict)
    history: dict[str, list[pa.Table]] = field(default_factory=dict)
    log_rounds: list[int] = field(default_factory=list)  # the rounds whose rows are held
    history_rounds: list[int] = field(default_factory=list)
    writer: int = -1  # the task's rank in its window (names its history files)

    def hold(self, round_no: int, logs: list[tuple[int, str, pa.Table]], tables: list[tuple[str, pa.Table]]) -> None:
        for b, d, t in logs:
            self.log.setdefault((b, d), []).append(t)
            self.log_rounds.append(round_no)
        for name, t in tables:
            self.history.setdefault(name, []).append(t)
            self.history_rounds.append(round_no)

    @property
    def history_rows(self) -> int:
        """The history rows held."""
        return sum(t.num_rows for ts in self.history.values() for t in ts)

    def _logs(self, broker: int | None = None) -> list[tuple[int, str, pa.Table]]:
        """(broker, log_dir, rows) of the held log rows (of `broker` only, when given), one table per
        (broker, log_dir) in that order."""
        return [(b, d, pa.concat_tables(ts)) for (b, d), ts in sorted(self.log.items())
                if broker is None or b == broker]

    def unwritten(self, broker: int) -> list[tuple[str, pa.Table]]:
        """(log_dir, rows) of `broker`'s held log rows, as `flush` would write them."""
        return [(d, t) for _, d, t in self._logs(broker)]

    def flush(self, tables_dir: str, history: bool = True, log: bool = True) -> list[dict]:
        """Write what is held (the log only unless `history`, the history only unless `log`); the add
        actions. File names carry the rounds held (h<first>-<last>: not the window merge's w<first>-<last>),
        so a re-run task rewrites the same files (where a window writes its history early is decided by its
        rows, the same in a re-run)."""
        adds = []
        if log and self.log:
            span = f"h{min(self.log_rounds):08d}-{max(self.log_rounds):08d}"
            adds += [write_file(tables_dir, "log", t, f"{span}-b{b}", {"broker": b, "log_dir": d})
                     for b, d, t in self._logs()]
            self.log, self.log_rounds = {}, []
        if history and self.history:
            span = f"h{min(self.history_rounds):08d}-{max(self.history_rounds):08d}"
            adds += [write_file(tables_dir, name, pa.concat_tables(ts), f"{span}-t{self.writer}")
                     for name, ts in sorted(self.history.items())]
            self.history, self.history_rounds = {}, []
        return adds


def _flushed(p: RoundParams, held: WindowFiles | None, adds: list[dict]) -> RoundParams:
    """`p` reading the log with the held rows of earlier rounds written (their actions go to `adds`)."""
    if held is None or not held.log:
        return p
    written = held.flush(p.tables_dir, history=False)
    adds += written
    return replace(p, log_version=p.log_version.then(written))


def execute(p: RoundParams, effects: tuple, tag: str, held: WindowFiles | None = None) -> list[dict]:
    """Carry out a round's effects in order (protocol/broker.py): the brokers' files under brokers_dir,
    the log and history tables' new Parquet files (kept in `held` when given). Returns the add (and
    remove) actions for the commit. The brokers' files are written as this round's versions
    (broker_disk: a re-run task rewrites them)."""
    adds: list[dict] = []
    if any(isinstance(e, B.TruncateLog) for e in effects):  # the cut reads the earlier rounds' files
        p = _flushed(p, held, adds)
    d, r = p.brokers_dir, p.round_no
    epochs: list[broker_disk.EpochWrite] = []  # one journal per dir for the round (broker_disk.write_epoch_checkpoints)
    with durable_batch():  # one sync for the round's broker files, not one per file
        for e in effects:
            if isinstance(e, B.WriteHwCheckpoint):
                broker_disk.write_hw_checkpoint(d, e.broker, e.log_dir, e.entries, r)
            elif isinstance(e, B.WriteFlushedOffsets):
                broker_disk.write_flushed(d, e.broker, e.log_dir, e.entries, r)
            elif isinstance(e, B.WriteEpochCheckpoint):
                epochs.append((e.broker, e.log_dir, e.topic, e.partition, e.future, e.entries))
            elif isinstance(e, B.RemoveLogFiles):
                epochs.append((e.broker, e.log_dir, e.topic, e.partition, e.future, None))
            elif isinstance(e, B.WritePartitionsListing):
                broker_disk.write_partitions(d, e.broker, e.log_dir, e.partitions, e.future, r)
            elif isinstance(e, B.AppendRecords):
                if held is None:
                    adds += _write_log(p, e.records)
                else:
                    held.hold(r, _log_tables(p, e.records), [])
            elif isinstance(e, B.TruncateLog):
                adds += _truncate(p, e.cuts, e.flips)
            elif isinstance(e, B.HistoryRows):
                if held is None:
                    adds.append(_history(p, tag, e))
                else:
                    held.hold(r, [], [(e.table, _history_table(p, e))])
            else:
                raise TypeError(f"unknown effect {type(e).__name__}")
        if epochs:
            broker_disk.write_epoch_checkpoints(d, r, epochs)
    return adds


# wire kinds of the protocol's typed frames
STATE = {"replicas": W.REPLICA, "remotes": W.REMOTE, "tail": W.TAIL, "brokers": W.BROKER, "parked": W.PARKED_FETCH,
         "pending": W.PENDING_PRODUCE, "futures": W.FUTURE, "preferred": W.PREFERRED_DIR, "offline": W.OFFLINE}
INBOX = {"fetches": W.FETCH, "fetch_responses": W.FETCH_RESPONSE, "fetch_records": W.FETCH_RECORD,
         "produce": W.PRODUCE, "leader_and_isr": W.LEADER_AND_ISR, "start": W.START, "stop_replica": W.STOP_REPLICA,
         "update_metadata": W.UPDATE_METADATA, "isr_results": W.ISR_RESULT, "shutdown": W.SHUTDOWN,
         "epoch_requests": W.EPOCH_REQUEST, "epoch_responses": W.EPOCH_RESPONSE, "alter_log_dirs": W.ALTER_LOG_DIRS,
         "log_dir_failures": W.LOG_DIR_FAILURE}
OUTBOX = {"fetches": W.FETCH, "fetch_responses": W.FETCH_RESPONSE, "fetch_records": W.FETCH_RECORD,
          "isr_changes": W.ISR_CHANGE, "epoch_requests": W.EPOCH_REQUEST, "epoch_responses": W.EPOCH_RESPONSE,
          "offline_replicas": W.OFFLINE_REPLICA, "alter_log_dirs_responses": W.ALTER_LOG_DIRS_RESPONSE}


def process(p: RoundParams, wire: pd.DataFrame, held: WindowFiles | None = None) -> pd.DataFrame:
    """Run one round for every broker present in `wire`; return the output wire rows: unpack, read the
    restarting brokers' logs, step (protocol/broker.py, answering its log reads), execute the effects, pack.
    `held`: a resident window's unwritten rows (written before the round reads the log)."""
    carry = np.isin(wire["kind"].to_numpy(), W.CARRY_KINDS)  # last round's rows for the driver ride along
    k = W.split(wire, only=W.CARRY_KINDS)
    state, inbox = unpack_state(k), unpack_inbox(k)
    tag = f"{p.round_no:08d}-t{int(wire['broker'].to_numpy()[carry].min())}" if carry.any() else ""
    return W.pack_all(wire_parts(*run(p, state, inbox, tag, held)))


def run(p: RoundParams, state: B.BrokerState, inbox: B.Inbox, tag: str, held: WindowFiles | None = None
        ) -> tuple[B.Step, list[dict]]:
    """`process` on unpacked frames (the resident engine keeps its brokers' state unpacked between the
    rounds of a window): the round's Step and the file actions of its effects (history files named `tag`).
    `stepped` then `executed`, with nothing done between."""
    done, p, adds = stepped(p, state, inbox, held)
    return done, executed(p, done, tag, held, adds)


def stepped(p: RoundParams, state: B.BrokerState, inbox: B.Inbox, held: WindowFiles | None = None
            ) -> tuple[B.Step, RoundParams, list[dict]]:
    """The round's step (protocol/broker.step), its log reads answered, its effects not yet carried out:
    (the Step, the round's parameters as the reads left them, the file actions so far). A resident task
    sends the Step's messages before `executed` writes its files."""
    starting = sorted(set(inbox.start["broker"].tolist()) - set(p.facts.paused))
    adds: list[dict] = []
    if starting:
        p = _flushed(p, held, adds)
        inbox = replace(inbox, recovered=_recovered(p, starting))

    def read(req: B.ReadLog) -> pd.DataFrame:  # held rows are read where they are: no file written for it
        return _read(p, req, held)

    return B.step(state, inbox, p.now, p.facts.cfg.rules, p.facts, read=read, clock=time.perf_counter), p, adds


def executed(p: RoundParams, done: B.Step, tag: str, held: WindowFiles | None, adds: list[dict]) -> list[dict]:
    """Carry out a `stepped` round's effects (`execute`); its file actions, after `adds`. The time counts in
    the round summary's write_files."""
    t = time.perf_counter()
    adds = adds + execute(p, done.effects, tag, held)
    done.outbox.summary["timings"]["write_files"] += time.perf_counter() - t
    return adds


def wire_parts(done: B.Step, adds: list[dict], side: bool = True) -> list[tuple[int, pd.DataFrame]]:
    """A round's output as (wire kind, frame) parts: the brokers' state, their messages (and those held for
    paused brokers), and (`side`) the file actions and the round's summary (`side_rows`; a resident window
    gathers those of its rounds and adds them once)."""
    parts = [*[(STATE[f], getattr(done.state, f)) for f in ("replicas", "remotes", "tail", "brokers", "parked",
                                                            "pending")],
             *[(OUTBOX[f], getattr(done.outbox, f)) for f in ("fetches", "fetch_responses", "fetch_records",
                                                              "isr_changes", "epoch_requests", "epoch_responses")],
             *[(STATE[f], getattr(done.state, f)) for f in ("futures", "preferred", "offline")],
             *[(OUTBOX[f], getattr(done.outbox, f)) for f in ("offline_replicas", "alter_log_dirs_responses")]]
    if side:
        parts += side_rows(adds, [done.outbox.summary])
    if done.deferred is not None:  # messages to paused brokers wait for them
        parts += [(kind, getattr(done.deferred, name)) for name, kind in INBOX.items()]
    return parts


def side_rows(adds: list[dict], summaries: list[dict]) -> list[tuple[int, pd.DataFrame]]:
    """The rows only the driver reads: file actions (ADD) and round summaries (RESULT_SUMMARY), as JSON."""
    return [(W.ADD, pd.DataFrame({"broker": -1, "payload": [json.dumps(a) for a in adds]})),
            (W.RESULT_SUMMARY, pd.DataFrame({"broker": -1, "payload": [json.dumps(x) for x in summaries]}))]


def unpack_state(k: dict[int, pd.DataFrame]) -> B.BrokerState:
    """The brokers' state from split wire rows (rows.split)."""
    return B.BrokerState(**{name: k[kind] for name, kind in STATE.items()})


def unpack_inbox(k: dict[int, pd.DataFrame]) -> B.Inbox:
    """The brokers' inbox from split wire rows (rows.split) or frames by kind (a kind absent: empty)."""
    return B.Inbox(**{name: k[kind] if kind in k else F.empty(W.KIND_SPECS[kind]) for name, kind in INBOX.items()})


class BrokerRound:
    """The picklable function given to mapInPandas."""

    def __init__(self, params: RoundParams) -> None:
        self.params = params

    def __call__(self, batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        frames = [b for b in batches if len(b)]
        if not frames:
            return
        wire = W.concat(frames)
        yield process(self.params, wire)
