"""Follower log truncation, per inter.broker.protocol.version (KIP-101, KIP-279, KIP-595;
AbstractFetcherThread.truncateToEpochEndOffsets).

* 0.8/0.10 (ReplicaManager.makeFollowers): a replica that becomes follower of a new leader truncates
  its log to its own high watermark, then fetches from there.
* 0.11-2.7: it enters the fetcher in the Truncating state and asks the leader OffsetsForLeaderEpoch
  (offsets_for_leader_epoch.py); an empty cache truncates to the HW at once.
* 2.8 (KAFKA-10554): with a non-empty cache it fetches straight from its LEO with lastFetchedEpoch and
  truncates when the leader answers with a DivergingEpoch (fetch.py).
Before 2.1 (KAFKA-7164) only a change of leader restarts the fetcher; from 2.1 any new leader epoch does.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import leader_epoch
from .frames import FETCHING, KEY, REPLICA, TRUNCATING, array, conform, empty, locate, take
from .rules import Rules, rules_for

CUTS = ["broker", "topic", "partition", "log_dir", "offset"]


def on_leader_and_isr(before: pd.DataFrame, after: pd.DataFrame, rules: Rules | str
                      ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """What becoming leader or follower does to the logs, given the replicas before and after
    LeaderAndIsr (leader_and_isr.become_leader_or_follower): a new leader epoch's leader records its
    epoch start (leader_epoch.on_become_leader, KAFKA-7415); a replica whose fetcher makeFollower
    (re)starts (a new leader epoch with another leader or, from 2.1 (KAFKA-7164), any new leader
    epoch) enters it as its profile does (become_follower). Returns (replicas, cuts)."""
    rules = rules_for(rules)
    after = after.reset_index(drop=True)
    pos = locate(before, after)
    new_epoch = array(after, "leader_epoch") != take(before, "leader_epoch", pos, -2)
    leader, broker = array(after, "leader"), array(after, "broker")
    after = leader_epoch.on_become_leader(after, (leader == broker) & new_epoch, rules)
    if not rules.restart_fetcher_on_new_epoch:  # KAFKA-7164
        new_epoch &= leader != take(before, "leader", pos, -2)
    return become_follower(after, (leader >= 0) & (leader != broker) & new_epoch, rules)


def no_cuts() -> pd.DataFrame:
    """An empty cuts frame (broker, topic, partition, log_dir, offset)."""
    return empty({c: REPLICA.get(c, "int64") for c in CUTS})


def truncate(replicas: pd.DataFrame, pos: np.ndarray, offsets: np.ndarray) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Log.truncateTo(offset) for the replicas at positions `pos`: records at and above the offset go,
    LEO and HW come down to it (HW = min(HW, offset)), so does the recovery point, and the epoch cache
    is cut (truncateFromEnd, even when nothing is removed). Returns (replicas, cuts)."""
    pos = np.asarray(pos, dtype="int64")
    offsets = np.asarray(offsets, dtype="int64")
    if len(pos) == 0:
        return replicas, no_cuts()
    r = leader_epoch.on_truncate(replicas.reset_index(drop=True), pos, offsets)
    leo = array(r, "leo")[pos]
    cut = offsets < leo
    cuts = r.iloc[pos[cut]][CUTS[:-1]].assign(offset=offsets[cut]).reset_index(drop=True)
    for col in ("leo", "hw", "recovery_point"):
        v = array(r, col).copy()
        v[pos] = np.minimum(v[pos], offsets)
        r[col] = v
    return conform(r, REPLICA), cuts


def become_follower(replicas: pd.DataFrame, mask: np.ndarray, rules: Rules | str
                    ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Put the new followers in `mask` into the fetcher as their profile does (see the module text):
    truncate_to_hw (or an empty cache) -> to the HW now; leader_epoch_exchange without fetch_divergence
    -> Truncating (OffsetsForLeaderEpoch); fetch_divergence -> Fetching with lastFetchedEpoch.
    Returns (replicas, cuts)."""
    rules = rules_for(rules)
    r = replicas.reset_index(drop=True)
    has_cache = r["epoch_cache"].astype(str).str.len().to_numpy() > 0
    to_hw = mask & (~has_cache | rules.truncate_to_hw)
    state = array(r, "fetch_state").copy()
    state[mask] = FETCHING
    if rules.leader_epoch_exchange and not rules.fetch_divergence:
        state[mask & ~to_hw] = TRUNCATING
    r["fetch_state"] = state
    pos = np.flatnonzero(to_hw)
    return truncate(r, pos, array(r, "hw")[pos])


def drop_cut_records(records: pd.DataFrame, cuts: pd.DataFrame) -> pd.DataFrame:
    """In-memory records (a leader's tail) of cut replicas at or above the cut offset go too."""
    if records.empty or cuts.empty:
        return records
    c = cuts.groupby(KEY, as_index=False)["offset"].min().rename(columns={"offset": "_cut"})
    m = records.merge(c, on=KEY, how="left")
    keep = m["_cut"].isna().to_numpy() | (array(m, "offset") < m["_cut"].fillna(0).to_numpy())
    return records[keep].reset_index(drop=True)
