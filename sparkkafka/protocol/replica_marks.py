"""The replica_state rows a broker's round makes that the durability checker must look at again
(scenario/checker.py), judged where the rows are made: each replica's row of this round against its
row as the round found it. Most rounds mark nothing, so the run's end reads the history of the few
partitions marked, not the history of every replica (replica_state holds one row per replica per round).

A mark is a necessary condition of a checker rule on the replica's row, so the partitions marked
hold every violation of the replica_state rules (a superset; the checker then judges their whole
history with the same rules as a full audit):

* ``APPEARED``: a replica not in the broker's state when the round began (created, reassigned, or
  loaded by a restarting broker, LogManager.loadLogs): its previous row, if any, is not the broker's.
* ``CLAIMED``: a leader row of a leader epoch the replica did not lead when the round began (the
  replica_state side of UniqueLeaderPerEpoch: its first leader row of that epoch).
* ``SUSPECT``: HW above LEO (HwWithinLeo), or a leader's HW below its HW of the round before in the same
  leader epoch (LeaderHwMonotonic, Partition.maybeIncrementLeaderHW never moves it back).
* ``LEO_DROP``: LEO below its LEO when the round began (a truncation, StrongIsr's first condition).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import frames as F

APPEARED, CLAIMED, SUSPECT, LEO_DROP = 1, 2, 4, 8
MARKS = "replica_marks"  # the round summary's key of the mark rows
COLUMNS = ["topic", "partition", "broker", "leader_epoch", "marks"]  # what a mark row holds (and `round`)


def replica_marks(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """The marked rows of `after` (the replicas whose replica_state rows the round writes) against
    `before` (the same brokers' replicas as the round found them): COLUMNS, `marks` the bits above."""
    at = F.locate(before, after)
    new = at < 0
    pick = np.where(new, 0, at)

    def was(c: str) -> np.ndarray:
        return F.array(before, c)[pick] if len(before) else np.zeros(len(after), F.array(after, c).dtype)

    broker, leader, epoch = F.array(after, "broker"), F.array(after, "leader"), F.array(after, "leader_epoch")
    leo, hw = F.array(after, "leo"), F.array(after, "hw")
    leads = leader == broker
    led = ~new & (was("leader") == broker) & (was("leader_epoch") == epoch)  # same leader epoch as before
    marks = (np.where(new, APPEARED, 0) | np.where(leads & ~led, CLAIMED, 0)
             | np.where((hw > leo) | (leads & led & (hw < was("hw"))), SUSPECT, 0)
             | np.where(~new & (leo < was("leo")), LEO_DROP, 0))
    keep = marks != 0
    if not keep.any():
        return pd.DataFrame({c: [] for c in COLUMNS})
    return pd.DataFrame({"topic": F.array(after, "topic")[keep], "partition": F.array(after, "partition")[keep],
                         "broker": broker[keep], "leader_epoch": epoch[keep], "marks": marks[keep]})


def to_summary(marks: pd.DataFrame) -> dict[str, list]:
    """Mark rows as the round summary's JSON (column lists)."""
    return {c: marks[c].tolist() for c in COLUMNS}


def from_summaries(parts: list[tuple[int, dict[str, list]]]) -> pd.DataFrame:
    """The mark rows of round summaries ((round, to_summary's dict) each) as one frame with `round`."""
    frames = [pd.DataFrame(d).assign(round=r) for r, d in parts if d and len(d["topic"])]
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype="int64" if c != "topic" else object) for c in ["round", *COLUMNS]})
    out = pd.concat(frames, ignore_index=True)
    return out.astype({"round": "int64", "partition": "int64", "broker": "int64", "leader_epoch": "int64",
                       "marks": "int64"})[["round", *COLUMNS]]
