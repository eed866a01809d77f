"""Producers: turn `produce` events into the produce batches each round sends.

A producer with `records: N` sends N records at its event's time; one with `rate_per_sec` and
`duration_ms` sends, in each round, what its rate makes due by the end of that round. With
`partition: all` records are spread round-robin over the topic's partitions, continuing where
the previous round stopped (Kafka's RoundRobinPartitioner for records without keys). Each round a
producer sends one batch per partition it writes to. Record ids are allocated in order, so every
record of a run has a unique id.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..plaindata import from_plain, to_plain
from ..protocol.frames import PRODUCE, empty, filled, owned


@dataclass
class Producer:
    topic: str
    partitions: np.ndarray  # partition ids written to, in round-robin order
    acks: int
    value_bytes: int
    key: str | None
    start_ms: int
    total: int | None = None  # records: N
    rate_per_sec: float | None = None
    duration_ms: int | None = None
    sent: int = 0
    cursor: int = 0

    def due(self, now: int, round_ms: int) -> int:
        """Records to send in the round starting at `now`."""
        if now < self.start_ms:
            return 0
        return max(0, self._sent_by(now + round_ms - self.start_ms) - self.sent)

    def _sent_by(self, elapsed_ms: int) -> int:
        """Records the producer has sent once `elapsed_ms` of its run have passed."""
        if self.total is not None:
            return self.total
        return int(np.floor(self.rate_per_sec * min(elapsed_ms, self.duration_ms) / 1000.0 + 1e-9))

    def skip(self, n: int) -> None:
        """Count the next n records as sent (the cursor moves on as `batches` moves it)."""
        self.cursor = (self.cursor + n) % len(self.partitions)
        self.sent += n

    @property
    def finished(self) -> bool:
        return self.sent >= self._sent_by(self.duration_ms or 0)

    def batches(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(partition, count) of the next n records, round-robin from the cursor."""
        k = len(self.partitions)
        full, rest = divmod(n, k)
        counts = np.full(k, full, dtype="int64")
        order = (self.cursor + np.arange(k)) % k
        counts[order[:rest]] += 1
        self.skip(n)
        nz = counts > 0
        # keep round-robin order so record ids follow the order records were sent
        idx = order[nz[order]]
        return self.partitions[idx], counts[idx]


@dataclass
class Workload:
    """All producers of a run and the next record id."""

    round_ms: int
    request_timeout_ms: int
    next_record_id: int = 0

    def __post_init__(self) -> None:
        self.producers: list[Producer] = []

    def add(self, args: dict, now: int, partition_count: int) -> None:
        parts = np.arange(partition_count) if args["partition"] == "all" else np.array([args["partition"]])
        self.producers.append(Producer(
            topic=args["topic"], partitions=parts, acks=int(args["acks"]), value_bytes=int(args["value_bytes"]),
            key=args.get("key"), start_ms=now, total=args.get("records"),
            rate_per_sec=args.get("rate_per_sec"), duration_ms=args.get("duration_ms")))

    def to_dict(self) -> dict[str, Any]:
        """The producers and the next record id as plain data (run_dir.py)."""
        return {"round_ms": self.round_ms, "request_timeout_ms": self.request_timeout_ms,
                "next_record_id": self.next_record_id, "producers": to_plain(self.producers)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Workload:
        w = cls(int(d["round_ms"]), int(d["request_timeout_ms"]), int(d["next_record_id"]))
        w.producers = from_plain(d["producers"])
        return w

    @property
    def active(self) -> bool:
        return any(not p.finished for p in self.producers)

    def advance(self, now: int) -> int:
        """What `batches(now)` does to the workload (record ids, cursors, finished producers) without making
        the batches; returns the records they would hold. The driver's copy follows a resident window's
        rounds so, when no batch of them can fail (every partition written has a live leader)."""
        total = 0
        for p, n in self._due(now):
            p.skip(n)
            total += n
        self.next_record_id += total
        self._retire()
        return total

    def _due(self, now: int) -> Iterator[tuple[Producer, int]]:
        """(producer, records it sends) of each producer with records due in the round starting at `now`."""
        for p in self.producers:
            n = p.due(now, self.round_ms)
            if n > 0:
                yield p, n

    def _retire(self) -> None:
        """Drop the producers that have sent everything (after a round's records)."""
        self.producers = [p for p in self.producers if not p.finished]

    def written(self) -> tuple[list[str], np.ndarray]:
        """(topic, partition) of every partition an active producer writes to, as two columns."""
        topics = [p.topic for p in self.producers for _ in range(len(p.partitions))]
        parts = np.concatenate([p.partitions for p in self.producers]) if self.producers else np.empty(0, "int64")
        return topics, parts

    def batches(self, now: int) -> pd.DataFrame:
        """PRODUCE rows (broker not yet routed: -1) for the round starting at `now`."""
        cols = self.batch_columns(now)
        return empty(PRODUCE) if cols is None else owned(cols, PRODUCE)

    def batch_columns(self, now: int) -> dict[str, np.ndarray] | None:
        """`batches(now)` as the PRODUCE columns' arrays (None: no batch), for a caller that keeps only some
        rows (a resident task keeps the batches of the partitions its brokers lead)."""
        parts = []  # per producer: its batches' columns (the driver makes a round's batches every round)
        for p, n in self._due(now):
            partitions, counts = p.batches(n)
            first = self.next_record_id + np.concatenate([[0], np.cumsum(counts)[:-1]])
            self.next_record_id += int(counts.sum())
            k = len(counts)
            parts.append({"broker": np.full(k, -1, "int32"), "topic": filled(k, p.topic, object),
                          "partition": partitions.astype("int32"), "record_id": first.astype("int64"),
                          "count": counts.astype("int32"), "acks": np.full(k, p.acks, "int32"),
                          "value_bytes": np.full(k, p.value_bytes, "int32"), "key": filled(k, p.key, object),
                          "sent_ms": np.full(k, now, "int64"),
                          "deadline_ms": np.full(k, now + self.request_timeout_ms, "int64")})
        self._retire()
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else {c: np.concatenate([q[c] for q in parts]) for c in PRODUCE}
