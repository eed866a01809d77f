"""One round on the executors: every broker a Spark task hosts handles what arrived for it.

This is the thin I/O shell around the protocol core. Per task it unpacks the wire rows, runs the
protocol steps in a fixed order, writes the round's new log records and history rows as Parquet
files (committed later by the driver), and packs the brokers' new state, the messages they send
and the file actions back into wire rows. Brokers that are paused (a stop-the-world stall) keep
all their rows untouched: they process nothing and send nothing.

Order inside a round, per broker: (re)start from disk; LeaderAndIsr (with the profile's follower
truncation); OffsetsForLeaderEpoch answers and fetch responses as a follower; produce batches as a
leader; OffsetsForLeaderEpoch and fetch requests as a leader (new, then parked ones); the produce
purgatory; new requests as a follower; flushes, HW and leader-epoch checkpoints.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from ..protocol import (
    alter_log_dirs,
    controller_requests,
    fetch,
    flush,
    isr,
    leader_epoch,
    log_dir_failure,
    offsets_for_leader_epoch,
    produce,
    truncation,
)
from ..protocol import frames as F
from ..protocol.high_watermark import maybe_increment_leader_hw
from ..protocol.leader_and_isr import become_leader_or_follower, new_broker_rows
from ..storage import broker_disk, log_truncation
from ..storage.tables import SCHEMAS, write_file
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
    log_dirs: tuple[str, ...]
    cfg: dict
    min_isr: dict
    paused: frozenset = frozenset()
    unreachable: dict = field(default_factory=dict)
    write_history: bool = True
    offline_dirs: dict = field(default_factory=dict)  # broker -> frozenset of its failed log dirs (KIP-112)


def _load(disk: pd.DataFrame, log: pd.DataFrame, how: str) -> pd.DataFrame:
    """Logs as LogManager loads them: LEO and log start from the log itself, HW from the checkpoint
    clamped into [logStart, LEO], the leader-epoch cache from its checkpoint (cut at the LEO by the caller)."""
    log = log.sort_values(["topic", "partition", "offset"])
    g = log.groupby(["broker", "log_dir", "topic", "partition"], as_index=False).agg(
        leo=("offset", "max"), log_start_offset=("offset", "min"), last_fetched_epoch=("leader_epoch", "last"))
    g["leo"] += 1
    d = disk.merge(g, on=["broker", "log_dir", "topic", "partition"], how=how)
    d["leo"] = d["leo"].fillna(0)
    d["log_start_offset"] = d["log_start_offset"].fillna(0)
    d["last_fetched_epoch"] = d["last_fetched_epoch"].fillna(-1)
    d["hw"] = np.clip(d["hw"].fillna(0), d["log_start_offset"], d["leo"])
    d["recovery_point"] = np.minimum(d["recovery_point"].fillna(0), d["leo"])
    d["epoch_cache"] = d["epoch_cache"].fillna("")
    return d


def _recover(p: RoundParams, starting: list[int]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Logs of restarting brokers as Kafka's LogManager loads them (_load), no role until LeaderAndIsr;
    nothing from a dir that failed (RoundParams.offline_dirs). Future logs (KIP-113 moves) are loaded
    too, their movers idle until the first LeaderAndIsr; a future log whose current log is not loaded is
    left alone. Returns (replicas, futures)."""
    parts, fparts = [], []
    cols = ["broker", "log_dir", "topic", "partition", "offset", "leader_epoch"]
    for b in starting:
        live = [d for d in p.log_dirs if d not in p.offline_dirs.get(b, ())]
        disk = broker_disk.read_disk(p.brokers_dir, b, live)
        log = broker_disk.read_log(p.tables_dir, p.log_version, b, cols, future=False).to_pandas()
        parts.append(_load(disk, log[log["log_dir"].isin(live)], "outer"))
        fdisk = broker_disk.read_disk(p.brokers_dir, b, live, future=True)
        if len(fdisk):
            flog = broker_disk.read_log(p.tables_dir, p.log_version, b, cols, future=True).to_pandas()
            fparts.append(_load(fdisk, flog[flog["log_dir"].isin(live)], "left"))
    d = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if d.empty:
        return F.empty(F.REPLICA), F.empty(F.FUTURE)
    r = F.new_replicas(d)
    has = np.flatnonzero(r["epoch_cache"].str.len().to_numpy() > 0)
    r = leader_epoch.on_truncate(r, has, r["leo"].to_numpy()[has])
    fd = pd.concat(fparts, ignore_index=True) if fparts else pd.DataFrame()
    if fd.empty:
        return r, F.empty(F.FUTURE)
    fd = fd[F.locate(r, fd) >= 0]
    fl = F.new_replicas(fd)
    has = np.flatnonzero(fl["epoch_cache"].str.len().to_numpy() > 0)
    fl = leader_epoch.on_truncate(fl, has, fl["leo"].to_numpy()[has])
    fut = alter_log_dirs.new_futures(fl[["broker", "topic", "partition", "log_dir", "leo", "hw", "log_start_offset",
                                         "recovery_point", "last_fetched_epoch", "epoch_cache"]].assign(
        fetch_state=F.FUTURE_IDLE, fetch_offset=fl["hw"].to_numpy()))
    return r, fut


def _write_log(p: RoundParams, a: pd.DataFrame) -> list[dict]:
    """Append the round's new records (RECORD rows with their log_dir and is_future) to the log table,
    one file per (broker, log_dir)."""
    if a.empty:
        return []
    a = a.sort_values(["broker", "log_dir", "topic", "partition", "offset"], kind="stable")
    n = len(a)
    t = pa.table({
        "topic": pa.array(a["topic"], pa.string()), "partition": pa.array(a["partition"], pa.int32()),
        "offset": pa.array(a["offset"], pa.int64()), "leader_epoch": pa.array(a["leader_epoch"], pa.int32()),
        "record_id": pa.array(a["record_id"], pa.int64()), "key": pa.array(a["key"], pa.string()),
        "value": pa.nulls(n, pa.binary()), "value_bytes": pa.array(a["value_bytes"], pa.int32()),
        "timestamp": pa.array(a["timestamp"], pa.int64()),
        "is_future": pa.array(a["is_future"].to_numpy(dtype=bool)),
        "append_ms": pa.array(np.full(n, p.now), pa.int64()),
    })
    # one file per (broker, log_dir): rows are sorted, so each is one contiguous slice
    bro, dirs = a["broker"].to_numpy(), pd.factorize(a["log_dir"])[0]
    starts = np.flatnonzero(np.r_[True, (bro[1:] != bro[:-1]) | (dirs[1:] != dirs[:-1])])
    ends = np.r_[starts[1:], n]
    adds = []
    for lo, hi in zip(starts, ends, strict=True):
        b, d = int(a["broker"].iat[lo]), a["log_dir"].iat[lo]
        adds.append(write_file(p.tables_dir, "log", t.slice(lo, hi - lo), f"{p.round_no:08d}-b{b}",
                               {"broker": b, "log_dir": d}))
    return adds


def _log_rows(replicas: pd.DataFrame, futures: pd.DataFrame, appended: pd.DataFrame, copied: pd.DataFrame,
              swaps: pd.DataFrame) -> pd.DataFrame:
    """The round's records for the log table: what replicas appended, in their dirs, and what the movers
    copied into future logs (is_future). A log swapped in this round holds its records from the future
    log's copy, written as current records; the old log's appends of this round are not written."""
    if len(swaps):
        appended = appended[F.locate(swaps, appended) < 0]
    cur = appended.assign(log_dir=replicas["log_dir"].to_numpy()[F.locate(replicas, appended)], is_future=False)
    if copied.empty:
        return cur
    fpos, spos = F.locate(futures, copied), F.locate(swaps, copied)
    fut = copied.assign(log_dir=np.where(fpos >= 0, F.take(futures, "log_dir", fpos, None),
                                         F.take(swaps, "log_dir", spos, None)), is_future=fpos >= 0)
    return pd.concat([cur, fut], ignore_index=True)


def _history(p: RoundParams, tag: str, replicas: pd.DataFrame, remotes: pd.DataFrame,
             results: pd.DataFrame, lines: pd.DataFrame) -> list[dict]:
    """This round's rows of replica_state, follower_state, produce_results and state_change_log."""
    adds = []
    if len(replicas):
        r = replicas.sort_values(["topic", "partition", "broker"])
        role = np.where(r["leader"] == r["broker"], "leader", np.where(r["leader"] >= 0, "follower", "none"))
        t = pa.Table.from_pandas(r.assign(round=p.round_no, time_ms=p.now, role=role)[
            SCHEMAS["replica_state"].names], preserve_index=False)
        adds.append(write_file(p.tables_dir, "replica_state", t.cast(SCHEMAS["replica_state"]), tag))
    if len(remotes):
        r = remotes.sort_values(["topic", "partition", "replica"])
        t = pa.Table.from_pandas(r.assign(round=p.round_no, time_ms=p.now).rename(columns={"leo": "remote_leo"})[
            SCHEMAS["follower_state"].names], preserve_index=False)
        adds.append(write_file(p.tables_dir, "follower_state", t.cast(SCHEMAS["follower_state"]), tag))
    if len(results):
        t = expand_results(results)
        adds.append(write_file(p.tables_dir, "produce_results", t, tag))
    if len(lines):
        t = pa.Table.from_pandas(lines.assign(time_ms=p.now)[SCHEMAS["state_change_log"].names], preserve_index=False)
        adds.append(write_file(p.tables_dir, "state_change_log", t.cast(SCHEMAS["state_change_log"]), tag))
    return adds


def expand_results(results: pd.DataFrame) -> pa.Table:
    """One produce_results row per record of each answered batch."""
    n = results["count"].to_numpy().astype("int64")
    rep = results.loc[results.index.repeat(n)].reset_index(drop=True)
    within = np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)
    base = rep["base_offset"].to_numpy()
    off = pd.array(np.where(base >= 0, base + within, 0), dtype="Int64")
    off[base < 0] = pd.NA
    df = pd.DataFrame({
        "time_ms": rep["time_ms"], "topic": rep["topic"], "partition": rep["partition"],
        "record_id": rep["record_id"].to_numpy() + within, "acks": rep["acks"], "offset": off,
        "error": rep["error"], "acked": rep["acked"].astype(bool),
    })
    return pa.Table.from_pandas(df, preserve_index=False).cast(SCHEMAS["produce_results"])


def _checkpoint_hw(p: RoundParams, replicas: pd.DataFrame, brokers: pd.DataFrame,
                   force: set[int] = frozenset()) -> pd.DataFrame:
    """Write replication-offset-checkpoint for brokers whose interval has passed (and, at a clean
    shutdown, for the brokers stopping)."""
    interval = p.cfg["replica.high.watermark.checkpoint.interval.ms"]
    due = brokers["hw_checkpoint_ms"].to_numpy() + interval <= p.now
    due |= brokers["hw_checkpoint_ms"].to_numpy() < 0
    due |= brokers["broker"].isin(list(force)).to_numpy()
    for b in brokers.loc[due, "broker"]:
        mine = replicas[replicas["broker"] == b]
        for d in p.log_dirs:
            sel = mine[mine["log_dir"] == d]
            broker_disk.write_hw_checkpoint(p.brokers_dir, b, d, zip(sel["topic"], sel["partition"], sel["hw"], strict=True))
    out = brokers.copy()
    out.loc[due, "hw_checkpoint_ms"] = p.now
    return out


def _flush(p: RoundParams, replicas: pd.DataFrame, before: pd.DataFrame, found: np.ndarray,
           stopping: set[int]) -> pd.DataFrame:
    """Kafka's flush rules (protocol/flush.py) and a clean shutdown's flush of every log; the dirs whose
    flushed offsets moved, or were cut by a truncation, get their flushed-offsets file rewritten."""
    force = replicas["broker"].isin(list(stopping)).to_numpy()
    replicas, _ = flush.maybe_flush(replicas, p.cfg.get("topic_flush", {}), p.now, force)
    old = F.take(before, "recovery_point", found, -1)
    moved = replicas["recovery_point"].to_numpy() != old
    for b, d in sorted(set(zip(replicas["broker"].to_numpy()[moved], replicas["log_dir"].to_numpy()[moved], strict=True))):
        sel = replicas[(replicas["broker"] == b) & (replicas["log_dir"] == d)]
        broker_disk.write_flushed(p.brokers_dir, int(b), d,
                                  zip(sel["topic"], sel["partition"], sel["recovery_point"], strict=True))
    return replicas


def _checkpoint_epochs(p: RoundParams, before: pd.DataFrame, found: np.ndarray, replicas: pd.DataFrame) -> None:
    """Rewrite leader-epoch-checkpoint for every replica whose cache changed this round."""
    old = F.take(before, "epoch_cache", found, None)
    new = replicas["epoch_cache"].to_numpy()
    changed = np.flatnonzero((new != old) & ((new != "") | pd.notna(old)))  # a new log's empty cache needs no file
    cols = [replicas[c].to_numpy()[changed] for c in ("broker", "log_dir", "topic", "partition")]
    for b, d, t, part, text in zip(*cols, new[changed], strict=True):
        broker_disk.write_epoch_checkpoint(p.brokers_dir, int(b), d, t, int(part), leader_epoch.decode(text))


def _record_logs(p: RoundParams, before: pd.DataFrame, after: pd.DataFrame) -> None:
    """Rewrite a dir's `partitions` listing when logs were created in it or deleted from it."""
    key = ["broker", "log_dir", "topic", "partition"]
    old = set(map(tuple, before[key].to_numpy().tolist()))
    new = set(map(tuple, after[key].to_numpy().tolist()))
    changed = {(b, d) for b, d, _, _ in old ^ new}
    for b, d in sorted(changed):
        sel = after[(after["broker"] == b) & (after["log_dir"] == d)]
        broker_disk.write_partitions(p.brokers_dir, b, d, zip(sel["topic"], sel["partition"], strict=True))


class _Laps:
    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self.t = time.perf_counter()

    def lap(self, name: str) -> None:
        t = time.perf_counter()
        self.laps[name] = self.laps.get(name, 0.0) + t - self.t
        self.t = t


def process(p: RoundParams, wire: pd.DataFrame) -> pd.DataFrame:
    """Run one round for every broker present in `wire`; return the output wire rows."""
    wire = wire[wire["kind"].isin(W.CARRY_KINDS).to_numpy()]  # last round's rows for the driver ride along
    paused = wire["broker"].isin(list(p.paused)).to_numpy() if p.paused else np.zeros(len(wire), bool)
    held = wire[paused]
    wire = wire[~paused]
    cfg, prof = p.cfg, p.cfg["profile"]
    sw = _Laps()
    k = W.split(wire)
    replicas, remotes, tail, brokers = k[W.REPLICA], k[W.REMOTE], k[W.TAIL], k[W.BROKER]
    wire_replicas = replicas  # as the round found them: what the disk files already say

    starting = sorted(set(k[W.START]["broker"].tolist()))
    if starting:
        replicas = F.concat([replicas, _recover(p, starting)], F.REPLICA)
        brokers = F.concat([brokers, new_broker_rows(starting)], F.BROKER)
    # controller requests, in the order the controller's channel sends them (7.3)
    brokers = controller_requests.update_metadata(brokers, k[W.UPDATE_METADATA])
    before = replicas
    replicas, remotes, brokers, lines = become_leader_or_follower(
        replicas, remotes, brokers, k[W.LEADER_AND_ISR], list(p.log_dirs), p.now)
    cuts = truncation.no_cuts()
    if len(k[W.LEADER_AND_ISR]):
        replicas, cuts = truncation.on_leader_and_isr(before, replicas, prof)
    replicas, remotes, deleted, stop_lines = controller_requests.stop_replicas(
        replicas, remotes, brokers, k[W.STOP_REPLICA])
    cuts = pd.concat([cuts, deleted.assign(offset=0)], ignore_index=True) if len(deleted) else cuts
    tail = truncation.drop_cut_records(tail, cuts)
    if len(k[W.LEADER_AND_ISR]) or len(deleted):
        _record_logs(p, before, replicas)
    sw.lap("controller_requests")

    replicas, remotes, counts = isr.apply_isr_results(replicas, remotes, k[W.ISR_RESULT], p.now)
    if counts["isr_shrinks"]:  # followers that no longer count may let the HW advance (4.3)
        replicas = maybe_increment_leader_hw(replicas, remotes, prof, cfg["replica.lag.time.max.ms"], p.now)
    replicas, epoch_cuts = offsets_for_leader_epoch.apply_answers(replicas, k[W.EPOCH_RESPONSE], p.now, cfg)
    replicas, appended_f, fetch_cuts, halts = fetch.apply_fetch_responses(
        replicas, k[W.FETCH_RESPONSE], k[W.FETCH_RECORD], p.now, cfg)
    cuts = pd.concat([c for c in (cuts, epoch_cuts, fetch_cuts) if len(c)] or [cuts], ignore_index=True)
    min_isr = pd.Series(p.min_isr, dtype="int64")
    replicas, appended_l, results, pending_new = produce.append_to_leader(
        replicas, remotes, k[W.PRODUCE], min_isr, p.now, cfg)
    tail = F.concat([tail, appended_l], F.RECORD)
    sw.lap("fetch_response_and_produce")

    requests, parked = k[W.FETCH], k[W.PARKED_FETCH]
    log = tail
    misses = fetch.tail_misses(F.concat([requests, parked], F.FETCH), tail, replicas,
                               cfg["emulator.read.max.records"])
    if len(misses):
        log = F.concat([tail, _read_misses(p, misses)], F.RECORD)
    sw.lap("storage_reads")
    replicas, remotes, responses, resp_records, parked = fetch.serve_fetch(
        replicas, remotes, log, requests, parked, p.now, cfg)
    epoch_answers = offsets_for_leader_epoch.answer(replicas, k[W.EPOCH_REQUEST], prof)
    replicas, remotes, expand = isr.maybe_expand_isr(replicas, remotes, p.now, prof)
    replicas, shrink = isr.maybe_shrink_isr(replicas, remotes, p.now, cfg, prof)

    pending, done = produce.complete_delayed_produce(
        replicas, F.concat([k[W.PENDING_PRODUCE], pending_new], F.PENDING), min_isr, p.now)
    results = F.concat([results, done], F.RESULT)
    replicas, new_requests, epoch_requests = fetch.fetch_requests(replicas, p.now, p.unreachable, cfg)
    tail = fetch.trim_tail(tail, replicas, remotes, cfg["emulator.tail.records"])
    sw.lap("serve_fetch")
    stopping = set(k[W.SHUTDOWN]["broker"].tolist())
    halted = set(halts["broker"].tolist())
    if halted:  # a broker that exits (pre-2.1 out-of-range) loses its memory as in a crash
        lines = pd.concat([lines, halts.assign(controller_epoch=-1)[lines.columns]], ignore_index=True)
    brokers = _checkpoint_hw(p, replicas, brokers, force=stopping)
    found = F.locate(wire_replicas, replicas)  # each replica's row as the round found it
    replicas = _flush(p, replicas, wire_replicas, found, stopping)
    _checkpoint_epochs(p, wire_replicas, found, replicas)

    adds = _write_log(p, F.concat([appended_f, appended_l], F.RECORD), replicas)
    adds += _truncate(p, cuts)
    if p.write_history and (len(wire) or len(held)):
        # a paused broker's replicas are still there, unchanged: they keep their history rows
        hk = W.split(held) if len(held) else {W.REPLICA: F.empty(F.REPLICA), W.REMOTE: F.empty(F.REMOTE)}
        tag = f"{p.round_no:08d}-t{int(pd.concat([wire['broker'], held['broker']]).min())}"
        adds += _history(p, tag, F.concat([replicas, hk[W.REPLICA]], F.REPLICA),
                         F.concat([remotes, hk[W.REMOTE]], F.REMOTE), results,
                         pd.concat([lines, stop_lines], ignore_index=True))
    sw.lap("write_files")
    gauges = isr.isr_gauges(replicas, min_isr)
    summary = {"timings": sw.laps, "storage_reads": len(misses), "halted": sorted(int(b) for b in halted), **{k_: int(v) for k_, v in counts.items()},
               **{g: int(gauges[g].sum()) for g in ("under_replicated", "under_min_isr", "at_min_isr")}}
    parts = [
        (W.REPLICA, replicas), (W.REMOTE, remotes), (W.TAIL, tail), (W.BROKER, brokers),
        (W.PARKED_FETCH, parked), (W.PENDING_PRODUCE, pending),
        (W.FETCH, new_requests), (W.FETCH_RESPONSE, responses), (W.FETCH_RECORD, resp_records),
        (W.ISR_CHANGE, F.concat([expand, shrink], F.ISR_CHANGE)),
        (W.EPOCH_REQUEST, epoch_requests), (W.EPOCH_RESPONSE, epoch_answers),
    ]
    if stopping or halted:  # a broker shutting down or exiting keeps nothing in memory and sends nothing more
        gone = list(stopping | halted)
        parts = [(kind, f[~f["broker" if kind not in W.MESSAGE_KINDS else "src"].isin(gone)])
                 for kind, f in parts]
    out = W.pack_all([*parts,
                      (W.ADD, pd.DataFrame({"broker": -1, "payload": [json.dumps(a) for a in adds]})),
                      (W.RESULT_SUMMARY, pd.DataFrame([{"broker": -1, "payload": json.dumps(summary)}]))])
    return pd.concat([out, held], ignore_index=True) if len(held) else out


def _truncate(p: RoundParams, cuts: pd.DataFrame) -> list[dict]:
    """Remove cut records from the brokers' Delta logs (add and remove actions for the commit)."""
    actions = []
    for b, g in cuts.groupby("broker"):
        adds, removes = log_truncation.truncate(p.tables_dir, p.log_version, int(b), g,
                                                f"trunc-{p.round_no:08d}-b{int(b)}")
        actions += adds + [{**r, "remove": True} for r in removes]
    return actions


def _read_misses(p: RoundParams, misses: pd.DataFrame) -> pd.DataFrame:
    """Records lagging followers need that the leader's tail no longer holds, read from its log."""
    parts = []
    for b, g in misses.groupby("broker"):
        t = broker_disk.read_log(p.tables_dir, p.log_version, int(b),
                                 ["broker", "topic", "partition", "offset", "leader_epoch", "record_id",
                                  "value_bytes", "key", "timestamp"], g.drop(columns=["broker"]))
        parts.append(t.to_pandas().assign(src=int(b)))
    return F.concat(parts, F.RECORD)


class BrokerRound:
    """The picklable function given to mapInPandas."""

    def __init__(self, params: RoundParams) -> None:
        self.params = params

    def __call__(self, batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        frames = [b for b in batches if len(b)]
        if not frames:
            return
        wire = pd.concat(frames, ignore_index=True)
        yield process(self.params, wire)
