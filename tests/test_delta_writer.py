"""The emulator's tables committed through Delta's own JVM transaction API (emulator ``delta.writer:
delta-spark``, storage/delta_jvm.py) are the tables delta-rs commits (docs/tables.md, "Who commits").

No Delta connector is built for this project's pyspark 4.3, so the delta-spark runs happen in test_delta_spark's
side venv (pyspark 4.2.0 + delta-spark 4.4.1 and sparkkafka's other dependencies; sparkkafka itself from this
tree on PYTHONPATH), made once and kept under ~/.cache/sparkkafka/, with the connector JAR in its Ivy cache. tests/delta_spark_writer.py runs there: the quickstart with each
writer in one session, then a round committed again through the delta-spark writer. Compared here: every
table's rows (test_determinism.tables) and summary.json; the history is Delta's (WRITE per round with the
round in commitInfo.tags, OPTIMIZE for the compactions, dataChange false). Slow: ~3 min with the
venv made (measured in docs/tables.md); making it ~2 min more.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from deltalake import DeltaTable
from sparkutil import _run
from test_delta_spark import CACHE as READER_CACHE
from test_delta_spark import PYSPARK, side_env, side_python
from test_determinism import assert_same, tables

from sparkkafka import Cluster
from sparkkafka.errors import ScenarioError
from sparkkafka.reporting.run_data import log_version_before
from sparkkafka.scenario import parse_scenario
from sparkkafka.storage import tables as T

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(__file__).with_name("delta_spark_writer.py")
QUICKSTART = ROOT / "conf" / "scenarios" / "quickstart.yaml"


def quickstart(**emulator) -> dict:
    sc = yaml.safe_load(QUICKSTART.read_text())
    sc["cluster"].setdefault("emulator", {}).update(emulator)
    return sc


# ------------------------------------------------------------------ the setting (no Delta needed)


def test_delta_writer_defaults_to_deltalake_and_names_its_choices():
    assert parse_scenario(quickstart()).emulator["delta.writer"] == "deltalake"
    assert parse_scenario(quickstart(**{"delta.writer": "delta-spark"})).emulator["delta.writer"] == "delta-spark"
    with pytest.raises(ScenarioError) as e:
        parse_scenario(quickstart(**{"delta.writer": "spark"}))
    assert (e.value.field, e.value.value) == ("cluster.emulator.delta.writer", "spark")
    assert "must be one of deltalake, delta-spark" in e.value.message


def test_delta_spark_on_a_session_without_delta_is_refused_before_the_run_directory_exists(spark, tmp_path):
    """The project's session (pyspark 4.3, no Delta connector) cannot commit through Delta: refused naming the
    setting and the session's spark.sql.extensions, nothing written."""
    out = tmp_path / "run"
    with pytest.raises(ScenarioError) as e:
        Cluster.from_scenario(quickstart(**{"delta.writer": "delta-spark"}), spark=spark, out=str(out))
    assert (e.value.field, e.value.value) == ("cluster.emulator.delta.writer", "delta-spark")
    assert "the SparkSession has no Delta SQL extension (spark.sql.extensions=" in e.value.message
    assert "configure_delta" in e.value.message and not out.exists()


def test_delta_spark_on_the_in_process_engine_without_a_session_is_refused(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(ScenarioError, match="needs a SparkSession to commit through"):
        Cluster.from_scenario(quickstart(**{"delta.writer": "delta-spark", "engine": "local"}), out=str(out))
    assert not out.exists()


def test_the_json_actions_are_what_delta_rs_writes_for_the_same_files(tmp_path):
    """delta_add / delta_remove, the actions handed to Delta's JVM, match the add and remove delta-rs wrote to
    the log for the same files (the `%` of an escaped log-dir folder as `%25`, partition values, stats)."""
    tables_dir = str(tmp_path / "tables")
    T.create_tables(tables_dir)
    w = T.TableWriter(tables_dir, "r")
    row = {f.name: [None] for f in T.SCHEMAS["log"]} | {"topic": ["t"], "partition": [0], "offset": [5]}
    data = pa.table(row, schema=T.SCHEMAS["log"])
    add = T.write_file(tables_dir, "log", data, "00000001-w0", {"broker": 1, "log_dir": "/var/kafka 1/d0"})
    assert w.commit("log", [add], 1)
    removal = {"table": "log", "path": add["path"], "partition_values": add["partition_values"],
               "size": add["size"], "deletion_timestamp": 1234}
    assert w.commit("log", [], 2, [removal])
    log = Path(T.table_path(tables_dir, "log"), "_delta_log")
    written = [json.loads(line) for v in (1, 2) for line in (log / f"{v:020d}.json").read_text().splitlines()]
    by_delta_rs = {k: a[k] for a in written for k in ("add", "remove") if k in a}
    ours = T.delta_add(add, True)["add"]
    assert {k: by_delta_rs["add"][k] for k in ours} == ours
    ours = T.delta_remove(T.remove_actions([removal])[0])["remove"]
    assert {k: by_delta_rs["remove"][k] for k in ours if k in by_delta_rs["remove"]} == ours
    assert "%252Fvar%252Fkafka%25201%252Fd0" in ours["path"]


# ------------------------------------------------------------------ the side venv and the runs


def writer_runs(tmp: Path) -> dict:
    """The quickstart run once with each writer in the side venv (delta-spark first, so it also pays the
    session's first jobs), then one of its rounds committed again; the script's JSON line."""
    python = side_python()  # made before on this lane; the JAR is in its Ivy cache
    runs = [{"scenario": quickstart(), "writer": w, "out": str(tmp / w)} for w in ("delta-spark", "deltalake")]
    spec = {"ivy": str(READER_CACHE / "ivy"), "runs": runs, "recommit": str(tmp / "delta-spark")}
    (tmp / "spec.json").write_text(json.dumps(spec))
    result = _run([str(python), str(SCRIPT), str(tmp / "spec.json")], env=side_env(python, PYTHONPATH=str(ROOT)),
                  timeout=2400, cwd=str(tmp))
    assert result.returncode == 0, result.stderr[-5000:]
    got = json.loads(result.stdout.strip().splitlines()[-1])
    assert got["pyspark"] == PYSPARK
    return {"dirs": {r["writer"]: r["out"] for r in runs}, **got}


#: the tests that read writer_runs' result
WRITTEN = pytest.mark.offload(work=writer_runs, lane="setup")


@pytest.fixture
def runs(offloaded) -> dict:
    """writer_runs' result, made in the background (tests/background.py) once for the tests that read it."""
    return offloaded


@WRITTEN
@pytest.mark.slow
def test_both_writers_give_the_same_tables_and_summary(runs):
    ds, dl = runs["dirs"]["delta-spark"], runs["dirs"]["deltalake"]
    by_delta, by_rs = tables(ds), tables(dl)
    assert_same(by_delta, by_rs)
    assert len(by_rs["log"]) > 0 and by_rs["produce_results"]["acked"].any()
    assert json.loads(Path(ds, "summary.json").read_text()) == json.loads(Path(dl, "summary.json").read_text())


@WRITTEN
@pytest.mark.slow
def test_delta_spark_commits_are_deltas_own_with_the_round_and_the_app_transaction(runs):
    """Every round's commit is Delta's WRITE tagged with its round, a compaction (the end-of-run one folds the
    log's window files) an OPTIMIZE whose files are dataChange false; the app transaction is the run's last round, as with delta-rs; deltalake reads
    the round tags back for the report's "before" picture."""
    ds, dl = runs["dirs"]["delta-spark"], runs["dirs"]["deltalake"]
    app = {run: f"sparkkafka-{json.loads(Path(run, 'run.json').read_text())['run_id']}" for run in (ds, dl)}
    for name in T.SCHEMAS:
        if name == "violations":  # written at the end by deltalake, with either writer
            continue
        path = T.table_path(os.path.join(ds, "tables"), name)
        history = sorted(DeltaTable(path).history(), key=lambda h: h["version"])
        assert history[0]["operation"] == "CREATE TABLE" and "delta-rs" in history[0]["engineInfo"]
        writes = [h for h in history if h["operation"] == "WRITE"]
        assert writes and all("Delta-Lake/4.4.0" in h["engineInfo"] for h in history[1:]), name
        assert all(int(h["tags"]["sparkkafka.round"]) > 0 for h in writes), name
        optimized = [h for h in history if h["operation"] == "OPTIMIZE"]
        assert optimized or name != "log", name  # the end-of-run compaction folds the log's window files
        for h in optimized:
            assert h["tags"] == {"sparkkafka.compaction": "1"}, name
            lines = Path(path, "_delta_log", f"{h['version']:020d}.json").read_text().splitlines()
            changes = [a[k] for a in map(json.loads, lines) for k in ("add", "remove") if k in a]
            assert changes and {c["dataChange"] for c in changes} == {False}, name
        by_rs = DeltaTable(T.table_path(os.path.join(dl, "tables"), name)).transaction_version(app[dl])
        assert DeltaTable(path).transaction_version(app[ds]) == by_rs is not None, name
    tables_dir = os.path.join(ds, "tables")
    assert log_version_before(tables_dir, 40) == log_version_before(os.path.join(dl, "tables"), 40)


@WRITTEN
@pytest.mark.slow
def test_a_round_committed_again_through_delta_spark_is_refused(runs):
    """Delta's txnVersion check in the commit's own transaction refuses the run's last round: no version."""
    again = runs["recommit"]
    assert again["round"] > 0 and again["accepted"] is False and again["after"] == again["before"]


@WRITTEN
@pytest.mark.slow
def test_a_rollback_drops_the_checksums_delta_left_beside_the_commits(runs):
    """Delta's JVM writer leaves a `.crc` beside a commit: the versions a rollback drops lose theirs too (a
    stale one would describe another commit of that version), and no version listing counts them."""
    tables_dir = runs["dirs"]["delta-spark"] + "-copy"
    shutil.copytree(os.path.join(runs["dirs"]["delta-spark"], "tables"), tables_dir)
    log = Path(T.table_path(tables_dir, "log"), "_delta_log")
    current = DeltaTable(T.table_path(tables_dir, "log")).version()
    assert (log / f"{1:020d}.crc").exists()
    assert T.unbroken_versions(tables_dir, "log") == list(range(current + 1))
    assert T.rollback(tables_dir, {"log": 0}) == ["log"]
    assert sorted(p.name for p in log.iterdir()) == [f"{0:020d}.json"]
    assert DeltaTable(T.table_path(tables_dir, "log")).version() == 0
