"""Truncating replicas' logs in the `log` Delta table (sparkkafka.storage.log_truncation), no Spark."""

from __future__ import annotations

import json
import os
import statistics
import time
from urllib.parse import unquote

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from deltalake.transaction import RemoveAction

from sparkkafka.storage import tables as T
from sparkkafka.storage.log_truncation import remove_actions, truncate

BROKERS = (1, 2)
SORT = ["broker", "log_dir", "topic", "partition", "is_future", "offset"]

# (log_dir) -> per round: the (topic, partition, is_future) ranges one file holds, 5 records each
LAYOUT = {
    "d0": [[("t0", 0, False), ("t0", 1, False), ("t0", 2, False), ("t1", 0, False)]] * 3
          + [[("t0", 0, False), ("t0", 2, False)]],
    "d1": [[("t0", 3, False), ("t1", 1, False)]] * 2
          + [[("t0", 3, False), ("t1", 1, False), ("t0", 0, True)]]
          + [[("t1", 1, False)]],
}


def _file_table(rows: list[tuple]) -> pa.Table:
    cols = list(zip(*rows, strict=True))
    names = ["broker", "log_dir", "topic", "partition", "offset", "record_id", "is_future"]
    d = dict(zip(names, cols, strict=True))
    n = len(rows)
    return pa.table({
        "broker": pa.array(d["broker"], pa.int32()), "log_dir": pa.array(d["log_dir"], pa.string()),
        "topic": pa.array(d["topic"], pa.string()), "partition": pa.array(d["partition"], pa.int32()),
        "offset": pa.array(d["offset"], pa.int64()), "leader_epoch": pa.array([1] * n, pa.int32()),
        "record_id": pa.array(d["record_id"], pa.int64()),
        "key": pa.array([f"k{r}" for r in d["record_id"]], pa.string()),
        "value": pa.array([f"v{r}".encode() for r in d["record_id"]], pa.binary()),
        "value_bytes": pa.array([100] * n, pa.int32()),
        "timestamp": pa.array([1000 + r for r in d["record_id"]], pa.int64()),
        "is_future": pa.array(d["is_future"], pa.bool_()),
        "append_ms": pa.array([1000 + r for r in d["record_id"]], pa.int64()),
    }).cast(T.SCHEMAS["log"])


def _build(tables_dir: str, layout: dict, per_range: int = 5) -> T.TableWriter:
    """One file per (broker, log_dir) per round, committed round by round."""
    T.create_tables(tables_dir)
    w = T.TableWriter(tables_dir, "test")
    next_off: dict[tuple, int] = {}
    rid = 0
    rounds = max(len(v) for v in layout.values())
    for r in range(rounds):
        adds = []
        for b in BROKERS:
            for d, per_round in layout.items():
                if r >= len(per_round):
                    continue
                rows = []
                for topic, p, fut in per_round[r]:
                    key = (b, d, topic, p, fut)
                    o = next_off.get(key, 0)
                    for i in range(per_range):
                        rows.append((b, d, topic, p, o + i, rid, fut))
                        rid += 1
                    next_off[key] = o + per_range
                adds.append(T.write_file(tables_dir, "log", _file_table(rows), f"{r:08d}-b{b}",
                                         {"broker": b, "log_dir": d}))
        assert w.commit("log", adds, r)
    return w


def _rows(tables_dir: str, version: int | None = None) -> pd.DataFrame:
    df = DeltaTable(T.table_path(tables_dir, "log"), version=version).to_pandas()
    df["broker"] = df["broker"].astype("int64")
    df["partition"] = df["partition"].astype("int64")
    df["log_dir"] = df["log_dir"].astype(str)
    df["topic"] = df["topic"].astype(str)
    return df.sort_values(SORT).reset_index(drop=True)


def _live(tables_dir: str) -> dict[str, dict]:
    """Live file path (as written) -> {broker, log_dir} of the table's current version."""
    a = pa.table(DeltaTable(T.table_path(tables_dir, "log")).get_add_actions(flatten=True)).to_pandas()
    return {unquote(p): {"broker": int(b), "log_dir": d}
            for p, b, d in zip(a["path"], a["partition.broker"], a["partition.log_dir"], strict=True)}


def _expected(before: pd.DataFrame, broker: int, cuts: pd.DataFrame) -> pd.DataFrame:
    drop = pd.Series(False, index=before.index)
    for c in cuts.itertuples():
        drop |= ((before["broker"] == broker) & (before["log_dir"] == c.log_dir) & (before["topic"] == c.topic)
                 & (before["partition"] == c.partition) & (before["offset"] >= c.offset))
    return before[~drop].reset_index(drop=True)


def _cuts(*rows: tuple) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["topic", "partition", "log_dir", "offset"])


def _files_holding(tables_dir: str, version: int, broker: int,
                   cuts: pd.DataFrame) -> set[str]:
    """Paths of the files at `version` holding at least one cut row (read independently of truncate)."""
    dt = DeltaTable(T.table_path(tables_dir, "log"), version=version)
    a = pa.table(dt.get_add_actions(flatten=True)).to_pandas()
    out = set()
    for p, b, d in zip(a["path"], a["partition.broker"], a["partition.log_dir"], strict=True):
        if int(b) != broker:
            continue
        t = pq.read_table(os.path.join(T.table_path(tables_dir, "log"), unquote(p))).to_pandas()
        for c in cuts.itertuples():
            if c.log_dir == d and ((t["topic"] == c.topic) & (t["partition"] == c.partition)
                                   & (t["offset"] >= c.offset)).any():
                out.add(unquote(p))
    return out


def _apply(tmp: str, w: T.TableWriter, broker: int, cuts: pd.DataFrame, tag: str, round_no: int):
    """Truncate at the current version, check the result, return (version, adds, removes)."""
    before = _rows(tmp)
    live_before = _live(tmp)
    version = DeltaTable(T.table_path(tmp, "log")).version()
    holding = _files_holding(tmp, version, broker, cuts)
    adds, removes = truncate(tmp, version, broker, cuts, tag)
    json.dumps(adds), json.dumps(removes)  # plain dicts: they travel as JSON to the driver
    assert {r["path"] for r in removes} == holding  # exactly the files holding a cut row
    assert len({r["path"] for r in removes}) == len(removes)  # each file rewritten once
    for r in removes:
        assert r["table"] == "log" and r["size"] == os.path.getsize(os.path.join(tmp, "log", r["path"]))
        assert r["partition_values"] == {k: str(v) for k, v in live_before[r["path"]].items()}
    assert w.commit("log", adds, round_no, removes)
    after = _rows(tmp)
    pd.testing.assert_frame_equal(after, _expected(before, broker, cuts), check_dtype=False)
    live_after = _live(tmp)
    untouched = set(live_before) - holding
    assert set(live_after) == untouched | {a["path"] for a in adds}  # untouched files kept as they were
    assert not untouched & {a["path"] for a in adds}
    return version, adds, removes


@pytest.fixture
def run(tmp_path):
    tmp = str(tmp_path / "tables")
    return tmp, _build(tmp, LAYOUT)


def test_truncate_suffix_of_one_replica(run):
    tmp, w = run
    before = _rows(tmp)
    cuts = _cuts(("t0", 1, "d0", 7))
    version, adds, removes = _apply(tmp, w, 1, cuts, "trunc-r10-b1", 10)
    # t0-1 on broker 1 had offsets 0..14 in rounds 0..2: rounds 1 and 2 hold offsets >= 7;
    # round 0 (max offset 4) is pruned by stats, round 3 has t0-0 and t0-2 only
    assert sorted(r["path"] for r in removes) == ["broker=1/log_dir=d0/part-00000001-b1.parquet",
                                                  "broker=1/log_dir=d0/part-00000002-b1.parquet"]
    assert len(adds) == 2 and all(a["path"].startswith("broker=1/log_dir=d0/part-trunc-r10-b1-") for a in adds)
    after = _rows(tmp)
    rep = after[(after.broker == 1) & (after.log_dir == "d0") & (after.topic == "t0") & (after.partition == 1)]
    assert rep["offset"].tolist() == list(range(7))
    assert len(after) == len(before) - 8
    # the other broker's replica of t0-1 is intact
    other = after[(after.broker == 2) & (after.topic == "t0") & (after.partition == 1)]
    assert other["offset"].tolist() == list(range(15))
    # the rewritten files carry Delta stats of what remains
    st = {a["path"]: json.loads(a["stats"]) for a in adds}
    assert sorted(s["numRecords"] for s in st.values()) == [15, 17]


def test_truncate_two_replicas_sharing_files(run):
    tmp, w = run
    cuts = _cuts(("t0", 1, "d0", 3), ("t0", 2, "d0", 6),
                 ("t0", 2, "d0", 9),  # a second cut of the same replica: the lowest one wins
                 ("t0", 1, "d1", 0))  # t0-1 has no log in d1: cuts nothing
    _, adds, removes = _apply(tmp, w, 2, cuts, "trunc-r11-b2", 11)
    # round 0 holds t0-1 3..4 (and t0-2 0..4 below its cut); rounds 1..3 hold t0-2 >= 6
    assert sorted(r["path"] for r in removes) == [f"broker=2/log_dir=d0/part-0000000{r}-b2.parquet"
                                                  for r in range(4)]
    assert len(adds) == 4
    after = _rows(tmp)
    b2 = after[(after.broker == 2) & (after.log_dir == "d0")]
    assert b2[(b2.topic == "t0") & (b2.partition == 1)]["offset"].tolist() == [0, 1, 2]
    assert b2[(b2.topic == "t0") & (b2.partition == 2)]["offset"].tolist() == list(range(6))
    assert b2[(b2.topic == "t0") & (b2.partition == 0)]["offset"].tolist() == list(range(20))


def test_delete_whole_replica_and_future_log_rows(run):
    tmp, w = run
    # t1-1 lives alone in broker 2's round-3 d1 file: that file goes without a replacement
    _, adds, removes = _apply(tmp, w, 2, _cuts(("t1", 1, "d1", 0)), "del-r12-b2", 12)
    assert len(removes) == 4 and len(adds) == 3
    assert "broker=2/log_dir=d1/part-00000003-b2.parquet" in {r["path"] for r in removes}
    after = _rows(tmp)
    assert not ((after.broker == 2) & (after.topic == "t1") & (after.partition == 1)).any()
    assert ((after.broker == 1) & (after.topic == "t1") & (after.partition == 1)).sum() == 20
    # is_future rows are cut like any other row of their log_dir (t0-0 of broker 1 in d1 is future-only)
    _apply(tmp, w, 1, _cuts(("t0", 0, "d1", 0)), "del-r13-b1", 13)
    after = _rows(tmp)
    assert not after[after.broker == 1]["is_future"].any()
    assert after[after.broker == 2]["is_future"].sum() == 5
    assert ((after.broker == 1) & (after.log_dir == "d0") & (after.topic == "t0") & (after.partition == 0)).sum() == 20


def test_many_cuts_in_one_call(run):
    """More cuts per log_dir than the per-cut mask handles: the hash-join path gives the same result."""
    tmp, w = run
    cuts = _cuts(("t0", 1, "d0", 4), ("t1", 0, "d0", 2), ("t0", 0, "d0", 13), ("t0", 3, "d1", 8),
                 *[("t9", p, "d0", 0) for p in range(8)])  # replicas without a log: no effect
    _, adds, removes = _apply(tmp, w, 1, cuts, "trunc-r14-b1", 14)
    assert len(removes) == 6 and len(adds) == 6


def test_retry_on_old_version_rewrites_same_files(run):
    tmp, w = run
    cuts = _cuts(("t0", 1, "d0", 2), ("t1", 0, "d0", 0))
    version = DeltaTable(T.table_path(tmp, "log")).version()
    adds1, removes1 = truncate(tmp, version, 1, cuts, "trunc-r20-b1")
    content = {a["path"]: open(os.path.join(tmp, "log", a["path"]), "rb").read() for a in adds1}
    adds2, removes2 = truncate(tmp, version, 1, cuts, "trunc-r20-b1")  # a retried task, same version
    assert [a["path"] for a in adds2] == [a["path"] for a in adds1]
    assert [(r["path"], r["size"]) for r in removes2] == [(r["path"], r["size"]) for r in removes1]
    assert [a["size"] for a in adds2] == [a["size"] for a in adds1]
    assert all(open(os.path.join(tmp, "log", p), "rb").read() == b for p, b in content.items())
    assert w.commit("log", adds2, 20, removes1)
    expect = _rows(tmp)
    # a task retried after the driver committed: still the old version, same names, same bytes
    adds3, removes3 = truncate(tmp, version, 1, cuts, "trunc-r20-b1")
    assert [a["path"] for a in adds3] == [a["path"] for a in adds1]
    assert [r["path"] for r in removes3] == [r["path"] for r in removes1]
    assert not w.commit("log", adds3, 20, removes3)  # the round is already committed
    pd.testing.assert_frame_equal(_rows(tmp), expect)
    # reading the old version still sees the cut rows (removed files are not vacuumed)
    assert len(_rows(tmp, version)) > len(expect)


def test_no_cuts_and_nothing_to_cut(run):
    tmp, w = run
    version = DeltaTable(T.table_path(tmp, "log")).version()
    assert truncate(tmp, version, 1, _cuts(), "x") == ([], [])
    # beyond the end of the log, an unknown topic, an unknown broker: no file is rewritten
    assert truncate(tmp, version, 1, _cuts(("t0", 1, "d0", 15), ("zz", 0, "d0", 0)), "x") == ([], [])
    assert truncate(tmp, version, 9, _cuts(("t0", 1, "d0", 0)), "x") == ([], [])


def test_remove_actions_and_commit_guard(run):
    tmp, w = run
    r = {"table": "log", "path": "broker=1/log_dir=d0/part-x.parquet",
         "partition_values": {"broker": "1", "log_dir": "d0"}, "size": 123, "deletion_timestamp": 5}
    (ra,) = remove_actions([r])
    assert isinstance(ra, RemoveAction)
    assert (ra.path, ra.data_change, ra.deletion_timestamp, ra.size, ra.partition_values) == (
        r["path"], True, 5, 123, {"broker": "1", "log_dir": "d0"})
    with pytest.raises(ValueError):
        w.commit("metrics", [], 99, [r])


def test_benchmark_truncate_200_files(tmp_path):
    """Not an assertion on time: prints how long truncate takes on a ~200-file log table."""
    tmp = str(tmp_path / "tables")
    parts = [("t0", p, False) for p in range(5)] + [("t1", p, False) for p in range(5)]
    layout = {"d0": [parts] * 50, "d1": [parts] * 50}  # 2 brokers x 2 dirs x 50 rounds = 200 files
    w = _build(tmp, layout, per_range=10)
    version = DeltaTable(T.table_path(tmp, "log")).version()
    assert len(_live(tmp)) == 200
    cases = {
        "suffix of one replica (offset 255: 25 files)": _cuts(("t0", 3, "d0", 255)),
        "whole replica (offset 0: 50 files)": _cuts(("t0", 3, "d0", 0)),
        "two replicas sharing files (offsets 100 / 400: 40 files)": _cuts(("t0", 3, "d0", 100),
                                                                          ("t1", 2, "d0", 400)),
    }
    for label, cuts in cases.items():
        times = []
        for i in range(5):
            t0 = time.perf_counter()
            adds, removes = truncate(tmp, version, 1, cuts, f"bench-{i}")
            times.append((time.perf_counter() - t0) * 1000)
        print(f"\ntruncate {label}: {len(removes)} removed / {len(adds)} added, "
              f"median {statistics.median(times):.1f} ms (min {min(times):.1f}, max {max(times):.1f})")
    t0 = time.perf_counter()
    assert w.commit("log", adds, 100, removes)
    print(f"commit of {len(adds)} adds + {len(removes)} removes: {(time.perf_counter() - t0) * 1000:.1f} ms")


def test_uncommitted_actions_seen_through_a_log_snapshot(run):
    """The resident engine commits a window of rounds once: a later round of the window reads and
    truncates the log through a LogSnapshot carrying the task's own uncommitted files. What it sees
    must be what committing round by round would have shown."""
    from sparkkafka.storage.broker_disk import read_log

    tmp, w = run
    v = DeltaTable(T.table_path(tmp, "log")).version()
    cols = ["broker", "log_dir", "topic", "partition", "offset"]
    # round 4 appends t0-1 offsets 15..19 on broker 1 (not committed)
    new = T.write_file(tmp, "log", _file_table([(1, "d0", "t0", 1, 15 + i, 900 + i, False) for i in range(5)]),
                       "00000004-b1", {"broker": 1, "log_dir": "d0"})
    snap = T.LogSnapshot(v).then([new])

    def offsets(version) -> list[int]:
        t = read_log(tmp, version, 1, cols).to_pandas()
        return sorted(t[(t.topic == "t0") & (t.partition == 1) & (t.log_dir == "d0")]["offset"])

    assert offsets(v) == list(range(15))
    assert offsets(snap) == list(range(20))  # the uncommitted file is visible through the snapshot
    # round 5 truncates t0-1 to 12: the committed round-2 file and the uncommitted one are rewritten
    adds, removes = truncate(tmp, snap, 1, _cuts(("t0", 1, "d0", 12)), "trunc-r5-b1")
    assert {r["path"] for r in removes} == {"broker=1/log_dir=d0/part-00000002-b1.parquet", new["path"]}
    snap2 = snap.then(adds + [{**r, "remove": True} for r in removes])
    assert offsets(snap2) == list(range(12))
    assert new["path"] not in {a["path"] for a in snap2.adds}
    # one commit of the window (as Cluster does: a file added and removed inside it never reaches the table)
    acts = [new, *adds, *[{**r, "remove": True} for r in removes]]
    removed = {a["path"] for a in acts if a.get("remove")}
    added = {a["path"] for a in acts if not a.get("remove")}
    assert w.commit("log", [a for a in acts if not a.get("remove") and a["path"] not in removed], 5,
                    [a for a in acts if a.get("remove") and a["path"] not in added])
    assert offsets(v + 1) == list(range(12))
    assert offsets(v) == list(range(15))  # the older version is untouched


def test_log_files_dictionary_encode_strings_only(tmp_path):
    """write_file asks Parquet for dictionaries on string columns (topic, key) only: not on integer
    columns of nearly distinct values (offsets, record ids), nor on a record's binary value."""
    rows = [(1, "d0", "t0", 0, o, 1000 + o, False) for o in range(50)]
    add = T.write_file(str(tmp_path), "log", _file_table(rows), "00000001-b1", {"broker": 1, "log_dir": "d0"})
    meta = pq.ParquetFile(os.path.join(T.table_path(str(tmp_path), "log"), unquote(add["path"]))).metadata
    dictionary = {meta.schema.column(i).name: any("DICTIONARY" in e for e in meta.row_group(0).column(i).encodings)
                  for i in range(meta.num_columns)}
    assert {c for c, d in dictionary.items() if d} == {"topic", "key"}
    assert json.loads(add["stats"])["numRecords"] == 50 and pq.read_table(
        os.path.join(T.table_path(str(tmp_path), "log"), unquote(add["path"])))["offset"].to_pylist() == list(range(50))


def test_file_stats_from_the_parquet_footer_equal_the_columns_own(tmp_path):
    """A data file's Delta stats (min/max per integer and string column) are read from the Parquet footer
    the writer made: the same values as computing them from the rows, over several row groups, with
    nulls, negative numbers, non-ASCII strings, a column null in one row group and one null throughout."""
    t = pa.table({"round": pa.array([5, -3, 7, None, 2, 9], pa.int64()),
                  "broker": pa.array([None, None, 4, 1, None, 2], pa.int32()),
                  "topic": pa.array(["b", "é", None, "a", "zz", "b"]),
                  "message": pa.array([None, None, None, None, None, None], pa.string()),
                  "acked": pa.array([True, None, False, True, True, False])})
    footer: list = []
    pq.write_table(t, str(tmp_path / "f.parquet"), row_group_size=2, metadata_collector=footer)
    assert footer[0].num_row_groups == 3
    assert json.loads(T._stats(t, footer[0])) == json.loads(T._stats(t)) == {
        "numRecords": 6, "minValues": {"round": -3, "broker": 1, "topic": "a"},
        "maxValues": {"round": 9, "broker": 4, "topic": "é"},
        "nullCount": {"round": 1, "broker": 3, "topic": 1, "message": 6, "acked": 1}}
    add = T.write_file(str(tmp_path), "replica_state", pa.table(
        {f.name: pa.array([1, 2], f.type) if pa.types.is_integer(f.type) else pa.array(["x", "y"], f.type)
         for f in T.SCHEMAS["replica_state"]}), "00000001-t0")
    assert json.loads(add["stats"])["maxValues"] == {f.name: 2 if pa.types.is_integer(f.type) else "y"
                                                     for f in T.SCHEMAS["replica_state"]}


@pytest.mark.parametrize("future", [False, True, None])
def test_a_ranged_read_returns_exactly_the_rows_inside_each_range(run, future):
    """read_log with ranges (a follower's catch-up from storage, a mover's copy): each (topic, partition)'s
    rows in [from_offset, to_offset), of the current or future logs as asked, from the committed files and
    from rows the writer still holds, in file order; a partition without a range gives nothing."""
    from sparkkafka.storage.broker_disk import read_log

    tmp, _ = run
    v = DeltaTable(T.table_path(tmp, "log")).version()
    held = [("d1", _file_table([(1, "d1", "t1", 1, 20 + i, 950 + i, False) for i in range(3)]))]
    ranges = pd.DataFrame({"topic": ["t1", "t0", "t0", "t9"], "partition": [1, 0, 3, 0],
                           "from_offset": [3, 2, 0, 0], "to_offset": [22, 4, 1, 9]})
    cols = ["broker", "log_dir", "topic", "partition", "offset", "record_id", "key", "is_future"]
    got = read_log(tmp, v, 1, cols, ranges, future=future, unwritten=held).to_pandas()
    every = pd.concat([_rows(tmp, v)[lambda d: d.broker == 1], held[0][1].to_pandas()], ignore_index=True)
    want = every.merge(ranges, on=["topic", "partition"])
    want = want[(want.offset >= want.from_offset) & (want.offset < want.to_offset)
                & ((want.is_future == future) if future is not None else True)]
    assert len(got) and set(got.topic + "-" + got.partition.astype(str)) <= {"t1-1", "t0-0", "t0-3"}
    pd.testing.assert_frame_equal(got.sort_values(SORT).reset_index(drop=True),
                                  want[cols].sort_values(SORT).reset_index(drop=True), check_dtype=False)
    assert list(got.key) == [f"k{r}" for r in got.record_id]  # dictionary-read strings come back as they were


@pytest.mark.parametrize("pairs", [None, 0])
def test_a_ranged_read_opens_only_the_files_whose_stats_overlap_a_range(run, monkeypatch, pairs):
    """A follower catching up from a new leader asks for a few recent offsets: files whose offsets (Delta
    stats) end before the range or start after it are not opened; the rows are those a full read gives.
    (pairs=0: every file checked against the ranges' bounds, as for many files and ranges.)"""
    from sparkkafka.storage import broker_disk

    if pairs is not None:
        monkeypatch.setattr(T, "_PAIRS", pairs)
    tmp, _ = run
    v = DeltaTable(T.table_path(tmp, "log")).version()
    opened = []
    real = broker_disk.pq.ParquetFile
    monkeypatch.setattr(broker_disk.pq, "ParquetFile", lambda path, **kw: opened.append(path) or real(path, **kw))
    ranges = pd.DataFrame({"topic": ["t0"], "partition": [1], "from_offset": [7], "to_offset": [9]})
    got = broker_disk.read_log(tmp, v, 1, ["topic", "partition", "offset"], ranges, future=False).to_pandas()
    assert got["offset"].tolist() == [7, 8]
    names = sorted(os.path.relpath(p, T.table_path(tmp, "log")) for p in opened)
    assert "broker=1/log_dir=d0/part-00000001-b1.parquet" in names
    assert not {"broker=1/log_dir=d0/part-00000000-b1.parquet", "broker=1/log_dir=d0/part-00000002-b1.parquet"} & set(names)
    every = broker_disk.read_log(tmp, v, 1, ["topic", "partition", "offset"], future=False).to_pandas()
    assert len(every) > len(got) and len(set(opened)) > len(names)


def test_a_file_without_stats_is_always_read():
    """A log file whose add action has no min/max stats (written by another Delta writer) may hold any
    range: the ranged read and the truncation never skip it; files whose stats exclude every range are
    skipped."""

    n = pa.nulls(3)
    files = pa.table({"min.topic": pa.array(["a", None, "b"]), "max.topic": pa.array(["a", None, "c"]),
                      "min.partition": pa.array([0, None, 0], pa.int32()), "max.partition": pa.array([9, None, 9], pa.int32()),
                      "min.offset": pa.array([0, None, 100], pa.int64()), "max.offset": pa.array([50, None, 200], pa.int64()),
                      "path": n.cast(pa.string())})
    ranges = pd.DataFrame({"topic": ["a", "c"], "partition": [1, 3], "from_offset": [60, 0], "to_offset": [70, 100]})
    assert T.files_overlapping(files, ranges).tolist() == [False, True, False]
    ranges = pd.DataFrame({"topic": ["a", "c"], "partition": [1, 3], "from_offset": [50, 0], "to_offset": [70, 101]})
    assert T.files_overlapping(files, ranges).tolist() == [True, True, True]
