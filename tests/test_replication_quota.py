"""Replication throttles (KIP-73: ReplicationQuotaManager) on plain pandas frames: no Spark.

Leader 1 leads t-0 (and t-1); brokers 2 and 3 follow it. The frames go through the functions the
engine runs, in its order within a round: the followers apply the responses sent last round, the
leader serves the requests sent last round (and its parked ones), the followers send new requests.
Every record is 10 bytes unless a test says otherwise (key None: record_bytes = value_bytes).
"""

from __future__ import annotations

import harness as H
import numpy as np
import pandas as pd
import pytest

from sparkkafka.protocol import fetch, produce
from sparkkafka.protocol import frames as F
from sparkkafka.protocol import replication_quota as rq
from sparkkafka.protocol.config import LONG_MAX
from sparkkafka.protocol.leader_and_isr import become_leader_or_follower, new_broker_rows

CFG = H.settings("2.8")
MIN_ISR = pd.Series({"t": 1})
ROUND_MS = 100


def lai(broker, isr, replicas, partition):
    return H.lai(broker, 1, isr, replicas, partition=partition)


def throttle(leader_rate=None, follower_rate=None, leader_list="", follower_list="", round_ms=ROUND_MS):
    """The settings the driver derives (RoundSettings fields): quota rates per broker, throttled replica lists per topic."""
    quota = {"leader": {1: leader_rate} if leader_rate is not None else {},
             "follower": {b: follower_rate for b in (2, 3)} if follower_rate is not None else {}}
    return {"quota": quota, "throttled_replicas": {"t": (leader_list, follower_list)}, "round_ms": round_ms}


class Cluster:
    """Leader 1 of t-<p> for each p in `isr` (p -> ISR), replicas 1, 2 and 3. With `sensors` the brokers
    keep their KIP-73 sensors across calls (the BROKER frame, as protocol/broker.py does); without, every
    call sees fresh ones (a fetch's allowance is then rate x round_ms)."""

    def __init__(self, isr: dict[int, tuple], cfg: dict | None = None, replicas=(1, 2, 3), sensors: bool = False):
        reqs = F.concat([lai(b, i, replicas, p) for p, i in isr.items() for b in replicas], F.LEADER_AND_ISR)
        self.rep, self.rem, brokers, _ = become_leader_or_follower(
            F.empty(F.REPLICA), F.empty(F.REMOTE), new_broker_rows(list(replicas)), reqs, ["d0"], 0)
        self.quota = brokers if sensors else None
        self.cfg = H.settings("2.8", **(cfg or {}))
        self.tail = F.empty(F.RECORD)
        self.requests, self.parked = F.empty(F.FETCH), F.empty(F.FETCH)
        self.responses = (F.empty(F.FETCH_RESPONSE), F.empty(F.RECORD))
        self.now = 0
        self.next_id = 0

    def leo(self, broker, partition=0) -> int:
        r = self.rep
        return int(r[(r.broker == broker) & (r.partition == partition)].leo.iloc[0])

    def produce(self, partition, sizes):
        rows = [{"broker": 1, "topic": "t", "partition": partition, "record_id": self.next_id + i, "count": 1,
                 "acks": 1, "value_bytes": s, "key": None, "sent_ms": self.now, "deadline_ms": self.now + 30000}
                for i, s in enumerate(sizes)]
        self.next_id += len(sizes)
        self.rep, recs, _, _ = produce.append_to_leader(
            self.rep, self.rem, F.conform(pd.DataFrame(rows), F.PRODUCE), MIN_ISR, self.now, self.cfg)
        self.tail = F.concat([self.tail, recs], F.RECORD)

    def send(self):
        self.rep, reqs, _ = fetch.fetch_requests(self.rep, self.now, {}, self.cfg, self.quota)
        if self.quota is not None:
            self.quota = fetch.touch_quota(self.quota, "follower", reqs, self.now, self.cfg)
        self.requests = F.concat([self.requests, reqs], F.FETCH)

    def serve(self):
        if self.quota is not None:
            self.quota = fetch.touch_quota(self.quota, "leader", F.concat([self.requests, self.parked], F.FETCH),
                                           self.now, self.cfg)
        self.rep, self.rem, resp, recs, self.parked = fetch.serve_fetch(
            self.rep, self.rem, self.tail, self.requests, self.parked, self.now, self.cfg, self.quota)
        if self.quota is not None:
            self.quota = fetch.record_quota(self.quota, "leader", recs, "src", self.now, self.cfg)
        self.requests = F.empty(F.FETCH)
        self.responses = (resp, recs)
        return resp, recs

    def apply(self):
        self.rep, appended, _, _ = fetch.apply_fetch_responses(self.rep, *self.responses, self.now, self.cfg,
                                                               self.quota)
        if self.quota is not None:
            self.quota = fetch.record_quota(self.quota, "follower", appended, "broker", self.now, self.cfg)
        self.responses = (F.empty(F.FETCH_RESPONSE), F.empty(F.RECORD))
        return appended

    def round(self):
        """One engine round: responses in, the leader serves, requests out. Returns (appended, served)."""
        return self.round_of(ROUND_MS)

    def round_of(self, round_ms: int):
        appended = self.apply()
        _, served = self.serve()
        self.send()
        self.now += round_ms
        return appended, served


def nbytes(recs: pd.DataFrame, **where) -> int:
    for c, v in where.items():
        recs = recs[recs[c] == v]
    return int(fetch.record_bytes(recs).sum()) if len(recs) else 0


# ---------------------------------------------------------------------------------------------------------
# Config parsing and budget arithmetic
# ---------------------------------------------------------------------------------------------------------

def test_parse_throttled_replica_lists():
    assert rq.parse_throttled_replicas("") == (False, frozenset())
    assert rq.parse_throttled_replicas(None) == (False, frozenset())
    assert rq.parse_throttled_replicas(" * ") == (True, frozenset())
    assert rq.parse_throttled_replicas("0:1,1:2, 2:1") == (False, frozenset({(0, 1), (1, 2), (2, 1)}))
    for bad in ("0", "0:a", "*,0:1", "0:1,", "1-2"):
        with pytest.raises(ValueError):
            rq.parse_throttled_replicas(bad)


def test_a_broker_keeps_only_entries_naming_itself():
    assert rq.throttled_partitions("0:101,1:102,2:101", 101) == [0, 2]
    assert rq.throttled_partitions("0:101,1:102,2:101", 102) == [1]
    assert rq.throttled_partitions("0:101,1:102", 103) == []
    assert rq.throttled_partitions("*", 103) == "*"


def test_is_throttled_vectorised_with_star_and_other_brokers():
    cfg = H.settings(throttled_replicas={"a": ("0:1,1:2", ""), "b": ("*", "0:3"), "c": ("", "*")})
    topic = ["a", "a", "a", "b", "b", "c", "d"]
    part = [0, 0, 1, 0, 7, 0, 0]
    broker = [1, 2, 1, 5, 1, 1, 1]
    assert rq.is_throttled(cfg, "leader", topic, part, broker).tolist() == [True, False, False, True, True, False, False]
    assert rq.is_throttled(cfg, "follower", topic, part, [3, 3, 3, 3, 3, 9, 3]).tolist() == \
        [False, False, False, True, False, True, False]
    assert not rq.is_throttled(H.settings(), "leader", topic, part, broker).any()


def test_budget_per_round():
    assert rq.budget(1000, 100) == 100
    assert rq.budget(1500, 250) == 375
    assert rq.budget(5, 100) == 0  # below one byte a round: nothing moves
    assert rq.budget(LONG_MAX, 100) == rq.UNLIMITED
    assert rq.budget(None, 100) == rq.UNLIMITED
    cfg = H.settings(quota={"leader": {1: 2000, "2": 10000}}, round_ms=100)
    assert rq.budgets(cfg, "leader", [1, 2, 3]).tolist() == [200, 1000, rq.UNLIMITED]
    assert rq.budgets(cfg, "follower", [1]).tolist() == [rq.UNLIMITED]
    assert rq.budgets(H.settings(quota={"leader": {1: 2000}}), "leader", [1]).tolist() == [200]  # round_ms defaults to 100
    assert not rq.active(H.settings()) and not rq.active(H.settings(quota={"leader": {1: 5}}))
    assert rq.active(H.settings(**throttle(leader_rate=5, leader_list="*")))


def test_within_budget_keeps_whole_records_in_order():
    size = np.array([40, 30, 20, 50, 5, 7, 7])
    group = np.array([0, 0, 0, 0, 0, 1, 1])
    eligible = np.array([True, True, True, True, True, False, False])
    keep = rq.within_budget(size, group, eligible, np.full(7, 100))
    assert keep.tolist() == [True, True, True, False, False, True, True]  # 90 bytes; the 5 after the 50 waits too


def test_in_csv():
    assert rq.in_csv(["1,2", "1,2", "", None, "12"], [2, 3, 1, 1, 1]).tolist() == [True, False, False, False, False]


# ---------------------------------------------------------------------------------------------------------
# Leader side
# ---------------------------------------------------------------------------------------------------------

SIZES = [40, 30, 20, 50, 5]  # 145 bytes


def test_non_isr_follower_gets_whole_records_within_the_leader_budget():
    c = Cluster({0: (1,)}, throttle(leader_rate=1000, leader_list="0:1"), replicas=(1, 3))  # 100 bytes a round
    c.produce(0, SIZES)
    c.send()
    _, served = c.serve()
    assert served.offset.tolist() == [0, 1, 2]  # 90 bytes; the 50-byte record does not fit, nor the 5 after it
    c.apply()
    assert c.leo(3) == 3
    c.send()
    _, served = c.serve()
    assert served.offset.tolist() == [3, 4]


def test_in_sync_bytes_count_against_the_leader_budget():
    c = Cluster({0: (1, 2)}, throttle(leader_rate=1000, leader_list="*"))
    c.produce(0, SIZES)
    c.send()
    _, served = c.serve()  # the ISR follower takes 145 bytes: nothing left for broker 3
    assert nbytes(served, broker=2) == 145 and nbytes(served, broker=3) == 0
    # withheld bytes are no data (DelayedFetch): broker 3's request waits in the purgatory
    assert c.parked.src.tolist() == [3]
    c.apply()
    c.send()
    c.produce(0, [10, 10])
    _, served = c.serve()  # the ISR follower fetches 20 bytes: 80 left for broker 3's parked fetch
    assert nbytes(served, broker=2) == 20
    assert served[served.broker == 3].offset.tolist() == [0, 1]  # 40 + 30 fit, + 20 would not
    assert c.parked.empty


def test_unthrottled_partitions_and_brokers_are_unaffected():
    cfg = throttle(leader_rate=1000, leader_list="0:1")  # t-1 is not throttled; 0:1 names the leader
    c = Cluster({0: (1,), 1: (1,)}, cfg, replicas=(1, 3))
    plain = Cluster({0: (1,), 1: (1,)}, replicas=(1, 3))
    for x in (c, plain):
        x.produce(0, SIZES)
        x.produce(1, [300] * 4)
        x.send()
    _, served = c.serve()
    _, base = plain.serve()
    assert served[served.partition == 1].reset_index(drop=True).equals(base[base.partition == 1].reset_index(drop=True))
    assert nbytes(served, broker=3, partition=1) == 1200
    assert nbytes(served, broker=3, partition=0) == 90
    # a list naming another broker as leader throttles nothing here
    other = Cluster({0: (1, 2)}, throttle(leader_rate=1000, leader_list="0:2,0:3"))
    other.produce(0, SIZES)
    other.send()
    assert nbytes(other.serve()[1], broker=3) == 145


def test_no_quota_config_changes_nothing():
    outs = []
    for extra in ({}, {"quota": {"leader": {1: 1000}}}, {"throttled_replicas": {"t": ("*", "*")}},
                  throttle(leader_rate=LONG_MAX, follower_rate=LONG_MAX, leader_list="*", follower_list="*")):
        c = Cluster({0: (1, 2)}, extra)
        c.produce(0, SIZES)
        c.send()
        resp, recs = c.serve()
        c.send()
        outs.append((resp, recs, c.apply()))
    for resp, recs, app in outs[1:]:
        assert resp.equals(outs[0][0]) and recs.equals(outs[0][1]) and app.equals(outs[0][2])


def test_zero_budget_parks_until_the_deadline():
    """DelayedFetch does not count withheld bytes toward min_bytes: the fetch waits its full time."""
    c = Cluster({0: (1, 2)}, throttle(leader_rate=5, leader_list="*"))  # 0 bytes a round
    c.produce(0, SIZES)
    c.send()
    c.serve()
    assert c.parked.src.tolist() == [3]
    wait = CFG.replica_fetch_wait_max_ms
    c.now = wait - 1
    resp, recs = c.serve()
    assert c.parked.src.tolist() == [3] and resp.empty
    c.now = wait
    resp, recs = c.serve()
    assert c.parked.empty and resp.src.tolist() == [1] and resp.broker.tolist() == [3] and recs.empty


# ---------------------------------------------------------------------------------------------------------
# Follower side
# ---------------------------------------------------------------------------------------------------------

def test_follower_leaves_out_a_lagging_partition_when_its_quota_is_used():
    """t-0: broker 3 in the ISR (in sync: lag 0); t-1: ISR {1}, so the HW runs ahead of broker 3 (lag > 0).
    Both are in broker 3's follower list; its budget is 100 bytes a round."""
    c = Cluster({0: (1, 3), 1: (1,)}, throttle(follower_rate=1000, follower_list="0:3,1:3"), replicas=(1, 3))
    c.produce(0, [60, 60])
    c.produce(1, SIZES)
    c.send()
    resp, served = c.serve()
    # in sync t-0 is never held back, and its 120 bytes use up the quota: t-1 is left out
    assert nbytes(served, partition=0) == 120 and nbytes(served, partition=1) == 0
    assert sorted(resp.partition.tolist()) == [0, 1]  # one response for the request, t-1 empty
    c.send()
    c.apply()
    c.send()
    assert (c.leo(3, 0), c.leo(3, 1)) == (2, 0)
    resp, served = c.serve()  # nothing new on t-0: t-1 gets the whole 100 bytes
    assert served[served.partition == 1].offset.tolist() == [0, 1, 2]
    c.apply()
    assert c.leo(3, 1) == 3


def test_follower_budget_holds_across_leaders_in_one_round():
    """Responses from two leaders landing in one round: the follower appends within its budget."""
    cfg = H.settings("2.8", **throttle(follower_rate=1000, follower_list="*"))
    rep = F.new_replicas(pd.DataFrame([
        {"broker": 3, "topic": "t", "partition": p, "log_dir": "d0", "leader": p + 1, "leader_epoch": 0,
         "isr": F.csv([p + 1]), "replicas": F.csv([p + 1, 3]), "fetch_in_flight": True, "fetch_sent_ms": 0}
        for p in (0, 1)]))
    resp = F.conform(pd.DataFrame([
        {"broker": 3, "src": p + 1, "topic": "t", "partition": p, "fetch_offset": 0, "hw": 5, "log_start_offset": 0,
         "leo": 5, "leader_epoch": 0, "error": None, "sent_ms": 0, "diverging_epoch": -1, "diverging_end_offset": -1}
        for p in (0, 1)]), F.FETCH_RESPONSE)
    recs = F.conform(pd.DataFrame([
        {"broker": 3, "src": p + 1, "topic": "t", "partition": p, "offset": o, "leader_epoch": 0, "record_id": o,
         "value_bytes": 30, "key": None, "timestamp": 0} for p in (0, 1) for o in range(3)]), F.RECORD)
    rep2, appended, _, _ = fetch.apply_fetch_responses(rep, resp, recs, 0, cfg)
    assert nbytes(appended) == 90  # 180 sent, 100 allowed: 3 whole records
    assert appended[["partition", "offset"]].values.tolist() == [[0, 0], [0, 1], [0, 2]]
    assert rep2.sort_values("partition").leo.tolist() == [3, 0]
    # unthrottled, all six are appended
    _, appended, _, _ = fetch.apply_fetch_responses(rep, resp, recs, 0, CFG)
    assert len(appended) == 6


# ---------------------------------------------------------------------------------------------------------
# Moves over many rounds
# ---------------------------------------------------------------------------------------------------------

SIDES = {"leader": dict(leader_list="0:1"), "follower": dict(follower_list="0:3"),
         "both": dict(leader_list="0:1,0:2", follower_list="0:3")}


def side_throttle(side: str, rate: int, round_ms: int = ROUND_MS) -> dict:
    rates = {k: rate for k in ("leader_rate", "follower_rate") if side in ("both", k.split("_")[0])}
    return throttle(**rates, **SIDES[side], round_ms=round_ms)


@pytest.mark.parametrize("side", ["leader", "follower", "both"])
def test_a_throttled_move_takes_at_least_n_over_t_and_finishes(side):
    """The sensors carried from round to round (as the engine does): the bytes moved never run ahead of
    the rate, and the move ends within a fetch cycle or two of N/T (a per-round budget gave about 2 N/T:
    one fetch in flight costs every other round)."""
    rate = 2000  # bytes/s
    c = Cluster({0: (1,)}, side_throttle(side, rate), replicas=(1, 3), sensors=True)  # 3 joins a partition led by 1
    rng = np.random.default_rng(7)
    sizes = rng.integers(1, 150, 80).tolist()
    total = sum(sizes)
    c.produce(0, sizes)
    start = c.now
    served_total = appended_total = 0
    for _ in range(1000):
        appended, served = c.round()
        served_total += nbytes(served)
        appended_total += nbytes(appended)
        # the window began at the first fetch: never more than rate x the time since, this round included
        assert served_total <= rate * (c.now - start) / 1000 and appended_total <= served_total
        if c.leo(3) == c.leo(1):
            break
    assert c.leo(3) == len(sizes)  # finished
    elapsed_s = (c.now - start) / 1000
    assert elapsed_s >= total / rate
    assert elapsed_s <= 1.1 * total / rate + 2 * ROUND_MS / 1000  # and at the rate: N/T, a fetch cycle to start


@pytest.mark.parametrize("side,round_ms,seconds", [("both", 100, 5), ("leader", 200, 13), ("follower", 250, 10)])
def test_a_throttled_fetch_stream_moves_the_rate(side, round_ms, seconds):
    """A backlog far larger than the quota, fetched for N emulated seconds: throttle x N bytes within 10 %,
    also past the 11 s window (samples purged) and with longer rounds."""
    rate = 3000
    c = Cluster({0: (1,)}, side_throttle(side, rate, round_ms), replicas=(1, 3), sensors=True)
    c.produce(0, [100] * (rate * seconds // 50))  # twice what N seconds may move
    moved = 0
    while c.now < seconds * 1000:
        appended, _ = c.round_of(round_ms)
        moved += nbytes(appended)
    assert abs(moved - rate * seconds) <= 0.1 * rate * seconds, moved
    assert moved <= rate * seconds


def test_sensor_samples_roll_and_purge():
    """SampledStat: a sample lasts window.size, a new one starts at the next record, samples older than
    window.num x size are purged; bytes_left is rate x (now + round - oldest start) - recorded."""
    cfg = H.settings(quota={"leader": {1: 1000}}, round_ms=100, replication_quota_window_num=3,
                     replication_quota_window_size_seconds=1)
    q = new_broker_rows([1, 2])
    assert rq.allowances(cfg, "leader", [1, 2], 0, q).tolist() == [100, rq.UNLIMITED]  # a fresh sensor
    q = rq.record(q, "leader", [1, 1, 2], [30, 20, 7], 500, cfg)
    assert rq.decode(q.leader_quota.iloc[0]) == [(500, 50)] and rq.decode(q.leader_quota.iloc[1]) == [(500, 7)]
    q = rq.record(q, "leader", [1], [10], 1499, cfg)  # still the first sample
    q = rq.record(q, "leader", [1], [40], 1500, cfg)  # a new one
    assert rq.decode(q.leader_quota.iloc[0]) == [(500, 60), (1500, 40)]
    assert rq.allowances(cfg, "leader", [1], 2000, q).tolist() == [1000 * 1600 // 1000 - 100]
    assert rq.allowances(cfg, "leader", [1], 3500, q).tolist() == [1000 * 2100 // 1000 - 40]  # first purged
    assert rq.allowances(cfg, "leader", [1], 4500, q).tolist() == [100]  # all purged: fresh again
    q = rq.record(q, "leader", [1], [5000], 4500, cfg)
    assert rq.decode(q.leader_quota.iloc[0]) == [(4500, 5000)]
    assert rq.allowances(cfg, "leader", [1], 4600, q).tolist() == [0]  # over the rate: nothing until it falls
    assert rq.allowances(cfg, "follower", [1], 4600, q).tolist() == [rq.UNLIMITED]


def test_a_producer_faster_than_the_throttle_is_never_caught():
    rate = 1000  # 100 bytes a round; the producer writes 150
    c = Cluster({0: (1,)}, throttle(leader_rate=rate, follower_rate=rate, leader_list="0:1", follower_list="0:3"),
                replicas=(1, 3))
    c.produce(0, [50] * 10)
    lag = []
    for _ in range(100):
        c.produce(0, [50, 50, 50])
        c.round()
        lag.append(c.leo(1) - c.leo(3))
    assert min(lag) > 0
    assert lag[-1] > lag[50] > lag[0]


def test_an_isr_follower_keeps_up_under_a_leader_throttle():
    """Only non-ISR fetches are withheld: an in-sync follower follows a fast producer."""
    c = Cluster({0: (1, 3)}, throttle(leader_rate=1000, leader_list="*"), replicas=(1, 3))
    for _ in range(50):
        c.produce(0, [50, 50, 50])
        c.round()
    assert c.leo(1) - c.leo(3) <= 2 * 3  # at most the records of the rounds in flight
