"""The controller on the driver: the cluster's metadata and the requests it sends to brokers.

This first version keeps leadership static, as the foundation issue asks until controller
election, failover and ISR changes land: a new partition's leader is its first live assigned
replica and its ISR its live assigned replicas (Kafka's NewPartition -> OnlinePartition rule,
protocol.md 6.1), with leader epoch 0 and zkVersion 0; a starting broker is sent LeaderAndIsr
for every partition it hosts (KafkaController.onBrokerStartup).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..protocol.config import topic_config
from ..protocol.frames import LEADER_AND_ISR, conform, csv, empty
from ..scenario.model import TopicSpec
from .placement import assign_replicas_to_brokers

FIRST_CONTROLLER_EPOCH = 1  # /controller_epoch is created as 0; the first election writes 1


@dataclass
class PartitionInfo:
    """What ZooKeeper holds for a partition: assignment and the LeaderAndIsr znode."""

    replicas: list[int]
    leader: int
    isr: list[int]
    leader_epoch: int = 0
    controller_epoch: int = FIRST_CONTROLLER_EPOCH
    version: int = 0


@dataclass
class Controller:
    """Driver-side controller state for one run."""

    brokers: list[int]
    racks: dict[int, str] | None
    broker_cfg: dict
    seed: int
    live: set[int] = field(default_factory=set)
    epoch: int = FIRST_CONTROLLER_EPOCH
    topics: dict[str, dict] = field(default_factory=dict)  # name -> effective topic config
    overrides: dict[str, dict] = field(default_factory=dict)  # name -> topic config overrides
    partitions: dict[tuple[str, int], PartitionInfo] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.live:
            self.live = set(self.brokers)

    @property
    def controller_id(self) -> int:
        """The broker acting as controller (the first live broker to register)."""
        return min(self.live) if self.live else -1

    def create_topic(self, spec: TopicSpec) -> tuple[list[dict], pd.DataFrame]:
        """Create a topic: place replicas (Kafka's AdminUtils, seeded per topic) unless assigned,
        elect the first live replica. Returns (partition_state rows, LeaderAndIsr entries)."""
        if spec.assignment is not None:
            assignment = {p: list(r) for p, r in spec.assignment.items()}
        else:
            seed = zlib.crc32(f"{self.seed}/{spec.name}".encode())
            assignment = assign_replicas_to_brokers(
                sorted(self.brokers), spec.partitions, spec.replication_factor, self.racks, seed=seed)
        self.overrides[spec.name] = dict(spec.config)
        self.topics[spec.name] = topic_config(self.broker_cfg, spec.config)
        changed = []
        for p, reps in sorted(assignment.items()):
            alive = [b for b in reps if b in self.live]
            self.partitions[(spec.name, p)] = PartitionInfo(list(reps), alive[0] if alive else -1, alive)
            changed.append((spec.name, p))
        return self._states(changed), self.leader_and_isr(changed, is_new=True)

    def _states(self, keys: list[tuple[str, int]]) -> list[dict]:
        return [{"topic": t, "partition": p, "leader": i.leader, "isr": list(i.isr), "replicas": list(i.replicas),
                 "leader_epoch": i.leader_epoch, "controller_epoch": i.controller_epoch, "version": i.version}
                for (t, p) in keys for i in [self.partitions[(t, p)]]]

    def leader_and_isr(self, keys: list[tuple[str, int]], is_new: bool = False,
                       only: set[int] | None = None) -> pd.DataFrame:
        """LeaderAndIsr entries for the given partitions, one per live replica (or only `only`)."""
        rows = []
        for t, p in keys:
            i = self.partitions[(t, p)]
            for b in i.replicas:
                if b in self.live and (only is None or b in only):
                    rows.append((b, t, p, i.leader, i.leader_epoch, self.epoch, csv(i.isr), csv(i.replicas), is_new, None))
        if not rows:
            return empty(LEADER_AND_ISR)
        return conform(pd.DataFrame(rows, columns=list(LEADER_AND_ISR)), LEADER_AND_ISR)

    def broker_started(self, broker: int) -> pd.DataFrame:
        """onBrokerStartup: the broker's replicas go online with the partitions' current state."""
        self.live.add(broker)
        keys = sorted(k for k, i in self.partitions.items() if broker in i.replicas)
        return self.leader_and_isr(keys, only={broker})

    def broker_failed(self, broker: int) -> None:
        self.live.discard(broker)

    def min_isr(self) -> dict[str, int]:
        return {t: int(c["min.insync.replicas"]) for t, c in self.topics.items()}

    def leader_of(self, topic: str, partition: int) -> int:
        return self.partitions[(topic, partition)].leader

    def leaders_of(self, topics: pd.Series, partitions: pd.Series) -> np.ndarray:
        """Current leader of each (topic, partition) pair (-1 for none or unknown)."""
        keys = pd.MultiIndex.from_arrays([topics.to_numpy(), partitions.to_numpy()])
        known = pd.MultiIndex.from_tuples(list(self.partitions))
        pos = known.get_indexer(keys)
        leaders = np.array([i.leader for i in self.partitions.values()] + [-1], dtype="int32")
        return leaders[np.where(pos >= 0, pos, -1)]

    def partition_frame(self) -> pd.DataFrame:
        """Current metadata, one row per partition, ordered by topic and partition."""
        return pd.DataFrame(self._states(sorted(self.partitions)),
                            columns=["topic", "partition", "leader", "isr", "replicas", "leader_epoch",
                                     "controller_epoch", "version"])

    def metrics(self) -> dict:
        """Controller- and broker-reported gauges (protocol.md 4.6; tool-formats 1.8)."""
        under = offline = under_min = 0
        for (t, _), i in self.partitions.items():
            live_leader = i.leader >= 0 and i.leader in self.live
            offline += not live_leader
            under += live_leader and len(i.isr) < len(i.replicas)
            under_min += live_leader and len(i.isr) < int(self.topics[t]["min.insync.replicas"])
        return {"under_replicated": under, "offline": offline, "under_min_isr": under_min,
                "isr_shrinks": 0, "isr_expands": 0, "unclean_elections": 0,
                "active_controller": 1 if self.live else 0, "controller_epoch": self.epoch}
