"""Intra-broker log-dir moves (KIP-113, Kafka 1.1+): AlterReplicaLogDirs on the broker and its
ReplicaAlterLogDirsThreads (ReplicaManager.alterReplicaLogDirs, ReplicaAlterLogDirsThread). Pure pandas: no
Spark, no Delta.

A move builds a *future log* of the partition in the destination dir of the same broker (FUTURE rows;
its records are `log` rows of (broker, dest dir) with is_future = true), filled by the broker's mover
threads from the broker's own *current* log, up to its LEO. When the future log's LEO reaches the
current LEO the two are swapped: the future log becomes the current log in the new dir (same records,
offsets and epochs), the old one is deleted.

The mover threads (`num.replica.alter.log.dirs.threads`, default: the number of log dirs) each own the
partitions the fetcher hash gives them (AbstractFetcherManager.getFetcherId). Every round, per thread:
1. partitions whose current log was truncated go back to Truncating (markPartitionsForTruncation);
2. Truncating partitions ask the *local* current log OffsetsForLeaderEpoch and truncate by the KIP-279
   rule, repeated until done (the thread loops without a network round trip);
3. the thread copies from one partition (2.3+: the one in progress while it is ready, else the ready
   partition with the smallest (topic, partition)); then the swap is tried.

Emulation choices (documented deviations):
* One fetch per thread per round: at most replica.fetch.max.bytes (at least one record) is copied per
  thread per round, so a thread moves at most that many bytes per round.ms.
* replica.alter.log.dirs.io.max.bytes.per.second is a per-round byte budget per broker, rate x round.ms /
  1000, shared by the broker's threads in thread order, never exceeded (whole records only): Kafka's
  windowed quota may overshoot by one request and then pause. A record larger than the budget never
  moves, so a rate below record size x 1000 / round.ms stalls a move.
* The 2.3+ choice of partition is used for every profile (1.1-2.2 took the largest ready partition).
* A current truncation that removes no record (truncateTo at or past the LEO) does not send the future
  log back to Truncating (Kafka does; the epoch exchange would find nothing to cut).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from . import errors, leader_epoch
from .config import LONG_MAX, RoundSettings
from .fetch import record_bytes  # the bytes a mover's copy counts, as a replica fetch counts them
from .frames import (
    ALTER_LOG_DIRS_RESPONSE,
    FETCHING,
    FUTURE,
    FUTURE_IDLE,
    KEY,
    PREFERRED_DIR,
    RECORD,
    REPLICA,
    TRUNCATING,
    array,
    concat,
    conform,
    empty,
    from_rows,
    locate,
    new_replicas,
    take,
)
from .rules import Rules, rules_for
from .truncation import CUTS, no_cuts, truncate

LOG_DIR_NOT_FOUND = "LOG_DIR_NOT_FOUND"
UNSUPPORTED_VERSION = "UNSUPPORTED_VERSION"
LOGS = ["broker", "topic", "partition", "log_dir"]  # a log: its partition on a broker, and its dir
SWAPS = ["broker", "topic", "partition", "old_dir", "log_dir"]

FUTURE_DEFAULTS = {
    "leader_epoch": -1, "leo": 0, "hw": 0, "log_start_offset": 0, "recovery_point": 0, "last_fetched_epoch": -1,
    "epoch_cache": "", "fetch_state": TRUNCATING, "fetch_offset": 0, "in_progress": False,
}


def new_futures(df: pd.DataFrame) -> pd.DataFrame:
    """FUTURE rows from a frame with at least broker, topic, partition and log_dir (the others default:
    an empty future log whose mover starts Truncating at offset 0)."""
    return conform(df.assign(**{c: v for c, v in FUTURE_DEFAULTS.items() if c not in df.columns}), FUTURE)


# ---------------------------------------------------------------------------------------------------------
# Threads and throttle
# ---------------------------------------------------------------------------------------------------------

def _java_string_hash(text: str) -> int:
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def fetcher_id(topic: str, partition: int, threads: int) -> int:
    """AbstractFetcherManager.getFetcherId: Utils.abs(31 * topic.hashCode + partition) % threads (Java ints)."""
    v = (31 * _java_string_hash(topic) + int(partition)) & 0xFFFFFFFF
    v = v - (1 << 32) if v >= 1 << 31 else v
    return (0 if v == -(1 << 31) else abs(v)) % max(int(threads), 1)


def thread_count(cfg: RoundSettings, log_dirs: Sequence[str]) -> int:
    """num.replica.alter.log.dirs.threads, default the number of log dirs."""
    n = cfg.num_replica_alter_log_dirs_threads
    return n if n is not None else max(len(log_dirs), 1)


def round_budget(cfg: RoundSettings, broker: int) -> int | None:
    """Bytes a broker's movers may copy this round: replica.alter.log.dirs.io.max.bytes.per.second x round.ms
    / 1000; None = unthrottled. The rate is the driver's cfg.quota["alter_dirs"][broker] (it lists the
    brokers with a finite rate, dynamic configs included); without cfg.quota (None), the static broker config."""
    if cfg.quota is not None:
        per_broker = cfg.quota.get("alter_dirs") or {}
        rate = per_broker.get(int(broker), per_broker.get(str(int(broker))))
    else:
        rate = cfg.replica_alter_log_dirs_io_max_bytes_per_second
    if rate is None or int(rate) >= LONG_MAX:
        return None
    return int(rate) * cfg.round_ms // 1000


# ---------------------------------------------------------------------------------------------------------
# AlterReplicaLogDirs on the broker (ReplicaManager.alterReplicaLogDirs, 9.1)
# ---------------------------------------------------------------------------------------------------------

def alter_replica_log_dirs(
    requests: pd.DataFrame, replicas: pd.DataFrame, futures: pd.DataFrame, preferred: pd.DataFrame,
    offline: pd.DataFrame, log_dirs: Sequence[str], offline_dirs: Mapping[int, Iterable[str]], rules: Rules | str,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Handle AlterReplicaLogDirs entries (broker, topic, partition, log_dir = destination), in order.

    Per entry, as Kafka 2.8: a dir that is not configured -> LOG_DIR_NOT_FOUND; an offline dir ->
    KAFKA_STORAGE_ERROR; an offline replica (its dir failed) -> KAFKA_STORAGE_ERROR. A future log in
    another dir is cancelled (its mover stopped, the log deleted). The destination is remembered for
    the partition (LogManager.preferredLogDirs) unless its current or future log is already there. No
    local replica -> UNKNOWN_TOPIC_OR_PARTITION, the preference kept: the LeaderAndIsr that creates the
    replica puts it there. [Kafka 2.8 answers NOT_LEADER_OR_FOLLOWER when its metadata
    knows the topic, REPLICA_NOT_AVAILABLE before 2.7; the emulator's brokers do not cache topics, so
    they answer as Kafka does before the topic exists.] Destination = current dir -> NONE, nothing more
    (this is how a move is cancelled). Else the future log is created in the destination (unless it is
    already there) with its mover Truncating at offset 0 (the new log's HW) at the current leader
    epoch, and the preference is used up; while any dir of the broker is offline no future log is
    created (KAFKA_STORAGE_ERROR). Before 1.1 the request does not exist (UNSUPPORTED_VERSION; the
    emulator's profiles put 0.11-1.1 together, so only profiles below 0.11 refuse it).

    Returns (futures, preferred, responses (ALTER_LOG_DIRS_RESPONSE), cancelled future logs (LOGS), whose
    records the engine deletes)."""
    if requests.empty:
        return futures, preferred, empty(ALTER_LOG_DIRS_RESPONSE), from_rows([], LOGS)
    req = requests.reset_index(drop=True)
    rpos = locate(replicas, req)
    cur_dir = take(replicas, "log_dir", rpos, None)
    cur_epoch = take(replicas, "leader_epoch", rpos, -1)
    held_offline = (locate(offline, req) >= 0) if len(offline) else np.zeros(len(req), dtype=bool)
    fpos = locate(futures, req)
    fut = {k: futures["log_dir"].iat[p] for k, p in zip(_keys(req), fpos, strict=True) if p >= 0}
    ppos = locate(preferred, req)
    pref = {k: preferred["log_dir"].iat[p] for k, p in zip(_keys(req), ppos, strict=True) if p >= 0}
    created: dict[tuple, tuple[str, int]] = {}
    cancelled: list[tuple] = []
    errs: list[str | None] = []
    supported = rules_for(rules).alter_replica_log_dirs  # KIP-113, 1.1 (our 0.11 profile holds 0.11-1.1)
    configured = set(log_dirs)
    for i, key in enumerate(_keys(req)):
        b, dest = key[0], req["log_dir"].iat[i]
        down = set(offline_dirs.get(b, ()))
        if not supported:
            errs.append(UNSUPPORTED_VERSION)
            continue
        if dest not in configured:
            errs.append(LOG_DIR_NOT_FOUND)
            continue
        if dest in down or held_offline[i]:
            errs.append(errors.KAFKA_STORAGE_ERROR)
            continue
        f_dir = fut.get(key)
        if f_dir is not None and f_dir != dest:  # futureReplicaDirChanged: stop the mover, delete the log
            cancelled.append((*key, f_dir))
            fut[key] = f_dir = None
            created.pop(key, None)
        if cur_dir[i] != dest and f_dir != dest:
            pref[key] = dest
        if cur_dir[i] is None:
            errs.append(errors.UNKNOWN_TOPIC_OR_PARTITION)
        elif cur_dir[i] == dest or f_dir == dest:
            errs.append(None)
        elif down:  # LogManager.getOrCreateLog(isNew = false) while a dir is offline
            errs.append(errors.KAFKA_STORAGE_ERROR)
        else:
            fut[key] = dest
            created[key] = (dest, int(cur_epoch[i]))
            pref.pop(key, None)
            errs.append(None)
    gone = pd.DataFrame(cancelled, columns=LOGS)
    touched = pd.DataFrame(list(dict.fromkeys(_keys(req))), columns=KEY)
    keep_f = locate(gone, futures) < 0 if len(gone) else np.ones(len(futures), dtype=bool)
    new = pd.DataFrame([(*k, d, e) for k, (d, e) in created.items()], columns=[*LOGS, "leader_epoch"])
    futures = concat([futures[keep_f], new_futures(new)], FUTURE) if len(new) else conform(futures[keep_f], FUTURE)
    kept_p = preferred[locate(touched, preferred) < 0] if len(preferred) else preferred
    now_p = pd.DataFrame([(*k, d) for k, d in pref.items()], columns=LOGS)
    preferred = concat([kept_p, now_p], PREFERRED_DIR)
    resp = conform(req.assign(error=errs), ALTER_LOG_DIRS_RESPONSE)
    return futures, preferred, resp, gone


def _keys(frame: pd.DataFrame) -> list[tuple]:
    return list(zip(frame["broker"].astype(int), frame["topic"], frame["partition"].astype(int), strict=True))


def forget_preferences(preferred: pd.DataFrame, replicas: pd.DataFrame) -> pd.DataFrame:
    """LogManager drops a partition's preferred dir once its log is created (getOrCreateLog)."""
    if preferred.empty or replicas.empty:
        return preferred
    return conform(preferred[locate(replicas, preferred) < 0], PREFERRED_DIR)


# ---------------------------------------------------------------------------------------------------------
# Control-plane effects on the movers
# ---------------------------------------------------------------------------------------------------------

def on_leader_and_isr(futures: pd.DataFrame, replicas: pd.DataFrame, entries: pd.DataFrame) -> pd.DataFrame:
    """ReplicaManager.maybeAddLogDirFetchers: a LeaderAndIsr entry applied to a partition with a future log
    (re)adds it to its mover; if the leader epoch changed (or the mover was not running: a restart, a
    StopReplica), the mover restarts Truncating at the current log's HW with the new epoch (KAFKA-9654)."""
    if futures.empty or entries.empty:
        return futures
    f = futures.reset_index(drop=True)
    pos = locate(replicas, f)
    epoch = take(replicas, "leader_epoch", pos, -1)
    epos = locate(entries.drop_duplicates(KEY), f)
    applied = (epos >= 0) & (pos >= 0) & (take(entries.drop_duplicates(KEY), "leader_epoch", epos, -2) == epoch)
    reset = applied & ((array(f, "leader_epoch") != epoch) | (array(f, "fetch_state") == FUTURE_IDLE))
    if not reset.any():
        return futures
    f.loc[reset, "fetch_state"] = TRUNCATING
    f.loc[reset, "fetch_offset"] = take(replicas, "hw", pos, 0)[reset].astype("int64")
    f.loc[reset, "leader_epoch"] = epoch[reset].astype("int32")
    f.loc[reset, "in_progress"] = False
    return conform(f, FUTURE)


def on_stop_replica(futures: pd.DataFrame, replicas: pd.DataFrame, stops: pd.DataFrame
                    ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """StopReplica removes the partition's mover (idle until a LeaderAndIsr re-adds it); a future log whose
    current log is gone (StopReplica with delete deletes both) is dropped. Returns (futures, dropped
    future logs (LOGS): the engine deletes their records)."""
    if futures.empty:
        return futures, from_rows([], LOGS)
    f = futures.reset_index(drop=True)
    hosted = locate(replicas, f) >= 0
    dropped = f.loc[~hosted, LOGS].reset_index(drop=True)
    f = f[hosted].reset_index(drop=True)
    if len(stops):
        stopped = locate(stops.drop_duplicates(KEY), f) >= 0
        f.loc[stopped, "fetch_state"] = FUTURE_IDLE
        f.loc[stopped, "in_progress"] = False
    return conform(f, FUTURE), dropped


def mark_for_truncation(futures: pd.DataFrame, cuts: pd.DataFrame) -> pd.DataFrame:
    """ReplicaAlterLogDirsManager.markPartitionsForTruncation: when the current log is truncated to x,
    its mover goes back to Truncating with fetch offset min(x, its fetch offset)."""
    if futures.empty or cuts.empty:
        return futures
    c = cuts.groupby(KEY, as_index=False)["offset"].min()
    f = futures.reset_index(drop=True)
    pos = locate(c, f)
    hit = (pos >= 0) & (array(f, "fetch_state") != FUTURE_IDLE)
    if not hit.any():
        return futures
    own = np.where(array(f, "fetch_state") == TRUNCATING, array(f, "fetch_offset"), array(f, "leo"))
    f.loc[hit, "fetch_offset"] = np.minimum(take(c, "offset", pos, 0), own)[hit]
    f.loc[hit, "fetch_state"] = TRUNCATING
    return conform(f, FUTURE)


# ---------------------------------------------------------------------------------------------------------
# Truncation against the local current log (KIP-279 rule; ReplicaAlterLogDirsThread)
# ---------------------------------------------------------------------------------------------------------

def _as_replicas(futures: pd.DataFrame) -> pd.DataFrame:
    """The future logs as REPLICA rows, so the log functions (truncate, on_append) apply to them."""
    return new_replicas(futures.reset_index(drop=True))


def _log_back(futures: pd.DataFrame, logs: pd.DataFrame) -> pd.DataFrame:
    f = futures.reset_index(drop=True).copy()
    for c in ("leo", "hw", "log_start_offset", "recovery_point", "last_fetched_epoch", "epoch_cache"):
        f[c] = array(logs, c)
    return conform(f, FUTURE)


def local_epoch_answers(futures: pd.DataFrame, replicas: pd.DataFrame, rules: Rules | str) -> pd.DataFrame:
    """ReplicaAlterLogDirsThread.fetchEpochEndOffsets: each future log's latest epoch asked of the local
    current log (Partition.lastOffsetForLeaderEpoch with fetchOnlyFromLeader = false). A current replica
    that is missing or offline answers KAFKA_STORAGE_ERROR, the others still answer; the mover's epoch
    is fenced like a follower's (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH). Returns one row per future
    log: leader_epoch, end_offset, error (None = answered)."""
    f = futures.reset_index(drop=True)
    pos = locate(replicas, f)
    cur = take(replicas, "leader_epoch", pos, -1)
    mine = array(f, "leader_epoch")
    err = np.select([pos < 0, (mine >= 0) & (mine < cur), (mine >= 0) & (mine > cur)],
                    [errors.KAFKA_STORAGE_ERROR, errors.FENCED_LEADER_EPOCH, errors.UNKNOWN_LEADER_EPOCH], "")
    caches = take(replicas, "epoch_cache", pos, "")
    leos = take(replicas, "leo", pos, -1)
    rules = rules_for(rules)
    ans = [leader_epoch.offsets_for_leader_epoch(leader_epoch.decode(c), int(lo), int(e), rules)
           if ok else leader_epoch.UNDEFINED
           for c, lo, e, ok in zip(caches, leos, array(f, "last_fetched_epoch"), err == "", strict=True)]
    return pd.DataFrame({"leader_epoch": [a[0] for a in ans], "end_offset": [a[1] for a in ans],
                         "error": np.where(err == "", None, err)})


def truncation_step(futures: pd.DataFrame, replicas: pd.DataFrame, rules: Rules | str
                    ) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """One pass of the mover's maybeTruncate over its Truncating partitions: a future log with no epoch
    (or truncate_to_hw, before 0.11) truncates to its fetch offset (truncateToHighWatermark); the others ask
    local_epoch_answers and truncate by leader_epoch.truncation_offset (the fetch offset stands for the
    follower's HW: an UNDEFINED answer truncates there). Done -> Fetching; not done (KIP-279's "ask again
    with the new latest epoch") -> still Truncating, fetch offset = the truncation point; an error leaves
    the partition Truncating. Returns (futures, cuts (with the future log's dir), how many truncated but
    are not done: they ask again)."""
    f = futures.reset_index(drop=True)
    todo = np.flatnonzero(array(f, "fetch_state") == TRUNCATING)
    if len(todo) == 0:
        return futures, no_cuts(), 0
    rules = rules_for(rules)
    ans = local_epoch_answers(f.iloc[todo], replicas, rules)
    pos, offs, done = [], [], []
    for j, i in enumerate(todo):
        cache = leader_epoch.decode(f.at[i, "epoch_cache"])
        start = int(f.at[i, "fetch_offset"])
        if not cache or rules.truncate_to_hw:
            off, fin = start, True
        elif ans["error"].iat[j] is not None:
            continue
        else:
            off, fin = leader_epoch.truncation_offset(
                cache, int(f.at[i, "leo"]), start,
                (int(ans["leader_epoch"].iat[j]), int(ans["end_offset"].iat[j])), rules)
        pos.append(i)
        offs.append(off)
        done.append(fin)
    if not pos:
        return futures, no_cuts(), 0
    pos_a, offs_a, done_a = np.asarray(pos), np.asarray(offs, dtype="int64"), np.asarray(done, dtype=bool)
    logs, cuts = truncate(_as_replicas(f), pos_a, offs_a)
    f = _log_back(f, logs)
    f.loc[pos_a[done_a], "fetch_state"] = FETCHING
    f.loc[pos_a[~done_a], "fetch_offset"] = offs_a[~done_a]
    return conform(f, FUTURE), cuts, int((~done_a).sum())


def truncate_futures(futures: pd.DataFrame, replicas: pd.DataFrame, rules: Rules | str, max_passes: int = 8
                     ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """truncation_step repeated while some partition asks again (the mover loops within a round, with no
    network round trip). Returns (futures, cuts)."""
    all_cuts = []
    for _ in range(max_passes):
        futures, cuts, again = truncation_step(futures, replicas, rules)
        all_cuts.append(cuts)
        if again == 0:
            break
    return futures, pd.concat([c for c in all_cuts if len(c)] or [no_cuts()], ignore_index=True)


def out_of_range(futures: pd.DataFrame, replicas: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """ReplicaAlterLogDirsThread.handleOffsetOutOfRange for Fetching future logs: one past the current
    LEO truncates to it; one below the current log start restarts empty at that start
    (truncateFullyAndStartAt). Returns (futures, cuts)."""
    f = futures.reset_index(drop=True)
    fetching = array(f, "fetch_state") == FETCHING
    pos = locate(replicas, f)
    cur_leo = take(replicas, "leo", pos, -1)
    cur_start = take(replicas, "log_start_offset", pos, 0)
    leo = array(f, "leo")
    past = fetching & (pos >= 0) & (leo > cur_leo)
    before = fetching & (pos >= 0) & ~past & (cur_start > leo)
    if not (past.any() or before.any()):
        return futures, no_cuts()
    logs = _as_replicas(f)
    logs, c1 = truncate(logs, np.flatnonzero(past), cur_leo[past])
    rp = np.flatnonzero(before)
    logs, c2 = truncate(logs, rp, np.zeros(len(rp), dtype="int64"))
    for col in ("leo", "hw", "log_start_offset", "recovery_point"):
        v = array(logs, col).copy()
        v[rp] = cur_start[rp]
        logs[col] = v
    return _log_back(f, logs), pd.concat([c1, c2], ignore_index=True)


# ---------------------------------------------------------------------------------------------------------
# Copying (buildFetch / processPartitionData) and the swap
# ---------------------------------------------------------------------------------------------------------

def select_for_copy(futures: pd.DataFrame, replicas: pd.DataFrame, threads: int) -> tuple[pd.DataFrame, np.ndarray]:
    """selectPartitionToFetch (2.3+), per broker and mover thread: the partition in progress if it is still
    ready (Fetching, its current log online), else the ready partition with the smallest (topic, partition).
    Returns (futures with in_progress = the selection, selected mask)."""
    f = futures.reset_index(drop=True)
    if f.empty:
        return futures, np.zeros(0, dtype=bool)
    ready = (array(f, "fetch_state") == FETCHING) & (locate(replicas, f) >= 0)
    thread = np.array([fetcher_id(t, p, threads) for t, p in zip(f["topic"], f["partition"], strict=True)])
    order = pd.DataFrame({"b": array(f, "broker"), "th": thread, "ready": ready,
                          "sticky": ready & f["in_progress"].to_numpy(dtype=bool),
                          "t": array(f, "topic"), "p": array(f, "partition")})
    order = order[order["ready"]].sort_values(["b", "th", "sticky", "t", "p"], ascending=[True, True, False, True, True])
    first = order.groupby(["b", "th"], sort=False).head(1).index.to_numpy()
    selected = np.zeros(len(f), dtype=bool)
    selected[first] = True
    f["in_progress"] = selected
    return conform(f, FUTURE), selected


def copy_ranges(futures: pd.DataFrame, replicas: pd.DataFrame, selected: np.ndarray, max_records: int
                ) -> pd.DataFrame:
    """The current-log offsets each selected future log needs: [its LEO, the current LEO), at most
    `max_records` of them (broker, topic, partition, from_offset, to_offset)."""
    f = futures.reset_index(drop=True)[selected]
    pos = locate(replicas, f)
    to = np.minimum(take(replicas, "leo", pos, 0), array(f, "leo") + int(max_records))
    r = pd.DataFrame({"broker": array(f, "broker"), "topic": array(f, "topic"),
                      "partition": array(f, "partition"), "from_offset": array(f, "leo"), "to_offset": to})
    return r[r["to_offset"] > r["from_offset"]].reset_index(drop=True)


def append_copies(
    futures: pd.DataFrame, replicas: pd.DataFrame, records: pd.DataFrame, selected: np.ndarray, threads: int,
    fetch_max_bytes: int, budgets: Mapping[int, int | None], rules: Rules | str,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """processPartitionData for each selected future log: the current log's records from its LEO on
    (`records`: RECORD rows of the current logs, any order, extra ones ignored), at most
    `fetch_max_bytes` per thread but at least one record, whole records within the broker's byte
    budget (`budgets`: broker -> bytes this round, None = unthrottled; threads in id order). Appended
    as they are (offsets, epochs; the epoch cache follows), then HW := min(current HW, LEO) and log
    start := max(own, current's). Returns (futures, appended RECORD rows)."""
    f = futures.reset_index(drop=True)
    if not selected.any() or records.empty:
        return futures, empty(RECORD)
    sel = f[selected]
    thread = np.array([fetcher_id(t, p, threads) for t, p in zip(sel["topic"], sel["partition"], strict=True)])
    want = sel[[*KEY, "leo"]].assign(_th=thread)
    r = records.drop_duplicates([*KEY, "offset"]).merge(want, on=KEY)
    r = r[r["offset"] >= r["leo"]].sort_values(["broker", "_th", "topic", "partition", "offset"], kind="stable")
    r = r.reset_index(drop=True)
    rank = r.groupby(KEY, sort=False).cumcount().to_numpy()
    r = r[array(r, "offset") == array(r, "leo") + rank].reset_index(drop=True)  # contiguous from the LEO
    size = record_bytes(r)
    within = r.assign(_s=size).groupby(KEY, sort=False)["_s"].cumsum().to_numpy()
    r = r[within - size < int(fetch_max_bytes)].reset_index(drop=True)
    size = record_bytes(r)
    spent = r.assign(_s=size).groupby("broker", sort=False)["_s"].cumsum().to_numpy()
    cap = np.array([budgets.get(int(b)) for b in r["broker"]], dtype=object)
    ok = np.array([c is None or s <= c for s, c in zip(spent, cap, strict=True)], dtype=bool)
    copied = conform(r[ok].assign(src=r["broker"][ok]), RECORD)
    if copied.empty:
        return futures, copied
    last = copied.groupby(KEY, as_index=False)["offset"].max()
    logs = _as_replicas(f)
    at = locate(logs, last)
    leo = array(logs, "leo").copy()
    leo[at] = array(last, "offset") + 1
    logs["leo"] = leo
    logs = leader_epoch.on_append(logs, copied, rules)
    f = _log_back(f, logs)
    pos = locate(replicas, f)
    f.loc[at, "hw"] = np.minimum(take(replicas, "hw", pos, 0), array(f, "leo"))[at]
    f.loc[at, "log_start_offset"] = np.maximum(array(f, "log_start_offset"),
                                               take(replicas, "log_start_offset", pos, 0))[at]
    return conform(f, FUTURE), copied


def swap(replicas: pd.DataFrame, futures: pd.DataFrame, selected: np.ndarray
         ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Partition.maybeReplaceCurrentWithFutureReplica after a selected partition's copy: if the future
    LEO equals the current LEO the future log becomes the current log in its dir (its records, epoch
    cache, log start and recovery point; the current HW is kept) and the old log is deleted. Returns
    (replicas, futures, swaps (broker, topic, partition, old_dir, log_dir))."""
    f = futures.reset_index(drop=True)
    if f.empty or not selected.any():
        return replicas, futures, from_rows([], SWAPS)
    pos = locate(replicas, f)
    done = selected & (pos >= 0) & (array(f, "fetch_state") == FETCHING) \
        & (array(f, "leo") == take(replicas, "leo", pos, -1))
    if not done.any():
        return replicas, futures, from_rows([], SWAPS)
    r = replicas.reset_index(drop=True).copy()
    at = pos[done]
    swaps = pd.DataFrame({"broker": array(f, "broker")[done], "topic": array(f, "topic")[done],
                          "partition": array(f, "partition")[done], "old_dir": array(r, "log_dir")[at],
                          "log_dir": array(f, "log_dir")[done]})
    for col in ("log_dir", "epoch_cache", "last_fetched_epoch", "log_start_offset", "recovery_point"):
        v = array(r, col).copy()
        v[at] = array(f, col)[done]
        r[col] = v
    return conform(r, REPLICA), conform(f[~done], FUTURE), swaps


def dir_cuts(logs: pd.DataFrame) -> pd.DataFrame:
    """Cuts deleting whole logs (LOGS rows): offset 0 in their dir."""
    return pd.DataFrame({c: array(logs, c) for c in CUTS[:-1]}).assign(offset=0) if len(logs) else no_cuts()
