"""The controller: KafkaController, PartitionStateMachine and ReplicaStateMachine of the
ZooKeeper era (KafkaController.scala, PartitionStateMachine.scala, ReplicaStateMachine.scala), running on the
driver.

A controller belongs to a broker. It keeps a context rebuilt from ZooKeeper at failover, handles
events in order (the typed events of controller/events.py: broker changes, ISR changes, controlled
shutdown, topic creation and deletion, config changes, reassignments, elections, log-dir failures;
`handle(*events, now)` returns the instructions of controller/instructions.py), tracks Kafka's
partition and replica states (controller/state_machines.py), writes partition state to ZooKeeper
conditionally on the version it read and on its own controller-epoch znode version (KAFKA-6082),
and queues LeaderAndIsr, UpdateMetadata and StopReplica requests stamped with its controller
epoch. Events that arrive while its broker is paused wait in its queue; a controller whose session
expired meanwhile processes them on resume as a zombie: its writes fail the version check and its
requests carry a stale epoch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import pandas as pd

from ..plaindata import from_plain, to_plain
from ..protocol import frames as F
from ..protocol.config import ClusterSettings, TopicSettings
from . import events as ev
from . import instructions as ins
from . import reassignment as ra
from .election import (
    Election,
    controlled_shutdown_election,
    offline_election,
    preferred_election,
    reassign_election,
    remove_replica_from_isr,
)
from .state_machines import PartitionState, PartitionStateMachine, ReplicaState, ReplicaStateMachine
from .zookeeper import BadVersionError, ControllerMovedError, ZooKeeper

TP = tuple[str, int]
PS, RS = PartitionState, ReplicaState


@dataclass
class Requests:
    """What a controller decided while handling events: its requests per kind (instructions whose
    rows make the frames LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, ISR_RESULT), the answers to
    admin requests, plus the partition_state rows of its writes and its state-change lines."""

    leader_and_isr: list[ins.LeaderAndIsr] = field(default_factory=list)
    stop_replica: list[ins.StopReplica] = field(default_factory=list)
    update_metadata: list[ins.UpdateMetadata] = field(default_factory=list)
    writes: list[dict] = field(default_factory=list)
    lines: list[tuple] = field(default_factory=list)
    isr_results: list[ins.IsrResult] = field(default_factory=list)  # AlterIsr responses
    admin_results: list[ins.AdminResult] = field(default_factory=list)
    sent: list[int] = field(default_factory=lambda: [0, 0, 0])  # leader_and_isr, update_metadata, stop_replica
    # entries already in a sent batch (KafkaController._send_batch)

    def frames(self) -> dict[str, pd.DataFrame]:
        return {
            "leader_and_isr": _frame(self.leader_and_isr, F.LEADER_AND_ISR),
            "stop_replica": _frame(self.stop_replica, F.STOP_REPLICA),
            "update_metadata": _frame(self.update_metadata, F.UPDATE_METADATA),
            "isr_results": _frame(self.isr_results, F.ISR_RESULT),
        }

    def instructions(self) -> list[ins.Instruction]:
        """Everything decided, in Kafka's per-batch order (LeaderAndIsr, UpdateMetadata, StopReplica),
        then the AlterIsr and admin answers."""
        return [*self.leader_and_isr, *self.update_metadata, *self.stop_replica, *self.isr_results,
                *self.admin_results]


def _frame(items: list, spec: dict) -> pd.DataFrame:
    if not items:
        return F.empty(spec)
    return F.conform(pd.DataFrame([i.row() for i in items], columns=list(spec)), spec)


@dataclass
class KafkaController:
    """One broker's controller module while it is (or believes it is) the active controller."""

    broker: int
    zk: ZooKeeper
    topic_config: Callable[[str], TopicSettings]
    delete_enabled: Callable[[], bool] = lambda: True
    epoch: int = 0
    epoch_version: int = -1
    live: dict[int, int] = field(default_factory=dict)  # broker -> broker epoch, as the context knows
    shutting_down: set[int] = field(default_factory=set)
    queue: list[ev.ControllerEvent] = field(default_factory=list)
    resigned: bool = False
    unclean_elections: int = 0
    out: Requests = field(default_factory=Requests)
    reassigning: dict[TP, ra.ReplicaAssignment] = field(default_factory=dict)  # partitionsBeingReassigned
    zk_reassigning: set[TP] = field(default_factory=set)  # those from /admin/reassign_partitions
    offline_replicas: dict[int, set[TP]] = field(default_factory=dict)  # replicasOnOfflineDirs (KIP-112)
    settings: Callable[[], ClusterSettings] = ClusterSettings.defaults  # the broker configs in effect (auto rebalance)
    next_rebalance_ms: int | None = None  # when the next auto leader-rebalance check runs
    last_writes: list[dict] = field(default_factory=list)  # partition_state rows of the last `handle`
    last_lines: list[tuple] = field(default_factory=list)  # state-change lines of the last `handle`
    partition_states: PartitionStateMachine = field(default_factory=PartitionStateMachine)
    replica_states: ReplicaStateMachine = field(default_factory=ReplicaStateMachine)
    correlation: dict[int, int] = field(default_factory=dict)  # broker -> next correlation id of the client to it

    def __post_init__(self) -> None:
        for m in (self.partition_states, self.replica_states):
            m.controller_id, m.epoch = self.broker, self.epoch

    # ------------------------------------------------------------------ election of the controller
    @classmethod
    def elect(cls, zk: ZooKeeper, broker: int, **kw) -> KafkaController | None:
        """KafkaController.elect: register /controller and bump /controller_epoch in one multi-op."""
        if zk.controller() is not None:
            return None
        _, version = zk.controller_epoch()
        epoch, new_version = zk.register_controller_and_increment_epoch(broker, version)
        c = cls(broker=broker, zk=zk, epoch=epoch, epoch_version=new_version, **kw)
        c.queue.append(ev.ControllerFailover())
        return c

    @property
    def is_active(self) -> bool:
        """What this controller believes; a zombie still believes it."""
        return not self.resigned

    # ------------------------------------------------------------------ ZooKeeper access
    def _state(self, tp: TP) -> tuple[dict, int]:
        return self.zk.get_partition_state(tp)

    def _write(self, tp: TP, state: dict, version: int, now: int) -> int:
        v = self.zk.set_partition_state(tp, state, version, expected_controller_epoch_version=self.epoch_version)
        self._record(now, tp, state, v)
        return v

    def _record(self, now: int, tp: TP, state: dict, version: int) -> None:
        """A partition_state row: the state znode with the topic znode's replicas, adding, removing."""
        z = self.zk.topic_znode(tp[0])
        self.out.writes.append({"time_ms": now, "topic": tp[0], "partition": tp[1], **self._row(state),
                                "replicas": list(z.replicas[tp[1]]), "adding": list(z.adding.get(tp[1], ())),
                                "removing": list(z.removing.get(tp[1], ())), "version": version})

    @staticmethod
    def _row(state: dict) -> dict:
        return {"leader": state["leader"], "isr": list(state["isr"]), "leader_epoch": state["leader_epoch"],
                "controller_epoch": state["controller_epoch"]}

    def _assignment(self, tp: TP) -> list[int]:
        return self.zk.replicas_of(tp)

    def partitions(self) -> list[TP]:
        """Partitions that have a state znode (New partitions have none yet)."""
        return [tp for tp, *_ in self._stored()]

    def _stored(self) -> Iterator[tuple[TP, list[int], Mapping[str, Any], int]]:
        """(partition, replica list, state, znode version) of each partition with a state znode, in
        partition order: ZooKeeper's stored values, for readers only (a deep copy of every state per scan
        cost ~1 s of a failover at 20,000 partitions)."""
        for t in self.zk.topics():
            for p, reps, state, v in self.zk.partition_states(t, missing_ok=True):
                yield (t, p), reps, state, v

    def _line(self, now: int, tp: TP | None, message: str) -> None:
        t, p = tp if tp else (None, None)
        self.out.lines.append((now, self.broker, self.epoch, t, p, f"[Controller id={self.broker} epoch={self.epoch}] {message}"))

    # ------------------------------------ state machines (PartitionStateMachine, ReplicaStateMachine)
    def _partition_ok(self, now: int, tp: TP, target: PartitionState) -> bool:
        """Whether `tp` may move to `target`; an illegal transition is logged and the caller skips it."""
        return bool(self.partition_states.valid([tp], target, lambda k, m: self._line(now, k, m)))

    def _to_partition(self, now: int, tps: list[TP], target: PartitionState) -> list[TP]:
        return self.partition_states.transition(tps, target, lambda k, m: self._line(now, k, m))

    def _to_replica(self, now: int, tp: TP, brokers: list[int], target: ReplicaState) -> list[int]:
        """Move the replicas of `tp` on `brokers` to `target`; returns the brokers whose replica moved."""
        moved = self.replica_states.transition([(tp[0], tp[1], b) for b in brokers], target,
                                               lambda k, m: self._line(now, (k[0], k[1]), m))
        return [b for _, _, b in moved]

    def _init_partition(self, tp: TP, reps: list[int], leader: int | None) -> None:
        """initializePartitionState / initializeReplicaState for one partition from ZooKeeper: New
        without a state znode (leader None), else Online or Offline by its leader; each replica
        Online if online, else ReplicaDeletionIneligible."""
        for b in reps:
            self.replica_states.set((tp[0], tp[1], b),
                                    RS.OnlineReplica if self._replica_online(b, tp) else RS.ReplicaDeletionIneligible)
        if leader is None:
            self.partition_states.set(tp, PS.NewPartition)
        else:
            self.partition_states.set(tp, PS.OnlinePartition if self._replica_online(leader, tp) else PS.OfflinePartition)

    # ------------------------------------------------------------------ requests
    def _online(self, b: int) -> bool:
        return b in self.live and b not in self.shutting_down

    def _replica_online(self, b: int, tp: TP) -> bool:
        """isReplicaOnline: the broker is live and the replica is not on one of its failed log dirs."""
        return self._online(b) and tp not in self.offline_replicas.get(b, ())

    def _send_leader_and_isr(self, tp: TP, state: dict, version: int, to: list[int], is_new: bool = False,
                             replicas: list[int] | None = None) -> None:
        reps = F.csv(self._assignment(tp) if replicas is None else replicas)
        for b in to:
            self.out.leader_and_isr.append(ins.LeaderAndIsr(b, tp[0], tp[1], state["leader"], state["leader_epoch"],
                                                            self.epoch, F.csv(state["isr"]), reps, is_new, None,
                                                            version, self.broker))

    def _send_update_metadata(self, now: int) -> None:
        """sendUpdateMetadataRequest: a batch of its own (what was queued before goes first)."""
        self._send_batch(now)
        for b in sorted(self.live):
            self.out.update_metadata.append(ins.UpdateMetadata(b, self.epoch, self.broker, F.csv(sorted(self.live))))
        self._send_batch(now)

    def _send_stop_replica(self, b: int, tp: TP, leader_epoch: int, delete: bool) -> None:
        self.out.stop_replica.append(ins.StopReplica(b, tp[0], tp[1], leader_epoch, self.epoch, delete, self.broker))

    def _send_batch(self, now: int) -> None:
        """ControllerBrokerRequestBatch.sendRequestsToBrokers over the entries queued since the last batch: per
        broker one LeaderAndIsr, one UpdateMetadata, one StopReplica request, in that order, each taking the
        next correlation id of the controller's NetworkClient to that broker (NetworkClient.nextCorrelationId:
        0 on a new client, then +1 per request), logged as Kafka's controller logs its sends. The emulator
        batches per event (and per UpdateMetadata), where Kafka's state machines may send several batches."""
        out = self.out
        kinds = ((out.leader_and_isr, self._log_leader_and_isr), (out.update_metadata, None),
                 (out.stop_replica, self._log_stop_replica))
        for i, (entries, log) in enumerate(kinds):
            by_broker: dict[int, list] = {}
            for e in entries[out.sent[i]:]:
                by_broker.setdefault(e.broker, []).append(e)
            out.sent[i] = len(entries)
            for b, request in sorted(by_broker.items()):
                cid = self.correlation.get(b, 0)
                self.correlation[b] = cid + 1
                for e in request:
                    e.correlation_id = cid
                if log is not None:
                    log(now, b, {(e.topic, e.partition): e for e in request})  # a batch keeps a partition's last

    def _log_leader_and_isr(self, now: int, b: int, entries: dict[TP, ins.LeaderAndIsr]) -> None:
        leaders = sum(e.leader == b for e in entries.values())
        self._line(now, None, f"Sending LeaderAndIsr request to broker {b} with {leaders} become-leader and "
                              f"{len(entries) - leaders} become-follower partitions")

    def _log_stop_replica(self, now: int, b: int, entries: dict[TP, ins.StopReplica]) -> None:
        self._line(now, None, f"Sending StopReplica request for {len(entries)} replicas to broker {b}")

    # ------------------------------------------------------------------ event loop
    def handle(self, *events: ev.ControllerEvent, now: int) -> list[ins.Instruction]:
        """Handle `events` after whatever is queued, as the event thread would, and return what was
        decided: requests to brokers, AlterIsr and admin answers (`Requests.instructions`). The
        partition_state rows and state-change lines of the same events are `last_writes`, `last_lines`."""
        self.queue.extend(events)
        self.process(now)
        out = self.take()
        self.last_writes, self.last_lines = out.writes, out.lines
        return out.instructions()

    def process(self, now: int) -> None:
        """Handle every queued event; a write refused because another controller took over makes
        this one resign (the rest of its queue is dropped, as Kafka's controller does)."""
        while self.queue and not self.resigned:
            event = self.queue.pop(0)
            try:
                self._dispatch(now, event)
            except ControllerMovedError:
                self._line(now, None, "Controller moved to another broker. Resigning")
                self.resigned = True
                self.queue.clear()
            finally:
                self._send_batch(now)  # what the event queued (the emulator delivers a resigning one's too)

    def _dispatch(self, now: int, event: ev.ControllerEvent) -> None:
        match event:
            case ev.ControllerFailover():
                self._on_failover(now)
            case ev.BrokerChange():
                self._on_broker_change(now)
            case ev.ControlledShutdown(broker=b):
                self._on_controlled_shutdown(now, b)
            case ev.TopicChange():
                self._on_new_partitions(now)
            case ev.TopicDeletion():
                self._on_topic_deletion(now)
            case ev.UncleanLeaderElectionEnable(topic=topic):
                self._on_config_change(now, topic)
            case ev.AlterIsrReceived(requests=requests):
                self._on_alter_isr(now, requests)
            case ev.IsrChangeNotification():
                self._on_isr_change_notification(now)
            case ev.ApiPartitionReassignment(key=key, targets=targets):
                self._on_reassign(now, key, targets)
            case ev.ZkPartitionReassignment():
                self._on_zk_reassign(now)
            case ev.ReplicaLeaderElection(key=key, election_type=kind, partitions=tps):
                self._on_elect_leaders(now, key, kind, tps)
            case ev.AutoPreferredReplicaLeaderElection():
                self._on_auto_rebalance(now)
            case ev.LogDirEventNotification(replicas=replicas):
                self._on_log_dir_failure(now, replicas)
            case _:
                raise TypeError(f"not a controller event: {event!r}")

    def _on_failover(self, now: int) -> None:
        """onControllerFailover (7.2): context from ZooKeeper, replicas online or offline, elections."""
        self.live = dict(self.zk.live_brokers())
        self.shutting_down.clear()
        self.correlation.clear()  # ControllerChannelManager.startup: a new client to each broker
        self._line(now, None, f"Starting become controller state transition (epoch {self.epoch})")
        self.partition_states.states.clear()
        self.replica_states.states.clear()
        for t in sorted(self.zk.topics()):
            for p, reps in sorted(self.zk.topic_assignment(t).items()):
                if not self.zk.has_partition_state((t, p)):
                    self._init_partition((t, p), reps, None)
        self._send_update_metadata(now)
        stored = list(self._stored())
        for tp, reps, state, v in stored:
            self._init_partition(tp, reps, state["leader"])
            self._send_leader_and_isr(tp, state, v, [b for b in reps if self._online(b)], replicas=reps)
        dead = {b for _, reps, _, _ in stored for b in reps if not self._online(b)}
        self._offline_replicas(now, sorted(dead))
        self._elect_offline(now, self._offline_partitions())
        self._on_new_partitions(now)
        self._on_topic_deletion(now)
        # initializePartitionReassignments: moves stored in the topic znodes and /admin/reassign_partitions
        for tp in self.partitions():
            a = self._full(tp)
            if a.is_being_reassigned:
                self.reassigning[tp] = a
        self._on_zk_reassign(now)
        for tp in sorted(self.reassigning):
            if tp in self.reassigning:
                self._on_partition_reassignment(now, tp, self.reassigning[tp])
        self.next_rebalance_ms = now + 5000  # the first check 5 s after becoming controller

    def _on_broker_change(self, now: int) -> None:
        """processBrokerChange (7.5): new, dead and bounced brokers from /brokers/ids."""
        current = dict(self.zk.live_brokers())
        new = sorted(b for b in current if b not in self.live)
        dead = sorted(b for b in self.live if b not in current)
        bounced = sorted(b for b in current if b in self.live and current[b] != self.live[b])
        if dead or bounced:
            for b in dead + bounced:
                self.live.pop(b, None)
                self.shutting_down.discard(b)
                self.correlation.pop(b, None)  # removeBroker closes its client; a bounced one gets a new one
            self._on_broker_failure(now, dead + bounced)
        if new or bounced:
            self.live.update({b: current[b] for b in new + bounced})
            self._on_broker_startup(now, sorted(new + bounced))

    def _on_broker_failure(self, now: int, dead: list[int]) -> None:
        self._line(now, None, f"Broker failure callback for {', '.join(map(str, dead))}")
        led = [tp for tp, _, state, _ in self._stored() if state["leader"] in dead]
        self._to_partition(now, led, PS.OfflinePartition)
        self._elect_offline(now, led)
        self._offline_replicas(now, dead)
        self._send_update_metadata(now)

    def _on_broker_startup(self, now: int, new: list[int]) -> None:
        self._line(now, None, f"New broker startup callback for {', '.join(map(str, new))}")
        for b in new:
            self.offline_replicas.pop(b, None)  # a restart brings its failed dirs' replicas back
        self._send_update_metadata(now)
        for tp in self.partitions():
            on = [b for b in self._assignment(tp) if b in new]
            on = self._to_replica(now, tp, on, RS.OnlineReplica) if on else on
            if on:
                state, v = self._state(tp)
                self._send_leader_and_isr(tp, state, v, on)
        self._elect_offline(now, self._offline_partitions())
        self._on_new_partitions(now)
        # maybeResumeReassignments: moves waiting for one of these brokers go on
        for tp, a in sorted(self.reassigning.items()):
            if set(a.target) & set(new):
                self._on_partition_reassignment(now, tp, a)
        if self.zk.topics_to_delete():
            self._on_topic_deletion(now)  # topics that waited for this broker

    def _offline_partitions(self) -> list[TP]:
        return [tp for tp, _, state, _ in self._stored() if not self._replica_online(state["leader"], tp)]

    def _elect_offline(self, now: int, tps: list[TP], force_unclean: bool = False) -> None:
        """Offline partition election (6.2): first live ISR replica, else (unclean) first live one."""
        for tp in tps:
            state, v = self._state(tp)
            if state["controller_epoch"] > self.epoch:
                continue
            if not self._partition_ok(now, tp, PS.OnlinePartition):
                continue
            unclean = force_unclean or self.topic_config(tp[0]).unclean_leader_election_enable
            live = [b for b in self._assignment(tp) if self._replica_online(b, tp)]
            e = offline_election(self._assignment(tp), state["isr"], live, unclean)
            if e is None:
                self._line(now, tp, f"Failed to elect leader for partition {tp[0]}-{tp[1]}: no live replica "
                                    f"in ISR {F.csv(state['isr'])} (unclean election disabled)")
                continue
            self._apply_election(now, tp, state, v, e, live)

    def _apply_election(self, now: int, tp: TP, state: dict, v: int, e: Election, recipients: list[int]) -> None:
        new = {"leader": e.leader, "leader_epoch": state["leader_epoch"] + 1, "isr": list(e.isr),
               "controller_epoch": self.epoch}
        nv = self._write(tp, new, v, now)
        if e.unclean:
            self.unclean_elections += 1
            self._line(now, tp, f"Unclean leader election. Partition {tp[0]}-{tp[1]} elected leader {e.leader}, "
                                f"data may be lost")
        self._line(now, tp, f"Changed partition {tp[0]}-{tp[1]} from OfflinePartition to OnlinePartition with state "
                            f"LeaderAndIsr(leader={e.leader}, leaderEpoch={new['leader_epoch']}, "
                            f"isr={F.csv(e.isr)}, zkVersion={nv})")
        self._send_leader_and_isr(tp, new, nv, recipients)
        self.partition_states.set(tp, PS.OnlinePartition)

    def _offline_replicas(self, now: int, brokers: list[int]) -> None:
        """OfflineReplica (4.5): drop each replica from the ISR (leader -1 if it led; the last ISR
        member is kept), leader epoch +1, LeaderAndIsr to the other live replicas."""
        parts = self.partitions()
        for b in brokers:
            for tp in parts:
                if b not in self._assignment(tp):
                    continue
                if self._to_replica(now, tp, [b], RS.OfflineReplica):
                    self._remove_from_isr(now, tp, b)

    def _remove_from_isr(self, now: int, tp: TP, b: int, replicas: list[int] | None = None) -> None:
        """ReplicaStateMachine.doRemoveReplicasFromIsr for one replica (4.5): out of the ISR (leader -1
        if it led; the last member is kept), leader epoch +1, LeaderAndIsr to the partition's other live
        replicas (`replicas`: the assignment the controller holds, when it is not ZooKeeper's yet)."""
        state, v = self._state(tp)
        if b not in state["isr"]:
            return
        leader, isr = remove_replica_from_isr(state["leader"], state["isr"], b)
        new = {"leader": leader, "leader_epoch": state["leader_epoch"] + 1, "isr": list(isr),
               "controller_epoch": self.epoch}
        nv = self._write(tp, new, v, now)
        self._line(now, tp, f"Removed replica {b} from ISR of {tp[0]}-{tp[1]}: LeaderAndIsr(leader={leader}, "
                            f"leaderEpoch={new['leader_epoch']}, isr={F.csv(isr)}, zkVersion={nv})")
        reps = self._assignment(tp) if replicas is None else replicas
        self._send_leader_and_isr(tp, new, nv, [x for x in reps if x != b and self._online(x)], replicas=replicas)

    def _on_controlled_shutdown(self, now: int, b: int) -> None:
        """doControlledShutdown (7.6): move leadership away, stop followers, drop them from ISRs."""
        self.shutting_down.add(b)
        self._line(now, None, f"Shutting down broker {b}")
        for tp in self.partitions():
            reps = self._assignment(tp)
            if b not in reps or len(reps) <= 1:
                continue
            state, v = self._state(tp)
            if state["leader"] == b:
                if not self._partition_ok(now, tp, PS.OnlinePartition):
                    continue
                alive = [x for x in reps if x in self.live]
                e = controlled_shutdown_election(reps, state["isr"], alive, self.shutting_down)
                if e is not None:
                    self._apply_election(now, tp, state, v, e, alive)
            elif state["leader"] >= 0 and self._to_replica(now, tp, [b], RS.OfflineReplica):
                self._send_stop_replica(b, tp, state["leader_epoch"], delete=False)
                self._remove_from_isr(now, tp, b)

    def _on_new_partitions(self, now: int) -> None:
        """Partitions whose topic znode exists but which have no state yet: New -> Online (6.1),
        leader = first live replica, ISR = the live replicas; none live keeps them New."""
        for t in sorted(self.zk.topics()):
            for p, reps in sorted(self.zk.topic_assignment(t).items()):
                tp = (t, p)
                if self.zk.has_partition_state(tp):
                    if tp not in self.partition_states.states:  # created by another controller meanwhile
                        self._init_partition(tp, reps, self._state(tp)[0]["leader"])
                    continue
                fresh = self.partition_states.state(tp) is PS.NonExistentPartition
                if fresh:  # onNewPartitionCreation: NewPartition, NewReplica, then OnlineReplica for all
                    self._to_partition(now, [tp], PS.NewPartition)
                    self._to_replica(now, tp, list(reps), RS.NewReplica)
                    self._to_replica(now, tp, list(reps), RS.OnlineReplica)
                alive = [b for b in reps if self._online(b)]
                if not alive or not self._partition_ok(now, tp, PS.OnlinePartition):
                    continue
                self.partition_states.set(tp, PS.OnlinePartition)
                state = {"leader": alive[0], "leader_epoch": 0, "isr": alive, "controller_epoch": self.epoch}
                self.zk.create_partition_state(tp, state)
                self.out.writes.append({"time_ms": now, "topic": t, "partition": p, **self._row(state),
                                        "replicas": list(reps), "version": 0})
                self._line(now, tp, f"Changed partition {t}-{p} from NewPartition to OnlinePartition with state "
                                    f"LeaderAndIsr(leader={alive[0]}, leaderEpoch=0, isr={F.csv(alive)}, zkVersion=0)")
                self._send_leader_and_isr(tp, state, 0, alive, is_new=True)

    def _on_topic_deletion(self, now: int) -> None:
        """TopicDeletionManager (7.8): with delete.topic.enable=false the request node is just
        removed; otherwise a topic with an offline replica waits (ineligible), and an eligible one
        gets StopReplica with delete (leader epoch -2, EpochDuringDelete) to every replica, then its
        znodes are removed."""
        for t in sorted(self.zk.topics_to_delete()):
            if not self.delete_enabled():
                self.zk.delete_topic_deletion_node(t, expected_controller_epoch_version=self.epoch_version)
                self._line(now, None, f"Topic deletion is disabled (delete.topic.enable=false): "
                                      f"request to delete {t} removed, nothing deleted")
                continue
            assignment = self.zk.topic_assignment(t)
            if any(not self._online(b) for reps in assignment.values() for b in reps):
                self._line(now, None, f"Topic {t} is ineligible for deletion: a replica is offline")
                continue
            for p, reps in sorted(assignment.items()):
                # partitions Offline -> NonExistent; replicas Offline -> ReplicaDeletionStarted (StopReplica
                # with delete) -> ReplicaDeletionSuccessful -> NonExistent (the emulator does not wait)
                self._to_partition(now, [(t, p)], PS.OfflinePartition)
                self._to_partition(now, [(t, p)], PS.NonExistentPartition)
                started = self._to_replica(now, (t, p), self._to_replica(now, (t, p), list(reps), RS.OfflineReplica),
                                           RS.ReplicaDeletionStarted)
                for b in started:
                    self._send_stop_replica(b, (t, p), -2, delete=True)
                self._to_replica(now, (t, p), self._to_replica(now, (t, p), started, RS.ReplicaDeletionSuccessful),
                                 RS.NonExistentReplica)
                self.out.writes.append({"time_ms": now, "topic": t, "partition": p, "leader": -2, "isr": [],
                                        "leader_epoch": -2, "controller_epoch": self.epoch,
                                        "replicas": list(reps), "version": -1})
            self.zk.delete_topic_znodes(t, expected_controller_epoch_version=self.epoch_version)
            self.zk.delete_topic_deletion_node(t, expected_controller_epoch_version=self.epoch_version)
            self._line(now, None, f"Deletion of topic {t} successfully completed")
        self._send_update_metadata(now)

    def _on_config_change(self, now: int, topic: str | None) -> None:
        """Enabling unclean election triggers an offline election round (6.2)."""
        self._elect_offline(now, [tp for tp in self._offline_partitions() if topic is None or tp[0] == topic])

    def _on_alter_isr(self, now: int, requests: pd.DataFrame) -> None:
        """processAlterIsr (4.4, 2.7+): FENCED_LEADER_EPOCH for an older leader epoch, success if
        nothing changes, else a write conditional on the request's version (INVALID_UPDATE_VERSION)."""
        results = self.out.isr_results
        for r in requests.itertuples():
            tp = (r.topic, r.partition)
            try:
                state, v = self._state(tp)
            except KeyError:
                results.append(ins.IsrResult(r.broker, r.topic, r.partition, r.leader_epoch, r.isr, r.zk_version,
                                             "UNKNOWN_TOPIC_OR_PARTITION"))
                continue
            isr = F.ids(r.isr)
            if r.leader_epoch < state["leader_epoch"]:
                err, nv = "FENCED_LEADER_EPOCH", r.zk_version
            elif state["leader"] == r.broker and state["isr"] == isr:
                err, nv = None, v
            else:
                new = {"leader": state["leader"], "leader_epoch": state["leader_epoch"], "isr": isr,
                       "controller_epoch": self.epoch}
                try:
                    err, nv = None, self._write(tp, new, r.zk_version, now)
                    self._line(now, tp, f"ISR updated to {r.isr} and zkVersion updated to {nv}")
                except ControllerMovedError:
                    raise
                except BadVersionError:
                    err, nv = "INVALID_UPDATE_VERSION", r.zk_version
            results.append(ins.IsrResult(r.broker, r.topic, r.partition, r.leader_epoch, r.isr, nv, err))
        if len(requests):
            self._send_update_metadata(now)
        for tp in sorted({(t, p) for t, p in zip(requests["topic"], requests["partition"], strict=True)}):
            self._on_reassignment_isr_change(now, tp)

    def _on_isr_change_notification(self, now: int) -> None:
        """Before 2.7 leaders write their ISR themselves and leave a notification; the controller
        re-reads those partitions and propagates them with UpdateMetadata (4.4)."""
        for name, _parts in self.zk.isr_change_notifications():
            self.zk.delete_isr_change_notification(name)
        self._send_update_metadata(now)
        for tp in sorted(self.reassigning):  # the state-znode watch of reassigning partitions (pre-2.7)
            self._on_reassignment_isr_change(now, tp)

    # ------------------------------------------- reassignment (KafkaController.onPartitionReassignment)
    def _full(self, tp: TP) -> ra.ReplicaAssignment:
        z = self.zk.topic_znode(tp[0])
        return ra.ReplicaAssignment(tuple(z.replicas[tp[1]]), tuple(z.adding.get(tp[1], ())),
                                    tuple(z.removing.get(tp[1], ())))

    def _known(self, tp: TP) -> bool:
        return tp[0] in self.zk.topics() and tp[1] in self.zk.topic_znode(tp[0]).replicas \
            and tp[0] not in self.zk.topics_to_delete()

    def _on_reassign(self, now: int, key: str, targets: dict[TP, list[int] | None]) -> None:
        """processApiPartitionReassignment (AlterPartitionReassignments): per partition, None cancels.
        Results: None, or (Kafka error name, message)."""
        results: dict[TP, tuple[str, str] | None] = {}
        for tp, target in sorted(targets.items()):
            if not self._known(tp):
                results[tp] = ("UNKNOWN_TOPIC_OR_PARTITION", "This server does not host this topic-partition.")
                continue
            current = self._full(tp)
            if target is None:
                if tp not in self.reassigning:
                    results[tp] = ("NO_REASSIGNMENT_IN_PROGRESS", "No reassignment in progress")
                    continue
                target = list(current.origin)
            else:
                err = ra.validate_replicas(target, current.reassign_to(target).adding, set(self.live))
                if err:
                    results[tp] = ("INVALID_REPLICA_ASSIGNMENT", err)
                    continue
            if tp in self.zk_reassigning:  # an API reassignment replaces the znode's entry
                self._remove_zk_entry(tp)
            self._on_partition_reassignment(now, tp, current.reassign_to(target))
            results[tp] = None
        self.out.admin_results.append(ins.AdminResult(key, results))

    def _on_zk_reassign(self, now: int) -> None:
        """processZkPartitionReassignment: the moves written to /admin/reassign_partitions."""
        data = self.zk.reassign_partitions()
        if not data:
            return
        for e in data.get("partitions", []):
            tp = (e["topic"], int(e["partition"]))
            if not self._known(tp):
                self._remove_zk_entry(tp)
                continue
            self.zk_reassigning.add(tp)
            self._on_partition_reassignment(now, tp, self._full(tp).reassign_to([int(b) for b in e["replicas"]]))

    def _remove_zk_entry(self, tp: TP) -> None:
        """removePartitionsFromZkReassignment: the znode loses the entry, and goes when empty."""
        self.zk_reassigning.discard(tp)
        data = self.zk.reassign_partitions()
        if data is None:
            return
        left = [e for e in data.get("partitions", []) if (e["topic"], int(e["partition"])) != tp]
        if left:
            self.zk.set_reassign_partitions({**data, "partitions": left},
                                            expected_controller_epoch_version=self.epoch_version)
        else:
            self.zk.delete_reassign_partitions(expected_controller_epoch_version=self.epoch_version)

    def _on_reassignment_isr_change(self, now: int, tp: TP) -> None:
        """processPartitionReassignmentIsrChange: a committed ISR change may complete a move."""
        a = self.reassigning.get(tp)
        if a is not None and self.zk.has_partition_state(tp) and ra.is_complete(a, self._state(tp)[0]["isr"]):
            self._on_partition_reassignment(now, tp, a)

    def _on_partition_reassignment(self, now: int, tp: TP, a: ra.ReplicaAssignment) -> None:
        """onPartitionReassignment: U (store the move), then A (not complete: epoch bump, start the new
        replicas) or B (complete: new leader if needed, stop and delete the removed replicas, store AR = TRS)."""
        current = self._full(tp)
        if current != a:  # U1/U2, and U3: adding replicas of a superseded move are stopped at once
            self.zk.set_partition_assignment(tp, a.replicas, a.adding, a.removing,
                                             expected_controller_epoch_version=self.epoch_version)
            self._line(now, tp, f"Updated assignment of {tp[0]}-{tp[1]} to replicas={F.csv(a.replicas)} "
                                f"adding={F.csv(a.adding)} removing={F.csv(a.removing)}")
            if self.zk.has_partition_state(tp):
                st, v = self._state(tp)
                self._record(now, tp, st, v)
            unneeded = [r for r in current.replicas if r not in a.replicas]
            if unneeded:
                self._stop_removed_replicas(now, tp, unneeded, list(a.replicas))
        self.reassigning[tp] = a
        if not self.zk.has_partition_state(tp):
            return
        state, v = self._state(tp)
        if not ra.is_complete(a, state["isr"]):
            # A1: bump the leader epoch, LeaderAndIsr with the full assignment to every replica; A2: start the new ones
            new = {**state, "leader_epoch": state["leader_epoch"] + 1, "controller_epoch": self.epoch}
            nv = self._write(tp, new, v, now)
            self._line(now, tp, f"Sent LeaderAndIsr request (leader={new['leader']}, leaderEpoch={new['leader_epoch']}, "
                                f"isr={F.csv(new['isr'])}) with new replica assignment {F.csv(a.replicas)} "
                                f"for partition being reassigned {tp[0]}-{tp[1]}")
            self._send_leader_and_isr(tp, new, nv, [b for b in a.origin if self._online(b)])
            self._send_leader_and_isr(tp, new, nv, [b for b in a.adding if self._online(b)], is_new=True)
            # A2: adding replicas -> NewReplica. Kafka also requests it for replicas already New or Online (a
            # repeated phase A, a failover) and logs the illegal transition; only NonExistent ones move here
            self._to_replica(now, tp, [b for b in a.adding if self.replica_states.state((tp[0], tp[1], b))
                                       is RS.NonExistentReplica], RS.NewReplica)
            return
        # B1/B2: the new replicas are online; the controller's assignment is the target from now on
        self._to_replica(now, tp, list(a.adding), RS.OnlineReplica)
        target = list(a.target)
        live = [b for b in target if self._replica_online(b, tp)]
        if state["leader"] not in target or not self._replica_online(state["leader"], tp):
            e = reassign_election(target, state["isr"], live)  # B3: ReassignPartitionLeaderElectionStrategy
            if not self._partition_ok(now, tp, PS.OnlinePartition):
                pass  # refused by the partition state machine (logged); the reassignment step goes on (6.3)
            elif e is None:
                self._line(now, tp, f"Failed to elect leader for partition {tp[0]}-{tp[1]} under strategy "
                                    f"ReassignPartitionLeaderElectionStrategy")
            else:
                new = {"leader": e.leader, "leader_epoch": state["leader_epoch"] + 1, "isr": list(e.isr),
                       "controller_epoch": self.epoch}
                nv = self._write(tp, new, v, now)
                self._line(now, tp, f"Changed partition {tp[0]}-{tp[1]} from OnlinePartition to OnlinePartition "
                                    f"with state LeaderAndIsr(leader={e.leader}, leaderEpoch={new['leader_epoch']}, "
                                    f"isr={F.csv(e.isr)}, zkVersion={nv})")
                self._send_leader_and_isr(tp, new, nv, live, replicas=target)
                self.partition_states.set(tp, PS.OnlinePartition)
        else:
            new = {**state, "leader_epoch": state["leader_epoch"] + 1, "controller_epoch": self.epoch}
            nv = self._write(tp, new, v, now)
            self._send_leader_and_isr(tp, new, nv, live, replicas=target)
        self._stop_removed_replicas(now, tp, list(a.removing), target)  # B4
        self.zk.set_partition_assignment(tp, target,  # B5: AR = TRS, written last
                                         expected_controller_epoch_version=self.epoch_version)
        st, sv = self._state(tp)
        self._record(now, tp, st, sv)
        self.reassigning.pop(tp, None)  # B6
        if tp in self.zk_reassigning:
            self._remove_zk_entry(tp)
        self._line(now, tp, f"Completed reassignment of {tp[0]}-{tp[1]} to replicas {F.csv(target)}")
        self._send_update_metadata(now)  # B7

    def _stop_removed_replicas(self, now: int, tp: TP, removed: list[int], remaining: list[int]) -> None:
        """stopRemovedReplicasOfReassignedPartition: OfflineReplica (StopReplica without delete, out of
        the ISR with an epoch bump each), then ReplicaDeletionStarted (StopReplica with delete); the
        controller does not wait for the deletion."""
        removed = self._to_replica(now, tp, removed, RS.OfflineReplica)
        for b in removed:
            if self._online(b):
                self._send_stop_replica(b, tp, self._state(tp)[0]["leader_epoch"], delete=False)
            self._remove_from_isr(now, tp, b, replicas=remaining)
        for b in self._to_replica(now, tp, removed, RS.ReplicaDeletionStarted):
            if self._online(b):
                self._send_stop_replica(b, tp, self._state(tp)[0]["leader_epoch"], delete=True)
        self._to_replica(now, tp, self._to_replica(now, tp, removed, RS.ReplicaDeletionSuccessful),
                         RS.NonExistentReplica)

    # ------------------------------------------------------------------ elections on request (6.4, 11.4, 10)
    def _on_elect_leaders(self, now: int, key: str, election_type: str, tps: list[TP] | None) -> None:
        """processReplicaLeaderElection (ElectLeaders, KIP-460). Results: None (elected), or (error, message)."""
        results: dict[TP, tuple[str, str] | None] = {}
        wanted = self.partitions() if tps is None else sorted(set(tps))
        for tp in wanted:
            if not self._known(tp) or not self.zk.has_partition_state(tp):
                results[tp] = ("UNKNOWN_TOPIC_OR_PARTITION", "The partition does not exist.")
                continue
            state, v = self._state(tp)
            reps = self._assignment(tp)
            if election_type == "preferred":
                needed = state["leader"] != reps[0]
            else:
                needed = state["leader"] < 0 or not self._online(state["leader"])
            if not needed:
                if tps is not None:  # the broker drops these for an all-partitions request
                    results[tp] = ("ELECTION_NOT_NEEDED", "Leader election not needed for topic partition.")
                continue
            if not self._partition_ok(now, tp, PS.OnlinePartition):
                continue  # Kafka's PartitionStateMachine gives no result for it
            results[tp] = self._elect_one(now, tp, state, v, election_type)
        self.out.admin_results.append(ins.AdminResult(key, results))

    def _elect_one(self, now: int, tp: TP, state: dict, v: int, election_type: str) -> tuple[str, str] | None:
        reps = self._assignment(tp)
        live = [b for b in reps if self._replica_online(b, tp)]
        if election_type == "preferred":
            e = preferred_election(reps, state["isr"], live)
            if e is None:
                return "PREFERRED_LEADER_NOT_AVAILABLE", "Failed to elect leader for partition " \
                    f"{tp[0]}-{tp[1]} under strategy PreferredReplicaPartitionLeaderElectionStrategy"
        else:
            e = offline_election(reps, state["isr"], live, unclean_allowed=True)
            if e is None:
                return "ELIGIBLE_LEADERS_NOT_AVAILABLE", "Failed to elect leader for partition " \
                    f"{tp[0]}-{tp[1]} under strategy OfflinePartitionLeaderElectionStrategy(true)"
        self._apply_election(now, tp, state, v, e, live)
        return None

    def _on_auto_rebalance(self, now: int) -> None:
        """checkAndTriggerAutoLeaderRebalance: per preferred broker, an imbalance above
        leader.imbalance.per.broker.percentage runs preferred elections."""
        for tp in self.imbalanced():
            state, v = self._state(tp)
            reps = self._assignment(tp)
            if (self._replica_online(reps[0], tp) and reps[0] in state["isr"]
                    and self._partition_ok(now, tp, PS.OnlinePartition)):
                self._line(now, tp, f"Starting auto preferred replica leader election for {tp[0]}-{tp[1]}")
                self._elect_one(now, tp, state, v, "preferred")

    def imbalanced(self) -> list[TP]:
        """The partitions a leader-rebalance check would try to move back to their preferred leader: those
        not led by it, of each preferred broker whose share of them is above
        leader.imbalance.per.broker.percentage; none (2.8) while a partition is being reassigned anywhere.
        Later Kafka dropped that condition, which
        `emulator.auto.rebalance.during.reassignment: true` selects. Reads only."""
        cfg = self.settings()
        pct = float(cfg.leader_imbalance_per_broker_percentage)
        if self.reassigning and not cfg.auto_rebalance_during_reassignment:
            return []  # 2.8: every candidate fails `partitionsBeingReassigned.isEmpty`
        by_broker: dict[int, list[tuple[TP, int]]] = {}  # preferred broker -> (partition, its leader)
        deleting = set(self.zk.topics_to_delete())
        for tp, reps, state, _ in self._stored():
            if tp[0] not in deleting:
                by_broker.setdefault(reps[0], []).append((tp, state["leader"]))
        out: list[TP] = []
        for b, tps in sorted(by_broker.items()):
            off = [tp for tp, leader in tps if leader != b]
            if len(off) / len(tps) > pct / 100:
                out += off
        return out

    # ------------------------------------------------------------------ log-dir failure (KIP-112, 9.5)
    def _on_log_dir_failure(self, now: int, replicas: pd.DataFrame) -> None:
        """onReplicasBecomeOffline for replicas a broker reported on failed log dirs: elect leaders
        elsewhere for the partitions they led, then take them out of the ISRs."""
        newly: list[tuple[int, TP]] = []
        for r in replicas.itertuples():
            tp = (r.topic, int(r.partition))
            if tp not in self.offline_replicas.setdefault(int(r.broker), set()):
                self.offline_replicas[int(r.broker)].add(tp)
                newly.append((int(r.broker), tp))
        if not newly:
            return
        self._line(now, None, "Replicas " + ", ".join(f"[{t}-{p}, broker {b}]" for b, (t, p) in newly)
                   + " went offline (KAFKA_STORAGE_ERROR)")
        led = sorted({tp for b, tp in newly if self.zk.has_partition_state(tp) and self._state(tp)[0]["leader"] == b})
        self._to_partition(now, led, PS.OfflinePartition)
        self._elect_offline(now, led)
        for b, tp in newly:
            if self.zk.has_partition_state(tp) and self._to_replica(now, tp, [b], RS.OfflineReplica):
                self._remove_from_isr(now, tp, b)
        self._send_update_metadata(now)

    def take(self) -> Requests:
        out, self.out = self.out, Requests()
        return out

    # ------------------------------------------------------------------ persistence (run_dir.py)
    _HOOKS = ("zk", "topic_config", "delete_enabled", "settings")

    def to_dict(self) -> dict[str, Any]:
        """This controller's own state as plain data (not the ZooKeeper and config hooks it is given)."""
        return {k: to_plain(v) for k, v in self.plain_fields()}

    def plain_fields(self) -> Iterator[tuple[str, Any]]:
        """to_dict's fields as they are (plaindata.dump_fields writes them one by one)."""
        return ((f.name, getattr(self, f.name)) for f in fields(self) if f.name not in self._HOOKS)

    @classmethod
    def from_dict(cls, d: dict[str, Any], zk: ZooKeeper, **hooks: Callable) -> KafkaController:
        return cls(zk=zk, **hooks, **{k: from_plain(v) for k, v in d.items()})
