"""The idle jump on the executors: the brokers' rows as an idle cluster's would be some rounds later.

The driver decides a jump (driver/idle_jumps.py) when the last round's tasks all reported quiescence
(protocol/idle.py) and nothing needs the driver for whole fetch cycles; this function, mapped over
the brokers' state before the next round (in the same Spark job), moves their times along
(idle.shift_time) and rewrites the HW checkpoints the skipped rounds would have rewritten (the same
HWs: nothing moved). Rows of other kinds pass through unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pandas as pd

from ..protocol import broker as B
from ..protocol import idle
from ..storage import broker_disk
from . import rows as W


@dataclass(frozen=True)
class IdleJump:
    """The picklable function given to mapInPandas: skip `rounds` rounds after the round at `last_ms`."""

    rounds: int
    last_ms: int
    round_no: int  # the first round skipped: the files the jump writes are its versions (broker_disk)
    brokers_dir: str
    facts: B.RoundFacts  # the settings and the cluster's facts, as the round before the jump had them

    def __call__(self, batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        frames = [b for b in batches if len(b)]
        if frames:
            yield jump_wire(self, W.concat(frames))


def _checkpoint(j: IdleJump, brokers: list[int], replicas: pd.DataFrame, futures: pd.DataFrame) -> None:
    """replication-offset-checkpoint of every live dir of `brokers`, as their round writes it."""
    for e in B.hw_checkpoints(j.facts, replicas, futures, brokers):
        broker_disk.write_hw_checkpoint(j.brokers_dir, e.broker, e.log_dir, e.entries, j.round_no)


def jump_wire(j: IdleJump, wire: pd.DataFrame) -> pd.DataFrame:
    """The wire rows of one task `j.rounds` idle rounds later."""
    k = W.split(wire)
    before = k[W.BROKER]
    (k[W.REPLICA], k[W.REMOTE], k[W.PARKED_FETCH], k[W.FETCH], k[W.FETCH_RESPONSE], k[W.BROKER]) = idle.shift_time(
        k[W.REPLICA], k[W.REMOTE], k[W.PARKED_FETCH], k[W.FETCH], k[W.FETCH_RESPONSE], before, j.rounds,
        j.last_ms, j.facts.cfg, j.facts.unreachable)
    moved = k[W.BROKER]["hw_checkpoint_ms"].to_numpy() != before["hw_checkpoint_ms"].to_numpy()
    _checkpoint(j, sorted(int(b) for b in before["broker"].to_numpy()[moved]), k[W.REPLICA], k[W.FUTURE])
    return W.pack_all(list(k.items()))


__all__ = ["IdleJump", "jump_wire"]
