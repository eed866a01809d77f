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
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from ..protocol import (
    alter_log_dirs,
    controller_requests,
    fetch,
    flush,
    idle,
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
from ..protocol.rules import rules_of
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
    cfg: Mapping  # protocol.config.RoundConfig (plain dicts in unit tests)
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


def _dir_entries(replicas: pd.DataFrame, futures: pd.DataFrame, b: int, d: str, col: str) -> list[tuple]:
    """(topic, partition, value) of every log in one dir of a broker, current and future (a partition has
    at most one log per dir)."""
    out = []
    for f in (replicas, futures):
        sel = f[(f["broker"] == b) & (f["log_dir"] == d)]
        out += list(zip(sel["topic"], sel["partition"], sel[col], strict=True))
    return out


def _live_dirs(p: RoundParams, b: int) -> list[str]:
    gone = p.offline_dirs.get(int(b), ())
    return [d for d in p.log_dirs if d not in gone]


def _checkpoint_hw(p: RoundParams, replicas: pd.DataFrame, futures: pd.DataFrame, brokers: pd.DataFrame,
                   force: set[int] = frozenset()) -> pd.DataFrame:
    """Write replication-offset-checkpoint (the HW of every current and future log in the dir) for
    brokers whose interval has passed (and, at a clean shutdown or a log-dir move's swap, for the
    brokers concerned). A failed dir is not written."""
    interval = p.cfg["replica.high.watermark.checkpoint.interval.ms"]
    due = brokers["hw_checkpoint_ms"].to_numpy() + interval <= p.now
    due |= brokers["hw_checkpoint_ms"].to_numpy() < 0
    due |= brokers["broker"].isin(list(force)).to_numpy()
    for b in brokers.loc[due, "broker"]:
        for d in _live_dirs(p, b):
            broker_disk.write_hw_checkpoint(p.brokers_dir, b, d, _dir_entries(replicas, futures, b, d, "hw"))
    out = brokers.copy()
    out.loc[due, "hw_checkpoint_ms"] = p.now
    return out


def _flush(p: RoundParams, replicas: pd.DataFrame, before: pd.DataFrame, found: np.ndarray,
           stopping: set[int], futures: pd.DataFrame, touched: set[tuple[int, str]] = frozenset()
           ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Kafka's flush rules (protocol/flush.py) and a clean shutdown's flush of every log, future logs
    included; the dirs whose flushed offsets moved, or were cut by a truncation, or gained or lost a log
    by a move (`touched`), get their flushed-offsets file rewritten. Returns (replicas, futures)."""
    force = replicas["broker"].isin(list(stopping)).to_numpy()
    replicas, _ = flush.maybe_flush(replicas, p.cfg.get("topic_flush", {}), p.now, force)
    old = F.take(before, "recovery_point", found, -1)
    moved = replicas["recovery_point"].to_numpy() != old
    dirs = set(zip(replicas["broker"].to_numpy()[moved], replicas["log_dir"].to_numpy()[moved], strict=True))
    if stopping and len(futures):
        stop_f = futures["broker"].isin(list(stopping)).to_numpy() & (futures["recovery_point"] < futures["leo"]).to_numpy()
        if stop_f.any():
            futures = futures.copy()
            futures.loc[stop_f, "recovery_point"] = futures.loc[stop_f, "leo"]
            dirs |= set(zip(futures["broker"].to_numpy()[stop_f], futures["log_dir"].to_numpy()[stop_f], strict=True))
    for b, d in sorted(dirs | set(touched)):
        if d in p.offline_dirs.get(int(b), ()):
            continue
        broker_disk.write_flushed(p.brokers_dir, int(b), d, _dir_entries(replicas, futures, b, d, "recovery_point"))
    return replicas, futures


def _checkpoint_epochs(p: RoundParams, before: pd.DataFrame, found: np.ndarray, replicas: pd.DataFrame,
                       future: bool = False) -> None:
    """Rewrite leader-epoch-checkpoint for every log (`future`: future log) whose cache changed this round."""
    old = F.take(before, "epoch_cache", found, None)
    new = replicas["epoch_cache"].to_numpy()
    changed = np.flatnonzero((new != old) & ((new != "") | pd.notna(old)))  # a new log's empty cache needs no file
    cols = [replicas[c].to_numpy()[changed] for c in ("broker", "log_dir", "topic", "partition")]
    for b, d, t, part, text in zip(*cols, new[changed], strict=True):
        broker_disk.write_epoch_checkpoint(p.brokers_dir, int(b), d, t, int(part), leader_epoch.decode(text), future)


def _record_logs(p: RoundParams, before: pd.DataFrame, after: pd.DataFrame, future: bool = False) -> None:
    """Rewrite a dir's `partitions` listing (`future`: `future-partitions`) when logs were created in it
    or deleted from it. A failed dir is not written."""
    key = ["broker", "log_dir", "topic", "partition"]
    old = set(map(tuple, before[key].to_numpy().tolist()))
    new = set(map(tuple, after[key].to_numpy().tolist()))
    changed = {(b, d) for b, d, _, _ in old ^ new}
    for b, d in sorted(changed):
        if d in p.offline_dirs.get(int(b), ()):
            continue
        sel = after[(after["broker"] == b) & (after["log_dir"] == d)]
        broker_disk.write_partitions(p.brokers_dir, b, d, zip(sel["topic"], sel["partition"], strict=True), future)


def _move_files(p: RoundParams, replicas: pd.DataFrame, swaps: pd.DataFrame, dropped: pd.DataFrame) -> None:
    """A move's swap on the broker's files: the log's leader-epoch-checkpoint in its new dir, the old log's
    and the future log's folders removed; dropped (cancelled, deleted) future logs' folders removed."""
    at = F.locate(replicas, swaps)
    for (b, t, part, old, new), i in zip(swaps[alter_log_dirs.SWAPS].itertuples(index=False), at, strict=True):
        broker_disk.write_epoch_checkpoint(p.brokers_dir, int(b), new, t, int(part),
                                           leader_epoch.decode(replicas["epoch_cache"].iat[i]))
        broker_disk.remove_log_files(p.brokers_dir, int(b), old, t, int(part))
        broker_disk.remove_log_files(p.brokers_dir, int(b), new, t, int(part), future=True)
    for b, t, part, d in dropped[alter_log_dirs.LOGS].itertuples(index=False):
        broker_disk.remove_log_files(p.brokers_dir, int(b), d, t, int(part), future=True)


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
    cfg, rules = p.cfg, rules_of(p.cfg)
    sw = _Laps()
    k = W.split(wire)
    replicas, remotes, tail, brokers = k[W.REPLICA], k[W.REMOTE], k[W.TAIL], k[W.BROKER]
    futures, preferred, offline = k[W.FUTURE], k[W.PREFERRED_DIR], k[W.OFFLINE]
    wire_replicas, wire_futures = replicas, futures  # as the round found them: what the disk files already say

    starting = sorted(set(k[W.START]["broker"].tolist()))
    if starting:
        rec_r, rec_f = _recover(p, starting)
        replicas = F.concat([replicas, rec_r], F.REPLICA)
        futures = F.concat([futures, rec_f], F.FUTURE)
        brokers = F.concat([brokers, new_broker_rows(starting)], F.BROKER)
    # failed log dirs (KIP-112, 9.5): their replicas go offline, their future logs are dropped
    offline_dirs = log_dir_failure.offline_dirs_now(p.offline_dirs, k[W.LOG_DIR_FAILURE])
    replicas, remotes, futures, offline, tail, offline_new, dir_halts = log_dir_failure.fail_log_dirs(
        replicas, remotes, futures, offline, tail, offline_dirs, p.log_dirs, rules, brokers["broker"].tolist())
    listed_r, listed_f = replicas, futures  # the logs the dirs' listings hold
    # controller requests, in the order the controller's channel sends them (7.3), after the admin's
    # AlterReplicaLogDirs (KIP-113, 9.1)
    brokers = controller_requests.update_metadata(brokers, k[W.UPDATE_METADATA])
    futures, preferred, alter_answers, cancelled = alter_log_dirs.alter_replica_log_dirs(
        k[W.ALTER_LOG_DIRS], replicas, futures, preferred, offline, p.log_dirs, offline_dirs, rules)
    before = replicas
    lai, offline, lai_offline = log_dir_failure.screen_leader_and_isr(
        k[W.LEADER_AND_ISR], replicas, offline, brokers, offline_dirs, p.log_dirs, preferred)
    replicas, remotes, brokers, lines = become_leader_or_follower(
        replicas, remotes, brokers, lai, list(p.log_dirs), p.now,
        offline_dirs=offline_dirs, preferred=preferred, futures=futures)
    preferred = alter_log_dirs.forget_preferences(preferred, replicas)
    cuts = truncation.no_cuts()
    if len(k[W.LEADER_AND_ISR]):
        replicas, cuts = truncation.on_leader_and_isr(before, replicas, rules)
        futures = alter_log_dirs.on_leader_and_isr(futures, replicas, lai)
    replicas, remotes, deleted, stop_lines = controller_requests.stop_replicas(
        replicas, remotes, brokers, k[W.STOP_REPLICA])
    futures, f_dropped = alter_log_dirs.on_stop_replica(futures, replicas, k[W.STOP_REPLICA])
    cuts = pd.concat([cuts, deleted.assign(offset=0)], ignore_index=True) if len(deleted) else cuts
    tail = truncation.drop_cut_records(tail, cuts)
    sw.lap("controller_requests")

    replicas, remotes, counts = isr.apply_isr_results(replicas, remotes, k[W.ISR_RESULT], p.now)
    if counts["isr_shrinks"]:  # followers that no longer count may let the HW advance (4.3)
        replicas = maybe_increment_leader_hw(replicas, remotes, rules, cfg["replica.lag.time.max.ms"], p.now)
    replicas, epoch_cuts = offsets_for_leader_epoch.apply_answers(replicas, k[W.EPOCH_RESPONSE], p.now, cfg)
    replicas, appended_f, fetch_cuts, halts = fetch.apply_fetch_responses(
        replicas, k[W.FETCH_RESPONSE], k[W.FETCH_RECORD], p.now, cfg)
    cuts = pd.concat([c for c in (cuts, epoch_cuts, fetch_cuts) if len(c)] or [cuts], ignore_index=True)
    min_isr = pd.Series(p.min_isr, dtype="int64")
    replicas, appended_l, results, pending_new = produce.append_to_leader(
        replicas, remotes, k[W.PRODUCE], min_isr, p.now, cfg, offline=offline)
    tail = F.concat([tail, appended_l], F.RECORD)
    halts = pd.concat([h for h in (halts, dir_halts) if len(h)] or [halts], ignore_index=True)
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
    epoch_answers = offsets_for_leader_epoch.answer(replicas, k[W.EPOCH_REQUEST], rules)
    replicas, remotes, expand = isr.maybe_expand_isr(replicas, remotes, p.now, rules)
    replicas, shrink = isr.maybe_shrink_isr(replicas, remotes, p.now, cfg, rules)

    pending, done = produce.complete_delayed_produce(
        replicas, F.concat([k[W.PENDING_PRODUCE], pending_new], F.PENDING), min_isr, p.now, offline=offline)
    results = F.concat([results, done], F.RESULT)
    replicas, new_requests, epoch_requests = fetch.fetch_requests(replicas, p.now, p.unreachable, cfg)
    sw.lap("serve_fetch")
    # the log-dir movers (ReplicaAlterLogDirsThread, 9.2) copy from the current logs as they now are
    replicas, futures, copied, swaps, future_cuts = _movers(
        p, replicas, futures, F.concat([tail, appended_f], F.RECORD), cuts)
    tail = fetch.trim_tail(tail, replicas, remotes, cfg["emulator.tail.records"])
    sw.lap("log_dir_movers")
    stopping = set(k[W.SHUTDOWN]["broker"].tolist())
    halted = set(halts["broker"].tolist())
    if stopping or halted:  # its open produce requests are answered by the dropped connection
        dropped = pending["broker"].isin(list(stopping | halted))
        results = F.concat([results, produce.disconnect(pending[dropped], p.now)], F.RESULT)
    if halted:  # a broker that exits (pre-2.1 out-of-range) loses its memory as in a crash
        lines = pd.concat([lines, halts.assign(controller_epoch=-1)[lines.columns]], ignore_index=True)
    brokers = _checkpoint_hw(p, replicas, futures, brokers, force=stopping | set(swaps["broker"].astype(int)))
    found = F.locate(wire_replicas, replicas)  # each replica's row as the round found it
    moved_dirs = set(zip(swaps["broker"], swaps["old_dir"], strict=True)) | set(
        zip(swaps["broker"], swaps["log_dir"], strict=True))
    replicas, futures = _flush(p, replicas, wire_replicas, found, stopping, futures, moved_dirs)
    _checkpoint_epochs(p, wire_replicas, found, replicas)
    _checkpoint_epochs(p, wire_futures, F.locate(wire_futures, futures), futures, future=True)
    dropped_f = pd.concat([f for f in (cancelled, f_dropped) if len(f)] or [cancelled], ignore_index=True)
    _move_files(p, replicas, swaps, dropped_f)
    if len(k[W.LEADER_AND_ISR]) or len(deleted) or len(swaps):
        _record_logs(p, listed_r, replicas)
    _record_logs(p, listed_f, futures, future=True)

    adds = _write_log(p, _log_rows(replicas, futures, F.concat([appended_f, appended_l], F.RECORD), copied, swaps))
    future_cuts = pd.concat([future_cuts, alter_log_dirs.dir_cuts(dropped_f),
                             alter_log_dirs.dir_cuts(swaps[["broker", "topic", "partition", "old_dir"]].rename(
                                 columns={"old_dir": "log_dir"}))], ignore_index=True)
    adds += _truncate(p, pd.concat([c for c in (cuts, future_cuts) if len(c)] or [cuts], ignore_index=True),
                      swaps[["broker", "log_dir", "topic", "partition"]])
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
    if cfg.get("emulator.idle.jump"):  # quiescence, for the driver's idle jump (protocol/idle.py)
        others = [epoch_requests, epoch_answers, expand, shrink, offline_new, lai_offline, alter_answers, halts]
        summary.update(idle.quiescence(replicas, remotes, parked, pending, futures, brokers, new_requests, responses,
                                       resp_records, sum(map(len, others)) + len(stopping), p.now, cfg, p.unreachable))
    parts = [
        (W.REPLICA, replicas), (W.REMOTE, remotes), (W.TAIL, tail), (W.BROKER, brokers),
        (W.PARKED_FETCH, parked), (W.PENDING_PRODUCE, pending),
        (W.FETCH, new_requests), (W.FETCH_RESPONSE, responses), (W.FETCH_RECORD, resp_records),
        (W.ISR_CHANGE, F.concat([expand, shrink], F.ISR_CHANGE)),
        (W.EPOCH_REQUEST, epoch_requests), (W.EPOCH_RESPONSE, epoch_answers),
        (W.FUTURE, futures), (W.PREFERRED_DIR, preferred), (W.OFFLINE, offline),
        (W.OFFLINE_REPLICA, F.concat([offline_new, lai_offline], F.OFFLINE_REPLICA)),
        (W.ALTER_LOG_DIRS_RESPONSE, alter_answers),
    ]
    if stopping or halted:  # a broker shutting down or exiting keeps nothing in memory and sends nothing more
        gone = list(stopping | halted)
        parts = [(kind, f[~f["broker" if kind not in W.MESSAGE_KINDS else "src"].isin(gone)])
                 for kind, f in parts]
    out = W.pack_all([*parts,
                      (W.ADD, pd.DataFrame({"broker": -1, "payload": [json.dumps(a) for a in adds]})),
                      (W.RESULT_SUMMARY, pd.DataFrame([{"broker": -1, "payload": json.dumps(summary)}]))])
    return pd.concat([out, held], ignore_index=True) if len(held) else out


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


def _movers(p: RoundParams, replicas: pd.DataFrame, futures: pd.DataFrame, mem: pd.DataFrame, cuts: pd.DataFrame
            ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """One round of every broker's ReplicaAlterLogDirsThreads (protocol/alter_log_dirs.py): truncation
    after the current logs' cuts, then one copy per thread from the current logs (`mem`: the records the
    brokers hold in memory, the rest read from storage), then the swaps.
    Returns (replicas, futures, copied records, swaps, cuts of future logs)."""
    if futures.empty:
        return replicas, futures, F.empty(F.RECORD), pd.DataFrame(columns=alter_log_dirs.SWAPS), truncation.no_cuts()
    rules = rules_of(p.cfg)
    futures = alter_log_dirs.mark_for_truncation(futures, cuts)
    futures, c1 = alter_log_dirs.truncate_futures(futures, replicas, rules)
    futures, c2 = alter_log_dirs.out_of_range(futures, replicas)
    threads = alter_log_dirs.thread_count(p.cfg, p.log_dirs)
    futures, selected = alter_log_dirs.select_for_copy(futures, replicas, threads)
    ranges = alter_log_dirs.copy_ranges(futures, replicas, selected, p.cfg["emulator.read.max.records"])
    records = _current_records(p, ranges, mem)
    budgets = {int(b): alter_log_dirs.round_budget(p.cfg, int(b)) for b in set(futures["broker"])}
    futures, copied = alter_log_dirs.append_copies(futures, replicas, records, selected, threads,
                                                   p.cfg["replica.fetch.max.bytes"], budgets, rules)
    replicas, futures, swaps = alter_log_dirs.swap(replicas, futures, selected)
    return replicas, futures, copied, swaps, pd.concat([c1, c2], ignore_index=True)


def _current_records(p: RoundParams, ranges: pd.DataFrame, mem: pd.DataFrame) -> pd.DataFrame:
    """The current logs' records in `ranges` (broker, topic, partition, from_offset, to_offset): those in
    memory (`mem`), the others read from storage (current rows only)."""
    if ranges.empty:
        return F.empty(F.RECORD)
    key = ["broker", "topic", "partition"]
    m = mem.merge(ranges, on=key)
    m = m[(m["offset"] >= m["from_offset"]) & (m["offset"] < m["to_offset"])]
    start = m.groupby(key)["offset"].min().rename("_ms").reset_index()
    q = ranges.merge(start, on=key, how="left")
    q["to_offset"] = np.minimum(q["to_offset"], q["_ms"].fillna(q["to_offset"]).astype("int64"))
    q = q[q["to_offset"] > q["from_offset"]]
    parts = [F.conform(m, F.RECORD)]
    for b, g in q.groupby("broker"):
        t = broker_disk.read_log(p.tables_dir, p.log_version, int(b),
                                 ["broker", "topic", "partition", "offset", "leader_epoch", "record_id",
                                  "value_bytes", "key", "timestamp"],
                                 g[["topic", "partition", "from_offset", "to_offset"]], future=False)
        parts.append(t.to_pandas().assign(src=int(b)))
    return F.concat(parts, F.RECORD)


def _read_misses(p: RoundParams, misses: pd.DataFrame) -> pd.DataFrame:
    """Records lagging followers need that the leader's tail no longer holds, read from its log."""
    parts = []
    for b, g in misses.groupby("broker"):
        t = broker_disk.read_log(p.tables_dir, p.log_version, int(b),
                                 ["broker", "topic", "partition", "offset", "leader_epoch", "record_id",
                                  "value_bytes", "key", "timestamp"], g.drop(columns=["broker"]), future=False)
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
