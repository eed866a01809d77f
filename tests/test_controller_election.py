"""Controller election algorithms (golden R12): Kafka's PartitionLeaderElectionAlgorithmsTest table (G-04),
the all-replicas-dead sequence and a single-replica partition losing its broker (G-03 case a)."""

from __future__ import annotations

import pytest

from sparkkafka.controller.election import (
    Election,
    controlled_shutdown_election,
    offline_election,
    preferred_election,
    reassign_election,
    remove_replica_from_isr,
)
from sparkkafka.controller.zookeeper import ZooKeeper

# G-04, one row per PartitionLeaderElectionAlgorithmsTest case: (election(), expected leader or None)
G04 = [
    ("offline", lambda: offline_election([2, 4], [2, 4], {4}, False), 4),
    ("offline, no live ISR", lambda: offline_election([2, 4], [2], {4}, False), None),
    ("offline, unclean", lambda: offline_election([2, 4], [2], {4}, True), 4),
    ("reassign", lambda: reassign_election([2, 4], [2, 4], {4}), 4),
    ("reassign, none live", lambda: reassign_election([2, 4], [2], set()), None),
    ("reassign, empty ISR", lambda: reassign_election([2, 4], [], {2}), None),
    ("preferred", lambda: preferred_election([2, 4], [2, 4], {2, 4}), 2),
    ("preferred, none live", lambda: preferred_election([2, 4], [2], set()), None),
    ("preferred, not in ISR", lambda: preferred_election([2, 4], [4], {2, 4}), None),
    ("preferred, nothing", lambda: preferred_election([2, 4], [], set()), None),
    ("shutdown", lambda: controlled_shutdown_election([2, 4], [2, 4], {2, 4}, {2}), 4),
    (
        "shutdown, only ISR member leaving",
        lambda: controlled_shutdown_election([2, 4], [2], {2, 4}, {2}),
        None,
    ),
    ("shutdown, all leaving", lambda: controlled_shutdown_election([2, 4], [2, 4], {2, 4}, {2, 4}), None),
]


@pytest.mark.parametrize("case,elect,leader", G04, ids=[c[0] for c in G04])
def test_g04_rule_table(case, elect, leader):
    result = elect()
    assert (result.leader if result else None) == leader


def test_g04_unclean_counter_and_new_isr():
    clean = offline_election([2, 4], [2, 4], {4}, False)
    assert clean == Election(4, (4,), unclean=False)  # ISR filtered to live members
    assert offline_election([2, 4], [2], {4}, False) is None  # counter stays 0
    unclean = offline_election([2, 4], [2], {4}, True)
    assert unclean == Election(4, (4,), unclean=True)  # counter 1; ISR = [leader]


def test_new_isr_rules():
    # offline: first live ISR member in AR order; ISR order kept, dead members dropped
    assert offline_election([1, 2, 3], [3, 1, 2], {2, 3}, False) == Election(2, (3, 2))
    # reassign scans the target list, ISR unchanged (dead members included)
    assert reassign_election([4, 3, 1], [1, 3, 5], {1, 3}) == Election(3, (1, 3, 5))
    # preferred keeps the ISR as is
    assert preferred_election([3, 1], [1, 3, 5], {1, 3}) == Election(3, (1, 3, 5))
    # controlled shutdown drops shutting-down brokers only, not dead ones
    assert controlled_shutdown_election([1, 2, 3], [1, 2, 3], {1, 2}, {1}) == Election(2, (2, 3))
    assert preferred_election([], [1], {1}) is None


def test_remove_replica_from_isr():
    assert remove_replica_from_isr(1, [1, 2, 3], 2) == (1, (1, 3))
    assert remove_replica_from_isr(1, [1, 2, 3], 1) == (-1, (2, 3))
    assert remove_replica_from_isr(1, [1], 1) == (-1, (1,))  # last member kept (1.1+)
    assert remove_replica_from_isr(1, [1], 1, keep_last=False) == (-1, ())  # pre-1.1, ULE on
    assert remove_replica_from_isr(1, [1, 2], 3) == (1, (1, 2))  # not in ISR: no write in Kafka


@pytest.mark.parametrize("order,kept", [((1, 2), 2), ((2, 1), 1)])
def test_all_replicas_dead(order, kept):
    """ISR {1,2}, leader 1, both die; the survivor in the ISR depends on processing order."""
    leader, isr, epoch = 1, (1, 2), 0
    assert offline_election([1, 2], isr, set(), False) is None  # election fails, ZK untouched
    for dead in order:
        assert dead in isr  # Kafka writes (epoch + 1) only for ISRs containing the replica
        leader, isr = remove_replica_from_isr(leader, isr, dead)
        epoch += 1
    assert (leader, isr, epoch) == (-1, (kept,), 2)
    other = 3 - kept
    assert offline_election([1, 2], isr, {other}, False) is None  # stays offline
    assert offline_election([1, 2], isr, {other}, True) == Election(other, (other,), unclean=True)
    assert offline_election([1, 2], isr, {kept}, False) == Election(kept, (kept,))


def test_all_replicas_dead_pre_1_1_unclean_enabled():
    leader, isr = 1, (1, 2)
    for dead in (1, 2):
        leader, isr = remove_replica_from_isr(leader, isr, dead, keep_last=False)
    assert (leader, isr) == (-1, ())
    assert offline_election([1, 2], isr, {2}, True) == Election(2, (2,), unclean=True)


@pytest.mark.parametrize("ule", [False, True])
def test_g03_case_a_single_replica_broker_shuts_down(ule):
    """G-03 a: RF 1 on broker X at epoch 0; X shuts down -> leader -1, epoch 1, ISR [X], ULE on or off."""
    x = 7
    zk = ZooKeeper()
    zk.register_broker(0)
    zk.register_broker(x)
    epoch, epoch_version = zk.register_controller_and_increment_epoch(0, 0)
    zk.create_topic("t", {0: [x]})
    zk.create_partition_state(
        ("t", 0), {"leader": x, "leader_epoch": 0, "isr": [x], "controller_epoch": epoch}
    )
    # RF 1 partitions are not moved by controlled shutdown; the broker then dies -> OfflineReplica for x
    zk.unregister_broker(x)
    assert controlled_shutdown_election([x], [x], {x}, {x}) is None
    state, version = zk.get_partition_state(("t", 0))
    assert x in state["isr"]
    leader, isr = remove_replica_from_isr(state["leader"], state["isr"], x)  # same in 2.8 whatever ULE says
    new = {
        "leader": leader,
        "leader_epoch": state["leader_epoch"] + 1,
        "isr": list(isr),
        "controller_epoch": epoch,
    }
    assert zk.set_partition_state(("t", 0), new, version, epoch_version) == 1
    state, _ = zk.get_partition_state(("t", 0))
    assert (state["leader"], state["leader_epoch"], state["isr"]) == (-1, 1, [x])
    assert offline_election([x], state["isr"], set(), ule) is None  # nothing live: stays offline
