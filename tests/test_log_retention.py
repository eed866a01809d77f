"""The Delta log's history thinned at each driver save (storage/tables.trim_logs, emulator
delta.log.retention.commits): what still loads, what a rollback and the next commit find, what the
report's time travel shows, and that a run's tables are those of a run that keeps its whole log."""

from __future__ import annotations

import os
import shutil

import pandas as pd
import pytest
from deltalake import DeltaTable
from test_compaction import _rounds
from test_determinism import assert_same, tables
from test_resident import _scenario

from sparkkafka import Cluster
from sparkkafka.reporting.run_data import load_run, log_version_before
from sparkkafka.storage import tables as T


def _rows(tables_dir: str, version: int) -> pd.DataFrame:
    df = DeltaTable(T.table_path(tables_dir, "log"), version=version).to_pandas()
    return df.sort_values(sorted(df.columns)).reset_index(drop=True)


def _entries(tables_dir: str, name: str = "log") -> list[str]:
    return os.listdir(os.path.join(T.table_path(tables_dir, name), "_delta_log"))


@pytest.fixture(scope="module")
def _built(tmp_path_factory):
    """60 rounds committed (one log commit each, a checkpoint every 5: versions 4, 9, ..., 59), then the
    log thinned for a state saved at version 60 keeping 20 commits."""
    tables_dir = str(tmp_path_factory.mktemp("trim") / "t")
    T.create_tables(tables_dir, checkpoint_interval=5)
    _rounds(tables_dir, T.TableWriter(tables_dir, "r"), range(1, 61))
    want = {v: _rows(tables_dir, v) for v in (4, 24, 39, 50, 60)}
    assert len(_entries(tables_dir)) == 61 + 12 + 1  # commits, checkpoints, _last_checkpoint
    gone = T.trim_logs(tables_dir, T.table_versions(tables_dir), keep=20)
    return tables_dir, want, gone


@pytest.fixture
def trimmed(_built, tmp_path):
    """A copy of the thinned tables (a test may commit to it) and the run's writer of them."""
    tables_dir, want, gone = _built
    copy = str(tmp_path / "t")
    shutil.copytree(tables_dir, copy)
    return copy, T.TableWriter(copy, "r"), want, gone


def test_a_trimmed_log_keeps_its_last_commits_whole_and_one_checkpoint_per_retention_before(trimmed):
    tables_dir, w, want, gone = trimmed
    # the newest checkpoint at or before 60 - 20 is 39: everything from it on; before it the first
    # checkpoint of each 20 versions (4, 24)
    assert T.loadable_versions(tables_dir, "log") == [4, 24, *range(39, 61)]
    assert len(_entries(tables_dir)) == 2 + 22 + 5 + 1 and gone == 2 * (74 - 30)  # log and metrics alike
    for version, rows in want.items():
        pd.testing.assert_frame_equal(_rows(tables_dir, version), rows, obj=f"log at version {version}")
    with pytest.raises(Exception, match="(?i)version|log"):
        DeltaTable(T.table_path(tables_dir, "log"), version=38)


def test_after_a_trim_the_run_commits_on_and_rolls_back_to_its_saved_version(trimmed):
    tables_dir, w, want, _ = trimmed
    assert not w.commit("log", [], 60)  # the app transaction survives: a re-run round is refused
    _rounds(tables_dir, w, range(61, 72))
    assert DeltaTable(T.table_path(tables_dir, "log")).version() == 71
    assert T.rollback(tables_dir, {"log": 50, "metrics": 50}) == ["log", "metrics"]
    dt = DeltaTable(T.table_path(tables_dir, "log"))
    assert dt.version() == 50 and dt.transaction_version(w.app_id) == 50
    pd.testing.assert_frame_equal(_rows(tables_dir, 50), want[50])


def test_the_reports_time_travel_takes_the_nearest_checkpoint_of_a_thinned_history(trimmed):
    tables_dir = trimmed[0]
    assert log_version_before(tables_dir, 51) == (50, None)  # kept whole: the version itself
    assert log_version_before(tables_dir, 40) == (39, None)
    assert log_version_before(tables_dir, 39) == (24, 24)  # 25-38 are gone: the picture moves back
    assert log_version_before(tables_dir, 3) == (4, 4)  # before everything kept: the oldest, after round 4


def test_a_run_thinning_its_log_has_the_tables_of_one_that_keeps_it_and_reopens(tmp_path):
    """One log commit per round (the in-process engine committing every round), a checkpoint every 2 commits, 4 kept, a save every
    7 rounds, the run stopped at 1.5 s and reopened: the tables are those of a run keeping its whole log,
    the log holds a few dozen entries instead of one per round, and the report's disk picture of an early
    moment comes from the nearest kept checkpoint, labelled with its time."""
    runs = {}
    for keep in (4, 1_000_000):
        out = str(tmp_path / f"keep-{keep}")
        sc = _scenario("quickstart", "local", **{"delta.log.retention.commits": keep, "delta.checkpoint.interval": 2,
                                                  "checkpoint.rounds": 7, "history.commit.rounds": 1})
        Cluster.from_scenario(sc, spark=None, out=out).run(until_ms=1500)
        Cluster.for_path(None, out).run(until_ms=4000)
        runs[keep] = out
    assert_same(tables(runs[4]), tables(runs[1_000_000]))
    thin, whole = (len(_entries(os.path.join(runs[k], "tables"))) for k in (4, 1_000_000))
    assert whole > 40 and thin < 25
    early = load_run(runs[4], before_ms=3000)
    assert early.before_ms < 3000  # moved back to a kept checkpoint's time
    same = load_run(runs[1_000_000], before_ms=early.before_ms)
    pd.testing.assert_frame_equal(early.disk_before, same.disk_before)
    assert load_run(runs[4], before_ms=3800).before_ms == 3800  # recent history loads as it is
