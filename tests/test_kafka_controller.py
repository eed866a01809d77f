"""The controller's request validation and broker-side fencing, without Spark (golden H-01, H-02)."""

from __future__ import annotations

import pandas as pd

from sparkkafka.controller.events import AlterIsrReceived, BrokerChange
from sparkkafka.controller.kafka_controller import KafkaController
from sparkkafka.controller.zookeeper import ZooKeeper
from sparkkafka.protocol import frames as F
from sparkkafka.protocol.config import TopicSettings, broker_config
from sparkkafka.protocol.controller_requests import stop_replicas
from sparkkafka.protocol.leader_and_isr import new_broker_rows


def controller():
    zk = ZooKeeper()
    for b in (1, 2, 3):
        zk.register_broker(b)
    zk.create_topic("t", {0: [1, 2, 3]})
    c = KafkaController.elect(zk, 1, topic_config=lambda t: TopicSettings.of(broker_config(None), {}))
    c.process(0)
    c.take()
    return zk, c


def alter(c, leader_epoch, zk_version, isr="1,2"):
    req = F.conform(pd.DataFrame([{"broker": 1, "topic": "t", "partition": 0, "leader_epoch": leader_epoch,
                                   "zk_version": zk_version, "controller_epoch": c.epoch, "isr": isr,
                                   "kind": "shrink"}]), F.ISR_CHANGE)
    c.queue.append(AlterIsrReceived(req))
    c.process(0)
    return c.take().frames()["isr_results"].iloc[0]


def test_alter_isr_validation_order():
    """H-02 as the 2.8 ZooKeeper controller checks it: an older leader epoch is fenced, a stale
    partition version fails the conditional write, a current request commits with version+1."""
    zk, c = controller()
    state, v = zk.get_partition_state(("t", 0))
    assert (state["leader"], state["isr"], v) == (1, [1, 2, 3], 0)
    assert alter(c, -1, 0).error == "FENCED_LEADER_EPOCH"
    assert alter(c, 0, 5).error == "INVALID_UPDATE_VERSION"
    ok = alter(c, 0, 0)
    assert ok.error is None and ok.zk_version == 1
    assert zk.get_partition_state(("t", 0))[0]["isr"] == [1, 2]
    assert alter(c, 0, 1).error is None  # nothing to change: success with the current state


def test_controller_epoch_fences_a_zombie_controller_write():
    """H-01: a new controller's registration moves /controller_epoch; the old one's next write
    fails the version check and it resigns."""
    zk, old = controller()
    zk.unregister_broker(1)  # its session expired: /controller goes with it
    new = KafkaController.elect(zk, 2, topic_config=old.topic_config)
    assert (old.epoch, new.epoch) == (1, 2)
    old.live = {1: 1, 2: 2, 3: 3}
    old.queue.append(BrokerChange())  # it wakes up and handles what it missed
    old.process(0)
    assert old.resigned
    assert zk.get_partition_state(("t", 0))[1] == 0  # nothing it tried was written


def test_stale_stop_replica_is_refused_whole():
    """H-01 case c: after LeaderAndIsr from controller epoch 10, a StopReplica from epoch 0 stops nothing."""
    brokers = new_broker_rows([1]).assign(controller_epoch=10)
    rep = F.new_replicas(pd.DataFrame([{"broker": 1, "topic": "t", "partition": 0, "log_dir": "d0", "leader": 2,
                                        "leader_epoch": 3, "controller_epoch": 10, "isr": "2,1", "replicas": "2,1",
                                        "leo": 5, "hw": 5, "last_fetched_epoch": 3, "epoch_cache": "3:0",
                                        "zk_version": 0}]))
    stop = F.conform(pd.DataFrame([{"broker": 1, "topic": "t", "partition": 0, "leader_epoch": 3,
                                    "controller_epoch": 0, "delete": True, "controller_id": 2,
                                    "correlation_id": 4}]), F.STOP_REPLICA)
    r, _, deleted, lines = stop_replicas(rep, F.empty(F.REMOTE), brokers, stop)
    assert len(r) == 1 and deleted.empty
    assert lines.message.tolist() == [  # ReplicaManager.stopReplicas' words
        "[Broker id=1] Handling StopReplica request correlationId 4 from controller 2 for 1 partitions",
        "[Broker id=1] Received StopReplica request StopReplicaPartitionState(partitionIndex=0, leaderEpoch=3, "
        "deletePartition=true) correlation id 4 from controller 2 epoch 0 for partition t-0",
        "[Broker id=1] Ignoring StopReplica request from controller 2 with correlation id 4 since its controller "
        "epoch 0 is old. Latest known controller epoch is 10"]
    fenced = stop.assign(controller_epoch=10, leader_epoch=2)
    r, _, deleted, lines = stop_replicas(rep, F.empty(F.REMOTE), brokers, fenced)
    assert len(r) == 1 and lines.message.iloc[-1] == (
        "[Broker id=1] Ignoring StopReplica request (delete=true) from controller 2 with correlation id 4 epoch 10 "
        "for partition t-0 since its associated leader epoch 2 is smaller than the current leader epoch 3")
    r, _, deleted, _ = stop_replicas(rep, F.empty(F.REMOTE), brokers, stop.assign(controller_epoch=10))
    assert r.empty and deleted[["topic", "partition"]].values.tolist() == [["t", 0]]
