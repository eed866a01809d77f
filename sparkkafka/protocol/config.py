"""Kafka configuration: names and 2.8 defaults (KafkaConfig / LogConfig), and the version profiles.

Only configs the emulator models are accepted; an unknown name is a scenario error, since a typo
would otherwise silently run with the default. Values keep Kafka's types: ints for *.ms and sizes,
booleans for *.enable, strings for versions and lists.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import TYPE_CHECKING, Any

from .versions import PROFILES as PROFILES  # re-exported: the profiles live in versions.py
from .versions import profile_of as profile_of

if TYPE_CHECKING:
    from .rules import Rules

LONG_MAX = 9223372036854775807

# Broker configs (server.properties) with their Kafka 2.8 defaults (KafkaConfig, Defaults in
# KafkaConfig.scala).
BROKER_DEFAULTS: dict[str, Any] = {
    "replica.lag.time.max.ms": 30000,
    "replica.lag.max.messages": 4000,  # only read by the 0.8 profile (removed in 0.9.0)
    "replica.fetch.wait.max.ms": 500,
    "replica.fetch.min.bytes": 1,
    "replica.fetch.max.bytes": 1048576,
    "replica.fetch.response.max.bytes": 10485760,
    "replica.fetch.backoff.ms": 1000,
    "replica.socket.timeout.ms": 30000,
    "num.replica.fetchers": 1,
    "replica.high.watermark.checkpoint.interval.ms": 5000,
    "min.insync.replicas": 1,
    "unclean.leader.election.enable": False,
    "default.replication.factor": 1,
    "num.partitions": 1,
    "auto.leader.rebalance.enable": True,
    "leader.imbalance.per.broker.percentage": 10,
    "leader.imbalance.check.interval.seconds": 300,
    "controlled.shutdown.enable": True,
    "controlled.shutdown.max.retries": 3,
    "controlled.shutdown.retry.backoff.ms": 5000,
    "controller.socket.timeout.ms": 30000,
    "zookeeper.session.timeout.ms": 18000,
    "delete.topic.enable": True,
    "leader.replication.throttled.rate": LONG_MAX,
    "follower.replication.throttled.rate": LONG_MAX,
    "replica.alter.log.dirs.io.max.bytes.per.second": LONG_MAX,
    "replication.quota.window.num": 11,
    "replication.quota.window.size.seconds": 1,
    "num.replica.alter.log.dirs.threads": None,  # None = the number of log dirs
    "log.flush.interval.messages": LONG_MAX,
    "log.flush.interval.ms": None,  # None = log.flush.scheduler.interval.ms
    "log.flush.scheduler.interval.ms": LONG_MAX,
    "inter.broker.protocol.version": "2.8",
    "request.timeout.ms": 30000,  # the producer's; kept here so a scenario can set it cluster-wide
}

# Topic-level configs (LogConfig) a scenario may override per topic; value None = inherit broker's.
TOPIC_CONFIGS: dict[str, str] = {
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "leader.replication.throttled.replicas": "",
    "follower.replication.throttled.replicas": "",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "retention.ms": "",
    "segment.bytes": "",
}
TOPIC_DEFAULTS: dict[str, Any] = {
    "leader.replication.throttled.replicas": "",
    "follower.replication.throttled.replicas": "",
    "retention.ms": 604800000,
    "segment.bytes": 1073741824,
}

# The emulator's own settings (scenario `cluster.emulator`).
EMULATOR_DEFAULTS: dict[str, Any] = {
    "round.ms": 100,  # emulated milliseconds per round; one network hop per round
    "history.commit.rounds": 25,  # history tables are committed every N rounds and at the end
    # the driver saves its state (the run's commit point, docs/run-directory.md) every N rounds and when
    # run()/step() return: a killed run continues from there
    "checkpoint.rounds": 1000,
    # Delta upkeep (storage/compaction.py): a checkpoint every N commits of a table (delta.checkpointInterval),
    # and a table partition's N small files of one tier folded into one (Delta's autoCompact.minNumFiles)
    "delta.checkpoint.interval": 10,
    "delta.compact.min.files": 50,
    # each table's Delta log keeps the last N commits before the saved state whole and one checkpoint per
    # N versions of the older history (storage/tables.trim_logs): delta-rs lists the whole log each commit
    "delta.log.retention.commits": 100,
    # who commits the tables' transactions: "deltalake" (delta-rs, no JVM part) or "delta-spark" (Delta's own
    # JVM transaction API over the session's Delta connector, as on Databricks; storage/delta_jvm.py)
    "delta.writer": "deltalake",
    "spark.partitions": 0,  # Spark partitions the brokers are grouped into (0: spark.sql.shuffle.partitions)
    "tail.records": 1000,  # records per led partition kept in memory for followers' fetches
    "read.max.records": 10000,  # records one catch-up read takes from storage per partition
    "page.cache.writeback.ms": 30000,  # when the OS writes appended data to disk (protocol/flush.py)
    # Kafka 2.8 runs no auto leader rebalance while any partition is being reassigned; later Kafka
    # does: true selects that behaviour
    "auto.rebalance.during.reassignment": False,
    # "resident" (the default): broker state stays in long-lived barrier tasks that run many rounds per
    # job and exchange messages directly (engine/resident.py); "rounds": one Spark job per round (also
    # what "resident" becomes on a cluster with dynamic allocation, which refuses barrier jobs); "local":
    # every round in the driver's own process, no Spark job (engine/local.py; a fault campaign's tasks)
    "engine": "resident",
    # the most rounds one resident job runs before returning to the driver: each job costs ~0.3-0.6 s of its
    # own (Spark's job and tasks, the window's files, the driver's commit); 200 against 100 ran the reference
    # scenario in 6 jobs instead of 9, ~3% faster (docs/benchmarks.md)
    "resident.rounds": 200,
    # history rows (replica_state, follower_state, produce_results) a resident task holds before writing them
    # mid-window, which bounds its memory at any window length (about a 100-round window at 30,000 replicas a task)
    "resident.history.rows": 6_000_000,
    # skip the rounds of an idle cluster by jumping the clock to the next thing due (protocol/idle.py)
    "idle.jump": True,
    # an imported cluster's log sizes (topics[].state) become records of this many bytes (the last one of a
    # log smaller), keyless and without payload: 1 MiB = replica.fetch.max.bytes, so a fetch moves one record
    "initial.record.bytes": 1048576,
}
ENGINES = ("rounds", "resident", "local")
DELTA_WRITERS = ("deltalake", "delta-spark")


@dataclass(frozen=True)
class EmulatorSettings:
    """The emulator's settings (scenario `cluster.emulator`, EMULATOR_DEFAULTS), typed: each field is its
    setting's dotted name in snake_case (round.ms -> round_ms). The scenario keeps the mapping (what a run
    directory saves); this is derived from it, never saved, so a run saved before a setting existed loads
    and reads that setting's default."""

    round_ms: int
    history_commit_rounds: int
    checkpoint_rounds: int
    delta_checkpoint_interval: int
    delta_compact_min_files: int
    delta_log_retention_commits: int
    delta_writer: str
    spark_partitions: int
    tail_records: int
    read_max_records: int
    page_cache_writeback_ms: int
    auto_rebalance_during_reassignment: bool
    engine: str
    resident_rounds: int
    resident_history_rows: int
    idle_jump: bool
    initial_record_bytes: int

    @classmethod
    def of(cls, emulator: Mapping[str, Any] | None = None) -> EmulatorSettings:
        """From a scenario's emulator mapping (dotted names; other keys ignored), missing ones at
        EMULATOR_DEFAULTS: the one place their defaults are read."""
        values = {**EMULATOR_DEFAULTS, **(emulator or {})}
        return cls(**{name.replace(".", "_"): values[name] for name in EMULATOR_DEFAULTS})


def version_defaults(profile: str) -> dict[str, Any]:
    """Defaults that changed across versions (docs/versions.md), where the profile's differ from
    2.8's (the default_* flags of rules.Rules)."""
    from .rules import rules_for  # rules.py imports versions.py, not this module: no circle

    r = rules_for(profile)
    values = {"unclean.leader.election.enable": r.default_unclean_leader_election,
              "delete.topic.enable": r.default_delete_topic,
              "replica.lag.time.max.ms": r.default_replica_lag_time_max_ms,
              "zookeeper.session.timeout.ms": r.default_zookeeper_session_timeout_ms}
    return {k: v for k, v in values.items() if v != BROKER_DEFAULTS[k]}


def broker_config(overrides: dict[str, Any] | None) -> dict[str, Any]:
    """The effective broker config: 2.8 defaults, then the profile's historic defaults, then overrides."""
    overrides = dict(overrides or {})
    prof = profile_of(overrides.get("inter.broker.protocol.version", "2.8")) or "2.8"
    effective = {**BROKER_DEFAULTS, **version_defaults(prof), **overrides}
    effective["inter.broker.protocol.version"] = str(effective["inter.broker.protocol.version"])
    return effective


def topic_config(broker_cfg: dict[str, Any], overrides: dict[str, Any] | None) -> dict[str, Any]:
    """A topic's effective config: its overrides, else the broker-level value, else LogConfig's default."""
    out: dict[str, Any] = {}
    for name, broker_name in TOPIC_CONFIGS.items():
        if overrides and name in overrides:
            out[name] = overrides[name]
        elif broker_name:
            out[name] = broker_cfg.get(broker_name)
        else:
            out[name] = TOPIC_DEFAULTS.get(name)
    return out


@dataclass(frozen=True)
class TopicSettings:
    """A topic's effective configs (LogConfig, TOPIC_CONFIGS: its own override, else the broker's, else
    Kafka's default), typed: each field is the Kafka name in snake_case (min.insync.replicas ->
    min_insync_replicas)."""

    min_insync_replicas: int
    unclean_leader_election_enable: bool
    leader_replication_throttled_replicas: str
    follower_replication_throttled_replicas: str
    flush_messages: int
    flush_ms: int | None
    retention_ms: int
    segment_bytes: int

    @classmethod
    def of(cls, broker_cfg: dict[str, Any], overrides: dict[str, Any] | None) -> TopicSettings:
        """From the effective broker config (broker_config) and the topic's overrides (topic_config)."""
        return cls(**{k.replace(".", "_"): v for k, v in topic_config(broker_cfg, overrides).items()})


# ---------------------------------------------------------------------------------------- one round's config
# Kafka's broker configs a round of the brokers reads: Kafka name -> RoundSettings field.
ROUND_KAFKA_CONFIGS: dict[str, str] = {
    "inter.broker.protocol.version": "inter_broker_protocol_version",
    "replica.lag.time.max.ms": "replica_lag_time_max_ms",
    "replica.lag.max.messages": "replica_lag_max_messages",
    "replica.fetch.wait.max.ms": "replica_fetch_wait_max_ms",
    "replica.fetch.max.bytes": "replica_fetch_max_bytes",
    "replica.fetch.response.max.bytes": "replica_fetch_response_max_bytes",
    "replica.fetch.backoff.ms": "replica_fetch_backoff_ms",
    "replica.socket.timeout.ms": "replica_socket_timeout_ms",
    "replica.high.watermark.checkpoint.interval.ms": "replica_high_watermark_checkpoint_interval_ms",
    "unclean.leader.election.enable": "unclean_leader_election_enable",
    "num.replica.alter.log.dirs.threads": "num_replica_alter_log_dirs_threads",
    "replica.alter.log.dirs.io.max.bytes.per.second": "replica_alter_log_dirs_io_max_bytes_per_second",
    "replication.quota.window.num": "replication_quota_window_num",
    "replication.quota.window.size.seconds": "replication_quota_window_size_seconds",
}
# The emulator settings it reads (EMULATOR_DEFAULTS name) -> field (EmulatorSettings' and RoundSettings').
ROUND_EMULATOR_SETTINGS: dict[str, str] = {
    "read.max.records": "read_max_records",
    "tail.records": "tail_records",
    "idle.jump": "idle_jump",
}


def _typed(names: Mapping[str, str], values: Mapping[str, Any]) -> dict[str, Any]:
    """{field: value} of the configs `names` maps (config name -> field), read from `values` by name."""
    return {f: values[k] for k, f in names.items()}


def _fields(names: Mapping[str, str], settings: EmulatorSettings) -> dict[str, Any]:
    """{field: value} of the emulator settings `names` maps (name -> field), read from `settings`."""
    return {f: getattr(settings, f) for f in names.values()}


def topic_settings(tcfg: Mapping[str, TopicSettings]) -> dict[str, Any]:
    """The topics' effective unclean.leader.election.enable and (flush.messages, flush.ms), from their
    topic configs, as RoundSettings' topic_unclean and topic_flush."""
    return {"topic_unclean": {t: bool(c.unclean_leader_election_enable) for t, c in tcfg.items()},
            "topic_flush": {t: (c.flush_messages, c.flush_ms) for t, c in tcfg.items()}}


@dataclass(frozen=True, eq=False)
class RoundSettings:
    """The configuration one round of the brokers reads (the protocol functions' `cfg`), typed: Kafka's
    broker configs as fields (ROUND_KAFKA_CONFIGS names them), the emulator's settings it reads
    (ROUND_EMULATOR_SETTINGS), the profile and its rules (protocol/rules.py), and what the driver derives
    each round: round.ms, topics' unclean.leader.election.enable and flush.messages / flush.ms, the
    brokers' replication quotas (KIP-73 / KIP-113: side -> broker -> bytes/s, brokers with a finite rate
    only; None when nothing derived them, so the static replica.alter.log.dirs.io.max.bytes.per.second
    applies) and the topics' throttled replica lists (leader, follower). Read by attribute only: a Kafka
    name is no key of it, so a setting's default lives in BROKER_DEFAULTS / EMULATOR_DEFAULTS alone."""

    inter_broker_protocol_version: str
    replica_lag_time_max_ms: int
    replica_lag_max_messages: int
    replica_fetch_wait_max_ms: int
    replica_fetch_max_bytes: int
    replica_fetch_response_max_bytes: int
    replica_fetch_backoff_ms: int
    replica_socket_timeout_ms: int
    replica_high_watermark_checkpoint_interval_ms: int
    unclean_leader_election_enable: bool
    num_replica_alter_log_dirs_threads: int | None
    replica_alter_log_dirs_io_max_bytes_per_second: int
    replication_quota_window_num: int
    replication_quota_window_size_seconds: int
    read_max_records: int
    tail_records: int
    idle_jump: bool
    profile: str
    rules: Rules
    round_ms: int = EMULATOR_DEFAULTS["round.ms"]
    topic_unclean: Mapping[str, bool] = dataclass_field(default_factory=dict)
    topic_flush: Mapping[str, tuple[Any, Any]] = dataclass_field(default_factory=dict)
    quota: Mapping[str, Mapping[int, int]] | None = None
    throttled_replicas: Mapping[str, tuple[str, str]] = dataclass_field(default_factory=dict)

    @classmethod
    def of(cls, broker_cfg: Mapping[str, Any], emulator: EmulatorSettings, profile: str,
           **derived: Any) -> RoundSettings:
        """From the effective broker config (broker_config), the scenario's emulator settings, the version
        profile (its rules: rules_for) and the derived values (the fields after `rules`: round_ms,
        topic_unclean, topic_flush, quota, throttled_replicas)."""
        from .rules import rules_for  # rules.py imports versions.py, not this module: no circle

        return cls(**_typed(ROUND_KAFKA_CONFIGS, broker_cfg), **_fields(ROUND_EMULATOR_SETTINGS, emulator),
                   profile=profile, rules=rules_for(profile), **derived)


# ------------------------------------------------------------------------------ the driver's and controller's
# Kafka's broker configs (and one emulator setting) the driver and the controller read: name -> field.
CLUSTER_KAFKA_CONFIGS: dict[str, str] = {
    "inter.broker.protocol.version": "inter_broker_protocol_version",
    "request.timeout.ms": "request_timeout_ms",
    "replica.fetch.wait.max.ms": "replica_fetch_wait_max_ms",
    "zookeeper.session.timeout.ms": "zookeeper_session_timeout_ms",
    "auto.leader.rebalance.enable": "auto_leader_rebalance_enable",
    "leader.imbalance.check.interval.seconds": "leader_imbalance_check_interval_seconds",
    "leader.imbalance.per.broker.percentage": "leader_imbalance_per_broker_percentage",
    "delete.topic.enable": "delete_topic_enable",
}
CLUSTER_EMULATOR_SETTINGS: dict[str, str] = {
    "auto.rebalance.during.reassignment": "auto_rebalance_during_reassignment",
}


@dataclass(frozen=True)
class ClusterSettings:
    """The static broker configs (server.properties, then the cluster-wide dynamic defaults) the driver and
    the controller read, typed: the sessions' zookeeper.session.timeout.ms, the auto leader rebalance's
    configs (KafkaController.checkAndTriggerAutoLeaderRebalance), delete.topic.enable, the producer's
    request.timeout.ms, the idle jump's replica.fetch.wait.max.ms, and the emulator's
    auto.rebalance.during.reassignment."""

    inter_broker_protocol_version: str
    request_timeout_ms: int
    replica_fetch_wait_max_ms: int
    zookeeper_session_timeout_ms: int
    auto_leader_rebalance_enable: bool
    leader_imbalance_check_interval_seconds: int
    leader_imbalance_per_broker_percentage: int
    delete_topic_enable: bool
    auto_rebalance_during_reassignment: bool

    @classmethod
    def of(cls, broker_cfg: Mapping[str, Any], emulator: EmulatorSettings | None = None) -> ClusterSettings:
        """From the effective broker config (broker_config) and the emulator settings (None: their defaults)."""
        return cls(**_typed(CLUSTER_KAFKA_CONFIGS, broker_cfg),
                   **_fields(CLUSTER_EMULATOR_SETTINGS, emulator or EmulatorSettings.of()))

    @classmethod
    def defaults(cls) -> ClusterSettings:
        """Kafka 2.8's defaults and the emulator's (a controller built without a control plane)."""
        return cls.of(BROKER_DEFAULTS)


def dynamic_broker_value(name: str, own: Mapping[str, Any], default: Mapping[str, Any], static: Mapping[str, Any],
                         missing: Any = KeyError) -> Any:
    """A broker config in effect under DynamicBrokerConfig's precedence (KIP-226): the broker's own dynamic
    value (/config/brokers/<id>), else the cluster-wide dynamic default (/config/brokers/<default>), else the
    static config (server.properties, else Kafka's default); `missing` when none has it (by default a KeyError)."""
    if name in own:
        return own[name]
    if name in default:
        return default[name]
    if missing is KeyError:
        return static[name]
    return static.get(name, missing)
