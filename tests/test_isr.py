"""ISR expansion, shrink and commit (Partition.maybeExpandIsr, maybeShrinkIsr, handleAlterIsrResponse; the
ISR gauges) on plain pandas."""

from __future__ import annotations

import harness as H
import pandas as pd
import pytest

from sparkkafka.protocol import fetch, isr
from sparkkafka.protocol import frames as F
from sparkkafka.protocol.config import LONG_MAX
from sparkkafka.protocol.high_watermark import maybe_increment_leader_hw
from sparkkafka.protocol.leader_and_isr import become_leader_or_follower, new_broker_rows


def lai(broker, leader, isr_, replicas, epoch, zk=0, ctrl=1):
    return H.lai(broker, leader, isr_, replicas, epoch, ctrl, is_new=False, zk=zk)


class Part:
    """Partition t-0 as its leader (`replicas[0]`) sees it: a log of `leo` records, then
    LeaderAndIsr making it leader at `epoch` with `isr` and partition state version `zk`."""

    def __init__(self, replicas, isr_, leo=0, epoch=0, zk=0, now=0, profile="2.8", **cfg):
        self.cfg = H.settings(profile, **cfg)
        self.profile = profile
        self.me = replicas[0]
        self.replicas = list(replicas)
        log = F.new_replicas(pd.DataFrame([{
            "broker": self.me, "topic": "t", "partition": 0, "log_dir": "d0", "leo": leo,
            "last_fetched_epoch": -1 if leo == 0 else max(epoch - 1, 0),
            "epoch_cache": "" if leo == 0 else f"{max(epoch - 1, 0)}:0",
        }]))
        self.rep, self.rem, self.brk = log, F.empty(F.REMOTE), new_broker_rows([self.me])
        self.counts = {"isr_shrinks": 0, "isr_expands": 0, "failed_isr_updates": 0}
        self.lai(self.me, isr_, epoch, zk, now)

    # -- driving -----------------------------------------------------------------------------
    def lai(self, leader, isr_, epoch, zk, now):
        self.rep, self.rem, self.brk, _ = become_leader_or_follower(
            self.rep, self.rem, self.brk, lai(self.me, leader, isr_, self.replicas, epoch, zk), ["d0"], now)

    def append(self, n):
        self.rep.loc[self.rep.broker == self.me, "leo"] += n
        self.rep = maybe_increment_leader_hw(self.rep, self.rem, self.profile, self.lag, 0)

    def fetch(self, replica, offset, now):
        """A fetch from `replica` at `offset` reaching the leader (Replica.updateFetchState + HW)."""
        req = F.conform(pd.DataFrame([{
            "broker": self.me, "src": replica, "topic": "t", "partition": 0, "fetch_offset": offset,
            "current_leader_epoch": -1, "last_fetched_epoch": -1, "log_start_offset": 0, "sent_ms": now,
            "deadline_ms": -1, "quota_bytes": LONG_MAX,
        }]), F.FETCH)
        self.rep, self.rem, resp, _, _ = fetch.serve_fetch(
            self.rep, self.rem, F.empty(F.RECORD), req, F.empty(F.FETCH), now, self.cfg)
        assert resp.empty or resp.error.isna().all()

    def expand(self, now):
        self.rep, self.rem, props = isr.maybe_expand_isr(self.rep, self.rem, now, self.profile)
        return props

    def shrink(self, now):
        self.rep, props = isr.maybe_shrink_isr(self.rep, self.rem, now, self.cfg, self.profile)
        return props

    def answer(self, props, now, error=None, zk=None, epoch=None):
        """The controller's (or ZooKeeper's) answer to proposals; success bumps zk_version by 1."""
        res = pd.DataFrame({
            "broker": props.broker, "topic": props.topic, "partition": props.partition,
            "leader_epoch": props.leader_epoch if epoch is None else epoch, "isr": props.isr,
            "zk_version": props.zk_version + 1 if zk is None else zk, "error": error,
        })
        self.rep, self.rem, counts = isr.apply_isr_results(self.rep, self.rem, F.conform(res, F.ISR_RESULT), now)
        for k, v in counts.items():
            self.counts[k] += v
        self.rep = maybe_increment_leader_hw(self.rep, self.rem, self.profile, self.lag, now)
        return counts

    def out_of_sync(self, now):
        return set(isr.out_of_sync_replicas(self.rep, self.rem, now, self.cfg, self.profile).replica)

    # -- observing ---------------------------------------------------------------------------
    @property
    def lag(self):
        return self.cfg.replica_lag_time_max_ms

    @property
    def row(self):
        return self.rep[self.rep.broker == self.me].iloc[0]

    def isr(self):
        return set(F.ids(self.row.isr))

    def maximal(self):
        return {self.me} | set(self.rem[self.rem.in_isr].replica)

    def remote(self, replica):
        return self.rem[self.rem.replica == replica].iloc[0]


def ids(props):
    return [set(F.ids(s)) for s in props.isr]


# -- A-ISR-01: expiry by replica.lag.time.max.ms and lastCaughtUpTime ---------------------------

T0 = 1000


def expiration(profile="2.8", init=True):
    """IsrExpirationTest: leader 0, ISR {0,1}, lag 100 ms, leader LEO 20; at t0 the follower's
    fetch state is initialised with fetch offset 0 against leader LEO 0."""
    p = Part([0, 1], [0, 1], now=T0, profile=profile, replica_lag_time_max_ms=100)
    if init:
        p.fetch(1, 0, T0)
    p.append(20)
    return p


def test_isr_01a_stuck_follower():
    p = expiration()
    p.fetch(1, 19, T0)
    assert p.out_of_sync(T0) == set() and p.shrink(T0).empty
    assert p.out_of_sync(T0 + 150) == {1}
    props = p.shrink(T0 + 150)
    assert props.isr.tolist() == ["0"] and props.kind.tolist() == ["shrink"]


def test_isr_01b_never_fetched():
    p = expiration(init=False)
    assert p.remote(1).leo == -1 and p.remote(1).last_caught_up_ms == T0  # makeLeader: caught up now
    assert p.out_of_sync(T0 + 150) == {1}


def test_isr_01c_slow_follower():
    p = expiration()
    p.fetch(1, 18, T0)
    p.fetch(1, 19, T0 + 75)  # neither fetch reaches the leader LEO 20
    assert p.remote(1).last_caught_up_ms == T0
    assert p.out_of_sync(T0 + 75) == set()
    assert p.out_of_sync(T0 + 150) == {1}
    p.fetch(1, 20, T0 + 150)
    assert p.out_of_sync(T0 + 150) == set() and p.remote(1).last_caught_up_ms == T0 + 150


@pytest.mark.parametrize("profile, dropped", [("2.8", False), ("2.1", False), ("2.0", True), ("0.10", True)])
def test_isr_01d_caught_up_follower_and_kafka_7152(profile, dropped):
    """Equal LEOs override elapsed time from 2.1 (KAFKA-7152); before, an idle partition lost it."""
    p = expiration(profile)
    p.fetch(1, 20, T0)
    assert p.out_of_sync(T0 + 150) == ({1} if dropped else set())


def test_isr_01e_last_caught_up_moves_only_on_reaching_the_leader_leo():
    p = Part([101, 102], [101, 102], leo=6, epoch=5, now=T0)
    assert p.remote(102).last_caught_up_ms == T0 and p.remote(102).leo == -1
    p.fetch(102, 3, T0 + 500)
    assert (p.remote(102).leo, p.remote(102).last_caught_up_ms) == (3, T0)
    p.fetch(102, 6, T0 + 1000)
    assert (p.remote(102).leo, p.remote(102).last_caught_up_ms) == (6, T0 + 1000)


def test_isr_01f_previous_fetch_caught_up_keeps_the_follower():
    p = Part([101, 102], [101, 102], leo=10, epoch=5, now=T0)  # lag 30000 (2.8 default)
    p.fetch(102, 5, T0 + 5000)
    assert (p.remote(102).leo, p.remote(102).last_caught_up_ms, p.row.hw) == (5, T0, 5)
    p.append(5)
    p.fetch(102, 10, T0 + 10001)  # 10 = the leader LEO at the previous fetch
    assert (p.remote(102).last_caught_up_ms, p.row.hw) == (T0 + 5000, 10)
    assert p.shrink(T0 + 10001).empty and p.shrink(T0 + 30000).empty
    assert p.row.pending_isr == "" and p.isr() == {101, 102}


def test_isr_01g_follower_at_log_end_is_never_shrunk():
    p = Part([101, 102], [101, 102], leo=10, epoch=5, now=T0)
    p.fetch(102, 10, T0)
    assert p.row.hw == 10
    assert p.shrink(T0).empty
    assert p.shrink(T0 + 30001).empty and p.shrink(T0 + 90000).empty
    assert p.isr() == {101, 102}


@pytest.mark.parametrize("caught_up_at", [0, 1, 25, 49, 50, 99])
def test_stuck_follower_leaves_between_1x_and_1_5x_the_lag(caught_up_at):
    """The check runs every lag/2, so removal comes in (1.0, 1.5] x lag after it last caught up."""
    p = Part([1, 2], [1, 2], now=0, replica_lag_time_max_ms=100)
    removed_at = None
    for now in range(0, 400):
        if now == caught_up_at:
            p.fetch(2, 0, now)  # at the log end: caught up now
            p.append(1)  # then the follower gets stuck
        props = p.shrink(now)
        if len(props):
            removed_at = now
            break
    assert p.row.isr_check_ms == removed_at and removed_at % 50 == 0  # checks at 0, 50, 100 ...
    assert 100 < removed_at - caught_up_at <= 150


# -- A-ISR-02: changes are proposed, the maximal ISR holds the HW until commit ----------------

def test_isr_02_shrink_holds_hw_until_committed():
    p = Part([101, 102, 103], [101, 102, 103], leo=10, epoch=5, zk=1, now=T0)
    assert p.row.hw == 0
    p.fetch(102, 10, T0)
    assert p.row.hw == 0  # 103 never fetched: LEO unknown
    assert p.shrink(T0).empty  # 103 counts as caught up at makeLeader
    props = p.shrink(T0 + p.lag + 1)
    assert props.isr.tolist() == ["101,102"] and props.zk_version.tolist() == [1]
    assert props.leader_epoch.tolist() == [5] and props.controller_epoch.tolist() == [1]
    assert p.isr() == p.maximal() == {101, 102, 103} and p.row.pending_isr == "101,102"
    p.rep = maybe_increment_leader_hw(p.rep, p.rem, "2.8", p.lag, T0 + p.lag + 1)
    assert p.row.hw == 0 and p.counts["isr_shrinks"] == 0
    assert p.shrink(T0 + 2 * p.lag).empty  # in flight: no second change
    p.answer(props, T0 + p.lag + 2)
    assert p.isr() == p.maximal() == {101, 102} and p.row.zk_version == 2 and p.row.pending_isr == ""
    assert p.counts == {"isr_shrinks": 1, "isr_expands": 0, "failed_isr_updates": 0}
    assert p.row.hw == 10  # recomputed as the shrink commits


def test_isr_02_retry_after_network_exception():
    p = Part([101, 102], [101, 102], leo=10, epoch=5, zk=1, now=T0)
    p.shrink(T0)
    props = p.shrink(T0 + p.lag + 1)
    assert props.isr.tolist() == ["101"]
    p.answer(props, T0 + p.lag + 1, error="NETWORK_EXCEPTION")
    assert p.counts["failed_isr_updates"] == 1
    assert p.isr() == {101, 102} and p.row.zk_version == 1 and p.row.hw == 0
    retry = p.shrink(T0 + p.lag + 2)  # resent at once, not a whole check period later
    assert retry.isr.tolist() == ["101"] and retry.zk_version.tolist() == [1]
    p.answer(retry, T0 + p.lag + 2)
    assert p.isr() == {101} and p.row.zk_version == 2 and p.row.hw == 10


def test_isr_02_leader_and_isr_race():
    """A LeaderAndIsr (new epoch; ZK-mode controllers always bump it) drops the change in flight;
    the stale answer is ignored and the leader may propose again (2.8 clears the queued item)."""
    p = Part([101, 102, 103], [101, 102, 103], leo=10, epoch=5, zk=1, now=T0)
    p.fetch(102, 10, T0)
    p.shrink(T0)
    stale = p.shrink(T0 + p.lag + 1)
    assert len(stale) == 1
    p.lai(101, [101, 102, 103], epoch=6, zk=2, now=T0 + p.lag + 2)
    assert p.row.pending_isr == "" and p.row.zk_version == 2 and p.row.leader_epoch == 6
    assert p.answer(stale, T0 + p.lag + 3)["isr_shrinks"] == 0
    assert p.isr() == {101, 102, 103} and p.row.zk_version == 2
    again = p.shrink(T0 + 2 * p.lag + 3)  # makeLeader reset 103's lastCaughtUp: a full lag later
    assert again.isr.tolist() == ["101,102"] and again.leader_epoch.tolist() == [6]
    assert again.zk_version.tolist() == [2]


# -- A-ISR-03: expansion needs LEO >= HW and, from 2.1, LEO >= the epoch start offset ---------

def test_isr_03_case_1_expansion():
    p = Part([101, 102], [101], leo=10, epoch=5, now=T0)
    assert p.row.hw == 10  # alone in the ISR
    p.fetch(102, 3, T0 + 1)
    assert p.expand(T0 + 1).empty
    assert (p.remote(102).leo, p.remote(102).last_caught_up_ms) == (3, -1)
    p.fetch(102, 10, T0 + 2)
    props = p.expand(T0 + 2)
    assert props.isr.tolist() == ["101,102"] and props.kind.tolist() == ["expand"]
    assert p.isr() == {101} and p.maximal() == {101, 102}
    assert p.remote(102).last_caught_up_ms == T0 + 2
    assert p.expand(T0 + 3).empty  # one change at a time
    p.answer(props, T0 + 3)
    assert p.isr() == p.maximal() == {101, 102} and p.row.pending_isr == ""
    assert p.counts == {"isr_shrinks": 0, "isr_expands": 1, "failed_isr_updates": 0}


@pytest.mark.parametrize("profile", ["2.1", "2.7", "2.8", "2.0"])
def test_isr_03_case_2_epoch_start_offset(profile):
    L, F1, F2 = 1, 2, 3
    p = Part([L, F1, F2], [L, F2], leo=5, epoch=8, profile=profile, now=T0)
    p.fetch(F2, 0, T0)
    p.fetch(F2, 1, T0 + 1)
    assert p.row.hw == 1
    p.lai(F2, [F2], epoch=9, zk=1, now=T0 + 2)  # becomes follower ...
    p.lai(L, [L, F2], epoch=10, zk=2, now=T0 + 3)  # ... and leader again
    assert p.row.epoch_start_offset == 5 and p.row.hw == 1
    p.append(2)  # offsets 5-6
    p.fetch(F1, 0, T0 + 4)
    assert p.expand(T0 + 4).empty  # LEO 0 < HW 1
    p.fetch(F1, 1, T0 + 5)
    props = p.expand(T0 + 5)  # LEO 1 >= HW 1 but < epoch start 5
    if profile == "2.0":  # before KAFKA-7128 it joins here
        assert ids(props) == [{L, F1, F2}]
        return
    assert props.empty and p.maximal() == {L, F2}
    p.fetch(F1, 5, T0 + 6)
    props = p.expand(T0 + 6)
    assert ids(props) == [{L, F1, F2}] and props.isr.tolist() == ["1,3,2"] and props.zk_version.tolist() == [2]
    assert p.isr() == {L, F2} and p.maximal() == {L, F1, F2}


def test_pending_expansion_holds_the_hw():
    """The maximal ISR counts at once (KIP-497; Partition.maybeIncrementLeaderHW over isrState.maximalIsr):
    the leader may not run past a follower the controller is about to admit."""
    p = Part([1, 2], [1], leo=10, epoch=1, now=0, replica_lag_time_max_ms=100)
    p.fetch(2, 10, 0)
    p.expand(0)
    p.append(5)
    assert p.row.hw == 10
    p.rep = maybe_increment_leader_hw(p.rep, p.rem, "2.8", p.lag, 10_000)  # long after it caught up
    assert p.row.hw == 10


def test_expansion_adds_one_broker_at_a_time_lowest_id_first():
    p = Part([1, 4, 3, 2], [1], leo=10, epoch=1, now=0)
    for r in (4, 3, 2):
        p.fetch(r, 10, 0)
    props = p.expand(0)
    assert props.isr.tolist() == ["1,2"]
    p.answer(props, 1)
    p.fetch(3, 10, 1)  # expansion is evaluated when a follower's fetch updates its state
    props = p.expand(1)
    assert props.isr.tolist() == ["1,2,3"]
    p.answer(props, 2)
    assert p.expand(2).empty  # no fetch from 4 at 2: nothing to evaluate
    p.fetch(4, 10, 2)
    assert p.expand(2).isr.tolist() == ["1,2,3,4"]


def test_shrink_removes_all_out_of_sync_followers_in_one_change_and_keeps_the_leader():
    p = Part([1, 2, 3], [3, 1, 2], leo=10, epoch=1, now=0, replica_lag_time_max_ms=100)
    props = p.shrink(500)
    assert props.isr.tolist() == ["1"]  # the leader stays; the ISR never becomes empty


def test_only_leaders_run_the_checks():
    p = Part([1, 2], [2, 1], leo=10, epoch=1, now=0)
    p.lai(2, [2, 1], epoch=2, zk=1, now=0)  # now a follower
    rep, props = isr.maybe_shrink_isr(p.rep, p.rem, 10**9, p.cfg, "2.8")
    assert props.empty and rep.isr_check_ms.tolist() == [-1]


# -- 0.8: replica.lag.max.messages and the LEO-update time ---------------------------------------

def old_rule(profile="0.8"):
    p = Part([1, 2], [1, 2], now=0, profile=profile,
             replica_lag_time_max_ms=10000, replica_lag_max_messages=4000)
    p.fetch(2, 0, 0)
    assert p.shrink(0).empty
    return p


def test_0_8_burst_expels_followers_that_rejoin_at_once():
    p = old_rule()
    p.fetch(2, 0, 9990)
    p.append(4001)  # one produce burst at 9999
    props = p.shrink(10000)  # checks run every replica.lag.time.max.ms before 0.10.2
    assert props.isr.tolist() == ["1"]
    p.answer(props, 10000)
    assert p.isr() == {1} and p.row.hw == 4001  # committed by the leader alone
    p.fetch(2, 4001, 10001)  # caught up a millisecond later
    props = p.expand(10001)
    assert props.isr.tolist() == ["1,2"]
    p.answer(props, 10001)
    assert p.isr() == {1, 2} and p.counts["isr_shrinks"] == 1 and p.counts["isr_expands"] == 1


@pytest.mark.parametrize("profile, burst, expelled", [("0.8", 4000, False), ("0.8", 4001, True),
                                                      ("0.10", 4001, False), ("2.8", 100000, False)])
def test_message_count_threshold_only_in_0_8(profile, burst, expelled):
    p = old_rule(profile)
    p.fetch(2, 0, 9990)
    p.append(burst)
    assert p.out_of_sync(10000) == ({2} if expelled else set())


def test_0_8_stuck_means_no_fetch_set_the_leo_for_the_lag():
    """0.8's Replica stamps logEndOffsetUpdateTimeMs on every fetch: a follower polling an idle
    partition stays; one that stops fetching goes, even with the leader's LEO (no KAFKA-7152)."""
    p = old_rule()
    assert p.remote(2).leo_changed_ms == 0
    assert p.out_of_sync(10000) == set()  # strict
    assert p.out_of_sync(10001) == {2}
    for t in range(500, 20001, 500):
        p.fetch(2, 0, t)
    assert p.remote(2).leo_changed_ms == 20000 and p.out_of_sync(20001) == set()
    assert p.shrink(20000).empty
    assert p.shrink(30000).empty  # strict
    assert p.out_of_sync(30001) == {2} and p.shrink(30001).empty  # not due: period = lag on 0.8
    assert p.shrink(40000).isr.tolist() == ["1"]


# -- committing: errors and stale answers ---------------------------------------------------------

def pending_shrink(profile="2.8"):
    p = Part([1, 2, 3], [1, 2, 3], leo=10, epoch=3, zk=4, now=0, profile=profile,
             replica_lag_time_max_ms=100)
    p.fetch(2, 10, 150)
    p.shrink(0)
    props = p.shrink(150)
    assert props.isr.tolist() == ["1,2"]
    return p, props


@pytest.mark.parametrize("error", ["FENCED_LEADER_EPOCH", "INVALID_UPDATE_VERSION", "UNKNOWN_TOPIC_OR_PARTITION"])
def test_2_7_fatal_errors_stay_pending_until_leader_and_isr(error):
    p, props = pending_shrink("2.7")
    p.answer(props, 151, error=error)
    assert p.row.pending_isr == "1,2" and p.isr() == {1, 2, 3} and p.maximal() == {1, 2, 3}
    assert p.counts["failed_isr_updates"] == 1
    assert p.shrink(1000).empty and p.shrink(5000).empty  # no further ISR changes
    assert p.row.isr_check_ms == 5000  # the task still ran
    p.lai(1, [1, 2, 3], epoch=4, zk=7, now=5001)
    assert p.row.pending_isr == "" and p.row.zk_version == 7
    props = p.shrink(5200)
    assert props.isr.tolist() == ["1,2"] and props.zk_version.tolist() == [7] and props.leader_epoch.tolist() == [4]


def test_2_7_fatal_error_on_an_expansion_keeps_it_in_the_maximal_isr():
    p = Part([1, 2], [1], leo=10, epoch=1, zk=1, now=0, profile="2.7")
    p.fetch(2, 10, 0)
    props = p.expand(0)
    p.answer(props, 1, error="INVALID_UPDATE_VERSION")
    assert p.isr() == {1} and p.maximal() == {1, 2} and p.row.pending_isr == "1,2"
    p.append(5)
    assert p.row.hw == 10


def test_2_7_other_errors_drop_the_expansion_and_retry():
    p = Part([1, 2], [1], leo=10, epoch=1, zk=1, now=0, profile="2.7")
    p.fetch(2, 10, 0)
    props = p.expand(0)
    p.answer(props, 1, error="NETWORK_EXCEPTION")
    assert p.isr() == {1} and p.maximal() == {1} and p.row.pending_isr == ""
    p.fetch(2, 10, 2)
    again = p.expand(2)
    assert again.isr.tolist() == ["1,2"] and p.maximal() == {1, 2}


@pytest.mark.parametrize("profile", ["0.8", "0.11", "2.0", "2.1"])
def test_badversion_before_2_7_drops_the_change(profile):
    p = Part([1, 2], [1], leo=10, epoch=1, zk=1, now=0, profile=profile)
    p.fetch(2, 10, 0)
    props = p.expand(0)
    p.answer(props, 1, error="BADVERSION")  # "Cached zkVersion ... skip updating ISR"
    assert p.isr() == {1} and p.maximal() == {1} and p.row.pending_isr == "" and p.row.zk_version == 1
    p.fetch(2, 10, 2)
    assert p.expand(2).isr.tolist() == ["1,2"]  # tried again at the next fetch


def test_badversion_shrink_is_retried_at_the_next_scheduled_check():
    p, props = pending_shrink("2.1")
    p.answer(props, 151, error="BADVERSION")
    assert p.row.pending_isr == "" and p.maximal() == {1, 2, 3}
    assert p.shrink(160).empty  # not due before 150 + lag / 2
    assert p.shrink(200).isr.tolist() == ["1,2"]


def test_stale_answers_are_ignored():
    p, props = pending_shrink()
    assert p.answer(props, 151, epoch=2)["isr_shrinks"] == 0  # another leader epoch
    assert p.answer(props, 151, zk=4)["isr_shrinks"] == 0  # version not above the local one
    assert p.row.pending_isr == "1,2" and p.isr() == {1, 2, 3}
    assert p.answer(props, 151)["isr_shrinks"] == 1
    assert p.answer(props, 152, zk=6)["isr_shrinks"] == 0  # nothing pending any more
    assert p.isr() == {1, 2} and p.row.zk_version == 5 and p.maximal() == {1, 2}


def test_answer_for_a_partition_no_longer_led_is_ignored():
    p, props = pending_shrink()
    p.lai(2, [2, 1], epoch=4, zk=5, now=151)
    assert p.answer(props, 152, epoch=4) == {"isr_shrinks": 0, "isr_expands": 0, "failed_isr_updates": 0}
    assert p.row.isr == "2,1"


# -- plumbing: new columns, gauges ----------------------------------------------------------------

def test_leader_and_isr_sets_zk_version_and_fetch_stamps_the_leo_time():
    p = Part([1, 2], [1, 2], leo=3, epoch=2, zk=9, now=50)
    assert (p.row.zk_version, p.row.pending_isr, p.row.isr_check_ms) == (9, "", -1)
    assert p.remote(2).leo_changed_ms == 50
    p.fetch(2, 1, 70)
    p.fetch(2, 1, 90)
    assert p.remote(2).leo_changed_ms == 90


def test_isr_gauges():
    p = Part([1, 2, 3], [1, 2], leo=10, epoch=1, now=0)
    g = isr.isr_gauges(p.rep, pd.Series({"t": 2}))
    assert g[["under_replicated", "under_min_isr", "at_min_isr"]].values.tolist() == [[True, False, True]]
    p.fetch(3, 10, 0)
    p.expand(0)  # pending: gauges follow the committed ISR
    assert isr.isr_gauges(p.rep, pd.Series({"t": 3})).under_min_isr.tolist() == [True]
    assert isr.isr_gauges(p.rep, pd.Series({"t": 2})).columns.tolist() == [
        "broker", "topic", "partition", "under_replicated", "under_min_isr", "at_min_isr"]
