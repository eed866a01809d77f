"""Version rules: what each inter.broker.protocol.version profile does, as one table of named flags.

The emulator groups Kafka versions into profiles (config.PROFILES, docs/versions.md):

    0.8   0.8-0.9         (replica.lag.max.messages, ISR-only HW)
    0.10  0.10.0-0.10.2   (0.10.2's lastCaughtUpTime, KAFKA-4485; no leader epochs yet)
    0.11  0.11.0-1.1      (KIP-101 leader epochs, KIP-112/113 log dirs)
    2.0   2.0             (KIP-279)
    2.1   2.1-2.6         (KIP-320 fencing and the 2.1 fixes)
    2.7   2.7             (KIP-497 AlterIsr)
    2.8   2.8             (Fetch v12 DivergingEpoch)

Code never compares versions itself: it asks the frozen `Rules` of its profile for a named flag,
`rules_for(profile_or_version).truncate_to_hw`. The round config handed to the executors carries
the object as `cfg.rules` (config.RoundSettings, built by driver/round_loop.RoundLoop.params); `cfg.rules` reads it, falling back to
`cfg.profile` for configs built by hand (unit tests).

Each flag is declared once with the profile where its value changes and the KIP / Kafka version
that changed it; `table()` / `format_table()` give every flag's value per profile (docs/versions.md's
table is format_table()'s output).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ..errors import ScenarioError
from .versions import PROFILES, profile_of

IBP = "inter.broker.protocol.version"


def _change(before: Any, changes: Mapping[str, Any], ref: str, what: str) -> Any:
    """A flag whose value is `before` up to the first profile in `changes`, then each value in
    `changes` from its profile on. `ref` names the KIP / JIRA and Kafka version, `what` says in a few
    words what the flag does (both for the table; the attribute docstring has the details)."""
    assert all(p in PROFILES for p in changes), changes
    return field(metadata={"before": before, "changes": dict(changes), "ref": ref, "what": what})


def _from(profile: str, ref: str, what: str) -> Any:
    """A behaviour that starts at `profile`: False before it, True from it."""
    return _change(False, {profile: True}, ref, what)


def _until(profile: str, ref: str, what: str) -> Any:
    """A behaviour that ends at `profile`: True before it, False from it."""
    return _change(True, {profile: False}, ref, what)


@dataclass(frozen=True)
class Rules:
    """The behaviour flags of one profile. Frozen, hashable and picklable (it rides in the round
    config to the executors). `profile` is the profile it was made for (for messages and tables)."""

    profile: str

    # -- 0.9 / 0.10.2: KAFKA-1546, KAFKA-4485 (our "0.10" profile on) --------------------------------
    isr_lag_by_messages: bool = _until(
        "0.10", "KAFKA-1546, 0.9.0", "ISR lag by LEO progress and replica.lag.max.messages")
    """0.8 ISR rule (Partition.getOutOfSyncReplicas before lastCaughtUpTime): a follower is out of sync
    when its LEO has not moved for replica.lag.time.max.ms or it is more than replica.lag.max.messages
    behind. KAFKA-1546 (0.9.0) dropped the message count; the emulator's 0.8 profile (0.8-0.9) keeps 0.8's
    rule and the later ones use 0.10.2's now - lastCaughtUpTime > replica.lag.time.max.ms (KAFKA-4485,
    Partition.getOutOfSyncReplicas)."""
    isr_check_period_divisor: int = _change(
        1, {"0.10": 2}, "KAFKA-4485, 0.10.2", "ISR shrink check every lag / n")
    """The isr-expiration task runs every replica.lag.time.max.ms / this (1 on 0.8, then 2)."""
    hw_counts_caught_up_followers: bool = _from(
        "0.10", "KAFKA-4485, 0.10.2", "recently caught-up non-ISR followers hold the HW")
    """A follower outside the ISR that caught up within replica.lag.time.max.ms also holds the leader's
    HW back (Partition.maybeIncrementLeaderHW); on 0.8 only ISR members count."""

    # -- 0.11: KIP-101 ----------------------------------------------------------------------------
    leader_epoch_cache: bool = _from(
        "0.11", "KIP-101, 0.11.0", "batches carry the leader epoch; epoch cache kept")
    """Message format v2: batches carry the leader epoch and replicas keep a leader-epoch cache
    (leader-epoch-checkpoint). Before, records read as epoch -1 and the cache stays empty (KAFKA-7897)."""
    leader_epoch_exchange: bool = _from(
        "0.11", "KIP-101, 0.11.0", "OffsetsForLeaderEpoch exists")
    """OffsetsForLeaderEpoch exists: a new follower with an epoch cache truncates by its leader's answer
    (the fetcher's Truncating state; a log mover asks the local current log)."""
    truncate_to_hw: bool = _until(
        "0.11", "KIP-101, 0.11.0", "a new follower truncates to its HW")
    """ReplicaManager.makeFollowers before KIP-101: a replica that becomes follower truncates to its own
    high watermark (also what a replica with an empty cache still does afterwards)."""

    # -- 1.0 / 1.1: KIP-112, KIP-113 (our "0.11" profile holds 0.11-1.1) -------------------------
    halt_on_log_dir_failure: bool = _until(
        "0.11", "KIP-112, IBP 1.0", "any failed log dir halts the broker")
    """Before IBP 1.0 a broker halts when any log dir fails; from 1.0 it takes that dir's replicas
    offline and halts only when no dir is left (KIP-112, LogDirFailureChannel)."""
    alter_replica_log_dirs: bool = _from(
        "0.11", "KIP-113, 1.1", "AlterReplicaLogDirs (moves between dirs)")
    """AlterReplicaLogDirs exists (moves between a broker's dirs); before, UNSUPPORTED_VERSION."""

    # -- 2.0: KIP-279 -------------------------------------------------------------------------------
    epoch_truncation: bool = _from(
        "2.0", "KIP-279, 2.0", "(epoch, offset) answers, multi-step truncation")
    """OffsetsForLeaderEpoch v1 answers (epoch, end offset) and the follower truncates by
    getOffsetTruncationState, possibly over several rounds. On 0.11-1.1 (v0) the answer is an offset
    only and the follower truncates to min(answer, LEO) at once (KIP-101)."""

    # -- 2.1 ------------------------------------------------------------------------------------------
    current_leader_epoch: bool = _from(
        "2.1", "KIP-320, 2.1", "current leader epoch in requests (fencing)")
    """Fetch and OffsetsForLeaderEpoch carry the follower's current leader epoch, so the leader fences
    it (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH, KIP-320); before, -1 (not checked)."""
    epoch_entry_on_become_leader: bool = _from(
        "2.1", "KAFKA-7415, 2.1", "new leader writes (epoch, LEO) at once")
    """Partition.makeLeader records (new epoch, LEO) in the epoch cache at once, before any write."""
    restart_fetcher_on_new_epoch: bool = _from(
        "2.1", "KAFKA-7164, 2.1", "any new epoch restarts the fetcher")
    """Any new leader epoch (re)starts a follower's fetcher (and so its truncation); before, only a
    change of leader did."""
    isr_expand_needs_epoch_start: bool = _from(
        "2.1", "KAFKA-7128, 2.1", "ISR join needs LEO >= epoch start")
    """A follower joins the ISR only once its LEO also reached the offset where the leader's current
    epoch began (Partition.maybeExpandIsr)."""
    isr_equal_leo_in_sync: bool = _from(
        "2.1", "KAFKA-7152, 2.1", "equal-LEO follower never out of sync")
    """A follower whose LEO equals the leader's is never out of sync, however long since it last
    caught up (Partition.getOutOfSyncReplicas)."""
    halt_on_out_of_range_truncation: bool = _until(
        "2.1", "KAFKA-7414, 2.1", "exit instead of truncating to a shorter leader")
    """OFFSET_OUT_OF_RANGE with the leader's LEO below the follower's on a topic with unclean election
    off: the broker exits ("log truncation is not allowed"); from 2.1 it truncates
    (AbstractFetcherThread.fetchOffsetAndTruncate)."""

    # -- 2.7: KIP-497 ---------------------------------------------------------------------------------
    alter_isr: bool = _from(
        "2.7", "KIP-497, IBP 2.7-IV2", "ISR changes via AlterIsr to the controller")
    """Leaders send ISR changes to the controller in AlterIsr; before, they write the partition state
    znode themselves (conditional on its version) and leave an isr_change_notification."""

    # -- 2.8: KAFKA-10554 -----------------------------------------------------------------------------
    fetch_divergence: bool = _from(
        "2.8", "KAFKA-10554, Fetch v12, 2.8", "Fetch lastFetchedEpoch / DivergingEpoch")
    """A follower with a non-empty epoch cache skips OffsetsForLeaderEpoch: it fetches from its LEO with
    lastFetchedEpoch and truncates on the leader's DivergingEpoch (KIP-595;
    AbstractFetcherThread.truncateOnFetchResponse)."""

    # -- defaults that changed (docs/versions.md; config.version_defaults) --------------------------
    default_unclean_leader_election: bool = _until(
        "0.11", "KIP-106, 0.11.0", "unclean.leader.election.enable default")
    """unclean.leader.election.enable's default (true until 0.11.0)."""
    default_delete_topic: bool = _from(
        "0.11", "KIP-162, 1.0", "delete.topic.enable default")
    """delete.topic.enable's default (false before 1.0; our 0.11 profile uses 1.0's)."""
    default_replica_lag_time_max_ms: int = _change(
        10000, {"2.1": 30000}, "KIP-537, 2.5", "replica.lag.time.max.ms default")
    """replica.lag.time.max.ms's default (10000 before 2.5; our 2.1 profile spans 2.1-2.6, keeps 2.8's)."""
    default_zookeeper_session_timeout_ms: int = _change(
        6000, {"2.1": 18000}, "KIP-537, 2.5", "zookeeper.session.timeout.ms default")
    """zookeeper.session.timeout.ms's default (6000 before 2.5; as above)."""


FLAGS: tuple[str, ...] = tuple(f.name for f in fields(Rules) if f.name != "profile")


def _value(name: str, profile: str) -> Any:
    meta = Rules.__dataclass_fields__[name].metadata
    value = meta["before"]
    at = PROFILES.index(profile)
    for p, v in meta["changes"].items():
        if PROFILES.index(p) <= at:
            value = v
    return value


@functools.cache
def _rules(profile: str) -> Rules:
    return Rules(profile, **{name: _value(name, profile) for name in FLAGS})


def unknown_version_message() -> str:
    return (f"unknown {IBP}; known: {', '.join(PROFILES)} (and their x.y.z / -IVn forms); "
            'quote it in YAML ("0.10", unquoted, is the number 0.1)')


def rules_for(version: Rules | str) -> Rules:
    """The rules of a profile or of any inter.broker.protocol.version Kafka accepts ("2.8", "2.7-IV2",
    "0.10.2"); one shared instance per profile. A Rules object is returned as it is. An unknown version
    is a ScenarioError, as the scenario loader reports it."""
    if isinstance(version, Rules):
        return version
    text = str(version) if isinstance(version, str | int | float) and not isinstance(version, bool) else ""
    profile = profile_of(text) if text else None
    if profile is None:
        raise ScenarioError(IBP, version, unknown_version_message())
    return _rules(profile)


def first_profile(name: str) -> str | None:
    """The first profile where flag `name` differs from its value on the oldest profile (None: never)."""
    meta = Rules.__dataclass_fields__[name].metadata
    return next(iter(meta["changes"]), None)


def table() -> dict[str, dict[str, Any]]:
    """flag -> {profile: value} for every profile, in declaration order."""
    return {name: {p: getattr(_rules(p), name) for p in PROFILES} for name in FLAGS}


def format_table() -> str:
    """The rules table as Markdown: one row per flag, what it does, its source (KIP / JIRA, Kafka
    version) and its value per profile (yes / - for booleans)."""
    def cell(v: Any) -> str:
        return ("yes" if v else "-") if isinstance(v, bool) else str(v)

    head = ["flag", "what", "changed by", *PROFILES]
    rows = [head, ["---"] * len(head)]
    for name, per in table().items():
        meta = Rules.__dataclass_fields__[name].metadata
        rows.append([f"`{name}`", meta["what"], meta["ref"], *(cell(per[p]) for p in PROFILES)])
    return "\n".join("| " + " | ".join(r) + " |" for r in rows) + "\n"
