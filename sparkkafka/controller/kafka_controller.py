"""The controller: KafkaController, PartitionStateMachine and ReplicaStateMachine of the
ZooKeeper era (protocol.md sections 4.5, 6, 7), running on the driver.

A controller belongs to a broker. It keeps a context rebuilt from ZooKeeper at failover, handles
events in order (broker changes, ISR changes, controlled shutdown, topic creation and deletion,
config changes), writes partition state to ZooKeeper conditionally on the version it read and
on its own controller-epoch znode version (KAFKA-6082), and queues LeaderAndIsr, UpdateMetadata
and StopReplica requests stamped with its controller epoch. Events that arrive while its broker
is paused wait in its queue; a controller whose session expired meanwhile processes them on
resume as a zombie: its writes fail the version check and its requests carry a stale epoch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from ..protocol import frames as F
from .election import Election, controlled_shutdown_election, offline_election, remove_replica_from_isr
from .zookeeper import BadVersionError, ControllerMovedError, ZooKeeper

TP = tuple[str, int]


@dataclass
class Requests:
    """Requests a controller has decided to send, per kind (frames LEADER_AND_ISR, STOP_REPLICA,
    UPDATE_METADATA), plus the partition_state rows of its writes and its state-change lines."""

    leader_and_isr: list[tuple] = field(default_factory=list)
    stop_replica: list[tuple] = field(default_factory=list)
    update_metadata: list[tuple] = field(default_factory=list)
    writes: list[dict] = field(default_factory=list)
    lines: list[tuple] = field(default_factory=list)
    isr_results: list[tuple] = field(default_factory=list)  # AlterIsr responses, frame ISR_RESULT

    def frames(self) -> dict[str, pd.DataFrame]:
        return {
            "leader_and_isr": _frame(self.leader_and_isr, F.LEADER_AND_ISR),
            "stop_replica": _frame(self.stop_replica, F.STOP_REPLICA),
            "update_metadata": _frame(self.update_metadata, F.UPDATE_METADATA),
            "isr_results": _frame(self.isr_results, F.ISR_RESULT),
        }


def _frame(rows: list[tuple], spec: dict) -> pd.DataFrame:
    if not rows:
        return F.empty(spec)
    return F.conform(pd.DataFrame(rows, columns=list(spec)), spec)


@dataclass
class KafkaController:
    """One broker's controller module while it is (or believes it is) the active controller."""

    broker: int
    zk: ZooKeeper
    topic_config: Callable[[str], dict]
    delete_enabled: Callable[[], bool] = lambda: True
    epoch: int = 0
    epoch_version: int = -1
    live: dict[int, int] = field(default_factory=dict)  # broker -> broker epoch, as the context knows
    shutting_down: set[int] = field(default_factory=set)
    queue: list[tuple] = field(default_factory=list)
    resigned: bool = False
    unclean_elections: int = 0
    out: Requests = field(default_factory=Requests)

    # ------------------------------------------------------------------ election of the controller
    @classmethod
    def elect(cls, zk: ZooKeeper, broker: int, **kw) -> KafkaController | None:
        """KafkaController.elect: register /controller and bump /controller_epoch in one multi-op."""
        if zk.controller() is not None:
            return None
        _, version = zk.controller_epoch()
        epoch, new_version = zk.register_controller_and_increment_epoch(broker, version)
        c = cls(broker=broker, zk=zk, epoch=epoch, epoch_version=new_version, **kw)
        c.queue.append(("failover",))
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
        self.out.writes.append({"time_ms": now, "topic": tp[0], "partition": tp[1], **self._row(state),
                                "replicas": self._assignment(tp), "version": v})
        return v

    @staticmethod
    def _row(state: dict) -> dict:
        return {"leader": state["leader"], "isr": list(state["isr"]), "leader_epoch": state["leader_epoch"],
                "controller_epoch": state["controller_epoch"]}

    def _assignment(self, tp: TP) -> list[int]:
        return self.zk.replicas_of(tp)

    def partitions(self) -> list[TP]:
        """Partitions that have a state znode (New partitions have none yet)."""
        return sorted((t, p) for t in self.zk.topics() for p in self.zk.topic_assignment(t)
                      if self.zk.has_partition_state((t, p)))

    def _line(self, now: int, tp: TP | None, message: str) -> None:
        t, p = tp if tp else (None, None)
        self.out.lines.append((now, self.broker, self.epoch, t, p, f"[Controller id={self.broker} epoch={self.epoch}] {message}"))

    # ------------------------------------------------------------------ requests
    def _online(self, b: int) -> bool:
        return b in self.live and b not in self.shutting_down

    def _send_leader_and_isr(self, tp: TP, state: dict, version: int, to: list[int], is_new: bool = False) -> None:
        reps = F.csv(self._assignment(tp))
        for b in to:
            self.out.leader_and_isr.append((b, tp[0], tp[1], state["leader"], state["leader_epoch"], self.epoch,
                                            F.csv(state["isr"]), reps, is_new, None, version))

    def _send_update_metadata(self) -> None:
        for b in sorted(self.live):
            self.out.update_metadata.append((b, self.epoch, self.broker, F.csv(sorted(self.live))))

    def _send_stop_replica(self, b: int, tp: TP, leader_epoch: int, delete: bool) -> None:
        self.out.stop_replica.append((b, tp[0], tp[1], leader_epoch, self.epoch, delete))

    # ------------------------------------------------------------------ event loop
    def process(self, now: int) -> None:
        """Handle every queued event; a write refused because another controller took over makes
        this one resign (the rest of its queue is dropped, as Kafka's controller does)."""
        while self.queue and not self.resigned:
            ev = self.queue.pop(0)
            try:
                getattr(self, f"_on_{ev[0]}")(now, *ev[1:])
            except ControllerMovedError:
                self._line(now, None, "Controller moved to another broker. Resigning")
                self.resigned = True
                self.queue.clear()

    def _on_failover(self, now: int) -> None:
        """onControllerFailover (7.2): context from ZooKeeper, replicas online or offline, elections."""
        self.live = dict(self.zk.live_brokers())
        self.shutting_down.clear()
        self._line(now, None, f"Starting become controller state transition (epoch {self.epoch})")
        self._send_update_metadata()
        for tp in self.partitions():
            state, v = self._state(tp)
            online = [b for b in self._assignment(tp) if self._online(b)]
            self._send_leader_and_isr(tp, state, v, online)
        dead = {b for tp in self.partitions() for b in self._assignment(tp) if not self._online(b)}
        self._offline_replicas(now, sorted(dead))
        self._elect_offline(now, self._offline_partitions())
        self._on_new_partitions(now)
        self._on_topic_deletion(now)

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
            self._on_broker_failure(now, dead + bounced)
        if new or bounced:
            self.live.update({b: current[b] for b in new + bounced})
            self._on_broker_startup(now, sorted(new + bounced))

    def _on_broker_failure(self, now: int, dead: list[int]) -> None:
        self._line(now, None, f"Broker failure callback for {', '.join(map(str, dead))}")
        led = [tp for tp in self.partitions() if self._state(tp)[0]["leader"] in dead]
        self._elect_offline(now, led)
        self._offline_replicas(now, dead)
        self._send_update_metadata()

    def _on_broker_startup(self, now: int, new: list[int]) -> None:
        self._line(now, None, f"New broker startup callback for {', '.join(map(str, new))}")
        self._send_update_metadata()
        for tp in self.partitions():
            on = [b for b in self._assignment(tp) if b in new]
            if on:
                state, v = self._state(tp)
                self._send_leader_and_isr(tp, state, v, on)
        self._elect_offline(now, self._offline_partitions())
        self._on_new_partitions(now)
        if self.zk.topics_to_delete():
            self._on_topic_deletion(now)  # topics that waited for this broker

    def _offline_partitions(self) -> list[TP]:
        return [tp for tp in self.partitions() if not self._online(self._state(tp)[0]["leader"])]

    def _elect_offline(self, now: int, tps: list[TP], force_unclean: bool = False) -> None:
        """Offline partition election (6.2): first live ISR replica, else (unclean) first live one."""
        for tp in tps:
            state, v = self._state(tp)
            if state["controller_epoch"] > self.epoch:
                continue
            unclean = force_unclean or bool(self.topic_config(tp[0])["unclean.leader.election.enable"])
            live = [b for b in self._assignment(tp) if self._online(b)]
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

    def _offline_replicas(self, now: int, brokers: list[int]) -> None:
        """OfflineReplica (4.5): drop each replica from the ISR (leader -1 if it led; the last ISR
        member is kept), leader epoch +1, LeaderAndIsr to the other live replicas."""
        parts = self.partitions()
        for b in brokers:
            for tp in parts:
                if b not in self._assignment(tp):
                    continue
                state, v = self._state(tp)
                if b not in state["isr"]:
                    continue
                leader, isr = remove_replica_from_isr(state["leader"], state["isr"], b)
                new = {"leader": leader, "leader_epoch": state["leader_epoch"] + 1, "isr": list(isr),
                       "controller_epoch": self.epoch}
                nv = self._write(tp, new, v, now)
                self._line(now, tp, f"Removed replica {b} from ISR of {tp[0]}-{tp[1]}: LeaderAndIsr(leader={leader}, "
                                    f"leaderEpoch={new['leader_epoch']}, isr={F.csv(isr)}, zkVersion={nv})")
                others = [x for x in self._assignment(tp) if x != b and self._online(x)]
                self._send_leader_and_isr(tp, new, nv, others)

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
                alive = [x for x in reps if x in self.live]
                e = controlled_shutdown_election(reps, state["isr"], alive, self.shutting_down)
                if e is not None:
                    self._apply_election(now, tp, state, v, e, alive)
            elif state["leader"] >= 0:
                self._send_stop_replica(b, tp, state["leader_epoch"], delete=False)
                if b in state["isr"]:
                    leader, isr = remove_replica_from_isr(state["leader"], state["isr"], b)
                    new = {"leader": leader, "leader_epoch": state["leader_epoch"] + 1, "isr": list(isr),
                           "controller_epoch": self.epoch}
                    nv = self._write(tp, new, v, now)
                    self._send_leader_and_isr(tp, new, nv, [x for x in reps if x != b and self._online(x)])

    def _on_new_partitions(self, now: int) -> None:
        """Partitions whose topic znode exists but which have no state yet: New -> Online (6.1),
        leader = first live replica, ISR = the live replicas; none live keeps them New."""
        for t in sorted(self.zk.topics()):
            for p, reps in sorted(self.zk.topic_assignment(t).items()):
                tp = (t, p)
                if self.zk.has_partition_state(tp):
                    continue
                alive = [b for b in reps if self._online(b)]
                if not alive:
                    continue
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
                for b in reps:
                    self._send_stop_replica(b, (t, p), -2, delete=True)
                self.out.writes.append({"time_ms": now, "topic": t, "partition": p, "leader": -2, "isr": [],
                                        "leader_epoch": -2, "controller_epoch": self.epoch,
                                        "replicas": list(reps), "version": -1})
            self.zk.delete_topic_znodes(t, expected_controller_epoch_version=self.epoch_version)
            self.zk.delete_topic_deletion_node(t, expected_controller_epoch_version=self.epoch_version)
            self._line(now, None, f"Deletion of topic {t} successfully completed")
        self._send_update_metadata()

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
                results.append((r.broker, r.topic, r.partition, r.leader_epoch, r.isr, r.zk_version,
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
            results.append((r.broker, r.topic, r.partition, r.leader_epoch, r.isr, nv, err))
        if len(requests):
            self._send_update_metadata()

    def _on_isr_change_notification(self, now: int) -> None:
        """Before 2.7 leaders write their ISR themselves and leave a notification; the controller
        re-reads those partitions and propagates them with UpdateMetadata (4.4)."""
        for name, _parts in self.zk.isr_change_notifications():
            self.zk.delete_isr_change_notification(name)
        self._send_update_metadata()

    def take(self) -> Requests:
        out, self.out = self.out, Requests()
        return out
