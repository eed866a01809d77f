"""The resident engine: many rounds per Spark job, broker state kept in the tasks between rounds.

The round engine (one Spark job per round) pays a shuffle, a job and a Delta commit every 100 ms of
emulated time. Here one barrier stage (`mapInPandas(..., barrier=True)`) runs a window of rounds:
each task keeps the rows of the brokers it hosts (broker b in task b % tasks, the placement
`repartitionById` gives) in memory, runs the same round as the round engine (broker_round.process)
and hands each round's messages to the tasks hosting their destination over the mesh of
engine/exchange.py. The driver chose the window so that nothing in it needs the driver: no timeline
event and no controller tick that acts falls inside it; requests the controller only delivers in a round
of it come with the window, in a file per task and round (IdleJumps.plan_window, write_inbox). A task whose round produced
something only the driver can act on (an AlterIsr / ISR change proposal, an offline replica, an
AlterReplicaLogDirs answer, a broker that exits) says so in its exchange header, and every task
stops after that round, so the driver sees it in the same round as the round engine would.

What a window returns is what the round engine's last round would have returned: the brokers' state
and the messages in flight to them (now on the task that hosts their destination), plus every round's
rows for the driver (file actions, per-round summaries tagged with their round). Steady producers are
generated inside the tasks from a copy of the driver's Workload (deterministic: the same record ids
and batches as the driver would send), each task keeping the batches for partitions led by its
brokers, so no produce batch is uploaded per round. Log files written in earlier rounds of the window
are not committed yet; the rounds read the log through a LogSnapshot with the task's own actions on
top (storage/tables.py).
"""

from __future__ import annotations

import contextlib
import gc
import os
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..protocol import idle
from ..protocol.broker import present_brokers
from ..protocol.config import EMULATOR_DEFAULTS
from ..protocol.frames import PRODUCE, concat, leaders_by_key, owned
from ..storage.tables import LogSnapshot, table_path, write_file
from . import rows as W
from .broker_round import (
    STATE,
    RoundParams,
    WindowFiles,
    executed,
    side_rows,
    stepped,
    unpack_inbox,
    unpack_state,
    wire_parts,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# what only the driver can act on: a window stops after the round that made any of it
STOP_KINDS = (W.ISR_CHANGE, W.OFFLINE_REPLICA, W.ALTER_LOG_DIRS_RESPONSE)


@dataclass(frozen=True)
class Window:
    """What the tasks need for a window of rounds starting at `first.round_no` (everything pickled
    with the function: nothing lives only in the driver's memory)."""

    first: RoundParams  # the first round's parameters; later rounds advance round_no, now and the log snapshot
    rounds: int  # at most this many rounds
    round_ms: int
    workload: object | None  # scenario.workload.Workload as it is after the first round's batches
    leaders: pd.DataFrame  # topic, partition, leader: ZooKeeper's leaders, fixed in the window
    crashed: frozenset  # brokers down: what is sent to them is lost
    isolations: tuple  # (side a, side b) pairs cut from each other for the whole window
    inbox: str | None = None  # the folder of the driver's messages (write_inbox); None: none
    sends: tuple = ()  # the rounds (offsets in the window) the driver has messages for, in `inbox`
    ticks: tuple = ()  # the rounds (offsets) of the controller's ticks run ahead (IdleJumps.plan_window)
    jump_last: int | None = None  # RoundLoop.jump_last after those ticks: the window ends where the driver would jump
    cycle: int = 1  # rounds of the idle fetch cycle (idle.fetch_cycle_rounds)
    meet: str | None = None  # a new folder the tasks meet in (exchange.Mesh.rendezvous_files); None: allGather
    history_rows: int = EMULATOR_DEFAULTS["resident.history.rows"]  # history rows a task holds before writing them
    # brokers that crash in the window: (round offset, brokers, RoundFacts.unreachable from then on), in order
    # (IdleJumps.plan_window): the tasks drop their memory and what is sent to them from that round on
    crashes: tuple = ()


def driver_jumps(w: Window, headers: list[dict], next_round: int) -> bool:
    """Whether the driver would skip rounds from `next_round` on (RoundLoop.jump): every task's quiescence
    report of this round (in the exchange headers) says idle, no producer is left and whole fetch
    cycles fit before the next thing due. The window then ends, so that both engines jump alike."""
    if w.jump_last is None or w.workload is None or w.workload.active:
        return False
    totals: dict[str, int] = defaultdict(int)
    for h in headers:
        for k, v in h.get("idle", {}).items():
            totals[k] += int(v)
    # before a tick the driver's plan ran ahead or a crash, that round needs the driver (RoundLoop.jump_last)
    needs = [*w.ticks, *(k for k, *_ in w.crashes)]
    last = min([w.first.round_no + k for k in needs if w.first.round_no + k >= next_round], default=w.jump_last)
    return idle.cluster_idle(totals) and idle.jump_rounds(last - next_round, w.cycle) > 0


def less(frame: pd.DataFrame, brokers) -> pd.DataFrame:
    """`frame` less the rows of `brokers` (a crash's loss: the brokers' memory, what is sent to them), the
    frame itself when it has none of them."""
    gone = np.isin(frame["broker"].to_numpy(), sorted(brokers))
    return frame[~gone].reset_index(drop=True) if gone.any() else frame


def without(frames, brokers: tuple[int, ...]):
    """A BrokerState or Inbox less the rows of `brokers`: what a crash inside a window leaves of it, as
    `arrive` (and RoundLoop.route between jobs) filters the rows."""
    frames_of = {f.name: getattr(frames, f.name) for f in fields(frames)}
    return replace(frames, **{n: less(f, brokers) for n, f in frames_of.items()
                              if isinstance(f, pd.DataFrame) and "broker" in f.columns})


def partitioned(src: np.ndarray, dst: np.ndarray, isolations) -> np.ndarray:
    """Which (src, dst) pairs a network partition cuts: `isolations` holds (side a, side b) pairs, cut
    from each other both ways (further items of a pair, such as its end time, are ignored)."""
    cut = np.zeros(len(src), dtype=bool)
    for a, o, *_ in isolations:
        a, o = sorted(a), sorted(o)
        cut |= (np.isin(src, a) & np.isin(dst, o)) | (np.isin(src, o) & np.isin(dst, a))
    return cut


def route(msgs: dict[int, pd.DataFrame], crashed: frozenset, isolations: tuple) -> dict[int, pd.DataFrame]:
    """Messages (frames by wire kind) less those a crash or a network partition loses (as RoundLoop.route
    does between jobs; a message without a sender column counts as from no broker)."""
    if not crashed and not isolations:
        return msgs
    out = {}
    for kind, f in msgs.items():
        dst = f["broker"].to_numpy()
        src = f["src"].to_numpy() if "src" in f.columns else np.full(len(f), -1)
        out[kind] = f[~np.isin(dst, sorted(crashed)) & ~partitioned(src, dst, isolations)]
    return out


def arrive(carried: dict[int, pd.DataFrame], crashed: frozenset, isolations: tuple) -> dict[int, pd.DataFrame]:
    """A task's carried frames (by kind) less what was lost since its window ended, as RoundLoop.route
    filters them between jobs: everything of a crashed broker and sent to it, and the messages a network
    partition cuts (state such as a parked fetch is not a message: only a crash drops it)."""
    if not crashed and not isolations:
        return carried
    msgs = route({k: f for k, f in carried.items() if k in W.MESSAGE_KINDS}, crashed, isolations)
    return {k: msgs[k] if k in msgs else less(f, crashed) for k, f in carried.items()}


def _ids(brokers: frozenset[int]) -> np.ndarray:
    """Broker ids as the sorted int64 array `task_batches` screens leaders with."""
    return np.array(sorted(brokers), dtype="int64")


def task_batches(workload, now: int, leaders: pd.DataFrame, rank: int, tasks: int, crashed: np.ndarray
                 ) -> pd.DataFrame | None:
    """The round's produce batches for the live leaders that task `rank` (of `tasks`) hosts, routed as
    RoundLoop.produce_batches routes them (to the leader in ZooKeeper, fixed in the window; None: none).
    `workload` advances by every batch (record ids, round-robin cursors): each task makes them all, as the
    driver would, and builds rows only for its own."""
    cols = workload.batch_columns(now)
    if cols is None:
        return None
    to = leaders_by_key(leaders, cols["topic"], cols["partition"])
    mine = (to >= 0) & (to % tasks == rank) & ~np.isin(to, crashed)
    if not mine.any():
        return None
    return owned({c: (to if c == "broker" else v)[mine] for c, v in cols.items()}, PRODUCE)


def placing_rows(spark: SparkSession, tasks: int) -> DataFrame:
    """One wire row of kind PLACE per resident task (broker = its rank), nothing else: the tasks' Spark
    partitions exist even when there is no state yet (a new cluster), as Spark Connect plans no task
    for an empty input. Built by Spark itself (range), not sent from the driver."""
    from pyspark.sql import functions as Fn

    cols = [Fn.lit(W.PLACE).alias("kind"), Fn.col("id").alias("broker"),
            *[Fn.lit(None if t == "object" else W.DEFAULTS[t]).alias(c) for c, t in W.WIRE.items()
              if c not in ("kind", "broker")]]
    return spark.range(tasks).select(*cols).select(*[Fn.col(f.name).cast(f.dataType) for f in W.SPARK_SCHEMA.fields])


def window_job(inp: DataFrame, fn) -> DataFrame:
    """A window's Spark job over its placed input: `fn` (ResidentRounds) as one barrier stage, its output
    kept by a lazy local checkpoint for the next window (run by collecting `rows.driver_rows` of it)."""
    return inp.mapInPandas(fn, W.BLOB_SCHEMA, barrier=True).localCheckpoint(eager=False)


def _inbox_file(folder: str, rank: int, k: int) -> str:
    return os.path.join(folder, f"inbox-{rank}-{k}.arrow")


def write_inbox(folder: str, wires: dict[int, pd.DataFrame | None], tasks: int) -> tuple[str | None, tuple]:
    """The driver's messages for a window's rounds (round offset in the window -> packed wire rows, None:
    none) as one Arrow IPC file per task and round in `folder` (new per window, in the run directory every
    executor reaches): task r's file holds the rows of the brokers it hosts (broker % tasks == r). Returns
    the folder (None: no messages) and the offsets with messages. Pickled with the function instead, every
    task got every row; as a Spark input (createDataFrame), a new cluster's LeaderAndIsr for every replica
    went through the JVM and a shuffle (~2 s of the reference scenario's first window, whose task Spark
    flagged as 1.6 MB)."""
    sends = tuple(sorted(k for k, wire in wires.items() if wire is not None and len(wire)))
    if not sends:
        return None, ()
    os.makedirs(folder, exist_ok=True)
    for k in sends:
        table = pa.Table.from_pandas(wires[k], schema=W.ARROW_SCHEMA, preserve_index=False)
        rank = wires[k]["broker"].to_numpy() % tasks
        for r in range(tasks):
            with pa.OSFile(_inbox_file(folder, r, k), "wb") as sink, pa.ipc.new_file(sink, W.ARROW_SCHEMA) as out:
                out.write_table(table.filter(pa.array(rank == r)))
    return folder, sends


def read_inbox(w: Window, rank: int, k: int) -> pd.DataFrame | None:
    """Task `rank`'s part of the driver's messages for the window's round `k` (write_inbox), as wire rows
    (None: the driver sends nothing that round)."""
    if k not in w.sends:
        return None
    with pa.memory_map(_inbox_file(w.inbox, rank, k)) as source:
        return pa.ipc.open_file(source).read_all().to_pandas()


def merge_window_logs(tables_dir: str, snap: LogSnapshot, first: int, last: int) -> list[dict]:
    """Log actions that replace a window's own uncommitted files with one file per (broker, log_dir):
    the add of the merged file and a remove of each file it replaces (those never reach the table; the
    driver drops a file added and removed in one window). The round engine leaves one file per
    (broker, log_dir) per round; merged windows leave ~1/window-length as many, which keeps the log
    table's file list, and every read of it, small as a run grows (round 10,000 vs round 100:
    docs/benchmarks.md, "Long runs"). The replaced files are deleted: nothing refers to them."""
    groups: dict[tuple[int, str], list[dict]] = defaultdict(list)
    for a in snap.adds:
        pv = a["partition_values"]
        groups[(int(pv["broker"]), pv["log_dir"])].append(a)
    root = table_path(tables_dir, "log")
    out: list[dict] = []
    for (b, d), files in sorted(groups.items()):
        if len(files) < 2:
            continue
        data = pa.concat_tables([pq.ParquetFile(os.path.join(root, f["path"])).read() for f in files])
        out.append(write_file(tables_dir, "log", data, f"w{first:08d}-{last:08d}-b{b}", {"broker": b, "log_dir": d}))
        out += [{**f, "remove": True} for f in files]
        for f in files:
            os.remove(os.path.join(root, f["path"]))
    return out


@contextlib.contextmanager
def young_only() -> Iterator[None]:
    """Only the young generations of the cyclic garbage collector while a window's rounds run: automatic
    collection is off, and every `YOUNG_ROUNDS`-th round ends with `gc.collect(1)` (`collect_round`). A round
    leaves almost no cyclic garbage (136 objects in a whole reference run), but its allocations start a full
    collection every ~12 rounds, which walks all the brokers' state: ~40 ms each at 30,000 replicas a task,
    3.3 ms a round (0.9 ms at 4,500; timed on captured rounds). The daemon's collection after the task
    (fastdaemon) covers what is left."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


# Rounds between young collections. A round's state lives one round, so most of what a collection after every
# round walked was dead by the next one: every 10th round, the collections cost ~0.1 ms a round, not ~0.4 ms
# (reference scenario, 4,500 replicas a task).
YOUNG_ROUNDS = 10


def collect_round(spent: dict[str, float], k: int) -> None:
    """The end of the window's round `k` under `young_only`: the short-lived cycles of the last
    YOUNG_ROUNDS rounds, if any, collected after every YOUNG_ROUNDS-th round."""
    if (k + 1) % YOUNG_ROUNDS:
        return
    t = time.perf_counter()
    gc.collect(1)
    spent["resident.gc"] += time.perf_counter() - t


class ResidentRounds:
    """The function given to `mapInPandas(..., barrier=True)` for one window."""

    def __init__(self, window: Window) -> None:
        self.window = window

    def __call__(self, batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        from pyspark import BarrierTaskContext

        from .exchange import Mesh, collect_parts, post_parts

        w = self.window
        t0 = time.perf_counter()
        spent: dict[str, float] = defaultdict(float)  # the task's own time outside the rounds' steps, by phase
        ctx = BarrierTaskContext.get()
        mesh = Mesh.rendezvous(ctx) if w.meet is None else Mesh.rendezvous_files(ctx, w.meet)
        frames = [b for b in batches if len(b)]
        carried: dict[int, pd.DataFrame] = {}
        if frames and "blob" in frames[0].columns:  # the previous window's output, as its task left it
            parts, frames = W.blob_parts(frames)
            carried = arrive(W.by_kind(parts, empty=False), w.crashed, w.isolations)
        sent = read_inbox(w, mesh.rank, 0)
        if sent is not None:
            frames.append(sent)
        k0 = W.split(W.concat(frames), only=W.CARRY_KINDS)
        if carried:  # each kind's carried rows first, then the driver's: as one wire frame would give them
            k0 = W.by_kind([*carried.items(), *k0.items()])
        # the brokers' state stays unpacked between rounds; only messages are packed, for the exchange
        state, inbox = unpack_state(k0), unpack_inbox(k0)
        driver: list[tuple[int, pd.DataFrame]] = []  # the rows for the driver, by kind: packed once, at the end
        adds_all: list[dict] = []  # the rounds' file actions and summaries: rows for the driver, made at the end
        summaries: list[dict] = []  # (side_rows), not a frame each a round
        snap = LogSnapshot(int(w.first.log_version))
        held = WindowFiles(writer=mesh.rank)  # the window's log and history rows, written at its end
        msgs: dict[int, pd.DataFrame] = {}  # the messages in flight to this task's brokers, by kind
        down, first = w.crashed, w.first  # the brokers down, the round's parameters: as a crash in the window leaves them
        crashed = _ids(down)
        crashes = {k: (gone, cut) for k, gone, cut in w.crashes}
        ahead = None  # the next round's produce batches, made while this round waits for its messages
        spent["resident.start"] += time.perf_counter() - t0
        try:
            with young_only():
                for k in range(w.rounds):
                    t = time.perf_counter()
                    if k in crashes:  # brokers crash before this round, as the driver's events would have it
                        gone, cut = crashes[k]
                        down = down | frozenset(gone)
                        crashed = _ids(down)
                        first = replace(first, facts=replace(first.facts, unreachable=cut))
                        state, inbox = without(state, gone), without(inbox, gone)
                    now = w.first.now + k * w.round_ms
                    p = replace(first, round_no=w.first.round_no + k, now=now, log_version=snap)
                    if ahead is not None:  # made by the round before (the first round's came from the driver)
                        inbox, ahead = replace(inbox, produce=concat([inbox.produce, ahead], PRODUCE)), None
                    spent["resident.produce"] += time.perf_counter() - t
                    t = time.perf_counter()
                    done = None
                    if present_brokers(state, inbox):  # a task with no rows runs no round
                        done, p_done, adds = stepped(p, state, inbox, held)
                        parts, state, summary = wire_parts(done, [], side=False), done.state, done.outbox.summary
                    else:
                        parts, adds, summary = [], [], {"timings": {}, "halted": []}
                    spent["resident.round"] += time.perf_counter() - t
                    kinds = {kind for kind, f in parts if len(f)}
                    driver += [(kind, f) for kind, f in parts if kind in W.DRIVER_KINDS]
                    stop = bool(summary.get("halted")) or bool(kinds & set(STOP_KINDS))
                    report = {k: int(summary.get(k, 0)) for k in idle.KEYS}
                    # each kind travels in its own columns: no packing into the wire schema and splitting again
                    out = route(W.by_kind([(kind, f) for kind, f in parts if kind in W.MESSAGE_KINDS], empty=False),
                                down, w.isolations)
                    t = time.perf_counter()
                    sending = post_parts(mesh, out, "broker", {"stop": stop, "idle": report})
                    spent["resident.exchange"] += time.perf_counter() - t
                    t = time.perf_counter()
                    if w.workload is not None and k + 1 < w.rounds:  # the next round's batches, while messages travel
                        nxt = crashed if k + 1 not in crashes else _ids(down | frozenset(crashes[k + 1][0]))
                        ahead = task_batches(w.workload, now + w.round_ms, w.leaders, mesh.rank, mesh.size, nxt)
                    spent["resident.produce"] += time.perf_counter() - t
                    t = time.perf_counter()
                    if done is not None:  # the round's files while its messages travel and the other tasks step
                        adds = executed(p_done, done, "", held, adds)
                        if held.history_rows >= w.history_rows:  # written now: the task's memory stays bounded
                            adds = adds + held.flush(w.first.tables_dir, log=False)
                    spent["resident.round"] += time.perf_counter() - t
                    snap = snap.then(adds)
                    adds_all += adds
                    summaries.append({**summary, "round": p.round_no})
                    t = time.perf_counter()
                    headers, got = collect_parts(sending)
                    spent["resident.exchange"] += time.perf_counter() - t
                    # only the kinds that came: unpack_inbox makes the inbox's others empty, not every kind's
                    arrived = W.by_kind(((kind, f) for kind, pieces in got.items() for f in pieces), empty=False)
                    msgs = arrived
                    collect_round(spent, k)
                    if any(h.get("stop") for h in headers) or driver_jumps(w, headers, p.round_no + 1):
                        break
                    sent = read_inbox(w, mesh.rank, k + 1)
                    if sent is not None:  # the controller's requests for the next round, after the brokers' messages
                        arrived = W.by_kind([*arrived.items(), *W.split(sent, only=W.CARRY_KINDS).items()])
                    inbox = unpack_inbox(arrived)
        finally:
            mesh.close()
        t = time.perf_counter()
        written = held.flush(w.first.tables_dir)
        snap = snap.then(written)
        t1 = time.perf_counter()
        merged = written + merge_window_logs(w.first.tables_dir, snap, w.first.round_no, p.round_no)
        t2 = time.perf_counter()
        blobs = W.state_blobs({**{kind: getattr(state, f) for f, kind in STATE.items()}, **msgs})
        t3 = time.perf_counter()
        spent["resident.end"] += t3 - t  # of which: the held rows' files, the log's merge, the state's blobs
        spent["resident.end.write"] += t1 - t
        spent["resident.end.merge"] += t2 - t1
        spent["resident.end.blobs"] += t3 - t2
        # the window's own costs (start, producers, exchange, end) as one more summary of its last round
        driver += side_rows(adds_all + merged, [*summaries, {"round": p.round_no, "timings": spent}])
        yield concat([blobs, W.pack_all(driver).assign(blob=None)], W.BLOB_WIRE)
