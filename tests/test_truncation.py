"""Follower truncation driven through the protocol frames (golden B-LEC-02d, C-TR-01..05, D-08).

Plain pandas, no Spark. Where tests/test_leader_epoch.py checks the pure cache arithmetic, these run
the frame functions the engine runs (leader_and_isr -> on_become_leader -> become_follower, then
fetch_requests -> serve_fetch / offsets_for_leader_epoch.answer -> apply_answers /
apply_fetch_responses) between a leader (broker 1) and a follower (broker 2) of t-0 whose logs are
RECORD frames, and check epoch caches, truncation offsets, error names and final logs.
"""

from __future__ import annotations

from types import SimpleNamespace

import harness as H
import numpy as np
import pandas as pd
import pytest

from sparkkafka.protocol import errors, fetch, leader_epoch, produce
from sparkkafka.protocol import frames as F
from sparkkafka.protocol import offsets_for_leader_epoch as ofle
from sparkkafka.protocol.config import LONG_MAX
from sparkkafka.protocol.leader_and_isr import become_leader_or_follower, new_broker_rows
from sparkkafka.protocol.truncation import on_leader_and_isr, truncate

LEADER, FOLLOWER = 1, 2
FOREVER = np.iinfo("int64").max
KEY = ["topic", "partition"]


# ---------------------------------------------------------------------------------------------------------
# Builders
# ---------------------------------------------------------------------------------------------------------

def parse(spec) -> list[tuple[int, int, str]]:
    """"0:e0:a 1:e2:b" (offset:epoch:value, space-separated) or [(offset, epoch, value)]
    -> [(offset, epoch, value)]."""
    if isinstance(spec, str):
        return [(int(o), int(e[1:]), v) for o, e, v in (x.split(":") for x in spec.split())]
    return [(int(o), int(e), str(v)) for o, e, v in spec]


def log_frame(broker: int, spec, stamped: bool = True, partition: int = 0) -> pd.DataFrame:
    """RECORD rows of one replica's log. Unstamped records (message format < v2, i.e. before 0.11 or
    written before an upgrade) carry no leader epoch (-1)."""
    rows = [{"broker": broker, "src": broker, "topic": "t", "partition": partition, "offset": o,
             "leader_epoch": e if stamped else -1, "record_id": o, "value_bytes": 10, "key": v, "timestamp": 0}
            for o, e, v in parse(spec)]
    return F.conform(pd.DataFrame(rows), F.RECORD) if rows else F.empty(F.RECORD)


def lai(broker: int, epoch: int, leader: int = LEADER, isr=(1, 2), replicas=(1, 2)) -> pd.DataFrame:
    return H.lai(broker, leader, isr, replicas, epoch, is_new=False)


def fetch_req(fetch_offset: int, current: int, last_fetched: int = -1, now: int = 0) -> pd.DataFrame:
    """A follower (2) Fetch for t-0 sent to the leader (1)."""
    return F.conform(pd.DataFrame([{
        "broker": LEADER, "src": FOLLOWER, "topic": "t", "partition": 0, "fetch_offset": fetch_offset,
        "current_leader_epoch": current, "last_fetched_epoch": last_fetched, "log_start_offset": 0,
        "sent_ms": now, "deadline_ms": -1, "quota_bytes": LONG_MAX,
    }]), F.FETCH)


def epoch_req(requested: int, current: int, now: int = 0) -> pd.DataFrame:
    return F.conform(pd.DataFrame([{
        "broker": LEADER, "src": FOLLOWER, "topic": "t", "partition": 0, "leader_epoch": requested,
        "current_leader_epoch": current, "sent_ms": now,
    }]), F.EPOCH_REQUEST)


def entries(log: pd.DataFrame) -> list[tuple[int, int, str]]:
    return [(int(o), int(e), k) for o, e, k in
            log.sort_values("offset")[["offset", "leader_epoch", "key"]].itertuples(index=False)]


class Duo:
    """Leader 1 and follower 2 of t-0 (RF 2), logs held as RECORD frames, driven a round at a time.

    The replicas start with their logs and HWs and no role (leader -1, epoch -1), then receive
    LeaderAndIsr at `epoch` (the follower at `follower_epoch` when given) the way the engine applies
    it. replica.fetch.wait.max.ms is 0 so every fetch is answered in its own round.
    """

    def __init__(self, profile: str, leader_log, follower_log, *, epoch: int, follower_epoch: int | None = None,
                 leader_hw: int = 0, follower_hw: int = 0, stamped: tuple[bool, bool] = (True, True),
                 cfg: dict | None = None):
        self.profile = profile
        self.cfg = H.settings(profile, {"inter.broker.protocol.version": profile},
                              **{"replica_fetch_wait_max_ms": 0, **(cfg or {})})
        on = leader_epoch.enabled(profile)
        self.logs = {LEADER: log_frame(LEADER, leader_log, stamped[0] and on),
                     FOLLOWER: log_frame(FOLLOWER, follower_log, stamped[1] and on)}
        rows = []
        for b, hw in ((LEADER, leader_hw), (FOLLOWER, follower_hw)):
            lg = self.logs[b]
            start = int(lg["offset"].min()) if len(lg) else 0
            leo = int(lg["offset"].max()) + 1 if len(lg) else 0
            rows.append({"broker": b, "topic": "t", "partition": 0, "log_dir": "d0", "leo": leo, "hw": hw,
                         "log_start_offset": start, "recovery_point": leo})
        self.rep = leader_epoch.on_append(F.new_replicas(pd.DataFrame(rows)),
                                          F.concat(self.logs.values(), F.RECORD), profile)
        self.rem = F.empty(F.REMOTE)
        self.brk = new_broker_rows([LEADER, FOLLOWER])
        self.parked = F.empty(F.FETCH)
        self.now = 0
        self.rounds: list[SimpleNamespace] = []
        self.all_cuts: list[int] = []  # follower truncation offsets, in order
        self.become_cuts = self.leader_and_isr({LEADER: epoch, FOLLOWER: epoch if follower_epoch is None
                                                else follower_epoch})

    # -- state
    def row(self, broker: int) -> pd.Series:
        return self.rep[self.rep["broker"] == broker].iloc[0]

    @property
    def f(self) -> pd.Series:
        return self.row(FOLLOWER)

    @property
    def lead(self) -> pd.Series:
        return self.row(LEADER)

    @property
    def remote(self) -> pd.Series:
        return self.rem[self.rem["replica"] == FOLLOWER].iloc[0]

    def log(self, broker: int) -> list[tuple[int, int, str]]:
        return entries(self.logs[broker])

    def cache(self, broker: int) -> list[tuple[int, int]]:
        return leader_epoch.decode(self.row(broker)["epoch_cache"])

    def snapshot(self):
        cols = ["broker", "leader_epoch", "leo", "hw", "log_start_offset", "epoch_cache", "fetch_state",
                "last_fetched_epoch"]
        return (tuple(map(tuple, self.rep[cols].to_numpy().tolist())), tuple(self.rem["leo"].tolist()),
                tuple(self.log(FOLLOWER)))

    # -- steps
    def _cut(self, cuts: pd.DataFrame) -> None:
        for b, off in zip(cuts["broker"], cuts["offset"], strict=True):
            lg = self.logs[int(b)]
            self.logs[int(b)] = lg[lg["offset"] < int(off)].reset_index(drop=True)
            if int(b) == FOLLOWER:
                self.all_cuts.append(int(off))

    def leader_and_isr(self, epochs: dict[int, int], leader: int = LEADER) -> pd.DataFrame:
        """LeaderAndIsr as broker_round applies it: makeLeader/makeFollower, the new leader's epoch
        entry (KAFKA-7415) and the new followers' entry into the fetcher (become_follower)."""
        reqs = F.concat([lai(b, e, leader) for b, e in epochs.items()], F.LEADER_AND_ISR)
        before = self.rep
        self.rep, self.rem, self.brk, _ = become_leader_or_follower(self.rep, self.rem, self.brk, reqs, ["d0"],
                                                                    self.now)
        self.rep, cuts = on_leader_and_isr(before, self.rep, self.profile)
        self._cut(cuts)
        return cuts

    def truncate_leader(self, offset: int) -> None:
        """The leader's log loses its tail without an epoch change (the mock leaders of C-TR-05)."""
        pos = np.flatnonzero(self.rep["broker"].to_numpy() == LEADER)
        self.rep, cuts = truncate(self.rep, pos, np.array([offset]))
        self._cut(cuts)

    def round(self, advance: int = 100) -> SimpleNamespace:
        now = self.now
        self.rep, fetches, ereqs = fetch.fetch_requests(self.rep, now, {}, self.cfg)
        self.rep, self.rem, resp, out, self.parked = fetch.serve_fetch(
            self.rep, self.rem, self.logs[LEADER], fetches, self.parked, now, self.cfg)
        answers = ofle.answer(self.rep, ereqs, self.profile)
        self.rep, cuts_e = ofle.apply_answers(self.rep, answers, now, self.cfg)
        self.rep, appended, cuts_f, halts = fetch.apply_fetch_responses(self.rep, resp, out, now, self.cfg)
        cuts = pd.concat([cuts_e, cuts_f], ignore_index=True)
        self._cut(cuts)
        self.logs[FOLLOWER] = F.concat([self.logs[FOLLOWER], appended], F.RECORD)
        self.now += advance
        rnd = SimpleNamespace(fetches=fetches, ereqs=ereqs, answers=answers, resp=resp, records=out,
                              cuts=cuts["offset"].astype(int).tolist(), appended=appended, halts=halts)
        self.rounds.append(rnd)
        return rnd

    def settle(self, max_rounds: int = 30) -> int:
        """Run rounds until two in a row change nothing; returns the rounds run."""
        quiet = 0
        for n in range(1, max_rounds + 1):
            before = self.snapshot()
            self.round()
            quiet = quiet + 1 if self.snapshot() == before else 0
            if quiet == 2:
                return n
        raise AssertionError(f"no steady state after {max_rounds} rounds")


# ---------------------------------------------------------------------------------------------------------
# B-LEC-02 case d: the new leader's epoch entry before any write (KAFKA-7415, 2.1)
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("profile", ["2.1", "2.7", "2.8"])
def test_b_lec_02_d_epoch_start_recorded_on_become_leader(profile):
    d = Duo(profile, "0:e0:a 1:e0:b 2:e5:c 3:e5:d", "", epoch=8)
    assert d.lead["leo"] == 4 and d.lead["leader_epoch"] == 8
    assert d.cache(LEADER) == [(0, 0), (5, 2), (8, 4)]  # before any epoch-8 record
    assert d.lead["last_fetched_epoch"] == 8
    ans = ofle.answer(d.rep, epoch_req(8, 8), profile)
    assert ans["error"].isna().all()
    assert (int(ans["leader_epoch"].iat[0]), int(ans["end_offset"].iat[0])) == (8, 4)


def test_b_lec_02_d_before_2_1_the_entry_waits_for_the_first_write():
    d = Duo("2.0", "0:e0:a 1:e0:b 2:e5:c 3:e5:d", "", epoch=8)
    assert d.cache(LEADER) == [(0, 0), (5, 2)]  # no (8, 4): KAFKA-7415 came in 2.1
    ans = ofle.answer(d.rep, epoch_req(8, -1), "2.0")  # v1 carries no current epoch
    assert ans["error"].isna().all()
    assert (int(ans["leader_epoch"].iat[0]), int(ans["end_offset"].iat[0])) == (-1, -1)
    batch = F.conform(pd.DataFrame([{"broker": LEADER, "topic": "t", "partition": 0, "record_id": 9, "count": 1,
                                     "acks": 1, "value_bytes": 10, "key": "e", "sent_ms": 0, "deadline_ms": 30000}]),
                      F.PRODUCE)
    d.rep, recs, _, _ = produce.append_to_leader(d.rep, d.rem, batch, pd.Series({"t": 1}), 0, d.cfg)
    assert recs["leader_epoch"].tolist() == [8] and recs["offset"].tolist() == [4]
    assert d.cache(LEADER) == [(0, 0), (5, 2), (8, 4)]


# ---------------------------------------------------------------------------------------------------------
# C-TR-01: no epoch information -> truncate to the HW
# ---------------------------------------------------------------------------------------------------------

C_TR_01 = "0:e0:a 1:e2:b 2:e4:c"


@pytest.mark.parametrize("profile, stamped", [
    ("0.8", (True, True)),  # pre-0.11: makeFollowers truncates to the HW (records carry no epoch)
    ("0.10", (True, True)),
    ("2.1", (True, False)),  # the follower's records predate message format v2: empty cache
    ("2.8", (True, False)),
])
def test_c_tr_01_truncate_to_hw_on_become_follower(profile, stamped):
    d = Duo(profile, C_TR_01, C_TR_01, epoch=5, leader_hw=3, follower_hw=2, stamped=stamped)
    assert d.cache(FOLLOWER) == []
    assert d.become_cuts["offset"].tolist() == [2]  # exactly the HW, at once
    f = d.f
    assert (f["leo"], f["hw"], f["fetch_state"]) == (2, 2, F.FETCHING)
    assert [o for o, _, _ in d.log(FOLLOWER)] == [0, 1]  # c is gone although the leader holds it
    r = d.round()
    assert r.ereqs.empty and r.fetches["fetch_offset"].tolist() == [2]
    d.settle()
    assert [(o, v) for o, _, v in d.log(FOLLOWER)] == [(o, v) for o, _, v in d.log(LEADER)]


@pytest.mark.parametrize("profile", ["0.11", "2.0"])
def test_c_tr_01_leader_without_epoch_information(profile):
    """testTruncateToHighWatermarkIfLeaderEpochInfoNotAvailable: the leader's answer is UNDEFINED
    (its records predate v2 and before 2.1 it records no epoch on becoming leader) -> the HW."""
    d = Duo(profile, C_TR_01, C_TR_01, epoch=5, leader_hw=3, follower_hw=2, stamped=(False, True))
    assert d.cache(LEADER) == [] and d.f["fetch_state"] == F.TRUNCATING
    r = d.round()
    assert r.ereqs["leader_epoch"].tolist() == [4]
    assert r.answers["end_offset"].tolist() == [-1] and r.answers["error"].isna().all()
    assert r.cuts == [2]
    assert (d.f["leo"], d.f["hw"], d.f["fetch_state"]) == (2, 2, F.FETCHING)
    assert d.round().fetches["fetch_offset"].tolist() == [2]


# ---------------------------------------------------------------------------------------------------------
# C-TR-02: iterative KIP-279 truncation
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("profile", ["2.0", "2.1", "2.8"])
def test_c_tr_02_case_a_iterative_truncation(profile):
    """OffsetsForLeaderEpoch rounds (2.0, 2.1) or DivergingEpoch fetches (2.8): 2, 1, 0, then a
    full copy. Golden's rounds: ask e4 -> (e3, 2); e2 -> (e1, 1); e0 -> (e0, 0)."""
    d = Duo(profile, "0:e1:a 1:e3:b 2:e5:c", "0:e0:a 1:e2:b 2:e4:c", epoch=5, leader_hw=2, follower_hw=0)
    d.settle()
    assert d.all_cuts == [2, 1, 0]
    asked = [(q, (e, o)) for r in d.rounds
             for q, e, o in zip(r.ereqs["leader_epoch"], r.answers["leader_epoch"], r.answers["end_offset"],
                                strict=True)]
    div = [(lf, (e, o)) for r in d.rounds
           for lf, e, o in zip(r.fetches["last_fetched_epoch"], r.resp["diverging_epoch"],
                               r.resp["diverging_end_offset"], strict=True) if o >= 0]
    expected = [(4, (3, 2)), (2, (1, 1)), (0, (0, 0))]
    if profile == "2.8":
        assert (asked, div) == ([], expected)
    else:
        assert (asked, div) == (expected, [])
    assert d.log(FOLLOWER) == d.log(LEADER) == [(0, 1, "a"), (1, 3, "b"), (2, 5, "c")]
    copy = next(i for i, r in enumerate(d.rounds) if len(r.appended))
    assert d.rounds[copy].appended["offset"].tolist() == [0, 1, 2]  # one fetch copies all three
    assert d.rounds[copy].resp["hw"].tolist() == [2]  # the follower's HW becomes min(2, LEO 3) = 2
    f = d.f
    assert (f["log_start_offset"], f["leo"], f["last_fetched_epoch"]) == (0, 3, 5)
    # The golden's mock leader keeps HW 2; a real one moves to 3 when the follower fetches at 3.
    assert (d.lead["hw"], f["hw"]) == (3, 3)
    assert d.cache(FOLLOWER) == d.cache(LEADER) == [(1, 0), (3, 1), (5, 2)]


def _truncating_followers(caches: list[str], leo: int, hw: int, profile: str = "2.1"):
    """Follower 2's partitions t-0.. in the Truncating state with the given caches, requests sent."""
    n = len(caches)
    rep = F.new_replicas(pd.DataFrame({
        "broker": FOLLOWER, "topic": "t", "partition": range(n), "log_dir": "d0", "leader": LEADER,
        "leader_epoch": 6, "leo": leo, "hw": hw, "epoch_cache": caches,
        "last_fetched_epoch": leader_epoch.latest_epochs(caches), "fetch_state": F.TRUNCATING}))
    cfg = H.settings(profile)
    rep, fetches, ereqs = fetch.fetch_requests(rep, 0, {}, cfg)
    assert fetches.empty
    return rep, ereqs, cfg


def _answers(ereqs: pd.DataFrame, answers: list[tuple[int, int]]) -> pd.DataFrame:
    return F.conform(pd.DataFrame({
        "broker": ereqs["src"].to_numpy(), "src": ereqs["broker"].to_numpy(), "topic": ereqs["topic"].to_numpy(),
        "partition": ereqs["partition"].to_numpy(), "leader_epoch": [a[0] for a in answers],
        "end_offset": [a[1] for a in answers], "error": None, "sent_ms": ereqs["sent_ms"].to_numpy()}),
        F.EPOCH_RESPONSE)


def test_c_tr_02_case_b_two_rounds_through_apply_answers():
    """Own endOffsetForEpoch(4) = endOffsetForEpoch(3) = (e3, 120): cache (3,100),(5,120), LEO 200."""
    rep, ereqs, cfg = _truncating_followers(["3:100,5:120", "3:100,5:120"], 200, 198)
    assert ereqs["leader_epoch"].tolist() == [5, 5] and ereqs["current_leader_epoch"].tolist() == [6, 6]
    cuts = []
    rep, c = ofle.apply_answers(rep, _answers(ereqs, [(4, 155), (4, 143)]), 0, cfg)
    cuts += c["offset"].tolist()
    assert rep["leo"].tolist() == [120, 120] and (rep["fetch_state"] == F.TRUNCATING).all()
    rep, fetches, ereqs = fetch.fetch_requests(rep, 100, {}, cfg)
    assert fetches.empty and ereqs["leader_epoch"].tolist() == [3, 3]  # re-ask for e3
    rep, c = ofle.apply_answers(rep, _answers(ereqs, [(3, 101), (3, 102)]), 100, cfg)
    cuts += c["offset"].tolist()
    assert rep["leo"].tolist() == [101, 102] and (rep["fetch_state"] == F.FETCHING).all()
    assert cuts == [120, 120, 101, 102]  # exactly 4 truncations
    _, fetches, ereqs = fetch.fetch_requests(rep, 200, {}, cfg)
    assert ereqs.empty and fetches["fetch_offset"].tolist() == [101, 102]  # round 3: no epoch requests


def test_c_tr_02_case_c_no_epoch_at_or_below_the_answer():
    """The golden's mock says endOffsetForEpoch(4) is none; a real cache whose first entry is (5, 200)
    answers (4, 200) (endOffsetFor's "below the first epoch" rule), which gives the same results."""
    rep, ereqs, cfg = _truncating_followers(["5:200", "5:200"], 200, 0)
    rep, c = ofle.apply_answers(rep, _answers(ereqs, [(4, 156), (4, 202)]), 0, cfg)
    assert c["offset"].tolist() == [156]  # p1's truncation to 200 = LEO removes nothing
    assert rep["leo"].tolist() == [156, 200] and (rep["fetch_state"] == F.FETCHING).all()


# ---------------------------------------------------------------------------------------------------------
# C-TR-03: truncate on fetch (DivergingEpoch, 2.8)
# ---------------------------------------------------------------------------------------------------------

def test_c_tr_03_case_a_diverging_epochs():
    d = Duo("2.8", "0:e0:a 1:e2:b 2:e5:d", "0:e0:a 1:e2:b 2:e4:c", epoch=5, leader_hw=2)
    assert d.f["fetch_state"] == F.FETCHING and d.f["last_fetched_epoch"] == 4
    r = d.round()
    assert r.fetches[["fetch_offset", "last_fetched_epoch", "current_leader_epoch"]].values.tolist() == [[3, 4, 5]]
    assert (r.resp["diverging_epoch"].tolist(), r.resp["diverging_end_offset"].tolist()) == ([2], [2])
    assert r.records.empty and r.cuts == [2]
    assert (d.f["leo"], d.f["last_fetched_epoch"]) == (2, 2)
    d.settle()
    assert d.log(FOLLOWER) == d.log(LEADER)
    assert d.f["last_fetched_epoch"] == 5 and d.all_cuts == [2]


def test_c_tr_03_case_b_truncate_before_processing():
    """KAFKA-14704: the divergent response's HW (4) is not applied. Kafka checks lastFetchedEpoch
    before the read's range check, so fetch offset 6 > leader LEO 5 still yields the DivergingEpoch."""
    d = Duo("2.8", "0:e0:a 1:e0:b 2:e2:c 3:e5:g 4:e5:h", "0:e0:a 1:e0:b 2:e2:c 3:e4:d 4:e4:e 5:e4:f",
            epoch=5, leader_hw=4, follower_hw=1)
    remote_before = d.remote.copy()
    r = d.round()
    assert r.fetches[["fetch_offset", "last_fetched_epoch"]].values.tolist() == [[6, 4]]
    assert r.resp["error"].isna().all() and r.resp["hw"].tolist() == [4]
    assert (r.resp["diverging_epoch"].tolist(), r.resp["diverging_end_offset"].tolist()) == ([2], [3])
    assert r.cuts == [3] and r.records.empty and r.appended.empty  # 1 truncation, no data processed
    assert (d.f["leo"], d.f["hw"]) == (3, 1)
    assert d.remote.equals(remote_before)  # KAFKA-13141
    r = d.round()  # fetch at 3, lastFetchedEpoch 2: no divergence, g and h arrive with HW 4
    assert r.resp["diverging_end_offset"].tolist() == [-1] and r.appended["offset"].tolist() == [3, 4]
    assert (d.f["leo"], d.f["hw"], d.f["last_fetched_epoch"]) == (5, 4, 5)
    d.settle()
    assert d.log(FOLLOWER) == d.log(LEADER)
    assert d.all_cuts == [3]  # still one truncation in total
    # The golden's mock leader keeps HW 4; a real one moves to 5 when the follower fetches at 5.
    assert (d.f["leo"], d.f["hw"], d.f["last_fetched_epoch"], d.lead["hw"]) == (5, 5, 5, 5)


# ---------------------------------------------------------------------------------------------------------
# C-TR-04: the leader's lastFetchedEpoch check (Partition.readRecords), KAFKA-13141
# ---------------------------------------------------------------------------------------------------------

C_TR_04_LOG = ([(o, 0, f"r{o}") for o in range(0, 2)] + [(o, 3, f"r{o}") for o in range(2, 8)]
               + [(o, 4, f"r{o}") for o in range(8, 13)] + [(13, 7, "r13")] + [(o, 9, f"r{o}") for o in range(14, 17)])


def c_tr_04_leader(log_start: int = 0) -> Duo:
    d = Duo("2.8", C_TR_04_LOG, "", epoch=10)
    assert d.cache(LEADER) == [(0, 0), (3, 2), (4, 8), (7, 13), (9, 14), (10, 17)]
    if log_start:  # the log start moves (retention): truncateFromStart
        i = d.rep.index[d.rep["broker"] == LEADER][0]
        d.rep.loc[i, "log_start_offset"] = log_start
        d.rep.loc[i, "epoch_cache"] = leader_epoch.encode(
            leader_epoch.truncate_from_start(d.cache(LEADER), log_start))
        d.logs[LEADER] = d.logs[LEADER][d.logs[LEADER]["offset"] >= log_start].reset_index(drop=True)
    return d


def _serve_one(d: Duo, last_fetched: int, fetch_offset: int):
    remote_before = d.remote.copy()
    _, rem, resp, recs, parked = fetch.serve_fetch(d.rep, d.rem, d.logs[LEADER],
                                                   fetch_req(fetch_offset, 10, last_fetched), F.empty(F.FETCH), 0,
                                                   d.cfg)
    assert len(resp) == 1 and parked.empty
    d.rem = rem
    return resp.iloc[0], recs, remote_before


@pytest.mark.parametrize("log_start, last_fetched, fetch_offset, expected", [
    (0, 2, 5, (0, 2)), (0, 0, 4, (0, 2)), (0, 6, 6, (4, 13)), (0, 5, 9, (4, 13)), (0, 10, 18, (10, 17)),
    (0, 0, 2, None), (0, 7, 14, None), (0, 9, 17, None), (0, 10, 17, None),
    (0, 11, 5, errors.OFFSET_OUT_OF_RANGE),
    (5, 2, 8, (2, 5)), (5, 0, 5, None), (5, 3, 5, None), (5, 0, 0, errors.OFFSET_OUT_OF_RANGE),
    (10, 5, 6, errors.OFFSET_OUT_OF_RANGE), (10, 3, 6, errors.OFFSET_OUT_OF_RANGE),
])
def test_c_tr_04_last_fetched_offset_validation(log_start, last_fetched, fetch_offset, expected):
    d = c_tr_04_leader(log_start)
    resp, recs, remote_before = _serve_one(d, last_fetched, fetch_offset)
    if isinstance(expected, tuple):  # diverging: no records, no follower state update (KAFKA-13141)
        assert pd.isna(resp["error"])
        assert (resp["diverging_epoch"], resp["diverging_end_offset"]) == expected
        assert recs.empty
        assert d.remote.equals(remote_before)
    elif expected is None:
        assert pd.isna(resp["error"]) and resp["diverging_end_offset"] == -1
        assert recs["offset"].tolist() == list(range(fetch_offset, 17))
        assert d.remote["leo"] == fetch_offset  # the fetch moved the follower's state
    else:
        assert resp["error"] == expected and resp["diverging_end_offset"] == -1
        assert recs.empty and d.remote.equals(remote_before)


def test_c_tr_04_no_last_fetched_epoch_skips_the_check():
    d = c_tr_04_leader()
    resp, recs, _ = _serve_one(d, -1, 5)
    assert pd.isna(resp["error"]) and resp["diverging_end_offset"] == -1 and recs["offset"].min() == 5
    resp, _, _ = _serve_one(d, -1, 18)  # beyond the LEO without lastFetchedEpoch: the read's range check
    assert resp["error"] == errors.OFFSET_OUT_OF_RANGE


# ---------------------------------------------------------------------------------------------------------
# C-TR-05: OFFSET_OUT_OF_RANGE handling
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("profile", ["2.1", "2.8"])
def test_c_tr_05_high_leader_log_wiped(profile):
    d = Duo(profile, C_TR_01, C_TR_01, epoch=4, leader_hw=2)
    d.settle()
    assert (d.f["leo"], d.f["fetch_state"]) == (3, F.FETCHING) and d.all_cuts == []
    d.truncate_leader(0)  # leader log cleared: LEO 0, start 0, HW 0, same epoch
    assert (d.lead["leo"], d.lead["hw"], d.lead["log_start_offset"]) == (0, 0, 0)
    r = d.round()
    assert r.resp["error"].tolist() == [errors.OFFSET_OUT_OF_RANGE] and r.halts.empty
    assert r.cuts == [0]
    f = d.f
    assert (f["leo"], f["log_start_offset"], f["hw"]) == (0, 0, 0) and d.log(FOLLOWER) == []
    assert d.cache(FOLLOWER) == [] and f["last_fetched_epoch"] == -1


@pytest.mark.parametrize("profile", ["2.1", "2.8"])
def test_c_tr_05_low_follower_behind_leader_log_start(profile):
    """The follower's LEO (1) is below the leader's log start (2): truncateFullyAndStartAt(2). Kafka's
    test mock starts the follower at fetch offset 3 over a one-record log; here it fetches from
    its LEO, and the leader's record is at e4 (the Kafka test uses e0)."""
    d = Duo(profile, "2:e4:c", "0:e0:a", epoch=4, leader_hw=2)
    assert d.lead["log_start_offset"] == 2
    for _ in range(4):
        r = d.round()
        if r.cuts:
            break
    assert r.resp["error"].tolist() == [errors.OFFSET_OUT_OF_RANGE] and r.cuts == [0]
    f = d.f
    assert (f["log_start_offset"], f["leo"], f["hw"], f["fetch_state"]) == (2, 2, 2, F.FETCHING)
    assert d.log(FOLLOWER) == [] and d.cache(FOLLOWER) == []
    d.settle()
    assert d.log(FOLLOWER) == d.log(LEADER) == [(2, 4, "c")]
    f, lead = d.f, d.lead
    # Same log start, LEO and HW as the leader (whose HW reaches 3 once the follower fetches at 3).
    assert (f["log_start_offset"], f["leo"], f["hw"]) == (lead["log_start_offset"], lead["leo"], lead["hw"]) == (2, 3, 3)


def _behind_leader(profile: str, unclean: bool) -> tuple[Duo, SimpleNamespace]:
    """Follower fetching at LEO 3; the leader's log drops to LEO 1 without an epoch change."""
    d = Duo(profile, C_TR_01, C_TR_01, epoch=4, leader_hw=3, follower_hw=3,
            cfg={"topic_unclean": {"t": unclean}})
    d.settle()
    assert (d.f["leo"], d.f["fetch_state"]) == (3, F.FETCHING)
    d.truncate_leader(1)
    return d, d.round()


@pytest.mark.parametrize("profile", ["0.8", "0.10", "0.11", "2.0"])
def test_c_tr_05_pre_2_1_halts_when_unclean_election_disabled(profile):
    d, r = _behind_leader(profile, unclean=False)
    assert r.resp["error"].tolist() == [errors.OFFSET_OUT_OF_RANGE]
    assert r.halts[["broker", "topic", "partition"]].values.tolist() == [[FOLLOWER, "t", 0]]
    msg = r.halts["message"].iat[0]
    assert ("Exiting because log truncation is not allowed for partition t-0, current leader's latest offset 1 "
            "is less than replica 2's latest offset 3") in msg
    assert r.cuts == [] and d.f["leo"] == 3 and len(d.log(FOLLOWER)) == 3  # nothing truncated


@pytest.mark.parametrize("profile, unclean", [
    ("0.10", True), ("2.0", True), ("2.1", False), ("2.1", True), ("2.7", False), ("2.8", False),
])
def test_c_tr_05_follower_ahead_truncates_to_leader_leo(profile, unclean):
    d, r = _behind_leader(profile, unclean)
    assert r.halts.empty and r.cuts == [1]
    assert (d.f["leo"], d.f["hw"]) == (1, 1) and d.log(FOLLOWER) == d.log(LEADER)


# ---------------------------------------------------------------------------------------------------------
# D-08: KIP-320 epoch fencing (2.1+)
# ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("profile", ["2.1", "2.8"])
@pytest.mark.parametrize("current, expected", [
    (-1, None), (5, None), (4, errors.FENCED_LEADER_EPOCH), (6, errors.UNKNOWN_LEADER_EPOCH),
])
def test_d08_leader_validates_current_leader_epoch(profile, current, expected):
    d = Duo(profile, "0:e5:a 1:e5:b", "", epoch=5, leader_hw=2)
    _, _, resp, recs, _ = fetch.serve_fetch(d.rep, d.rem, d.logs[LEADER], fetch_req(0, current),
                                            F.empty(F.FETCH), 0, d.cfg)
    assert resp["error"].tolist() == [expected]
    assert len(recs) == (2 if expected is None else 0)
    ans = ofle.answer(d.rep, epoch_req(5, current), profile)
    assert ans["error"].tolist() == [expected]
    assert ans["end_offset"].tolist() == [2 if expected is None else -1]


@pytest.mark.parametrize("profile", ["2.1", "2.8"])
def test_d08_fenced_fetch_fails_the_partition_until_leader_and_isr(profile):
    d = Duo(profile, "0:e1:a 1:e1:b", "", epoch=1, follower_epoch=0, leader_hw=2)
    r = d.round()
    assert r.fetches["current_leader_epoch"].tolist() == [0]
    assert r.resp["error"].tolist() == [errors.FENCED_LEADER_EPOCH]
    assert (d.f["leo"], d.f["hw"], d.f["backoff_until_ms"]) == (0, 0, FOREVER)
    d.now = 10**9
    for _ in range(3):  # failed: no request, however long it waits
        r = d.round()
        assert r.fetches.empty and r.ereqs.empty
    d.leader_and_isr({FOLLOWER: 1})
    assert d.f["backoff_until_ms"] == -1
    d.settle()
    assert d.log(FOLLOWER) == d.log(LEADER) and d.f["leo"] == 2
    # Caught up at epoch 1; the leader's epoch is bumped: the next fetch is fenced again.
    d.leader_and_isr({LEADER: 2})
    r = d.round()
    assert r.resp["error"].tolist() == [errors.FENCED_LEADER_EPOCH]
    assert d.f["backoff_until_ms"] == FOREVER and d.f["leo"] == 2


@pytest.mark.parametrize("profile", ["2.1", "2.8"])
def test_d08_unknown_leader_epoch_backs_off_and_retries(profile):
    """Follower at epoch 1, leader still at epoch 0. Under 2.1 the follower (non-empty cache) is
    Truncating, so the OffsetsForLeaderEpoch request is refused (testUnknownLeaderEpochInTruncation);
    under 2.8 it fetches at once and the Fetch is refused (testUnknownLeaderEpochWhileFetching)."""
    d = Duo(profile, "0:e0:a 1:e0:b", "0:e0:a", epoch=0, follower_epoch=1, leader_hw=1)
    truncating = profile == "2.1"
    r = d.round()
    got = r.answers if truncating else r.resp
    assert got["error"].tolist() == [errors.UNKNOWN_LEADER_EPOCH]
    state = F.TRUNCATING if truncating else F.FETCHING
    backoff = 0 + d.cfg.replica_fetch_backoff_ms
    assert (d.f["leo"], d.f["fetch_state"], d.f["backoff_until_ms"]) == (1, state, backoff)
    d.leader_and_isr({LEADER: 1})  # the leader reaches epoch 1
    while d.now < backoff:
        r = d.round()
        assert r.fetches.empty and r.ereqs.empty  # backing off
    d.settle()
    assert d.log(FOLLOWER) == d.log(LEADER) and (d.f["leo"], d.f["fetch_state"]) == (2, F.FETCHING)
    assert d.all_cuts == []


def test_d08_before_2_1_requests_carry_no_current_epoch():
    """2.0: no current_leader_epoch on Fetch or OffsetsForLeaderEpoch (-1), so a follower one epoch
    behind the leader is served."""
    d = Duo("2.0", "0:e4:a 1:e5:b", "0:e4:a", epoch=5, follower_epoch=4, leader_hw=1)
    r = d.round()
    assert r.ereqs["current_leader_epoch"].tolist() == [-1] and r.answers["error"].isna().all()
    r = d.round()
    assert r.fetches["current_leader_epoch"].tolist() == [-1] and r.resp["error"].isna().all()
    assert d.log(FOLLOWER) == d.log(LEADER)
