"""PySpark worker daemon that freezes the garbage collector after a worker's first task.

Select it with ``spark.python.daemon.module=sparkkafka.engine.fastdaemon`` (``get_spark`` does).
The JVM then starts ``python -m sparkkafka.engine.fastdaemon pyspark.worker`` instead of
``python -m pyspark.daemon pyspark.worker``; everything else is pyspark's stock daemon.

Why: in a reused worker, ``pyspark/daemon.py`` runs a full ``gc.collect()`` after *every* task
(``manager()``, the ``while True`` loop of the forked child, line 275 in pyspark 4.3.0). Once
pandas, pyarrow and pyspark are loaded, about 70 k objects are tracked and one full collection
costs 84-113 ms of CPU (measured on this project's 2-core machine), the largest per-task cost after the TCP
stall that ``spark.python.unix.domain.socket.enabled=true`` removes.

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

A second stand-in, for the daemon's ``os``, quiets a worker whose JVM has already closed its socket
(the session stopped, or the JVM stopped an idle reused worker): the worker reads EOF, reports that as an
exception to the JVM (``pyspark.util.handle_worker_exception``, which means to ignore a closed socket:
"JVM close the socket"), and the daemon's final ``outfile.flush()`` (``daemon.worker``, line 95) then
printed ``PySpark daemon failed to flush the output to the worker process`` and a ``BrokenPipeError``
traceback to stderr, at the end of ``sparkkafka run`` among other places. The daemon's socket files
(``os.fdopen`` of a socket, write mode) now drop what they write once the peer is gone
(EPIPE / ECONNRESET): those bytes have no reader either way. The worker still learns that the JVM left
from its next read (EOF), so it ends as before; the exit code is unchanged.

Only the daemon's own ``gc.collect`` call and socket files are affected; the ``gc`` module that user code sees is
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
import io
import os
import re
import stat
import sys
import time
import zipfile
from typing import Any


def _version_in(text: str) -> str | None:
    m = re.search(r"""^__version__[^=]*=\s*["']([^"']+)["']""", text, re.M)
    return m.group(1) if m else None


def _same_package(zip_path: str, site: str, package: str) -> bool:
    """Whether `zip_path` (Spark's zip of `package`) holds the version installed under `site`."""
    try:
        with open(os.path.join(site, package, "version.py"), encoding="utf-8") as f:
            installed = _version_in(f.read())
        with zipfile.ZipFile(zip_path) as z:
            zipped = _version_in(z.read(f"{package}/version.py").decode("utf-8"))
    except (OSError, KeyError, zipfile.BadZipFile, UnicodeDecodeError):
        return False
    return installed is not None and installed == zipped


def prefer_installed_pyspark(path: list[str]) -> list[str]:
    """`path` (a sys.path) with Spark's zips of pyspark and py4j moved to its end when they are the copies a
    pip-installed pyspark carries (``<site>/pyspark/python/lib/pyspark.zip``) and the same versions are
    installed in ``<site>``, which is on `path` too.

    Why: Spark puts these zips first on its Python workers' PYTHONPATH, and Python cannot cache bytecode
    for modules imported from a zip, so the daemon (and each forked worker, for the modules it imports
    lazily) compiled pyspark's sources at every start: ~1.2 s of CPU per daemon here, before a first
    task could run. The installed package is the same files with their .pyc cached. A Spark
    distribution's own zips (``$SPARK_HOME/python/lib`` of a cluster, Databricks) are left alone."""
    on_path = {os.path.abspath(p) for p in path if p}
    moved = []
    for entry in path:
        lib = os.path.dirname(os.path.abspath(entry)) if entry.endswith(".zip") else ""
        home = os.path.dirname(os.path.dirname(lib)) if lib else ""  # <site>/pyspark
        if not home or os.path.basename(home) != "pyspark" or os.path.basename(lib) != "lib":
            continue
        site = os.path.dirname(home)
        name = os.path.basename(entry)
        package = "pyspark" if name == "pyspark.zip" else "py4j" if name.startswith("py4j-") else None
        if package and site in on_path and os.path.isfile(os.path.join(home, "__init__.py")) \
                and _same_package(entry, site, package):
            moved.append(entry)
    return [p for p in path if p not in moved] + moved


sys.path[:] = prefer_installed_pyspark(sys.path)  # before pyspark is imported below

from pyspark import daemon as _pyspark_daemon  # noqa: E402

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


class _JvmSocketOutput(io.FileIO):
    """A worker's output socket to the JVM: once the JVM has closed the connection, writes are dropped."""

    def write(self, b: Any) -> int:
        try:
            return super().write(b)
        except (BrokenPipeError, ConnectionResetError):
            return memoryview(b).nbytes  # no reader any more: nothing to deliver, nothing to report


class _QuietClosedSockets:
    """Stand-in for the ``os`` module inside ``pyspark.daemon`` only: ``fdopen`` of a socket for writing
    gives a buffered `_JvmSocketOutput`; everything else (pipes included) is the real ``os``."""

    def fdopen(self, fd: int, mode: str = "r", buffering: int = -1, *args: Any, **kwargs: Any) -> Any:
        if "w" in mode and "b" in mode and not args and not kwargs and stat.S_ISSOCK(os.fstat(fd).st_mode):
            raw = _JvmSocketOutput(fd, "wb")
            return raw if buffering == 0 else io.BufferedWriter(raw, buffering if buffering > 0 else
                                                                io.DEFAULT_BUFFER_SIZE)
        return os.fdopen(fd, mode, buffering, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)


def install() -> None:
    """Patch ``pyspark.daemon`` in this process (idempotent)."""
    if not isinstance(getattr(_pyspark_daemon, "gc", None), _FreezeAfterFirstTask):
        _pyspark_daemon.gc = _FreezeAfterFirstTask()
    if not isinstance(getattr(_pyspark_daemon, "os", None), _QuietClosedSockets):
        _pyspark_daemon.os = _QuietClosedSockets()


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
