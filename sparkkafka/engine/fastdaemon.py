"""PySpark worker daemon that freezes the garbage collector after a worker's first task.

Select it with ``spark.python.daemon.module=sparkkafka.engine.fastdaemon`` (``get_spark`` does).
The JVM then starts ``python -m sparkkafka.engine.fastdaemon pyspark.worker`` instead of
``python -m pyspark.daemon pyspark.worker``; everything else is pyspark's stock daemon.

Why: in a reused worker, ``pyspark/daemon.py`` runs a full ``gc.collect()`` after *every* task
(``manager()``, the ``while True`` loop of the forked child, line 275 in pyspark 4.3.0). Once
pandas, pyarrow and pyspark are loaded, about 70 k objects are tracked and one full collection
costs 84-113 ms of CPU (engine-notes section 0), the largest per-task cost after the TCP stall
that ``spark.python.unix.domain.socket.enabled=true`` removes.

How: ``pyspark.daemon`` is imported as a module (so its ``__main__`` block does not run) and its
module-global ``gc`` is replaced by a small stand-in whose ``collect()`` does, in each forked
worker:

* after the first task: one full ``gc.collect()``, then ``gc.freeze()``. The survivors (modules,
  classes, pandas/pyarrow internals) move to the permanent generation, which no later collection
  traverses;
* after every later task: the same ``gc.collect()``. It now only traverses objects created since
  the freeze, so it takes microseconds and still frees reference cycles made by later tasks. If
  such a collection is slow anyway (a later task imported a large new library, say), it freezes
  again.

Only the daemon's own ``gc.collect`` call is affected; the ``gc`` module that user code sees is
untouched, and automatic generational collection keeps running. Frozen objects are still freed by
reference counting; only reference cycles among objects that were alive at a freeze are never
collected, which for a worker's long-lived import-time state is the intended trade.

Keep ``sparkkafka/__init__.py`` and ``sparkkafka/engine/__init__.py`` light: they are imported in
the daemon *before* it forks, and pyspark requires that nothing there starts threads (pandas and
pyarrow do; see the comment in ``pyspark.daemon.worker``). A warning is printed to the daemon's
stderr if either is already imported when the daemon starts.
"""

from __future__ import annotations

import gc
import sys
import time
from typing import Any

from pyspark import daemon as _pyspark_daemon

#: A later post-task collection slower than this re-freezes the survivors (milliseconds).
REFREEZE_AFTER_MS = 5.0


class _FreezeAfterFirstTask:
    """Stand-in for the ``gc`` module inside ``pyspark.daemon`` only.

    ``collect`` is what the daemon calls after each task; every other attribute is the real ``gc``.
    The state is per process: the daemon itself never collects, so every forked worker starts with
    ``frozen = False``.
    """

    def __init__(self) -> None:
        self.frozen = False

    def collect(self, generation: int = 2) -> int:
        start = time.perf_counter()
        found = gc.collect(generation)
        if not self.frozen or (time.perf_counter() - start) * 1000.0 >= REFREEZE_AFTER_MS:
            gc.freeze()
            self.frozen = True
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(gc, name)


def install() -> None:
    """Patch ``pyspark.daemon`` in this process (idempotent)."""
    if not isinstance(getattr(_pyspark_daemon, "gc", None), _FreezeAfterFirstTask):
        _pyspark_daemon.gc = _FreezeAfterFirstTask()


def main() -> None:
    threaded = [m for m in ("pandas", "pyarrow") if m in sys.modules]
    if threaded:
        print(
            f"sparkkafka.engine.fastdaemon: {', '.join(threaded)} imported before fork; keep "
            "sparkkafka/__init__.py and sparkkafka/engine/__init__.py free of heavy imports",
            file=sys.stderr,
        )
    install()
    _pyspark_daemon.manager()


if __name__ == "__main__":
    main()
