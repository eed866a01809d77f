"""The scenario's timeline on the driver: the events due each round (crash, restart, shutdown, pause,
network partitions, produce, topic and config changes, reassignments, log-dir failures), applied to the
controller and the driver's outbox before the round runs; and who cannot reach whom while faults last.
A mixin of RoundLoop (round_loop.py), whose DriverState fields it reads and changes."""

from __future__ import annotations

import pandas as pd

from .. import admin
from ..engine import rows as W
from ..errors import ScenarioError
from ..run_dir import CLIENT
from ..scenario.event_kind import KINDS
from ..scenario.model import Event


class Timeline:
    """Applying events to the driver's state (DriverState fields, via RoundLoop)."""

    def send(self, kind: int, frame: pd.DataFrame, src: int = CLIENT) -> None:
        self.driver.send(kind, frame, src)

    def event_of(self, event: dict) -> Event:
        """One event written as a timeline entry without its time (e.g. {"crash": 2}), validated as the loader
        validates a timeline (ScenarioError naming the field), against the run's current topics and assignments
        in ZooKeeper: those the timeline created or deleted included, and replica sets that differ per partition
        (reassignments in flight, imported or not), not against a re-parsed copy of the scenario's topics."""
        from ..scenario.loader import parse_scenario

        sc, zk = self.scenario, self.control.zk
        topics = [{"name": t, "assignment": zk.topic_assignment(t)} for t in zk.topics()]
        probe = {"cluster": {"brokers": list(sc.brokers), "log_dirs": list(sc.log_dirs), "config": sc.config},
                 "topics": topics, "timeline": [{"at": 0, **event}]}
        if sc.racks:
            probe["cluster"]["racks"] = sc.racks
        return parse_scenario(probe, name=sc.name, running=True).timeline[0]

    def apply_event(self, kind: str, a: dict, now: int) -> None:
        """The event's registered action (scenario/event_kind.py) on this run; the loader refuses a kind this
        version does not have, before anything runs."""
        if kind not in KINDS:
            raise ScenarioError(kind, a, f"{kind} is not yet supported by this version of sparkkafka")
        KINDS[kind].apply(Actions(self), a, now)

    def _lose_power(self, b: int, now: int) -> None:
        """The broker's machine loses power: its logs keep only what was on disk (protocol/flush.py).
        The cut is staged into this round's log commit; the broker is down, so no task reads its log."""
        from ..protocol.flush import power_loss_cuts
        from ..storage import broker_disk, log_truncation

        self.commit_held()  # the in-process engine's unwritten rows: the broker's log as it is on disk
        version = self.writer.table("log").version()
        log = broker_disk.read_log(self.tables_dir, version, b,
                                   ["log_dir", "topic", "partition", "offset", "append_ms"]).to_pandas()
        flushed = {(d, t, p): o for d in self.scenario.log_dirs
                   for (t, p), o in broker_disk.read_flushed(self.brokers_dir, b, d, self.round).items()}
        writeback = self.emulator.page_cache_writeback_ms
        cuts = power_loss_cuts(log, flushed, now, writeback)
        adds, removes = log_truncation.truncate(self.tables_dir, version, b, cuts,
                                                f"powerloss-{self.round:08d}-b{b}")
        self._log_actions += adds + [{**r, "remove": True} for r in removes]
        self._driver_rows["state_change_log"] += [
            {"time_ms": now, "broker": b, "controller_epoch": -1, "topic": r.topic, "partition": int(r.partition),
             "message": f"Power loss: log {r.topic}-{int(r.partition)} in {r.log_dir} lost its unflushed tail "
                        f"from offset {int(r.offset)}"} for r in cuts.itertuples()]

    def apply_due(self, now: int) -> None:
        while self.next_event < len(self.events) and self.events[self.next_event].time_ms(self.round_ms) <= now:
            e = self.events[self.next_event]
            self.apply_event(e.type, e.args, now)
            self.next_event += 1
        for b in sorted(b for b, t in self.paused_until.items() if t <= now):
            del self.paused_until[b]
            self.control.resume(b, now)
        self.isolations = [i for i in self.isolations if i[2] is None or i[2] > now]

    def unreachable(self, crashed: set[int] | None = None) -> dict[int, frozenset]:
        """Who cannot reach whom: the crashed brokers (`crashed`, default the run's) and the network
        partitions' other sides."""
        out = {}
        for b in self.scenario.brokers:
            cut = set(self.crashed if crashed is None else crashed)
            for a, o, _ in self.isolations:
                if b in a:
                    cut |= o
                if b in o:
                    cut |= a
            cut.discard(b)
            if cut:
                out[b] = frozenset(cut)
        return out


class Actions:
    """What an event does to the run (scenario/event_kind.RunActions), on the driver's state: the controller,
    the brokers' inboxes, the workload and the network partitions. Crashing a crashed broker, restarting a
    running one (and pausing or shutting down a crashed one) does nothing."""

    def __init__(self, run: Timeline) -> None:
        self.run, self.control = run, run.control
        self.brokers = tuple(run.scenario.brokers)

    def produce(self, args: dict, now: int) -> None:
        self.run.workload.add(args, now, self.control.partition_count(args["topic"]))

    def crash(self, broker: int, now: int, power_loss: bool = False) -> None:
        run = self.run
        if broker in run.crashed:
            return
        run.crashed.add(broker)
        run.paused_until.pop(broker, None)
        self.control.crash(broker, now)
        if power_loss:
            run._lose_power(broker, now)

    def restart(self, broker: int, now: int) -> None:
        if broker in self.run.crashed:
            self.run.crashed.discard(broker)
            self.run.send(W.START, pd.DataFrame({"broker": [broker]}))
            self.control.restart(broker, now)

    def shutdown(self, broker: int, now: int) -> None:
        if broker not in self.run.crashed:
            self.run.send(W.SHUTDOWN, pd.DataFrame({"broker": [broker]}))
            self.run.stopping.add(broker)
            self.control.shutdown(broker, now)

    def pause(self, broker: int, now: int, duration_ms: int) -> None:
        if broker not in self.run.crashed:
            self.run.paused_until[broker] = now + duration_ms
            self.control.pause(broker, now, self.run.paused_until[broker])

    def isolate(self, brokers, other, now: int, duration_ms: int | None) -> None:
        cut = frozenset([self.control.controller_id()]) if other == "controller" else frozenset(other)
        self.run.isolations.append((frozenset(brokers), cut, now + duration_ms if duration_ms else None))

    def heal(self, now: int) -> None:
        self.run.isolations.clear()

    def fail_log_dir(self, broker: int, log_dir: str, now: int) -> None:
        self.run.offline_dirs.setdefault(broker, set()).add(log_dir)
        self.run.send(W.LOG_DIR_FAILURE, pd.DataFrame({"broker": [broker], "log_dir": [log_dir]}))

    def controller_failover(self, now: int) -> None:
        self.control.controller_failover(now)

    def create_topic(self, topic: str, now: int) -> None:
        self.control.create_topic(topic, now)

    def delete_topic(self, topic: str, now: int) -> None:
        self.control.delete_topic(topic, now)

    def set_config(self, change: dict, now: int) -> None:
        self.control.set_config(change, now)

    def reassign(self, plan: dict, throttle: int | None, log_dirs_throttle: int | None, via: str, now: int) -> None:
        admin.reassign(self.run.driver, plan, throttle, log_dirs_throttle, via=via, now=now)

    def elect_leaders(self, election_type: str, partitions, now: int) -> None:
        admin.elect_leaders(self.run.driver, election_type, partitions, now=now)
