"""High-watermark rules: Partition.maybeIncrementLeaderHW and the follower's
HW = min(leader HW in the response, own LEO) (ReplicaFetcherThread.processPartitionData). Vectorised over many
replicas.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .frames import array, locate
from .rules import Rules, rules_for


def counts_for_hw(remotes: pd.DataFrame, rules: Rules | str, lag_ms: int, now: int) -> np.ndarray:
    """Which remote replicas hold the leader's HW back.

    0.8: ISR members only. From 0.10.2 (KAFKA-4485, our 0.10 profile on) also a follower outside
    the ISR that caught up within replica.lag.time.max.ms, so a leader-only ISR cannot run away
    from a follower about to rejoin.
    """
    in_isr = remotes["in_isr"].to_numpy(dtype=bool)
    if not rules_for(rules).hw_counts_caught_up_followers:
        return in_isr
    recent = (now - array(remotes, "last_caught_up_ms")) <= lag_ms
    # Kafka resets lastCaughtUpTimeMs to 0 (the epoch) for "never"; emulated time starts at 0, so
    # the emulator uses -1 for never.
    return in_isr | (recent & (array(remotes, "last_caught_up_ms") >= 0))


def maybe_increment_leader_hw(
    replicas: pd.DataFrame, remotes: pd.DataFrame, rules: Rules | str, lag_ms: int, now: int
) -> pd.DataFrame:
    """Raise each leader's HW to the minimum LEO over itself and the remotes that count.

    An unknown remote LEO (-1, right after becoming leader) keeps the HW where it is until that
    follower fetches. The leader's HW never decreases and never exceeds its LEO.
    """
    leaders = array(replicas, "leader") == array(replicas, "broker")
    if not leaders.any():
        return replicas
    cand = array(replicas, "leo").copy()
    if len(remotes):
        counts = counts_for_hw(remotes, rules, lag_ms, now)
        if counts.any():
            pos = locate(replicas, remotes)
            hit = counts & (pos >= 0)
            np.minimum.at(cand, pos[hit], array(remotes, "leo").astype("int64")[hit])
    hw = array(replicas, "hw")
    new = np.where(leaders & (cand > hw), cand, hw)
    out = replicas.copy(deep=False)  # only hw changes: a new column, the others shared
    out["hw"] = new.astype("int64")
    return out


def follower_hw(leader_hw: np.ndarray, leo: np.ndarray, log_start: np.ndarray) -> np.ndarray:
    """Follower HW after appending a fetch response: the leader's HW clamped into [logStart, LEO].

    It may go down (Kafka only logs a warning), which is how a follower learns of truncation.
    """
    return np.maximum(np.minimum(leader_hw, leo), log_start)

