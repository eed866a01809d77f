"""Leader-epoch cache, OffsetsForLeaderEpoch and the follower's truncation point (KIP-101, KIP-279).

Pure Python: one replica's epoch cache is a short list of `(epoch, start_offset)` tuples, strictly
increasing in both fields (Kafka's `LeaderEpochFileCache`, persisted as `leader-epoch-checkpoint`).
Every function returns a new list and never mutates its input. As everywhere in sparkkafka, -1 means
"unknown"/"undefined" (Kafka's UNDEFINED_EPOCH = -1 and UNDEFINED_EPOCH_OFFSET = -1).

The code this follows:
  * `LeaderEpochFileCache` (core `kafka.server.epoch` up to 3.4, then `storage`
    `org.apache.kafka.storage.internals.epoch`): assign / isUpdateNeeded / maybeTruncateNonMonotonicEntries,
    endOffsetFor, truncateFromEnd, truncateFromStart, epochForOffset; the 0.11-1.1 `endOffsetFor`
    returning an offset only.
  * `CheckpointFile` / `LeaderEpochCheckpointFile`: the text layout of `leader-epoch-checkpoint`.
  * `ReplicaManager.lastOffsetForLeaderEpoch` / `Partition.lastOffsetForLeaderEpoch`: the leader's answer.
  * `AbstractFetcherThread.getOffsetTruncationState` (2.0+) and 0.11's `ReplicaFetcherThread.maybeTruncate`:
    the follower's truncation point.
  * `Partition.readRecords` (2.8+, Fetch v12 `lastFetchedEpoch`, KAFKA-10554): the leader's divergence check.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

import numpy as np

from .frames import array
from .rules import Rules, rules_for

Entry = tuple[int, int]

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
UNDEFINED: Entry = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
OUT_OF_RANGE: Entry = UNDEFINED  # diverging_epoch's stand-in for OFFSET_OUT_OF_RANGE

CHECKPOINT_VERSION = 0


def _entries(entries: Iterable[Entry]) -> list[Entry]:
    return [(int(e), int(o)) for e, o in entries]


# ---------------------------------------------------------------------------------------------------------
# Cache maintenance (LeaderEpochFileCache)
# ---------------------------------------------------------------------------------------------------------

def latest_epoch(entries: Iterable[Entry]) -> int:
    """LeaderEpochFileCache.latestEpoch: the epoch of the last entry, -1 when the cache is empty."""
    es = _entries(entries)
    return es[-1][0] if es else UNDEFINED_EPOCH


def assign(entries: Iterable[Entry], epoch: int, start_offset: int) -> list[Entry]:
    """LeaderEpochFileCache.assign(epoch, startOffset) (2.0+ code).

    isUpdateNeeded: an update is needed when the cache is empty, or `epoch` differs from the latest
    entry's epoch, or `start_offset` is below the latest entry's start. Otherwise the call adds no
    information and the cache is returned unchanged (so re-assigning the latest epoch with a larger
    offset is ignored). When needed, maybeTruncateNonMonotonicEntries removes from the tail every entry
    with epoch >= `epoch` or start >= `start_offset` (it stops at the first that matches neither), then
    the new entry is appended. Negative values raise ValueError (Kafka: IllegalArgumentException).

    Note the update test looks only at the *latest* entry: assigning an older epoch, even one already
    present with the same start, wipes every later entry (Kafka does the same).
    """
    if epoch < 0 or start_offset < 0:
        raise ValueError(f"invalid partition leader epoch entry ({epoch}, {start_offset})")
    es = _entries(entries)
    if es and es[-1][0] == epoch and start_offset >= es[-1][1]:
        return es
    while es and (es[-1][0] >= epoch or es[-1][1] >= start_offset):
        es.pop()
    es.append((int(epoch), int(start_offset)))
    return es


def truncate_from_end(entries: Iterable[Entry], offset: int) -> list[Entry]:
    """LeaderEpochFileCache.truncateFromEnd: remove entries with start >= `offset` (no-op for offset < 0).

    Every log truncation calls it, including a no-op truncation at or after the LEO (KAFKA-10706)."""
    es = _entries(entries)
    if offset < 0:
        return es
    return [(e, o) for e, o in es if o < offset]


def truncate_from_start(entries: Iterable[Entry], offset: int) -> list[Entry]:
    """LeaderEpochFileCache.truncateFromStart (the log start moved to `offset`).

    Removes the leading entries with start <= `offset` and re-inserts the last removed one's epoch
    with start `offset`; exclusive, so truncateFromStart(6) keeps an entry starting at 6."""
    es = _entries(entries)
    removed = [(e, o) for e, o in es if o <= offset]
    if not removed:
        return es
    return [(removed[-1][0], int(offset))] + es[len(removed):]


def epoch_for_offset(entries: Iterable[Entry], offset: int) -> int:
    """LeaderEpochFileCache.epochForOffset: the epoch holding `offset`, -1 when before the first entry."""
    found = UNDEFINED_EPOCH
    for e, o in _entries(entries):
        if o == offset:
            return e
        if o > offset:
            return found
        found = e
    return found


# ---------------------------------------------------------------------------------------------------------
# Lookups
# ---------------------------------------------------------------------------------------------------------

def end_offset_for(entries: Iterable[Entry], requested_epoch: int, leo: int) -> Entry:
    """LeaderEpochFileCache.endOffsetFor(requestedEpoch, logEndOffset), 2.0+.

    1. requested = -1 -> (-1, -1).
    2. requested = latest epoch -> (requested, leo).
    3. no entry with a larger epoch -> (-1, -1).
    4. no entry with epoch <= requested -> (requested, start of the first larger entry).
    5. else (largest epoch <= requested, start of the first entry with a larger epoch).
    """
    es = _entries(entries)
    if requested_epoch == UNDEFINED_EPOCH:
        return UNDEFINED
    if es and es[-1][0] == requested_epoch:
        return (int(requested_epoch), int(leo))
    higher = next(((e, o) for e, o in es if e > requested_epoch), None)
    if higher is None:
        return UNDEFINED
    floor = [(e, o) for e, o in es if e <= requested_epoch]
    if not floor:
        return (int(requested_epoch), higher[1])
    return (floor[-1][0], higher[1])


def end_offset_for_v0(entries: Iterable[Entry], requested_epoch: int, leo: int) -> int:
    """The 0.11-1.1 LeaderEpochFileCache.endOffsetFor (OffsetsForLeaderEpoch v0: an offset only).

    requested = -1 -> -1; requested = latest epoch -> leo; requested below the first cached epoch or
    no larger epoch cached -> -1; else the start of the first entry with a larger epoch."""
    es = _entries(entries)
    if requested_epoch == UNDEFINED_EPOCH:
        return UNDEFINED_EPOCH_OFFSET
    if es and es[-1][0] == requested_epoch:
        return int(leo)
    higher = next((o for e, o in es if e > requested_epoch), None)
    if higher is None or requested_epoch < es[0][0]:
        return UNDEFINED_EPOCH_OFFSET
    return higher


# ---------------------------------------------------------------------------------------------------------
# OffsetsForLeaderEpoch and follower truncation
# ---------------------------------------------------------------------------------------------------------

def offsets_for_leader_epoch(entries: Iterable[Entry], leo: int, requested_epoch: int,
                             rules: Rules | str) -> Entry:
    """The leader's OffsetsForLeaderEpoch answer (ReplicaManager/Partition.lastOffsetForLeaderEpoch).

    Returns (epoch, end_offset). Before 0.11 the request does not exist: (-1, -1). 0.11-1.1 (v0) carry
    an offset only: (-1, end_offset_for_v0). 2.0+ (v1+): end_offset_for, an empty cache giving (-1, -1).
    Error handling (not leader, FENCED/UNKNOWN_LEADER_EPOCH, KIP-320) is the caller's."""
    rules = rules_for(rules)
    if not rules.leader_epoch_exchange:
        return UNDEFINED
    if not rules.epoch_truncation:
        return (UNDEFINED_EPOCH, end_offset_for_v0(entries, requested_epoch, leo))
    return end_offset_for(entries, requested_epoch, leo)


def truncation_offset(follower_entries: Iterable[Entry], follower_leo: int, follower_hw: int,
                      leader_answer: Entry, rules: Rules | str) -> tuple[int, bool]:
    """The follower's truncation point (KIP-279; ReplicaFetcherThread,
    AbstractFetcherThread.getOffsetTruncationState). Returns (offset, done).

    * 0.8/0.10 (ReplicaManager.makeFollowers), or no local epoch (empty cache): (HW, True).
    * Answer offset -1 (UNDEFINED): the initial fetch offset, i.e. (HW, True).
    * 0.11-1.1 (ReplicaFetcherThread.maybeTruncate, KIP-101): (min(answer offset, LEO), True).
    * 2.0+ (AbstractFetcherThread.getOffsetTruncationState, KIP-279), answer (Le, Lo):
      - Le = -1 (a peer on OffsetsForLeaderEpoch v0): (min(Lo, LEO), True);
      - the follower's own end_offset_for(Le) = (fe, fo) (UnifiedLog.endOffsetForEpoch, None when fo = -1):
        None -> (min(Lo, LEO), True); fe != Le -> (min(fo, LEO), False), i.e. truncate there and ask
        again with the new latest epoch; fe == Le -> (min(fo, Lo, LEO), True).
    The same arithmetic applies to a Fetch v12 DivergingEpoch (2.8, AbstractFetcherThread.truncateOnFetchResponse).
    The caller truncates the log and the cache (truncate_from_end) before asking again.
    """
    rules = rules_for(rules)
    es = _entries(follower_entries)
    if rules.truncate_to_hw or not es:
        return (int(follower_hw), True)
    le, lo = int(leader_answer[0]), int(leader_answer[1])
    if lo == UNDEFINED_EPOCH_OFFSET:
        return (int(follower_hw), True)
    if not rules.epoch_truncation or le == UNDEFINED_EPOCH:
        return (min(lo, follower_leo), True)
    fe, fo = end_offset_for(es, le, follower_leo)
    if fo == UNDEFINED_EPOCH_OFFSET:
        return (min(lo, follower_leo), True)
    if fe != le:
        return (min(fo, follower_leo), False)
    return (min(fo, lo, follower_leo), True)


def diverging_epoch(leader_entries: Iterable[Entry], leader_leo: int, last_fetched_epoch: int,
                    fetch_offset: int, *, log_start_offset: int = -1) -> Entry | None:
    """The leader's Fetch v12 `lastFetchedEpoch` check (Partition.readRecords, 2.8+).

    Runs after the currentLeaderEpoch check. `last_fetched_epoch` -1 (absent) skips it: None.
    (E, O) = end_offset_for(last_fetched_epoch): undefined -> OFFSET_OUT_OF_RANGE, returned as (-1, -1);
    then fetch_offset < `log_start_offset` (when known, >= 0) -> OFFSET_OUT_OF_RANGE, whether or not
    the epochs diverge; then E < last_fetched_epoch or O < fetch_offset -> the DivergingEpoch (E, O),
    sent with no records and without updating the follower's fetch state (KAFKA-13141). Else None.
    """
    if last_fetched_epoch == UNDEFINED_EPOCH:
        return None
    e, o = end_offset_for(leader_entries, last_fetched_epoch, leader_leo)
    if e == UNDEFINED_EPOCH or o == UNDEFINED_EPOCH_OFFSET:
        return OUT_OF_RANGE
    if 0 <= log_start_offset and fetch_offset < log_start_offset:
        return OUT_OF_RANGE
    if e < last_fetched_epoch or o < fetch_offset:
        return (e, o)
    return None


_AT_LEO = -2  # _cached_end_offset's offset for "the LEO" (the requested epoch is the cache's latest)


@lru_cache(maxsize=1 << 16)
def _cached_end_offset(cache: str, epoch: int) -> Entry:
    """end_offset_for over an encoded cache, with _AT_LEO for the LEO: a catching-up follower asks the same
    (cache, epoch) every round until it reaches the next epoch, so each pair is parsed once."""
    return end_offset_for(decode(cache), epoch, _AT_LEO)


def diverging_epochs(caches: np.ndarray, leo: np.ndarray, last_fetched_epoch: np.ndarray, fetch_offset: np.ndarray,
                     log_start_offset: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """diverging_epoch of each row (encoded leader caches, the leader's LEO and log start, the fetch's last
    fetched epoch and offset), as (epoch, end offset, out of range): the DivergingEpoch where one is sent
    (-1, -1 elsewhere), and True where the answer is OFFSET_OUT_OF_RANGE."""
    n = len(caches)
    eo = np.array([_cached_end_offset(c, int(e)) for c, e in zip(caches, last_fetched_epoch, strict=True)],
                  dtype=np.int64).reshape(n, 2)
    e, o = eo[:, 0], np.where(eo[:, 1] == _AT_LEO, leo, eo[:, 1])
    asked = last_fetched_epoch != UNDEFINED_EPOCH
    oor = asked & ((e == UNDEFINED_EPOCH) | (o == UNDEFINED_EPOCH_OFFSET)
                   | ((log_start_offset >= 0) & (fetch_offset < log_start_offset)))
    div = asked & ~oor & ((e < last_fetched_epoch) | (o < fetch_offset))
    return np.where(div, e, -1), np.where(div, o, -1), oor


# ---------------------------------------------------------------------------------------------------------
# leader-epoch-checkpoint (CheckpointFile, LeaderEpochCheckpointFile)
# ---------------------------------------------------------------------------------------------------------

def format_checkpoint(entries: Iterable[Entry]) -> str:
    """The `leader-epoch-checkpoint` text: version 0, the entry count, then one `epoch startOffset` line
    each, every line ending in a newline."""
    es = _entries(entries)
    return "".join(f"{line}\n" for line in [str(CHECKPOINT_VERSION), str(len(es))] + [f"{e} {o}" for e, o in es])


def parse_checkpoint(text: str) -> list[Entry]:
    """Parse format_checkpoint's text (an empty file is an empty cache). Raises ValueError on a bad
    version, a malformed line or a count that does not match, as CheckpointFile does (IOException)."""
    lines = text.splitlines()
    if not lines:
        return []
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise ValueError(f"unrecognised leader-epoch-checkpoint version: {lines[0]!r}")
    if len(lines) < 2:
        raise ValueError("leader-epoch-checkpoint: missing entry count")
    count = int(lines[1].strip())
    out: list[Entry] = []
    for line in lines[2:]:
        parts = line.split()
        if len(parts) != 2:
            raise ValueError(f"malformed leader-epoch-checkpoint line: {line!r}")
        out.append((int(parts[0]), int(parts[1])))
    if len(out) != count:
        raise ValueError(f"leader-epoch-checkpoint: expected {count} entries, found {len(out)}")
    return out


# ---------------------------------------------------------------------------------------------------------
# The cache as a REPLICA column, maintained over frames
# ---------------------------------------------------------------------------------------------------------
# A replica's cache travels as one string, "epoch:start,epoch:start" ("" when empty): a few entries per
# replica, changed only when an epoch starts or the log is truncated, so the Python work below runs
# for those few rows and the common case (records of the epoch already cached) stays vectorised.

def enabled(rules: Rules | str) -> bool:
    """Whether records carry a leader epoch and replicas keep the cache: message format v2, from 0.11
    (KIP-101). Older formats have no epoch field (read as -1) and the cache stays empty (KAFKA-7897)."""
    return rules_for(rules).leader_epoch_cache


def encode(entries: Iterable[Entry]) -> str:
    return ",".join(f"{e}:{o}" for e, o in _entries(entries))


def decode(text: str | None) -> list[Entry]:
    if not text:
        return []
    return [(int(e), int(o)) for e, o in (x.split(":") for x in text.split(","))]


def latest_epochs(caches, rows: np.ndarray | None = None) -> np.ndarray:
    """The latest epoch of each encoded cache (UNDEFINED_EPOCH for an empty one or a null), with Arrow's
    regex kernel (~10x cheaper than parsing each string in Python), once per distinct cache. `rows`: only
    those of a replicas' column, whose answers are remembered while it holds the same caches (a cache
    changes only with a new epoch: each round's appends read the same ones)."""
    from .frames import per_value, remembered

    if rows is not None:
        return remembered(np.asarray(caches, dtype=object), _latest_epochs, UNDEFINED_EPOCH)[rows]
    return per_value(np.asarray(caches, dtype=object), _latest_epochs, null=UNDEFINED_EPOCH)


def _latest_epochs(caches: np.ndarray) -> np.ndarray:
    if len(caches) <= 32:  # a few distinct caches (every round's appends): Arrow's calls cost ~70 us, a parse ~1 us
        return np.array([_latest_epoch(c) for c in caches], dtype="int64")
    import pyarrow as pa
    import pyarrow.compute as pc

    a = pa.array(caches, type=pa.string(), from_pandas=True)
    last = pc.struct_field(pc.extract_regex(a, r"(?:^|,)(?P<e>-?\d+):-?\d+$"), "e")  # null: no entry
    return pc.fill_null(pc.cast(last, pa.int64()), UNDEFINED_EPOCH).to_numpy(zero_copy_only=False)


def _latest_epoch(cache: str | None) -> int:
    """The latest epoch of one encoded cache, as `_latest_epochs`' pattern reads it: the epoch of a last
    entry "epoch:offset", UNDEFINED_EPOCH for an empty cache, a null or a malformed last entry."""
    if not isinstance(cache, str):
        return UNDEFINED_EPOCH
    epoch, colon, offset = cache[cache.rfind(",") + 1:].partition(":")
    return int(epoch) if colon and _INT.fullmatch(epoch) and _INT.fullmatch(offset) else UNDEFINED_EPOCH


_INT = re.compile(r"-?[0-9]+")


def on_append(replicas, appended, rules: Rules | str, at: np.ndarray | None = None, in_order: bool = False):
    """LeaderEpochFileCache.assign(batch epoch, base offset) for every appended batch (leader or
    follower: Log.appendAsLeader / appendAsFollower). `appended` holds RECORD rows sorted by offset per
    partition; an epoch change between consecutive records is a new batch's epoch. Sets last_fetched_epoch to
    the cache's latest epoch. Returns the replicas frame (a new frame when changed, sharing the columns it
    does not change; `replicas` is indexed by position). `at`: each appended row's position in `replicas` when
    the caller has it (both appends do: a lookup of the replicas costs ~0.3 ms); `in_order`: the rows are
    sorted by KEY and offset already (both appends' are: no sort)."""

    from .frames import KEY, locate, sort_order, with_values

    if appended.empty:
        return replicas
    order = np.arange(len(appended)) if in_order else sort_order([array(appended, c) for c in (*KEY, "offset")])
    a = {c: array(appended, c)[order] for c in (*KEY, "offset", "leader_epoch")}
    key_change = np.ones(len(order), dtype=bool)
    ep = a["leader_epoch"]
    same = np.ones(len(order), dtype=bool)
    for c in KEY:
        v = a[c]
        same[1:] &= v[1:] == v[:-1]
    key_change[1:] = ~same[1:]
    pos = (locate(replicas, appended) if at is None else np.asarray(at))[order]
    r = replicas
    lfe = array(r, "last_fetched_epoch")
    prev = np.where(key_change, lfe[np.maximum(pos, 0)], np.r_[-2, ep[:-1]])
    starts = (pos >= 0) & (ep != prev) & (ep >= 0)
    last = ~np.r_[same[1:], False]  # the last record of each partition
    lp = pos[last & (pos >= 0)]
    cached = enabled(rules)
    if cached and starts.any():
        caches = array(r, "epoch_cache").copy()
        for p, e, o in zip(pos[starts], ep[starts], a["offset"][starts], strict=True):
            caches[p] = encode(assign(decode(caches[p]), int(e), int(o)))
        r = r.copy(deep=False)
        r["epoch_cache"] = caches
    latest = latest_epochs(array(r, "epoch_cache"), lp) if cached else ep[last & (pos >= 0)]
    return with_values(r, "last_fetched_epoch", lp, np.asarray(latest, dtype="int32"))


def on_become_leader(replicas, mask, rules: Rules | str):
    """Partition.makeLeader from 2.1 (KAFKA-7415): a new leader records (its epoch, LEO) at once, before
    any write, so a follower holding a never-replicated later epoch still finds a higher entry."""
    if not rules_for(rules).epoch_entry_on_become_leader or not mask.any():
        return replicas
    from .frames import per_row

    pos = np.flatnonzero(mask)
    epochs = array(replicas, "leader_epoch")[pos]
    caches = array(replicas, "epoch_cache").copy()
    caches[pos] = per_row(lambda c, e, o: encode(assign(decode(c), int(e), int(o))), caches[pos], epochs,
                          array(replicas, "leo")[pos])
    lfe = array(replicas, "last_fetched_epoch").copy()
    lfe[pos] = epochs
    r = replicas.copy(deep=False)
    r["epoch_cache"] = caches
    r["last_fetched_epoch"] = lfe
    return r


def on_truncate(replicas, pos, offsets):
    """truncateFromEnd(offset) for the replicas at positions `pos` (every log truncation, even one at or
    past the LEO: KAFKA-10706); last_fetched_epoch follows the cache's new latest epoch."""
    if len(pos) == 0:
        return replicas
    from .frames import per_row

    r = replicas.copy(deep=False)
    caches = array(r, "epoch_cache").copy()
    caches[pos] = per_row(lambda c, o: encode(truncate_from_end(decode(c), int(o))), caches[pos],
                          np.asarray(offsets, dtype="int64"))
    r["epoch_cache"] = caches
    lfe = array(r, "last_fetched_epoch").copy()
    lfe[pos] = latest_epochs(caches[pos])
    r["last_fetched_epoch"] = lfe
    return r
