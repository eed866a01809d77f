"""Leader-epoch cache, OffsetsForLeaderEpoch and truncation (sparkkafka.protocol.leader_epoch).

Cases after Kafka's LeaderEpochFileCacheTest, ReplicaFetcherThreadTest and AbstractFetcherThreadTest (KIP-101,
KIP-279). Pure Python, no Spark.
"""

from __future__ import annotations

import numpy as np
import pytest

from sparkkafka.protocol.leader_epoch import (
    OUT_OF_RANGE,
    UNDEFINED,
    assign,
    decode,
    diverging_epoch,
    diverging_epochs,
    end_offset_for,
    end_offset_for_v0,
    epoch_for_offset,
    format_checkpoint,
    latest_epoch,
    offsets_for_leader_epoch,
    parse_checkpoint,
    truncate_from_end,
    truncate_from_start,
    truncation_offset,
)


def build(*pairs: tuple[int, int]) -> list[tuple[int, int]]:
    cache: list[tuple[int, int]] = []
    for e, o in pairs:
        cache = assign(cache, e, o)
    return cache


# ------------------------------------------------------------------ B-LEC-01: lookups

@pytest.mark.parametrize("cache, req, leo, expected", [
    ([(2, 10)], 2, 11, (2, 11)),
    ([(2, 11), (3, 12)], -1, 13, (-1, -1)),
    ([], 0, 0, (-1, -1)),
    ([], 7, 0, (-1, -1)),
    ([(5, 11), (6, 12), (7, 13)], 4, 14, (4, 11)),
    ([(1, 11), (2, 13), (3, 15)], 2, 17, (2, 15)),
    ([(0, 10), (2, 13), (4, 17)], 1, 20, (0, 13)),
    ([(0, 10), (2, 13), (4, 17)], 2, 20, (2, 17)),
    ([(0, 10), (2, 13), (4, 17)], 3, 20, (2, 17)),
    ([(2, 100)], 3, 101, (-1, -1)),
])
def test_b_lec_01_end_offset_for(cache, req, leo, expected):
    assert end_offset_for(cache, req, leo) == expected


def test_b_lec_01_same_epoch_larger_offset_ignored():
    cache = build((2, 11), (2, 12))
    assert cache == [(2, 11)]
    assert end_offset_for(cache, 2, 14) == (2, 14)


def test_b_lec_01_follower_style_growth():
    cache = build((0, 0), (1, 3), (2, 6))
    assert cache == [(0, 0), (1, 3), (2, 6)]
    assert [end_offset_for(cache, r, 9) for r in (0, 1, 2)] == [(0, 3), (1, 6), (2, 9)]


# ------------------------------------------------------------------ B-LEC-01: monotonicity on assign

def test_b_lec_01_assign_monotonicity():
    assert assign([(2, 9)], 3, 9) == [(3, 9)]
    assert assign([(2, 6)], 3, 5) == [(3, 5)]

    cache = assign([(1, 5), (2, 6)], 1, 7)
    assert cache == [(1, 7)]
    assert latest_epoch(cache) == 1
    assert end_offset_for(cache, 1, 8) == (1, 8)
    assert end_offset_for(cache, 2, 8) == (-1, -1)

    cache = assign([(5, 11), (6, 12), (7, 13)], 7, 12)
    assert cache == [(5, 11), (7, 12)]
    assert end_offset_for(cache, 5, 14) == (5, 12)
    assert end_offset_for(cache, 6, 14) == (5, 12)

    assert assign([(2, 6)], 2, 10) == [(2, 6)]


def test_assign_details():
    base = [(1, 5), (2, 6)]
    assert assign(base, 2, 6) == base  # unchanged
    assert assign(base, 2, 5) == [(2, 5)]  # a lower start for the latest epoch: (1, 5) goes too
    assert assign(base, 3, 6) == [(1, 5), (3, 6)]  # a new epoch at the same start replaces (2, 6)
    assert base == [(1, 5), (2, 6)]  # inputs are never mutated
    assert assign([], 0, 0) == [(0, 0)]
    # Only the latest entry decides whether an update is needed: an older epoch wipes later ones.
    assert assign(base, 1, 5) == [(1, 5)]
    assert latest_epoch([]) == -1
    with pytest.raises(ValueError):
        assign(base, -1, 7)
    with pytest.raises(ValueError):
        assign(base, 3, -1)


# ------------------------------------------------------------------ B-LEC-01: truncation

TRUNC = [(2, 6), (3, 8), (4, 11)]


@pytest.mark.parametrize("fn, offset, expected", [
    (truncate_from_end, 8, [(2, 6)]),
    (truncate_from_end, 9, [(2, 6), (3, 8)]),
    (truncate_from_start, 8, [(3, 8), (4, 11)]),
    (truncate_from_start, 9, [(3, 9), (4, 11)]),
    (truncate_from_start, 1, TRUNC),
    (truncate_from_start, 6, TRUNC),
    (truncate_from_start, 11, [(4, 11)]),
    (truncate_from_start, 15, [(4, 15)]),
    (truncate_from_end, -1, TRUNC),
])
def test_b_lec_01_truncation(fn, offset, expected):
    assert fn(TRUNC, offset) == expected


def test_b_lec_01_truncate_from_start_keeps_later_entries():
    assert truncate_from_start([(0, 0), (1, 7), (2, 10)], 5) == [(0, 5), (1, 7), (2, 10)]


def test_b_lec_01_truncate_both_ends_then_checkpoint():
    cache = truncate_from_start(truncate_from_end(TRUNC, 11), 8)
    assert cache == [(3, 8)]
    assert parse_checkpoint(format_checkpoint(cache)) == [(3, 8)]


@pytest.mark.parametrize("offset, epoch", [(25, 1), (20, 1), (30, 5), (50, 5), (5, -1)])
def test_b_lec_01_epoch_for_offset(offset, epoch):
    assert epoch_for_offset([(0, 10), (1, 20), (5, 30)], offset) == epoch


# ------------------------------------------------------------------ checkpoint file layout

def test_checkpoint_format_and_round_trip():
    cache = [(0, 0), (2, 1), (4, 2)]
    text = format_checkpoint(cache)
    assert text == "0\n3\n0 0\n2 1\n4 2\n"
    assert parse_checkpoint(text) == cache
    assert format_checkpoint([]) == "0\n0\n"
    assert parse_checkpoint("0\n0\n") == []
    assert parse_checkpoint("") == []


@pytest.mark.parametrize("bad", ["1\n0\n", "0\n2\n0 0\n", "0\n1\n0\n", "0\n"])
def test_checkpoint_rejects_bad_files(bad):
    with pytest.raises(ValueError):
        parse_checkpoint(bad)


# ------------------------------------------------------------------ B-LEC-02: the leader's answers

def test_b_lec_02_case_c_answers_across_bounces():
    # 1 message at epoch 0.
    cache = build((0, 0))
    assert offsets_for_leader_epoch(cache, 1, 0, "2.8") == (0, 1)
    # Bounce: leader at epoch 2 records (2, LEO=1) at once (KAFKA-7415), then one message.
    cache = assign(cache, 2, 1)
    cache = assign(cache, 2, 1)  # the record's batch adds nothing
    assert [offsets_for_leader_epoch(cache, 2, r, "2.8") for r in (0, 1, 2)] == [(0, 1), (0, 1), (2, 2)]
    # Another bounce (epoch 4) and one message: LEO 3.
    cache = assign(cache, 4, 2)
    answers = {r: offsets_for_leader_epoch(cache, 3, r, "2.8")[1] for r in range(6)}
    assert answers == {0: 1, 1: 1, 2: 2, 3: 2, 4: 3, 5: -1}


def test_b_lec_02_case_d_epoch_entry_before_any_write():
    cache = build((0, 0), (0, 1), (5, 2), (5, 3))
    cache = assign(cache, 8, 4)  # makeLeader at epoch 8, LEO 4
    assert cache == [(0, 0), (5, 2), (8, 4)]
    assert offsets_for_leader_epoch(cache, 4, 8, "2.8") == (8, 4)


def test_offsets_for_leader_epoch_by_profile():
    leader = [(1, 0), (3, 2)]  # a leader's cache [(1, 0), (3, 2)], LEO 3
    assert offsets_for_leader_epoch(leader, 3, 2, "0.10") == UNDEFINED
    assert offsets_for_leader_epoch(leader, 3, 2, "0.11") == (-1, 2)
    assert offsets_for_leader_epoch(leader, 3, 2, "2.0") == (1, 2)
    assert offsets_for_leader_epoch([], 3, 2, "2.1") == UNDEFINED
    assert offsets_for_leader_epoch(leader, 3, -1, "0.11") == (-1, -1)


def test_end_offset_for_v0():
    cache = [(1, 0), (3, 2), (5, 4)]
    assert end_offset_for_v0(cache, 5, 6) == 6  # latest -> LEO
    assert end_offset_for_v0(cache, 3, 6) == 4
    assert end_offset_for_v0(cache, 4, 6) == 4  # first epoch > 4
    assert end_offset_for_v0(cache, 0, 6) == -1  # below the first cached epoch
    assert end_offset_for_v0(cache, 6, 6) == -1  # no larger epoch
    assert end_offset_for_v0([], -1, 0) == -1


def test_trace_c_kip101_diverges_kip279_does_not():
    leader, leader_leo = [(1, 0), (3, 2)], 3
    follower, leo, hw = [(1, 0), (2, 1)], 2, 1
    req = latest_epoch(follower)
    v0 = offsets_for_leader_epoch(leader, leader_leo, req, "0.11")
    assert truncation_offset(follower, leo, hw, v0, "0.11") == (2, True)  # keeps m2@1(2): divergence
    v1 = offsets_for_leader_epoch(leader, leader_leo, req, "2.0")
    assert truncation_offset(follower, leo, hw, v1, "2.0") == (1, True)


# ------------------------------------------------------------------ C-TR-01: the old rule

FOLLOWER_01 = [(0, 0), (2, 1), (4, 2)]  # [0:e0:a, 1:e2:b, 2:e4:c]


@pytest.mark.parametrize("entries, answer, profile", [
    (FOLLOWER_01, (-1, -1), "0.10"),  # pre-0.11: makeFollowers truncates to HW
    (FOLLOWER_01, (3, 3), "0.8"),
    (FOLLOWER_01, (-1, -1), "2.1"),  # the leader has no epoch information (UNDEFINED answer)
    (FOLLOWER_01, (-1, -1), "0.11"),
    ([], (4, 3), "2.8"),  # the follower has no latest epoch
    ([], (-1, 3), "0.11"),
])
def test_c_tr_01_truncate_to_hw(entries, answer, profile):
    assert truncation_offset(entries, 3, 2, answer, profile) == (2, True)
    assert truncate_from_end(FOLLOWER_01, 2) == [(0, 0), (2, 1)]  # offset 2 (c) is gone, LEO 2


# ------------------------------------------------------------------ C-TR-02: iterative KIP-279

def test_c_tr_02_case_a_rounds():
    follower, leo, hw = [(0, 0), (2, 1), (4, 2)], 3, 0
    leader, leader_leo = [(1, 0), (3, 1), (5, 2)], 3
    rounds = []
    while True:
        req = latest_epoch(follower)
        answer = offsets_for_leader_epoch(leader, leader_leo, req, "2.0")
        offset, done = truncation_offset(follower, leo, hw, answer, "2.0")
        rounds.append((req, answer, offset, done))
        follower, leo, hw = truncate_from_end(follower, offset), min(leo, offset), min(hw, offset)
        if done:
            break
    assert rounds == [(4, (3, 2), 2, False), (2, (1, 1), 1, False), (0, (0, 0), 0, True)]
    assert (follower, leo) == ([], 0)
    # It then fetches all three records: its cache equals the leader's.
    for offset, epoch in enumerate((1, 3, 5)):
        follower = assign(follower, epoch, offset)
    assert follower == leader


def test_c_tr_02_case_b_two_rounds():
    follower = [(3, 100), (5, 120)]
    assert end_offset_for(follower, 4, 200) == (3, 120)
    assert end_offset_for(follower, 3, 200) == (3, 120)
    truncations = []
    for first, second, final in (((4, 155), (3, 101), 101), ((4, 143), (3, 102), 102)):
        cache, leo = follower, 200
        offset, done = truncation_offset(cache, leo, 198, first, "2.1")
        assert (offset, done) == (120, False)
        truncations.append(offset)
        cache, leo = truncate_from_end(cache, offset), min(leo, offset)
        assert latest_epoch(cache) == 3  # the next request asks for e3
        offset, done = truncation_offset(cache, leo, 198, second, "2.1")
        assert (offset, done) == (final, True)
        truncations.append(offset)
    assert truncations == [120, 101, 120, 102]  # exactly 4 truncate calls


def test_c_tr_02_case_c_no_epoch_at_or_below_the_answer():
    # Latest epoch 5; no epoch <= 4 holds data (the data below 200 predates epochs).
    follower = [(5, 200)]
    assert truncation_offset(follower, 200, 0, (4, 156), "2.1") == (156, True)
    assert truncation_offset(follower, 200, 0, (4, 202), "2.1") == (200, True)
    # UnifiedLog.endOffsetForEpoch is None only when endOffsetFor is undefined: then min(leader, LEO).
    assert truncation_offset([(3, 50)], 200, 0, (4, 156), "2.1") == (156, True)
    # A real cache answers (4, first start) rather than None, so an earlier first start wins.
    assert truncation_offset([(5, 150)], 200, 0, (4, 156), "2.1") == (150, True)


def test_truncation_offset_v0_answer_under_kip279():
    # A peer still on OffsetsForLeaderEpoch v0 (epoch -1, offset valid): min(offset, LEO).
    assert truncation_offset(FOLLOWER_01, 3, 0, (-1, 2), "2.1") == (2, True)
    assert truncation_offset(FOLLOWER_01, 3, 0, (-1, 9), "2.1") == (3, True)
    # 0.11 ignores the answer's epoch.
    assert truncation_offset(FOLLOWER_01, 3, 0, (0, 1), "0.11") == (1, True)


# ------------------------------------------------------------------ C-TR-03: truncate on fetch (2.8)

def test_c_tr_03_case_a_diverging_epochs():
    follower, leo = [(0, 0), (2, 1), (4, 2)], 3
    leader, leader_leo = [(0, 0), (2, 1), (5, 2)], 3
    div = diverging_epoch(leader, leader_leo, latest_epoch(follower), leo, log_start_offset=0)
    assert div == (2, 2)
    offset, done = truncation_offset(follower, leo, 0, div, "2.8")
    assert (offset, done) == (2, True)
    follower, leo = truncate_from_end(follower, offset), offset
    assert latest_epoch(follower) == 2
    assert diverging_epoch(leader, leader_leo, 2, leo, log_start_offset=0) is None
    follower = assign(follower, 5, 2)
    assert follower == leader and latest_epoch(follower) == 5


def test_c_tr_03_case_b_truncate_before_processing():
    follower, leo, hw = [(0, 0), (2, 2), (4, 3)], 6, 1
    leader, leader_leo = [(0, 0), (2, 2), (5, 3)], 5
    div = diverging_epoch(leader, leader_leo, 4, leo, log_start_offset=0)
    assert div == (2, 3)
    offset, done = truncation_offset(follower, leo, hw, div, "2.8")
    assert (offset, done) == (3, True)
    follower, leo, hw = truncate_from_end(follower, offset), offset, min(hw, offset)
    assert (leo, hw) == (3, 1)  # the divergent response's HW 4 is not applied
    assert diverging_epoch(leader, leader_leo, latest_epoch(follower), leo, log_start_offset=0) is None
    follower = assign(follower, 5, 3)
    assert follower == leader


# ------------------------------------------------------------------ C-TR-04: leader-side check

def c_tr_04_leader() -> list[tuple[int, int]]:
    batches = [(0, 0), (3, 2), (3, 5), (4, 8), (7, 13), (9, 14)]  # (epoch, base offset), LEO 17
    cache = build(*batches)
    return assign(cache, 10, 17)  # becomes leader at epoch 10


@pytest.mark.parametrize("last_fetched, fetch_offset, expected", [
    (2, 5, (0, 2)), (0, 4, (0, 2)), (6, 6, (4, 13)), (5, 9, (4, 13)), (10, 18, (10, 17)),
    (0, 2, None), (7, 14, None), (9, 17, None), (10, 17, None),
    (11, 5, OUT_OF_RANGE),
    (-1, 5, None),  # no lastFetchedEpoch: no check
])
def test_c_tr_04_last_fetched_offset_validation(last_fetched, fetch_offset, expected):
    leader = c_tr_04_leader()
    assert leader == [(0, 0), (3, 2), (4, 8), (7, 13), (9, 14), (10, 17)]
    assert diverging_epoch(leader, 17, last_fetched, fetch_offset, log_start_offset=0) == expected


@pytest.mark.parametrize("log_start, last_fetched, fetch_offset, expected", [
    (5, 2, 8, (2, 5)), (5, 0, 5, None), (5, 3, 5, None), (5, 0, 0, OUT_OF_RANGE),
    (10, 5, 6, OUT_OF_RANGE), (10, 3, 6, OUT_OF_RANGE),
])
def test_c_tr_04_after_log_start_moves(log_start, last_fetched, fetch_offset, expected):
    leader = truncate_from_start(c_tr_04_leader(), log_start)
    if log_start == 5:
        assert leader[0] == (3, 5)
    assert diverging_epoch(leader, 17, last_fetched, fetch_offset, log_start_offset=log_start) == expected


def test_latest_epochs_read_alike_for_few_and_many_caches():
    """A handful of distinct caches (every round's appends) are parsed in Python, many with Arrow's
    pattern: both give each cache's last entry's epoch, and UNDEFINED_EPOCH for an empty, null or
    malformed cache."""
    import random

    import numpy as np

    from sparkkafka.protocol import leader_epoch as L

    rng = random.Random(7)
    caches = [None, "", "0:0", "0:0,3:120", "-1:5", "1:2:3", "a:1", "1:", ":1", "0:0,", "1 :2", "7:8\n"]
    caches += [",".join(f"{rng.randint(-2, 30)}:{rng.randint(-1, 999)}" for _ in range(rng.randint(0, 4)))
               for _ in range(300)]
    many = L._latest_epochs(np.array(caches, dtype=object))  # > 32 values: Arrow's pattern
    few = np.concatenate([L._latest_epochs(np.array(caches[i:i + 8], dtype=object)) for i in range(0, len(caches), 8)])
    assert few.tolist() == many.tolist()
    assert many[:12].tolist() == [L.UNDEFINED_EPOCH, L.UNDEFINED_EPOCH, 0, 3, -1] + [L.UNDEFINED_EPOCH] * 7
    assert L.latest_epochs(np.array(["0:0,3:120"] * 5 + [None], dtype=object)).tolist() == [3] * 5 + [L.UNDEFINED_EPOCH]
    column = np.array(caches, dtype=object)  # a replicas' column (remembered): the rows asked for, twice
    rows = np.array([3, 0, 3, 311, 2])
    for _ in range(2):
        assert L.latest_epochs(column, rows).tolist() == many[rows].tolist()


def test_diverging_epochs_over_arrays_answer_as_diverging_epoch_row_by_row():
    """The fetch path's vectorised check (memoised per (cache, epoch)) gives diverging_epoch's answer on every
    row: the DivergingEpoch, OFFSET_OUT_OF_RANGE (an epoch the cache cannot place, a fetch below the log
    start) or nothing, the LEO used only when the fetch's epoch is the cache's latest."""
    rng = np.random.default_rng(7)
    caches = ["", "0:0", "0:0,2:5", "1:3,4:9", "0:0,1:4,3:10,7:12"]
    rows = 4000
    cache = np.array([caches[i] for i in rng.integers(0, len(caches), rows)], dtype=object)
    leo = rng.integers(0, 20, rows)
    lfe = rng.integers(-1, 9, rows)
    off = rng.integers(0, 22, rows)
    lls = rng.integers(-1, 6, rows)
    de, do, oor = diverging_epochs(cache, leo, lfe, off, lls)
    want = [diverging_epoch(decode(c), int(a), int(e), int(f), log_start_offset=int(s))
            for c, a, e, f, s in zip(cache, leo, lfe, off, lls, strict=True)]
    assert [OUT_OF_RANGE if x else (None if d < 0 else (d, o)) for d, o, x in zip(de, do, oor, strict=True)] == want
    assert {type(w) for w in want} == {tuple, type(None)} and OUT_OF_RANGE in want  # every kind of answer met
    assert sum(w not in (None, OUT_OF_RANGE) for w in want) > 100
