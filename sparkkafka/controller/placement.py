"""Replica placement for new topics and partitions: Kafka 2.8's ``kafka.admin.AdminUtils``.

``assign_replicas_to_brokers`` is ``AdminUtils.assignReplicasToBrokers`` (used by ``AdminZkClient`` for
``kafka-topics --create``/``--alter --partitions`` and by the ZK-mode CreateTopics path): the rack-unaware
round robin with an increasing follower shift, or, when every broker has a rack, the same round robin over a
rack-alternated broker list with Kafka's skip rule. Only the source of randomness differs: Kafka draws from a
process-wide ``java.util.Random``; we draw from ``random.Random(seed)`` in the same order (start index, then
shift), so a seed reproduces a layout.

Pure Python; no Spark, no Delta.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from sparkkafka.errors import SparkKafkaError

__all__ = [
    "AdminOperationError",
    "InvalidPartitionsError",
    "InvalidReplicationFactorError",
    "assign_replicas_to_brokers",
    "rack_alternated_broker_list",
]


class InvalidReplicationFactorError(SparkKafkaError, ValueError):
    """Kafka's ``InvalidReplicationFactorException`` (error INVALID_REPLICATION_FACTOR, code 38)."""

    kafka_error = "INVALID_REPLICATION_FACTOR"


class InvalidPartitionsError(SparkKafkaError, ValueError):
    """Kafka's ``InvalidPartitionsException`` (error INVALID_PARTITIONS, code 37).

    ``AdminUtils`` raises this one, not InvalidReplicationFactorException, for a partition count below 1.
    """

    kafka_error = "INVALID_PARTITIONS"


class AdminOperationError(SparkKafkaError, ValueError):
    """Kafka's ``kafka.admin.AdminOperationException`` (rack information present on some brokers only)."""


def assign_replicas_to_brokers(
    brokers: Sequence[int],
    partitions: int,
    replication_factor: int,
    racks: Mapping[int, str] | None = None,
    seed: int = 0,
    start_partition_id: int = 0,
    fixed_start_index: int = -1,
    start_shift: int = -1,
) -> dict[int, list[int]]:
    """Replica lists for ``partitions`` new partitions, keyed by partition id (AdminUtils.assignReplicasToBrokers).

    ``brokers`` are sorted by id first, as ``AdminZkClient.getBrokerMetadatas`` does. ``racks`` maps broker id to
    rack; a broker missing from it (or mapped to None) has no rack. No rack anywhere → rack-unaware; a rack on
    every broker → rack-aware; anything in between → ``AdminOperationError`` (Kafka's tool then suggests
    ``--disable-rack-aware``, which is the same as passing ``racks=None``).

    ``fixed_start_index >= 0`` fixes both the start index and the initial shift, exactly as Kafka's
    ``fixedStartIndex``; ``start_shift >= 0`` (an emulator extension) overrides the shift alone. Whatever is not
    fixed is drawn from ``random.Random(seed)``: first the start index, then the shift, each uniform in
    ``[0, len(brokers))`` (Kafka: ``rand.nextInt(n)`` twice, in that order). Partition ids start at
    ``max(0, start_partition_id)``.
    """
    if partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}."
        )
    if len(set(brokers)) != len(brokers):
        raise ValueError(f"duplicate broker ids in {list(brokers)}")
    broker_racks = {b: (racks or {}).get(b) for b in sorted(brokers)}
    with_rack = [b for b, rack in broker_racks.items() if rack is not None]
    if with_rack and len(with_rack) != len(broker_racks):
        raise AdminOperationError("Not all brokers have rack information for replica rack aware assignment.")

    rng = random.Random(seed)
    n = len(broker_racks)
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    if start_shift >= 0:
        shift = start_shift
    else:
        shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    first_id = max(0, start_partition_id)
    if not with_rack:
        return _assign_rack_unaware(
            list(broker_racks), partitions, replication_factor, start_index, shift, first_id
        )
    return _assign_rack_aware(broker_racks, partitions, replication_factor, start_index, shift, first_id)


def rack_alternated_broker_list(racks: Mapping[int, str]) -> list[int]:
    """Brokers taken one rack at a time (AdminUtils.getRackAlternatedBrokerList).

    Racks in name order, brokers of a rack in id order; a rack that runs out is skipped.
    E.g. {0: r1, 1: r3, 2: r3, 3: r2, 4: r2, 5: r1} → [0, 3, 1, 5, 4, 2].
    """
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    depth = max((len(c) for c in columns), default=0)
    return [column[i] for i in range(depth) for column in columns if i < len(column)]


def _replica_index(first_replica_index: int, shift: int, replica_index: int, n_brokers: int) -> int:
    """Position of a follower in the broker list (AdminUtils.replicaIndex)."""
    return (first_replica_index + 1 + (shift + replica_index) % (n_brokers - 1)) % n_brokers


def _assign_rack_unaware(
    broker_list: list[int], partitions: int, rf: int, start_index: int, shift: int, first_id: int
) -> dict[int, list[int]]:
    """AdminUtils.assignReplicasToBrokersRackUnaware: round robin leaders, followers at an increasing shift."""
    n = len(broker_list)
    out: dict[int, list[int]] = {}
    for partition in range(first_id, first_id + partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        out[partition] = [broker_list[first]] + [
            broker_list[_replica_index(first, shift, j, n)] for j in range(rf - 1)
        ]
    return out


def _assign_rack_aware(
    broker_racks: Mapping[int, str], partitions: int, rf: int, start_index: int, shift: int, first_id: int
) -> dict[int, list[int]]:
    """AdminUtils.assignReplicasToBrokersRackAware: round robin on the rack-alternated list plus the skip rule.

    A candidate is taken only if (its rack holds no replica yet or every rack does) and (it holds no replica yet
    or every broker does); ``k`` keeps counting across all followers of one partition.
    """
    arranged = rack_alternated_broker_list(broker_racks)
    n = len(arranged)
    n_racks = len(set(broker_racks.values()))
    out: dict[int, list[int]] = {}
    for partition in range(first_id, first_id + partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used = {broker_racks[leader]}
        k = 0
        for _ in range(rf - 1):
            while True:
                broker = arranged[_replica_index(first, shift * n_racks, k, n)]
                rack = broker_racks[broker]
                k += 1
                if (rack not in racks_used or len(racks_used) == n_racks) and (
                    broker not in replicas or len(replicas) == n
                ):
                    replicas.append(broker)
                    racks_used.add(rack)
                    break
        out[partition] = replicas
    return out
