"""Intra-broker log-dir moves (KIP-113): AlterReplicaLogDirs on the broker and its ReplicaAlterLogDirsThreads
(protocol/alter_log_dirs.py), frames-level, plus one end-to-end move."""

from __future__ import annotations

from dataclasses import replace

import harness as H
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from scenarios import scenario

from sparkkafka import Cluster, parse_scenario
from sparkkafka.protocol import alter_log_dirs as A
from sparkkafka.protocol import frames as F
from sparkkafka.protocol import leader_epoch as LE
from sparkkafka.protocol import log_dir_failure
from sparkkafka.protocol.leader_and_isr import become_leader_or_follower, new_broker_rows
from sparkkafka.protocol.truncation import no_cuts

DIRS = ["d0", "d1", "d2"]
PROF = "2.8"


def replicas(rows) -> pd.DataFrame:
    """REPLICA rows from dicts (broker, topic, partition, log_dir and any overrides)."""
    return F.new_replicas(pd.DataFrame(rows)) if rows else F.empty(F.REPLICA)


def futures(rows) -> pd.DataFrame:
    return A.new_futures(pd.DataFrame(rows)) if rows else F.empty(F.FUTURE)


def alter(broker, entries) -> pd.DataFrame:
    return F.conform(pd.DataFrame([{"broker": broker, "topic": t, "partition": p, "log_dir": d}
                                   for t, p, d in entries]), F.ALTER_LOG_DIRS)


def lai(broker, parts, epoch=0, is_new=True) -> pd.DataFrame:
    return F.concat([H.lai(broker, broker, (broker,), (broker,), epoch, topic=t, partition=p, is_new=is_new)
                     for t, p in parts], F.LEADER_AND_ISR)


def records(broker, topic, partition, start, end, epoch=0, size=10) -> pd.DataFrame:
    n = end - start
    return F.conform(pd.DataFrame({
        "broker": broker, "src": broker, "topic": topic, "partition": partition, "offset": np.arange(start, end),
        "leader_epoch": epoch, "record_id": np.arange(start, end) + 1000, "value_bytes": size, "key": [None] * n,
        "timestamp": 0}), F.RECORD)


class Broker:
    """One broker's replicas, futures and remembered dirs, driven through the pure functions the engine
    calls in a round, with its current logs' records held in memory."""

    def __init__(self, broker=1, dirs=DIRS, offline_dirs=None, cfg=None):
        self.b, self.dirs = broker, list(dirs)
        self.rep, self.fut, self.pref = F.empty(F.REPLICA), F.empty(F.FUTURE), F.empty(F.PREFERRED_DIR)
        self.offline = F.empty(F.OFFLINE_REPLICA)
        self.rem, self.brk = F.empty(F.REMOTE), new_broker_rows([broker])
        self.offline_dirs = offline_dirs or {}
        self.log = F.empty(F.RECORD)  # the current logs' records
        self.cfg = H.settings(PROF, **{"replica_fetch_max_bytes": 1 << 20, "read_max_records": 10000, "round_ms": 100,
                                       **(cfg or {})})
        self.copied_per_round: list[int] = []
        self.selected_per_round: list[list[tuple]] = []

    def alter(self, entries):
        self.fut, self.pref, resp, gone = A.alter_replica_log_dirs(
            alter(self.b, entries), self.rep, self.fut, self.pref, self.offline, self.dirs, self.offline_dirs, PROF)
        return dict(zip(zip(resp["topic"], resp["partition"], strict=True), resp["error"], strict=True)), gone

    def create(self, parts, epoch=0, is_new=True):
        reqs, self.offline, refused = log_dir_failure.screen_leader_and_isr(
            lai(self.b, parts, epoch, is_new), self.rep, self.offline, self.brk, self.offline_dirs, self.dirs, self.pref)
        self.rep, self.rem, self.brk, _ = become_leader_or_follower(
            self.rep, self.rem, self.brk, reqs, self.dirs, 0, offline_dirs=self.offline_dirs, preferred=self.pref,
            futures=self.fut)
        self.pref = A.forget_preferences(self.pref, self.rep)
        self.fut = A.on_leader_and_isr(self.fut, self.rep, reqs)
        return refused

    def append(self, topic, partition, n, epoch=0, size=10):
        """The current log of topic-partition gains n records (as a leader's produce would)."""
        pos = F.locate(self.rep, pd.DataFrame({"broker": [self.b], "topic": [topic], "partition": [partition]}))[0]
        leo = int(self.rep.at[pos, "leo"])
        new = records(self.b, topic, partition, leo, leo + n, epoch, size)
        self.rep.loc[pos, "leo"] = leo + n
        self.rep.loc[pos, "hw"] = leo + n
        self.rep = LE.on_append(self.rep, new, PROF)
        self.log = F.concat([self.log, new], F.RECORD)

    def round(self, cuts=None):
        """One round of the movers, as engine/broker_round._movers runs it (records from memory)."""
        threads = A.thread_count(self.cfg, self.dirs)
        self.fut = A.mark_for_truncation(self.fut, cuts if cuts is not None else no_cuts())
        self.fut, _ = A.truncate_futures(self.fut, self.rep, PROF)
        self.fut, _ = A.out_of_range(self.fut, self.rep)
        self.fut, sel = A.select_for_copy(self.fut, self.rep, threads)
        self.selected_per_round.append(sorted(zip(self.fut["topic"][sel], self.fut["partition"][sel], strict=True)))
        ranges = A.copy_ranges(self.fut, self.rep, sel, self.cfg.read_max_records)
        m = self.log.merge(ranges, on=["broker", "topic", "partition"])
        recs = F.conform(m[(m["offset"] >= m["from_offset"]) & (m["offset"] < m["to_offset"])], F.RECORD)
        self.fut, copied = A.append_copies(self.fut, self.rep, recs, sel, threads, self.cfg.replica_fetch_max_bytes,
                                           {self.b: A.round_budget(self.cfg, self.b)}, PROF)
        self.copied_per_round.append(int(A.record_bytes(copied).sum()) if len(copied) else 0)
        self.rep, self.fut, swaps = A.swap(self.rep, self.fut, sel)
        return copied, swaps

    def dir_of(self, topic, partition):
        return self.rep.set_index(["topic", "partition"]).loc[(topic, partition), "log_dir"]


# ---------------------------------------------------------------------------------------------------- K-01


def test_k01_a_preference_before_the_replica_exists_then_created_there_then_moved():
    """Golden K-01 a: before the topic exists each request gets UNKNOWN_TOPIC_OR_PARTITION and no log is
    created; the topic's creation puts all 5 logs in D1 (the remembered dir); a request for D2 then gets
    NONE and every log ends in D2."""
    b = Broker()
    parts = [("t", p) for p in range(5)]
    errs, _ = b.alter([("t", p, "d1") for _, p in parts])
    assert set(errs.values()) == {"UNKNOWN_TOPIC_OR_PARTITION"}
    assert b.rep.empty and b.fut.empty and len(b.pref) == 5
    b.create(parts)
    assert [b.dir_of(*tp) for tp in parts] == ["d1"] * 5  # not spread by count: the preference wins
    assert b.pref.empty  # used up by the creation
    for _, p in parts:
        b.append("t", p, 3 + p)
    errs, _ = b.alter([("t", p, "d2") for _, p in parts])
    assert set(errs.values()) == {None}
    assert len(b.fut) == 5 and set(b.fut["log_dir"]) == {"d2"} and b.pref.empty
    for _ in range(10):
        b.round()
        if b.fut.empty:
            break
    assert b.fut.empty
    assert [b.dir_of(*tp) for tp in parts] == ["d2"] * 5
    assert list(b.rep.sort_values("partition")["leo"]) == [3, 4, 5, 6, 7]


def test_k01_b_error_codes_before_and_after_creation_and_after_a_dir_fails():
    b = Broker(dirs=["d0", "d1"])
    errs, _ = b.alter([("t", 0, "/nope"), ("t", 1, "d1")])
    assert errs == {("t", 0): "LOG_DIR_NOT_FOUND", ("t", 1): "UNKNOWN_TOPIC_OR_PARTITION"}
    b = Broker(dirs=["d0", "d1"])
    b.create([("t", 0), ("t", 1)])
    assert {b.dir_of("t", 0), b.dir_of("t", 1)} == {"d0", "d1"}
    p1_dir = b.dir_of("t", 1)
    other = "d0" if p1_dir == "d1" else "d1"
    errs, _ = b.alter([("t", 0, "/nope")])
    assert errs == {("t", 0): "LOG_DIR_NOT_FOUND"}
    errs, _ = b.alter([("t", 0, b.dir_of("t", 0))])
    assert errs == {("t", 0): None}
    # partition 1's dir fails: its replica goes offline
    b.offline_dirs = {1: frozenset({p1_dir})}
    b.rep, b.rem, b.fut, b.offline, _, newly, _ = log_dir_failure.fail_log_dirs(
        b.rep, b.rem, b.fut, b.offline, F.empty(F.RECORD), b.offline_dirs, b.dirs, PROF, [1])
    assert list(newly["partition"]) == [1]
    errs, _ = b.alter([("t", 0, "/nope")])
    assert errs[("t", 0)] == "LOG_DIR_NOT_FOUND"
    errs, _ = b.alter([("t", 1, other)])
    assert errs[("t", 1)] == "KAFKA_STORAGE_ERROR"  # its current replica is offline
    errs, _ = b.alter([("t", 0, p1_dir)])
    assert errs[("t", 0)] == "KAFKA_STORAGE_ERROR"  # the target dir is offline


def test_move_to_current_dir_cancels_and_redirect_replaces_the_future_log():
    b = Broker()
    b.create([("t", 0)])
    cur = b.dir_of("t", 0)
    errs, _ = b.alter([("t", 0, "d2")])
    assert errs[("t", 0)] is None and list(b.fut["log_dir"]) == ["d2"]
    errs, gone = b.alter([("t", 0, "d1")])  # redirect: the d2 future log is deleted, one in d1 created
    assert errs[("t", 0)] is None and list(gone["log_dir"]) == ["d2"] and list(b.fut["log_dir"]) == ["d1"]
    errs, gone = b.alter([("t", 0, cur)])  # back to the current dir: the move is cancelled
    assert errs[("t", 0)] is None and list(gone["log_dir"]) == ["d1"] and b.fut.empty and b.pref.empty


def test_no_future_log_is_created_while_a_dir_is_offline():
    b = Broker(offline_dirs={1: frozenset({"d2"})})
    b.create([("t", 0)])
    errs, _ = b.alter([("t", 0, "d1" if b.dir_of("t", 0) == "d0" else "d0")])
    assert errs[("t", 0)] == "KAFKA_STORAGE_ERROR" and b.fut.empty


def test_unsupported_before_the_api_exists():
    fut, pref, resp, _ = A.alter_replica_log_dirs(alter(1, [("t", 0, "d0")]), F.empty(F.REPLICA), F.empty(F.FUTURE),
                                                   F.empty(F.PREFERRED_DIR), F.empty(F.OFFLINE_REPLICA), DIRS, {}, "0.10")
    assert list(resp["error"]) == ["UNSUPPORTED_VERSION"] and pref.empty


# ---------------------------------------------------------------------------------------------------- K-03


def _current(partition, cache, leo, epoch=7):
    return {"broker": 1, "topic": "t", "partition": partition, "log_dir": "d0", "leader": 1, "leader_epoch": epoch,
            "epoch_cache": LE.encode(cache), "leo": leo, "hw": leo, "last_fetched_epoch": cache[-1][0]}


def _future(partition, cache, leo, fetch_offset=0, epoch=7):
    return {"broker": 1, "topic": "t", "partition": partition, "log_dir": "d1", "leader_epoch": epoch,
            "epoch_cache": LE.encode(cache), "leo": leo, "hw": 0, "fetch_offset": fetch_offset,
            "last_fetched_epoch": cache[-1][0] if cache else -1, "fetch_state": F.TRUNCATING}


def test_k03_a_epoch_query_answered_by_the_local_current_log():
    """p0 at epoch 2 -> 13, p1 at epoch 5 -> 232; a partition whose current log cannot be read (offline)
    gets KAFKA_STORAGE_ERROR and the others still answer."""
    cur = replicas([_current(0, [(0, 0), (2, 5), (3, 13)], 20), _current(1, [(5, 100)], 232)])
    fut = futures([_future(0, [(0, 0), (2, 5)], 9), _future(1, [(5, 100)], 150), _future(2, [(1, 0)], 3)])
    ans = A.local_epoch_answers(fut, cur, PROF)
    assert list(zip(ans["leader_epoch"], ans["end_offset"], ans["error"], strict=True)) == [
        (2, 13, None), (5, 232, None), (-1, -1, "KAFKA_STORAGE_ERROR")]


def test_k03_b_truncates_to_the_answer_or_its_own_leo():
    """Future LEO 191 at epoch 2; the current log answers p0 -> 190, p1 -> 192: p0 truncates to 190, p1 to 191."""
    cur = replicas([_current(0, [(0, 0), (2, 100), (3, 190)], 250), _current(1, [(0, 0), (2, 100), (3, 192)], 250)])
    fut = futures([_future(0, [(0, 0), (2, 100)], 191), _future(1, [(0, 0), (2, 100)], 191)])
    fut, cuts, again = A.truncation_step(fut, cur, PROF)
    assert again == 0 and list(fut["leo"]) == [190, 191] and list(fut["fetch_state"]) == [F.FETCHING] * 2
    assert list(zip(cuts["partition"], cuts["offset"], cuts["log_dir"], strict=True)) == [(0, 190, "d1")]


def test_k03_c_largest_common_epoch_in_two_truncations():
    """Future LEO 195, latest epoch 5; the current log answers (4, 200). The future's largest epoch <= 4 is 3
    (end 195): it truncates to 195 and asks again for epoch 3; the answer (3, 190) truncates it to 190.
    Exactly 2 truncations."""
    # the current log: epoch 3 ends at 190, epoch 4 at 200 (epoch 6 starts there)
    cur = replicas([_current(0, [(0, 0), (3, 100), (4, 190), (6, 200)], 200, epoch=6)])
    fut = futures([_future(0, [(0, 0), (3, 180), (5, 195)], 195, epoch=6)])
    steps = []
    while (fut["fetch_state"] == F.TRUNCATING).any():
        asked = int(fut["last_fetched_epoch"].iat[0])
        fut, cuts, _ = A.truncation_step(fut, cur, PROF)
        steps.append((asked, int(fut["leo"].iat[0])))
        assert len(steps) < 5
    # epoch 5 -> the current log's (4, 200); the future's own end for 4 is (3, 195): 195, not done;
    # epoch 3 -> (3, 190): min(195, 190) = 190, done
    assert steps == [(5, 195), (3, 190)]


def test_k03_c_literal_answers():
    """The same arithmetic on golden K-03 c's literal answers (4, 200) then (3, 190)."""
    es = [(0, 0), (3, 180), (5, 195)]
    off, done = LE.truncation_offset(es, 195, 0, (4, 200), PROF)
    assert (off, done) == (195, False)
    es = LE.truncate_from_end(es, off)
    off, done = LE.truncation_offset(es, 195, 0, (3, 190), PROF)
    assert (off, done) == (190, True)


def test_k03_d_no_epochs_truncates_to_the_initial_fetch_offset():
    cur = replicas([_current(0, [(0, 0)], 300)])
    fut = futures([_future(0, [], 150, fetch_offset=100)])
    fut, cuts, again = A.truncation_step(fut, cur, PROF)
    assert int(fut["leo"].iat[0]) == 100 and again == 0 and int(fut["fetch_state"].iat[0]) == F.FETCHING
    assert list(cuts["offset"]) == [100]


def test_current_truncation_sends_the_future_back_to_truncating():
    """markPartitionsForTruncation: the current log cut to x -> the mover truncates at min(x, its offset)."""
    b = Broker()
    b.create([("t", 0)])
    b.append("t", 0, 10)
    b.alter([("t", 0, "d2")])
    b.cfg = replace(b.cfg, replica_fetch_max_bytes=60)  # 6 records a round
    b.round()
    assert int(b.fut["leo"].iat[0]) == 6
    cut = pd.DataFrame({"broker": [1], "topic": ["t"], "partition": [0], "log_dir": [b.dir_of("t", 0)], "offset": [4]})
    b.fut = A.mark_for_truncation(b.fut, cut)
    assert int(b.fut["fetch_state"].iat[0]) == F.TRUNCATING and int(b.fut["fetch_offset"].iat[0]) == 4


def test_leader_epoch_change_restarts_the_mover_truncating_at_the_current_hw():
    b = Broker()
    b.create([("t", 0)], epoch=0)
    b.append("t", 0, 5)
    b.alter([("t", 0, "d2")])
    b.cfg = replace(b.cfg, replica_fetch_max_bytes=20)
    b.round()
    assert int(b.fut["fetch_state"].iat[0]) == F.FETCHING
    b.create([("t", 0)], epoch=1)
    assert int(b.fut["fetch_state"].iat[0]) == F.TRUNCATING and int(b.fut["leader_epoch"].iat[0]) == 1
    assert int(b.fut["fetch_offset"].iat[0]) == 5  # the current log's HW (maybeAddLogDirFetchers)


# ---------------------------------------------------------------------------------------------------- threads


def test_fetcher_id_is_kafkas_hash():
    # Utils.abs(31 * "t".hashCode + p) % n, "t".hashCode = 116
    assert [A.fetcher_id("t", p, 4) for p in range(4)] == [(31 * 116 + p) % 4 for p in range(4)]
    # a topic whose hash overflows Java's int stays non-negative
    assert 0 <= A.fetcher_id("a-very-long-topic-name-that-overflows", 3, 7) < 7


def test_one_partition_per_thread_smallest_first_and_sticky():
    b = Broker(dirs=["d0", "d1"], cfg={"num_replica_alter_log_dirs_threads": 1, "replica_fetch_max_bytes": 30})
    parts = [("b", 0), ("a", 1), ("a", 0)]
    b.create(parts)
    for t, p in parts:
        b.append(t, p, 6)
    b.alter([(t, p, "d1" if b.dir_of(t, p) == "d0" else "d0") for t, p in parts])
    b.round()
    assert b.selected_per_round[-1] == [("a", 0)]  # smallest (topic, partition), 3 records of 10 bytes
    b.round()  # a-0 completes and swaps
    assert b.selected_per_round[-1] == [("a", 0)] and len(b.fut) == 2
    # stickiness: make b-0 the partition in progress; a-1 is smaller but b-0 keeps the thread
    b.fut.loc[b.fut["topic"] == "b", "in_progress"] = True
    b.round()
    assert b.selected_per_round[-1] == [("b", 0)]
    # b-0 no longer ready (Truncating): the thread moves to the smallest ready partition
    b.fut.loc[b.fut["topic"] == "b", "fetch_state"] = F.FUTURE_IDLE
    b.round()
    assert b.selected_per_round[-1] == [("a", 1)]
    assert bool(b.fut.set_index("topic").loc["a", "in_progress"]) and not bool(b.fut.set_index("topic").loc["b", "in_progress"])


def test_threads_move_partitions_concurrently_one_each():
    b = Broker(dirs=["d0", "d1"], cfg={"num_replica_alter_log_dirs_threads": 2, "replica_fetch_max_bytes": 10})
    parts = [("t", p) for p in range(4)]
    b.create(parts)
    for t, p in parts:
        b.append(t, p, 3)
    b.alter([(t, p, "d1" if b.dir_of(t, p) == "d0" else "d0") for t, p in parts])
    for _ in range(20):
        b.round()
        sel = b.selected_per_round[-1]
        assert len({A.fetcher_id(t, p, 2) for t, p in sel}) == len(sel) <= 2
        if b.fut.empty:
            break
    assert b.fut.empty
    assert max(len(s) for s in b.selected_per_round) == 2


# ---------------------------------------------------------------------------------------------------- throttle, swap


def test_throttle_budget_never_exceeded_and_the_move_takes_at_least_n_over_t():
    rate = 250  # bytes/s -> 25 bytes per 100 ms round: two 10-byte records
    b = Broker(dirs=["d0", "d1"], cfg={"quota": {"alter_dirs": {1: rate}}})
    b.create([("t", 0)])
    b.append("t", 0, 20)  # 200 bytes
    b.alter([("t", 0, "d1" if b.dir_of("t", 0) == "d0" else "d0")])
    rounds = 0
    while not b.fut.empty:
        b.round()
        rounds += 1
        assert rounds < 50
    assert max(b.copied_per_round) <= rate * 100 // 1000
    assert sum(b.copied_per_round) == 200
    assert rounds * 0.1 >= 200 / rate


def test_round_budget_reads_the_quota_else_the_broker_config():
    assert A.round_budget(H.settings(round_ms=100), 1) is None
    assert A.round_budget(H.settings(round_ms=200, quota={"alter_dirs": {1: 1000}}), 1) == 200
    assert A.round_budget(H.settings(round_ms=200, quota={"alter_dirs": {1: 1000}}), 2) is None
    assert A.round_budget(H.settings(round_ms=100, quota={}, replica_alter_log_dirs_io_max_bytes_per_second=9), 1) is None
    assert A.round_budget(H.settings(round_ms=100, replica_alter_log_dirs_io_max_bytes_per_second=500), 3) == 50


def test_swap_only_when_caught_up_while_the_current_log_grows():
    b = Broker(dirs=["d0", "d1"], cfg={"replica_fetch_max_bytes": 30})  # 3 records a round
    b.create([("t", 0)])
    b.append("t", 0, 5)
    old = b.dir_of("t", 0)
    new = "d1" if old == "d0" else "d0"
    b.alter([("t", 0, new)])
    seen = []
    for _ in range(10):
        b.append("t", 0, 1)  # a producer keeps writing, one record a round
        copied, swaps = b.round()
        seen.append((int(b.rep["leo"].iat[0]), len(swaps)))
        if len(swaps):
            break
        assert b.dir_of("t", 0) == old and int(b.fut["leo"].iat[0]) < int(b.rep["leo"].iat[0])
    assert b.dir_of("t", 0) == new and b.fut.empty
    assert seen[-1][1] == 1 and all(s == 0 for _, s in seen[:-1])
    # the swapped-in log is the future log: same LEO, the current HW kept, the epoch cache of the copy
    assert int(b.rep["leo"].iat[0]) == seen[-1][0] and LE.decode(b.rep["epoch_cache"].iat[0]) == [(0, 0)]


def test_future_log_counts_for_new_replica_placement():
    """LogManager.nextLogDirs: future logs count for a dir's load."""
    b = Broker(dirs=["d0", "d1"])
    b.create([("t", 0)])  # d0
    b.fut = futures([{"broker": 1, "topic": "x", "partition": p, "log_dir": "d1"} for p in range(2)])
    b.create([("u", 0)])
    assert b.dir_of("u", 0) == "d0"  # d0 holds 1 log, d1 holds 2 (future logs)


# ---------------------------------------------------------------------------------------------------- end to end


def _scenario(timeline, until_ms, config=None):
    return parse_scenario(scenario(
        [1, 2], [{"name": "t", "partitions": 1, "replication_factor": 2, "assignment": {0: [1, 2]}}], until_ms,
        log_dirs=["d0", "d1"], config=config or {}, timeline=timeline), name="move")


def test_e2e_move_while_producing(spark, tmp_out):
    """Brokers 1 (leader) and 2 (follower) move their replicas of t-0 from d0 to d1 while a producer writes:
    the copy is throttled (replica.alter.log.dirs.io.max.bytes.per.second), the swap happens once caught up,
    and afterwards the log table holds the replicas' records only in d1, as current records, identical to
    before; replica_state's log_dir changes."""
    sc = _scenario([{"at": 0, "produce": {"topic": "t", "partition": 0, "rate_per_sec": 50, "duration_ms": 2500,
                                          "acks": "all"}}], 3000,
                   {"replica.alter.log.dirs.io.max.bytes.per.second": 20000})
    c = Cluster.from_scenario(sc, spark=spark, engine="local", out=tmp_out)
    c.step(8)
    before = c.log().toPandas()
    assert set(before["log_dir"]) == {"d0"} and len(before[before["broker"] == 1]) > 10
    c.alter_replica_log_dirs(pd.DataFrame({"broker": [1, 2], "topic": ["t", "t"], "partition": [0, 0],
                                           "log_dir": ["d1", "d1"]}))
    c.step(1)
    mid = c.log().toPandas()
    for b in (1, 2):  # in progress: the current log in d0, the future log in d1
        m = mid[mid["broker"] == b]
        assert set(zip(m["log_dir"], m["is_future"], strict=True)) == {("d0", False), ("d1", True)}
    c.run()
    ans = pd.concat(c.alter_dir_responses)
    assert list(ans["error"]) == [None, None]
    after = c.log().toPandas()
    assert set(after["log_dir"]) == {"d1"} and not after["is_future"].any()
    cols = ["offset", "record_id", "leader_epoch"]
    by = {b: after[after["broker"] == b][cols].reset_index(drop=True) for b in (1, 2)}
    for b in (1, 2):
        old = before[before["broker"] == b][cols].reset_index(drop=True)
        assert by[b].head(len(old)).equals(old)
        assert list(by[b]["offset"]) == list(range(len(by[b])))
    assert by[1].equals(by[2])
    rs = c.replica_state().orderBy("round").toPandas()
    for b in (1, 2):
        dirs = rs[rs["broker"] == b].drop_duplicates("log_dir")[["round", "log_dir"]].values.tolist()
        assert [d for _, d in dirs] == ["d0", "d1"] and dirs[1][0] > 8  # asked in round 8, swapped later
    assert not c.produce_results().where("error is not null").count()


# ---------------------------------------------------------------------------------------------------- storage


def _log_file(tables_dir, broker, log_dir, topic, partition, offsets, is_future, tag):
    from sparkkafka.storage import tables as T

    n = len(offsets)
    t = pa.table({
        "topic": pa.array([topic] * n, pa.string()), "partition": pa.array([partition] * n, pa.int32()),
        "offset": pa.array(offsets, pa.int64()), "leader_epoch": pa.array([0] * n, pa.int32()),
        "record_id": pa.array([o + 100 for o in offsets], pa.int64()), "key": pa.nulls(n, pa.string()),
        "value": pa.nulls(n, pa.binary()), "value_bytes": pa.array([10] * n, pa.int32()),
        "timestamp": pa.array([0] * n, pa.int64()), "is_future": pa.array([is_future] * n),
        "append_ms": pa.array([0] * n, pa.int64())})
    return T.write_file(tables_dir, "log", t, tag, {"broker": broker, "log_dir": log_dir})


@pytest.fixture
def moving_log(tmp_path):
    """Broker 1's t-0: current log in d0 (offsets 0-4), future log in d1 (0-2), as a round leaves them."""
    from sparkkafka.storage import broker_disk
    from sparkkafka.storage import tables as T

    tables, brokers = str(tmp_path / "tables"), str(tmp_path / "brokers")
    T.create_tables(tables)
    w = T.TableWriter(tables, "r")
    w.commit("log", [_log_file(tables, 1, "d0", "t", 0, [0, 1, 2, 3, 4], False, "a"),
                     _log_file(tables, 1, "d1", "t", 0, [0, 1, 2], True, "b"),
                     _log_file(tables, 1, "d1", "u", 0, [0, 1], False, "c")], 0)
    broker_disk.write_partitions(brokers, 1, "d0", [("t", 0)])
    broker_disk.write_partitions(brokers, 1, "d1", [("u", 0)])
    broker_disk.write_partitions(brokers, 1, "d1", [("t", 0)], future=True)
    broker_disk.write_hw_checkpoint(brokers, 1, "d0", [("t", 0, 4)])
    broker_disk.write_hw_checkpoint(brokers, 1, "d1", [("t", 0, 2), ("u", 0, 2)])
    broker_disk.write_epoch_checkpoint(brokers, 1, "d0", "t", 0, [(0, 0)])
    broker_disk.write_epoch_checkpoint(brokers, 1, "d1", "t", 0, [(0, 0)], future=True)
    return tables, brokers, w


def _params(tables, brokers, version, offline=None):
    from sparkkafka.engine.broker_round import RoundParams
    from sparkkafka.protocol.broker import RoundFacts

    return RoundParams(run_id="r", round_no=1, now=0, tables_dir=tables, brokers_dir=brokers, log_version=version,
                       facts=RoundFacts(cfg=H.settings(PROF), min_isr={}, log_dirs=("d0", "d1"),
                                        offline_dirs=offline or {}))


def test_restart_loads_future_logs_idle_until_leader_and_isr(moving_log):
    from sparkkafka.engine.broker_round import _recover

    tables, brokers, w = moving_log
    v = w.table("log").version()
    rep, fut = _recover(_params(tables, brokers, v), [1])
    assert sorted(zip(rep["topic"], rep["log_dir"], rep["leo"], strict=True)) == [("t", "d0", 5), ("u", "d1", 2)]
    assert list(zip(fut["topic"], fut["log_dir"], fut["leo"], fut["hw"], strict=True)) == [("t", "d1", 3, 2)]
    assert int(fut["fetch_state"].iat[0]) == F.FUTURE_IDLE and int(fut["fetch_offset"].iat[0]) == 2
    assert LE.decode(fut["epoch_cache"].iat[0]) == [(0, 0)]
    # the first LeaderAndIsr starts its mover, Truncating at the current log's HW
    fut2 = A.on_leader_and_isr(fut, rep.assign(leader_epoch=3), lai(1, [("t", 0)], epoch=3))
    assert int(fut2["fetch_state"].iat[0]) == F.TRUNCATING and int(fut2["fetch_offset"].iat[0]) == 4
    # a failed dir is not loaded: neither the future log in it, nor the current log (and its future log)
    rep, fut = _recover(_params(tables, brokers, v, {1: frozenset({"d1"})}), [1])
    assert list(rep["topic"]) == ["t"] and fut.empty
    rep, fut = _recover(_params(tables, brokers, v, {1: frozenset({"d0"})}), [1])
    assert list(rep["topic"]) == ["u"] and fut.empty


def test_swap_turns_future_rows_current_and_deletes_the_old_log(moving_log):
    from sparkkafka.storage import broker_disk
    from sparkkafka.storage.log_truncation import truncate

    tables, brokers, w = moving_log
    v = w.table("log").version()
    cuts = pd.DataFrame({"log_dir": ["d0"], "topic": ["t"], "partition": [0], "offset": [0]})
    flips = pd.DataFrame({"log_dir": ["d1"], "topic": ["t"], "partition": [0]})
    adds, removes = truncate(tables, v, 1, cuts, "swap", flips=flips)
    w.commit("log", adds, 1, removes)
    log = broker_disk.read_log(tables, w.table("log").version(), 1,
                               ["log_dir", "topic", "partition", "offset", "is_future"]).to_pandas()
    t0 = log[log["topic"] == "t"].sort_values("offset")
    assert set(t0["log_dir"]) == {"d1"} and not t0["is_future"].any() and list(t0["offset"]) == [0, 1, 2]
    assert len(log[log["topic"] == "u"]) == 2  # another log in the same dir is untouched


def test_stop_replica_with_delete_drops_the_future_log_and_without_idles_its_mover():
    cur = replicas([_current(0, [(0, 0)], 5), _current(1, [(0, 0)], 5)])
    fut = futures([{**_future(0, [(0, 0)], 3), "fetch_state": F.FETCHING},
                   {**_future(1, [(0, 0)], 3), "fetch_state": F.FETCHING}])
    stops = pd.DataFrame({"broker": [1, 1], "topic": ["t", "t"], "partition": [0, 1]})
    fut2, dropped = A.on_stop_replica(fut, cur[cur["partition"] == 1], stops)  # t-0 deleted, t-1 stopped
    assert list(zip(dropped["partition"], dropped["log_dir"], strict=True)) == [(0, "d1")]
    assert list(fut2["partition"]) == [1] and int(fut2["fetch_state"].iat[0]) == F.FUTURE_IDLE
    assert list(A.dir_cuts(dropped)["offset"]) == [0]
