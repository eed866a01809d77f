"""Kafka's PartitionStateMachine and ReplicaStateMachine (ZooKeeper era: PartitionStateMachine.scala,
ReplicaStateMachine.scala) as explicit state: the controller's state of every partition and every replica, and
each target state's valid previous states as data, exactly Kafka 2.8's `validPreviousStates`.

A transition moves the keys whose current state is a valid previous state of the target and
refuses the others: "Illegal requests are logged and skipped" (the controller writes the refusal
to the state-change log, as Kafka's `logInvalidTransition` does, and does not act for that key).
A key the machine has never seen is NonExistent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import ClassVar, Generic, TypeVar

TP = tuple[str, int]
Replica = tuple[str, int, int]  # PartitionAndReplica: topic, partition, broker


class PartitionState(Enum):
    NewPartition = 0
    OnlinePartition = 1
    OfflinePartition = 2
    NonExistentPartition = 3

    def __str__(self) -> str:
        return self.name


class ReplicaState(Enum):
    NewReplica = 1
    OnlineReplica = 2
    OfflineReplica = 3
    ReplicaDeletionStarted = 4
    ReplicaDeletionSuccessful = 5
    ReplicaDeletionIneligible = 6
    NonExistentReplica = 7

    def __str__(self) -> str:
        return self.name


_P, _R = PartitionState, ReplicaState

# PartitionState.validPreviousStates (kafka.controller.PartitionStateMachine, 2.8)
PARTITION_VALID_PREVIOUS: dict[PartitionState, tuple[PartitionState, ...]] = {
    _P.NewPartition: (_P.NonExistentPartition,),
    _P.OnlinePartition: (_P.NewPartition, _P.OnlinePartition, _P.OfflinePartition),
    _P.OfflinePartition: (_P.NewPartition, _P.OnlinePartition, _P.OfflinePartition),
    _P.NonExistentPartition: (_P.OfflinePartition,),
}

# ReplicaState.validPreviousStates (kafka.controller.ReplicaStateMachine, 2.8)
REPLICA_VALID_PREVIOUS: dict[ReplicaState, tuple[ReplicaState, ...]] = {
    _R.NewReplica: (_R.NonExistentReplica,),
    _R.OnlineReplica: (_R.NewReplica, _R.OnlineReplica, _R.OfflineReplica, _R.ReplicaDeletionIneligible),
    _R.OfflineReplica: (_R.NewReplica, _R.OnlineReplica, _R.OfflineReplica, _R.ReplicaDeletionIneligible),
    _R.ReplicaDeletionStarted: (_R.OfflineReplica,),
    _R.ReplicaDeletionSuccessful: (_R.ReplicaDeletionStarted,),
    _R.ReplicaDeletionIneligible: (_R.OfflineReplica, _R.ReplicaDeletionStarted),
    _R.NonExistentReplica: (_R.ReplicaDeletionSuccessful,),
}

K = TypeVar("K")
S = TypeVar("S", PartitionState, ReplicaState)
Log = Callable[[K, str], None]  # (key, message) of a refused transition


@dataclass
class _StateMachine(Generic[K, S]):
    states: dict = field(default_factory=dict)
    controller_id: int = -1  # who logs a refused transition, as Kafka's messages name it
    epoch: int = 0

    NON_EXISTENT: ClassVar[Enum]  # set by the subclasses
    VALID_PREVIOUS: ClassVar[dict]
    REFUSAL: ClassVar[str]  # the refused-transition message, a str.format template

    def state(self, key: K) -> S:
        return self.states.get(key, self.NON_EXISTENT)

    def is_valid(self, key: K, target: S) -> bool:
        return self.state(key) in self.VALID_PREVIOUS[target]

    def set(self, key: K, state: S) -> None:
        """Initialise a key's state without a transition (context initialisation at failover)."""
        if state is self.NON_EXISTENT:
            self.states.pop(key, None)
        else:
            self.states[key] = state

    def valid(self, keys: Iterable[K], target: S, log: Log | None = None) -> list[K]:
        """checkValid*StateChange: the keys that may move to `target`; the others are logged."""
        ok, states, none, prev = [], self.states, self.NON_EXISTENT, self.VALID_PREVIOUS[target]
        for k in keys:
            if states.get(k, none) in prev:
                ok.append(k)
            elif log is not None:
                log(k, self.invalid_message(k, target))
        return ok

    def transition(self, keys: Iterable[K], target: S, log: Log | None = None) -> list[K]:
        """Move every valid key to `target` (NonExistent forgets it); returns the keys moved."""
        ok = self.valid(keys, target, log)
        if target is self.NON_EXISTENT:
            for k in ok:
                self.states.pop(k, None)
        else:
            self.states.update(dict.fromkeys(ok, target))
        return ok

    def invalid_message(self, key: K, target: S) -> str:
        """Kafka's logInvalidTransition line for `key` (its fields as `k[0]`, `k[1]`, ... in REFUSAL)."""
        return self.REFUSAL.format(cid=self.controller_id, epoch=self.epoch, k=key, cur=self.state(key),
                                   target=target, valid=",".join(map(str, self.VALID_PREVIOUS[target])))


@dataclass
class PartitionStateMachine(_StateMachine[TP, PartitionState]):
    NON_EXISTENT: ClassVar[Enum] = PartitionState.NonExistentPartition
    VALID_PREVIOUS: ClassVar[dict] = PARTITION_VALID_PREVIOUS
    REFUSAL: ClassVar[str] = (  # PartitionStateMachine.logInvalidTransition
        "Controller {cid} epoch {epoch} failed to change state for partition {k[0]}-{k[1]} from {cur} to {target}: "
        "java.lang.IllegalStateException: Partition {k[0]}-{k[1]} should be in one of {valid} states before moving "
        "to {target} state. Instead it is in {cur} state")


@dataclass
class ReplicaStateMachine(_StateMachine[Replica, ReplicaState]):
    NON_EXISTENT: ClassVar[Enum] = ReplicaState.NonExistentReplica
    VALID_PREVIOUS: ClassVar[dict] = REPLICA_VALID_PREVIOUS
    REFUSAL: ClassVar[str] = (  # ReplicaStateMachine.logInvalidTransition (PartitionAndReplica as Kafka prints it)
        "Controller {cid} epoch {epoch} initiated state change of replica {k[2]} for partition {k[0]}-{k[1]} from "
        "{cur} to {target} failed: java.lang.IllegalStateException: Replica [Topic={k[0]},Partition={k[1]},"
        "Replica={k[2]}] should be in the {valid} states before moving to {target} state. Instead it is in {cur} "
        "state")
