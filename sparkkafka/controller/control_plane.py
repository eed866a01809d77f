"""The control plane on the driver: ZooKeeper, broker sessions, and the controllers.

A broker is live for the cluster while its ZooKeeper session is: a crash, or a pause longer than
zookeeper.session.timeout.ms, is noticed only when the session expires (KafkaController's BrokerChange on
/brokers/ids); a broker that resumes after its session expired registers again with a larger broker epoch (a
bounce). The controller is the first live broker to register (KafkaController.elect); its requests leave
through its broker's channel, so a paused controller's requests wait and arrive late, stamped with the epoch
it had.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

import numpy as np
import pandas as pd

from ..plaindata import Fields, Plain, from_plain, to_plain
from ..protocol import frames as F
from ..protocol.config import (
    ClusterSettings,
    EmulatorSettings,
    TopicSettings,
    broker_config,
    dynamic_broker_value,
)
from ..protocol.rules import rules_for
from . import events as ev
from .kafka_controller import KafkaController, Requests
from .placement import assign_replicas_to_brokers
from .zookeeper import BadVersionError, ZooKeeper


class PartitionStateRequest(Protocol):
    """An imported partition's state znode and its topic znode's in-flight move (KIP-455): what the
    controller reads of a scenario's topics[].state entry."""

    leader: int
    isr: Any
    adding: Any
    removing: Any


class TopicRequest(Protocol):
    """What creating a topic carries (AdminZkClient.createTopic: name, partitions, replication factor or an
    assignment, topic configs) and, for an imported cluster, each partition's state. The scenario's TopicSpec
    is one; the controller names only what it reads."""

    name: str
    partitions: int
    replication_factor: int
    assignment: Mapping[int, Any] | None
    config: Mapping[str, Any]
    state: Mapping[int, PartitionStateRequest] | None

ZOOKEEPER = -3  # src of answers from ZooKeeper itself (a leader's own ISR write before 2.7)


@dataclass
class ControlPlane:
    brokers: list[int]
    racks: dict[int, str] | None
    broker_cfg: dict
    seed: int
    profile: str
    zk: ZooKeeper = field(default_factory=ZooKeeper)
    overrides: dict[str, dict] = field(default_factory=dict)
    session_expiry: dict[int, int] = field(default_factory=dict)  # broker -> when its session ends
    waiting: dict[int, int] = field(default_factory=dict)  # restarted broker -> when its old session ends
    controllers: list[KafkaController] = field(default_factory=list)
    outbox: list[tuple[int, int, Requests]] = field(default_factory=list)  # (sender, made at, requests)
    writes: list[dict] = field(default_factory=list)
    lines: list[tuple] = field(default_factory=list)
    isr_results: list[tuple[int, pd.DataFrame]] = field(default_factory=list)  # (made at, results)
    unclean_elections: int = 0
    emulator: dict = field(default_factory=dict)  # the scenario's emulator settings
    dynamic: dict[int, dict] = field(default_factory=dict)  # per-broker dynamic configs (kafka-configs --entity-name B)
    admin_results: dict[str, dict] = field(default_factory=dict)  # admin request key -> per-partition result
    _frame: pd.DataFrame | None = None
    _frame_zxid: int = -1

    def start(self, now: int) -> None:
        for b in sorted(self.brokers):
            self.zk.register_broker(b)
        self.tick(now, frozenset())

    # ------------------------------------------------------------------ topics and configs
    def topic_config(self, topic: str) -> TopicSettings:
        """The topic's effective configs: its overrides, else the broker's, else Kafka's defaults."""
        return TopicSettings.of(self.broker_cfg, self.overrides.get(topic, {}))

    def topics(self) -> list[str]:
        return sorted(self.zk.topics())

    def partition_count(self, topic: str) -> int:
        return len(self.zk.topic_assignment(topic))

    def create_topic(self, spec: TopicRequest, now: int) -> None:
        """What AdminZkClient does: place the replicas (Kafka's AdminUtils, over the registered
        brokers, seeded per topic) unless assigned, write the topic znode; the controller's topic
        watch then brings the new partitions online."""
        if spec.assignment is not None:
            assignment = {p: list(r) for p, r in spec.assignment.items()}
        else:
            seed = zlib.crc32(f"{self.seed}/{spec.name}".encode())
            assignment = assign_replicas_to_brokers(sorted(self.brokers), spec.partitions, spec.replication_factor,
                                                    self.racks, seed=seed)
        self.overrides[spec.name] = dict(spec.config)
        self.zk.create_topic(spec.name, assignment)
        if spec.state is not None:
            self._import_state(spec, now)
        self._enqueue(ev.TopicChange())

    def _import_state(self, spec: TopicRequest, now: int) -> None:
        """An imported cluster's znodes, as a previous controller left them: the topic znode's adding and
        removing replicas (KIP-455) and each partition's state znode (leader, ISR; epochs 0)."""
        st = spec.state
        adding = {p: s.adding for p, s in st.items() if s.adding}
        removing = {p: s.removing for p, s in st.items() if s.removing}
        if adding or removing:
            self.zk.set_assignment(spec.name, self.zk.topic_assignment(spec.name), adding, removing)
        for p, s in sorted(st.items()):
            state = {"leader": s.leader, "leader_epoch": 0, "isr": list(s.isr), "controller_epoch": 0}
            self.zk.create_partition_state((spec.name, p), state)
            self.writes.append({"time_ms": now, "topic": spec.name, "partition": p, **state,
                                "replicas": list(spec.assignment[p]), "adding": list(s.adding),
                                "removing": list(s.removing), "version": 0})

    def delete_topic(self, topic: str, now: int) -> None:
        """What the topic tool does: create /admin/delete_topics/<t>; the controller acts on it."""
        if topic in self.zk.topics() and topic not in self.zk.topics_to_delete():
            self.zk.mark_topic_for_deletion(topic)
            self._enqueue(ev.TopicDeletion())

    def set_config(self, a: dict, now: int) -> None:
        """A dynamic config change (kafka-configs --alter; the reassignment tool's throttles), and the line
        Kafka's brokers log on the /config/changes notification (kafka.server.DynamicConfigManager, 2.8):
        ``Processing override for entityPath: brokers/1 with config: HashMap(k -> v, ...)``, the entity's
        overrides after the change (keys sorted here, Scala's HashMap order in Kafka; for the cluster-wide
        default ``brokers/<default>``, the changed keys with the values now in effect)."""
        if a["entity"] == "topics":
            ov = self.overrides.setdefault(a["name"], {})
            for k, v in a["config"].items():
                ov.pop(k, None) if v is None else ov.__setitem__(k, v)
            topic, path, shown = a["name"], f"topics/{a['name']}", ov
        elif a["name"] == "default":  # cluster-wide dynamic default (--entity-default)
            for k, v in a["config"].items():
                self.broker_cfg[k] = broker_config({}).get(k) if v is None else v
            topic, path, shown = None, "brokers/<default>", {k: self.broker_cfg[k] for k in a["config"]}
        else:
            mine = self.dynamic.setdefault(int(a["name"]), {})
            for k, v in a["config"].items():
                mine.pop(k, None) if v is None else mine.__setitem__(k, v)
            topic, path, shown = None, f"brokers/{int(a['name'])}", mine
        text = ", ".join(f"{k} -> {str(v).lower() if isinstance(v, bool) else v}" for k, v in sorted(shown.items()))
        self.lines.append((now, -1, -1, None, None,
                           f"Processing override for entityPath: {path} with config: HashMap({text})"))
        if any(k == "unclean.leader.election.enable" for k in a["config"]):
            self._enqueue(ev.UncleanLeaderElectionEnable(topic))

    # ------------------------------------------------------------------ brokers
    def live(self) -> set[int]:
        return set(self.zk.live_brokers())

    def crash(self, b: int, now: int) -> None:
        if b not in self.session_expiry:  # crashing again before re-registering keeps the old session's end
            self.session_expiry[b] = now + self.settings().zookeeper_session_timeout_ms
        self.waiting.pop(b, None)
        self.controllers = [c for c in self.controllers if c.broker != b]  # its memory is gone

    def pause(self, b: int, start: int, end: int) -> None:
        timeout = self.settings().zookeeper_session_timeout_ms
        if end - start > timeout:
            self.session_expiry[b] = start + timeout

    def resume(self, b: int, now: int) -> None:
        """A paused broker runs again: a zombie controller first works off its queue, then the
        broker notices its expired session and registers anew."""
        for c in [c for c in self.controllers if c.broker == b]:
            c.process(now)
            self._collect(c, now)
            if self.zk.controller() != b:
                c.resigned = True
        self.controllers = [c for c in self.controllers if not c.resigned]
        if b in self.waiting:  # restarted, waiting for its old session to end: tick registers it then
            return
        if b not in self.zk.live_brokers() and b not in self.session_expiry:
            self._register(b)

    def restart(self, b: int, now: int) -> None:
        """A crashed broker starts again. While its old session is still open, Kafka's registration
        fails (KafkaZkClient.registerBroker: /brokers/ids/<id> exists, owned by another session), so it
        registers only after that session has expired and the controller has seen it go (the next
        round): the failure is always processed, and the broker comes back through onBrokerStartup."""
        if b in self.session_expiry and b in self.zk.live_brokers():
            self.waiting[b] = self.session_expiry[b]
            return
        self.session_expiry.pop(b, None)
        self._register(b)

    def shutdown(self, b: int, now: int) -> None:
        """Controlled shutdown (7.6): the controller moves leadership away first, then the broker
        closes its session at once."""
        c = self.active()
        if c is not None:
            c.queue.append(ev.ControlledShutdown(b))
            c.process(now)
            self._collect(c, now)
        self.controllers = [c for c in self.controllers if c.broker != b]
        self._expire(b)

    def controller_failover(self, now: int) -> None:
        """The active controller's session ends: its broker re-registers (a bounce) and a new
        controller is elected with a higher epoch."""
        c = self.active()
        if c is None:
            return
        c.resigned = True
        self.controllers = [x for x in self.controllers if x is not c]
        self._expire(c.broker)
        self._register(c.broker)

    def _register(self, b: int) -> None:
        self.zk.register_broker(b)
        self._enqueue(ev.BrokerChange())

    def _expire(self, b: int) -> None:
        self.session_expiry.pop(b, None)
        if b in self.zk.live_brokers():
            self.zk.unregister_broker(b)  # the session's ephemeral nodes go, /controller included
        self._enqueue(ev.BrokerChange())

    def _enqueue(self, event: ev.ControllerEvent) -> None:
        for c in self.controllers:
            if not c.resigned:
                c.queue.append(event)

    def active(self) -> KafkaController | None:
        for c in self.controllers:
            if not c.resigned and self.zk.controller() == c.broker:
                return c
        return None

    # ------------------------------------------------------------------ each round
    def tick(self, now: int, paused: frozenset) -> None:
        """Expire sessions that are due, elect a controller if there is none, let every
        controller whose broker runs handle its events."""
        for b, t in sorted(self.waiting.items()):
            if t < now and b not in paused:  # its old session ended in an earlier round; a stalled
                # process registers when it runs again
                del self.waiting[b]
                self._register(b)
        for b, t in sorted(self.session_expiry.items()):
            if t <= now:
                self._expire(b)
        if self.zk.controller() is None:
            live = self.zk.live_brokers()
            down = set(self.session_expiry) | set(self.waiting)  # a session kept open by no process
            candidates = sorted((epoch, b) for b, epoch in live.items() if b not in paused and b not in down)
            if candidates:
                c = KafkaController.elect(self.zk, candidates[0][1], **self._controller_hooks())
                if c is not None:
                    self.controllers.append(c)
        c = self.active()
        at = self._rebalance_ms(c)
        if at is not None and now >= at:
            c.queue.append(ev.AutoPreferredReplicaLeaderElection())
            c.next_rebalance_ms = self._next_rebalance(now)
        for c in list(self.controllers):
            if c.broker not in paused:
                c.process(now)
                self._collect(c, now)
        self.controllers = [c for c in self.controllers if not c.resigned]

    def next_action_ms(self, now: int) -> int | None:
        """The earliest emulated time after `now` at which `tick` may act or the controllers' channels
        deliver something (`now` + 1 when something is pending already; None: nothing until an outside
        event). The resident engine runs the rounds before it without the driver."""
        pending = any(c.queue for c in self.controllers) or self.isr_results or any(
            req.leader_and_isr or req.stop_replica or req.update_metadata or req.isr_results
            for _, _, req in self.outbox)
        if pending or self.zk.controller() is None:
            return now + 1
        due = [max(t, now + 1) for t in [*self._session_dues(), self._rebalance_ms(self.active())] if t is not None]
        return min(due) if due else None

    def _session_dues(self) -> list[int]:
        """When tick expires a session (the first tick at or after its end) or registers a restarted broker
        waiting for its old session to end (the first tick after it)."""
        return [*self.session_expiry.values(), *(t + 1 for t in self.waiting.values())]

    def _rebalance_ms(self, c: KafkaController | None) -> int | None:
        """When the active controller `c` runs its next auto leader-rebalance check (None: none, or disabled)."""
        if c is None or not self.settings().auto_leader_rebalance_enable:
            return None
        return c.next_rebalance_ms

    def _next_rebalance(self, now: int) -> int:
        return now + 1000 * self.settings().leader_imbalance_check_interval_seconds

    def _controller_hooks(self) -> dict:
        """What a controller reads of the cluster's configs, as calls into this control plane."""
        return {"topic_config": self.topic_config, "delete_enabled": self._delete_enabled,
                "settings": self.settings}

    def _delete_enabled(self) -> bool:
        return self.settings().delete_topic_enable

    def settings(self) -> ClusterSettings:
        """The broker configs in effect now (a cluster-wide dynamic default included), typed."""
        return ClusterSettings.of(self.broker_cfg, EmulatorSettings.of(self.emulator))

    def broker_value(self, b: int, name: str):
        """A broker's effective config: its own dynamic value, else the cluster default / static one."""
        return dynamic_broker_value(name, self.dynamic.get(b, {}), {}, self.broker_cfg)  # broker_cfg holds <default>

    # ------------------------------------------------------------------ admin requests (AdminClient -> controller)
    def admin(self, event: ev.AdminEvent, now: int) -> dict | None:
        """Hand an admin request to the active controller and let it act now, as the controller's
        event thread does when the request arrives; returns its per-partition results, filed under
        `event.key` (None when no controller is active: the request fails with NOT_CONTROLLER)."""
        c = self.active()
        if c is None:
            return None
        c.queue.append(event)
        c.process(now)
        self._collect(c, now)
        return self.admin_results.pop(event.key, None)

    def reassign_via_zookeeper(self, plan: dict, now: int) -> None:
        """The pre-2.4 path (and `kafka-reassign-partitions --zookeeper`): write /admin/reassign_partitions;
        the controller's watch picks it up."""
        if self.zk.reassign_partitions() is None:
            self.zk.create_reassign_partitions(plan)
        else:
            self.zk.set_reassign_partitions(plan)
        self._enqueue(ev.ZkPartitionReassignment())

    def offline_replicas(self, replicas: pd.DataFrame, now: int) -> None:
        """Replicas brokers reported on failed log dirs (KIP-112's log_dir_event_notification)."""
        self._enqueue(ev.LogDirEventNotification(replicas))

    def reassignments(self) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
        """ListPartitionReassignments: (replicas, adding, removing) of every moving partition."""
        out = {}
        for t in self.topics():
            z = self.zk.topic_znode(t)
            for p, reps in z.replicas.items():
                if z.adding.get(p) or z.removing.get(p):
                    out[(t, p)] = (list(reps), list(z.adding.get(p, ())), list(z.removing.get(p, ())))
        return out

    def _collect(self, c: KafkaController, now: int) -> None:
        out = c.take()
        for r in out.admin_results:
            self.admin_results[r.key] = r.results
        self.writes += out.writes
        self.lines += out.lines
        self.unclean_elections += c.unclean_elections
        c.unclean_elections = 0
        self.outbox.append((c.broker, now, out))

    def isr_changes(self, proposals: pd.DataFrame, now: int, reachable) -> None:
        """ISR changes leaders asked for. From 2.7 (AlterIsr) they go to the controller, if the
        leader can reach it; before, the leader writes the partition state itself, conditional on
        the version it knows, and leaves an isr_change_notification."""
        if proposals.empty:
            return
        if rules_for(self.profile).alter_isr:  # KIP-497
            c = self.active()
            ok = np.array([c is not None and reachable(b, c.broker) for b in proposals["broker"]], dtype=bool)
            lost = proposals[~ok]
            if len(lost):  # the request never arrived: the leader gives up the change and retries
                self.isr_results.append((now, self._results(lost, error="NETWORK_EXCEPTION")))
            if ok.any():
                c.queue.append(ev.AlterIsrReceived(proposals[ok]))
            return
        rows = []
        for r in proposals.itertuples():
            tp = (r.topic, r.partition)
            state = {"leader": r.broker, "leader_epoch": r.leader_epoch, "isr": F.ids(r.isr),
                     "controller_epoch": r.controller_epoch}
            try:
                v = self.zk.set_partition_state(tp, state, r.zk_version)
                rows.append((r.broker, r.topic, r.partition, r.leader_epoch, r.isr, v, None))
                self.writes.append({"time_ms": now, "topic": r.topic, "partition": r.partition,
                                    "leader": r.broker, "isr": F.ids(r.isr), "leader_epoch": r.leader_epoch,
                                    "controller_epoch": r.controller_epoch, "version": v,
                                    "replicas": self.zk.topic_assignment(r.topic)[r.partition]})
                self.zk.create_isr_change_notification([tp])
            except (BadVersionError, KeyError):
                rows.append((r.broker, r.topic, r.partition, r.leader_epoch, r.isr, r.zk_version, "BADVERSION"))
        self.isr_results.append((now, F.conform(pd.DataFrame(rows, columns=list(F.ISR_RESULT)), F.ISR_RESULT)))
        self._enqueue(ev.IsrChangeNotification())

    @staticmethod
    def _results(p: pd.DataFrame, error: str) -> pd.DataFrame:
        return F.conform(p.assign(error=error), F.ISR_RESULT)

    def take_messages(self, now: int, paused: frozenset, crashed: set[int]) -> list[tuple[str, int, pd.DataFrame]]:
        """Requests the controllers' channels deliver this round, as (kind, sending broker, frame).
        A request made in one round arrives in the next, like every message; a paused sender keeps
        its requests queued until it runs again, a crashed one lost them."""
        out, self.outbox, self.isr_results = self._deliver(now, paused, crashed)
        return out

    def _deliver(self, now: int, paused: frozenset, crashed: set[int]) -> tuple[list, list, list]:
        """take_messages' answer, and the requests and ISR answers left in the channels after it."""
        keep, out = [], []
        for src, made, req in self.outbox:
            if src in crashed:
                continue
            if src in paused or made >= now:
                keep.append((src, made, req))
                continue
            for kind, frame in req.frames().items():
                if len(frame):
                    out.append((kind, src, frame))
        keep_r = []
        for made, r in self.isr_results:
            if made >= now:
                keep_r.append((made, r))
            else:
                out.append(("isr_results", ZOOKEEPER, r))
        return out, keep, keep_r

    def ticks_ahead(self, now: int, last: int, round_ms: int, crashed: set[int]) -> tuple[dict[int, list], int | None]:
        """The rounds after `now` (up to `last`, round times) whose tick does nothing but deliver what the
        channels hold and run a leader-rebalance check that finds no broker over the imbalance threshold,
        worked out without running them (the resident window runs such rounds without the driver; the
        driver ticks them after the window, RoundLoop.catch_up): round time -> what take_messages would
        give then (no pause: a window has none). Also the first time after them at which the driver has
        something to do for the controller (None: nothing up to `last`). Anything else a tick may do
        (expire or register a session, elect a controller, handle a queued event) ends them."""
        c = self.active()
        if c is None or any(x.queue for x in self.controllers):
            return {}, self.next_action_ms(now)
        rebalance, sessions = self._rebalance_ms(c), self._session_dues()
        out: dict[int, list] = {}
        t = self.next_action_ms(now)
        while t is not None and t <= last:
            at = -(-t // round_ms) * round_ms  # the round whose tick it is
            checks = rebalance is not None and rebalance <= at
            if any(x <= at for x in sessions) or (checks and not self._balanced() and c.imbalanced()):
                return out, t
            if checks:
                rebalance = self._next_rebalance(at)
            # the first tick delivers what the channels hold; the ticks ahead make no requests of their own
            out[at] = [] if out else self._deliver(at, frozenset(), crashed)[0]
            due = [x for x in [*sessions, rebalance] if x is not None]
            t = max(min(due), at + 1) if due else None
        return out, t

    # ------------------------------------------------------------------ views
    def leaders_of(self, topics: pd.Series, partitions: pd.Series) -> np.ndarray:
        """Current leader of each (topic, partition) in ZooKeeper (-1 for none or unknown)."""
        return F.leaders_by_key(self.partition_frame(), topics, partitions)

    def partition_frame(self) -> pd.DataFrame:
        """Every partition's state in ZooKeeper, rebuilt only after ZooKeeper changed. A partition without a
        state znode yet (New, as the controller's own scans skip it: a topic created while no controller acts,
        say while the controller's broker is down and its session still open) has no row: it has no leader."""
        if self._frame is not None and self._frame_zxid == self.zk.zxid:
            return self._frame
        rows = [(t, p, s["leader"], list(s["isr"]), list(reps), s["leader_epoch"], s["controller_epoch"], v)
                for t in self.topics() for p, reps, s, v in self.zk.partition_states(t, missing_ok=True)]
        self._frame = pd.DataFrame(rows, columns=["topic", "partition", "leader", "isr", "replicas",
                                                  "leader_epoch", "controller_epoch", "version"])
        self._frame_zxid = self.zk.zxid
        return self._frame

    def _balanced(self) -> bool:
        """Whether every partition in ZooKeeper is led by its preferred (first) replica: then no leader-rebalance
        check can act. One pass over the cached partition table, before the controller's own per-partition check
        (KafkaController.imbalanced: ~65 ms at 3,000 partitions, ZooKeeper read partition by partition)."""
        f = self.partition_frame()
        return all(reps and reps[0] == leader for leader, reps in zip(f["leader"].tolist(), f["replicas"], strict=True))

    def controller_id(self) -> int:
        c = self.zk.controller()
        return -1 if c is None else c

    def metrics(self) -> dict:
        """Controller-side gauges: OfflinePartitionsCount, UncleanLeaderElections (this round),
        ActiveControllerCount (one broker holds /controller) and the controller epoch."""
        live = self.live()
        parts = self.partition_frame()
        offline = int((~parts["leader"].isin(list(live))).sum()) if len(parts) else 0
        n, self.unclean_elections = self.unclean_elections, 0
        return {"offline": offline, "unclean_elections": n, "live_brokers": len(live),
                "active_controller": 0 if self.zk.controller() is None else 1,
                "controller_epoch": self.zk.controller_epoch()[0]}

    def take_writes(self) -> list[dict]:
        w, self.writes = self.writes, []
        return w

    def take_lines(self) -> list[tuple]:
        """The state-change lines since the last take. The controller starts one round before round 0 (start),
        so that its first requests arrive at round 0; its lines then are stamped at the run's start, 0 ms:
        the state-change log has no line before the run."""
        x, self.lines = self.lines, []
        return [(max(0, int(line[0])), *line[1:]) for line in x]

    def save(self, out: str) -> None:
        self.zk.save(os.path.join(out, "zookeeper.json"))

    # ------------------------------------------------------------------ persistence (run_dir.py)
    _PLAIN_SKIP = ("zk", "controllers", "_frame", "_frame_zxid")

    def to_dict(self) -> dict[str, Any]:
        """The control plane as plain data: ZooKeeper, each controller (its ZooKeeper and config hooks are
        this plane's), sessions, channels and configs."""
        return {k: to_plain(v) for k, v in self.plain_fields()}

    def plain_fields(self) -> Iterator[tuple[str, Any]]:
        """to_dict's items, each made only when reached (plaindata.dump_fields writes them one by one): the fields as
        they are, ZooKeeper as Plain, each controller as its own fields."""
        for f in fields(self):
            if f.name not in self._PLAIN_SKIP:
                yield f.name, getattr(self, f.name)
        yield "zk", Plain(lambda: self.zk.to_dict(copies=False))  # written at once: no copies needed
        yield "controllers", [Fields(c.plain_fields) for c in self.controllers]

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ControlPlane:
        cp = cls(**{k: from_plain(v) for k, v in d.items() if k not in cls._PLAIN_SKIP},
                 zk=ZooKeeper.from_dict(d["zk"]))
        cp.controllers = [KafkaController.from_dict(c, cp.zk, **cp._controller_hooks()) for c in d["controllers"]]
        return cp
