"""The driver's plan of a resident window (driver/idle_jumps.py plan_window): which rounds may run without
it, and the controller's requests it hands the tasks for rounds it ran the controller ahead on a copy. No
Spark: the plan is the driver's, over its controller."""

from __future__ import annotations

import copy
import json

import pandas as pd
import pytest

from sparkkafka import Cluster
from sparkkafka.controller.control_plane import ControlPlane
from sparkkafka.scenario import parse_scenario


def _loop(tmp_path, timeline):
    sc = parse_scenario({
        "seed": 2, "cluster": {"brokers": 3, "log_dirs": ["d0"], "config": {"zookeeper.session.timeout.ms": 600},
                               "emulator": {"engine": "local"}},
        "topics": [{"name": "t", "partitions": 3, "replication_factor": 3}],
        "timeline": timeline, "run": {"until_ms": 20_000}}, name="plan")
    return Cluster.from_scenario(sc, spark=None, out=str(tmp_path / "run")).loop


def _to_round(loop, r: int) -> None:
    """The driver's part of the rounds from the current one to `r` (no brokers run: the controller hears nothing
    from them)."""
    while loop.round < r:
        loop.prepare(loop.round * loop.round_ms)
        loop.outbox_wire()
        loop.round += 1
    loop.prepare(r * loop.round_ms)


def _plain(cp: ControlPlane) -> str:
    return json.dumps(cp.to_dict(), sort_keys=True, default=str)


def _ticked(loop, first: int, ticks: dict[int, list]) -> ControlPlane:
    """A copy of the run's controller ticked at the plan's rounds, as the driver would between one-round
    windows; each tick's requests are the plan's for that round."""
    ref = copy.deepcopy(loop.control)
    for k, planned in sorted(ticks.items()):
        t = (first + k) * loop.round_ms
        ref.tick(t, frozenset())
        got = ref.take_messages(t, frozenset(), loop.crashed)
        assert [(kind, src) for kind, src, _ in got] == [(kind, src) for kind, src, _ in planned]
        for (_, _, a), (_, _, b) in zip(got, planned, strict=True):
            pd.testing.assert_frame_equal(a, b)
    return ref


def test_a_timer_that_finds_nothing_to_do_runs_ahead_in_the_window(tmp_path):
    """The auto leader-rebalance check fires 5 s after the controller's election (4.9 s: it was elected
    before round 0). On a balanced cluster it does nothing, so the window goes on past it to the limit;
    the run's controller, ticked through the same rounds after the window, is the copy."""
    loop = _loop(tmp_path, [])
    _to_round(loop, 0)
    assert loop.control.next_action_ms(0) == 4900  # what ended the window at round 49 before
    plan = loop.plan_window(0, 100)
    assert (plan.rounds, plan.ticks, plan.due) == (100, {49: []}, 304_900)
    want = _ticked(loop, 0, plan.ticks)
    assert _plain(loop.control) != _plain(want)
    loop.catch_up(plan.ticks, 0, 100)
    assert _plain(loop.control) == _plain(want)
    assert loop.control.next_action_ms(9900) == 304_900


def test_requests_due_next_round_join_the_window_and_zookeeper_writes_end_it(tmp_path):
    """Broker 1 crashes at 300 ms; its session expires 600 ms later. That tick writes ZooKeeper (the
    registration goes, leaders move), which only the driver may do between rounds: the window from the
    crash ends before it. The expiry's round queues LeaderAndIsr and UpdateMetadata for the next round:
    without running ahead that window would be one round; the plan ticks a copy of the controller there
    (it only delivers), hands those requests to the window's second round and runs on to the restart
    event. A report that ends the window after its first round leaves the controller as it was."""
    loop = _loop(tmp_path, [{"at": 300, "crash": 1}, {"at": 2500, "restart": 1}])
    _to_round(loop, 3)
    assert loop.crashed == {1}
    plan = loop.plan_window(300, 100)
    assert (plan.rounds, plan.ticks, plan.due) == (6, {}, 900)  # rounds 3-8: round 9 expires the session
    loop.outbox_wire()
    loop.round += 1
    _to_round(loop, 9)
    assert loop.control.next_action_ms(900) == 901  # requests pending: a one-round window before
    plan = loop.plan_window(900, 100)
    assert (plan.rounds, sorted(plan.ticks)) == (16, [1])  # rounds 9-24: the restart at 2.5 s is an event
    sent = {kind: frame for kind, _, frame in plan.ticks[1]}
    assert {"leader_and_isr", "update_metadata"} <= set(sent)
    assert sorted(set(sent["leader_and_isr"]["broker"])) == [0, 2]  # the crashed broker gets nothing
    assert plan.due == 2500
    want = _ticked(loop, 9, plan.ticks)
    before = _plain(loop.control)
    loop.catch_up(plan.ticks, 9, 1)
    assert _plain(loop.control) == before
    loop.catch_up(plan.ticks, 9, 16)
    assert _plain(loop.control) == _plain(want)


def test_an_imbalanced_cluster_ends_the_window_before_the_rebalance_check(tmp_path):
    """A rebalance check that would move leaders back (broker 0 leads none of its preferred partitions,
    above leader.imbalance.per.broker.percentage) is the driver's: the window ends before its round. A
    plan whose tick did more than it said is a bug the driver refuses to go on from."""
    loop = _loop(tmp_path, [])
    _to_round(loop, 0)
    zk = loop.control.zk
    for p in range(3):  # leadership moved off broker 0 behind the controller's back
        (state, v), = [(s, v) for q, _, s, v in zk.partition_states("t") if q == p]
        if state["leader"] == 0:
            zk.set_partition_state(("t", p), {**state, "leader": 1}, v)
    assert loop.control.active().imbalanced()
    plan = loop.plan_window(0, 100)
    assert (plan.rounds, plan.ticks, plan.due) == (49, {}, 4900)
    with pytest.raises(RuntimeError, match="did more than its window's plan"):
        loop.catch_up({49: []}, 0, 100)


def test_a_window_ends_for_an_idle_jump_only_after_the_ticks_it_runs_ahead():
    """driver_jumps (the tasks' end of a window where the driver would jump): before a round whose
    controller tick the plan ran ahead, the driver would not jump past it (that round needs it), so a
    quiescent cluster runs on; after the last such tick, the plan's jump_last (the next thing due) decides."""
    from types import SimpleNamespace

    from sparkkafka.engine.resident import driver_jumps

    w = SimpleNamespace(first=SimpleNamespace(round_no=100), ticks=(1, 9), jump_last=140, cycle=4,
                        workload=SimpleNamespace(active=False), crashes=())
    quiet = [{"idle": {"idle_checked": 1, "idle_blockers": 0}}]
    assert not driver_jumps(w, quiet, 101)  # the tick at round 101 is next: no span to skip
    assert driver_jumps(w, quiet, 102)  # rounds 102-108 before the tick at 109: one whole 4-round cycle
    assert not driver_jumps(w, quiet, 106)  # 106-108: less than a cycle
    assert driver_jumps(w, quiet, 110)  # after the ticks: up to jump_last
    assert not driver_jumps(w, quiet, 137)
    busy = [{"idle": {"idle_checked": 1, "idle_blockers": 1}}]
    assert not driver_jumps(w, busy, 110)
    assert not driver_jumps(SimpleNamespace(**{**vars(w), "workload": SimpleNamespace(active=True)}), quiet, 110)


def test_a_plain_crash_runs_inside_the_window_up_to_its_sessions_expiry(tmp_path):
    """Broker 1 crashes at 300 ms and broker 2 at 500 ms; the controller learns of a crash only when the
    broker's ZooKeeper session expires (600 ms later). So the window from round 0 runs on past both crashes
    (the tasks drop the brokers from rounds 3 and 5 on) and ends before round 9, whose tick expires broker
    1's session. After the window the driver applies each crash at its round: the controller is then as
    if the driver had run every round."""
    timeline = [{"at": 300, "crash": 1}, {"at": 500, "crash": 2}, {"at": 2500, "restart": 1}]
    loop = _loop(tmp_path, timeline)
    _to_round(loop, 0)
    assert loop.control.controller_id() == 0
    plan = loop.plan_window(0, 100)
    assert (plan.rounds, plan.crashes, plan.due) == (9, {3: (1,), 5: (2,)}, 900)
    assert plan.rounds == 9 and loop.crashed == set()  # nothing applied before the window has run

    ref = _loop(tmp_path / "ref", timeline)  # the driver's part round by round
    _to_round(ref, 8)
    loop.catch_up(plan.ticks, 0, 9)
    for k in sorted(plan.crashes):
        loop.apply_due(k * loop.round_ms)
    assert loop.crashed == ref.crashed == {1, 2}
    assert loop.control.session_expiry == ref.control.session_expiry == {1: 900, 2: 1100}


def test_the_controllers_crash_runs_inside_the_window_up_to_its_sessions_expiry(tmp_path):
    """Broker 0 hosts the controller. Crashed, it does nothing more; its /controller znode lives until its
    session expires, when the others elect a new controller: the window ends before that round."""
    loop = _loop(tmp_path, [{"at": 300, "crash": 0}])
    _to_round(loop, 0)
    assert loop.control.controller_id() == 0
    plan = loop.plan_window(0, 100)
    assert (plan.rounds, plan.crashes, plan.due) == (9, {3: (0,)}, 900)


@pytest.mark.parametrize(("timeline", "why"), [
    ([{"at": 300, "crash": {"broker": 1, "power_loss": True}}], "a power loss cuts the log on the driver"),
    ([{"at": 300, "crash": 1}, {"at": 300, "crash": 2}, {"at": 300, "restart": 2}],
     "a restart in the same round needs the controller"),
])
def test_a_crash_the_tasks_cannot_carry_out_ends_the_window_before_it(tmp_path, timeline, why):
    loop = _loop(tmp_path, timeline)
    _to_round(loop, 0)
    plan = loop.plan_window(0, 100)
    assert (plan.rounds, plan.crashes, plan.due) == (3, {}, 300), why


def test_a_crash_in_the_window_bounds_an_idle_jump_as_a_tick_does():
    """Before a crash the tasks carry out, the driver would not have jumped past the crash's round (its event
    is due then): a quiescent cluster jumps only whole cycles before it; after it, up to jump_last."""
    from types import SimpleNamespace

    from sparkkafka.engine.resident import driver_jumps

    w = SimpleNamespace(first=SimpleNamespace(round_no=100), ticks=(), crashes=((9, (1,), {}),), jump_last=140,
                        cycle=4, workload=SimpleNamespace(active=False))
    quiet = [{"idle": {"idle_checked": 1, "idle_blockers": 0}}]
    assert driver_jumps(w, quiet, 102)  # rounds 102-108: one whole cycle before the crash at 109
    assert not driver_jumps(w, quiet, 106)
    assert driver_jumps(w, quiet, 110)
