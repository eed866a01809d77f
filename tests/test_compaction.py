"""Mid-run Delta upkeep (storage/compaction.py): tiered compaction keeps a table's rows, its
app-transaction version and its readers' pinned versions; checkpoints appear; bad settings are refused."""

from __future__ import annotations

import os

import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable
from test_log_truncation import _file_table

from sparkkafka.errors import ScenarioError
from sparkkafka.scenario import parse_scenario
from sparkkafka.storage import tables as T
from sparkkafka.storage.broker_disk import read_log
from sparkkafka.storage.compaction import compact, tier_of

COLS = ["broker", "log_dir", "topic", "partition", "offset", "record_id"]


def _rounds(tables_dir: str, w: T.TableWriter, rounds: range) -> None:
    """Per round: one log file per (broker, log_dir) and one metrics file, committed as the driver does."""
    for r in rounds:
        adds = [T.write_file(tables_dir, "log", _file_table([(b, d, "t", p, r, 1000 * r + 10 * b + p, False)
                                                             for p in range(3)]),
                             f"{r:08d}-b{b}", {"broker": b, "log_dir": d}) for b in (1, 2) for d in ("d0", "d1")]
        assert w.commit("log", adds, r)
        m = pa.table({"round": [r], "time_ms": [100 * r]}).append_column(
            "under_replicated", pa.array([r % 3], pa.int32()))
        metrics = pa.table({f.name: (m[f.name] if f.name in m.column_names else pa.array([0], f.type))
                            for f in T.SCHEMAS["metrics"]}).cast(T.SCHEMAS["metrics"])
        w.append("metrics", metrics, r, f"{r:08d}-driver")


def _table(tables_dir: str, name: str) -> pd.DataFrame:
    df = T.read_table(tables_dir, name).to_pandas()
    return df[sorted(df.columns)].sort_values(sorted(df.columns)).reset_index(drop=True)


def test_tiered_compaction_keeps_rows_and_idempotency(tmp_path):
    plain, folded = str(tmp_path / "plain"), str(tmp_path / "folded")
    T.create_tables(plain)
    T.create_tables(folded, checkpoint_interval=3)
    _rounds(plain, T.TableWriter(plain, "run"), range(20))
    w = T.TableWriter(folded, "run", compact_min_files=3)
    _rounds(folded, w, range(20))
    for name in ("log", "metrics"):
        pd.testing.assert_frame_equal(_table(folded, name), _table(plain, name), obj=name)
    dt = DeltaTable(T.table_path(folded, "log"))
    acts = pa.table(dt.get_add_actions(flatten=True)).to_pandas()
    assert len(acts) < 4 * 20 / 2  # 20 files per partition before: 2 of tier 0..2 at most per tier now
    for _, g in acts.groupby(["partition.broker", "partition.log_dir"]):
        tiers = pd.Series([tier_of(p) for p in g["path"]]).value_counts()
        assert (tiers < 3).all() and tiers.index.max() >= 2  # 20 = 2*9 + 2: two tier-2 files, two tier-0 ones
    assert len(DeltaTable(T.table_path(folded, "metrics")).file_uris()) < 20
    # a compaction is no round: the run's committed round stays 19, so a retried round is refused
    assert dt.transaction_version(w.app_id) == 19
    assert not w.commit("log", [T.write_file(folded, "log", _file_table([(1, "d0", "t", 9, 99, 1, False)]),
                                             "00000019-b1", {"broker": 1, "log_dir": "d0"})], 19)
    # a checkpoint every 3 commits (delta-rs writes one when version + 1 is a multiple of the interval)
    logs = os.listdir(os.path.join(T.table_path(folded, "log"), "_delta_log"))
    points = sorted(int(f.split(".")[0]) for f in logs if f.endswith(".checkpoint.parquet"))
    assert points == list(range(2, dt.version() + 1, 3))


def test_a_reader_pinned_before_a_compaction_reads_the_same_rows(tmp_path):
    tables = str(tmp_path / "t")
    T.create_tables(tables)
    w = T.TableWriter(tables, "run")
    _rounds(tables, w, range(6))
    pinned = w.table("log").version()
    before = read_log(tables, pinned, 1, COLS).to_pandas().sort_values(COLS).reset_index(drop=True)
    assert compact(w, "log", 4) == 4 * 6  # every (broker, log_dir)'s six round files
    assert w.table("log").version() == pinned + 1
    after = read_log(tables, pinned + 1, 1, COLS).to_pandas().sort_values(COLS).reset_index(drop=True)
    again = read_log(tables, pinned, 1, COLS).to_pandas().sort_values(COLS).reset_index(drop=True)
    pd.testing.assert_frame_equal(after, before)
    pd.testing.assert_frame_equal(again, before)
    assert compact(w, "log", 4) == 0  # nothing left to fold: no new version
    assert w.table("log").version() == pinned + 1


def test_compaction_skips_partitions_it_is_told_to(tmp_path):
    tables = str(tmp_path / "t")
    T.create_tables(tables)
    w = T.TableWriter(tables, "run")
    _rounds(tables, w, range(4))
    assert compact(w, "log", 2, skip={("1", "d0"), ("2", "d1")}) == 2 * 4
    acts = pa.table(w.table("log").get_add_actions(flatten=True)).to_pandas()
    per = acts.groupby(["partition.broker", "partition.log_dir"]).size().to_dict()
    assert per == {(1, "d0"): 4, (1, "d1"): 1, (2, "d0"): 1, (2, "d1"): 4}


@pytest.mark.parametrize("field", ["delta.checkpoint.interval", "delta.compact.min.files", "delta.log.retention.commits"])
@pytest.mark.parametrize("value", [0, -3, "often"])
def test_bad_upkeep_settings_are_refused_by_name(field, value):
    raw = {"cluster": {"brokers": 1, "emulator": {field: value}}, "topics": [{"name": "t"}]}
    with pytest.raises(ScenarioError) as e:
        parse_scenario(raw, name="x")
    assert f"cluster.emulator.{field}" in str(e.value) and str(value) in str(e.value)


@pytest.mark.slow
def test_compaction_mid_run_leaves_every_table_as_without(spark, tmp_path):
    """The quickstart's first 4 s on the resident engine (broker 3 crashes at 2 s, leaders move, logs are
    truncated) with a fold every 2 files against none: the same rows in every table."""
    from test_determinism import assert_same, tables
    from test_resident import _scenario

    from sparkkafka import Cluster

    runs = {}
    for files in (2, 1_000_000):
        out = str(tmp_path / str(files))
        c = Cluster.from_scenario(_scenario("quickstart", "resident", **{"delta.compact.min.files": files,
                                                                         "delta.checkpoint.interval": 2}),
                                  spark=spark, out=out)
        c.run(until_ms=4000)
        logs = os.listdir(os.path.join(out, "tables", "log", "_delta_log"))
        assert any(f.endswith(".checkpoint.parquet") for f in logs)
        runs[files] = (tables(out), c.summary(), c.writer.upkeep_s)
    assert runs[2][2] > 0 and runs[1_000_000][2] == 0  # folds happened in one run only
    assert_same(runs[2][0], runs[1_000_000][0])
    assert runs[2][1] == runs[1_000_000][1]
