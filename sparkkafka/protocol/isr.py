"""ISR changes on the leader: Partition.maybeExpandIsr and maybeShrinkIsr, committing a change
(the AlterIsr response from 2.7, the outcome of the leader's conditional ZooKeeper write before),
and the ISR gauges (Partition.scala, KIP-497's AlterIsr). Vectorised over every broker and
partition of a task; plain pandas/numpy.

State: REPLICA.isr is the committed ISR and REPLICA.pending_isr the proposed ISR of the change in
flight ("" when none: Kafka's CommittedIsr vs PendingExpandIsr/PendingShrinkIsr). REMOTE.in_isr
is membership of the leader's *maximal* ISR: a pending expansion counts at once and a pending
shrink only once committed, so the HW rule (high_watermark.py) never runs ahead of the ISR the
controller may already have admitted (AsyncIsr.tla, ValidHighWatermark).

A leader-initiated change bumps only zkVersion, never the leader epoch. The caller delivers each
proposal to the controller (2.7+) or performs the conditional write (before 2.7) and hands the
answers to `apply_isr_results`; after that it recomputes the HW (a committed shrink may move it).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import errors
from .config import RoundSettings
from .frames import (
    ISR_CHANGE,
    KEY,
    REMOTE,
    REPLICA,
    array,
    conform,
    csv,
    empty,
    ids,
    isr_size,
    isr_sizes,
    locate,
    per_topic,
    positional,
    select,
    str_len,
    with_values,
)
from .rules import Rules, rules_for

# AlterIsr errors after which the leader gives up and stays pending until the next LeaderAndIsr
# (Partition.handleAlterIsrError, 2.7-2.8). Any other error drops the change so it is retried.
STAY_PENDING = ("FENCED_LEADER_EPOCH", "INVALID_UPDATE_VERSION", errors.UNKNOWN_TOPIC_OR_PARTITION)
BADVERSION = "BADVERSION"  # a failed conditional ZK write of the state znode (before 2.7)


def _member(lists: np.ndarray, who: np.ndarray) -> np.ndarray:
    """Whether each broker id `who[i]` is in the comma-joined list `lists[i]`."""
    return np.fromiter(((f",{s or ''},").find(f",{int(w)},") >= 0 for s, w in zip(lists, who, strict=True)),
                       dtype=bool, count=len(who))


def _strs(s: pd.Series) -> np.ndarray:
    return s.fillna("").astype(str).to_numpy()


def _no_change(replicas: pd.DataFrame) -> np.ndarray:
    """Which replicas have no ISR change in flight (pending_isr "" or null: _strs(...) == "", by length)."""
    return str_len(replicas["pending_isr"]) == 0


def _proposals(rep: pd.DataFrame, new_isr: list[str], kind: str) -> pd.DataFrame:
    if rep.empty:
        return empty(ISR_CHANGE)
    return conform(pd.DataFrame({
        "broker": array(rep, "broker"), "topic": array(rep, "topic"),
        "partition": array(rep, "partition"), "leader_epoch": array(rep, "leader_epoch"),
        "zk_version": array(rep, "zk_version"), "controller_epoch": array(rep, "controller_epoch"),
        "isr": np.array(new_isr, dtype=object), "kind": kind,
    }), ISR_CHANGE)


def _leaders(replicas: pd.DataFrame) -> np.ndarray:
    return array(replicas, "leader") == array(replicas, "broker")


def maybe_expand_isr(
    replicas: pd.DataFrame, remotes: pd.DataFrame, now: int, rules: Rules | str
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Partition.maybeExpandIsr. Returns (replicas, remotes, proposals).

    For each led partition with no ISR change in flight, a follower joins if it is assigned, not
    in the ISR, its LEO has reached the leader's HW and, from 2.1 (KAFKA-7128), the offset at which
    the leader's current epoch began. Time lag is not checked. One broker per change, the lowest
    id first; it goes to the end of the proposed ISR. The change is pending (pending_isr) and the
    follower counts in the maximal ISR (in_isr) at once, so it holds the HW back from now on.
    Kafka evaluates this only when the follower's fetch updates its state, so only followers
    whose fetch the leader served at `now` are considered (a crashed follower is never re-added
    from the LEO it had).
    """
    replicas = positional(replicas)
    if replicas.empty or remotes.empty:
        return replicas, remotes, empty(ISR_CHANGE)
    remotes = positional(remotes)
    open_ = _leaders(replicas) & _no_change(replicas)
    pos = locate(replicas, remotes)
    ok = pos >= 0
    ok[ok] = open_[pos[ok]]
    if not ok.any():
        return replicas, remotes, empty(ISR_CHANGE)
    rp = pos[ok]
    leo = array(remotes, "leo")[ok]
    # Remote rows exist only for assigned followers, and with no change in flight their in_isr
    # flag is exactly committed-ISR membership, so no list parsing is needed here.
    cand = (~remotes["in_isr"].to_numpy(dtype=bool)[ok]
            & (leo >= 0) & (leo >= array(replicas, "hw")[rp])
            & (array(remotes, "last_fetch_ms")[ok] == now))
    if rules_for(rules).isr_expand_needs_epoch_start:  # KAFKA-7128
        cand &= leo >= array(replicas, "epoch_start_offset")[rp]
    if not cand.any():
        return replicas, remotes, empty(ISR_CHANGE)
    rows = np.flatnonzero(ok)[cand]
    pick = pd.DataFrame({"_pos": pos[rows], "_row": rows, "_who": array(remotes, "replica")[rows]})
    pick = pick.sort_values(["_pos", "_who"], kind="stable").drop_duplicates("_pos")
    p = array(pick, "_pos")
    new_isr = [csv([*ids(s), w]) for s, w in zip(_strs(replicas["isr"])[p], pick["_who"], strict=True)]
    replicas = with_values(replicas, "pending_isr", p, np.array(new_isr, dtype=object))
    remotes = with_values(remotes, "in_isr", array(pick, "_row"), True)
    return replicas, conform(remotes, REMOTE, copy=False), _proposals(replicas.iloc[p], new_isr, "expand")


def out_of_sync_replicas(
    replicas: pd.DataFrame, remotes: pd.DataFrame, now: int, cfg: RoundSettings, rules: Rules | str
) -> pd.DataFrame:
    """Partition.getOutOfSyncReplicas: the followers in each led partition's committed ISR that
    are out of sync now (KEY + `replica`), whether or not a shrink check is due.

    From 0.10.2 (profiles "0.10".."2.0"): now - lastCaughtUp > replica.lag.time.max.ms (strict).
    From 2.1 (KAFKA-7152) a follower whose LEO equals the leader's is never out of sync.
    0.8 (before KAFKA-1546): its LEO was not set by a fetch for replica.lag.time.max.ms, or (LEO
    known) it is more than replica.lag.max.messages behind the leader's LEO.
    """
    cols = [*KEY, "replica"]
    replicas = positional(replicas)
    if replicas.empty or remotes.empty:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in REMOTE.items() if c in cols})
    pos = locate(replicas, remotes)
    ok = pos >= 0
    ok[ok] = _leaders(replicas)[pos[ok]]
    rows = np.flatnonzero(ok)  # the remotes of led partitions, read as arrays (no frame of them)
    rp = pos[rows]

    def remote(c: str) -> np.ndarray:
        return array(remotes, c)[rows]

    who = remote("replica")
    # _member reads a null ISR (None, NaN) as no member, as it reads the "" _strs makes of it
    in_isr = _member(array(replicas, "isr")[rp], who) & (who != array(replicas, "broker")[rp])
    lag = cfg.replica_lag_time_max_ms
    leo = remote("leo")
    leader_leo = array(replicas, "leo")[rp]
    rules = rules_for(rules)
    if rules.isr_lag_by_messages:
        stuck = (now - remote("leo_changed_ms")) > lag
        slow = (leo >= 0) & (leader_leo - leo > cfg.replica_lag_max_messages)
        out = stuck | slow
    else:
        out = (now - remote("last_caught_up_ms")) > lag
        if rules.isr_equal_leo_in_sync:  # KAFKA-7152
            out &= leo != leader_leo
    return select(remotes, cols, rows[in_isr & out])


def maybe_shrink_isr(
    replicas: pd.DataFrame, remotes: pd.DataFrame, now: int, cfg: RoundSettings, rules: Rules | str
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The broker's isr-expiration task, Partition.maybeShrinkIsr.
    Returns (replicas, proposals).

    The check runs on a led partition when it never ran or replica.lag.time.max.ms / 2 has passed
    since it last did (the whole lag before 0.10.2, KAFKA-4485: our 0.8 profile), and records
    `isr_check_ms`. A stuck follower therefore leaves between 1.0x and 1.5x the lag after it last
    caught up (1x-2x on 0.8). Partitions with a change in flight are skipped. All out-of-sync
    followers go in one change; the leader always stays, so the ISR never becomes empty. The shrink
    is only pending: the removed followers keep counting in the maximal ISR (and holding the HW)
    until it commits.
    """
    replicas = positional(replicas)
    if replicas.empty:
        return replicas, empty(ISR_CHANGE)
    lag = int(cfg.replica_lag_time_max_ms)
    rules = rules_for(rules)
    period = lag // rules.isr_check_period_divisor
    last = array(replicas, "isr_check_ms")
    due = _leaders(replicas) & ((last < 0) | (now - last >= period))
    if not due.any():
        return replicas, empty(ISR_CHANGE)
    replicas = with_values(replicas, "isr_check_ms", due, now)
    run = due & _no_change(replicas)
    gone = out_of_sync_replicas(select(replicas, [*KEY, "leader", "isr", "leo"], run), remotes, now, cfg, rules)
    if gone.empty:
        return replicas, empty(ISR_CHANGE)
    removed = gone.groupby(KEY)["replica"].agg(lambda s: set(s.tolist())).reset_index()
    p = locate(replicas, removed)
    new_isr = [csv(i for i in ids(s) if i not in out) for s, out in
               zip(_strs(replicas["isr"])[p], removed["replica"], strict=True)]
    keep = np.array([s != "" for s in new_isr], dtype=bool)
    p = p[keep]
    new_isr = [s for s, k in zip(new_isr, keep, strict=True) if k]
    replicas = with_values(replicas, "pending_isr", p, np.array(new_isr, dtype=object))
    return replicas, _proposals(replicas.iloc[p], new_isr, "shrink")


def apply_isr_results(
    replicas: pd.DataFrame, remotes: pd.DataFrame, results: pd.DataFrame, now: int
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, int]]:
    """The leader handles the answers to its ISR changes (Partition.handleAlterIsrResponse). Returns
    (replicas, remotes, counts) with counts = {isr_shrinks, isr_expands, failed_isr_updates}.

    A result is ignored when the replica no longer leads, has no change pending, or is at another
    leader epoch (a LeaderAndIsr came in between); a success whose zk_version is not above the
    local one is ignored too and leaves the change pending (counted as a failure, as Kafka's
    markFailed). A success commits: isr and zk_version from the result, nothing pending, in_isr :=
    membership of the new ISR (followers a shrink removed stop counting for the HW, so the caller
    should recompute the HW next). FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION and
    UNKNOWN_TOPIC_OR_PARTITION (AlterIsr, 2.7+) leave the change pending: no more ISR changes until
    the next LeaderAndIsr. Any other error drops the change (pending cleared, in_isr back to the
    committed ISR) so it is tried again: BADVERSION, the failed ZK write before 2.7, at the next
    shrink check or expansion; an AlterIsr error that Kafka resends (e.g. NETWORK_EXCEPTION) also
    makes the next shrink check run at once. `now` is unused.
    """
    del now
    counts = {"isr_shrinks": 0, "isr_expands": 0, "failed_isr_updates": 0}
    replicas = positional(replicas)
    if results.empty or replicas.empty:
        return replicas, remotes, counts
    res = results.drop_duplicates(KEY, keep="last").reset_index(drop=True)
    pos = locate(replicas, res)
    found = pos >= 0
    res, pos = res[found].reset_index(drop=True), pos[found]
    pending = _strs(replicas["pending_isr"])[pos]
    live = (_leaders(replicas)[pos] & (pending != "")
            & (array(res, "leader_epoch") == array(replicas, "leader_epoch")[pos]))
    err = array(res, "error")
    ok = live & pd.isna(err)
    stale = ok & (array(res, "zk_version") <= array(replicas, "zk_version")[pos])
    commit = ok & ~stale
    failed = live & ~ok
    stay = failed & np.isin(err.astype(str), STAY_PENDING)
    drop = failed & ~stay
    counts["failed_isr_updates"] = int(stale.sum() + failed.sum())
    replicas = replicas.copy()
    if commit.any():
        cp = pos[commit]
        old = isr_size(replicas["isr"].iloc[cp])
        new = isr_size(res["isr"][commit])
        counts["isr_expands"] = int((new > old).sum())
        counts["isr_shrinks"] = int((new < old).sum())
        replicas.loc[cp, "isr"] = array(res, "isr")[commit]
        replicas.loc[cp, "zk_version"] = array(res, "zk_version")[commit]
        replicas.loc[cp, "pending_isr"] = ""
    if drop.any():
        replicas.loc[pos[drop], "pending_isr"] = ""
        resend = drop & (err.astype(str) != BADVERSION)
        replicas.loc[pos[resend], "isr_check_ms"] = -1
    changed = pos[commit | drop]
    replicas = conform(replicas, REPLICA)
    if len(changed) and len(remotes):
        remotes = remotes.reset_index(drop=True).copy()
        rp = locate(replicas.iloc[changed].reset_index(drop=True), remotes)
        hit = rp >= 0
        isr = _strs(replicas["isr"].iloc[changed])[rp[hit]]
        remotes.loc[hit, "in_isr"] = _member(isr, array(remotes, "replica")[hit])
        remotes = conform(remotes, REMOTE)
    return replicas, remotes, counts


def _gauges(replicas: pd.DataFrame, min_isr: pd.Series) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(the led partitions' rows, each gauge of `isr_gauges` as a boolean per led partition)."""
    lead = np.flatnonzero(_leaders(replicas))

    def led(c: str) -> np.ndarray:
        return array(replicas, c)[lead]

    isr, rf, mi = isr_sizes(replicas)[lead], isr_sizes(replicas, "replicas")[lead], per_topic(led("topic"), min_isr, 1)
    return lead, {"under_replicated": isr < rf, "under_min_isr": isr < mi, "at_min_isr": isr == mi}


def isr_gauges(replicas: pd.DataFrame, min_isr: pd.Series) -> pd.DataFrame:
    """Partition's gauges per led partition (Partition's UnderReplicated, UnderMinIsr, AtMinIsr), on the
    committed ISR: under_replicated (|ISR| < |replicas|), under_min_isr (|ISR| < min.insync.replicas of the
    topic, `min_isr` indexed by topic; 1 when absent) and at_min_isr (|ISR| == it)."""
    lead, gauges = _gauges(replicas, min_isr)
    return pd.DataFrame({**{c: array(replicas, c)[lead] for c in ("broker", "topic", "partition")}, **gauges})


def isr_gauge_counts(replicas: pd.DataFrame, min_isr: pd.Series) -> dict[str, int]:
    """How many led partitions each gauge of `isr_gauges` holds for (a round's summary: no frame built)."""
    return {g: int(v.sum()) for g, v in _gauges(replicas, min_isr)[1].items()}
