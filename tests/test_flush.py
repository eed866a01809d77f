"""protocol/flush.py: a log is flushed (recovery point := LEO) when flush.messages or flush.ms is reached."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sparkkafka.protocol.config import LONG_MAX
from sparkkafka.protocol.flush import maybe_flush
from sparkkafka.protocol.frames import new_replicas


def _replicas(topics: list[str], leo: int = 5, last_flush_ms: int = 0):
    return new_replicas(pd.DataFrame([{"broker": 0, "topic": t, "partition": 0, "log_dir": "/d", "leo": leo,
                                       "recovery_point": 0, "last_flush_ms": last_flush_ms} for t in topics]))


def test_flush_messages_reached_sets_the_recovery_point_to_the_leo():
    reps, due = maybe_flush(_replicas(["a", "b"]), {"a": (5, None), "b": (6, None)}, now=100)
    assert due.tolist() == [True, False]
    assert reps["recovery_point"].tolist() == [5, 0]


def test_flush_ms_reached_flushes_a_dirty_log():
    reps, due = maybe_flush(_replicas(["a", "b"]), {"a": (LONG_MAX, 1000), "b": (LONG_MAX, 1001)}, now=1000)
    assert due.tolist() == [True, False]


def test_a_topic_without_flush_settings_keeps_kafkas_defaults_and_never_flushes():
    # both limits Long.MAX_VALUE: before the int64 fill, the missing topic's limit became INT64_MIN and every
    # dirty log of it flushed every round
    reps, due = maybe_flush(_replicas(["a", "unknown"]), {"a": (1, None)}, now=10**9)
    assert due.tolist() == [True, False]
    assert reps["recovery_point"].to_numpy().tolist() == [5, 0]
    assert due.dtype == np.bool_
