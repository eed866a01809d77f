"""Samples of each partition's leader, leader epoch and ISR on real Kafka, read from the controller's own
record of them: the /brokers/topics/T/partitions/P/state znodes (leader, leader_epoch, isr; what the
emulator's `partition_state` table holds) and /brokers/topics/T (replicas, adding/removing replicas of
KIP-455), and /controller_epoch, polled every `interval_ms` with a kazoo client. A znode read costs well under a millisecond on
loopback, where `kafka-topics --describe` would start a JVM per sample (seconds).

A deleted topic's partitions end in `compare.DELETED` (leader and epoch -2, Kafka's LeaderDuringDelete and
EpochDuringDelete, the emulator's partition_state row of a deletion) from the sample that finds
/brokers/topics/T gone (TopicDeletionManager.completeDeleteTopic removes it). While /admin/delete_topics/T
exists their state znodes are not sampled: TopicDeletionManager.onPartitionDeletion takes each replica
OfflineReplica first, whose removeReplicasFromIsr writes the state once per replica (leader -1, epoch + 1
each) within milliseconds, steps the emulator's deletion does not write (it goes to DELETED in one round);
`deleting` holds the states the sampler saw then, `marked_for_deletion` and `deleted` say when."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field

from .cluster import RealCluster
from .compare import DELETED


@dataclass(frozen=True)
class Change:
    """One observed state of a partition, from `time_ms` (after the timeline's start) on."""

    time_ms: int
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]


@dataclass
class Observer:
    """Polls the partition state znodes of `topics` in a thread; `changes` in observation order and
    `reassign_started[(topic, partition)]` / `reassign_done[...]` = first time its adding replicas (KIP-455)
    were set / empty again after being set (the controller writes the target replicas with nothing adding
    or removing once the move is complete)."""

    cluster: RealCluster
    topics: list[str]
    interval_ms: int = 200
    origin: float = 0.0
    changes: list[Change] = field(default_factory=list)
    reassigning: set[tuple[str, int]] = field(default_factory=set)
    reassign_started: dict[tuple[str, int], int] = field(default_factory=dict)
    reassign_done: dict[tuple[str, int], int] = field(default_factory=dict)
    registered: list[tuple[int, int]] = field(default_factory=list)  # (time_ms, broker) of each registration
    # (time_ms, epoch) of each controller epoch seen (a new controller elected: KafkaController.elect)
    controller_epochs: list[tuple[int, int]] = field(default_factory=list)
    # topic -> ms of the first sample that saw /admin/delete_topics/T, of the first that found it gone
    marked_for_deletion: dict[str, int] = field(default_factory=dict)
    deleted: dict[str, int] = field(default_factory=dict)
    # (topic, partition, state) of each state read while its topic was marked for deletion (not in `changes`)
    deleting: set[tuple] = field(default_factory=set)
    _ids: set[int] = field(default_factory=set)
    _last: dict[tuple[str, int], tuple] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def sample(self) -> None:
        zk = self.cluster.zk()
        now = int((time.monotonic() - self.origin) * 1000)
        ids = {int(b) for b in zk.get_children("/brokers/ids")}
        self.registered += [(now, b) for b in sorted(ids - self._ids)]
        self._ids = ids
        if zk.exists("/controller_epoch") is not None:
            epoch = int(zk.get("/controller_epoch")[0])
            if not self.controller_epochs or self.controller_epochs[-1][1] != epoch:
                self.controller_epochs.append((now, epoch))
        for t in self.topics:
            if zk.exists(f"/brokers/topics/{t}") is None:
                self._gone(t, now)
                continue
            marked = zk.exists(f"/admin/delete_topics/{t}") is not None
            if marked:
                self.marked_for_deletion.setdefault(t, now)
            meta = json.loads(zk.get(f"/brokers/topics/{t}")[0])
            adding = meta.get("adding_replicas") or {}
            for p in sorted(int(x) for x in meta["partitions"]):
                key = (t, p)
                if adding.get(str(p)):
                    self.reassigning.add(key)
                    self.reassign_started.setdefault(key, now)
                elif key in self.reassigning and key not in self.reassign_done:
                    self.reassign_done[key] = now
                path = f"/brokers/topics/{t}/partitions/{p}/state"
                if zk.exists(path) is None:
                    continue
                st = json.loads(zk.get(path)[0])
                state = (int(st["leader"]), int(st["leader_epoch"]), tuple(sorted(st["isr"])))
                if marked:
                    if self._last.get(key) != state:
                        self.deleting.add((*key, state))
                elif self._last.get(key) != state:
                    self._last[key] = state
                    self.changes.append(Change(now, t, p, *state))

    def _gone(self, topic: str, now: int) -> None:
        """The partitions of `topic` seen before and not yet deleted end in DELETED at `now`."""
        for key in sorted(k for k, v in self._last.items() if k[0] == topic and v != DELETED):
            self._last[key] = DELETED
            self.changes.append(Change(now, *key, *DELETED))
            self.deleted.setdefault(topic, now)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample()
            except Exception:  # a znode deleted between exists and get, ZooKeeper reconnecting
                pass
            self._stop.wait(self.interval_ms / 1000)

    def start(self, origin: float) -> Observer:
        self.origin = origin
        self._thread = threading.Thread(target=self._loop, name="observer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
