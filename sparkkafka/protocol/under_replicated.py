"""Under-replicated, as Kafka counts it while reassignments run (KIP-352): the replication factor of a
partition being reassigned leaves out its adding replicas, so a replica still copying does not make its
partition under-replicated. TopicCommand's `--under-replicated-partitions` and the broker's
UnderReplicatedPartitions gauge both use this rule; the describe tool and the durability checker share it."""

from __future__ import annotations

from collections.abc import Sequence


def replication_factor(replicas: Sequence[int], adding: Sequence[int] = (), removing: Sequence[int] = ()) -> int:
    """``TopicCommand.getReplicationFactor`` (2.8): while a reassignment is in progress (a replica of the
    partition is adding or removing) the replicas without the adding ones, else all of them. KIP-352: the
    broker's UnderReplicatedPartitions gauge counts the same (``OngoingReassignmentState.replicationFactor``)."""
    changing = set(adding) | set(removing)
    if changing and any(r in changing for r in replicas):
        return len([r for r in replicas if r not in set(adding)])
    return len(replicas)


def is_under_replicated(replicas: Sequence[int], isr: Sequence[int], adding: Sequence[int] = (),
                        removing: Sequence[int] = ()) -> bool:
    """``PartitionDescription.isUnderReplicated``: fewer in-sync replicas than the replication factor
    (KIP-352: an adding replica still copying does not make its partition under-replicated)."""
    return replication_factor(replicas, adding, removing) - len(isr) > 0
