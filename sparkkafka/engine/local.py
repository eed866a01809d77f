"""The in-process engine (`emulator.engine: local`): the whole cluster's round in one Python process.

The round engine runs each round as one Spark job: the brokers' rows are shuffled into a few tasks,
each task runs `broker_round.process` on its brokers, and the driver collects the rows meant for it.
Here the same `process` runs once over all the brokers' rows, held as one pandas frame, with no
Spark job: the driver's part (events, controller, produce batches, Delta commits through delta-rs,
the checker) is unchanged. A round's output does not depend on how brokers are grouped into tasks
(every broker is stepped on its own rows; messages reach their destination only in the next round),
so a run gives the same tables as on the round engine. It is what a fault campaign runs inside each
Spark task (campaign.py): a small cluster per task, thousands of rounds without a Spark job each.
"""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..storage.tables import LogSnapshot
from . import rows as W
from .broker_round import RoundParams, WindowFiles, process
from .idle_jump import IdleJump, jump_wire
from .resident import partitioned

STATE_FILE = "part-00000.parquet"


def route(wire: pd.DataFrame, crashed: set[int], isolations: list) -> pd.DataFrame:
    """RoundLoop.route on pandas: last round's rows less the driver's, the memory of crashed brokers and
    everything sent to them, and the messages a network partition (brokers, cut off from, until) cuts."""
    kind, dst = wire["kind"].to_numpy(), wire["broker"].to_numpy()
    keep = np.isin(kind, W.CARRY_KINDS) & ~np.isin(dst, sorted(crashed))
    keep &= ~(np.isin(kind, W.MESSAGE_KINDS) & partitioned(wire["src"].to_numpy(), dst, isolations))
    return wire[keep]


def run_round(p: RoundParams, wire: pd.DataFrame, held: WindowFiles | None = None
              ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One round over every broker's rows: (the rows kept for the next round, the rows for the driver).
    No rows, no round (as a Spark task that gets none runs nothing). `held`: the log and history rows of
    earlier rounds not written yet, which this round's appends join (the driver writes them at its
    commit points, RoundLoop.commit_held): one file per broker and dir for many rounds instead of one a
    round, as a resident window writes them."""
    if held is not None and not isinstance(p.log_version, LogSnapshot):
        p = replace(p, log_version=LogSnapshot(int(p.log_version)))
    out = process(p, wire, held) if len(wire) else W.pack_all([])
    kinds = out["kind"].to_numpy()
    return (out[np.isin(kinds, W.CARRY_KINDS)].reset_index(drop=True),
            out[np.isin(kinds, W.DRIVER_KINDS)].reset_index(drop=True))


def jump(fn: IdleJump, state: pd.DataFrame) -> pd.DataFrame:
    """The idle jump (engine/idle_jump.py) applied to the brokers' rows at once."""
    return jump_wire(fn, state) if len(state) else state


def save_state(state: pd.DataFrame, folder: str) -> None:
    """The brokers' rows as one Parquet file of the wire schema (Spark reads it as the round engine's)."""
    os.makedirs(folder, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(state, schema=W.ARROW_SCHEMA, preserve_index=False),
                   os.path.join(folder, STATE_FILE))


def load_state(folder: str) -> pd.DataFrame:
    """Saved brokers' rows (by either engine) as a wire frame."""
    t = pq.read_table(folder, schema=W.ARROW_SCHEMA)
    return W.pack_all([]) if t.num_rows == 0 else t.to_pandas().astype(W.pack_all([]).dtypes.to_dict())


__all__ = ["jump", "load_state", "route", "run_round", "save_state"]
