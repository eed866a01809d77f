"""The run directory's writer lock: one process at a time changes a run (OUT/.lock).

Kafka keeps a ``.lock`` file in every log dir (``LogManager.lockLogDirs``) and a second broker on the same
dir stops with "Failed to acquire lock on file .lock in DIR. A Kafka instance in another process or thread
is using this directory." A run directory is the cluster, so the same rule holds: a driver (``sparkkafka
run``, ``Cluster.run``/``step``/``save``) or an operator tool that changes the run (``reassign --execute``,
``--cancel``, ``--verify``, ``leader-election``) takes OUT/.lock first and is refused (ScenarioError: exit
2) while another process holds it, naming the holder.

Why a lock file and not Delta's optimistic concurrency: a run's state is not only its Delta tables
(driver-state.json, zookeeper.json, the brokers' row folders are plain files), and a conflicting Delta
commit is only seen after the Spark work of a round; the lock refuses a second writer before it starts.

The lock file is JSON ``{pid, host, started, command, token, pid_start}``, complete before it exists: it is
written to a temporary file and hard-linked into place (``link`` fails when the name exists: O_CREAT|O_EXCL
without a moment where the file is empty). A lock is *stale* when its host is this host and its pid is
dead (``os.kill(pid, 0)`` raises ProcessLookupError) or now belongs to a process started at another time
(Linux ``/proc/PID/stat``, against pid reuse); a stale lock is taken over by atomically replacing it. The
inspect-and-take step is serialised among this host's processes by ``flock`` on the directory, so two
processes that find the same stale lock cannot both take it. A lock of another host is always honoured
(its pid cannot be checked from here): remove OUT/.lock by hand if that host's process is gone.

The lock is re-entrant within a process (nested writers share it) and released by the outermost release;
a process that dies leaves a stale lock, which the next writer takes over.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .errors import ScenarioError

LOCK = ".lock"
_held: dict[str, tuple[str, int, int]] = {}  # run dir -> (token, depth, pid) of the locks this process holds


class RunLockedError(ScenarioError):
    """Another process changes this run directory now (or left a lock this host cannot judge)."""


def lock_path(run_dir: str | os.PathLike) -> str:
    return os.path.join(os.path.realpath(run_dir), LOCK)


def holder(run_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The lock file's content (None: no lock); {} for a file that is not a sparkkafka lock."""
    try:
        with open(lock_path(run_dir), encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _pid_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux /proc), None where unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _alive(pid: int, started: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        pass
    now = _pid_start(pid)
    return started is None or now is None or now == started  # a reused pid is another process


def is_stale(info: dict[str, Any]) -> bool:
    """A lock left by a dead process of this host (never one of another host: its pid is not ours to check)."""
    pid = info.get("pid")
    if info.get("host") != socket.gethostname() or not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    return not _alive(pid, info.get("pid_start"))


def describe_holder(info: dict[str, Any]) -> str:
    if not info:
        return "a file that is not a sparkkafka lock (remove it if no process uses this run)"
    started = info.get("started")
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)) if isinstance(started, int | float) else "?"
    return f"pid {info.get('pid')} on host {info.get('host')} since {when} ({info.get('command') or '?'})"


@contextmanager
def _host_mutex(path: str) -> Iterator[None]:
    """flock on the run directory: this host's processes inspect and take the lock one at a time."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): the O_EXCL link alone
        yield
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the flock


def _write_tmp(path: str, info: dict[str, Any]) -> str:
    tmp = os.path.join(path, f".lock.{info['token']}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(info, f, sort_keys=True)
    return tmp


def _create(tmp: str, target: str) -> None:
    """Create `target` with `tmp`'s content, FileExistsError if it exists: a hard link where the file system
    has them, else O_CREAT|O_EXCL and a write (a reader may then briefly see it empty: not a lock, refused)."""
    try:
        os.link(tmp, target)
        return
    except FileExistsError:
        raise
    except OSError:
        pass
    with open(tmp, "rb") as src:
        data = src.read()
    fd = os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _refused(path: str, info: dict[str, Any]) -> RunLockedError:
    return RunLockedError("run", path, f"is being changed by another process: {LOCK} held by "
                                       f"{describe_holder(info)}; retry when it has finished")


def acquire(run_dir: str | os.PathLike, command: str | None = None) -> None:
    """Take the run directory's lock for this process (re-entrant); RunLockedError when another holds it.
    The directory must exist."""
    path = os.path.realpath(run_dir)
    mine = _held.get(path)
    if mine is not None and mine[2] == os.getpid():
        _held[path] = (mine[0], mine[1] + 1, mine[2])
        return
    pid = os.getpid()
    info = {"pid": pid, "host": socket.gethostname(), "started": round(time.time(), 3),
            "command": (command or " ".join(sys.argv) or "python")[:300], "token": uuid.uuid4().hex, "pid_start": _pid_start(pid)}
    target = lock_path(path)
    with _host_mutex(path):
        tmp = _write_tmp(path, info)
        try:
            try:
                _create(tmp, target)
            except FileExistsError:
                current = holder(path)
                if current is None:  # released between the two calls
                    _create(tmp, target)
                elif is_stale(current):
                    os.replace(tmp, target)  # the take-over: one atomic rename over the dead holder's file
                else:
                    raise _refused(path, current) from None
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    _held[path] = (info["token"], 1, pid)


def release(run_dir: str | os.PathLike) -> None:
    """Undo one acquire; the outermost removes the lock file (only if it is still this process's)."""
    path = os.path.realpath(run_dir)
    mine = _held.get(path)
    if mine is None or mine[2] != os.getpid():
        return
    if mine[1] > 1:
        _held[path] = (mine[0], mine[1] - 1, mine[2])
        return
    del _held[path]
    if not os.path.isdir(path):
        return
    with _host_mutex(path):
        if (holder(path) or {}).get("token") == mine[0]:
            os.unlink(lock_path(path))


def held(run_dir: str | os.PathLike) -> bool:
    """This process holds the run directory's lock."""
    mine = _held.get(os.path.realpath(run_dir))
    return mine is not None and mine[2] == os.getpid()


_UNCHECKED: Any = object()


@contextmanager
def writing(run_dir: str | os.PathLike, command: str | None = None, seen: Any = _UNCHECKED) -> Iterator[None]:
    """Hold the run directory's lock for the block. `seen`: the run's save stamp (RunDir.stamp) when the
    caller read it; if another process has saved since, the caller's view is stale and it is refused
    (optimistic concurrency between a reader's load and its later save)."""
    acquire(run_dir, command)
    try:
        if seen is not _UNCHECKED:
            from .run_dir import RunDir

            if RunDir(run_dir).stamp() != seen:
                raise RunLockedError("run", os.path.realpath(run_dir),
                                     "was saved by another writer since this process read it; reopen it "
                                     "(Cluster.for_path, or run the tool again) so that change is not lost")
        yield
    finally:
        release(run_dir)
