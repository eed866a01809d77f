"""An imported cluster's logs, written before its brokers start (scenario ``topics[].state``).

A run of an imported cluster begins as a restart of every broker with data on disk: the ``log`` table
holds each replica's records, and each log dir holds what LogManager loads at startup (the dir's
``partitions``/``future-partitions`` listings, ``replication-offset-checkpoint``, the logs'
leader-epoch checkpoints, the flushed offsets). The brokers then recover them as after any restart
(engine/broker_round._recover) and the controller, failing over onto the imported ZooKeeper state,
sends them LeaderAndIsr.

Sizes become records without payloads (``value`` null, ``value_bytes`` set, no key), laid out so that
every replica's size is exact and every offset holds the same record on every replica that has it:

* a partition is a byte stream; the ISR members (all replicas with a log if the ISR has none) end at its
  end E and start ``size`` bytes before it (retention left them slightly different starts);
* a replica out of the ISR, or an adding replica (KIP-455), starts where the oldest ISR member starts
  and has copied ``size`` bytes (it is behind the leader);
* a future log (KIP-113 move in flight) is the first ``size`` bytes of its current log;
* records are cut at every such start and end and every ``initial.record.bytes`` bytes between them,
  so offsets are shared and each replica's bytes are a whole number of records.

Every record has leader epoch 0 (each log's epoch cache is ``0 -> its start offset``); a replica's
checkpointed HW is the partition's HW (the ISR's end offset) clamped to its own log.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from ..storage import api as storage
from .model import PartitionStateSpec, TopicSpec


@dataclass(frozen=True)
class LogRange:
    """One log of the layout: [start, end) offsets, its HW (None for a future log: the current log's)."""

    broker: int
    log_dir: str
    topic: str
    partition: int
    start: int
    end: int
    hw: int
    is_future: bool


def partition_layout(state: PartitionStateSpec, record_bytes: int) -> tuple[np.ndarray, dict]:
    """(record sizes by offset, {(broker, is_future): (log_dir, start offset, end offset)}) of one partition."""
    logs = state.logs
    if not logs:
        return np.zeros(0, dtype="int64"), {}
    ref = [b for b in state.isr if b in logs] or list(logs)
    end = max(logs[b].size for b in ref)
    pos: dict[tuple[int, bool], tuple[int, int]] = {}
    for b in ref:
        pos[(b, False)] = (end - logs[b].size, end)
    oldest = min(a for a, _ in pos.values())
    for b, log in logs.items():
        if (b, False) not in pos:
            e = min(oldest + log.size, end)
            pos[(b, False)] = (e - log.size, e)
    for b, log in logs.items():
        if log.future_dir is not None:
            a_cur, e_cur = pos[(b, False)]
            e = min(a_cur + log.future_size, e_cur)
            pos[(b, True)] = (e - log.future_size, e)
    shift = min(a for a, _ in pos.values())
    cuts = {x - shift for ae in pos.values() for x in ae}
    lo, hi = min(cuts), max(cuts)
    grid = np.arange(lo, hi, record_bytes, dtype="int64")
    bounds = np.unique(np.concatenate([grid, np.array(sorted(cuts), dtype="int64")]))
    index = {int(x): i for i, x in enumerate(bounds)}
    ranges = {k: (logs[k[0]].future_dir if k[1] else logs[k[0]].log_dir, index[a - shift], index[e - shift])
              for k, (a, e) in pos.items()}
    return np.diff(bounds), ranges


def layout(topics: Iterable[TopicSpec], record_bytes: int) -> tuple[list[LogRange], pd.DataFrame]:
    """Every imported log's range and the records of every partition (topic, partition, offset, value_bytes,
    record_id: 0, 1, ... over all partitions)."""
    ranges: list[LogRange] = []
    frames = []
    next_id = 0
    for spec in topics:
        for p, st in sorted((spec.state or {}).items()):
            sizes, where = partition_layout(st, record_bytes)
            if not len(sizes):
                continue
            in_sync = [where[(b, False)][2] for b in st.isr if (b, False) in where]
            part_hw = min(in_sync) if in_sync else max(e for _, _, e in where.values())
            for (b, fut), (d, a, e) in sorted(where.items()):
                ranges.append(LogRange(b, d, spec.name, p, a, e, max(a, min(part_hw, e)), fut))
            frames.append(pd.DataFrame({"topic": spec.name, "partition": p, "offset": np.arange(len(sizes)),
                                        "value_bytes": sizes, "record_id": next_id + np.arange(len(sizes))}))
            next_id += len(sizes)
    records = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["topic", "partition", "offset", "value_bytes", "record_id"])
    return ranges, records


def write_initial_logs(tables_dir: str, brokers_dir: str, topics: Iterable[TopicSpec], record_bytes: int,
                       log_dirs: Iterable[str], brokers: Iterable[int]) -> int:
    """Write the imported logs (one Delta commit of the ``log`` table, one file per broker and dir) and their
    log-dir files; returns the number of records laid out (record ids below it are taken)."""
    log_dirs = list(log_dirs)
    ranges, records = layout(list(topics), record_bytes)
    if not ranges:
        return 0
    first = records.drop_duplicates(["topic", "partition"])  # each partition's row 0 in `records`
    base = dict(zip(zip(first["topic"], first["partition"], strict=True), first.index, strict=True))
    counts = np.array([r.end - r.start for r in ranges])
    rows = np.concatenate([base[(r.topic, r.partition)] + np.arange(r.start, r.end) for r in ranges])
    log = records.iloc[rows].reset_index(drop=True).assign(
        broker=np.repeat([r.broker for r in ranges], counts), log_dir=np.repeat([r.log_dir for r in ranges], counts),
        is_future=np.repeat([r.is_future for r in ranges], counts))
    log = log.sort_values(["broker", "log_dir", "topic", "partition", "is_future", "offset"], kind="stable")
    adds = []
    for (b, d), g in log.groupby(["broker", "log_dir"], sort=True):
        n = len(g)
        t = pa.table({
            "broker": pa.array(g["broker"], pa.int32()), "log_dir": pa.array(g["log_dir"], pa.string()),
            "topic": pa.array(g["topic"], pa.string()), "partition": pa.array(g["partition"], pa.int32()),
            "offset": pa.array(g["offset"], pa.int64()), "leader_epoch": pa.array(np.zeros(n, "int32")),
            "record_id": pa.array(g["record_id"], pa.int64()), "key": pa.nulls(n, pa.string()),
            "value": pa.nulls(n, pa.binary()), "value_bytes": pa.array(g["value_bytes"], pa.int32()),
            "timestamp": pa.array(np.zeros(n, "int64")), "is_future": pa.array(g["is_future"].to_numpy(bool)),
            "append_ms": pa.array(np.zeros(n, "int64")),
        }).cast(storage.SCHEMAS["log"])
        adds.append(storage.write_file(tables_dir, "log", t, f"initial-{int(b)}-{log_dirs.index(d)}",
                                       {"broker": int(b), "log_dir": d}))
    storage.append_files(tables_dir, "log", adds, {"sparkkafka.initial": "imported logs"})
    _write_dir_files(brokers_dir, ranges, log_dirs, list(brokers))
    return len(records)


def _write_dir_files(brokers_dir: str, ranges: list[LogRange], log_dirs: list[str], brokers: list[int]) -> None:
    cur = {r.broker: {} for r in ranges}
    for r in ranges:
        cur[r.broker].setdefault(r.log_dir, []).append(r)
    for b in brokers:
        for d in log_dirs:
            here = cur.get(b, {}).get(d, [])
            if not here:
                continue
            storage.write_partitions(brokers_dir, b, d, [(r.topic, r.partition) for r in here if not r.is_future])
            storage.write_partitions(brokers_dir, b, d, [(r.topic, r.partition) for r in here if r.is_future],
                                     future=True)
            storage.write_hw_checkpoint(brokers_dir, b, d, [(r.topic, r.partition, r.hw) for r in here])
            storage.write_flushed(brokers_dir, b, d, [(r.topic, r.partition, r.end) for r in here])
            storage.write_epoch_checkpoints(brokers_dir, None, [
                (b, d, r.topic, r.partition, r.is_future, [(0, r.start)] if r.end > r.start else []) for r in here])
