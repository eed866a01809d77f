"""The idle jump on the driver (design.md: rounds in which nothing can change are skipped): when the last
round left every broker quiescent and nothing is due, whole fetch cycles up to the next thing due are not
run; the brokers' rows are moved along in the next job (engine/idle_jump.py, protocol/idle.py). Also how
many rounds a resident window may run without the driver. A mixin of RoundLoop (round_loop.py)."""

from __future__ import annotations

import copy

from ..controller.control_plane import ControlPlane
from ..engine import rows as W
from ..protocol import idle, replication_quota


class IdleJumps:
    """When the driver may skip rounds or leave a window of rounds to the executors."""

    def fetch_cycle(self) -> int:
        return idle.fetch_cycle_rounds(self.broker_cfg, self.round_ms)

    def due_ms(self, now: int) -> int | None:
        """The first emulated time after `now` at which the driver has something to do: a timeline event,
        a controller action or request to deliver, the end of a network partition (None: none)."""
        due = [self.control.next_action_ms(now)]
        if self.next_event < len(self.events):
            due.append(self.events[self.next_event].time_ms(self.round_ms))
        due += [end for _, _, end in self.isolations if end is not None]
        due = [t for t in due if t is not None]
        return min(due) if due else None

    def jump_last(self, first: int, horizon: int) -> int | None:
        """The round an idle span from round `first` on may skip to, at most: the first round that needs
        the driver, or the last of the `horizon` rounds to run (None: jumping is off). The resident
        tasks get it too, to end a window where the driver would jump."""
        if not self.scenario.emulator.get("idle.jump") or self._throttling():
            return None
        last = first + horizon - 1
        due = self.due_ms(first * self.round_ms - 1)
        return last if due is None else min(last, -(-due // self.round_ms))

    def _throttling(self) -> bool:
        """Whether a KIP-73 throttle is set (a rate and a throttled replica list): then no round is
        skipped. An idle broker's quota sensors still change as time passes (every throttled fetch,
        even an empty one, keeps a sample alive, and the allowance a request carries grows with the
        window), so the state after skipped rounds is not the idle state moved along. Kafka's
        `kafka-reassign-partitions --verify` removes the throttles once a move is done."""
        tcfg = {t: self.control.topic_config(t) for t in self.control.topics()}
        return replication_quota.active(self.throttles(tcfg))

    def _pass_controller_timers(self, last: int, end: int) -> int:
        """Extend an idle span over controller timers that find nothing to do (an auto leader-rebalance
        check of a balanced cluster, every leader.imbalance.check.interval.seconds): the timer runs at
        its round's time on the driver, as it would have (it reads only ZooKeeper, which idle brokers
        do not change), and the span goes on to the next thing due. A timer that would act (send a
        request, write ZooKeeper, change a gauge) is not run here: its round runs. Returns the span's
        new last round (at most `end`)."""
        r = self.round_ms
        while last < end:
            t = self.control.next_action_ms(last * r - 1)
            ev = self.events[self.next_event].time_ms(r) if self.next_event < len(self.events) else None
            others = [x for x in [ev, *(e for _, _, e in self.isolations)] if x is not None]
            if t is None or -(-t // r) != last or any(-(-x // r) <= last for x in others):
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
        fn = IdleJump(rounds=d, last_ms=before, round_no=self.round, cfg=p.cfg, brokers_dir=self.brokers_dir,
                      log_dirs=p.log_dirs, offline_dirs=p.offline_dirs, unreachable=self._cut)
        self._before_jump = self.state
        if self.local:
            from ..engine import local

            self.state = local.jump(fn, self.state)
        else:
            self.state = self.state_rows().mapInPandas(fn, W.SPARK_SCHEMA)
        self.round += d
        self._idle_round = None
        return d

    def quiet_rounds(self, now: int, limit: int) -> int:
        """How many rounds from `now` on may run without the driver: none of them (but the first) has a
        timeline event due, a pause or network partition ending, a controller action or request to deliver,
        or a shutdown in progress."""
        if limit <= 1 or self.stopping or self.paused_until:
            return 1
        first = self.due_ms(now)  # the first round at or after it needs the driver
        if first is None:
            return limit
        return int(max(1, min(limit, -(-(first - now) // self.round_ms))))


def _gauges(control: ControlPlane) -> dict:
    """The controller's metrics row as it is now (metrics() also resets the unclean-election count)."""
    n = control.unclean_elections
    out = control.metrics()
    control.unclean_elections = n
    return out
