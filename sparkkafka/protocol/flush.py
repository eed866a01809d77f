"""When log data reaches the disk, and what a power loss keeps (log.flush.interval.messages / .ms,
Log.flush; KIP-101 scenario 2).

Kafka appends to the page cache and fsyncs only by its flush rules: `flush.messages`
(log.flush.interval.messages; Log.append flushes once that many messages are unflushed) and
`flush.ms` (log.flush.interval.ms; LogManager's flusher), both off by default, plus a flush of every
log at clean shutdown (Log.close). Everything else reaches the disk when the operating system writes
dirty pages back. The emulator models that write-back as one delay, `emulator.page.cache.writeback.ms`
(default 30000: Linux's vm.dirty_expire_centisecs); a record appended at time t is on disk from
t + delay. A process crash loses nothing (the page cache survives it); a power loss at time T keeps,
per log, the records below its flushed offset and those appended at or before T - delay, and loses
everything from the first record that is neither (the log is a prefix of what was appended).

Deviation, documented: flush.ms is checked every round rather than every
log.flush.scheduler.interval.ms.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from .config import LONG_MAX
from .frames import REPLICA, array, conform, from_rows, per_value


def maybe_flush(replicas: pd.DataFrame, topic_flush: Mapping[str, tuple[int, int | None]], now: int,
                force: np.ndarray | None = None) -> tuple[pd.DataFrame, np.ndarray]:
    """Flush the logs whose flush.messages or flush.ms is reached (and those in `force`, e.g. a clean
    shutdown): recovery_point := LEO. `topic_flush` maps topic -> (flush.messages, flush.ms or None).
    Returns (replicas, which rows flushed)."""
    if replicas.empty:
        return replicas, np.zeros(0, dtype=bool)
    # per distinct topic, in int64 throughout (a NaN fill through float64 would turn LONG_MAX into INT64_MIN);
    # a topic with no entry never flushes by count or time (Kafka's defaults: Long.MAX_VALUE)
    def limits(topics: np.ndarray, i: int) -> np.ndarray:
        got = (topic_flush.get(t, (None, None))[i] for t in topics)
        return np.fromiter((LONG_MAX if x is None else min(int(x), LONG_MAX) for x in got), "int64", len(topics))

    msgs = per_value(replicas["topic"], lambda t: limits(t, 0), null=LONG_MAX)
    ms = per_value(replicas["topic"], lambda t: limits(t, 1), null=LONG_MAX)
    leo, rp = array(replicas, "leo"), array(replicas, "recovery_point")
    last = array(replicas, "last_flush_ms")
    dirty = leo > rp
    by_time = (last >= 0) & (ms < LONG_MAX) & (now - np.maximum(last, 0) >= ms)
    due = dirty & ((leo - rp >= msgs) | by_time)
    if force is not None:
        due |= force & dirty
    first = last < 0
    if not (due.any() or first.any()):
        return replicas, due
    r = replicas.copy()
    r.loc[due, "recovery_point"] = r.loc[due, "leo"]
    r.loc[due | first, "last_flush_ms"] = now
    return conform(r, REPLICA), due


def power_loss_cuts(log: pd.DataFrame, flushed: Mapping[tuple[str, str, int], int], crash_ms: int,
                    writeback_ms: int) -> pd.DataFrame:
    """Where each log of a broker that lost power is cut: the first offset neither flushed nor written
    back. `log` has log_dir, topic, partition, offset, append_ms; `flushed` maps (log_dir, topic,
    partition) -> flushed offset. Returns cuts (log_dir, topic, partition, offset)."""
    cols = ["log_dir", "topic", "partition", "offset"]
    if log.empty:
        return from_rows([], cols)
    keys = list(zip(log["log_dir"], log["topic"], log["partition"], strict=True))
    fl = np.array([flushed.get((d, t, int(p)), 0) for d, t, p in keys], dtype="int64")
    durable = (array(log, "offset") < fl) | (array(log, "append_ms") + writeback_ms <= crash_ms)
    lost = log[~durable]
    return lost.groupby(["log_dir", "topic", "partition"], as_index=False)["offset"].min()[cols]
