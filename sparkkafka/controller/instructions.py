"""What the controller decides, as typed instructions (the output of `KafkaController.handle`).

Requests to brokers (ControllerChannelManager's ControllerBrokerRequestBatch): LeaderAndIsr, UpdateMetadata,
StopReplica; answers to leaders: IsrResult (AlterIsr responses); answers to the AdminClient: AdminResult. Each
request instruction's `row()` is its row in the matching frame (protocol.frames LEADER_AND_ISR,
UPDATE_METADATA, STOP_REPLICA, ISR_RESULT), column for column, which is what the broker rounds read. A request
instruction's `correlation_id` is that of the request it goes in (KafkaController._send_batch).

Treat them as values. The request classes are plain slotted dataclasses rather than frozen ones:
a failover of thousands of partitions makes tens of thousands of them, and a frozen dataclass
costs several times as much to construct.
"""

from __future__ import annotations

from dataclasses import dataclass

TP = tuple[str, int]


@dataclass(slots=True)
class LeaderAndIsr:
    """One partition's entry of a LeaderAndIsr request to `broker` (isr, replicas: comma-joined ids)."""

    broker: int
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    controller_epoch: int
    isr: str
    replicas: str
    is_new: bool
    log_dir: str | None
    zk_version: int
    controller_id: int = -1
    correlation_id: int = -1  # the request's, given when the controller sends its batch (-1: not sent yet)

    def row(self) -> tuple:
        return (self.broker, self.topic, self.partition, self.leader, self.leader_epoch, self.controller_epoch,
                self.isr, self.replicas, self.is_new, self.log_dir, self.zk_version, self.controller_id,
                self.correlation_id)


@dataclass(slots=True)
class StopReplica:
    """One partition's entry of a StopReplica request (KIP-570 leader epoch; -2 while deleting a topic)."""

    broker: int
    topic: str
    partition: int
    leader_epoch: int
    controller_epoch: int
    delete: bool
    controller_id: int = -1
    correlation_id: int = -1

    def row(self) -> tuple:
        return (self.broker, self.topic, self.partition, self.leader_epoch, self.controller_epoch, self.delete,
                self.controller_id, self.correlation_id)


@dataclass(slots=True)
class UpdateMetadata:
    """An UpdateMetadata request: who the controller is and the live brokers (comma-joined)."""

    broker: int
    controller_epoch: int
    controller_id: int
    live_brokers: str
    correlation_id: int = -1

    def row(self) -> tuple:
        return (self.broker, self.controller_epoch, self.controller_id, self.live_brokers, self.correlation_id)


@dataclass(slots=True)
class IsrResult:
    """The controller's answer to one AlterIsr item: error None, or Kafka's error name."""

    broker: int
    topic: str
    partition: int
    leader_epoch: int
    isr: str
    zk_version: int
    error: str | None

    def row(self) -> tuple:
        return (self.broker, self.topic, self.partition, self.leader_epoch, self.isr, self.zk_version, self.error)


@dataclass(frozen=True)
class AdminResult:
    """The per-partition results of an admin request (None: done, else (error, message))."""

    key: str
    results: dict[TP, tuple[str, str] | None]


BrokerRequest = LeaderAndIsr | StopReplica | UpdateMetadata
Instruction = LeaderAndIsr | StopReplica | UpdateMetadata | IsrResult | AdminResult
