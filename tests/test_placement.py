"""AdminUtils.assignReplicasToBrokers (Kafka 2.8) as sparkkafka.controller.placement reproduces it.

Expected maps marked "Kafka test" are the assertions of Kafka's own AdminTest.testReplicaAssignment /
AdminZkClientTest and AdminRackAwareTest; the distribution checks mirror RackAwareTest.checkReplicaDistribution.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from sparkkafka.controller.placement import (
    AdminOperationError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    assign_replicas_to_brokers,
    rack_alternated_broker_list,
)

SIX_RACKED = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}


def check_distribution(
    assignment: dict[int, list[int]],
    racks: dict[int, str],
    rf: int,
    *,
    rack_aware: bool = True,
    leaders_even: bool = True,
    replicas_even: bool = True,
) -> None:
    """RackAwareTest.checkReplicaDistribution."""
    n_brokers, n_partitions = len(racks), len(assignment)
    for replicas in assignment.values():
        assert len(set(replicas)) == len(replicas) == rf
    if rack_aware:
        assert all(len({racks[b] for b in reps}) == rf for reps in assignment.values())
    if leaders_even:
        leaders = Counter(reps[0] for reps in assignment.values())
        assert sorted(leaders.values()) == [n_partitions // n_brokers] * n_brokers
    if replicas_even:
        counts = Counter(b for reps in assignment.values() for b in reps)
        assert sorted(counts.values()) == [n_partitions * rf // n_brokers] * n_brokers


def test_protocol_worked_example_rack_unaware() -> None:
    # AdminUtils.assignReplicasToBrokers, Kafka test AdminTest.testReplicaAssignment (fixedStartIndex 0).
    expected = {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2],
    }  # fmt: skip
    assert assign_replicas_to_brokers([0, 1, 2, 3, 4], 10, 3, fixed_start_index=0) == expected
    assert assign_replicas_to_brokers([4, 2, 0, 3, 1], 10, 3, fixed_start_index=0) == expected  # sorted by id


def test_rack_alternated_broker_list_kafka_test() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_broker_list(racks) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_broker_list({b: r for b, r in racks.items() if b != 5}) == [0, 3, 1, 4, 2]


def test_rack_aware_matches_kafka_admin_rack_aware_test() -> None:
    # AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers: 7 partitions, RF 3,
    # fixedStartIndex 0, startPartitionId 0.
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    expected = {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],
    }
    assert (
        assign_replicas_to_brokers(list(racks), 7, 3, racks, fixed_start_index=0, start_partition_id=0)
        == expected
    )


def test_rack_aware_fixed_start_two_is_even() -> None:
    # AdminRackAwareTest.testAssignmentWithRackAware.
    assignment = assign_replicas_to_brokers(list(SIX_RACKED), 6, 3, SIX_RACKED, fixed_start_index=2)
    check_distribution(assignment, SIX_RACKED, 3)


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize(
    ("racks", "partitions", "rf", "checks"),
    [
        (SIX_RACKED, 6, 3, {}),  # testAssignmentWithRackAwareWithRandomStartIndex
        (SIX_RACKED, 13, 3, {"leaders_even": False, "replicas_even": False}),  # ...WithUnevenReplicas
        ({0: "rack1", 1: "rack1", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}, 12, 3,
         {"replicas_even": False}),  # testAssignmentWithRackAwareWithUnevenRacks
        (SIX_RACKED, 12, 2, {}),  # testAssignmentWith2ReplicasRackAware
        (SIX_RACKED, 6, 2, {}),  # testAssignmentWith2ReplicasRackAwareWith6Partitions
        ({0: "rack1", 1: "rack2", 4: "rack3"}, 3, 2, {}),  # ...With6PartitionsAnd3Brokers
        ({0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1", 6: "rack1", 7: "rack2",
          8: "rack2", 9: "rack3", 10: "rack1", 11: "rack3"}, 96, 3, {}),  # testLargeNumberPartitionsAssignment
    ],
)  # fmt: skip
def test_kafka_rack_aware_distribution_cases(
    seed: int, racks: dict, partitions: int, rf: int, checks: dict
) -> None:
    assignment = assign_replicas_to_brokers(list(racks), partitions, rf, racks, seed=seed)
    assert sorted(assignment) == list(range(partitions))
    check_distribution(assignment, racks, rf, **checks)


@pytest.mark.parametrize("seed", range(10))
def test_rack_aware_expansion_starts_at_given_partition(seed: int) -> None:
    # AdminRackAwareTest.testRackAwareExpansion.
    racks = {6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"}
    assignment = assign_replicas_to_brokers(list(racks), 12, 2, racks, seed=seed, start_partition_id=12)
    assert sorted(assignment) == list(range(12, 24))
    check_distribution(assignment, racks, 2)


@pytest.mark.parametrize("seed", range(10))
def test_more_less_and_single_rack(seed: int) -> None:
    # AdminRackAwareTest.testMoreReplicasThanRacks / testLessReplicasThanRacks / testSingleRack.
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    more = assign_replicas_to_brokers(list(racks), 6, 5, racks, seed=seed)
    assert all(len(reps) == 5 and len({racks[b] for b in reps}) == 3 for reps in more.values())
    less = assign_replicas_to_brokers(list(racks), 6, 2, racks, seed=seed)
    assert all(len({racks[b] for b in reps}) == 2 for reps in less.values())
    single = {b: "rack1" for b in range(6)}
    one = assign_replicas_to_brokers(list(single), 6, 3, single, seed=seed)
    assert Counter(reps[0] for reps in one.values()) == {b: 1 for b in range(6)}


def test_skip_broker_with_replica_already_assigned() -> None:
    # AdminRackAwareTest.testSkipBrokerWithReplicaAlreadyAssigned: RF 4 over 3 racks, fixedStartIndex 2.
    racks = {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}
    assignment = assign_replicas_to_brokers(list(racks), 6, 4, racks, fixed_start_index=2)
    check_distribution(assignment, racks, 4, rack_aware=False, leaders_even=False, replicas_even=False)


def test_rack_aware_hand_derived_with_shift() -> None:
    # Derived by hand (not a Kafka assertion). Alternated list [0, 3, 1, 5, 4, 2], 3 racks, start 1, shift 1,
    # so follower k sits at index (first + 1 + (1*3 + k) % 5) % 6.
    # p0: first 1 → 3 (rack2); k=0 → idx 5 → 2 (rack3) taken; k=1 → idx 0 → 0 (rack1) taken → [3, 2, 0]
    # p1: first 2 → 1 (rack3); k=0 → idx 0 → 0 (rack1) taken; k=1 → idx 1 → 3 (rack2) taken → [1, 0, 3]
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert assign_replicas_to_brokers(list(racks), 2, 3, racks, fixed_start_index=1) == {
        0: [3, 2, 0],
        1: [1, 0, 3],
    }
    # Skip rule, by hand: list [0, 2, 1] (racks a, b, a), start 0, shift 0. p2: first 2 → 1 (a); k=0 → idx 0 →
    # 0 (a) skipped, rack a already holds a replica while rack b holds none; k=1 → idx 1 → 2 (b) taken.
    two_racks = {0: "a", 1: "a", 2: "b"}
    assert assign_replicas_to_brokers([0, 1, 2], 3, 2, two_racks, fixed_start_index=0) == {
        0: [0, 2],
        1: [2, 1],
        2: [1, 2],
    }


def test_random_draw_order_is_start_index_then_shift() -> None:
    brokers = [1, 2, 3, 4, 5, 6, 7]
    for seed in range(30):
        rng = random.Random(seed)
        start, shift = rng.randrange(7), rng.randrange(7)
        drawn = assign_replicas_to_brokers(brokers, 20, 3, seed=seed)
        fixed = assign_replicas_to_brokers(brokers, 20, 3, fixed_start_index=start, start_shift=shift)
        assert drawn == fixed


def test_start_shift_only_overrides_shift() -> None:
    # fixed_start_index sets both, as Kafka's fixedStartIndex; start_shift then overrides the shift alone.
    both = assign_replicas_to_brokers([0, 1, 2, 3, 4], 5, 3, fixed_start_index=2)
    assert both == assign_replicas_to_brokers([0, 1, 2, 3, 4], 5, 3, fixed_start_index=2, start_shift=2)
    assert both != assign_replicas_to_brokers([0, 1, 2, 3, 4], 5, 3, fixed_start_index=2, start_shift=0)
    assert assign_replicas_to_brokers([0, 1, 2, 3, 4], 1, 3, fixed_start_index=0, start_shift=1) == {
        0: [0, 2, 3]
    }


def test_deterministic_for_a_seed() -> None:
    racks = {b: f"r{b % 3}" for b in range(9)}
    for seed in (0, 1, 42):
        assert assign_replicas_to_brokers(range(9), 30, 3, seed=seed) == assign_replicas_to_brokers(
            range(9), 30, 3, seed=seed
        )
        assert assign_replicas_to_brokers(range(9), 30, 3, racks, seed=seed) == assign_replicas_to_brokers(
            range(9), 30, 3, racks, seed=seed
        )
    layouts = {str(assign_replicas_to_brokers(range(9), 30, 3, seed=s)) for s in range(10)}
    assert len(layouts) > 1


@pytest.mark.parametrize("seed", range(25))
def test_replicas_distinct_and_rack_spread(seed: int) -> None:
    rng = random.Random(1000 + seed)
    n = rng.randint(1, 12)
    brokers = rng.sample(range(100), n)
    rf = rng.randint(1, n)
    plain = assign_replicas_to_brokers(brokers, rng.randint(1, 40), rf, seed=seed)
    assert all(len(set(r)) == rf and set(r) <= set(brokers) for r in plain.values())
    racks = {b: f"rack{rng.randint(0, 3)}" for b in brokers}
    aware = assign_replicas_to_brokers(brokers, rng.randint(1, 40), rf, racks, seed=seed)
    n_racks = len(set(racks.values()))
    for reps in aware.values():
        assert len(set(reps)) == rf
        assert len({racks[b] for b in reps}) == min(rf, n_racks)


def test_errors_are_kafkas() -> None:
    with pytest.raises(InvalidReplicationFactorError, match=r"^Replication factor must be larger than 0\.$"):
        assign_replicas_to_brokers([0, 1], 3, 0)
    with pytest.raises(
        InvalidReplicationFactorError, match=r"^Replication factor: 3 larger than available brokers: 2\.$"
    ):
        assign_replicas_to_brokers([0, 1], 3, 3)
    with pytest.raises(InvalidPartitionsError, match=r"^Number of partitions must be larger than 0\.$"):
        assign_replicas_to_brokers([0, 1], 0, 0)  # partitions are checked first, as in Kafka
    with pytest.raises(
        AdminOperationError,
        match=r"^Not all brokers have rack information for replica rack aware assignment\.$",
    ):
        assign_replicas_to_brokers([0, 1, 2], 3, 2, {0: "a", 1: "b"})
    assert issubclass(InvalidReplicationFactorError, ValueError)
    assert issubclass(AdminOperationError, ValueError)
    assert issubclass(InvalidPartitionsError, ValueError)


def test_brokers_without_rack_entries_are_rack_unaware() -> None:
    assert assign_replicas_to_brokers([0, 1, 2], 3, 2, {}, fixed_start_index=0) == assign_replicas_to_brokers(
        [0, 1, 2], 3, 2, None, fixed_start_index=0
    )
    assert assign_replicas_to_brokers([0, 1, 2], 3, 2, {5: "x"}, fixed_start_index=0) == {
        0: [0, 1],
        1: [1, 2],
        2: [2, 0],
    }
