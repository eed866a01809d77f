"""Warm a session for resident windows while the driver builds a new cluster.

A session's first resident window pays Spark's cold costs: the JVM plans its first barrier
`mapInPandas` and `localCheckpoint` (~1.7 s here), builds the placing rows (~1 s), and the executors
start their Python workers, which import pandas, pyarrow and the engine (~2.5 s from the job's
submission to the tasks' first line). None of that depends on the cluster. So `RoundLoop.start`
runs one empty window of the same shape (`warm_up`) in a background thread while the driver sets
the cluster up (controller, topics, the first save: ~40 s at 1M replicas, the JVM idle), and the
first window waits for it. The workers stay up for the windows (`spark.python.worker.reuse`).

Once per session: later clusters of the same session find it warm (the test suite's shared session
would otherwise pay a job per cluster). A warm-up that fails is only time lost; the window's own
job then reports whatever is wrong. Nothing here reads or writes a run's files.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pandas as pd

_WARMED: weakref.WeakSet = weakref.WeakSet()  # sessions already warmed (or being warmed)
_LOCK = threading.Lock()


def _touch(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """The warm-up task: import what a resident window's task imports, and return no rows."""
    from ..protocol.frames import empty
    from . import resident  # noqa: F401 - the import is the point: pandas, pyarrow, the protocol
    from . import rows as W

    for _ in batches:
        pass
    yield empty(W.BLOB_WIRE)


def run_warm_up(placing: Any) -> None:
    """One empty resident window over `placing` (resident.placing_rows, placed by task): the same job as
    a window's (resident.window_job, the driver's rows collected)."""
    from . import rows as W
    from .resident import window_job

    W.driver_rows(window_job(placing, _touch))


def warm_up(spark: Any, placing: Callable[[], Any]) -> threading.Thread | None:
    """Start `run_warm_up(placing())` in a daemon thread, unless `spark` was warmed before (None then).
    Join the thread before the first window's job. A failure is kept on the thread as `error`, not raised."""
    with _LOCK:
        try:
            if spark in _WARMED:
                return None
            _WARMED.add(spark)
        except TypeError:  # a session object that cannot be weakly referenced: warm every time
            pass

    def work() -> None:
        try:
            run_warm_up(placing())
        except Exception as e:  # noqa: BLE001 - only time is lost; the window's job reports real errors
            thread.error = e  # type: ignore[attr-defined]

    thread = threading.Thread(target=work, name="sparkkafka-warm-up", daemon=True)
    thread.error = None  # type: ignore[attr-defined]
    thread.start()
    return thread
