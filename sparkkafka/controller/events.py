"""The controller's events (Kafka's ControllerEvent subclasses, KafkaController.scala): what its queue
holds and what `KafkaController.handle` takes.

Each event is a frozen dataclass; `KafkaController._dispatch` matches on its class and calls the handler, as
Kafka's `KafkaController.process(event)` does. Events carrying pandas frames compare by identity (eq=False): a
frame has no truth value. Admin events (answered to the AdminClient) carry the request `key` their results are
filed under.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

TP = tuple[str, int]


@dataclass(frozen=True)
class ControllerFailover:
    """onControllerFailover after this broker won the election (Kafka's Startup / ControllerChange /
    Reelect events, once `elect` registered /controller): context from ZooKeeper, elections, resumes."""


@dataclass(frozen=True)
class BrokerChange:
    """The /brokers/ids children changed: new, dead and bounced brokers are read from ZooKeeper."""


@dataclass(frozen=True)
class ControlledShutdown:
    """A broker asks to shut down (ControlledShutdownRequest): leadership moves away first."""

    broker: int


@dataclass(frozen=True)
class TopicChange:
    """The /brokers/topics children changed: partitions without a state znode are created (New -> Online)."""


@dataclass(frozen=True)
class TopicDeletion:
    """The /admin/delete_topics children changed: topics queued for deletion are deleted if eligible."""


@dataclass(frozen=True)
class UncleanLeaderElectionEnable:
    """unclean.leader.election.enable changed for `topic` (None: a broker or cluster default), which
    runs an offline election round (Kafka's TopicUncleanLeaderElectionEnable / UncleanLeaderElectionEnable)."""

    topic: str | None = None


@dataclass(frozen=True, eq=False)
class AlterIsrReceived:
    """AlterIsr requests of partition leaders (2.7+), a frame ISR_CHANGE."""

    requests: pd.DataFrame


@dataclass(frozen=True)
class IsrChangeNotification:
    """Leaders wrote their ISR themselves and left /isr_change_notification entries (before 2.7)."""


@dataclass(frozen=True)
class ApiPartitionReassignment:
    """AlterPartitionReassignments: per partition a target replica list, or None to cancel."""

    key: str
    targets: dict[TP, list[int] | None]


@dataclass(frozen=True)
class ZkPartitionReassignment:
    """/admin/reassign_partitions was written (the pre-2.4 path and the tool's --zookeeper)."""


@dataclass(frozen=True)
class ReplicaLeaderElection:
    """ElectLeaders (KIP-460): `election_type` "preferred" or "unclean"; partitions None means all."""

    key: str
    election_type: str
    partitions: list[TP] | None = None


@dataclass(frozen=True)
class AutoPreferredReplicaLeaderElection:
    """The scheduled leader-imbalance check (auto.leader.rebalance.enable,
    KafkaController.AutoPreferredReplicaLeaderElection)."""


@dataclass(frozen=True, eq=False)
class LogDirEventNotification:
    """Replicas brokers reported on failed log dirs (KIP-112), a frame with broker, topic, partition."""

    replicas: pd.DataFrame


ControllerEvent = (
    ControllerFailover | BrokerChange | ControlledShutdown | TopicChange | TopicDeletion | UncleanLeaderElectionEnable
    | AlterIsrReceived | IsrChangeNotification | ApiPartitionReassignment | ZkPartitionReassignment
    | ReplicaLeaderElection | AutoPreferredReplicaLeaderElection | LogDirEventNotification
)
AdminEvent = ApiPartitionReassignment | ReplicaLeaderElection
