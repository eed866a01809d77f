"""sparkkafka.engine.session / fastdaemon: session reuse, broker placement, multi-process modes."""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparkkafka.engine import fastdaemon
from sparkkafka.engine.session import DEFAULT_CONF, FASTDAEMON_MODULE, get_spark

JOB = Path(__file__).parent / "jobs" / "partition_check.py"


def _load_job():
    spec = importlib.util.spec_from_file_location("sparkkafka_tests_partition_check", JOB)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _result(proc) -> dict:
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, (
        f"no RESULT line (exit {proc.returncode})\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    )
    return json.loads(lines[-1][len("RESULT ") :])


def _assert_placement(result: dict, brokers: int = 12) -> None:
    assert result["ok"], result["failures"]
    placement = {int(b): p for b, p in result["partition_of_broker"].items()}  # JSON keys are str
    assert placement == {b: b % 2 for b in range(brokers)}
    assert result["daemons"] == [FASTDAEMON_MODULE]


# --------------------------------------------------------------------------------------------
# in-process, with the shared session


def test_get_spark_returns_active_session_untouched(spark):
    sc = spark.sparkContext
    master, app = sc.master, sc.appName
    spark.conf.set("spark.sql.shuffle.partitions", "7")  # a value set after startup
    try:
        again = get_spark(
            "local[1]",
            app_name="something-else",
            conf={"spark.sql.shuffle.partitions": "3", "spark.sql.adaptive.enabled": "true"},
        )
        assert again is spark
        assert again.sparkContext.master == master == "local[2]"
        assert again.sparkContext.appName == app
        assert again.conf.get("spark.sql.shuffle.partitions") == "7"
        assert again.conf.get("spark.sql.adaptive.enabled") == "false"
        # An active classic session wins over a Connect URL too (nothing is contacted).
        assert get_spark(remote="sc://127.0.0.1:1") is spark
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "2")


def test_session_has_measured_defaults(spark):
    conf = spark.sparkContext.getConf()
    for key in (
        "spark.python.daemon.module",
        "spark.python.unix.domain.socket.enabled",
        "spark.pyspark.python",
        "spark.ui.enabled",
        "spark.sql.adaptive.enabled",
    ):
        assert conf.get(key) == DEFAULT_CONF[key], key
    assert conf.get("spark.driver.host") == "127.0.0.1"


def test_fastdaemon_collect_freezes_after_first_call():
    shim = fastdaemon._FreezeAfterFirstTask()
    before = gc.get_freeze_count()
    try:
        shim.collect()
        assert shim.frozen and gc.get_freeze_count() > before
        t = time.perf_counter()
        shim.collect()
        assert time.perf_counter() - t < 0.5
        assert shim.get_threshold() == gc.get_threshold()  # everything else is the real gc
    finally:
        gc.unfreeze()


# A forked worker whose JVM end is already closed (the session stopped): pyspark's daemon.worker reads EOF,
# reports it, and its final flush hits the closed socket. Run in a child so the worker's signal handlers
# and the patched pyspark.daemon stay out of this process.
_CLOSED_JVM = """
import socket, sys
from pyspark import daemon
if sys.argv[1] == "fast":
    from sparkkafka.engine import fastdaemon
    fastdaemon.install()
worker, jvm = socket.socketpair()
jvm.close()
code = daemon.worker(worker, True)
live, peer = socket.socketpair()  # a JVM still listening gets every byte through the same fdopen
out = daemon.os.fdopen(daemon.os.dup(live.fileno()), "wb", 65536)
out.write(b"END"); out.flush()
print(code, peer.recv(16).decode())
"""


@pytest.mark.parametrize(("daemon", "traceback"), [("stock", True), ("fast", False)])
def test_worker_of_a_closed_jvm_ends_without_a_broken_pipe_traceback(daemon, traceback):
    proc = subprocess.run([sys.executable, "-c", _CLOSED_JVM, daemon], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert proc.stdout.split() == ["-1", "END"], proc.stderr
    assert ("BrokenPipeError" in proc.stderr) is traceback, proc.stderr
    if not traceback:
        assert proc.stderr == ""


def test_repartition_by_id_places_broker_mod_2_and_workers_import_sparkkafka(spark):
    result = _load_job().run_check(spark, brokers=12, partitions=2)
    _assert_placement(result)
    assert all(path.endswith("sparkkafka/engine/session.py") for path in result["sparkkafka_files"])
    # the fastdaemon's workers import the pip-installed pyspark (cached bytecode), not Spark's zip of it
    import pyspark

    assert result["pyspark_files"] == [pyspark.__file__]


def _fake_pip_pyspark(site: Path, installed: str, zipped: str) -> list[str]:
    """A site dir holding pyspark and py4j at `installed`, and pyspark's copies of both zipped at `zipped`."""
    import zipfile

    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    for pkg in ("pyspark", "py4j"):
        (site / pkg).mkdir(exist_ok=True)
        (site / pkg / "__init__.py").write_text("")
        (site / pkg / "version.py").write_text(f'__version__ = "{installed}"\n')
    zips = [str(lib / "pyspark.zip"), str(lib / f"py4j-{zipped}-src.zip")]
    for path, pkg in zip(zips, ("pyspark", "py4j"), strict=True):
        with zipfile.ZipFile(path, "w") as z:
            z.writestr(f"{pkg}/__init__.py", "")
            z.writestr(f"{pkg}/version.py", f"__version__: str = '{zipped}'\n")
    return zips


def test_daemon_prefers_the_installed_pyspark_over_sparks_zip_of_the_same_version(tmp_path):
    site = tmp_path / "site-packages"
    zips = _fake_pip_pyspark(site, "4.3.0", "4.3.0")
    path = [*zips, "/somewhere", str(site)]
    assert fastdaemon.prefer_installed_pyspark(path) == ["/somewhere", str(site), *zips]
    assert fastdaemon.prefer_installed_pyspark([*zips, "/somewhere"]) == [*zips, "/somewhere"]  # site not on it


def test_daemon_keeps_sparks_zip_of_another_version_or_a_distributions_zip(tmp_path):
    site = tmp_path / "site-packages"
    zips = _fake_pip_pyspark(site, "4.3.0", "4.2.0")
    assert fastdaemon.prefer_installed_pyspark([*zips, str(site)]) == [*zips, str(site)]
    dist = tmp_path / "spark-4.3.0-bin" / "python" / "lib"  # $SPARK_HOME of a Spark distribution
    dist.mkdir(parents=True)
    path = [str(dist / "pyspark.zip"), str(site)]
    assert fastdaemon.prefer_installed_pyspark(path) == path


# --------------------------------------------------------------------------------------------
# separate processes (slow: each starts its own JVMs)


def placed_by_spark_submit(tmp: Path, master: str) -> tuple[subprocess.CompletedProcess, str]:
    """JOB through spark-submit on `master` (a standalone Master + Worker for "standalone"), and the master
    URL it was given."""
    from sparkutil import spark_submit, standalone_cluster

    if master != "standalone":
        return spark_submit(JOB, master=master, conf={"spark.sql.shuffle.partitions": "5"}, timeout=300), master
    with standalone_cluster() as url:
        return spark_submit(JOB, master=url, timeout=300), url


def placed_through_spark_connect(tmp: Path) -> subprocess.CompletedProcess:
    """JOB as a Spark Connect client: SPARK_REMOTE in the environment, get_spark() builds a Connect
    session and sets nothing."""
    from sparkutil import connect_server, run_python

    with connect_server() as url:
        return run_python(JOB, timeout=300, env={"SPARK_REMOTE": url})


@pytest.mark.slow
@pytest.mark.offload(work=placed_by_spark_submit)
@pytest.mark.parametrize("master", ["local-cluster[2,1,1024]", "standalone"])
def test_placement_under_spark_submit(offloaded, master):
    proc, url = offloaded
    result = _result(proc)
    assert proc.returncode == 0, result
    _assert_placement(result)
    assert result["master"] == url
    if master == "standalone":
        return
    # get_spark kept spark-submit's master and --conf, and filled in only the missing defaults.
    assert result["sql_conf"] == {"spark.sql.shuffle.partitions": "5", "spark.sql.adaptive.enabled": "false"}
    assert result["conf"]["spark.python.daemon.module"] == FASTDAEMON_MODULE
    assert result["conf"]["spark.python.unix.domain.socket.enabled"] == "true"
    assert len(result["worker_pids"]) == 2  # two executor JVMs, one worker each


@pytest.mark.slow
@pytest.mark.offload(work=placed_through_spark_connect)
def test_placement_through_spark_connect(offloaded):
    result = _result(offloaded)
    assert offloaded.returncode == 0, result
    _assert_placement(result)
    assert result["connect"] is True
    assert result["sql_conf"]["spark.sql.adaptive.enabled"] == "false"  # the server's DEFAULT_CONF
