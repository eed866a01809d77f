"""Controller leader election, as Kafka 2.8's ``PartitionLeaderElectionAlgorithms`` (PartitionStateMachine.scala)
and ``Election`` (Election.scala) compute it, plus ``ReplicaStateMachine.doRemoveReplicasFromIsr``.

Every algorithm scans the ordered replica list (AR, or the reassignment target) and returns the first
acceptable replica; ``Election`` adds the new ISR (Election.leaderForOffline, leaderForReassign,
leaderForPreferredReplica, leaderForControlledShutdown). Pure functions: reading the state znode, the
conditional write and the leader-epoch bump (+1, LeaderAndIsr.newLeaderAndIsr) stay with the caller.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

NO_LEADER = -1  # LeaderAndIsr.NoLeader


@dataclass(frozen=True)
class Election:
    """A successful election: new leader and ISR; ``unclean`` when the leader came from outside the ISR."""

    leader: int
    isr: tuple[int, ...]
    unclean: bool = False


def offline_election(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int], unclean_allowed: bool
) -> Election | None:
    """New/Offline partition (``offlinePartitionLeaderElection``, ``Election.leaderForOffline``).

    Leader = first AR replica live and in ISR; else, if unclean election is allowed, first live AR replica
    (``UncleanLeaderElectionsPerSec``). ISR = old ISR filtered to live brokers (order kept), or (leader,) if unclean.
    """
    live_set, isr_set = set(live), set(isr)
    leader = next((r for r in assignment if r in live_set and r in isr_set), None)
    if leader is not None:
        return Election(leader, tuple(r for r in isr if r in live_set))
    if unclean_allowed:
        leader = next((r for r in assignment if r in live_set), None)
        if leader is not None:
            return Election(leader, (leader,), unclean=True)
    return None


def reassign_election(target: Sequence[int], isr: Sequence[int], live: Collection[int]) -> Election | None:
    """Reassignment (``reassignPartitionLeaderElection``): first *target* replica live and in ISR; ISR unchanged."""
    live_set, isr_set = set(live), set(isr)
    leader = next((r for r in target if r in live_set and r in isr_set), None)
    return None if leader is None else Election(leader, tuple(isr))


def preferred_election(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int]
) -> Election | None:
    """Preferred replica (``preferredReplicaPartitionLeaderElection``): AR[0] iff live and in ISR; ISR unchanged."""
    if assignment and assignment[0] in set(live) and assignment[0] in set(isr):
        return Election(assignment[0], tuple(isr))
    return None


def controlled_shutdown_election(
    assignment: Sequence[int],
    isr: Sequence[int],
    live_or_shutting_down: Collection[int],
    shutting_down: Collection[int],
) -> Election | None:
    """Controlled shutdown (``controlledShutdownPartitionLeaderElection``, ``Election.leaderForControlledShutdown``).

    Leader = first AR replica live-or-shutting-down, in ISR and not shutting down. ISR = old ISR minus the
    shutting-down brokers (dead ISR members are *not* dropped here).
    """
    alive, isr_set, down = set(live_or_shutting_down), set(isr), set(shutting_down)
    leader = next((r for r in assignment if r in alive and r in isr_set and r not in down), None)
    return None if leader is None else Election(leader, tuple(r for r in isr if r not in down))


def remove_replica_from_isr(
    leader: int, isr: Sequence[int], replica: int, keep_last: bool = True
) -> tuple[int, tuple[int, ...]]:
    """(leader, ISR) after ``replica`` goes OfflineReplica (``ReplicaStateMachine.doRemoveReplicasFromIsr``).

    Leader becomes -1 if it was ``replica``; ``replica`` leaves the ISR unless it is the last member (kept since
    1.1). ``keep_last=False`` is the pre-1.1 rule with unclean election enabled (KafkaController
    ``removeReplicaFromIsr``): the ISR may become empty. Kafka only rewrites (and bumps the leader epoch of)
    partitions whose ISR contains ``replica``; for the others this returns the input unchanged, and the
    caller must not write: test ``replica in isr``, not equality, since removing 2 from (-1, (2,)) is a write.
    """
    if replica not in isr:
        return leader, tuple(isr)
    new_isr = tuple(r for r in isr if r != replica)
    if not new_isr and keep_last:
        new_isr = tuple(isr)
    return (NO_LEADER if leader == replica else leader), new_isr
