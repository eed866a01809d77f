"""protocol/idle.py on plain frames: quiescence, and that the idle jump lands where running the rounds does.

`_Cluster` runs the idle part of a round (fetch responses, serving and parking fetches, ISR checks, new
fetches, the HW checkpoint timer) with the protocol functions the engine's round calls, for brokers
1 (leader) and 2, 3 (followers) of two partitions; no Spark.
"""

from __future__ import annotations

from dataclasses import replace

import harness as H
import numpy as np
import pandas as pd
import pytest

from sparkkafka.protocol import fetch, idle, isr
from sparkkafka.protocol import frames as F
from sparkkafka.protocol.config import RoundSettings
from sparkkafka.protocol.leader_and_isr import become_leader_or_follower, new_broker_rows

R = 100


def _cfg(**fields) -> RoundSettings:
    return H.settings("2.8", {"replica.lag.time.max.ms": 3000, "replica.high.watermark.checkpoint.interval.ms": 1300},
                      round_ms=R, **fields)


class _Cluster:
    """Brokers 1-3 after a LeaderAndIsr: broker 1 leads t-0 (ISR 1,2,3) and t-1 (ISR 1,2), all logs at offset 5."""

    def __init__(self, cfg: RoundSettings) -> None:
        self.cfg = cfg
        lai = F.conform(pd.DataFrame([(b, "t", p, 1, 0, 1, isr_, reps, True, "d0", 0)
                            for p, isr_, reps in ((0, "1,2,3", "1,2,3"), (1, "1,2", "1,2")) for b in F.ids(reps)],
                           columns=[c for c in F.LEADER_AND_ISR if c not in F.OPTIONAL]), F.LEADER_AND_ISR)
        reps, rem, brokers, _ = become_leader_or_follower(F.empty(F.REPLICA), F.empty(F.REMOTE),
                                                          new_broker_rows([1, 2, 3]), lai, ["d0"], 0)
        reps[["leo", "hw", "recovery_point"]] = 5
        reps["last_flush_ms"] = 0
        self.replicas, self.remotes, self.brokers = reps, rem, brokers
        self.parked, self.fetches, self.responses = F.empty(F.FETCH), F.empty(F.FETCH), F.empty(F.FETCH_RESPONSE)
        self.round = 1

    def step(self, unreachable: dict | None = None) -> None:
        now, cfg, unreachable = self.round * R, self.cfg, unreachable or {}
        keep = lambda m, a, b: m[~np.array([d in unreachable.get(s, ()) for s, d in zip(m[a], m[b])], bool)]  # noqa
        r, _, _, _ = fetch.apply_fetch_responses(self.replicas, keep(self.responses, "src", "broker"),
                                                 F.empty(F.RECORD), now, cfg)
        r, rem, self.responses, _, self.parked = fetch.serve_fetch(
            r, self.remotes, F.empty(F.RECORD), keep(self.fetches, "src", "broker"), self.parked, now, cfg)
        r, rem, self.expand = isr.maybe_expand_isr(r, rem, now, cfg.rules)
        r, self.shrink = isr.maybe_shrink_isr(r, rem, now, cfg, cfg.rules)
        self.replicas, self.fetches, _ = fetch.fetch_requests(r, now, unreachable, cfg)
        self.remotes = rem
        due = self.brokers["hw_checkpoint_ms"].to_numpy()
        due = (due < 0) | (due + cfg.replica_high_watermark_checkpoint_interval_ms <= now)
        self.brokers.loc[due, "hw_checkpoint_ms"] = now
        self.now, self.round = now, self.round + 1

    def report(self, unreachable: dict | None = None, hosts=((1,), (2, 3)), **extra) -> dict:
        """The summed reports of tasks hosting `hosts` (each task its brokers' rows and the messages they sent)."""
        totals: dict[str, int] = {}
        frames = {"pending": F.empty(F.PENDING), "futures": F.empty(F.FUTURE), "records": F.empty(F.RECORD), **extra}
        for task in hosts:
            mine = lambda f, col="broker", task=task: f[f[col].isin(task)]  # noqa: E731
            got = idle.quiescence(mine(self.replicas), mine(self.remotes), mine(self.parked), frames["pending"],
                                  frames["futures"], mine(self.brokers), mine(self.fetches, "src"),
                                  mine(self.responses, "src"), frames["records"],
                                  len(self.expand) + len(self.shrink), self.now, self.cfg, unreachable or {})
            for k, v in got.items():
                totals[k] = totals.get(k, 0) + v
        return totals

    def state(self) -> dict[str, pd.DataFrame]:
        return {"replicas": self.replicas, "remotes": self.remotes, "parked": self.parked, "fetches": self.fetches,
                "responses": self.responses, "brokers": self.brokers}


def _settled(cfg: RoundSettings, rounds: int = 12) -> _Cluster:
    c = _Cluster(cfg)
    for _ in range(rounds):
        c.step()
    return c


def _same(a: dict, b: dict) -> None:
    for k in a:
        pd.testing.assert_frame_equal(a[k].reset_index(drop=True), b[k].reset_index(drop=True), check_dtype=False,
                                      obj=k)


def test_cycle_and_timer_arithmetic():
    assert idle.fetch_cycle_rounds(500, 100) == 7
    assert idle.fetch_cycle_rounds(450, 100) == 7
    assert idle.fetch_cycle_rounds(0, 100) == 2
    assert idle.jump_rounds(20, 7) == 14 and idle.jump_rounds(6, 7) == 0 and idle.jump_rounds(-3, 7) == 0
    # fires every ceil(5000/100) rounds from 1000: at 6000 and 11000 by 12000; never-run stays -1
    assert idle.advance_timer(np.array([1000, -1]), 5000, 100, 12000).tolist() == [11000, -1]
    assert idle.advance_timer(np.array([1000]), 150, 100, 1500).tolist() == [1400]  # every 2 rounds
    assert idle.advance_timer(np.array([1000]), 5000, 100, 5900).tolist() == [1000]


@pytest.mark.parametrize(("wait", "phases", "span"), [(500, 7, 7), (250, 1, 32), (0, 2, 16)])
def test_every_phase_of_an_idle_cluster_is_quiescent_and_the_jump_equals_running(wait, phases, span):
    """From each of the first `phases` points of the fetch cycle (all 7 with the default wait: the request
    on its way, parked, the answer on its way), a jump of the whole cycles in `span` rounds gives the frames
    the rounds give; 32 and 16 rounds take in HW-checkpoint (13 rounds) and isr-check (15) intervals."""
    cfg = _cfg(replica_fetch_wait_max_ms=wait)
    cycle = idle.fetch_cycle_rounds(cfg.replica_fetch_wait_max_ms, R)
    c = _settled(cfg)
    for _ in range(phases):
        c.step()
        assert idle.cluster_idle(c.report()), c.report()
        assert idle.cluster_idle(c.report(hosts=((1, 2, 3),)))
        start, at = c.state(), c.now
        d = idle.jump_rounds(span, cycle)
        jumped = dict(zip(start, idle.shift_time(*start.values(), d, at, cfg, {}), strict=True))
        run = _Cluster(cfg)
        run.__dict__.update({k: v.copy() for k, v in c.__dict__.items() if isinstance(v, pd.DataFrame)})
        run.round, run.now = c.round, c.now
        for _ in range(d):
            run.step()
        _same(jumped, run.state())
        if span > 13:
            assert jumped["brokers"]["hw_checkpoint_ms"].gt(start["brokers"]["hw_checkpoint_ms"]).all()


def test_what_is_not_idle():
    cfg = _cfg()
    c = _settled(cfg)
    assert idle.cluster_idle(c.report())
    # a follower's request lost on the way (its leader never sees it)
    while not len(c.fetches):
        c.step()
    assert idle.cluster_idle(c.report())
    assert not idle.cluster_idle(c.report(unreachable={2: frozenset({1}), 3: frozenset({1})}))
    # broker 3 crashed: the leader still counts it in the ISR of t-0 until it shrinks
    assert not idle.cluster_idle(c.report(unreachable={1: frozenset({3}), 2: frozenset({3})}, hosts=((1,), (2,))))
    # data still to move: a HW below the LEO, a pending acks=all batch, records in flight
    c3 = _settled(cfg)
    c3.replicas.loc[c3.replicas["broker"] == 1, "hw"] = 4
    assert not idle.cluster_idle(c3.report())
    pending = F.conform(pd.DataFrame([dict(broker=1, topic="t", partition=0, record_id=0, count=1, acks=-1,
                                           value_bytes=1, key=None, sent_ms=0, deadline_ms=30000, base_offset=5,
                                           required_offset=6)]), F.PENDING)
    assert not idle.cluster_idle(c.report(pending=pending))
    # a dirty log with a flush.ms timer running
    c4 = _settled(_cfg())
    c4.cfg = replace(c4.cfg, topic_flush={"t": (10**9, 1000)})
    c4.replicas["recovery_point"] = 4
    assert not idle.cluster_idle(c4.report())
    assert not idle.cluster_idle({})  # nobody reported


def test_a_crashed_follower_is_not_moved_by_the_jump():
    """Broker 3 is down. While the leader counts it in t-0's ISR nothing is idle (the controller or the
    lag will take it out); once it is out, the jump leaves the leader's stale view of it as it is."""
    cfg = _cfg()
    cut = {1: frozenset({3}), 2: frozenset({3})}
    c = _settled(cfg)
    c.replicas = c.replicas[c.replicas["broker"] != 3]
    c.fetches = c.fetches[c.fetches["src"] != 3]
    for _ in range(8):
        c.step(cut)
    assert not idle.cluster_idle(c.report(cut, hosts=((1,), (2,))))
    c.replicas.loc[(c.replicas["broker"] == 1) & (c.replicas["partition"] == 0), "isr"] = "1,2"  # the controller's
    c.remotes.loc[c.remotes["replica"] == 3, "in_isr"] = False
    c.step(cut)
    assert idle.cluster_idle(c.report(cut, hosts=((1,), (2,))))
    before = c.remotes[c.remotes["replica"] == 3].copy()
    out = idle.shift_time(*c.state().values(), 70, c.now, cfg, cut)
    pd.testing.assert_frame_equal(out[1][out[1]["replica"] == 3], before)
    assert (out[1].loc[out[1]["replica"] == 2, "last_caught_up_ms"] > c.now).all()
