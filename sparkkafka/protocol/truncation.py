"""Follower log truncation on becoming follower.

This version applies the pre-0.11 rule to every profile (ReplicaManager.makeFollowers, protocol.md
5.5 V-HW): a replica that becomes a follower of a new leader epoch truncates its log to its own
high watermark before fetching. The leader-epoch rules (KIP-101/279/320, divergence on fetch)
replace it per inter.broker.protocol.version in later work.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .frames import KEY, REPLICA, conform, locate, take

CUTS = ["broker", "topic", "partition", "log_dir", "offset"]


def new_followers(before: pd.DataFrame, after: pd.DataFrame) -> np.ndarray:
    """Rows of `after` that became followers in a new leader epoch (makeFollower ran)."""
    old_epoch = take(before, "leader_epoch", locate(before, after), -2)
    follower = (after["leader"].to_numpy() >= 0) & (after["leader"].to_numpy() != after["broker"].to_numpy())
    return follower & (after["leader_epoch"].to_numpy() != old_epoch)


def truncate_to_hw(replicas: pd.DataFrame, mask: np.ndarray) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Truncate the selected replicas to their HW. Returns (replicas, cuts): each cut removes the
    replica's records at offset >= `offset` from its log."""
    sel = mask & (replicas["leo"].to_numpy() > replicas["hw"].to_numpy())
    cuts = replicas.loc[sel, CUTS[:-1]].assign(offset=replicas.loc[sel, "hw"].to_numpy())
    if not sel.any():
        return replicas, cuts.reset_index(drop=True)
    r = replicas.copy()
    r.loc[sel, "leo"] = r.loc[sel, "hw"]
    r.loc[sel, "last_fetched_epoch"] = -1  # unknown until the epoch cache lands (leader-epoch work)
    return conform(r, REPLICA), cuts.reset_index(drop=True)


def drop_cut_records(records: pd.DataFrame, cuts: pd.DataFrame) -> pd.DataFrame:
    """In-memory records (a leader's tail) of cut replicas at or above the cut offset go too."""
    if records.empty or cuts.empty:
        return records
    c = cuts.groupby(KEY, as_index=False)["offset"].min().rename(columns={"offset": "_cut"})
    m = records.merge(c, on=KEY, how="left")
    keep = m["_cut"].isna().to_numpy() | (m["offset"].to_numpy() < m["_cut"].fillna(0).to_numpy())
    return records[keep].reset_index(drop=True)
