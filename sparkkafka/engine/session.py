"""The one place sparkkafka builds (or finds) its SparkSession.

``get_spark()`` applies the configuration measured on this project's 2-core machine (docs/engine.md,
"Choices and limits of this version": Spark's Python workers) when sparkkafka itself starts Spark, and stays
out of the way otherwise:

1. A session that is already active (classic or Spark Connect, e.g. a notebook, Databricks, a
   test fixture) is returned untouched: no master, no config is changed.
2. Under ``spark-submit`` (the JVM launched this Python driver) the master is whatever spark-submit
   chose, and only those of our defaults that are not already in ``SparkConf()`` are added, so
   ``--conf`` and cluster defaults win.
3. ``remote=`` / ``SPARK_REMOTE`` (or a ``sc://`` master) builds a Spark Connect session and sets
   nothing else: server-side settings belong to the server.
4. Otherwise a new session is launched: master (default ``local[2]``) + ``DEFAULT_CONF`` + the
   local-master settings + a private temp dir; ``conf=`` wins over all of them.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pyspark is imported lazily: importing this module must stay cheap
    from pyspark.sql import SparkSession

__all__ = [
    "DEFAULT_CONF",
    "DEFAULT_MASTER",
    "FASTDAEMON_MODULE",
    "TEST_JVM_OPTS_ENV",
    "check_worker_python",
    "default_worker_python",
    "get_spark",
    "stop_spark",
]

DEFAULT_MASTER = "local[2]"
FASTDAEMON_MODULE = "sparkkafka.engine.fastdaemon"
#: Env var whose value is appended to ``spark.driver.extraJavaOptions`` of a session we launch.
#: tests/conftest.py sets it to ``-XX:TieredStopAtLevel=1 -XX:+UseSerialGC``: start + first jobs
#: 12.2 s instead of 14.4 s; never use C1-only for payload benchmarks (up to 2.3x slower rounds).
TEST_JVM_OPTS_ENV = "SPARKKAFKA_TEST_JVM_OPTS"

DEFAULT_CONF: Mapping[str, str] = MappingProxyType(
    {
        # No web UI, no console progress bar: nobody looks at them in tests and jobs, the UI binds
        # a port (clashes between parallel runs), and the progress bar spams logs.
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # Python workers run this very interpreter (the venv with pandas 2.x, pyarrow, deltalake,
        # sparkkafka); the python-side twin is os.environ["PYSPARK_PYTHON"], set by get_spark.
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        # The stock daemon runs a full gc.collect() after every task: 84-113 ms each once pandas
        # and pyarrow are loaded. Ours freezes the collector after the first task (fastdaemon.py).
        "spark.python.daemon.module": FASTDAEMON_MODULE,
        # JVM<->Python over a Unix socket: the first input batch of a task waited ~42 ms over
        # TCP, 1.5 ms over UDS. Together with the daemon: 12-task round 450 -> 129-210 ms (s.0).
        "spark.python.unix.domain.socket.enabled": "true",
        # Reused workers (the default, made explicit): the fastdaemon's gain needs reuse.
        "spark.python.worker.reuse": "true",
        # One partition per core on the 2-core target; a round costs ~40-60 ms + ~5-7 ms per
        # task, so P=2 kept rounds at 32-56 ms for 3..200 brokers (s.2).
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        # Deterministic partitioning: same plan and placement on local[1], local[2] and clusters
        # (AQE never coalesces repartitionById anyway, but it does coalesce groupBy shuffles).
        "spark.sql.adaptive.enabled": "false",
        # Arrow for createDataFrame(pandas)/toPandas; fail loudly instead of silently falling back
        # to the row-by-row path (already true by default in 4.3, kept explicit).
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
        # Do not hold tasks back waiting for a "better" executor: every round is a few tiny tasks.
        "spark.locality.wait": "0s",
        # As if setLogLevel("WARN") at startup: INFO logging of every task/stage drowns output.
        "spark.log.level": "WARN",
    }
)

# Only when sparkkafka launches the driver JVM for a local master: no network interface other
# than loopback is ever used (parallel CI jobs, sandboxes without DNS for the hostname), and a
# driver heap for payload-heavy rounds (-Xmx only; nothing is committed up front).
_LOCAL_LAUNCH_CONF: Mapping[str, str] = MappingProxyType(
    {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.memory": "4g",
    }
)

_lock = threading.RLock()
_temp_dirs: list[str] = []

# pyspark's own default when PYSPARK_PYTHON is unset (SparkContext.pythonExec): a bare name looked up on the
# workers' PATH, i.e. the system python3 unless a venv is activated.
_PYSPARK_DEFAULT_PYTHON = "python3"
#: PYSPARK_PYTHON as the user set it before sparkkafka was imported (None: unset), see default_worker_python.
_USER_WORKER_PYTHON: str | None = None


def default_worker_python() -> None:
    """Make this interpreter the worker Python of any SparkSession built after sparkkafka is imported.

    Called once when ``sparkkafka`` is imported. pyspark takes the workers' interpreter from
    ``$PYSPARK_PYTHON`` when a SparkContext starts (else ``python3`` on the workers' PATH, the system
    one unless a venv is activated), so a session a user builds after ``import sparkkafka`` runs this
    interpreter, which has sparkkafka, pandas and pyarrow. A value the user set is kept; a relative path
    (``.venv/bin/python``) is made absolute against the current directory, as executors start in a
    directory of their own and could not find it."""
    global _USER_WORKER_PYTHON
    value = os.environ.get("PYSPARK_PYTHON")
    _USER_WORKER_PYTHON = value
    if not value:
        os.environ["PYSPARK_PYTHON"] = sys.executable
    elif _is_relative_path(value):
        os.environ["PYSPARK_PYTHON"] = os.path.abspath(value)


def _is_relative_path(value: str) -> bool:
    """A path with a directory part that is not absolute (``.venv/bin/python``); a bare name is not one."""
    return os.sep in value and not os.path.isabs(value)


def _same_interpreter(candidate: str) -> bool:
    """True when the absolute path `candidate` starts this interpreter: the same file in the same directory
    (a venv's ``python`` and ``python3`` are symlinks to one binary; the venv is its directory, so the
    binary's real path alone would also match the system interpreter)."""
    here = sys.executable
    if os.path.abspath(candidate) == here:
        return True
    return (os.path.dirname(os.path.abspath(candidate)) == os.path.dirname(here)
            and os.path.realpath(candidate) == os.path.realpath(here))


def check_worker_python(spark: SparkSession) -> None:
    """ScenarioError naming ``PYSPARK_PYTHON`` unless `spark`'s Python workers will run an interpreter that
    has sparkkafka: checked before a run directory is made, so a session built with the wrong one fails here
    and not in a worker task (``ModuleNotFoundError: No module named 'pandas'``, ``Cannot run program``).

    A local master (``local``, ``local[N]``, ``local-cluster[...]``) must run this very interpreter; on a
    cluster master the nodes' interpreter cannot be seen from here, so only pyspark's untouched default
    (``python3`` from the workers' PATH, chosen by nobody) and a relative path (unless an archive is shipped
    with ``spark.archives``, whose ``./env/bin/python`` the executors do find) are refused. Spark Connect sessions are not
    checked: their workers belong to the server."""
    sc = getattr(spark, "_sc", None)
    if sc is None or not hasattr(sc, "pythonExec"):  # Spark Connect
        return
    worker = str(sc.pythonExec)
    local = _is_local(sc.master)
    conf = sc.getConf()
    shipped = any(conf.contains(k) for k in ("spark.archives", "spark.yarn.dist.archives"))
    if _is_relative_path(worker) and (local or not shipped):  # ./env/bin/python inside a shipped archive is fine
        problem = "is a relative path: executors start in a directory of their own and cannot run it"
    elif local:
        found = worker if os.path.isabs(worker) else shutil.which(worker)
        if found and _same_interpreter(found):
            return
        problem = (f"is not this interpreter ({sys.executable}); the workers would run "
                   f"{found or 'nothing (not on PATH)'}, without sparkkafka's dependencies")
    elif worker == _PYSPARK_DEFAULT_PYTHON and _USER_WORKER_PYTHON != worker and not conf.contains(
            "spark.pyspark.python"):
        problem = "is pyspark's default (python3 on each worker's PATH), chosen by nobody"
    else:
        return
    from ..errors import ScenarioError

    raise ScenarioError(
        "spark.pyspark.python", worker,
        f"the SparkSession's worker Python {problem}. Set PYSPARK_PYTHON to an absolute path of an interpreter "
        f"with sparkkafka installed (here: PYSPARK_PYTHON={sys.executable}) before the session is built, or "
        "import sparkkafka before building it; under spark-submit the same setting is "
        f"--conf spark.pyspark.python={sys.executable} (on a cluster: that interpreter's path on every node)")


# Spark's master URLs (SparkContext.createTaskScheduler and its cluster managers; Mesos left with Spark 4),
# and Spark Connect's sc://. Anything else fails inside the JVM with "Could not parse Master URL".
_MASTER = re.compile(
    r"local"
    r"|local\[(?:[1-9]\d*|\*)(?:\s*,\s*\d+)?\]"  # local[N], local[*], local[N, maxFailures]
    r"|local-cluster\[\s*[1-9]\d*\s*,\s*[1-9]\d*\s*,\s*[1-9]\d*\s*\]"  # local-cluster[workers, cores, MiB]
    r"|yarn"
    r"|(?:spark|k8s|sc)://\S+")


def check_master(master: str | None) -> str | None:
    """`master` when it is a master URL Spark (or Spark Connect) accepts, else a ScenarioError naming
    --master: checked before a run directory is made, so a typo costs no JVM start and leaves nothing."""
    if master is not None and not _MASTER.fullmatch(master):
        from ..errors import ScenarioError

        raise ScenarioError("--master", master, "is not a Spark master URL: use local, local[N], local[*], "
                                                "local-cluster[N,cores,MiB], spark://host:port, yarn, "
                                                "k8s://https://host:port or sc://host:port (Spark Connect)")
    return master


def get_spark(
    master: str | None = None,
    *,
    app_name: str = "sparkkafka",
    conf: Mapping[str, str] | None = None,
    remote: str | None = None,
) -> SparkSession:
    """Return the active SparkSession, or build one with sparkkafka's measured configuration.

    ``master``: used only when a new classic session is launched (default ``local[2]``); a
    ``sc://`` value is taken as ``remote``. ``conf``: extra settings that win over the defaults
    (ignored for an already-active session and for Spark Connect). ``remote``: a Spark Connect
    URL; ``SPARK_REMOTE`` in the environment does the same.
    """
    from pyspark.sql import SparkSession

    check_master(master)
    with _lock:
        existing = _active_session()
        if existing is not None:
            return existing

        if master is not None and master.startswith("sc://") and remote is None:
            remote, master = master, None
        remote = remote or os.environ.get("SPARK_REMOTE")
        if remote:
            return SparkSession.builder.remote(remote).getOrCreate()

        extra = {str(k): str(v) for k, v in (conf or {}).items()}
        if _launched_by_spark_submit():
            return _get_under_submit(app_name, extra)
        conf_master = extra.pop("spark.master", None)
        return _launch(master or conf_master or DEFAULT_MASTER, app_name, extra)


def stop_spark() -> None:
    """Stop the active session (classic or Spark Connect), if any, and remove our temp dirs.

    A no-op when nothing is running. A classic session keeps pyspark's JVM gateway alive after
    ``stop()``, so a later ``get_spark`` in the same process is fast but cannot change
    driver JVM options (``spark.driver.memory``, ``extraJavaOptions``).
    """
    with _lock:
        session = _active_session()
        if session is not None:
            session.stop()
        while _temp_dirs:
            shutil.rmtree(_temp_dirs.pop(), ignore_errors=True)


# --------------------------------------------------------------------------------------------
# internals


def _active_session() -> SparkSession | None:
    """The session a caller would expect to share, classic or Connect; None when there is none."""
    connect = sys.modules.get("pyspark.sql.connect.session")
    if connect is not None:  # only if Spark Connect was used in this process at all
        cs = connect.SparkSession.getActiveSession() or connect.SparkSession._get_default_session()
        if cs is not None:
            return cs

    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if SparkContext._active_spark_context is None:
        return None
    session = SparkSession.getActiveSession() or SparkSession._instantiatedSession
    if session is not None and session._sc._jsc is not None:
        return session
    # A bare SparkContext (created without a session): wrap it, add no option.
    return SparkSession.builder.getOrCreate()


def _launched_by_spark_submit() -> bool:
    """True when this Python driver was started by a JVM (spark-submit, pyspark shell, ...).

    ``PYSPARK_GATEWAY_PORT`` is how the JVM hands its gateway to the Python driver. Once the
    gateway is connected, ``SparkConf()`` also shows the submitted ``spark.master``. A gateway that
    pyspark launched itself in this process (from an earlier, now stopped session) does not count:
    its system properties are our own old settings, which a new builder may override.
    """
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        return True
    from pyspark import SparkConf, SparkContext

    if SparkContext._gateway is not None:  # launched by pyspark in this process
        return False
    return SparkConf().contains("spark.master")


def _get_under_submit(app_name: str, extra: dict[str, str]) -> SparkSession:
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    SparkContext._ensure_initialized()  # connect to the JVM's gateway so SparkConf() sees --conf
    present = SparkConf()
    master = present.get("spark.master", "")
    extra.pop("spark.master", None)  # spark-submit chose the master; never override it
    wanted: dict[str, str] = dict(DEFAULT_CONF)
    wanted.pop("spark.pyspark.driver.python")  # the driver is already running
    # Worker interpreter: --conf, else $PYSPARK_PYTHON, else (local master only) this interpreter.
    if "spark.pyspark.python" in extra:
        os.environ["PYSPARK_PYTHON"] = extra["spark.pyspark.python"]
    elif present.contains("spark.pyspark.python"):
        os.environ.setdefault("PYSPARK_PYTHON", present.get("spark.pyspark.python"))
    elif "PYSPARK_PYTHON" in os.environ or not _is_local(master):
        wanted.pop("spark.pyspark.python")
    else:
        os.environ["PYSPARK_PYTHON"] = sys.executable
    if not (present.contains("spark.local.dir") and present.contains("spark.sql.warehouse.dir")):
        wanted.update(_temp_dir_conf())
    if not _daemon_module_usable(master, jvm_running=True):
        wanted.pop("spark.python.daemon.module")
    wanted.update(extra)
    if _is_local(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    builder = SparkSession.builder
    if not present.contains("spark.app.name"):
        builder = builder.appName(app_name)
    for key, value in wanted.items():
        if key in extra or not present.contains(key):
            builder = builder.config(key, value)
    return builder.getOrCreate()


def _launch(master: str, app_name: str, extra: dict[str, str]) -> SparkSession:
    from pyspark.sql import SparkSession

    settings: dict[str, str] = dict(DEFAULT_CONF)
    if _is_local(master):
        settings.update(_LOCAL_LAUNCH_CONF)
        # Driver JVM, executors and Spark's own listeners bind loopback only.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    settings.update(_temp_dir_conf())
    if not _daemon_module_usable(master, jvm_running=False):
        settings.pop("spark.python.daemon.module")
    settings.update(extra)

    jvm_opts = os.environ.get(TEST_JVM_OPTS_ENV, "").strip()
    if jvm_opts:
        base = settings.get("spark.driver.extraJavaOptions", "").strip()
        settings["spark.driver.extraJavaOptions"] = f"{base} {jvm_opts}".strip()

    # pyspark's driver side takes the worker interpreter from the environment, not from the conf
    # (SparkContext.pythonExec = $PYSPARK_PYTHON or "python3"): keep both the same.
    os.environ["PYSPARK_PYTHON"] = settings["spark.pyspark.python"]

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _is_local(master: str) -> bool:
    return master.startswith("local")  # local, local[N], local[*], local[N,F], local-cluster[...]


def _temp_dir_conf() -> dict[str, str]:
    """A private dir for shuffle/spill files and the warehouse, removed at exit or stop_spark().

    Keeps ``spark-warehouse/`` and block-manager dirs out of the working tree and apart from
    other runs on the same machine.
    """
    root = tempfile.mkdtemp(prefix="sparkkafka-spark-")
    _temp_dirs.append(root)
    return {
        "spark.local.dir": os.path.join(root, "local"),
        "spark.sql.warehouse.dir": os.path.join(root, "warehouse"),
    }


@atexit.register
def _remove_temp_dirs() -> None:
    for path in _temp_dirs:
        shutil.rmtree(path, ignore_errors=True)


@lru_cache(maxsize=8)
def _importable_by_fresh_python(pythonpath: str, cwd: str) -> bool:
    code = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({FASTDAEMON_MODULE!r}) is None)"
    env = {**os.environ, "PYTHONPATH": pythonpath}
    try:
        proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, timeout=60, capture_output=True)
    except (OSError, subprocess.SubprocessError):
        return False
    return proc.returncode == 0


def _daemon_module_usable(master: str, *, jvm_running: bool) -> bool:
    """Select the fastdaemon unless the workers certainly cannot import it.

    Spark starts the daemon as ``$PYSPARK_PYTHON -m <module>`` in the driver's working directory
    with the driver's environment, and a daemon that fails to import breaks *every* Python UDF.
    For a local master this is checked with a fresh interpreter (~30 ms, once). If sparkkafka is
    only importable here through a path added at run time (pytest rootdir, a notebook's
    sys.path), the package's parent dir is appended to PYTHONPATH, which the JVM and its workers
    inherit; if the JVM is already running (spark-submit) the stock daemon is kept instead.
    For a cluster master the package must be installed on the executors (or shipped with
    ``spark.executorEnv.PYTHONPATH``); that cannot be checked from here.
    """
    if not _is_local(master):
        return True
    if _importable_by_fresh_python(os.environ.get("PYTHONPATH", ""), os.getcwd()):
        return True
    if jvm_running:
        return False
    root = str(Path(__file__).resolve().parents[2])
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    pythonpath = os.pathsep.join([*parts, root])
    if not _importable_by_fresh_python(pythonpath, os.getcwd()):
        return False
    os.environ["PYTHONPATH"] = pythonpath
    return True
