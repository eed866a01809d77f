"""Work the slow tests wait on, started when collection ends so that it overlaps the rest of the run.

Two kinds of slow test spend most of their time waiting, not computing: a real-Kafka replay (its scenario in
wall-clock time, one tolerance more, a broker JVM's start) and the making of delta-spark's side venv (pip's
downloads and unpacking). Started in threads at the end of collection (conftest.py), they run while the
other tests do; the test itself then waits for the result and asserts on it as before. What runs where:

- one lane of replays, one after another (never two clusters at once on the 2-core machine), in the order
  their tests come, each ahead of the suite in CPU priority (realkafka_util.REPLAY_NICENESS: it runs on
  the wall clock, the other tests do not); each writes its replay directory under the run's pytest base
  temp dir;
- one lane of set-up: the side venv (idempotent and locked, test_delta_spark.side_python).

A test selected alone still works: its work starts at collection's end as well, or, where nothing started
it (the hook did not run), on first use in the test itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

_LANES = {"replays": ThreadPoolExecutor(1, thread_name_prefix="replays"),
          "setup": ThreadPoolExecutor(1, thread_name_prefix="setup")}
_STARTED: dict[str, Future] = {}
_LOCK = threading.Lock()


def start(key: str, lane: str, fn: Callable[..., Any], *args: Any) -> Future:
    """Queue `fn(*args)` on `lane` under `key`, once: a second start of the same key returns the first."""
    with _LOCK:
        if key not in _STARTED:
            _STARTED[key] = _LANES[lane].submit(fn, *args)
        return _STARTED[key]


def result(key: str, lane: str, fn: Callable[..., Any], *args: Any, timeout_s: float = 1800) -> Any:
    """`fn(*args)`'s result (started now if it was not), re-raising what it raised (an assertion included)."""
    return start(key, lane, fn, *args).result(timeout=timeout_s)


def replay_key(scenario: Path) -> str:
    return f"replay:{Path(scenario).name}"


def start_replay(scenario: Path, base: Path) -> Future:
    """The `sparkkafka replay` of `scenario` (realkafka_util.replay, which asserts exit 0) in a new directory
    under `base`."""
    from realkafka_util import replay

    def run() -> tuple[dict[str, Any], str, float]:
        d = base / Path(scenario).stem
        d.mkdir(parents=True, exist_ok=True)
        return replay(d, Path(scenario))

    return start(replay_key(scenario), "replays", run)


def start_side_venv() -> Future:
    from test_delta_spark import side_python

    return start("side-venv", "setup", side_python)


def shutdown() -> None:
    """At the run's end: drop what was queued and not started (a run stopped early by -x), wait for the rest."""
    for lane in _LANES.values():
        lane.shutdown(wait=True, cancel_futures=True)
