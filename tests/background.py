"""Work the slow tests wait on, started when collection ends so that it overlaps the rest of the run.

Two kinds of slow test spend most of their time waiting, not computing: a real-Kafka replay (its scenario in
wall-clock time, one tolerance more, a broker JVM's start) and the making of delta-spark's side venv (pip's
downloads and unpacking). Started in threads at the end of collection (conftest.py), they run while the
other tests do; the test itself then waits for the result and asserts on it as before. What runs where:

- one lane of replays, one after another (never two clusters at once on the 2-core machine), in the order
  their tests come, each ahead of the suite in CPU priority (realkafka_util.REPLAY_NICENESS: it runs on
  the wall clock, the other tests do not); each writes its replay directory under the run's pytest base
  temp dir;
- one lane of set-up: the side venv (idempotent and locked, test_delta_spark.side_python);
- offloaded tests (`@pytest.mark.offload(work=fn)`): a test whose time is a child process it waits on
  (spark-submit, a standalone or Connect cluster, the docs' pages run as written) has that part in a
  module-level `work(tmp, **params)`, run in the background while the in-process tests use the core they
  leave idle (test_failures and golden J-04 alone: 42 s of CPU in 84 s of wall time); the test asserts on what `work`
  returned (tests marked with the same work share one run of it). The work runs one after another on the
  replays' lane after the replays (run beside them, their JVMs and syncs once held a replay's Kafka tool
  4.4 s late), or with `lane="setup"` (the work that needs the side venv) on the set-up lane once both the
  side venv and the replays are done, so that two lanes of it share what the foreground leaves. `work`
  starts child processes only with the environment of the run's start (sparkutil.BASE_ENV), never what a
  foreground test has monkeypatched since.

A test selected alone still works: its work starts at collection's end as well, or, where nothing started
it (the hook did not run), on first use in the test itself.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
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


def start_offload(work: Callable[..., Any], tmp: Path, params: dict[str, Any], lane: str = "replays") -> Future:
    """`work(tmp, **params)` (the test's parameters that `work` names) on `lane`, once: the tests marked with
    the same work and parameters share its result (one run the several tests of a module assert on). On
    the set-up lane it waits for the replays queued before it to end first."""
    accepted = inspect.signature(work).parameters
    kwargs = {k: v for k, v in params.items() if k in accepted}
    if lane == "setup":
        start_side_venv()  # queued first on that lane (once), whatever the tests selected
    with _LOCK:
        replays = [f for k, f in _STARTED.items() if k.startswith("replay:")] if lane != "replays" else []

    def run() -> Any:
        wait(replays)
        tmp.mkdir(parents=True, exist_ok=True)
        return work(tmp, **kwargs)

    return start(f"offload:{work.__module__}.{work.__qualname__}:{sorted(kwargs.items())!r}", lane, run)


def start_side_venv() -> Future:
    from test_delta_spark import side_python

    return start("side-venv", "setup", side_python)


def shutdown() -> None:
    """At the run's end: drop what was queued and not started (a run stopped early by -x), wait for the rest."""
    for lane in _LANES.values():
        lane.shutdown(wait=True, cancel_futures=True)
