"""The idle jump on the driver (docs/engine.md: rounds in which nothing can change are skipped): when the last
round left every broker quiescent and nothing is due, whole fetch cycles up to the next thing due are not
run; the brokers' rows are moved along in the next job (engine/idle_jump.py, protocol/idle.py). Also how
many rounds a resident window may run without the driver. A mixin of RoundLoop (round_loop.py)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace

from ..controller.control_plane import ControlPlane
from ..engine import rows as W
from ..protocol import idle, replication_quota


class IdleJumps:
    """When the driver may skip rounds or leave a window of rounds to the executors."""

    def fetch_cycle(self) -> int:
        return idle.fetch_cycle_rounds(self.control.settings().replica_fetch_wait_max_ms, self.round_ms)

    def due_ms(self, now: int) -> int | None:
        """The first emulated time after `now` at which the driver has something to do: a timeline event,
        a controller action or request to deliver, the end of a network partition (None: none)."""
        due = [self.control.next_action_ms(now), self._outside_due()]
        due = [t for t in due if t is not None]
        return min(due) if due else None

    def _outside_due(self, after: int | None = None) -> int | None:
        """The first time the driver's own part needs it: the next timeline event or a partition's end
        (`after`: the first such time later than it, the events due by it taken as done)."""
        due = [end for _, _, end in self.isolations if end is not None and (after is None or end > after)]
        later = (e.time_ms(self.round_ms) for e in self.events[self.next_event:])
        event = next((t for t in later if after is None or t > after), None)
        if event is not None:
            due.append(event)
        return min(due) if due else None

    def jump_last(self, first: int, horizon: int, plan: WindowPlan | None = None) -> int | None:
        """The round an idle span from round `first` on may skip to, at most: the first round that needs
        the driver (`plan`: the first after the controller's ticks a window's plan runs ahead, its `due`),
        or the last of the `horizon` rounds to run (None: jumping is off). The resident tasks get it too,
        to end a window where the driver would jump."""
        if not self.emulator.idle_jump or self._throttling():
            return None
        last = first + horizon - 1
        due = self.due_ms(first * self.round_ms - 1) if plan is None else plan.due
        return last if due is None else min(last, -(-due // self.round_ms))

    def _throttling(self) -> bool:
        """Whether a KIP-73 throttle is set (a rate and a throttled replica list): then no round is
        skipped. An idle broker's quota sensors still change as time passes (every throttled fetch,
        even an empty one, keeps a sample alive, and the allowance a request carries grows with the
        window), so the state after skipped rounds is not the idle state moved along. Kafka's
        `kafka-reassign-partitions --verify` removes the throttles once a move is done."""
        tcfg = {t: self.control.topic_config(t) for t in self.control.topics()}
        return replication_quota.throttling(**self.throttles(tcfg))

    def _pass_controller_timers(self, last: int, end: int) -> int:
        """Extend an idle span over controller timers that find nothing to do (an auto leader-rebalance
        check of a balanced cluster, every leader.imbalance.check.interval.seconds): the timer runs at
        its round's time on the driver, as it would have (it reads only ZooKeeper, which idle brokers
        do not change), and the span goes on to the next thing due. A timer that would act (send a
        request, write ZooKeeper, change a gauge) is not run here: its round runs. Returns the span's
        new last round (at most `end`)."""
        r = self.round_ms
        while last < end:
            t, outside = self.control.next_action_ms(last * r - 1), self._outside_due()
            if t is None or -(-t // r) != last or (outside is not None and -(-outside // r) <= last):
                break
            probe = copy.deepcopy(self.control)
            probe.tick(last * r, frozenset())
            nxt = probe.next_action_ms(last * r)
            if (nxt is not None and nxt <= last * r + 1) or probe.writes or _gauges(probe) != _gauges(self.control):
                break
            self.control = probe
            last = self.jump_last(last + 1, end - last)
        return last

    def jump(self, horizon: int) -> int:
        """Skip the idle rounds before the next thing due: when every task reported the last round run
        quiescent (idle.cluster_idle) and the driver sends nothing (no producer, no shutdown or pause in
        progress), whole fetch cycles up to _jump_last are not run. The brokers' rows are moved along
        by idle.shift_time inside the next round's Spark job; the skipped rounds leave no rows in the
        per-round tables (metrics, replica_state, follower_state). Returns the rounds skipped."""
        if self._idle_round != self.round - 1 or self.state is None:
            return 0
        if self._outbox or self.stopping or self.paused_until or self.workload.active:
            return 0
        last = self.jump_last(self.round, horizon)
        if last is None or idle.jump_rounds(last - self.round, self.fetch_cycle()) == 0:
            return 0
        last = self._pass_controller_timers(last, self.round + horizon - 1)
        d = idle.jump_rounds(last - self.round, self.fetch_cycle())
        from ..engine.idle_jump import IdleJump

        before = (self.round - 1) * self.round_ms
        p = self.params(before)
        fn = IdleJump(rounds=d, last_ms=before, round_no=self.round, brokers_dir=self.brokers_dir,
                      facts=replace(p.facts, unreachable=self._cut))
        self._before_jump = self.state
        if self.local:
            from ..engine import local

            self.state = local.jump(fn, self.state)
        else:
            self.state = self.state_rows().mapInPandas(fn, W.SPARK_SCHEMA)
        self.round += d
        self._idle_round = None
        return d

    def plan_window(self, now: int, limit: int) -> WindowPlan:
        """The rounds from `now` on (at most `limit`) a resident window may run without the driver, and what
        the controller sends in them: none of them (but the first) has a timeline event due, a network
        partition ending, a shutdown or pause in progress, or a controller tick that acts. A round due only
        for the controller joins the window when its tick would do nothing but deliver the requests an
        earlier round made, or run a leader-rebalance check that finds nothing to move
        (ControlPlane.ticks_ahead): those requests go to the tasks for that round, as the driver would have
        sent them, and after the window the driver ticks its controller through the same rounds (`catch_up`)
        before the window's reports reach it. That is the round engine's order: the controller hears from the
        brokers only at a window's end (a report ends the window), so its ticks in the window have no input
        from them. Without it, a crash's detection cost two windows (the elections' round, then the
        requests' delivery), and so did a restart or an ISR change's notification: each a whole Spark job for
        one round."""
        if limit <= 1 or self.stopping or self.paused_until:
            return WindowPlan(1)
        r = self.round_ms
        end = now + (limit - 1) * r  # the last round's time the limit allows
        crashes: dict[int, tuple[int, ...]] = {}
        outside, crashed, expiries = self._outside_due(), set(self.crashed), []
        tick = self.control.next_action_ms(now)  # the first tick delivers what the channels hold
        tick_round = None if tick is None else -(-tick // r) * r
        while True:
            last = end  # ticks up to the window's last round, before the round of the next event
            for t in [outside, *expiries]:  # a crash in the window: its session's expiry needs the driver
                if t is not None:
                    last = min(last, -(-t // r) * r - r)
            # ... to the brokers running in its round
            later = {b for k, bs in crashes.items() for b in bs if tick_round is not None and now + k * r > tick_round}
            ticks, first = self.control.ticks_ahead(now, last, r, crashed - later)
            due = min([t for t in (first, outside, *expiries) if t is not None], default=None)
            rounds = limit if due is None else int(max(1, min(limit, -(-(due - now) // r))))
            since = now + max(crashes, default=0) * r  # the events due by then are the window's crashes
            gone = (self._crash_only(due, first, crashed, since) if due is not None and due == outside and rounds < limit
                    else None)
            if not gone:
                return WindowPlan(rounds, {(at - now) // r: msgs for at, msgs in ticks.items()}, due, crashes)
            # the window runs on past the crash (the tasks drop those brokers from its round on)
            at = -(-outside // r) * r  # the crash's round
            crashes[(at - now) // r] = gone
            crashed |= set(gone)
            expiries.append(at + self.control.settings().zookeeper_session_timeout_ms)
            outside = self._outside_due(after=at)

    def _crash_only(self, due: int, first: int | None, crashed: set[int], since: int) -> tuple[int, ...] | None:
        """The brokers the timeline crashes at `due` when that is all that happens then and the controller only
        learns of it later: plain crashes (no power loss) of running brokers with no ZooKeeper session ending
        or restart waiting, no other event or network partition's end at that round, and no controller action
        due by it (`first`). A ZooKeeper-era cluster acts on a crash only when the broker's session expires
        (zookeeper.session.timeout.ms later): the controller then, or, when the crashed broker was the
        controller, the election of a new one (its /controller znode lives as long as the session; the
        crashed controller itself does nothing more). So the rounds from the crash to that expiry need the
        driver for nothing: the tasks drop the brokers' memory and what is sent to
        them, as RoundLoop.route does between jobs, and the driver applies the events after the window
        (RoundLoop.take_results). `crashed`: the brokers down by then; `since`: the round time up to which
        the events are already in the plan. None: the window ends before the round as before."""
        r = self.round_ms
        at = -(-due // r)
        if first is not None and -(-first // r) <= at:
            return None
        if any(end is not None and -(-end // r) <= at for _, _, end in self.isolations):
            return None
        gone = []
        c = self.control
        for e in self.events[self.next_event:]:
            round_of = -(-e.time_ms(r) // r)
            if round_of * r <= since:
                continue
            if round_of > at:
                break
            b = e.args.get("broker")
            if (e.type != "crash" or e.args.get("power_loss") or b in crashed or b in gone
                    or b in c.session_expiry or b in c.waiting):
                return None
            gone.append(int(b))
        return tuple(gone) or None

    def catch_up(self, ticks: dict[int, list], first: int, ran: int) -> None:
        """After a window of `ran` rounds from round `first`: the controller's ticks its plan ran ahead
        (plan_window), now on the run's controller, their requests (delivered by the window) taken. Each must
        do what the plan said: deliver those requests and change nothing else."""
        for k in sorted(ticks):
            if k < ran:
                t, seen = (first + k) * self.round_ms, self._control_seen()
                self.control.tick(t, frozenset())
                got = self.control.take_messages(t, frozenset(), self.crashed)
                if self._control_seen() != seen or _shape(got) != _shape(ticks[k]):
                    raise RuntimeError(f"the controller's tick at {t} ms did more than its window's plan "
                                       f"(IdleJumps.plan_window): {_shape(got)} against {_shape(ticks[k])}")

    def _control_seen(self) -> tuple:
        c = self.control
        return c.zk.zxid, len(c.writes), len(c.lines), c.unclean_elections, len(c.admin_results)


def _shape(messages: list) -> list[tuple]:
    return [(kind, src, len(frame)) for kind, src, frame in messages]


@dataclass
class WindowPlan:
    """A resident window's plan (IdleJumps.plan_window): its rounds; the controller's ticks run ahead (round
    offset in the window -> the requests delivered in that round, as ControlPlane.take_messages gives them);
    the first time after them at which the driver has something to do (None: nothing); the crashes the
    tasks carry out themselves (round offset -> brokers, `_crash_only`)."""

    rounds: int
    ticks: dict[int, list] = field(default_factory=dict)
    due: int | None = None
    crashes: dict[int, tuple[int, ...]] = field(default_factory=dict)  # round offset -> brokers that crash then


def _gauges(control: ControlPlane) -> dict:
    """The controller's metrics row as it is now (metrics() also resets the unclean-election count)."""
    n = control.unclean_elections
    out = control.metrics()
    control.unclean_elections = n
    return out
