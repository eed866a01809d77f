"""Reassignment arithmetic of the 2.4+ controller: ``ReplicaAssignment`` in ControllerContext.scala (KIP-455).

A partition's stored assignment is ``(replicas, adding, removing)``. Reassigning to a target T keeps
the original replicas (``replicas - adding``) until the move completes: the full list is T first,
then the originals not in T, so the preferred replica (its head) is already T's head during the
move (KIP-455; ControllerContext's ReplicaAssignment,
KafkaController.onPartitionReassignment). Cancelling is reassigning to the originals. Pure functions; the
controller (kafka_controller.py) does the ZooKeeper writes and the requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ReplicaAssignment:
    """``ReplicaAssignment(replicas, addingReplicas, removingReplicas)``."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def origin(self) -> tuple[int, ...]:
        """``originReplicas``: what the partition had before the move."""
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        """``targetReplicas``: what it will have after."""
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    def reassign_to(self, target: Sequence[int]) -> ReplicaAssignment:
        """``reassignTo``: full = distinct(target ++ origin); adding = full - origin; removing = full - target."""
        origin = self.origin
        full = tuple(dict.fromkeys([*target, *origin]))
        return ReplicaAssignment(full, tuple(r for r in full if r not in origin),
                                 tuple(r for r in full if r not in set(target)))


def validate_replicas(target: Sequence[int], adding: Sequence[int], live: set[int]) -> str | None:
    """KafkaController.validateReplicas for an API reassignment: None when valid, else the message of
    INVALID_REPLICA_ASSIGNMENT (the adding replicas must be live brokers)."""
    if not target:
        return "Empty replica list specified in partition reassignment."
    if len(set(target)) != len(target):
        return f"Duplicate replica ids in partition reassignment replica list: {_seq(target)}"
    if any(r < 0 for r in target):
        return f"Invalid broker id in replica list: {_seq(target)}"
    if not set(adding) <= live:
        return (f"Replica assignment has brokers that are not alive. Replica list: {_seq(adding)}, "
                f"live broker list: Set({', '.join(map(str, sorted(live)))})")
    return None


def is_complete(assignment: ReplicaAssignment, isr: Sequence[int]) -> bool:
    """``isReassignmentComplete``: not moving, or every target replica is in the ISR read from ZooKeeper."""
    return not assignment.is_being_reassigned or set(assignment.target) <= set(isr)


def _seq(xs: Sequence[int]) -> str:
    return f"List({', '.join(map(str, xs))})"
