"""Replication throttles (KIP-73, 0.10.1): which replicas are throttled and how many bytes a fetch may
move for them: ReplicationQuotaManager, ReplicaManager.shouldLeaderThrottle, the
leader/follower.replication.throttled.replicas topic configs (kafka-reassign-partitions --throttle).

Kafka's pieces: ConfigHandler.parseThrottledPartitions turns the topic configs
`leader.replication.throttled.replicas` / `follower.replication.throttled.replicas` into the
partitions a broker throttles; ReplicationQuotaManager (one for the leader side, one for the follower
side) answers isThrottled(tp) and isQuotaExceeded from `leader.replication.throttled.rate` /
`follower.replication.throttled.rate`; ReplicaManager.shouldLeaderThrottle and
ReplicaFetcherThread.shouldFollowerThrottle combine them, and the bytes of throttled partitions are
recorded after the fetch (KafkaApis on the leader, ReplicaFetcherThread.processPartitionData on the
follower, in-sync partitions included).

The rate, as Kafka measures it: a SimpleRate sensor of `replication.quota.window.num` samples of
`replication.quota.window.size.seconds` each (11 x 1 s). A sample starts at the first record after
the previous one ended, samples older than num x size are purged (SampledStat), and the rate is the
bytes of the live samples over the time since the oldest began. The state is the broker's
(`BROKER` frame, `leader_quota` / `follower_quota`: the samples "start_ms:bytes,..."; lost in a crash
as the in-memory sensor is).

Where the emulator departs: Kafka checks the rate before a fetch and serves the whole fetch when it is
not exceeded (so it overshoots by a fetch and then pauses; its first second may even run far above
the rate). Here the check gives the bytes left (`bytes_left`): rate x (now + round_ms - oldest
sample's start) / 1000 - bytes recorded, the round being served counted as elapsed, so the measured
rate is never exceeded, from the first byte on. Records are indivisible and are served whole, in
offset order, while they fit. Because the left-over allowance carries to the next fetch, a move
whose fetch cycle spans two rounds (request out, response back) still runs at the rate, where a
per-round budget would give it half. Without a state (`quota=None`, a fresh sensor) a fetch may take
rate x round_ms / 1000 (`budget`).

fetch.py applies these functions; the configuration comes in the cfg mapping as `quota` =
{"leader": {broker: rate}, "follower": {broker: rate}} (only brokers with a rate below
Long.MaxValue), `throttled_replicas` = {topic: (leader_list, follower_list)} and `round_ms`; when
`quota` or `throttled_replicas` is missing nothing is throttled.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import numpy as np
import pandas as pd

from .config import LONG_MAX, RoundSettings

UNLIMITED = LONG_MAX  # Long.MaxValue: the default rate, and the budget of an unthrottled broker
ALL = "*"
SIDES = ("leader", "follower")


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


def _lists(cfg: RoundSettings, side: str) -> dict[str, tuple[bool, frozenset[tuple[int, int]]]]:
    i = SIDES.index(side)
    return {t: parse_throttled_replicas(v[i]) for t, v in cfg.throttled_replicas.items()
            if v and v[i]}


def is_throttled(cfg: RoundSettings, side: str, topic, partition, broker) -> np.ndarray:
    """ReplicationQuotaManager.isThrottled, vectorised: whether `broker` throttles each
    (topic, partition) on `side` ("leader" or "follower"), from cfg.throttled_replicas."""
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
    no rate or Long.MaxValue, the ReplicationQuotaManager default that never throttles): what a fresh
    sensor allows its first fetch."""
    if rate is None or rate >= UNLIMITED:
        return UNLIMITED
    return min(max(int(rate), 0) * int(round_ms) // 1000, UNLIMITED)


def budgets(cfg: RoundSettings, side: str, brokers) -> np.ndarray:
    """Per-round budget of each broker in `brokers` on `side` (UNLIMITED where it has no rate): the
    allowance of a fresh sensor."""
    return allowances(cfg, side, brokers, 0, None)


# ------------------------------------------------------------------------------ the rate (SimpleRate)

COLUMNS = {"leader": "leader_quota", "follower": "follower_quota"}  # BROKER frame columns holding the samples


def decode(text: str | None) -> list[tuple[int, int]]:
    """A sensor's samples "start_ms:bytes,..." (oldest first) -> [(start_ms, bytes)]."""
    return [(int(a), int(b)) for a, _, b in (x.partition(":") for x in (text or "").split(",") if x)]


def encode(samples: list[tuple[int, int]]) -> str:
    return ",".join(f"{a}:{b}" for a, b in samples)


def window(cfg: RoundSettings) -> tuple[int, int]:
    """(replication.quota.window.num, replication.quota.window.size.seconds in ms)."""
    return cfg.replication_quota_window_num, cfg.replication_quota_window_size_seconds * 1000


def purge(samples: list[tuple[int, int]], now: int, cfg: RoundSettings) -> list[tuple[int, int]]:
    """SampledStat.purgeObsoleteSamples: samples that began num x size or longer ago are gone."""
    num, size = window(cfg)
    return [s for s in samples if now - s[0] < num * size]


def bytes_left(samples: list[tuple[int, int]], rate: int, now: int, cfg: RoundSettings) -> int:
    """isQuotaExceeded as an allowance: the bytes a fetch served at `now` may take so that the rate over
    the sensor's window, this round included, stays within `rate` (UNLIMITED for Long.MaxValue)."""
    if rate >= UNLIMITED:
        return UNLIMITED
    live = purge(samples, now, cfg)
    start = live[0][0] if live else now
    span = now + cfg.round_ms - start
    return max(max(int(rate), 0) * span // 1000 - sum(b for _, b in live), 0)


def _rate_of(cfg: RoundSettings, side: str) -> dict[int, int]:
    return {int(b): int(r) for b, r in ((cfg.quota or {}).get(side) or {}).items()}


def _samples_of(quota: pd.DataFrame | None, side: str) -> dict[int, str]:
    if quota is None or quota.empty:
        return {}
    return dict(zip(quota["broker"].astype("int64"), quota[COLUMNS[side]], strict=True))


def allowances(cfg: RoundSettings, side: str, brokers, now: int, quota: pd.DataFrame | None) -> np.ndarray:
    """bytes_left of each broker in `brokers` on `side`, from the brokers' sensors in `quota` (a BROKER
    frame; None or a broker without samples: a fresh sensor); UNLIMITED where it has no rate."""
    rates = _rate_of(cfg, side)
    b = np.asarray(brokers, dtype="int64")
    out = np.full(len(b), UNLIMITED, dtype="int64")
    if not rates or len(b) == 0:
        return out
    have = _samples_of(quota, side)
    for broker, rate in rates.items():
        out[b == broker] = bytes_left(decode(have.get(broker)), rate, now, cfg)
    return out


def grown(left: np.ndarray, cfg: RoundSettings, brokers, waited_ms: np.ndarray) -> np.ndarray:
    """A follower's quota left as its request carried it (`left`), plus what its rate adds over the
    `waited_ms` the request has waited at the leader: a parked fetch is not held to the allowance of the
    round it was sent in (UNLIMITED stays UNLIMITED)."""
    rates = _rate_of(cfg, "follower")
    b = np.asarray(brokers, dtype="int64")
    rate = np.zeros(len(b), dtype="int64")
    for broker, r in rates.items():
        rate[b == broker] = min(r, UNLIMITED // (1 << 20))
    add = rate * np.maximum(np.asarray(waited_ms, dtype="int64"), 0) // 1000
    left = np.asarray(left, dtype="int64")
    return np.where(left >= UNLIMITED, UNLIMITED, np.minimum(left, UNLIMITED - add) + add)


def record(quota: pd.DataFrame, side: str, brokers, sizes, now: int, cfg: RoundSettings) -> pd.DataFrame:
    """ReplicationQuotaManager.record: add each broker's bytes (`sizes` per row of `brokers`) to its
    `side` sensor at `now`: into the current sample while it lasts (window size), else into a new one
    starting now; obsolete samples are purged. A broker recording 0 bytes only gets a first sample when
    it has none (SampledStat.current: a fetch that moved nothing starts the window; see `touch`). Brokers not in
    `quota` are not recorded."""
    b = np.asarray(brokers, dtype="int64")
    if len(b) == 0 or quota.empty:
        return quota
    per = pd.Series(np.asarray(sizes, dtype="int64")).groupby(b).sum()
    _, size = window(cfg)
    col = COLUMNS[side]
    out = quota.copy()
    ids = out["broker"].astype("int64").to_numpy()
    values = out[col].to_numpy(dtype=object).copy()
    for broker, n in per.items():
        at = np.flatnonzero(ids == broker)
        if len(at) == 0:
            continue
        samples = purge(decode(values[at[0]]), now, cfg)
        if n <= 0 and samples:
            continue
        if samples and now < samples[-1][0] + size:
            samples[-1] = (samples[-1][0], samples[-1][1] + int(n))
        else:
            samples.append((now, int(n)))
        values[at[0]] = encode(samples)
    out[col] = values
    return out


def touch(quota: pd.DataFrame, side: str, brokers, now: int, cfg: RoundSettings) -> pd.DataFrame:
    """A record of 0 bytes (a fetch of a throttled partition that moved nothing yet): a broker with a rate
    on `side` whose sensor has no live sample gets an empty one starting `now` (SampledStat.current), so
    its window runs from the first fetch, as the allowance it was given assumed, not from the first byte."""
    rates = _rate_of(cfg, side)
    b = np.asarray(brokers, dtype="int64")
    b = b[np.isin(b, list(rates))] if rates else b[:0]
    return record(quota, side, b, np.zeros(len(b), dtype="int64"), now, cfg)


def throttling(quota: Mapping[str, Mapping[int, int]] | None, throttled_replicas: Mapping[str, tuple[str, str]]
               ) -> bool:
    """Whether anything can be throttled: some broker has a rate and some topic a throttled replica list
    (RoundSettings' quota and throttled_replicas, as the driver derives them)."""
    return bool(quota and throttled_replicas and any(quota.get(s) for s in SIDES))


def active(cfg: RoundSettings) -> bool:
    """Whether anything can be throttled this round (`throttling`). False costs the fetch path nothing."""
    return throttling(cfg.quota, cfg.throttled_replicas)


def should_leader_throttle(throttled: np.ndarray, in_isr: np.ndarray, limited: np.ndarray) -> np.ndarray:
    """ReplicaManager.shouldLeaderThrottle without its quota test: a follower's fetch of a partition
    the leader throttles may be withheld only when the follower is not in the ISR (and the leader
    has a rate). Whether it is withheld is then up to the allowance (within_budget)."""
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
