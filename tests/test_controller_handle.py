"""KafkaController.handle(*events, now) -> instructions, driven without Spark: typed events in,
typed LeaderAndIsr / UpdateMetadata / StopReplica / IsrResult / AdminResult out, and Kafka's
partition and replica state machines (PartitionStateMachine, ReplicaStateMachine)."""

from __future__ import annotations

import random

import pandas as pd
import pytest

from sparkkafka.controller.control_plane import ControlPlane
from sparkkafka.controller.events import (
    AlterIsrReceived,
    ApiPartitionReassignment,
    BrokerChange,
    ControllerFailover,
    ReplicaLeaderElection,
    TopicChange,
)
from sparkkafka.controller.instructions import (
    AdminResult,
    IsrResult,
    LeaderAndIsr,
    StopReplica,
    UpdateMetadata,
)
from sparkkafka.controller.kafka_controller import KafkaController
from sparkkafka.controller.state_machines import (
    PARTITION_VALID_PREVIOUS,
    REPLICA_VALID_PREVIOUS,
    PartitionState,
    PartitionStateMachine,
    ReplicaState,
    ReplicaStateMachine,
)
from sparkkafka.controller.zookeeper import ZooKeeper
from sparkkafka.protocol import frames as F
from sparkkafka.protocol.config import TopicSettings, broker_config
from sparkkafka.scenario.model import TopicSpec

PS, RS = PartitionState, ReplicaState
CLEAN = TopicSettings.of(broker_config(None), {})  # Kafka's defaults: unclean.leader.election.enable false


def cluster(brokers, assignment, controller=None):
    """ZooKeeper with `brokers` registered and topic t, a controller elected on `controller` (default
    the last broker, so that it survives a crash of the first) and its failover handled."""
    zk = ZooKeeper()
    for b in brokers:
        zk.register_broker(b)
    zk.create_topic("t", assignment)
    c = KafkaController.elect(zk, brokers[-1] if controller is None else controller, topic_config=lambda t: CLEAN)
    assert c.queue == [ControllerFailover()]
    c.handle(now=0)
    return zk, c


def of(kind, out):
    return [i for i in out if isinstance(i, kind)]


def test_failover_of_a_crashed_leader():
    """Broker 1 leads t-0 and follows t-1; its session ends (BrokerChange): t-0 elects the first live ISR
    replica in AR order with leader epoch +1, t-1 drops 1 from its ISR (epoch +1), LeaderAndIsr goes to
    the live replicas only, and UpdateMetadata to the live brokers. Each request carries the next
    correlation id of the controller's client to its broker: the failover's UpdateMetadata (0),
    LeaderAndIsr (1), the UpdateMetadata that ends its topic-deletion step (2), so 3 and 4 here."""
    zk, c = cluster([1, 2, 3], {0: [1, 2, 3], 1: [2, 3, 1]})
    assert zk.get_partition_state(("t", 0)) == ({"leader": 1, "leader_epoch": 0, "isr": [1, 2, 3],
                                                 "controller_epoch": 1}, 0)
    assert c.partition_states.state(("t", 0)) is PS.OnlinePartition
    zk.unregister_broker(1)
    out = c.handle(BrokerChange(), now=10)
    assert all(type(i) in (LeaderAndIsr, UpdateMetadata) for i in out)
    assert of(LeaderAndIsr, out) == [
        LeaderAndIsr(b, "t", 0, 2, 1, 1, "2,3", "1,2,3", False, None, 1, controller_id=3, correlation_id=3)
        for b in (2, 3)
    ] + [LeaderAndIsr(b, "t", 1, 2, 1, 1, "2,3", "2,3,1", False, None, 1, controller_id=3, correlation_id=3)
         for b in (2, 3)]
    assert of(UpdateMetadata, out) == [UpdateMetadata(b, 1, 3, "2,3", correlation_id=4) for b in (2, 3)]
    assert zk.get_partition_state(("t", 0))[0] == {"leader": 2, "leader_epoch": 1, "isr": [2, 3],
                                                   "controller_epoch": 1}
    assert c.partition_states.state(("t", 0)) is PS.OnlinePartition
    assert c.replica_states.state(("t", 0, 1)) is RS.OfflineReplica
    assert any("from OfflinePartition to OnlinePartition" in x[-1] for x in c.last_lines)
    # the same instructions are what the control plane's frames carry, row for row
    zk.register_broker(1)
    back = c.handle(BrokerChange(), now=20)
    assert c.replica_states.state(("t", 0, 1)) is RS.OnlineReplica
    assert [i.broker for i in of(LeaderAndIsr, back)] == [1, 1]  # current state; not back in the ISR
    assert of(LeaderAndIsr, back)[0].isr == "2,3"
    # broker 1 came back: the controller's new client to it counts from 0 again, the others' go on
    assert [(i.broker, i.correlation_id) for i in of(UpdateMetadata, back)] == [(1, 0), (2, 5), (3, 5)]
    assert {i.correlation_id for i in of(LeaderAndIsr, back)} == {1}


def test_all_replicas_dead_then_no_election_without_unclean():
    """6.7: both ISR members die; the election finds no live ISR member and the partition stays Offline."""
    zk, c = cluster([1, 2, 3], {0: [1, 2]})
    zk.unregister_broker(1)
    zk.unregister_broker(2)
    out = c.handle(BrokerChange(), now=5)
    assert zk.get_partition_state(("t", 0))[0]["leader"] == -1
    assert c.partition_states.state(("t", 0)) is PS.OfflinePartition
    # broker 3 holds no replica: the failover sent it UpdateMetadata twice (ids 0, 1), no LeaderAndIsr
    assert of(UpdateMetadata, out) == [UpdateMetadata(3, 1, 3, "3", correlation_id=2)]
    assert any("Failed to elect leader for partition t-0" in x[-1] for x in c.last_lines)


def test_valid_previous_states_are_kafkas():
    assert PARTITION_VALID_PREVIOUS == {
        PS.NewPartition: (PS.NonExistentPartition,),
        PS.OnlinePartition: (PS.NewPartition, PS.OnlinePartition, PS.OfflinePartition),
        PS.OfflinePartition: (PS.NewPartition, PS.OnlinePartition, PS.OfflinePartition),
        PS.NonExistentPartition: (PS.OfflinePartition,),
    }
    live = (RS.NewReplica, RS.OnlineReplica, RS.OfflineReplica, RS.ReplicaDeletionIneligible)
    assert REPLICA_VALID_PREVIOUS == {
        RS.NewReplica: (RS.NonExistentReplica,),
        RS.OnlineReplica: live,
        RS.OfflineReplica: live,
        RS.ReplicaDeletionStarted: (RS.OfflineReplica,),
        RS.ReplicaDeletionSuccessful: (RS.ReplicaDeletionStarted,),
        RS.ReplicaDeletionIneligible: (RS.OfflineReplica, RS.ReplicaDeletionStarted),
        RS.NonExistentReplica: (RS.ReplicaDeletionSuccessful,),
    }


@pytest.mark.parametrize("target", list(PartitionState))
def test_partition_transitions_follow_the_table(target):
    for current in PartitionState:
        m = PartitionStateMachine(controller_id=1, epoch=3)
        m.set(("t", 0), current)
        logged: list[str] = []
        moved = m.transition([("t", 0)], target, lambda k, msg, logged=logged: logged.append(msg))
        legal = current in PARTITION_VALID_PREVIOUS[target]
        assert (moved == [("t", 0)]) is legal and (not logged) is legal
        assert m.state(("t", 0)) is (target if legal else current)


@pytest.mark.parametrize("target", list(ReplicaState))
def test_replica_transitions_follow_the_table(target):
    for current in ReplicaState:
        m = ReplicaStateMachine(controller_id=1, epoch=3)
        m.set(("t", 0, 2), current)
        logged: list[str] = []
        moved = m.transition([("t", 0, 2)], target, lambda k, msg, logged=logged: logged.append(msg))
        legal = current in REPLICA_VALID_PREVIOUS[target]
        assert (moved == [("t", 0, 2)]) is legal and (not logged) is legal
        assert m.state(("t", 0, 2)) is (target if legal else current)
    m = ReplicaStateMachine(controller_id=1, epoch=3)
    assert m.transition([("t", 0, 2)], RS.ReplicaDeletionStarted, lambda k, msg: logged.append(msg)) == []
    assert logged[-1] == ("Controller 1 epoch 3 initiated state change of replica 2 for partition t-0 from "
                          "NonExistentReplica to ReplicaDeletionStarted failed: java.lang.IllegalStateException: "
                          "Replica [Topic=t,Partition=0,Replica=2] should be in the OfflineReplica states before "
                          "moving to ReplicaDeletionStarted state. Instead it is in NonExistentReplica state")


def test_an_illegal_transition_is_logged_and_skipped():
    """A partition the controller's context does not have (NonExistentPartition) cannot go Online: the
    preferred election asked for it is refused with the state-change log's error, ZooKeeper untouched."""
    zk, c = cluster([1, 2, 3], {0: [1, 2, 3]})
    c.handle(ReplicaLeaderElection("k0", "unclean", [("t", 0)]), now=1)  # not needed: leader 1 is live
    state_before = zk.get_partition_state(("t", 0))
    c.partition_states.set(("t", 0), PS.NonExistentPartition)
    zk.unregister_broker(1)
    out = c.handle(BrokerChange(), now=5)
    msgs = [x[-1] for x in c.last_lines]
    assert any("from NonExistentPartition to OfflinePartition" in m for m in msgs)
    assert any("Partition t-0 should be in one of NewPartition,OnlinePartition,OfflinePartition states before "
               "moving to OnlinePartition state. Instead it is in NonExistentPartition state" in m for m in msgs)
    # no election: only the OfflineReplica step removed broker 1 from the ISR (leader -1, epoch +1)
    assert zk.get_partition_state(("t", 0))[0] == {"leader": -1, "leader_epoch": 1, "isr": [2, 3],
                                                   "controller_epoch": 1}
    assert state_before[0]["leader"] == 1
    assert [(i.broker, i.leader) for i in of(LeaderAndIsr, out)] == [(2, -1), (3, -1)]


def test_reassignment_kip455_steps():
    """8.2 for [1,2,3] -> [2,3,4]: U stores RS [2,3,4,1] adding [4] removing [1]; phase A bumps the epoch
    and sends LeaderAndIsr to the originals and (isNew) to 4; the ISR commit that adds 4 completes it:
    phase B elects 2 (leader 1 leaves), takes 1 out of the ISR, StopReplica without then with delete,
    RS = [2,3,4], UpdateMetadata."""
    zk, c = cluster([1, 2, 3, 4], {0: [1, 2, 3]}, controller=4)
    tp = ("t", 0)
    out = c.handle(ApiPartitionReassignment("k1", {tp: [2, 3, 4]}), now=10)
    assert of(AdminResult, out) == [AdminResult("k1", {tp: None})]
    assert c.reassigning[tp].replicas == (2, 3, 4, 1)
    z = zk.topic_znode("t")
    assert (list(z.replicas[0]), list(z.adding[0]), list(z.removing[0])) == ([2, 3, 4, 1], [4], [1])
    assert of(LeaderAndIsr, out) == [LeaderAndIsr(b, "t", 0, 1, 1, 1, "1,2,3", "2,3,4,1", b == 4, None, 1,
                                                  controller_id=4, correlation_id=2 if b == 4 else 3)
                                     for b in (2, 3, 1, 4)]  # ORS in RS order, then adding (4 had no LeaderAndIsr)
    assert c.replica_states.state(("t", 0, 4)) is RS.NewReplica
    assert not of(StopReplica, out) and not of(UpdateMetadata, out)

    # broker 4 caught up: leader 1 asks for ISR 1,2,3,4 (AlterIsr, 2.7+)
    req = F.conform(pd.DataFrame([{"broker": 1, "topic": "t", "partition": 0, "leader_epoch": 1, "zk_version": 1,
                                   "controller_epoch": 1, "isr": "1,2,3,4", "kind": "expand"}]), F.ISR_CHANGE)
    out = c.handle(AlterIsrReceived(req), now=20)
    assert of(IsrResult, out) == [IsrResult(1, "t", 0, 1, "1,2,3,4", 2, None)]
    assert [(i.broker, i.leader, i.leader_epoch, i.isr, i.replicas) for i in of(LeaderAndIsr, out)] == [
        (2, 2, 2, "1,2,3,4", "2,3,4"), (3, 2, 2, "1,2,3,4", "2,3,4"), (4, 2, 2, "1,2,3,4", "2,3,4"),  # B3
        (2, 2, 3, "2,3,4", "2,3,4"), (3, 2, 3, "2,3,4", "2,3,4"), (4, 2, 3, "2,3,4", "2,3,4"),  # B4: 1 leaves ISR
    ]
    # OfflineReplica: StopReplica (no delete) at the epoch it had, then ReplicaDeletionStarted after the ISR bump
    # one StopReplica request to broker 1 holds both: its id follows the failover's 0-2, phase A's 3 and the
    # UpdateMetadata of the ISR change (4); the reassignment's closing UpdateMetadata is 6
    assert of(StopReplica, out) == [StopReplica(1, "t", 0, 2, 1, False, controller_id=4, correlation_id=5),
                                    StopReplica(1, "t", 0, 3, 1, True, controller_id=4, correlation_id=5)]
    assert [i.correlation_id for i in of(UpdateMetadata, out) if i.broker == 1] == [4, 6]
    assert {i.broker for i in of(UpdateMetadata, out)} == {1, 2, 3, 4}
    assert zk.topic_assignment("t")[0] == [2, 3, 4] and tp not in c.reassigning
    assert c.replica_states.state(("t", 0, 4)) is RS.OnlineReplica
    assert c.replica_states.state(("t", 0, 1)) is RS.NonExistentReplica


def test_new_topic_goes_new_to_online():
    zk, c = cluster([1, 2], {0: [1, 2]})
    zk.create_topic("u", {0: [2, 1], 1: [1, 2]})
    out = c.handle(TopicChange(), now=3)
    assert [(i.broker, i.topic, i.partition, i.leader, i.is_new) for i in of(LeaderAndIsr, out)] == [
        (2, "u", 0, 2, True), (1, "u", 0, 2, True), (1, "u", 1, 1, True), (2, "u", 1, 1, True)]
    assert c.partition_states.state(("u", 1)) is PS.OnlinePartition
    assert c.replica_states.state(("u", 1, 2)) is RS.OnlineReplica


def test_handle_rejects_what_is_not_an_event():
    _, c = cluster([1], {0: [1]})
    with pytest.raises(TypeError):
        c.handle(("broker_change",), now=1)


def _drive(seed: int, profile: str, steps: int = 80,
           reopen=None) -> tuple[ControlPlane, list[str]]:
    """The control plane through random crashes, restarts, pauses, shutdowns, controller failovers,
    topic creations and deletions, reassignments, elections, log-dir failures and ISR changes;
    `reopen(cp, step)`, when given, returns the control plane to go on with after each step."""
    rng = random.Random(seed)
    brokers = [1, 2, 3, 4, 5]
    cp = ControlPlane(brokers, None, broker_config({"inter.broker.protocol.version": profile}), seed, profile)
    cp.start(0)
    crashed: set[int] = set()
    paused: dict[int, int] = {}
    lines: list[str] = []
    for step in range(steps):
        now = 100 * (step + 1)
        for b, end in sorted(paused.items()):
            if now >= end:
                del paused[b]
                cp.resume(b, now)
        up = [b for b in brokers if b not in crashed and b not in paused]
        topics = cp.topics()
        r = rng.random()
        if r < 0.12 or not topics:
            n = rng.randint(1, 3)
            cp.create_topic(TopicSpec(f"t{step}", n, 3, {p: tuple(rng.sample(brokers, 3)) for p in range(n)}), now)
        elif r < 0.24 and up:
            b = rng.choice(up)
            crashed.add(b)
            cp.crash(b, now)
        elif r < 0.36 and crashed:
            b = rng.choice(sorted(crashed))
            crashed.discard(b)
            cp.restart(b, now)
        elif r < 0.40 and up:
            b = rng.choice(up)
            paused[b] = now + rng.choice([300, 40000])
            cp.pause(b, now, paused[b])
        elif r < 0.44 and up:
            b = rng.choice(up)
            cp.shutdown(b, now)
            crashed.add(b)
        elif r < 0.47:
            cp.controller_failover(now)
        elif r < 0.62:
            t = rng.choice(topics)
            if cp.zk.has_partition_state((t, 0)):
                target = None if rng.random() < 0.2 else rng.sample(brokers, rng.randint(1, 3))
                cp.admin(ApiPartitionReassignment(f"k{step}", {(t, 0): target}), now)
        elif r < 0.70:
            cp.admin(ReplicaLeaderElection(f"k{step}", rng.choice(["preferred", "unclean"]), None), now)
        elif r < 0.74:
            cp.delete_topic(rng.choice(topics), now)
        elif r < 0.78:
            t = rng.choice(topics)
            cp.offline_replicas(pd.DataFrame([{"broker": rng.choice(cp.zk.topic_assignment(t)[0]), "topic": t,
                                               "partition": 0}]), now)
        else:
            rows = []
            for t in topics:
                for p, reps in cp.zk.topic_assignment(t).items():
                    if not cp.zk.has_partition_state((t, p)):
                        continue
                    s, v = cp.zk.get_partition_state((t, p))
                    if s["leader"] >= 0:
                        isr = [s["leader"]] + [b for b in reps if b != s["leader"] and rng.random() < 0.7]
                        rows.append({"broker": s["leader"], "topic": t, "partition": p, "leader_epoch": s["leader_epoch"],
                                     "zk_version": v, "controller_epoch": s["controller_epoch"], "isr": F.csv(isr),
                                     "kind": "shrink"})
            if rows:
                cp.isr_changes(F.conform(pd.DataFrame(rows), F.ISR_CHANGE), now, lambda a, b: True)
        cp.tick(now, frozenset(paused))
        cp.take_messages(now, frozenset(paused), crashed)
        lines += [x[-1] for x in cp.take_lines()]
        if reopen is not None:
            cp = reopen(cp, step)
    return cp, lines


@pytest.mark.parametrize("seed,profile", [(s, p) for s in (1, 2, 3) for p in ("2.8", "2.1")])
def test_random_runs_make_no_illegal_transition(seed, profile):
    """The state machines follow what the controller does: in runs of every kind of event no transition
    is refused, and the active controller knows every partition ZooKeeper has."""
    cp, lines = _drive(seed, profile)
    assert not [x for x in lines if "IllegalStateException" in x]
    assert any("Removed replica" in x for x in lines) and any("Completed reassignment" in x for x in lines)
    c = cp.active()
    if c is not None:
        for t in cp.topics():
            for p in cp.zk.topic_assignment(t):
                assert c.partition_states.state((t, p)) is not PS.NonExistentPartition
