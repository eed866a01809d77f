"""The ZooKeeper stand-in: controller election and epochs
(KafkaZkClient.registerControllerAndIncrementControllerEpoch), KAFKA-6082 fencing of zombie controllers,
partition-state compare-and-set, broker epochs (KIP-380), ISR-change notifications, topic deletion markers and
save/load of the run directory's snapshot."""

from __future__ import annotations

import json
import os

import pytest

from sparkkafka.controller.zookeeper import (
    BadVersionError,
    ControllerMovedError,
    NodeExistsError,
    NoNodeError,
    TopicZNode,
    ZooKeeper,
)

TP = ("t", 0)


def state(leader: int, epoch: int, isr: list[int], controller_epoch: int) -> dict:
    return {"leader": leader, "leader_epoch": epoch, "isr": isr, "controller_epoch": controller_epoch}


def elect(zk: ZooKeeper, broker: int) -> tuple[int, int]:
    """KafkaController.elect: read /controller_epoch, then the multi-op."""
    return zk.register_controller_and_increment_epoch(broker, zk.controller_epoch()[1])


def test_first_controller_gets_epoch_1_and_later_ones_increment():
    zk = ZooKeeper()
    assert zk.controller() is None and zk.controller_epoch() == (0, 0)
    zk.register_broker(1)
    zk.register_broker(2)
    assert elect(zk, 1) == (1, 1)
    assert zk.controller() == 1 and zk.controller_epoch() == (1, 1)
    with pytest.raises(NodeExistsError):  # another broker loses while /controller exists
        elect(zk, 2)
    assert zk.controller_epoch() == (1, 1)
    zk.delete_controller()
    assert elect(zk, 2) == (2, 2)


def test_h01_case_a_epoch_persists_with_no_controller():
    zk = ZooKeeper()
    zk.register_broker(0)
    e0, _ = elect(zk, 0)
    zk.unregister_broker(0)  # shutdown: the session's ephemerals go, /controller included
    assert zk.controller() is None and zk.live_brokers() == {}
    assert zk.controller_epoch()[0] == e0
    zk.register_broker(0)
    assert elect(zk, 0)[0] == e0 + 1


def test_register_controller_bad_version_and_node_exists_precedence():
    zk = ZooKeeper()
    elect(zk, 1)
    zk.delete_controller()
    with pytest.raises(BadVersionError):  # the epoch znode moved since this broker read it (version 0)
        zk.register_controller_and_increment_epoch(2, 0)
    assert zk.controller() is None and zk.controller_epoch() == (1, 1)
    elect(zk, 1)
    with pytest.raises(NodeExistsError):  # the create op comes first in the multi
        zk.register_controller_and_increment_epoch(2, 0)
    with pytest.raises(NoNodeError):
        ZooKeeper().delete_controller()


def test_zombie_controller_write_fails_after_new_controller_registered():
    zk = ZooKeeper()
    for b in (1, 2):
        zk.register_broker(b)
    epoch1, v1 = elect(zk, 1)
    zk.create_topic("t", {0: [1, 2]})
    assert (
        zk.create_partition_state(TP, state(1, 0, [1, 2], epoch1), expected_controller_epoch_version=v1) == 0
    )
    zk.delete_controller()  # broker 1's session expires as seen by ZK, but broker 1 still thinks it is controller
    epoch2, v2 = elect(zk, 2)
    assert epoch2 == epoch1 + 1
    _, version = zk.get_partition_state(TP)
    with pytest.raises(ControllerMovedError):
        zk.set_partition_state(TP, state(2, 1, [2], epoch1), version, v1)
    with pytest.raises(BadVersionError):  # ControllerMovedError is a BADVERSION on /controller_epoch
        zk.set_partition_state(TP, state(2, 1, [2], epoch1), version, v1)
    for fenced in (
        lambda: zk.set_assignment("t", {0: [2, 1]}, expected_controller_epoch_version=v1),
        lambda: zk.delete_topic_znodes("t", expected_controller_epoch_version=v1),
        lambda: zk.delete_controller(expected_controller_epoch_version=v1),
    ):
        with pytest.raises(ControllerMovedError):
            fenced()
    assert zk.get_partition_state(TP) == (state(1, 0, [1, 2], epoch1), 0)
    assert zk.set_partition_state(TP, state(2, 1, [2], epoch2), version, v2) == 1


def test_partition_state_cas_versions():
    zk = ZooKeeper()
    with pytest.raises(NoNodeError):  # parent topic znode missing
        zk.create_partition_state(TP, state(1, 0, [1], 1))
    zk.create_topic("t", {0: [1, 2]})
    assert zk.create_partition_state(TP, state(1, 0, [1, 2], 1)) == 0
    with pytest.raises(NodeExistsError):
        zk.create_partition_state(TP, state(1, 0, [1, 2], 1))
    for v in range(3):
        assert zk.set_partition_state(TP, state(1, 0, [1, 2][: 1 + v % 2], 1), v) == v + 1
    with pytest.raises(BadVersionError):  # a leader's stale ISR write loses to the controller's
        zk.set_partition_state(TP, state(1, 0, [1], 1), 1)
    st, version = zk.get_partition_state(TP)
    assert (st, version) == (state(1, 0, [1], 1), 3)
    assert zk.has_partition_state(TP) and not zk.has_partition_state(("t", 1))
    st["isr"].append(9)  # a copy
    assert zk.get_partition_state(TP)[0]["isr"] == [1]
    with pytest.raises(NoNodeError) as missing:
        zk.set_partition_state(("t", 1), state(1, 0, [1], 1), 0)
    assert (
        isinstance(missing.value, KeyError) and str(missing.value) == "/brokers/topics/t/partitions/1/state"
    )
    with pytest.raises(ValueError):
        zk.set_partition_state(TP, {"leader": 1}, 3)



def test_partition_states_reads_the_stored_states_and_can_skip_new_partitions():
    zk = ZooKeeper()
    zk.create_topic("t", {0: [1, 2], 1: [2, 1], 2: [1]})
    zk.create_partition_state(("t", 2), state(1, 3, [1], 1))
    zk.create_partition_state(("t", 0), state(2, 0, [1, 2], 1))
    with pytest.raises(NoNodeError):  # partition 1 has no state znode yet
        list(zk.partition_states("t"))
    got = list(zk.partition_states("t", missing_ok=True))
    assert [(p, list(reps), dict(s), v) for p, reps, s, v in got] == [
        (0, [1, 2], state(2, 0, [1, 2], 1), 0), (2, [1], state(1, 3, [1], 1), 0)]

def test_broker_epoch_is_czxid_and_grows_on_reregistration():
    zk = ZooKeeper()
    e1 = zk.register_broker(1)
    e2 = zk.register_broker(2)
    assert e2 > e1 and zk.live_brokers() == {1: e1, 2: e2}
    with pytest.raises(NodeExistsError):
        zk.register_broker(1)
    zk.create_topic("x", {0: [1]})  # unrelated writes move the zxid too
    zk.unregister_broker(1)
    with pytest.raises(NoNodeError):
        zk.unregister_broker(1)
    e1b = zk.register_broker(1)
    assert e1b > e2 > e1 and e1b == zk.zxid
    assert zk.live_brokers() == {1: e1b, 2: e2}


def test_zxid_counts_successful_writes_only():
    zk = ZooKeeper()
    zk.register_broker(1)
    assert zk.zxid == 1
    with pytest.raises(NodeExistsError):
        zk.register_broker(1)
    assert zk.zxid == 1
    elect(zk, 1)  # creates /controller_epoch, then the multi-op
    assert zk.zxid == 3


def test_isr_change_notifications_are_sequential():
    zk = ZooKeeper()
    n0 = zk.create_isr_change_notification([("t", 0), ("t", 1)])
    n1 = zk.create_isr_change_notification([("u", 2)])
    assert (n0, n1) == ("isr_change_0000000000", "isr_change_0000000001")
    assert zk.isr_change_notifications() == [(n0, [("t", 0), ("t", 1)]), (n1, [("u", 2)])]
    zk.delete_isr_change_notification(n0)
    with pytest.raises(NoNodeError):
        zk.delete_isr_change_notification(n0)
    assert zk.create_isr_change_notification([("t", 0)]) == "isr_change_0000000002"
    assert [n for n, _ in zk.isr_change_notifications()] == [n1, "isr_change_0000000002"]


def test_topics_assignment_and_deletion():
    zk = ZooKeeper()
    zk.create_topic("b", {1: [2, 3], 0: [1, 2]})
    zk.create_topic("a", {0: [1]})
    with pytest.raises(NodeExistsError):
        zk.create_topic("a", {0: [2]})
    assert zk.topics() == ["a", "b"]
    assert zk.topic_assignment("b") == {0: [1, 2], 1: [2, 3]}
    assert zk.topic_znode("b") == TopicZNode({0: (1, 2), 1: (2, 3)}, {}, {}, 0)
    assert zk.set_assignment("b", {0: [1, 2, 4, 5], 1: [2, 3]}, {0: [4, 5], 1: []}, {0: [1, 2]}, 0) == 1
    assert zk.topic_znode("b") == TopicZNode({0: (1, 2, 4, 5), 1: (2, 3)}, {0: (4, 5)}, {0: (1, 2)}, 1)
    with pytest.raises(BadVersionError):
        zk.set_assignment("b", {0: [4, 5], 1: [2, 3]}, expected_version=0)
    assert zk.set_assignment("b", {0: [4, 5], 1: [2, 3]}) == 2  # MatchAnyVersion
    zk.create_partition_state(("b", 0), state(4, 3, [4, 5], 1))
    zk.mark_topic_for_deletion("b")
    with pytest.raises(NodeExistsError):
        zk.mark_topic_for_deletion("b")
    assert zk.topics_to_delete() == ["b"]
    zk.delete_topic_znodes("b")
    with pytest.raises(NoNodeError):
        zk.get_partition_state(("b", 0))
    with pytest.raises(NoNodeError):
        zk.topic_assignment("b")
    zk.delete_topic_deletion_node("b")
    assert zk.topics() == ["a"] and zk.topics_to_delete() == []


def test_admin_nodes():
    zk = ZooKeeper()
    assert zk.reassign_partitions() is None
    zk.create_reassign_partitions(
        {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2]}]}
    )
    with pytest.raises(NodeExistsError):
        zk.create_reassign_partitions({})
    zk.set_reassign_partitions({"version": 1, "partitions": []})
    assert zk.reassign_partitions() == {"version": 1, "partitions": []}
    zk.delete_reassign_partitions()
    with pytest.raises(NoNodeError):
        zk.set_reassign_partitions({})
    zk.create_preferred_replica_election({"version": 1, "partitions": [{"topic": "t", "partition": 0}]})
    assert zk.preferred_replica_election()["partitions"] == [{"topic": "t", "partition": 0}]
    zk.delete_preferred_replica_election()
    assert zk.preferred_replica_election() is None


def populated() -> ZooKeeper:
    zk = ZooKeeper()
    for b in (3, 1, 2):
        zk.register_broker(b)
    elect(zk, 1)
    zk.create_topic("t", {0: [1, 2], 1: [2, 3]})
    zk.create_topic("u", {0: [3]})
    zk.set_assignment("t", {0: [1, 2, 3], 1: [2, 3]}, {0: [3]}, {})
    zk.create_partition_state(("t", 0), state(1, 0, [1, 2], 1))
    zk.set_partition_state(("t", 0), state(1, 0, [1], 1), 0)
    zk.create_partition_state(("t", 1), state(2, 0, [2, 3], 1))
    zk.mark_topic_for_deletion("u")
    zk.create_isr_change_notification([("t", 0)])
    zk.create_reassign_partitions(
        {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2, 3]}]}
    )
    return zk


def test_save_load_round_trip(tmp_path):
    zk = populated()
    path = zk.save(tmp_path)  # a directory: <dir>/zookeeper.json
    assert path == os.path.join(tmp_path, "zookeeper.json")
    assert [p.name for p in tmp_path.iterdir()] == ["zookeeper.json"]  # no temp file left behind
    back = ZooKeeper.load(tmp_path)
    assert back == zk and back.to_dict() == zk.to_dict()
    # written state by state (its plain form whole is ~250 MB at 333k partitions), as json.dump writes it
    assert open(path).read() == json.dumps(zk.to_dict(), indent=1, sort_keys=True)
    assert list(zk.to_dict()) == ["zxid", "controller", "controller_epoch", "brokers", "topics", "partition_states",
                                  "delete_topics", "isr_change_notifications", "isr_change_sequence", "admin"]
    empty = ZooKeeper().save(tmp_path / "empty.json")
    assert open(empty).read() == json.dumps(ZooKeeper().to_dict(), indent=1, sort_keys=True)
    assert back.zxid == zk.zxid and back.controller_epoch() == zk.controller_epoch()
    assert back.live_brokers() == zk.live_brokers() == {1: 2, 2: 3, 3: 1}
    assert back.topic_znode("t") == zk.topic_znode("t")
    assert back.topic_assignment("t") == {0: [1, 2, 3], 1: [2, 3]}
    assert back.get_partition_state(("t", 0)) == (state(1, 0, [1], 1), 1)
    assert back.isr_change_notifications() == [("isr_change_0000000000", [("t", 0)])]
    # the reopened store carries on: next names, zxids and versions continue where they stopped
    assert back.create_isr_change_notification([]) == "isr_change_0000000001"
    assert back.register_broker(4) == zk.zxid + 2
    explicit = tmp_path / "snap.json"
    zk.save(explicit)
    assert ZooKeeper.load(explicit) == zk
    assert json.loads(explicit.read_text())["controller_epoch"] == [1, 1]


def test_save_replaces_atomically(tmp_path):
    zk = populated()
    zk.save(tmp_path)
    zk.unregister_broker(1)
    zk.save(tmp_path)
    back = ZooKeeper.load(tmp_path)
    assert back.controller() is None and 1 not in back.live_brokers()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["zookeeper.json"]


def test_save_skips_a_snapshot_already_on_disk_and_rewrites_after_any_change(tmp_path):
    zk = populated()
    path = zk.save(tmp_path)
    first = os.stat(path)
    zk.save(tmp_path)  # nothing changed since: the file stays the one written (same inode, same time)
    again = os.stat(path)
    assert (again.st_ino, again.st_mtime_ns) == (first.st_ino, first.st_mtime_ns)
    zk.register_broker(7)  # a change takes a zxid: written again
    zk.save(tmp_path)
    assert os.stat(path).st_ino != first.st_ino and ZooKeeper.load(tmp_path) == zk
    with open(path, "w") as f:  # the file changed under it (another process, a restore): written again
        f.write("{}")
    zk.save(tmp_path)
    assert ZooKeeper.load(tmp_path) == zk
    os.unlink(path)
    zk.save(tmp_path)  # and a removed file comes back
    assert ZooKeeper.load(tmp_path) == zk
    other = tmp_path / "elsewhere.json"
    zk.save(other)  # another path is another file
    assert ZooKeeper.load(other) == zk


def test_snapshot_text_is_json_dump_indent_1_for_any_plain_value():
    """The snapshot's own writer (_nested, _state_entry) gives json.dumps(indent=1, sort_keys=True)'s text
    exactly, for the values a snapshot holds and for odd ones (escapes, non-string keys, floats, nulls)."""
    import random

    from sparkkafka.controller.zookeeper import _nested, _state_entry

    rng = random.Random(7)

    def value(depth=0):
        c = rng.random()
        if depth > 3 or c < 0.3:
            return rng.choice([0, -5, 10**20, 'a"b\n\u00e9\u4e2d', "", None, True, False, 1.5, float("nan"), (1, 2)])
        if c < 0.6:
            return [value(depth + 1) for _ in range(rng.randint(0, 4))]
        keys = ["k", "a", "\u00e9", "z1", "0", "10", "9"] if rng.random() < 0.8 else [3, 10, 2]
        return {rng.choice(keys): value(depth + 1) for _ in range(rng.randint(0, 4))}

    for _ in range(2000):
        v = value()
        for depth in (0, 1, 2):
            assert _nested(v, depth) == json.dumps(v, indent=1, sort_keys=True).replace("\n", "\n" + " " * depth)
    for st in (state(2, 5, [2, 1, 3], 4), state(-1, 0, [], 1), {"leader": 1, "isr": [1], "extra": "x"},
               {**state(1, 0, [1], 1), "isr": [1.0]}):
        for topic in ("t", 'q"\u00e9'):
            entry = {"topic": topic, "partition": 7, "state": st, "version": 3}
            assert _state_entry(topic, 7, st, 3) == json.dumps(entry, indent=1, sort_keys=True).replace("\n", "\n  ")
