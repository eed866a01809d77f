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
        c = self.control
        b = a.get("broker")
        if kind == "produce":
            self.workload.add(a, now, c.partition_count(a["topic"]))
        elif kind == "crash" and b not in self.crashed:
            self.crashed.add(b)
            self.paused_until.pop(b, None)
            c.crash(b, now)
            if a.get("power_loss"):
                self._lose_power(b, now)
        elif kind == "restart" and b in self.crashed:
            self.crashed.discard(b)
            self.send(W.START, pd.DataFrame({"broker": [b]}))
            c.restart(b, now)
        elif kind == "shutdown" and b not in self.crashed:
            self.send(W.SHUTDOWN, pd.DataFrame({"broker": [b]}))
            self.stopping.add(b)
            c.shutdown(b, now)
        elif kind == "pause" and b not in self.crashed:
            self.paused_until[b] = now + int(a["duration_ms"])
            c.pause(b, now, self.paused_until[b])
        elif kind == "isolate":
            other = frozenset([c.controller_id()]) if a["from"] == "controller" else frozenset(a["from"])
            end = now + a["duration_ms"] if a.get("duration_ms") else None
            self.isolations.append((frozenset(a["brokers"]), other, end))
        elif kind == "heal":
            self.isolations.clear()
        elif kind == "create_topic":
            c.create_topic(a["topic"], now)
        elif kind == "delete_topic":
            c.delete_topic(a["topic"], now)
        elif kind == "set_config":
            c.set_config(a, now)
        elif kind == "controller_failover":
            c.controller_failover(now)
        elif kind == "reassign":
            admin.reassign(self.driver, a["plan"], a.get("throttle"), a.get("log_dirs_throttle"),
                           via=a.get("via", "api"), now=now)
        elif kind == "elect_leaders":
            parts = None if a.get("partitions") is None else [tuple(x) for x in a["partitions"]]
            admin.elect_leaders(self.driver, a["election_type"], parts, now=now)
        elif kind == "fail_log_dir":
            self.offline_dirs.setdefault(b, set()).add(a["log_dir"])
            self.send(W.LOG_DIR_FAILURE, pd.DataFrame({"broker": [b], "log_dir": [a["log_dir"]]}))
        elif kind in ("crash", "restart", "shutdown", "pause"):
            pass  # crashing a crashed broker, restarting a running one: nothing happens
        else:  # the loader refuses what this version cannot do, before anything runs
            raise ScenarioError(kind, a, f"{kind} is not yet supported by this version of sparkkafka")

    def _lose_power(self, b: int, now: int) -> None:
        """The broker's machine loses power: its logs keep only what was on disk (protocol/flush.py).
        The cut is staged into this round's log commit; the broker is down, so no task reads its log."""
        from ..protocol.flush import power_loss_cuts
        from ..storage import broker_disk, log_truncation

        version = self.writer.table("log").version()
        log = broker_disk.read_log(self.tables_dir, version, b,
                                   ["log_dir", "topic", "partition", "offset", "append_ms"]).to_pandas()
        flushed = {(d, t, p): o for d in self.scenario.log_dirs
                   for (t, p), o in broker_disk.read_flushed(self.brokers_dir, b, d, self.round).items()}
        writeback = int(self.scenario.emulator["page.cache.writeback.ms"])
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
