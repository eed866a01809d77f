"""Replication throttles (KIP-73, 0.10.1): which replicas are throttled and how many bytes a round may
move for them. protocol.md 8.4, tool-formats.md 1.7.

Kafka's pieces: ConfigHandler.parseThrottledPartitions turns the topic configs
`leader.replication.throttled.replicas` / `follower.replication.throttled.replicas` into the
partitions a broker throttles; ReplicationQuotaManager (one for the leader side, one for the follower
side) answers isThrottled(tp) and isQuotaExceeded from `leader.replication.throttled.rate` /
`follower.replication.throttled.rate`; ReplicaManager.shouldLeaderThrottle and
ReplicaFetcherThread.shouldFollowerThrottle combine them.

The emulator's quota model: Kafka measures a rate over 11 one-second windows and stops serving once
it is exceeded (so it may overshoot by a fetch). Here a quota is a budget per round and per broker of
rate x round_ms / 1000 bytes that is never exceeded: records are indivisible and are served whole, in
offset order, while they fit. fetch.py applies these functions; the configuration comes in the cfg
mapping as `quota` = {"leader": {broker: rate}, "follower": {broker: rate}} (only brokers with a
rate below Long.MaxValue), `throttled_replicas` = {topic: (leader_list, follower_list)} and
`round_ms`; when `quota` or `throttled_replicas` is missing nothing is throttled.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import numpy as np
import pandas as pd

from .config import LONG_MAX

UNLIMITED = LONG_MAX  # Long.MaxValue: the default rate, and the budget of an unthrottled broker
ALL = "*"
SIDES = ("leader", "follower")
ROUND_MS = 100  # the engine's default round length, used when cfg has no round_ms


@lru_cache(maxsize=1024)
def parse_throttled_replicas(value: str | None) -> tuple[bool, frozenset[tuple[int, int]]]:
    """A `*.replication.throttled.replicas` value -> (all replicas?, {(partition, broker)}).

    ThrottledReplicaListValidator accepts "" (nothing throttled), "*" (every replica of every
    partition of the topic) or a comma list of `partition:broker`; anything else is an error
    (ValueError here, InvalidConfigurationException in Kafka). Blanks around entries are ignored.
    """
    text = (value or "").strip()
    if text == "":
        return False, frozenset()
    if text == ALL:
        return True, frozenset()
    entries = set()
    for item in text.split(","):
        p, sep, b = item.strip().partition(":")
        if not (sep and p.strip().isdigit() and b.strip().isdigit()):
            raise ValueError(f"Invalid throttled replica list {value!r}: entries must be 'partition:broker' "
                             f"or the whole value '*'")
        entries.add((int(p), int(b)))
    return False, frozenset(entries)


def throttled_partitions(value: str | None, broker: int) -> str | list[int]:
    """The partitions `broker` throttles for one topic (ConfigHandler.parseThrottledPartitions): "*"
    for all of them, else the partitions of the entries naming this broker, sorted (entries for other
    brokers are that broker's business)."""
    every, entries = parse_throttled_replicas(value)
    return ALL if every else sorted(p for p, b in entries if b == broker)


def _lists(cfg: Mapping, side: str) -> dict[str, tuple[bool, frozenset[tuple[int, int]]]]:
    i = SIDES.index(side)
    return {t: parse_throttled_replicas(v[i]) for t, v in (cfg.get("throttled_replicas") or {}).items()
            if v and v[i]}


def is_throttled(cfg: Mapping, side: str, topic, partition, broker) -> np.ndarray:
    """ReplicationQuotaManager.isThrottled, vectorised: whether `broker` throttles each
    (topic, partition) on `side` ("leader" or "follower"), from cfg["throttled_replicas"]."""
    topic = np.asarray(topic, dtype=object)
    out = np.zeros(len(topic), dtype=bool)
    lists = _lists(cfg, side)
    if not lists or len(topic) == 0:
        return out
    star = [t for t, (every, _) in lists.items() if every]
    if star:
        out |= pd.Series(topic).isin(star).to_numpy()
    named = [(t, p, b) for t, (every, entries) in lists.items() if not every for p, b in entries]
    if named:
        have = pd.MultiIndex.from_tuples(named)
        probe = pd.MultiIndex.from_arrays([topic, np.asarray(partition, dtype="int64"), np.asarray(broker, dtype="int64")])
        out |= probe.isin(have)
    return out


def budget(rate: int | None, round_ms: int) -> int:
    """Bytes one round may move at `rate` bytes/s: rate x round_ms / 1000, rounded down (UNLIMITED for
    no rate or Long.MaxValue, the ReplicationQuotaManager default that never throttles)."""
    if rate is None or rate >= UNLIMITED:
        return UNLIMITED
    return min(max(int(rate), 0) * int(round_ms) // 1000, UNLIMITED)


def budgets(cfg: Mapping, side: str, brokers) -> np.ndarray:
    """Per-round budget of each broker in `brokers` on `side` (UNLIMITED where it has no rate)."""
    rates = {int(b): r for b, r in ((cfg.get("quota") or {}).get(side) or {}).items()}
    round_ms = cfg.get("round_ms") or ROUND_MS
    b = np.asarray(brokers, dtype="int64")
    out = np.full(len(b), UNLIMITED, dtype="int64")
    for broker, rate in rates.items():
        out[b == broker] = budget(rate, round_ms)
    return out


def active(cfg: Mapping) -> bool:
    """Whether anything can be throttled this round: some broker has a rate and some topic a
    throttled replica list. False costs the fetch path nothing."""
    q = cfg.get("quota")
    return bool(q and cfg.get("throttled_replicas") and any(q.get(s) for s in SIDES))


def should_leader_throttle(throttled: np.ndarray, in_isr: np.ndarray, limited: np.ndarray) -> np.ndarray:
    """ReplicaManager.shouldLeaderThrottle without its quota test: a follower's fetch of a partition
    the leader throttles may be withheld only when the follower is not in the ISR (and the leader
    has a rate). Whether it is withheld is then up to the budget (within_budget)."""
    return throttled & ~in_isr & limited


def should_follower_throttle(throttled: np.ndarray, lag: np.ndarray, limited: np.ndarray) -> np.ndarray:
    """ReplicaFetcherThread.shouldFollowerThrottle without its quota test: a partition the follower
    throttles may be left out only when its fetch state is not in sync, i.e. its lag
    (leader HW - fetch offset) is above 0 (PartitionFetchState.isReplicaInSync)."""
    return throttled & (lag > 0) & limited


def within_budget(sizes: np.ndarray, group: np.ndarray, eligible: np.ndarray, allowance: np.ndarray) -> np.ndarray:
    """Which records to keep when the `eligible` ones of each group share `allowance` bytes (per row,
    the same within a group): the longest prefix, in the given order, whose sizes fit. Records are
    indivisible, so the first one that does not fit ends its group's share; records that are not
    eligible are always kept. With rows in (partition, offset) order each partition keeps a prefix."""
    if not eligible.any():
        return np.ones(len(sizes), dtype=bool)
    spent = pd.Series(np.where(eligible, sizes, 0)).groupby(group).cumsum().to_numpy()
    return ~eligible | (spent <= allowance)


def group_sum(values: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Per row, the sum of `values` over the row's group."""
    return pd.Series(values).groupby(group).transform("sum").to_numpy()


def in_csv(lists, ids) -> np.ndarray:
    """Whether each id is in the matching comma-joined id list (a Kafka ISR as frames carry it)."""
    ids = np.asarray(ids, dtype="int64")
    out = np.zeros(len(ids), dtype=bool)
    if len(ids) == 0:
        return out
    s = pd.Series(list(lists), dtype=object).fillna("").astype(str).str.split(",").explode()
    pos = s.index.to_numpy()
    np.logical_or.at(out, pos, s.to_numpy() == ids.astype(str)[pos])
    return out
