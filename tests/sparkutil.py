"""Multi-process Spark for tests: a standalone cluster, a Spark Connect server, spark-submit.

Everything is started from pyspark's own pip install (``bin/``, ``sbin/``, ``jars/`` inside the
``pyspark`` package), listens on 127.0.0.1 only, runs in its own process group (our PID is the
group id), writes its logs under a private temp dir, and is always stopped: SIGTERM to the PIDs
we started, a bounded wait, then SIGKILL to whatever is left of *their* process groups. All waits
are bounded; a failure raises with the tail of the relevant log.

pyspark's Python worker daemons (``pyspark.daemon`` / our fastdaemon) put themselves in a process
group of their own; they exit by themselves when their JVM goes away (stdin EOF).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pyspark

from sparkkafka.engine.session import DEFAULT_CONF, TEST_JVM_OPTS_ENV

SPARK_HOME = Path(pyspark.__file__).resolve().parent
PYTHON = sys.executable
LOOPBACK = "127.0.0.1"
# The environment as the test run started (this module is imported at collection, before any test): what
# child processes start from, so that a test's monkeypatched PATH or PYSPARK_PYTHON never reaches a child
# that an offloaded test (tests/background.py) starts at that moment in another thread.
BASE_ENV = dict(os.environ)

# Variables that would make a child attach to *this* process's Spark instead of its own.
_INHERITED_SPARK_STATE = (
    "PYSPARK_GATEWAY_PORT",
    "PYSPARK_GATEWAY_SECRET",
    "PYSPARK_SUBMIT_ARGS",
    "SPARK_REMOTE",
    "SPARK_CONNECT_MODE_ENABLED",
    "SPARK_LOCAL_REMOTE",
    "SPARK_API_MODE",
    "MASTER",
)

__all__ = [
    "BASE_ENV",
    "LOOPBACK",
    "PYTHON",
    "SPARK_HOME",
    "connect_server",
    "free_port",
    "run_python",
    "spark_env",
    "spark_submit",
    "standalone_cluster",
]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def spark_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for a Spark child process: loopback only, the venv's python everywhere."""
    env = {k: v for k, v in BASE_ENV.items() if k not in _INHERITED_SPARK_STATE}
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_LOCAL_IP=LOOPBACK,
        PYSPARK_PYTHON=PYTHON,
        PYSPARK_DRIVER_PYTHON=PYTHON,
    )
    env.update(extra or {})
    return env


def _java_opts() -> str:
    return os.environ.get(TEST_JVM_OPTS_ENV, "").strip()


# --------------------------------------------------------------------------------------------
# process handling


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists but not ours: never touch it
        return False
    return True


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    # A zombie child still answers kill(0); reap it if it is ours.
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    return True


def _stop_group(pgid: int, *, grace: float = 15.0, proc: subprocess.Popen | None = None) -> None:
    """SIGTERM the process group ``pgid`` (a group we created), wait up to ``grace``, SIGKILL."""
    if pgid <= 1 or pgid == os.getpgrp():  # never our own group or init
        raise ValueError(f"refusing to signal process group {pgid}")
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if proc is not None:
            proc.poll()
        if not _group_alive(pgid):
            break
        time.sleep(0.1)
    else:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        deadline = time.monotonic() + 10.0
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
    if proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no log at {path})"


def _wait_until(what: str, check, *, timeout: float, alive=None, log: Path | None = None) -> None:
    """Poll ``check()`` every 0.1 s until true; fail early if ``alive()`` turns false."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if alive is not None and not alive():
            raise RuntimeError(f"{what}: process exited early\n{_tail(log) if log else ''}")
        time.sleep(0.1)
    raise TimeoutError(f"{what}: not ready after {timeout:.0f} s\n{_tail(log) if log else ''}")


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((LOOPBACK, port)) == 0


def _log_contains(path: Path, text: str) -> bool:
    try:
        return text in path.read_text(errors="replace")
    except OSError:
        return False


def _run(
    cmd: Sequence[str], *, env: Mapping[str, str], timeout: float, cwd: str | None = None, reap: bool = True
) -> subprocess.CompletedProcess:
    """subprocess.run in a new process group; on timeout the whole group is killed.

    ``reap``: after a normal exit, also stop what the command left running in its group (executor
    JVMs of a finished driver, say). Off for scripts that start daemons on purpose.
    """
    proc = subprocess.Popen(
        list(cmd),
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        _stop_group(proc.pid, grace=5.0, proc=proc)
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(proc.args, timeout, output=out, stderr=err) from exc
    except BaseException:
        _stop_group(proc.pid, grace=5.0, proc=proc)
        raise
    # The driver is gone; take down anything it left in its group (executor JVMs, say).
    if reap and _group_alive(proc.pid):
        _stop_group(proc.pid, grace=10.0)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


# --------------------------------------------------------------------------------------------
# public helpers


def spark_submit(
    script: str | os.PathLike,
    *args: str,
    master: str = "local[2]",
    conf: Mapping[str, str] | None = None,
    timeout: float = 600,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """Run ``bin/spark-submit --master MASTER [--conf k=v ...] SCRIPT ARGS`` and capture its output.

    The venv's python is PYSPARK_PYTHON and PYSPARK_DRIVER_PYTHON. ``$SPARKKAFKA_TEST_JVM_OPTS``
    (C1-only JIT + SerialGC in tests) goes to the driver and the executors unless ``conf`` sets
    their ``extraJavaOptions``. Does not raise on a non-zero exit: check ``returncode``.
    """
    settings = {"spark.pyspark.python": PYTHON, "spark.pyspark.driver.python": PYTHON}
    if _java_opts():
        settings["spark.driver.extraJavaOptions"] = _java_opts()
        settings["spark.executor.extraJavaOptions"] = _java_opts()
    settings.update(conf or {})
    cmd = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", master]
    for key, value in settings.items():
        cmd += ["--conf", f"{key}={value}"]
    cmd += [str(script), *args]
    return _run(cmd, env=spark_env(env), timeout=timeout)


def run_python(
    script: str | os.PathLike, *args: str, timeout: float = 600, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run ``python SCRIPT ARGS`` with the venv's python (e.g. a Spark Connect client)."""
    return _run([PYTHON, str(script), *args], env=spark_env(env), timeout=timeout)


@contextlib.contextmanager
def standalone_cluster(
    *, cores: int = 2, memory: str = "1g", timeout: float = 120, keep_logs_on_error: bool = True
) -> Iterator[str]:
    """A Spark standalone Master + one Worker on 127.0.0.1; yields ``spark://127.0.0.1:<port>``.

    Both run in the foreground under ``bin/spark-class``, each in its own process group, with
    SPARK_LOCAL_IP=127.0.0.1 and the venv's python. Ports (RPC and web UI) are free ports; the
    master's REST server is off. The Worker's executors (and their work dirs) live in the temp
    dir; they are children of the Worker's process group, so stopping the group stops them.
    Logs: ``<tmp>/master.log``, ``<tmp>/worker.log``.
    """
    tmp = Path(tempfile.mkdtemp(prefix="sparkkafka-standalone-"))
    props = tmp / "spark.properties"
    props.write_text("spark.master.rest.enabled=false\nspark.ui.killEnabled=false\n")
    env = spark_env(
        {
            "SPARK_WORKER_DIR": str(tmp / "work"),
            "SPARK_LOCAL_DIRS": str(tmp / "local"),
            "SPARK_LOG_DIR": str(tmp),
            "SPARK_PID_DIR": str(tmp),
        }
    )
    if _java_opts():
        env["SPARK_DAEMON_JAVA_OPTS"] = _java_opts()
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    master_port, master_ui, worker_port, worker_ui = (free_port() for _ in range(4))
    url = f"spark://{LOOPBACK}:{master_port}"
    started: list[subprocess.Popen] = []
    logs: list = []
    ok = False
    try:

        def daemon(name: str, cls: str, args: list[str], ready: str, extra=lambda: True) -> None:
            """Start one Spark daemon in the foreground and wait for its log line."""
            log = tmp / f"{name}.log"
            logs.append(open(log, "wb"))
            proc = subprocess.Popen(
                [spark_class, cls, "--host", LOOPBACK, *args, "--properties-file", str(props)],
                env=env, stdin=subprocess.DEVNULL, stdout=logs[-1], stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            started.append(proc)
            _wait_until(f"standalone {name}", lambda: extra() and _log_contains(log, ready), timeout=timeout,
                        alive=lambda: proc.poll() is None, log=log)

        daemon("master", "org.apache.spark.deploy.master.Master",
               ["--port", str(master_port), "--webui-port", str(master_ui)],
               "I have been elected leader", extra=lambda: _port_open(master_port))
        daemon("worker", "org.apache.spark.deploy.worker.Worker",
               ["--port", str(worker_port), "--webui-port", str(worker_ui), "--cores", str(cores),
                "--memory", memory, "--work-dir", str(tmp / "work"), url],
               "Successfully registered with master")
        yield url
        ok = True
    finally:
        for proc in reversed(started):  # worker (and its executors) first, then the master
            _stop_group(proc.pid, proc=proc)
        for f in logs:
            f.close()
        if ok or not keep_logs_on_error:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"standalone_cluster: logs kept in {tmp}", file=sys.stderr)


@contextlib.contextmanager
def connect_server(
    *,
    master: str = "local[2]",
    conf: Mapping[str, str] | None = None,
    timeout: float = 180,
    keep_logs_on_error: bool = True,
) -> Iterator[str]:
    """pyspark's ``sbin/start-connect-server.sh`` on 127.0.0.1:<free port>; yields ``sc://127.0.0.1:<port>``.

    The server gets sparkkafka's DEFAULT_CONF (the venv's python for workers, the fastdaemon, UDS,
    ...), driver host/bind 127.0.0.1 and gRPC bound to 127.0.0.1, plus ``conf``.
    ``sbin/spark-daemon.sh`` starts the server JVM with nohup in the background and writes
    ``$SPARK_PID_DIR/spark-$SPARK_IDENT_STRING-org.apache.spark.sql.connect.service.SparkConnectServer-1.pid``
    (default dir /tmp) and its log to ``$SPARK_LOG_DIR/spark-...-1-$HOSTNAME.out`` (default
    ``$SPARK_HOME/logs``, i.e. inside site-packages/pyspark); both are redirected to a temp dir.
    Stopped by PID from that pid file (what ``sbin/stop-connect-server.sh`` does, plus a bounded
    wait and SIGKILL), then whatever is left of its process group.
    """
    tmp = Path(tempfile.mkdtemp(prefix="sparkkafka-connect-"))
    port = free_port()
    ident = "sparkkafka-test"
    env = spark_env(
        {"SPARK_PID_DIR": str(tmp / "pid"), "SPARK_LOG_DIR": str(tmp / "log"), "SPARK_IDENT_STRING": ident}
    )
    settings = dict(DEFAULT_CONF)
    settings.update(
        {
            "spark.driver.host": LOOPBACK,
            "spark.driver.bindAddress": LOOPBACK,
            "spark.connect.grpc.binding.address": LOOPBACK,
            "spark.connect.grpc.binding.port": str(port),
            "spark.local.dir": str(tmp / "local"),
            "spark.sql.warehouse.dir": str(tmp / "warehouse"),
        }
    )
    if _java_opts():
        settings["spark.driver.extraJavaOptions"] = _java_opts()
    settings.update(conf or {})
    cmd = ["bash", str(SPARK_HOME / "sbin" / "start-connect-server.sh"), "--master", master]
    for key, value in settings.items():
        cmd += ["--conf", f"{key}={value}"]
    pid_file = tmp / "pid" / f"spark-{ident}-org.apache.spark.sql.connect.service.SparkConnectServer-1.pid"
    log_dir = tmp / "log"

    def server_log() -> Path:
        found = sorted(log_dir.glob("*.out"))
        return found[0] if found else log_dir / "spark.out"

    server_pid: int | None = None
    pgid: int | None = None
    ok = False
    try:
        # The start script returns after ~2.5 s (it polls for the java process, then sleeps 2 s);
        # start_new_session makes its background JVM a member of a group of our own.
        start = _run(cmd, env=env, timeout=60, reap=False)
        if pid_file.exists():
            server_pid = int(pid_file.read_text().strip())
            with contextlib.suppress(ProcessLookupError):
                pgid = os.getpgid(server_pid)
        if start.returncode != 0 or server_pid is None:
            raise RuntimeError(
                f"start-connect-server.sh failed ({start.returncode}):\n{start.stdout}\n{start.stderr}\n"
                f"{_tail(server_log())}"
            )
        _wait_until(
            "Spark Connect server",
            lambda: _port_open(port),
            timeout=timeout,
            alive=lambda: _pid_alive(server_pid),
            log=server_log(),
        )
        yield f"sc://{LOOPBACK}:{port}"
        ok = True
    finally:
        if server_pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(server_pid, signal.SIGTERM)
            deadline = time.monotonic() + 20.0
            while _pid_alive(server_pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _pid_alive(server_pid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(server_pid, signal.SIGKILL)
        if pgid is not None and pgid != os.getpgrp() and _group_alive(pgid):
            _stop_group(pgid, grace=5.0)
        if ok or not keep_logs_on_error:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"connect_server: logs kept in {tmp}", file=sys.stderr)
