"""Which log directory a broker puts a new replica in: Kafka 2.8's ``kafka.log.LogManager``.

``LogManager.getOrCreateLog`` uses the partition's preferred dir (set by AlterReplicaLogDirs) if there is one,
else ``nextLogDirs()``: the live dirs ordered by how many logs (current and future) each holds, fewest first,
trying each until the directory can be created. No Spark, no Delta.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from sparkkafka.errors import SparkKafkaError

__all__ = ["KafkaStorageError", "assign_log_dirs", "choose_log_dir", "fewest_first", "next_log_dirs"]


class KafkaStorageError(SparkKafkaError, ValueError):
    """Kafka's ``KafkaStorageException`` (error KAFKA_STORAGE_ERROR) raised when no log dir can take the log."""

    kafka_error = "KAFKA_STORAGE_ERROR"


def next_log_dirs(counts: Mapping[str, int], log_dirs: Sequence[str]) -> list[str]:
    """Live dirs, fewest logs first (LogManager.nextLogDirs).

    ``log_dirs`` are the broker's live dirs in ``log.dirs`` order; ``counts`` maps a dir to the number of logs
    it holds, current and future ones alike (a dir absent from it holds none; dirs not in ``log_dirs`` are
    ignored, as Kafka drops the logs of an offline dir). Ties go to the dir listed first in ``log_dirs``.

    Kafka leaves the tie order unspecified: it stable-sorts a Scala immutable Map built from the live dirs. For
    up to four dirs Scala's small maps keep insertion (``log.dirs``) order, which is the rule used here; with
    more dirs Kafka's order is the hash-trie order of the paths, which this function does not reproduce.
    """
    position = {d: i for i, d in enumerate(dict.fromkeys(log_dirs))}
    return sorted(position, key=lambda d: (counts.get(d, 0), position[d]))


def assign_log_dirs(
    existing: Mapping[str, int],
    log_dirs: Sequence[str],
    n_new: int,
    preferred: Sequence[str | None] | None = None,
) -> list[str]:
    """Dirs for ``n_new`` replicas created one after another (LogManager.getOrCreateLog per replica).

    Each replica takes ``preferred[i]`` when that is not None (a pending AlterReplicaLogDirs choice), else the
    head of ``next_log_dirs`` over the counts so far; either way the chosen dir's count goes up by one before
    the next replica is placed. A preferred dir that is not live fails as Kafka's ``createLogDirectory`` does,
    with ``KafkaStorageError("No log directories available. Tried <dir>")``; so does having no live dir.
    """
    wanted = list(preferred) if preferred is not None else []
    if len(wanted) > n_new:
        raise ValueError(f"preferred has {len(wanted)} entries for {n_new} new replicas")
    wanted += [None] * (n_new - len(wanted))
    counts = dict(existing)
    chosen: list[str] = []
    for dir_wanted in wanted:
        candidates = [dir_wanted] if dir_wanted is not None else next_log_dirs(counts, log_dirs)
        usable = [d for d in candidates if d in log_dirs]
        if not usable:
            raise KafkaStorageError("No log directories available. Tried " + ", ".join(candidates))
        counts[usable[0]] = counts.get(usable[0], 0) + 1
        chosen.append(usable[0])
    return chosen


def choose_log_dir(counts: Mapping[str, int], live_dirs: Sequence[str], preferred: str | None = None) -> str | None:
    """The dir LogManager.getOrCreateLog gives one new log, or None where it fails with KafkaStorageException.

    ``preferred`` (an AlterReplicaLogDirs destination, LogManager.preferredLogDirs) wins when it is set: it is
    the only dir tried, so a preferred dir that is not live fails. Otherwise the head of ``next_log_dirs``
    (``counts`` hold the current *and* future logs of each dir, LogManager.nextLogDirs); no live dir fails
    too.
    """
    if preferred:
        return preferred if preferred in live_dirs else None
    order = next_log_dirs(counts, live_dirs)
    return order[0] if order else None


def fewest_first(logs: Sequence[int], n: int) -> np.ndarray:
    """``choose_log_dir`` with no preferred dir for ``n`` new logs created one after another, at once: the
    index (into ``logs``, the live dirs' log counts in ``log.dirs`` order) of each one's dir. Dir i offers a
    slot at each count logs[i], logs[i] + 1, ...; the logs take the n smallest (count, i) slots in order
    (a new cluster's first LeaderAndIsr creates hundreds of thousands of logs per task)."""
    k = len(logs)
    slots = (np.asarray(logs, dtype=np.int64)[:, None] + np.arange(n)) * k + np.arange(k)[:, None]
    return np.sort(slots.ravel())[:n] % k
