"""Every table of a run read by Delta Lake's own Spark reader gives the Python API's rows (docs/tables.md,
"Reading the tables").

No Delta connector is built for this project's pyspark 4.3 (sparkkafka/delta_spark.py), so the reading
happens in a side venv with pyspark 4.2.0 + delta-spark 4.4.1 (what ``pip install -e '.[delta-spark]'``
resolves) and sparkkafka's other dependencies, made once and kept under ~/.cache/sparkkafka/ keyed by
the versions (test_delta_writer runs in it too), its Ivy cache (the connector
JAR from Maven Central) inside it. tests/delta_spark_reader.py runs there: ``spark.read.format("delta")``,
``versionAsOf`` and ``DESCRIBE HISTORY`` on three runs: (a) a finished run, (b) one killed at seeded I/O points
and continued with ``sparkkafka run RUN --until-ms``, (c) one whose Delta logs were thinned (checkpoints,
old commits deleted by tables.trim_logs). What it read is compared row for row with the Python API's
DataFrames (Cluster views) and deltalake's versions. Slow: a Spark start here, one there (~35 s with the
venv made; making it ~2-3 min more, measured in docs/jvm-packages.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from crash_util import IoPoints, uninterrupted
from crash_util import scenario as crash_scenario
from deltalake import DeltaTable
from sparkutil import _INHERITED_SPARK_STATE, BASE_ENV, _run, spark_env
from test_determinism import tables as canonical_tables

from sparkkafka import Cluster
from sparkkafka.cli import main
from sparkkafka.delta_spark import DELTA_VERSION, DeltaConnectorError, delta_package
from sparkkafka.run_views import read_table_df
from sparkkafka.scenario import parse_scenario
from sparkkafka.storage import tables as T

PYSPARK, DELTA_PIP = "4.2.0", "4.4.1"
READER = Path(__file__).with_name("delta_spark_reader.py")
#: sparkkafka's dependencies but pyspark, at the versions this project's venv has them
DEPENDENCIES = ("pandas", "pyarrow", "numpy", "deltalake", "pyyaml", "pydantic", "tqdm")
CACHE = (Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sparkkafka"
         / f"delta-spark-py{sys.version_info[0]}.{sys.version_info[1]}-pyspark{PYSPARK}-delta{DELTA_PIP}")


# ------------------------------------------------------------------ the helper (no Spark)


def test_delta_package_is_the_connector_built_for_the_running_spark_minor():
    assert delta_package("4.2.0") == f"io.delta:delta-spark_4.2_2.13:{DELTA_VERSION}"
    assert delta_package("4.1.1") == f"io.delta:delta-spark_4.1_2.13:{DELTA_VERSION}"
    assert delta_package("4.0.1") == f"io.delta:delta-spark_4.0_2.13:{DELTA_VERSION}"


def test_no_connector_for_pyspark_4_3_is_refused_naming_the_version_and_what_works():
    with pytest.raises(DeltaConnectorError, match=r"no Delta Lake connector exists for pyspark 4\.3\.0") as e:
        delta_package("4.3.0")
    assert "deltalake" in str(e.value) and "pyspark 4.2.0 + delta-spark 4.4.1" in str(e.value)


# ------------------------------------------------------------------ the side venv and the runs


def side_python() -> Path:
    """The side venv's python, made the first time (under a lock: two test runs may want it at once):
    pyspark 4.2.0 + delta-spark 4.4.1 + this venv's versions of sparkkafka's other dependencies, so that
    both the reader here and test_delta_writer's emulator runs use the one venv."""
    from importlib.metadata import version

    CACHE.parent.mkdir(parents=True, exist_ok=True)
    python, ready = CACHE / "bin" / "python", CACHE / "ready"
    pins = [f"pyspark=={PYSPARK}", f"delta-spark=={DELTA_PIP}", *(f"{d}=={version(d)}" for d in DEPENDENCIES)]
    with open(CACHE.parent / f"{CACHE.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ready.exists() or ready.read_text().split() != pins:
            shutil.rmtree(CACHE, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(CACHE)], check=True, timeout=300, env=BASE_ENV)
            subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *pins],
                           check=True, timeout=1800, env=BASE_ENV)
            ready.write_text(" ".join(pins) + "\n")
    return python


def side_env(python: Path, **extra: str) -> dict[str, str]:
    """The environment of a child on the side venv's `python`: none of this venv's Spark or Python paths."""
    env = {k: v for k, v in BASE_ENV.items() if k not in _INHERITED_SPARK_STATE
           and k not in ("SPARK_HOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV", "PYTHONPATH")}
    return {**env, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": str(python), **extra}


def thinned_scenario() -> dict:
    """The crash scenario with each table's Delta log trimmed to 2 commits before the saved state (plus one
    checkpoint per 2 versions of the older history) at every save: checkpoints every 3 commits."""
    sc = crash_scenario(ENGINE, **{"delta.log.retention.commits": 2})
    sc["name"] = "thinned"
    return sc


#: the runs' engine: every engine writes the same tables (test_determinism, test_resident), and this one
#: needs no Spark session of its own in the child process that makes them
ENGINE = "local"
RUNS = ("finished", "continued", "thinned")


def make_runs(root: str) -> dict[str, str]:
    """(a) finished, (b) killed twice at seeded I/O points then continued by `sparkkafka run RUN --until-ms`,
    (c) thinned: run directories under `root` (run in a child process: the kills patch this process's I/O)."""
    finished = os.path.join(root, "finished")
    _, _, points = uninterrupted(None, crash_scenario(ENGINE), finished)
    continued = os.path.join(root, "continued")
    sc = crash_scenario(ENGINE)
    rng = random.Random(2604)
    for _ in range(2):
        # after the run directory exists (a kill before that leaves no run to continue), inside the run
        with pytest.MonkeyPatch.context() as mp, IoPoints(rng.randint(points // 4, points // 2)).installed(mp):
            with contextlib.suppress(BaseException):
                if os.path.exists(os.path.join(continued, "run.json")):
                    Cluster.for_path(None, continued).run()
                else:
                    Cluster.from_scenario(parse_scenario(sc), out=continued).run()
    assert not os.path.exists(os.path.join(continued, "summary.json"))  # killed, not finished
    assert main(["run", continued, "--until-ms", str(sc["run"]["until_ms"]), "--no-progress"]) == 0
    thinned = os.path.join(root, "thinned")
    Cluster.from_scenario(parse_scenario(thinned_scenario()), out=thinned).run()
    log0 = os.path.join(thinned, "tables", "log", "_delta_log", f"{0:020d}.json")
    assert not os.path.exists(log0)  # the history was thinned
    return {"finished": finished, "continued": continued, "thinned": thinned}


#: Time travel and history are read for the two tables with many versions, checkpoints and compactions (a
#: Delta read costs ~5 s on the shared 2-core machine; the current snapshot is read for every table).
TRAVELLED = ("log", "replica_state")


def versions_to_read(tables_dir: str, name: str) -> list[int]:
    """Time-travel targets: the oldest version Delta's reader can rebuild and the one before the current
    (tables.unbroken_versions)."""
    unbroken = T.unbroken_versions(tables_dir, name)
    return sorted({unbroken[0], unbroken[max(0, len(unbroken) - 2)]})


def refused_versions(tables_dir: str, name: str) -> list[int]:
    """The older checkpoints a thinned log keeps: deltalake loads them, Delta's Spark reader does not."""
    return sorted(set(T.loadable_versions(tables_dir, name)) - set(T.unbroken_versions(tables_dir, name)))


def runs_read(tmp: Path) -> tuple[dict[str, str], Path, dict]:
    """The three runs (make_runs, in a child process), then the reader in the side venv over every table of
    every run: current snapshot, time travel, history, and the parquet-folder count of `log`. Returns the
    runs, the reader's output dir and its timings."""
    make = f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import test_delta_spark as t; t.make_runs(sys.argv[1])"
    made = _run([sys.executable, "-c", make, str(tmp / "runs")], env=spark_env(), timeout=1800, cwd=str(tmp))
    assert made.returncode == 0, made.stderr[-5000:]
    runs = {run: str(tmp / "runs" / run) for run in RUNS}
    python = side_python()
    out = tmp / "read"
    out.mkdir()
    spec: dict = {"ivy": str(CACHE / "ivy"), "reads": [], "history": [], "parquet_counts": []}
    for run, path in runs.items():
        tables_dir = os.path.join(path, "tables")
        for name in T.SCHEMAS:
            table = T.table_path(tables_dir, name)
            spec["reads"].append({"path": table, "version": None, "out": str(out / f"{run}.{name}")})
            if name not in TRAVELLED:
                continue
            for v in versions_to_read(tables_dir, name) + refused_versions(tables_dir, name)[:1]:
                spec["reads"].append({"path": table, "version": v, "out": str(out / f"{run}.{name}.v{v}")})
            spec["history"].append({"path": table, "out": str(out / f"{run}.{name}.history.json")})
        spec["parquet_counts"].append({"path": T.table_path(tables_dir, "log"), "out": str(out / f"{run}.log.count")})
    (out / "spec.json").write_text(json.dumps(spec))
    result = _run([str(python), str(READER), str(out / "spec.json")], env=side_env(python), timeout=1800)
    assert result.returncode == 0, result.stderr[-5000:]
    timings = json.loads(result.stdout.strip().splitlines()[-1])
    assert timings["pyspark"] == PYSPARK
    return runs, out, timings


#: the tests that read runs_read's result
READ = pytest.mark.offload(work=runs_read, lane="setup")


@pytest.fixture
def runs(offloaded) -> dict[str, str]:
    """The run directories of runs_read, made in the background once for the module's tests."""
    return offloaded[0]


@pytest.fixture
def read_by_delta_spark(offloaded) -> tuple[Path, dict]:
    """The reader's output dir and timings (runs_read)."""
    return offloaded[1:]


def _read(out: Path, key: str) -> pd.DataFrame:
    """What the reader wrote for `key`, or the error Delta's reader raised."""
    error = out / f"{key}.error.json"
    assert not error.exists(), f"{key}: {json.loads(error.read_text())['error']}"
    return pq.read_table(out / key).to_pandas()


def canonical(df: pd.DataFrame) -> pd.DataFrame:
    """Rows in a canonical order, columns by name, list cells as tuples (test_determinism.tables' form)."""
    for c in df.columns:
        if df[c].map(lambda v: hasattr(v, "__len__") and not isinstance(v, str | bytes)).any():
            df[c] = df[c].map(lambda v: tuple(v) if v is not None else None)
    cols = sorted(df.columns)
    return df[cols].sort_values(cols).reset_index(drop=True)


def assert_rows(got: pd.DataFrame, want: pd.DataFrame, what: str) -> None:
    pd.testing.assert_frame_equal(canonical(got), canonical(want), check_dtype=False, obj=what)


# ------------------------------------------------------------------ the tests


@READ
@pytest.mark.slow
@pytest.mark.parametrize("run", RUNS)
def test_every_table_read_by_delta_spark_is_the_python_apis(spark, runs, read_by_delta_spark, run):
    """The current snapshot of each table, read by spark.read.format("delta"), has the rows of the Python
    API's DataFrame of it (Cluster's views read it with deltalake's file list) and of deltalake's own."""
    out, _ = read_by_delta_spark
    tables_dir = os.path.join(runs[run], "tables")
    by_deltalake = canonical_tables(runs[run])
    for name in T.SCHEMAS:
        got = _read(out, f"{run}.{name}")
        assert_rows(got, read_table_df(spark, tables_dir, name).toPandas(), f"{run}.{name} (Python API)")
        assert_rows(got, by_deltalake[name], f"{run}.{name} (deltalake)")
    assert len(_read(out, f"{run}.log")) > 0 and len(_read(out, f"{run}.produce_results")) > 0  # rows, not empty tables


@READ
@pytest.mark.slow
@pytest.mark.parametrize("run", RUNS)
def test_time_travel_and_history_by_delta_spark_are_deltalakes(runs, read_by_delta_spark, run):
    """versionAsOf gives deltalake's rows of that version; DESCRIBE HISTORY lists the versions whose commit
    is still in the log. A thinned log's older checkpoints (kept for deltalake's time travel) are refused by
    Delta's reader, naming the versions it has: the unbroken run of commits."""
    out, _ = read_by_delta_spark
    tables_dir = os.path.join(runs[run], "tables")
    for name in TRAVELLED:
        path = T.table_path(tables_dir, name)
        for v in versions_to_read(tables_dir, name):
            assert_rows(_read(out, f"{run}.{name}.v{v}"), DeltaTable(path, version=v).to_pandas(), f"{run}.{name}@{v}")
        unbroken = T.unbroken_versions(tables_dir, name)
        for v in refused_versions(tables_dir, name)[:1]:
            error = json.loads((out / f"{run}.{name}.v{v}.error.json").read_text())["error"]
            assert (f"[DELTA_VERSION_NOT_FOUND] Cannot time travel Delta table to version {v}. "
                    f"Available versions: [{unbroken[0]}, {unbroken[-1]}]") in error
            assert len(DeltaTable(path, version=v).to_pandas()) > 0  # deltalake loads it
        assert bool(refused_versions(tables_dir, name)) == (run == "thinned"), run
        history = json.loads((out / f"{run}.{name}.history.json").read_text())
        assert sorted(v for v, _ in history) == unbroken, f"{run}.{name}"
        assert history[0][0] == DeltaTable(path).version()
        assert {op for _, op in history} >= {"WRITE"}


@READ
@pytest.mark.slow
def test_spark_read_parquet_on_a_table_folder_counts_removed_files_too(runs, read_by_delta_spark):
    """The wrong way (docs/tables.md): `spark.read.parquet` on a table's folder also reads the files an older
    version removed (compaction, truncation), so the compacted `log` tables count more rows than they hold."""
    out, _ = read_by_delta_spark
    for run, path in runs.items():
        naive = json.loads((out / f"{run}.log.count").read_text())
        held = len(DeltaTable(os.path.join(path, "tables", "log")).to_pandas())
        assert naive > held, f"{run}: {naive} vs {held}"
