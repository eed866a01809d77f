"""Java's hash codes, for replaying the iteration order of Kafka's hash maps (JDK 8-17, Scala 2.13): its tools'
output, and the order a broker creates the logs of one LeaderAndIsr in."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def string_hash(text: str) -> int:
    """``String.hashCode`` over UTF-16 code units, as an unsigned 32-bit int."""
    units = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
    return h


def partition_hash(topic: str, partition: int) -> int:
    """``kafka.cluster.Partition.hashCode`` (2.8): ``31 + topic.hashCode + 17 * partitionId``, unsigned 32-bit."""
    return (31 + string_hash(topic) + 17 * int(partition)) & 0xFFFFFFFF


def spread(h: int) -> int:
    """``HashMap.hash``: a hash code with its high half folded into the low half."""
    return h ^ (h >> 16)


def concurrent_hash_map_slots(hashes: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The ``ConcurrentHashMap`` slot of each key (hash code `hashes[i]`) in a map holding `counts[i]`
    keys: a table of 16 slots, doubled while the count reaches 3/4 of it; slot = spread hash & (size - 1)
    (``ConcurrentHashMap.spread`` also clears the sign bit)."""
    size = np.full(len(hashes), 16, np.int64)
    counts = np.asarray(counts, np.int64)
    while (grow := counts >= size - (size >> 2)).any():
        size[grow] <<= 1
    h = np.asarray(hashes, np.int64) & 0xFFFFFFFF
    return ((h ^ (h >> 16)) & 0x7FFFFFFF) & (size - 1)


def scala_hash_keys(hashes: Sequence[int] | np.ndarray, counts: Sequence[int] | np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The iteration keys of each key (hash code `hashes[i]`) in a Scala 2.13 ``mutable.HashMap``/``HashSet``
    holding `counts[i]` keys (16 slots, doubled before the insertion that reaches 3/4): (its slot, of
    ``h ^ (h >>> 16)``; that improved hash as a signed int). Keys iterate by slot, then improved hash."""
    h = np.asarray(hashes, dtype=np.int64).reshape(-1) & 0xFFFFFFFF
    n = np.asarray(counts, dtype=np.int64).reshape(-1)
    size = np.full(len(h), 16, np.int64)
    while (grow := n >= size * 3 // 4).any():
        size[grow] <<= 1
    improved = h ^ (h >> 16)
    return improved & (size - 1), np.where(improved & 0x80000000, improved - (1 << 32), improved)


def scala_hash_order(hashes: Sequence[int] | np.ndarray) -> list[int]:
    """Positions of distinct keys (hash codes `hashes`, inserted in order) in the iteration order of one
    Scala 2.13 ``mutable.HashMap``/``mutable.HashSet`` (``scala_hash_keys``; ties in insertion order)."""
    slot, signed = scala_hash_keys(hashes, np.full(len(hashes), len(hashes)))
    return [int(i) for i in np.lexsort((np.arange(len(slot)), signed, slot))]
