"""The wire packing of protocol frames (engine/rows.py): pack_all and split are inverse, unused slots
keep their defaults, and an empty pack has the wire dtypes. Pure: no Spark."""

import numpy as np
import pandas as pd

from sparkkafka.engine import rows as W
from sparkkafka.protocol import frames as F


def _fetches(n: int) -> pd.DataFrame:
    return F.conform(pd.DataFrame({c: (np.array([f"t{i % 3}" if i % 4 else None for i in range(n)], dtype=object)
                                       if t == F.STR else np.arange(n).astype(t))
                                   for c, t in F.FETCH.items()}), F.FETCH)


def test_pack_all_then_split_gives_the_frames_back():
    brokers = F.conform(pd.DataFrame({"broker": [1, 2], "controller_epoch": [3, 4], "hw_checkpoint_ms": [5, 6],
                                      "controller_id": [0, -1], "leader_quota": ["a", None],
                                      "follower_quota": ["", "b"]}), F.BROKER)
    fetches = _fetches(5)
    wire = W.pack_all([(W.FETCH, fetches), (W.BROKER, brokers), (W.PRODUCE, F.empty(F.PRODUCE))])
    assert wire.dtypes.astype(str).tolist() == list(W.WIRE.values())
    assert wire["kind"].tolist() == [W.FETCH] * 5 + [W.BROKER] * 2
    k = W.split(wire)
    pd.testing.assert_frame_equal(k[W.FETCH], fetches, check_dtype=True)
    pd.testing.assert_frame_equal(k[W.BROKER], brokers, check_dtype=True)
    assert k[W.PRODUCE].empty and list(k[W.PRODUCE].columns) == list(F.PRODUCE)


def test_unused_slots_keep_their_defaults_and_an_empty_pack_has_the_wire_dtypes():
    wire = W.pack(W.START, pd.DataFrame({"broker": np.array([7], "int32")}))
    row = wire.iloc[0]
    assert row["broker"] == 7 and row["l0"] == -1 and row["i0"] == -1 and not row["f0"]
    assert row["s0"] is None and row["payload"] is None and row["topic"] is None
    empty = W.pack_all([])
    assert empty.empty and empty.dtypes.astype(str).tolist() == list(W.WIRE.values())


def test_split_only_some_kinds_is_split_of_their_rows():
    wire = W.pack_all([(W.ADD, pd.DataFrame({"broker": np.array([-1], "int32"), "payload": ["{}"]})),
                       (W.FETCH, _fetches(3)), (W.RESULT_SUMMARY, pd.DataFrame({"broker": [-1], "payload": ["{}"]})),
                       (W.START, pd.DataFrame({"broker": np.array([4], "int32")}))])
    got = W.split(wire, only=W.CARRY_KINDS)
    want = W.split(wire[np.isin(wire["kind"].to_numpy(), W.CARRY_KINDS)])
    assert got.keys() == want.keys() and got[W.ADD].empty and len(got[W.FETCH]) == 3
    for kind in want:
        pd.testing.assert_frame_equal(got[kind], want[kind], check_dtype=True)


def test_by_kind_is_split_of_the_packed_parts_without_the_wire():
    # a kind in two parts (a round's fetches and those held for a paused broker) keeps the parts' order
    a, b = _fetches(4), _fetches(3).assign(broker=np.int32(9))
    starts = pd.DataFrame({"broker": np.array([4, 5], "int32")})
    parts = [(W.FETCH, a), (W.START, starts), (W.PRODUCE, F.empty(F.PRODUCE)), (W.FETCH, b)]
    want = W.split(W.pack_all(parts))
    got = W.by_kind(parts)
    assert got.keys() == want.keys()
    for kind in want:
        pd.testing.assert_frame_equal(got[kind], want[kind], check_dtype=True)
    assert got[W.FETCH]["broker"].tolist()[-3:] == [9, 9, 9]
    only = W.by_kind(parts, empty=False)
    assert list(only) == [W.FETCH, W.START]  # the kinds with rows, in wire kind order


def test_state_blobs_carry_each_kinds_frame_in_chunks_and_unblob_to_the_same_wire(monkeypatch):
    # a resident window's carried frames travel to the next window as a few binary rows (STATE_BLOB)
    monkeypatch.setattr(W, "BLOB_ROWS", 2)
    fetches, parked = _fetches(5), _fetches(3)
    blobs = W.state_blobs({W.FETCH: fetches, W.PARKED_FETCH: parked, W.PRODUCE: F.empty(F.PRODUCE)})
    assert blobs["kind"].tolist() == [W.STATE_BLOB] * 5  # 3 + 2 chunks; an empty frame has none
    assert list(blobs.columns) == list(W.BLOB_WIRE)
    summary = W.pack(W.RESULT_SUMMARY, pd.DataFrame({"broker": [-1], "payload": ["{}"]})).assign(blob=None)
    out = F.concat([blobs.iloc[:3], summary, blobs.iloc[3:]], W.BLOB_WIRE)
    parts, rest = W.blob_parts([out.iloc[:4], out.iloc[4:]])  # as Spark may cut it into batches
    k = W.by_kind(parts)
    pd.testing.assert_frame_equal(k[W.FETCH], fetches, check_dtype=True)
    pd.testing.assert_frame_equal(k[W.PARKED_FETCH], parked, check_dtype=True)
    assert len(rest) == 1 and rest[0]["kind"].tolist() == [W.RESULT_SUMMARY] and list(rest[0].columns) == list(W.WIRE)
    wire = W.unblob([out])
    expected = W.concat([W.pack_all([(W.FETCH, fetches), (W.PARKED_FETCH, parked)]), W.pack(
        W.RESULT_SUMMARY, pd.DataFrame({"broker": [-1], "payload": ["{}"]}))])
    pd.testing.assert_frame_equal(wire, expected, check_dtype=True)
