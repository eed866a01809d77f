"""The frame helpers the protocol core's hot path stands on (protocol/frames.py): key lookups, group ids,
joins. Each is checked against the pandas operation it replaces, on the shapes that need a fallback."""

import numpy as np
import pandas as pd
import pytest

from sparkkafka.protocol import frames as F


def _multiindex_locate(table, probe, on, probe_on=None):
    idx = pd.MultiIndex.from_arrays([table[c].to_numpy() for c in on])
    return idx.get_indexer(pd.MultiIndex.from_arrays([probe[c].to_numpy() for c in (probe_on or on)]))


@pytest.fixture
def replicas():
    rng = np.random.default_rng(7)
    n = 500
    return pd.DataFrame({"broker": rng.integers(0, 12, n).astype("int32"),
                         "topic": rng.choice(["a", "b", "orders"], n).astype(object),
                         "partition": np.arange(n, dtype="int32")})


def test_locate_finds_what_a_multiindex_finds(replicas):
    probe = pd.concat([replicas.sample(frac=0.7, random_state=1),
                       pd.DataFrame({"broker": [99, 0], "topic": ["a", "zz"], "partition": [1, 2]})])
    got = F.locate(replicas, probe)
    assert (got == _multiindex_locate(replicas, probe, F.KEY)).all()
    assert (got[-2:] == -1).all() and (got[:-2] >= 0).all()


def test_locate_of_a_frame_in_itself_or_an_earlier_version_is_what_a_multiindex_finds(replicas):
    later = replicas.assign(leo=1)  # other columns replaced: the same key arrays
    rebuilt = pd.DataFrame({"broker": replicas["broker"].to_numpy().copy(),  # equal keys, other arrays and objects
                            "topic": np.array(["".join(t) for t in replicas["topic"]], dtype=object),
                            "partition": replicas["partition"].to_numpy().copy()})
    shifted = rebuilt.assign(partition=np.roll(rebuilt["partition"].to_numpy(), 1))
    for probe in (replicas, later, rebuilt, shifted, replicas.iloc[::-1]):
        got = F.locate(replicas, probe)
        assert got.tolist() == _multiindex_locate(replicas, probe, F.KEY).tolist()
    nulls = pd.DataFrame({"topic": ["a", None, "b"], "partition": [1, 2, 3]})
    assert F.locate(nulls, nulls.copy(), on=["topic", "partition"]).tolist() == [0, 1, 2]


def test_locate_keys_of_mixed_types_and_nulls():
    table = pd.DataFrame({"topic": ["a", None, "b"], "partition": [1.0, 2.0, np.nan]})
    probe = pd.DataFrame({"topic": [None, "b", "a", "a"], "partition": [2, np.nan, 1, 3]})
    assert F.locate(table, probe, on=["topic", "partition"]).tolist() == [1, 2, 0, -1]


def test_locate_too_wide_to_fold_falls_back_to_the_multiindex():
    big = np.array([0, 2**40, 2**41], dtype="int64")
    table = pd.DataFrame({"a": big, "b": big + 5, "c": big * 3})
    probe = table.iloc[[2, 0]]
    assert F._fold([table[c].to_numpy() for c in "abc"]) is None
    assert F.locate(table, probe, on=list("abc")).tolist() == [2, 0]


def test_locate_on_sparse_keys_and_repeated_table_keys_behaves_as_the_index():
    spread = np.array([0, 10**6, 5 * 10**6], dtype="int64")  # too sparse for the lookup array
    table = pd.DataFrame({"a": spread, "b": np.array([1, 2, 3])})
    probe = pd.DataFrame({"a": np.array([5 * 10**6, 7, 0]), "b": np.array([3, 1, 1])})
    assert F.locate(table, probe, on=["a", "b"]).tolist() == [2, -1, 0]
    dup = pd.DataFrame({"a": [1, 1, 2], "b": [1, 1, 2]})
    with pytest.raises(pd.errors.InvalidIndexError):  # keys must be unique, as pandas insists
        F.locate(dup, dup.iloc[:1], on=["a", "b"])


def test_locate_remembers_a_tables_keys_and_sees_them_change_even_in_place():
    rng = np.random.default_rng(11)
    n = 2000  # above _TableKeys.MIN_ROWS: the table's coded keys are kept between calls
    table = pd.DataFrame({"broker": rng.integers(0, 12, n).astype("int32"),
                          "topic": rng.choice(["a", "b", "orders"], n).astype(object),
                          "partition": np.arange(n, dtype="int32")})
    probe = pd.concat([table.sample(frac=0.6, random_state=2),
                       pd.DataFrame({"broker": [99, 0, 1], "topic": ["a", "zz", None], "partition": [1, 2, -5]})])
    for _ in range(2):  # built, then found again
        assert F.locate(table, probe).tolist() == _multiindex_locate(table, probe, F.KEY).tolist()
    F.array(table, "partition")[:5] = [n + 1, n + 2, n + 3, n + 4, n + 5]  # written into the same array
    F.array(table, "topic")[5] = "zz"
    assert F.locate(table, probe).tolist() == _multiindex_locate(table, probe, F.KEY).tolist()
    sparse = table.assign(partition=table["partition"] * 10**6)  # codes too sparse for the lookup array
    probe2 = sparse.iloc[::7].assign(topic=lambda f: np.array([str(t) for t in f["topic"]], dtype=object))
    for _ in range(2):
        assert F.locate(sparse, probe2).tolist() == list(range(0, n, 7))
    floats = probe.assign(partition=probe["partition"].astype(float))  # another kind: the general path
    assert F.locate(table, floats).tolist() == _multiindex_locate(table, floats, F.KEY).tolist()


def test_locate_answers_a_repeated_probe_from_memory_and_sees_the_probe_change(monkeypatch):
    monkeypatch.setattr(F._TableKeys, "_kept", [])
    n = 3000  # table and probe above MIN_ROWS: the probe's answer is kept
    table = pd.DataFrame({"broker": np.repeat(np.arange(3), n // 3).astype("int32"), "topic": "t",
                          "partition": np.tile(np.arange(n // 3), 3).astype("int32")})
    probe = table.iloc[::-1].reset_index(drop=True).copy()
    first = F.locate(table, probe)
    assert first.tolist() == list(range(n - 1, -1, -1))
    first[:] = -7  # the caller's answer is its own: the kept one is not changed through it
    assert F.locate(table, probe).tolist() == list(range(n - 1, -1, -1))
    assert len(F._TableKeys._kept[0].probes) == 1  # the second answer came from memory
    F.array(probe, "partition")[0] = 10**6  # written into the probe's own array: a new probe
    assert F.locate(table, probe).tolist() == [-1, *range(n - 2, -1, -1)]
    probe2 = probe.assign(topic=np.array(["t"] * n, dtype=object))  # equal strings held by other objects
    assert F.locate(table, probe2).tolist() == [-1, *range(n - 2, -1, -1)]


def test_locate_keeps_no_table_over_its_memory_budget(monkeypatch):
    table = pd.DataFrame({"broker": np.zeros(5000, dtype="int32"), "topic": "t", "partition": np.arange(5000)})
    probe = table.iloc[[4999, 7, 0]]
    monkeypatch.setattr(F._TableKeys, "_kept", [])
    monkeypatch.setattr(F._TableKeys, "BUDGET", 10_000)  # smaller than the table's codes
    assert F.locate(table, probe).tolist() == [4999, 7, 0] and F._TableKeys._kept == []
    monkeypatch.setattr(F._TableKeys, "BUDGET", 64 << 20)
    assert F.locate(table, probe).tolist() == [4999, 7, 0] and len(F._TableKeys._kept) == 1


def test_distinct_is_pandas_factorize():
    a, b = "".join(["to", "pic"]), "".join(["top", "ic"])  # equal strings, distinct objects
    assert a == b and a is not b
    for values in (np.array([a, "x", b, None, np.nan, "x", a], dtype=object), np.array([a, b, a], dtype=object),
                   np.array([a, a, a], dtype=object), np.array([None] * 3, dtype=object),
                   np.array(["z", "y", "z"], dtype=object)[::-1],  # a non-contiguous view
                   np.array([], dtype=object), np.array([3, 1, 3], dtype="int64"),
                   np.array([1, "1", 1.0, True], dtype=object),
                   np.array([b, a, b, b, a, None, "x", None, "x", a, np.nan, b], dtype=object),  # few objects, shared
                   np.array([",".join(["1", str(i % 3)]) for i in range(12)], dtype=object)):  # an object per row
        codes, uniques = F.distinct(values)
        want, want_uniques = pd.factorize(values)
        assert codes.tolist() == want.tolist() and list(uniques) == list(want_uniques)


def test_per_value_computes_on_distinct_values_and_nulls_take_the_null_value():
    isr = np.array(["1,2,3", "", None, "1,2,3", "4", np.nan, "2,3"], dtype=object)
    assert F.isr_size(isr).tolist() == [3, 0, 0, 3, 1, 0, 2]
    assert F.isr_size(pd.Series(isr)).dtype == F._isr_size(np.array(["1"], dtype=object)).dtype
    assert F.str_len(np.array(["ab", None, "", "ab", 7], dtype=object)).tolist() == [2, 0, 0, 2, 1]  # 7: as "7"
    calls = []
    out = F.per_value(np.array(["a", "bb", "a", None], dtype=object),
                      lambda u: calls.append(list(u)) or np.array([len(x) for x in u]), null=-1)
    assert out.tolist() == [1, 2, 1, -1] and calls == [["a", "bb"]]


def test_group_ids_and_group_any_match_groupby():
    rng = np.random.default_rng(3)
    m = pd.DataFrame({"src": rng.integers(0, 4, 300), "broker": rng.integers(0, 3, 300),
                      "sent_ms": rng.choice([100, 200, 300], 300)})
    flag = rng.random(300) < 0.05
    ids = F.group_ids(m, ["src", "broker", "sent_ms"])
    assert (ids == m.groupby(["src", "broker", "sent_ms"], sort=False).ngroup().to_numpy()).all()
    want = pd.Series(flag).groupby([m[c] for c in ("src", "broker", "sent_ms")]).transform("any").to_numpy()
    assert (F.group_any(flag, ids) == want).all()


def test_group_ids_put_every_null_in_one_group_of_its_own():
    m = pd.DataFrame({"topic": ["a", None, "b", np.nan, "a", None], "partition": [1, 1, 1, 1, 1, 2]})
    ids = F.group_ids(m, ["topic", "partition"])
    assert (ids == m.groupby(["topic", "partition"], sort=False, dropna=False).ngroup().to_numpy()).all()
    assert ids.tolist() == [0, 1, 2, 1, 0, 3]


def test_join_gives_the_rows_and_order_of_an_inner_merge():
    rng = np.random.default_rng(5)
    left = pd.DataFrame({"b": rng.integers(0, 6, 60), "t": rng.choice(["x", "y", None], 60)})
    right = pd.DataFrame({"b2": rng.integers(0, 4, 40), "t": rng.choice(["y", "x", None], 40)})
    li, ri = F.join(left, right, ["b", "t"], ["b2", "t"])
    m = left.assign(_l=np.arange(60)).merge(right.assign(_r=np.arange(40)), left_on=["b", "t"], right_on=["b2", "t"])
    assert li.tolist() == m["_l"].tolist() and ri.tolist() == m["_r"].tolist()
    li, ri = F.join(left, right, ["b", "t"], ["b2", "t"], how="left")
    m = left.assign(_l=np.arange(60)).merge(right.assign(_r=np.arange(40)), left_on=["b", "t"], right_on=["b2", "t"],
                                            how="left")
    assert li.tolist() == m["_l"].tolist() and ri.tolist() == m["_r"].fillna(-1).astype(int).tolist()
    assert (ri == -1).any() and len(li) > len(set(li.tolist()))  # unmatched rows and repeated matches
    li, ri = F.join(left, right.iloc[:0], ["b"], ["b2"], how="left")
    assert li.tolist() == list(range(60)) and (ri == -1).all()
    wide = pd.DataFrame({"a": np.array([0, 2**40], "int64"), "b": np.array([0, 2**40], "int64")})
    li, ri = F.join(wide, wide.iloc[::-1], ["a", "b"])  # too wide to fold: the merge's own answer
    assert li.tolist() == [0, 1] and ri.tolist() == [1, 0]
    assert [len(x) for x in F.join(left.iloc[:0], right, ["b"], ["b2"])] == [0, 0]


def test_sort_order_is_a_stable_sort_values_with_nulls_last():
    rng = np.random.default_rng(9)
    f = pd.DataFrame({"t": rng.choice(["b", "a", None, "c"], 200), "p": rng.integers(0, 3, 200).astype("int32"),
                      "x": np.where(rng.random(200) < 0.1, np.nan, rng.integers(0, 2, 200)), "f": rng.random(200) < 0.5,
                      "s": [None if i % 7 == 0 else "".join(["k", str(i % 5)]) for i in range(200)]})  # an object a row
    for cols in (["t", "p"], ["p", "x", "t"], ["f", "t"], ["x"], ["s", "p"], ["t", "s"]):
        want = f.sort_values(cols, kind="stable").index.to_numpy()
        assert (F.sort_order([f[c].to_numpy() for c in cols]) == want).all()
        pd.testing.assert_frame_equal(F.sorted_by(f, cols), f.sort_values(cols, kind="stable"))
    assert len(F.sort_order([np.empty(0, dtype=object)])) == 0
    done = f.sort_values(["t", "p"], kind="stable").reset_index(drop=True)  # in order already: positions as they are
    assert F.sort_order([done[c].to_numpy() for c in ("t", "p")]).tolist() == list(range(200))
    # keys too wide to fold into one int64 (2^30 values a column, four columns) sort as well
    wide = pd.DataFrame({c: rng.integers(-2**29, 2**29, 200) for c in "abcd"}).assign(a=lambda d: d["a"] % 3)
    want = wide.sort_values(list("abcd"), kind="stable").index.to_numpy()
    assert (F.sort_order([wide[c].to_numpy() for c in "abcd"]) == want).all()


def test_a_remembered_sort_order_is_the_sort_order_and_sees_a_changed_key(monkeypatch):
    """sort_order(remember=True) keeps its answer for the same keys (a round's history sorts the same
    replicas each round); a key written in place or a new key gives a new, right answer."""
    monkeypatch.setattr(F._Sorts, "_kept", [])
    rng = np.random.default_rng(3)
    topic = np.array(["t1", "t0"], dtype=object)[rng.integers(0, 2, 1000)]
    part = rng.integers(0, 50, 1000).astype("int32")
    broker = rng.integers(0, 6, 1000).astype("int32")
    want = F.sort_order([topic, part, broker])
    assert F.sort_order([topic, part, broker], remember=True).tolist() == want.tolist()
    again = F.sort_order([topic.copy(), part.copy(), broker.copy()], remember=True)  # equal keys: from memory
    assert again.tolist() == want.tolist() and len(F._Sorts._kept) == 1
    part[0], part[1] = 49, 0  # written in place: the kept copy no longer matches
    assert F.sort_order([topic, part, broker], remember=True).tolist() == F.sort_order([topic, part, broker]).tolist()
    assert len(F._Sorts._kept) == 2
    few = [np.array([2, 1], "int32")]  # small keys are sorted, not kept
    assert F.sort_order(few, remember=True).tolist() == [1, 0] and len(F._Sorts._kept) == 2


def test_per_topic_is_a_map_with_a_default():
    values = pd.Series({"a": 2, "b": 3}, dtype="int64")
    topics = pd.Series(["b", "c", None, "a", "b"], dtype=object)
    want = topics.map(values).fillna(1).astype("int64").to_numpy()
    assert F.per_topic(topics, values, 1).tolist() == want.tolist() == [3, 1, 1, 2, 3]
    assert F.per_topic(topics, pd.Series(dtype="int64"), 1).tolist() == [1] * 5
    assert F.per_topic(np.empty(0, dtype=object), values, 1).dtype == "int64"
    holes = pd.Series({"a": 2.0, "b": np.nan, "c": 4.0})  # a NaN value takes the default, as fillna gives it
    assert F.per_topic(topics, holes, 1).tolist() == topics.map(holes).fillna(1).astype("int64").tolist()


def test_contains_with_repeated_keys():
    recs = pd.DataFrame({"_dst": [1, 1, 2], "broker": [0, 0, 0], "sent_ms": [5, 5, 7]})
    reqs = pd.DataFrame({"src": [1, 2, 2, 3], "broker": [0, 0, 1, 0], "sent_ms": [5, 7, 7, 5]})
    assert F.contains(recs, reqs, ["_dst", "broker", "sent_ms"], ["src", "broker", "sent_ms"]).tolist() == \
        [True, True, False, False]


def test_concat_keeps_the_spec_and_the_values():
    a = pd.DataFrame({"broker": np.array([1], "int64"), "log_dir": [None]})
    b = pd.DataFrame({"broker": np.array([2, 3], "int32"), "log_dir": ["d0", "d1"]})
    out = F.concat([a, F.empty(F.LOG_DIR_FAILURE), b], F.LOG_DIR_FAILURE)
    assert out["broker"].dtype == "int32" and out["broker"].tolist() == [1, 2, 3]
    assert out["log_dir"].tolist() == [None, "d0", "d1"]
    assert list(out.index) == [0, 1, 2]


def test_owned_is_the_frame_conform_builds_and_holds_the_arrays_given():
    cols = {"broker": np.array([3, 1, 2], "int64"), "log_dir": np.array(["d0", None, "d1"], dtype=object),
            "extra": np.zeros(3)}
    out = F.owned(cols, F.LOG_DIR_FAILURE)
    pd.testing.assert_frame_equal(out, F.conform(pd.DataFrame(cols), F.LOG_DIR_FAILURE), check_dtype=True)
    assert out["broker"].dtype == "int32" and out["log_dir"].tolist() == ["d0", None, "d1"]
    assert np.shares_memory(out["log_dir"].to_numpy(), cols["log_dir"])  # no copy of an array in shape
    empty = F.owned({"broker": np.empty(0, "int64"), "log_dir": np.empty(0, object)}, F.LOG_DIR_FAILURE)
    pd.testing.assert_frame_equal(empty, F.empty(F.LOG_DIR_FAILURE), check_dtype=True)
    assert [b.mgr_locs.as_array.tolist() for b in out._mgr.blocks] == [[0], [1]]  # a block per column, as given
    with pytest.raises(ValueError):  # arrays of different lengths are refused, not made into a torn frame
        F.owned({"broker": np.array([1, 2]), "log_dir": np.array(["d0"], dtype=object)}, F.LOG_DIR_FAILURE)
    series = F.owned({"broker": pd.Series([5, 6]), "log_dir": np.array(["a", "b"], dtype=object)}, F.LOG_DIR_FAILURE)
    assert series["broker"].tolist() == [5, 6] and series["broker"].dtype == "int32"


def test_conform_of_a_frame_in_shape_is_a_copy_with_a_fresh_index(replicas):
    spec = {"broker": "int32", "topic": "object", "partition": "int32"}
    shifted = replicas.set_index(replicas.index + 10)
    out = F.conform(shifted, spec)
    assert list(out.index) == list(range(len(replicas)))
    before = shifted["broker"].iloc[0]
    out.loc[0, "broker"] = before + 1
    assert shifted["broker"].iloc[0] == before  # the input is not changed through the result


def test_positional_is_reset_index_without_copying_and_leaves_its_input_alone(replicas):
    for frame in (replicas, replicas.set_index(replicas.index + 10), replicas.iloc[::2]):
        out = F.positional(frame)
        pd.testing.assert_frame_equal(out, frame.reset_index(drop=True), check_exact=True)
        assert isinstance(out.index, pd.RangeIndex) and out is not frame
        assert np.shares_memory(out["partition"].to_numpy(), frame["partition"].to_numpy())  # no copy
        before = frame.copy()
        out["partition"] = -1  # replacing a column of the result does not reach the input
        pd.testing.assert_frame_equal(frame, before, check_exact=True)
    spec = {"broker": "int32", "topic": "object", "partition": "int32"}
    shifted = replicas.set_index(replicas.index + 10)
    pd.testing.assert_frame_equal(F.conform(shifted, spec, copy=False), F.conform(shifted, spec), check_exact=True)


def test_with_values_is_copy_and_loc_set_and_leaves_its_input_alone(replicas):
    before = replicas.copy()
    for rows, values in ((np.array([3, 0, 7]), np.array([9, 8, 7], dtype="int32")),
                         (replicas["broker"].to_numpy() == 4, -1), (np.array([], dtype="int64"), 5)):
        want = replicas.copy()
        want.loc[rows, "partition"] = values
        out = F.with_values(replicas, "partition", rows, values)
        pd.testing.assert_frame_equal(out, want, check_exact=True)
        pd.testing.assert_frame_equal(replicas, before, check_exact=True)
    out = F.with_values(replicas, "topic", np.array([1]), "z")
    assert out["topic"].iloc[1] == "z" and replicas["topic"].iloc[1] != "z"
    assert np.shares_memory(out["broker"].to_numpy(), replicas["broker"].to_numpy())  # the others are shared


def test_from_rows_is_the_frame_of_the_rows_and_a_fresh_one_each_time():
    cols = ["broker", "topic", "message"]
    for rows in ([], [(1, "t", "x"), (2, None, "y")]):
        pd.testing.assert_frame_equal(F.from_rows(rows, cols), pd.DataFrame(rows, columns=cols), check_exact=True)
    pd.testing.assert_frame_equal(F.from_rows([], cols), pd.DataFrame(columns=cols), check_exact=True)
    first = F.from_rows([], cols)
    first["extra"] = []  # a caller changing its frame does not change the next one
    assert list(F.from_rows([], cols).columns) == cols


def test_concat_of_one_part_in_shape_leaves_the_part_alone(replicas):
    spec = {"broker": "int32", "topic": "object", "partition": "int32"}
    before = replicas.copy()
    out = F.concat([F.empty(spec), replicas.iloc[::2]], spec)
    pd.testing.assert_frame_equal(out, replicas.iloc[::2].reset_index(drop=True), check_exact=True)
    out["partition"] = -1
    pd.testing.assert_frame_equal(replicas, before, check_exact=True)


def test_str_len_is_pandas_str_len_with_nulls_as_empty():
    for keys in (pd.Series(["ab", None, "", "é✓", np.nan], dtype=object), pd.Series([1, "ab", None], dtype=object),
                 np.empty(0, dtype=object)):
        want = pd.Series(keys, dtype=object).fillna("").astype(str).str.len().to_numpy()
        assert F.str_len(keys).tolist() == want.tolist()


def test_isr_size_counts_ids_and_treats_nulls_as_empty():
    assert F.isr_size(pd.Series(["1,2,3", "", None, "4", np.nan])).tolist() == [3, 0, 0, 1, 0]


def test_rows_are_itertuples_of_python_values(replicas):
    frame = replicas.assign(flag=replicas["partition"] % 2 == 0, size=replicas["partition"] * 1.5,
                            dir=np.where(replicas["partition"] % 3 == 0, None, "d"))
    cols = ["topic", "broker", "flag", "size", "dir"]
    for f in (frame, frame.iloc[::7], frame.iloc[:0], F.from_rows([], cols)):
        want = [tuple(t) for t in f[cols].itertuples(index=False)]
        got = list(F.rows(f, cols))
        assert got == want
        assert [list(map(type, t)) for t in got] == [list(map(type, t)) for t in want]


def test_select_str_is_np_select_as_an_object_column():
    rng = np.random.default_rng(3)
    conds = [rng.random(50) < 0.2, rng.random(50) < 0.3, np.zeros(50, dtype=bool)]
    for cs in (conds, [c[:0] for c in conds]):
        got = F.select_str(cs, ["A", "B", "C"], default="")
        want = np.select(cs, ["A", "B", "C"], default="")
        assert got.dtype == object and got.tolist() == want.tolist()
        assert pd.Series(got).equals(pd.Series(want))  # the column a frame makes of either


def test_array_is_the_columns_to_numpy_without_a_series():
    df = pd.DataFrame({"a": np.arange(3, dtype="int64"), "s": ["x", "y", "z"],
                       "n": pd.array([1, None, 3], dtype="Int64")})
    for c in ("a", "s"):
        got = F.array(df, c)
        assert got.dtype == df[c].to_numpy().dtype and (got == df[c].to_numpy()).all()
        assert np.shares_memory(got, df[c].to_numpy())  # the frame's own array, as to_numpy gives it
    # what is not one plain numpy column takes pandas' way: an extension dtype, a repeated name, a Series
    assert F.array(df, "n").tolist()[::2] == df["n"].to_numpy().tolist()[::2]
    twice = pd.DataFrame([[1, 2]], columns=["k", "k"])
    assert F.array(twice, "k").shape == (1, 2)
    assert F.array({"a": pd.Series([4])}, "a").tolist() == [4]
    with pytest.raises(KeyError):
        F.array(df, "missing")


def test_filled_is_np_full_with_one_shared_object_in_a_string_column():
    topic = "".join(["or", "ders"])  # a string object of its own, as a scenario's topic name is
    s = F.filled(4, topic, object)
    assert s.dtype == object and s.tolist() == np.full(4, topic, dtype=object).tolist()
    assert all(v is topic for v in s)  # np.full (numpy 2) stores a new copy per row
    assert np.array_equal(F.filled(3, 7, "int32"), np.full(3, 7, dtype="int32"))
    assert F.filled(3, 7, "int32").dtype == np.int32 and len(F.filled(0, topic, object)) == 0
    codes, uniques = F.distinct(s)  # distinct's one-object shortcut applies
    assert codes.tolist() == [0] * 4 and uniques.tolist() == ["orders"]


def test_object_addresses_are_the_objects_ids_read_only_and_keep_the_array_alive():
    """distinct and one_object compare rows by pointer: the pointers must be the rows' objects, for any
    length (each new length cost ~12 us through ctypes), and the view must not outlive the array."""
    import gc
    import weakref

    for n in (0, 1, 7, 1000):
        values = np.array([f"t{i % 3}" for i in range(n)], dtype=object)
        got = F._addresses(values)
        assert got.tolist() == [id(v) for v in values]
        assert not got.flags.writeable
    values = np.array(["a", "b"], dtype=object)
    alive = weakref.ref(values)
    view = F._addresses(values)
    del values
    gc.collect()
    assert alive() is not None and len(view) == 2  # the view holds the array: its pointers stay valid


def test_to_arrow_is_pa_array_from_pandas_for_every_kind_of_object_column():
    """to_arrow converts each distinct object once (one object repeated, or a few taken by pointer codes):
    the array must be what pa.array(v, t, from_pandas=True) gives, values, nulls and type, inferred or given."""
    import pyarrow as pa

    dirs = ["".join(["/d", str(i)]) for i in range(3)]  # a few string objects, shared by many rows
    n = 3000
    cases = [
        (np.array([dirs[i % 3] for i in range(n)], dtype=object), pa.string()),
        (np.array([dirs[i % 3] for i in range(n)], dtype=object), None),
        (np.array([dirs[0] if i % 4 else None for i in range(n)], dtype=object), pa.string()),  # nulls
        (np.array([dirs[1] if i % 5 else np.nan for i in range(n)], dtype=object), None),  # NaN is a null
        (np.array([None] * n, dtype=object), pa.string()),
        (np.array([None] * n, dtype=object), None),
        (np.array([7] * n, dtype=object), None),  # one non-string object
        (np.array([np.nan] * n, dtype=object), pa.string()),  # one object that converts to a null
        (np.array([7 if i % 2 else 8 for i in range(n)], dtype=object), pa.int64()),
        (np.array([b"x" if i % 2 else b"yz" for i in range(n)], dtype=object), pa.binary()),
        (np.array([str(i) for i in range(n)], dtype=object), pa.string()),  # an object per row
        (np.array([dirs[i % 3] for i in range(10)], dtype=object), pa.string()),  # short: converted as it is
        (np.array([dirs[i % 3] for i in range(n)], dtype=object)[::-1], pa.string()),  # not contiguous
        (np.arange(n, dtype="int64"), pa.int32()),
        (np.array([], dtype=object), pa.string()),
    ]
    for v, t in cases:
        got, want = F.to_arrow(v, t), pa.array(v, type=t, from_pandas=True)
        assert got.type == want.type and got.equals(want), (v[:4], t)


def test_few_strings_are_counted_as_arrows_kernels_count_them(monkeypatch):
    """isr_size / str_len count a handful of distinct values in Python (Arrow's calls cost more than the
    work): the same counts and dtypes as the Arrow path, for lists, empty strings, nulls and NaN."""
    rng = np.random.default_rng(5)
    values = np.array([",".join(map(str, rng.choice(30, rng.integers(1, 5), replace=False))) for _ in range(40)]
                      + ["", None, np.nan, float("nan"), "ü,é"], dtype=object)
    few = F._isr_size(values), F._str_len(values)
    monkeypatch.setattr(F, "_FEW_STRINGS", 0)
    arrow = F._isr_size(values), F._str_len(values)
    for a, b in zip(few, arrow, strict=True):
        assert a.dtype == b.dtype and a.tolist() == b.tolist()
    assert few[0][-5:].tolist() == [0, 0, 0, 0, 2]


def test_isr_sizes_remembers_a_column_while_it_holds_the_same_strings(monkeypatch):
    monkeypatch.setattr(F._Remembered, "_kept", [])
    rng = np.random.default_rng(3)
    isr = np.array([",".join(map(str, rng.choice(20, rng.integers(1, 4), replace=False))) for _ in range(1000)]
                   + [None, ""], dtype=object)
    frame = pd.DataFrame({"isr": isr})
    want = F.isr_size(isr).tolist()
    first = F.isr_sizes(frame)
    assert first.tolist() == want
    first[:] = -1  # the caller's answer is its own
    calls, per_value = [], F.per_value
    monkeypatch.setattr(F, "per_value", lambda *a, **k: calls.append(1) or per_value(*a, **k))
    assert F.isr_sizes(frame).tolist() == want and calls == []  # the same objects: from memory
    changed = isr.copy()
    changed[0] = "1,2,3,4,5"  # another object in one row: counted again
    assert F.isr_sizes(pd.DataFrame({"isr": changed})).tolist() == [5, *want[1:]] and calls == [1]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("shape", ["sorted", "left_shuffled", "offsets_shuffled", "repeated_keys"])
def test_joined_order_sorts_a_joins_rows_as_a_sort_of_every_row_does(seed, shape):
    """joined_order puts a join's rows (grouped by left row) in (left keys, offset) order: the positions
    a stable sort of every row gives, whichever path it takes (none, the left rows' runs, every row)."""
    rng = np.random.default_rng(seed)
    left = pd.DataFrame({"broker": rng.integers(0, 4, 60).astype("int32"),
                         "topic": rng.choice(["b", "a"], 60).astype(object),
                         "partition": rng.integers(0, 50, 60).astype("int32")})
    if shape != "repeated_keys":
        left = left.drop_duplicates().reset_index(drop=True)
    if shape == "sorted":
        left = left.sort_values(["broker", "topic", "partition"], kind="stable").reset_index(drop=True)
    right = pd.DataFrame({"broker": np.repeat(F.array(left, "broker"), 3), "topic": np.repeat(F.array(left, "topic"), 3),
                          "partition": np.repeat(F.array(left, "partition"), 3),
                          "offset": np.tile(np.arange(3), len(left)) + rng.integers(0, 9, 3 * len(left)) * 10})
    right = right.sample(frac=1, random_state=seed).reset_index(drop=True)
    if shape != "offsets_shuffled":  # a log: each partition's records in offset order
        right = right.sort_values("offset", kind="stable").reset_index(drop=True)
    li, ri = F.join(left, right, ["broker", "topic", "partition"])
    keys = [F.array(left, c) for c in ("broker", "topic", "partition")]
    off = F.array(right, "offset")[ri]
    got = F.joined_order(keys, li, off)
    got = np.arange(len(li)) if got is None else got
    want = pd.DataFrame({"broker": keys[0][li], "topic": keys[1][li], "partition": keys[2][li], "offset": off}) \
        .sort_values(["broker", "topic", "partition", "offset"], kind="stable").index.to_numpy()
    assert (got == want).all()
    if shape == "sorted":
        assert F.joined_order(keys, li, off) is None  # already in order: nothing to take
