"""Java's hash codes, for replaying the iteration order of Kafka tools' hash maps (JDK 8-17)."""

from __future__ import annotations

import numpy as np


def string_hash(text: str) -> int:
    """``String.hashCode`` over UTF-16 code units, as an unsigned 32-bit int."""
    units = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
    return h


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
