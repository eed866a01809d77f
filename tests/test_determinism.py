"""Same scenario and seed -> identical tables on local[1], local[2], a multi-process cluster,
through spark-submit, and through a Spark Connect server (no RDD, no SparkContext) whose master is a
standalone Master + Worker (executors in their own JVMs and Python workers, as on a real cluster)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from deltalake import DeltaTable
from sparkutil import connect_server, run_python, spark_submit, standalone_cluster

from sparkkafka import Cluster
from sparkkafka.storage.tables import SCHEMAS

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = str(ROOT / "conf" / "scenarios" / "failures.yaml")
JOB = str(ROOT / "jobs" / "run_scenario.py")


def tables(out: str) -> dict[str, pd.DataFrame]:
    """Every table's rows in a canonical order (lists as tuples so they sort and compare)."""
    got = {}
    for name in SCHEMAS:
        df = DeltaTable(os.path.join(out, "tables", name)).to_pandas()
        for c in df.columns:
            if df[c].map(lambda v: hasattr(v, "__len__") and not isinstance(v, str | bytes)).any():
                df[c] = df[c].map(tuple)
        got[name] = df[sorted(df.columns)].sort_values(sorted(df.columns)).reset_index(drop=True)
    return got


def assert_same(a: dict, b: dict) -> None:
    for name in SCHEMAS:
        pd.testing.assert_frame_equal(a[name], b[name], check_dtype=False, obj=name)


@pytest.fixture(scope="module")
def reference(spark, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("ref") / "run")
    c = Cluster.from_scenario(SCENARIO, spark=spark, out=out)
    c.run()
    t = tables(out)
    assert len(t["log"]) > 0 and t["produce_results"]["acked"].any()
    return t


def test_rerun_in_process_is_identical(spark, reference, tmp_path):
    out = str(tmp_path / "run")
    Cluster.from_scenario(SCENARIO, spark=spark, out=out).run()
    assert_same(tables(out), reference)


def test_run_stopped_and_reopened_between_jobs_is_identical(spark, reference, tmp_path):
    """The run directory is the cluster: stopped while a broker is down (650 ms), while another is paused
    (1050 ms) and while a network partition is in force (1850 ms), each time reopened by a new Cluster from
    its files (run_dir.py), it goes on to the tables of the uninterrupted run."""
    out = str(tmp_path / "run")
    c = Cluster.from_scenario(SCENARIO, spark=spark, out=out)
    for stop in (650, 1050, 1850):
        c.run(until_ms=stop)
        c = Cluster.for_path(spark, out)
        assert c.round == stop // 100 + 1 and c.resumable
    assert c.crashed == set() and c.isolations and c.workload.producers  # a partition in force, producers active
    c.run()
    assert_same(tables(out), reference)


def submitted(tmp: Path, master: str) -> tuple[subprocess.CompletedProcess, str]:
    """jobs/run_scenario.py on the resident engine (many rounds per barrier job, messages over the tasks' own
    sockets) through spark-submit on `master`: the process and its run directory."""
    out = str(tmp / "run")
    return spark_submit(JOB, SCENARIO, "--out", out, "--engine", "resident", master=master, timeout=900), out


def connected(tmp: Path) -> tuple[subprocess.CompletedProcess, str]:
    """The same job as a Spark Connect client of a server whose master is a standalone Master + Worker."""
    out = str(tmp / "run")
    with standalone_cluster() as master, connect_server(master=master) as url:
        proc = run_python(JOB, SCENARIO, "--out", out, "--engine", "resident", env={"SPARK_REMOTE": url},
                          timeout=900)
    return proc, out


@pytest.mark.slow
@pytest.mark.offload(work=submitted)
@pytest.mark.parametrize("master", ["local[1]", "local-cluster[2,1,1024]"])
def test_spark_submit_gives_identical_tables(reference, offloaded, master):
    # in a multi-process cluster the resident engine gives the in-process round engine's tables
    proc, out = offloaded
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Topic: a\tTopicId: " in proc.stdout
    assert [line for line in proc.stderr.splitlines() if " ERROR " in line] == []  # a good run logs no ERROR
    assert_same(tables(out), reference)


@pytest.mark.slow
@pytest.mark.offload(work=connected)
def test_spark_connect_on_standalone_cluster_gives_identical_tables(reference, offloaded):
    proc, out = offloaded
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_same(tables(out), reference)
