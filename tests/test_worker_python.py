"""The Python workers run the driver's interpreter, whoever built the SparkSession (engine/session.py).

Spark-free: check_worker_python on stand-in sessions (only ``_sc.pythonExec``, ``master`` and ``getConf`` are
read), default_worker_python on the environment, Cluster refusing such a session before its run directory
exists. Slow: a script that builds its session before importing sparkkafka, run with the venv not
activated, and docs/cli.md's spark-submit recipe on local-cluster with the venv off PATH.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from sparkutil import _run
from test_docs import ROOT, block_env, extract_blocks, repo_copy

from sparkkafka import Cluster, ScenarioError
from sparkkafka.engine import session

QUICKSTART = str(ROOT / "conf" / "scenarios" / "quickstart.yaml")


def fake_session(python: str, master: str = "local[2]", conf: dict[str, str] | None = None) -> SimpleNamespace:
    """What check_worker_python reads of a classic SparkSession, without Spark."""
    settings = dict(conf or {})
    return SimpleNamespace(_sc=SimpleNamespace(pythonExec=python, master=master,
                                               getConf=lambda: SimpleNamespace(contains=settings.__contains__)))


@pytest.mark.parametrize("master", ["local[2]", "local-cluster[2,1,1024]", "spark://127.0.0.1:7077"])
def test_this_interpreter_is_accepted_on_any_master(master):
    session.check_worker_python(fake_session(sys.executable, master))


def test_spark_connect_session_is_not_checked():
    session.check_worker_python(SimpleNamespace())  # a Connect session has no SparkContext


@pytest.mark.parametrize("master", ["local[2]", "local-cluster[2,1,1024]", "spark://127.0.0.1:7077"])
def test_relative_path_is_refused_naming_the_setting(master):
    with pytest.raises(ScenarioError) as err:
        session.check_worker_python(fake_session(".venv/bin/python", master))
    assert err.value.field == "spark.pyspark.python" and err.value.value == ".venv/bin/python"
    assert "relative path" in str(err.value) and f"PYSPARK_PYTHON={sys.executable}" in str(err.value)


def test_system_python3_on_path_is_refused_on_a_local_master(monkeypatch, tmp_path):
    """pyspark's default `python3`, found on a PATH without the venv: the workers would lack pandas."""
    other = tmp_path / "bin" / "python3"
    other.parent.mkdir()
    other.symlink_to(os.path.realpath(sys.executable))  # the same binary, outside the venv: not this env
    monkeypatch.setenv("PATH", str(other.parent))
    with pytest.raises(ScenarioError) as err:
        session.check_worker_python(fake_session("python3"))
    assert f"the workers would run {other}" in str(err.value)
    assert f"--conf spark.pyspark.python={sys.executable}" in str(err.value)


def test_bare_name_resolving_to_this_venv_is_accepted(monkeypatch):
    """An activated venv: `python3` on PATH is this interpreter's sibling symlink, the same environment."""
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))
    session.check_worker_python(fake_session("python3"))


def test_cluster_master_refuses_only_the_unchosen_default(monkeypatch):
    monkeypatch.setattr(session, "_USER_WORKER_PYTHON", None)
    with pytest.raises(ScenarioError, match="pyspark's default"):
        session.check_worker_python(fake_session("python3", "spark://127.0.0.1:7077"))
    session.check_worker_python(fake_session("python3", "yarn", {"spark.pyspark.python": "python3"}))
    session.check_worker_python(fake_session("/opt/conda/bin/python", "spark://127.0.0.1:7077"))
    session.check_worker_python(fake_session("./env/bin/python", "yarn", {"spark.archives": "env.tar.gz#env"}))
    monkeypatch.setattr(session, "_USER_WORKER_PYTHON", "python3")  # PYSPARK_PYTHON=python3, chosen by the user
    session.check_worker_python(fake_session("python3", "k8s://https://127.0.0.1:6443"))


@pytest.mark.parametrize(("before", "after"), [(None, sys.executable), (".venv/bin/python", None),
                                               ("/opt/py/bin/python", "/opt/py/bin/python")])
def test_import_default_worker_python(monkeypatch, tmp_path, before, after):
    """Unset: this interpreter; relative: made absolute against the current directory; absolute: kept."""
    monkeypatch.chdir(tmp_path)
    if before is None:
        monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    else:
        monkeypatch.setenv("PYSPARK_PYTHON", before)
    monkeypatch.setattr(session, "_USER_WORKER_PYTHON", None)
    session.default_worker_python()
    assert os.environ["PYSPARK_PYTHON"] == (after or str(tmp_path / before))
    assert session._USER_WORKER_PYTHON == before


def test_cluster_refuses_a_wrong_worker_python_before_making_the_run_directory(tmp_path):
    out = tmp_path / "runs" / "q"
    with pytest.raises(ScenarioError, match=r"spark\.pyspark\.python"):
        Cluster.from_scenario(QUICKSTART, spark=fake_session("/usr/bin/python3"), out=str(out))
    assert not out.parent.exists()


def test_a_cluster_checks_its_session_once_per_command(tmp_path, monkeypatch):
    """from_scenario checks the session before the run directory exists and for_path before it reopens one:
    once each (the constructor used to check it again). A run on the in-process engine reads nothing of the
    session but its shuffle partitions, so a stand-in does."""
    import copy

    from operator_util import TINY

    from sparkkafka import cluster

    calls = []
    monkeypatch.setattr(cluster, "check_worker_python", lambda s: (calls.append(s), session.check_worker_python(s)))
    spark = fake_session(sys.executable)
    spark.conf = SimpleNamespace(get=lambda key, default=None: default)
    local = copy.deepcopy(TINY)
    local["cluster"]["emulator"] = {"engine": "local"}
    out = str(tmp_path / "run")
    Cluster.from_scenario(local, spark=spark, out=out).step(rounds=1)
    assert calls == [spark]
    Cluster.for_path(spark, out).step(rounds=1)
    assert calls == [spark, spark]


# ------------------------------------------------------------------ real Spark, in subprocesses

SESSION_FIRST = """\
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[2]").getOrCreate()
from sparkkafka import Cluster
Cluster.from_scenario("conf/scenarios/quickstart.yaml", spark=spark, out="runs/q").run()
"""


def session_first(tmp: Path) -> tuple[subprocess.CompletedProcess, Path]:
    """SESSION_FIRST run with the venv not activated: the process and its folder."""
    (tmp / "script.py").write_text(SESSION_FIRST)
    (tmp / "conf").symlink_to(ROOT / "conf")
    return _run([sys.executable, "script.py"], env=block_env("python"), timeout=300, cwd=str(tmp)), tmp


@pytest.mark.slow
@pytest.mark.offload(work=session_first)
def test_session_built_before_import_is_refused_with_the_setting(offloaded):
    """The venv not activated, the session built before sparkkafka is imported: its workers would run the
    system python3 (ModuleNotFoundError in a task); the run is refused at once, naming the one setting."""
    result, cwd = offloaded
    assert result.returncode == 1, result.stderr[-3000:]
    assert "ScenarioError: spark.pyspark.python: " in result.stderr
    assert f"PYSPARK_PYTHON={sys.executable}" in result.stderr
    assert "ModuleNotFoundError" not in result.stderr and not (cwd / "runs").exists()


def submitted(tmp: Path, snippet: str, master: str | None = None) -> tuple[subprocess.CompletedProcess, Path]:
    """docs/cli.md's spark-submit block holding `snippet`, as written (its master replaced by `master`), run in a
    copy of the repository with the venv not on PATH: the process and the copy."""
    [recipe] = [b for b in extract_blocks("docs/cli.md", (ROOT / "docs" / "cli.md").read_text()) if snippet in b.text]
    text = recipe.text if master is None else recipe.text.replace("spark://127.0.0.1:7077", master)
    cwd = repo_copy(tmp / "repo")
    return _run(["bash", "-euo", "pipefail", "-c", text], env=block_env("python"), timeout=600, cwd=str(cwd)), cwd


def submitted_locally(tmp: Path) -> tuple[subprocess.CompletedProcess, Path]:
    return submitted(tmp, "local-cluster[2,1,1024]' \\")


def submitted_to_a_standalone_master(tmp: Path) -> tuple[subprocess.CompletedProcess, Path]:
    from sparkutil import standalone_cluster

    with standalone_cluster() as master:
        return submitted(tmp, "--master spark://127.0.0.1:7077", master)


def assert_submitted(result: subprocess.CompletedProcess, cwd: Path) -> dict:
    """The recipe exited 0, its workers found their interpreter, and it left the run's summary (returned)."""
    assert result.returncode == 0, result.stderr[-5000:]
    assert "Cannot run program" not in result.stderr
    return json.loads((cwd / "runs" / "submitted" / "summary.json").read_text())


@pytest.mark.slow
@pytest.mark.offload(work=submitted_locally)
def test_spark_submit_recipe(offloaded):
    """docs/cli.md's spark-submit command, as written, on local-cluster with the venv not on PATH."""
    assert assert_submitted(*offloaded)["acked"] > 0


@pytest.mark.slow
@pytest.mark.offload(work=submitted_to_a_standalone_master)
def test_spark_submit_recipe_on_a_standalone_master(offloaded):
    """docs/cli.md's cluster-master command on a standalone Master + Worker (the venv not on PATH): the
    executors run the interpreter `--conf spark.pyspark.python` names, and the run completes."""
    summary = assert_submitted(*offloaded)
    assert summary["acked"] > 0 and summary["lost_acked"] == 0
