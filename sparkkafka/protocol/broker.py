"""One broker round as a pure function: Kafka's KafkaApis + ReplicaManager + ReplicaFetcherThread loop.

`step(state, inbox, now, rules, config, read) -> Step(state, outbox, effects)`, in the shape of dask's
worker state machine: the brokers' memory (`BrokerState`: the frames of protocol/frames.py) and the
messages that reached them (`Inbox`) go in; their new memory, the messages they send (`Outbox`) and
what they ask of their disks (`effects`: frozen dataclasses of plain data) come out. Nothing here
opens a file, a Delta table or a Spark session; the engine (engine/broker_round.py) executes the
effects in order, and every broker a task hosts is stepped at once (all frames carry `broker`).

Order inside a round, per broker: (re)start from the logs recovered from disk; LeaderAndIsr (with the
profile's follower truncation); OffsetsForLeaderEpoch answers and fetch responses as a follower;
produce batches as a leader; OffsetsForLeaderEpoch and fetch requests as a leader (new, then parked
ones); the produce purgatory; new requests as a follower; the log-dir movers (KIP-113); flushes, HW
and leader-epoch checkpoints; the effects that persist the round.

Reads. Two kinds of records come from storage:
- A restarting broker's logs (LogManager.loadLogs). Which brokers restart is known before the round
  (START messages), so the engine reads their dirs' files and log rows in a pre-pass and hands them
  in as `Inbox.recovered` (`RecoveredLogs` per broker); `recover` is the pure part (`load`, the epoch
  cache cut at the LEO).
- Records a leader no longer holds in its tail (a lagging follower's fetch) and records a log-dir
  mover copies from the current log. Which ones depends on this round's own work (the produce appends,
  the truncations, the movers' selection), so a pre-pass would have to replay the round or read whole
  logs conservatively. Instead the round is a generator (`round_steps`) that suspends with a `ReadLog`
  request (plain data: the offset ranges of the brokers' current logs) and resumes with the records:
  a two-phase step that reads exactly what today's round reads, so the tables stay byte-identical.
  `step` drives it with a `read` function: the engine's reads the Delta log, tests pass
  `read_from(records)`, an in-memory log.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field, fields, replace

import numpy as np
import pandas as pd

from . import (
    alter_log_dirs,
    controller_requests,
    fetch,
    flush,
    idle,
    isr,
    leader_epoch,
    log_dir_failure,
    offsets_for_leader_epoch,
    produce,
    truncation,
)
from . import frames as F
from .config import RoundSettings
from .high_watermark import maybe_increment_leader_hw
from .leader_and_isr import become_leader_or_follower, new_broker_rows
from .replica_marks import MARKS, replica_marks
from .replica_marks import to_summary as marks_summary
from .rules import Rules

# ------------------------------------------------------------------------------------------------ data


@dataclass(frozen=True)
class BrokerState:
    """What the hosted brokers keep in memory between rounds (lost when a broker crashes)."""

    replicas: pd.DataFrame = field(default_factory=lambda: F.empty(F.REPLICA))
    remotes: pd.DataFrame = field(default_factory=lambda: F.empty(F.REMOTE))
    tail: pd.DataFrame = field(default_factory=lambda: F.empty(F.RECORD))  # leaders' recent records
    brokers: pd.DataFrame = field(default_factory=lambda: F.empty(F.BROKER))
    parked: pd.DataFrame = field(default_factory=lambda: F.empty(F.FETCH))  # fetches in the fetch purgatory
    pending: pd.DataFrame = field(default_factory=lambda: F.empty(F.PENDING))  # the produce purgatory
    futures: pd.DataFrame = field(default_factory=lambda: F.empty(F.FUTURE))
    preferred: pd.DataFrame = field(default_factory=lambda: F.empty(F.PREFERRED_DIR))
    offline: pd.DataFrame = field(default_factory=lambda: F.empty(F.OFFLINE_REPLICA))


@dataclass(frozen=True)
class RecoveredLogs:
    """One restarting broker's logs as its live dirs hold them (read by the engine): `disk` and
    `future_disk` (broker, topic, partition, log_dir, hw, recovery_point, epoch_cache: the checkpoint
    files), `log` and `future_log` (broker, log_dir, topic, partition, offset, leader_epoch rows)."""

    disk: pd.DataFrame
    log: pd.DataFrame
    future_disk: pd.DataFrame
    future_log: pd.DataFrame


@dataclass(frozen=True)
class Inbox:
    """The messages that reached the hosted brokers this round (plus the recovered logs of the
    brokers that start)."""

    fetches: pd.DataFrame = field(default_factory=lambda: F.empty(F.FETCH))
    fetch_responses: pd.DataFrame = field(default_factory=lambda: F.empty(F.FETCH_RESPONSE))
    fetch_records: pd.DataFrame = field(default_factory=lambda: F.empty(F.RECORD))
    produce: pd.DataFrame = field(default_factory=lambda: F.empty(F.PRODUCE))
    leader_and_isr: pd.DataFrame = field(default_factory=lambda: F.empty(F.LEADER_AND_ISR))
    start: pd.DataFrame = field(default_factory=lambda: pd.DataFrame({"broker": np.empty(0, "int32")}))
    stop_replica: pd.DataFrame = field(default_factory=lambda: F.empty(F.STOP_REPLICA))
    update_metadata: pd.DataFrame = field(default_factory=lambda: F.empty(F.UPDATE_METADATA))
    isr_results: pd.DataFrame = field(default_factory=lambda: F.empty(F.ISR_RESULT))
    shutdown: pd.DataFrame = field(default_factory=lambda: pd.DataFrame({"broker": np.empty(0, "int32")}))
    epoch_requests: pd.DataFrame = field(default_factory=lambda: F.empty(F.EPOCH_REQUEST))
    epoch_responses: pd.DataFrame = field(default_factory=lambda: F.empty(F.EPOCH_RESPONSE))
    alter_log_dirs: pd.DataFrame = field(default_factory=lambda: F.empty(F.ALTER_LOG_DIRS))
    log_dir_failures: pd.DataFrame = field(default_factory=lambda: F.empty(F.LOG_DIR_FAILURE))
    recovered: Mapping[int, RecoveredLogs] = field(default_factory=dict)  # not a message: the START pre-pass


@dataclass(frozen=True)
class Outbox:
    """What the brokers send: to other brokers (fetches, responses, epoch requests and answers) and to
    the controller (ISR changes, offline replicas, AlterReplicaLogDirs answers); `summary` for the driver."""

    fetches: pd.DataFrame
    fetch_responses: pd.DataFrame
    fetch_records: pd.DataFrame
    isr_changes: pd.DataFrame
    epoch_requests: pd.DataFrame
    epoch_responses: pd.DataFrame
    offline_replicas: pd.DataFrame
    alter_log_dirs_responses: pd.DataFrame
    summary: dict


@dataclass(frozen=True)
class RoundFacts:
    """What every broker's round reads besides its state and inbox: the settings (`cfg`, protocol/config.py's
    RoundSettings), min.insync.replicas per topic, the log dirs, and the cluster
    facts the driver knows (failed dirs, cut links, stalls). The engine's RoundParams and IdleJump carry one."""

    cfg: RoundSettings
    min_isr: Mapping[str, int]
    log_dirs: tuple[str, ...]
    offline_dirs: Mapping[int, frozenset] = field(default_factory=dict)  # broker -> its failed dirs (KIP-112)
    unreachable: Mapping = field(default_factory=dict)  # follower -> leaders it cannot reach
    paused: frozenset = frozenset()  # brokers in a stop-the-world stall: untouched this round
    write_history: bool = True


# Effects: what the engine persists, in this order (a later one may rewrite a file an earlier one wrote).

@dataclass(frozen=True)
class WriteHwCheckpoint:
    """replication-offset-checkpoint of one dir: (topic, partition, HW) of every log in it."""

    broker: int
    log_dir: str
    entries: tuple


@dataclass(frozen=True)
class WriteFlushedOffsets:
    """The dir's flushed-offsets file: (topic, partition, recovery point) of every log in it."""

    broker: int
    log_dir: str
    entries: tuple


@dataclass(frozen=True)
class WriteEpochCheckpoint:
    """One log's leader-epoch-checkpoint ((epoch, start offset) entries); `future`: a future log's."""

    broker: int
    log_dir: str
    topic: str
    partition: int
    entries: tuple
    future: bool = False


@dataclass(frozen=True)
class RemoveLogFiles:
    """Delete one log's folder (`future`: a future log's)."""

    broker: int
    log_dir: str
    topic: str
    partition: int
    future: bool = False


@dataclass(frozen=True)
class WritePartitionsListing:
    """The dir's `partitions` (`future`: `future-partitions`) listing: (topic, partition) of its logs."""

    broker: int
    log_dir: str
    partitions: tuple
    future: bool = False


@dataclass(frozen=True)
class AppendRecords:
    """The round's new records for the log table (RECORD columns plus log_dir and is_future)."""

    records: pd.DataFrame


@dataclass(frozen=True)
class TruncateLog:
    """Cut the logs at `cuts` (broker, log_dir, topic, partition, offset: records at or above go) and turn
    swapped-in future logs' records current (`flips`: broker, log_dir, topic, partition)."""

    cuts: pd.DataFrame
    flips: pd.DataFrame


@dataclass(frozen=True)
class HistoryRows:
    """This round's rows of one history table (replica_state with `role`, follower_state with
    `remote_leo`, produce_results as answered batches, state_change_log); the engine stamps round and time."""

    table: str
    frame: pd.DataFrame


@dataclass(frozen=True)
class ReadLog:
    """A request to read the brokers' current logs: `ranges` (broker, topic, partition, from_offset,
    to_offset), answered with the RECORD rows in them (src = the broker read)."""

    ranges: pd.DataFrame


@dataclass(frozen=True)
class Step:
    """A round's outcome: the brokers' new memory, what they send, what the engine must persist (in order)."""

    state: BrokerState
    outbox: Outbox
    effects: tuple
    deferred: Inbox | None = None  # messages to paused brokers, delivered again next round


Effect = (WriteHwCheckpoint | WriteFlushedOffsets | WriteEpochCheckpoint | RemoveLogFiles | WritePartitionsListing
          | AppendRecords | TruncateLog | HistoryRows)


# ------------------------------------------------------------------------------------------- recovery


def load(disk: pd.DataFrame, log: pd.DataFrame, how: str) -> pd.DataFrame:
    """Logs as LogManager loads them: LEO and log start from the log itself, HW from the checkpoint
    clamped into [logStart, LEO], the leader-epoch cache from its checkpoint (cut at the LEO by the caller)."""
    log = log.sort_values(["topic", "partition", "offset"])
    g = log.groupby(["broker", "log_dir", "topic", "partition"], as_index=False).agg(
        leo=("offset", "max"), log_start_offset=("offset", "min"), last_fetched_epoch=("leader_epoch", "last"))
    g["leo"] += 1
    d = disk.merge(g, on=["broker", "log_dir", "topic", "partition"], how=how)
    d["leo"] = d["leo"].fillna(0)
    d["log_start_offset"] = d["log_start_offset"].fillna(0)
    d["last_fetched_epoch"] = d["last_fetched_epoch"].fillna(-1)
    d["hw"] = np.clip(d["hw"].fillna(0), d["log_start_offset"], d["leo"])
    d["recovery_point"] = np.minimum(d["recovery_point"].fillna(0), d["leo"])
    d["epoch_cache"] = d["epoch_cache"].fillna("")
    return d


def _cut_caches(r: pd.DataFrame) -> pd.DataFrame:
    has = np.flatnonzero(r["epoch_cache"].str.len().to_numpy() > 0)
    return leader_epoch.on_truncate(r, has, F.array(r, "leo")[has])


def _stacked(got: list[RecoveredLogs], disk: str, log: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    return (pd.concat([getattr(g, disk) for g in got], ignore_index=True),
            pd.concat([getattr(g, log) for g in got], ignore_index=True))


def recover(recovered: Mapping[int, RecoveredLogs]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Logs of restarting brokers as Kafka's LogManager loads them (`load`), no role until LeaderAndIsr.
    Future logs (KIP-113 moves) are loaded too, their movers idle until the first LeaderAndIsr; a future
    log whose current log is not loaded is left alone. Returns (replicas, futures)."""
    got = [recovered[b] for b in sorted(recovered)]
    # all brokers in one load (its merge is on the broker too, and an outer merge sorts by the keys, broker
    # first, so the rows come in the order per-broker loads gave): one load per broker cost ~17 ms each
    d = load(*_stacked(got, "disk", "log"), "outer") if got else pd.DataFrame()
    if d.empty:
        return F.empty(F.REPLICA), F.empty(F.FUTURE)
    r = _cut_caches(F.new_replicas(d))
    moving = [g for g in got if len(g.future_disk)]
    fd = load(*_stacked(moving, "future_disk", "future_log"), "left") if moving else pd.DataFrame()
    if fd.empty:
        return r, F.empty(F.FUTURE)
    fd = fd[F.locate(r, fd) >= 0]
    fl = _cut_caches(F.new_replicas(fd))
    fut = alter_log_dirs.new_futures(fl[["broker", "topic", "partition", "log_dir", "leo", "hw", "log_start_offset",
                                         "recovery_point", "last_fetched_epoch", "epoch_cache"]].assign(
        fetch_state=F.FUTURE_IDLE, fetch_offset=F.array(fl, "hw")))
    return r, fut


# ------------------------------------------------------------------------------------------- reads


Reader = Callable[[ReadLog], pd.DataFrame]
READ_COLUMNS = ["broker", "topic", "partition", "offset", "leader_epoch", "record_id", "value_bytes", "key",
                "timestamp"]


def read_from(log: pd.DataFrame) -> Reader:
    """A Reader answering ReadLog requests from an in-memory log (RECORD rows, `broker` = whose log),
    per broker in id order as the engine's reads are."""
    def read(req: ReadLog) -> pd.DataFrame:
        parts = []
        for b, g in req.ranges.groupby("broker"):
            m = log[log["broker"] == b].merge(g.drop(columns=["broker"]), on=["topic", "partition"])
            m = m[(m["offset"] >= m["from_offset"]) & (m["offset"] < m["to_offset"])]
            parts.append(m[READ_COLUMNS].assign(src=int(b)))
        return F.concat(parts, F.RECORD)
    return read


def no_reads(req: ReadLog) -> pd.DataFrame:
    raise ValueError(f"the round needs records from storage ({len(req.ranges)} ranges) and no reader was given")


# ------------------------------------------------------------------------------------------- effects


def _dir_entries(replicas: pd.DataFrame, futures: pd.DataFrame, dirs: list[tuple[int, str]], col: str
                 ) -> list[tuple]:
    """For each (broker, log dir) of `dirs`: (topic, partition, value) of every log in it, current then
    future, each in row order (a partition has at most one log per dir). One grouping of each frame by
    (broker, log_dir), not two row selections per dir (72 frames for 12 brokers of 3 dirs)."""
    found: dict[tuple, list] = {(int(b), d): [] for b, d in dirs}
    if not dirs:
        return []
    for f in (replicas, futures):
        if f.empty:
            continue
        group = F.group_ids(f, ["broker", "log_dir"])
        order = np.argsort(group, kind="stable")
        b, d, group = F.array(f, "broker")[order], F.array(f, "log_dir")[order], group[order]
        starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
        ends = np.r_[starts[1:], len(order)].tolist()
        t, p, v = (F.array(f, c)[order] for c in ("topic", "partition", col))
        for at, end in zip(starts.tolist(), ends, strict=True):
            rows = found.get((int(b[at]), d[at]))
            if rows is not None:
                rows += zip(t[at:end].tolist(), p[at:end].tolist(), v[at:end].tolist(), strict=True)
    return [tuple(found[int(b), d]) for b, d in dirs]


def live_dirs(config: RoundFacts, b: int) -> list[str]:
    """Broker b's log dirs less those that failed (KIP-112)."""
    gone = config.offline_dirs.get(int(b), ())
    return [d for d in config.log_dirs if d not in gone]


def hw_checkpoints(config, replicas: pd.DataFrame, futures: pd.DataFrame, brokers) -> list[WriteHwCheckpoint]:
    """The replication-offset-checkpoint writes of every live dir of `brokers` (config: its log_dirs and
    offline_dirs); the idle jump rewrites the ones its skipped rounds would have written with this too."""
    dirs = [(int(b), d) for b in brokers for d in live_dirs(config, b)]
    return [WriteHwCheckpoint(b, d, e) for (b, d), e in zip(dirs, _dir_entries(replicas, futures, dirs, "hw"),
                                                             strict=True)]


def checkpoint_hw(config: RoundFacts, now: int, replicas: pd.DataFrame, futures: pd.DataFrame,
                  brokers: pd.DataFrame, force: set[int] = frozenset()) -> tuple[pd.DataFrame, list]:
    """replication-offset-checkpoint (the HW of every current and future log in the dir) for brokers
    whose replica.high.watermark.checkpoint.interval.ms has passed (and, at a clean shutdown or a log-dir
    move's swap, for the brokers concerned). A failed dir is not written. Returns (brokers, effects)."""
    interval = config.cfg.replica_high_watermark_checkpoint_interval_ms
    due = F.array(brokers, "hw_checkpoint_ms") + interval <= now
    due |= F.array(brokers, "hw_checkpoint_ms") < 0
    due |= np.isin(F.array(brokers, "broker"), list(force))
    if not due.any():  # most rounds (every replica.high.watermark.checkpoint.interval.ms: 5 s, 50 rounds)
        return brokers, []
    effects = hw_checkpoints(config, replicas, futures, F.array(brokers, "broker")[due])
    return F.with_values(brokers, "hw_checkpoint_ms", due, now), effects


def flush_logs(config: RoundFacts, now: int, replicas: pd.DataFrame, before: pd.DataFrame, found: np.ndarray,
               stopping: set[int], futures: pd.DataFrame, touched: set[tuple[int, str]] = frozenset()
               ) -> tuple[pd.DataFrame, pd.DataFrame, list]:
    """Kafka's flush rules (protocol/flush.py) and a clean shutdown's flush of every log, future logs
    included; the dirs whose flushed offsets moved, or were cut by a truncation, or gained or lost a log
    by a move (`touched`), get their flushed-offsets file rewritten. Returns (replicas, futures, effects)."""
    force = np.isin(F.array(replicas, "broker"), list(stopping))  # ~10x cheaper than Series.isin
    replicas, _ = flush.maybe_flush(replicas, config.cfg.topic_flush, now, force)
    old = F.take(before, "recovery_point", found, -1)
    moved = F.array(replicas, "recovery_point") != old
    dirs = set(zip(F.array(replicas, "broker")[moved], F.array(replicas, "log_dir")[moved], strict=True))
    if stopping and len(futures):
        stop_f = futures["broker"].isin(list(stopping)).to_numpy() & (futures["recovery_point"] < futures["leo"]).to_numpy()
        if stop_f.any():
            futures = futures.copy()
            futures.loc[stop_f, "recovery_point"] = futures.loc[stop_f, "leo"]
            dirs |= set(zip(F.array(futures, "broker")[stop_f], F.array(futures, "log_dir")[stop_f], strict=True))
    write = [(int(b), d) for b, d in sorted(dirs | set(touched)) if d not in config.offline_dirs.get(int(b), ())]
    effects = [WriteFlushedOffsets(b, d, e)
               for (b, d), e in zip(write, _dir_entries(replicas, futures, write, "recovery_point"), strict=True)]
    return replicas, futures, effects


def checkpoint_epochs(before: pd.DataFrame, found: np.ndarray, replicas: pd.DataFrame,
                      future: bool = False) -> list[WriteEpochCheckpoint]:
    """leader-epoch-checkpoint for every log (`future`: future log) whose cache changed this round."""
    old = F.take(before, "epoch_cache", found, None)
    new = F.array(replicas, "epoch_cache")
    changed = np.flatnonzero(new != old)  # then, of those only (comparing strings costs ~30 ns a row):
    changed = changed[(new[changed] != "") | pd.notna(old[changed])]  # a new log's empty cache needs no file
    cols = [F.array(replicas, c)[changed] for c in ("broker", "log_dir", "topic", "partition")]
    entries = F.per_row(lambda text: tuple(leader_epoch.decode(text)), new[changed])  # a new cluster's: all one
    return [WriteEpochCheckpoint(int(b), d, t, int(part), e, future)
            for b, d, t, part, e in zip(*cols, entries, strict=True)]


def list_logs(config: RoundFacts, before: pd.DataFrame, after: pd.DataFrame,
              future: bool = False) -> list[WritePartitionsListing]:
    """A dir's `partitions` listing (`future`: `future-partitions`) when logs were created in it or
    deleted from it. A failed dir is not written."""
    if before is after or (before.empty and after.empty):  # no log created or deleted (futures: most rounds)
        return []
    key = ["broker", "log_dir", "topic", "partition"]
    old, new = set(F.rows(before, key)), set(F.rows(after, key))
    changed = sorted({(b, d) for b, d, _, _ in old ^ new})
    if not changed:
        return []
    # each dir's rows at once, in `after`'s order (a select per dir compared every row with every dir: at
    # 1M replicas ~450 dirs x 500,000 rows per task in a new cluster's first round)
    rows = {(int(b), d): at for (b, d), at in pd.DataFrame(
        {"b": F.array(after, "broker"), "d": F.array(after, "log_dir")}).groupby(["b", "d"], sort=False).indices.items()}
    topics, partitions = F.array(after, "topic"), F.array(after, "partition")
    out = []
    for b, d in changed:
        if d in config.offline_dirs.get(int(b), ()):
            continue
        at = rows.get((int(b), d), np.zeros(0, dtype=np.intp))
        out.append(WritePartitionsListing(int(b), d, tuple(zip(topics[at].tolist(), partitions[at].tolist(), strict=True)),
                                          future))
    return out


def move_files(replicas: pd.DataFrame, swaps: pd.DataFrame, dropped: pd.DataFrame) -> list:
    """A move's swap on the broker's files: the log's leader-epoch-checkpoint in its new dir, the old log's
    and the future log's folders removed; dropped (cancelled, deleted) future logs' folders removed."""
    out: list = []
    if swaps.empty and dropped.empty:  # the common round: itertuples builds a namedtuple class per call (~2 ms)
        return out
    at = F.locate(replicas, swaps)
    for (b, t, part, old, new), i in zip(F.rows(swaps, alter_log_dirs.SWAPS), at, strict=True):
        out += [WriteEpochCheckpoint(int(b), new, t, int(part), tuple(leader_epoch.decode(replicas["epoch_cache"].iat[i]))),
                RemoveLogFiles(int(b), old, t, int(part)), RemoveLogFiles(int(b), new, t, int(part), future=True)]
    out += [RemoveLogFiles(int(b), d, t, int(part), future=True) for b, t, part, d in F.rows(dropped, alter_log_dirs.LOGS)]
    return out


def log_rows(replicas: pd.DataFrame, futures: pd.DataFrame, appended: pd.DataFrame, copied: pd.DataFrame,
             swaps: pd.DataFrame) -> pd.DataFrame:
    """The round's records for the log table: what replicas appended, in their dirs, and what the movers
    copied into future logs (is_future). A log swapped in this round holds its records from the future
    log's copy, written as current records; the old log's appends of this round are not written."""
    if len(swaps):
        appended = appended[F.locate(swaps, appended) < 0]
    cur = appended.copy(deep=False)  # new columns only: no copy of the records
    cur["log_dir"], cur["is_future"] = F.array(replicas, "log_dir")[F.locate(replicas, appended)], False
    if copied.empty:
        return cur
    fpos, spos = F.locate(futures, copied), F.locate(swaps, copied)
    fut = copied.assign(log_dir=np.where(fpos >= 0, F.take(futures, "log_dir", fpos, None),
                                         F.take(swaps, "log_dir", spos, None)), is_future=fpos >= 0)
    return pd.concat([cur, fut], ignore_index=True)


_ROLES = np.array(["none", "follower", "leader"], dtype=object)  # three strings shared by every row, not one
# built per row from a unicode array when the frame takes the column


# The state columns a replica_state / follower_state row holds (with role / remote_leo): only they are sorted
REPLICA_STATE = ["broker", "topic", "partition", "log_dir", "leader", "leo", "hw", "log_start_offset", "leader_epoch"]
FOLLOWER_STATE = ["broker", "topic", "partition", "replica", "leo", "last_caught_up_ms", "in_isr"]


def _sorted_columns(frame: pd.DataFrame, by: list[str], keep: list[str]) -> dict[str, np.ndarray]:
    """The `keep` columns of `frame` sorted by `by` (stably), as new arrays: a history frame is built from
    them at once, its extra column included (setting or renaming a column of a frame costs ~50 us)."""
    order = F.sort_order([F.array(frame, c) for c in by], remember=True)  # the same keys, round after round
    return {c: F.array(frame, c)[order] for c in keep}


def history(replicas: pd.DataFrame, remotes: pd.DataFrame, results: pd.DataFrame,
            lines: pd.DataFrame) -> list[HistoryRows]:
    """This round's rows of replica_state, follower_state, produce_results and state_change_log."""
    out = []
    if len(replicas):
        r = _sorted_columns(replicas, ["topic", "partition", "broker"], REPLICA_STATE)
        leader = r["leader"]
        r["role"] = _ROLES[np.where(leader == r["broker"], 2, np.where(leader >= 0, 1, 0))]
        out.append(HistoryRows("replica_state", F.owned(r)))
    if len(remotes):
        r = _sorted_columns(remotes, ["topic", "partition", "replica"], FOLLOWER_STATE)
        out.append(HistoryRows("follower_state", F.owned({"remote_leo" if c == "leo" else c: v for c, v in r.items()})))
    if len(results):
        out.append(HistoryRows("produce_results", results))
    if len(lines):
        out.append(HistoryRows("state_change_log", lines))
    return out


# ------------------------------------------------------------------------------------------- the round


def no_clock() -> float:
    """The clock of a round nobody times: every phase takes 0 s."""
    return 0.0


class Laps:
    """Seconds spent per phase of the round (reported in the round summary for bench), read from the caller's
    `clock` (the engine passes time.perf_counter): the pure core names the phases, it does not time itself."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.laps: dict[str, float] = {}
        self.t = clock()

    def lap(self, name: str) -> None:
        t = self.clock()
        self.laps[name] = self.laps.get(name, 0.0) + t - self.t
        self.t = t


def _movers(config: RoundFacts, rules: Rules, replicas: pd.DataFrame, futures: pd.DataFrame, mem: pd.DataFrame,
            cuts: pd.DataFrame) -> Generator[ReadLog, pd.DataFrame, tuple]:
    """One round of every broker's ReplicaAlterLogDirsThreads (protocol/alter_log_dirs.py): truncation
    after the current logs' cuts, then one copy per thread from the current logs (`mem`: the records the
    brokers hold in memory, the rest read from storage), then the swaps.
    Returns (replicas, futures, copied records, swaps, cuts of future logs)."""
    if futures.empty:
        return replicas, futures, F.empty(F.RECORD), F.from_rows([], alter_log_dirs.SWAPS), truncation.no_cuts()
    cfg = config.cfg
    futures = alter_log_dirs.mark_for_truncation(futures, cuts)
    futures, c1 = alter_log_dirs.truncate_futures(futures, replicas, rules)
    futures, c2 = alter_log_dirs.out_of_range(futures, replicas)
    threads = alter_log_dirs.thread_count(cfg, config.log_dirs)
    futures, selected = alter_log_dirs.select_for_copy(futures, replicas, threads)
    ranges = alter_log_dirs.copy_ranges(futures, replicas, selected, cfg.read_max_records)
    records = yield from _current_records(ranges, mem)
    budgets = {int(b): alter_log_dirs.round_budget(cfg, int(b)) for b in set(futures["broker"])}
    futures, copied = alter_log_dirs.append_copies(futures, replicas, records, selected, threads,
                                                   cfg.replica_fetch_max_bytes, budgets, rules)
    replicas, futures, swaps = alter_log_dirs.swap(replicas, futures, selected)
    return replicas, futures, copied, swaps, pd.concat([c1, c2], ignore_index=True)


def _current_records(ranges: pd.DataFrame, mem: pd.DataFrame) -> Generator[ReadLog, pd.DataFrame, pd.DataFrame]:
    """The current logs' records in `ranges` (broker, topic, partition, from_offset, to_offset): those in
    memory (`mem`), the others read from storage."""
    if ranges.empty:
        return F.empty(F.RECORD)
    key = ["broker", "topic", "partition"]
    m = mem.merge(ranges, on=key)
    m = m[(m["offset"] >= m["from_offset"]) & (m["offset"] < m["to_offset"])]
    start = m.groupby(key)["offset"].min().rename("_ms").reset_index()
    q = ranges.merge(start, on=key, how="left")
    q["to_offset"] = np.minimum(q["to_offset"], q["_ms"].fillna(q["to_offset"]).astype("int64"))
    q = q[q["to_offset"] > q["from_offset"]]
    parts = [F.conform(m, F.RECORD)]
    if len(q):
        parts.append((yield ReadLog(q[["broker", "topic", "partition", "from_offset", "to_offset"]])))
    return F.concat(parts, F.RECORD)


def _split(obj, paused: list[int]) -> tuple:
    """(the part of a BrokerState / Inbox for brokers not paused, the part for paused ones)."""
    act, held = {}, {}
    for f in fields(obj):
        v = getattr(obj, f.name)
        if isinstance(v, pd.DataFrame):
            p = v["broker"].isin(paused).to_numpy()
            act[f.name], held[f.name] = v[~p].reset_index(drop=True), v[p].reset_index(drop=True)
        else:
            act[f.name], held[f.name] = v, type(v)()
    return replace(obj, **act), replace(obj, **held)


def present_brokers(*objs) -> list[np.ndarray]:
    """The `broker` column of every non-empty frame of the given BrokerState / Inbox objects."""
    return [F.array(getattr(o, f.name), "broker") for o in objs for f in fields(o)
            if isinstance(getattr(o, f.name), pd.DataFrame) and len(getattr(o, f.name))]


FLIPS = ["broker", "log_dir", "topic", "partition"]  # a swapped-in future log (TruncateLog.flips)


@functools.lru_cache(maxsize=8)
def _min_isr_series(items: tuple[tuple[str, int], ...]) -> pd.Series:
    """min.insync.replicas by topic as the Series the checks look topics up in, built once per setting
    (callers only read it): building a Series costs ~60 us a round."""
    return pd.Series(dict(items), dtype="int64")


def round_steps(state: BrokerState, inbox: Inbox, now: int, rules: Rules, config: RoundFacts,
                clock: Callable[[], float] = no_clock) -> Generator[ReadLog, pd.DataFrame, Step]:
    """The round as a generator: it yields ReadLog requests, is sent their records, and returns the Step.
    `rules` are the version profile's (config.cfg.rules); `clock` times the phases (Laps)."""
    sw = Laps(clock)
    present = present_brokers(state, inbox)  # brokers with any row: the round's history file is named after the least
    held = deferred = None
    if config.paused:
        paused = list(config.paused)
        state, held = _split(state, paused)
        inbox, deferred = _split(inbox, paused)
    k = inbox
    cfg = config.cfg
    replicas, remotes, tail, brokers = state.replicas, state.remotes, state.tail, state.brokers
    futures, preferred, offline = state.futures, state.preferred, state.offline
    wire_replicas, wire_futures = replicas, futures  # as the round found them: what the disk files already say

    starting = sorted(set(k.start["broker"].tolist()))
    if starting:
        rec_r, rec_f = recover({b: k.recovered[b] for b in starting})
        replicas = F.concat([replicas, rec_r], F.REPLICA)
        futures = F.concat([futures, rec_f], F.FUTURE)
        brokers = F.concat([brokers, new_broker_rows(starting)], F.BROKER)
    # failed log dirs (KIP-112, 9.5): their replicas go offline, their future logs are dropped
    offline_dirs = log_dir_failure.offline_dirs_now(config.offline_dirs, k.log_dir_failures)
    replicas, remotes, futures, offline, tail, offline_new, dir_halts = log_dir_failure.fail_log_dirs(
        replicas, remotes, futures, offline, tail, offline_dirs, config.log_dirs, rules, brokers["broker"].tolist())
    listed_r, listed_f = replicas, futures  # the logs the dirs' listings hold
    # controller requests, in the order the controller's channel sends them (7.3), after the admin's
    # AlterReplicaLogDirs (KIP-113, 9.1)
    brokers, metadata_lines = controller_requests.update_metadata(brokers, k.update_metadata)
    futures, preferred, alter_answers, cancelled = alter_log_dirs.alter_replica_log_dirs(
        k.alter_log_dirs, replicas, futures, preferred, offline, config.log_dirs, offline_dirs, rules)
    before = replicas
    lai, offline, lai_offline = log_dir_failure.screen_leader_and_isr(
        k.leader_and_isr, replicas, offline, brokers, offline_dirs, config.log_dirs, preferred)
    replicas, remotes, brokers, lines = become_leader_or_follower(
        replicas, remotes, brokers, lai, list(config.log_dirs), now,
        offline_dirs=offline_dirs, preferred=preferred, futures=futures)
    preferred = alter_log_dirs.forget_preferences(preferred, replicas)
    cuts = truncation.no_cuts()
    if len(k.leader_and_isr):
        replicas, cuts = truncation.on_leader_and_isr(before, replicas, rules)
        futures = alter_log_dirs.on_leader_and_isr(futures, replicas, lai)
    replicas, remotes, deleted, stop_lines = controller_requests.stop_replicas(
        replicas, remotes, brokers, k.stop_replica)
    futures, f_dropped = alter_log_dirs.on_stop_replica(futures, replicas, k.stop_replica)
    cuts = pd.concat([cuts, deleted.assign(offset=0)], ignore_index=True) if len(deleted) else cuts
    tail = truncation.drop_cut_records(tail, cuts)
    sw.lap("controller_requests")

    replicas, remotes, counts = isr.apply_isr_results(replicas, remotes, k.isr_results, now)
    if counts["isr_shrinks"]:  # followers that no longer count may let the HW advance (4.3)
        replicas = maybe_increment_leader_hw(replicas, remotes, rules, cfg.replica_lag_time_max_ms, now)
    replicas, epoch_cuts = offsets_for_leader_epoch.apply_answers(replicas, k.epoch_responses, now, cfg)
    replicas, appended_f, fetch_cuts, halts = fetch.apply_fetch_responses(
        replicas, k.fetch_responses, k.fetch_records, now, cfg, brokers)
    brokers = fetch.record_quota(brokers, "follower", appended_f, "broker", now, cfg)
    cuts = F.stack([cuts, epoch_cuts, fetch_cuts])
    min_isr = _min_isr_series(tuple(sorted(config.min_isr.items())))
    replicas, appended_l, results, pending_new = produce.append_to_leader(
        replicas, remotes, k.produce, min_isr, now, cfg, offline=offline)
    tail = F.concat([tail, appended_l], F.RECORD)
    halts = F.stack([halts, dir_halts])
    sw.lap("fetch_response_and_produce")

    requests, parked = k.fetches, state.parked
    both = F.concat([requests, parked], F.FETCH)
    log = tail
    misses = fetch.tail_misses(both, tail, replicas, cfg.read_max_records)
    if len(misses):
        log = F.concat([tail, (yield ReadLog(misses))], F.RECORD)
    sw.lap("storage_reads")
    brokers = fetch.touch_quota(brokers, "leader", both, now, cfg)
    replicas, remotes, responses, resp_records, parked = fetch.serve_fetch(
        replicas, remotes, log, requests, parked, now, cfg, brokers)
    brokers = fetch.record_quota(brokers, "leader", resp_records, "src", now, cfg)
    epoch_answers = offsets_for_leader_epoch.answer(replicas, k.epoch_requests, rules)
    replicas, remotes, expand = isr.maybe_expand_isr(replicas, remotes, now, rules)
    replicas, shrink = isr.maybe_shrink_isr(replicas, remotes, now, cfg, rules)

    pending, done = produce.complete_delayed_produce(
        replicas, F.concat([state.pending, pending_new], F.PENDING), min_isr, now, offline=offline)
    results = F.concat([results, done], F.RESULT)
    replicas, new_requests, epoch_requests = fetch.fetch_requests(replicas, now, config.unreachable, cfg, brokers)
    brokers = fetch.touch_quota(brokers, "follower", new_requests, now, cfg)
    sw.lap("serve_fetch")
    # the log-dir movers (ReplicaAlterLogDirsThread, 9.2) copy from the current logs as they now are
    mem = F.concat([tail, appended_f], F.RECORD) if len(futures) else F.empty(F.RECORD)  # only movers read it
    replicas, futures, copied, swaps, future_cuts = yield from _movers(config, rules, replicas, futures, mem, cuts)
    tail = fetch.trim_tail(tail, replicas, remotes, cfg.tail_records, now, cfg)
    sw.lap("log_dir_movers")
    stopping = set(k.shutdown["broker"].tolist())
    halted = set(halts["broker"].tolist())
    if stopping or halted:  # its open produce requests are answered by the dropped connection
        dropped = pending["broker"].isin(list(stopping | halted))
        results = F.concat([results, produce.disconnect(pending[dropped], now)], F.RESULT)
    if halted:  # a broker that exits (pre-2.1 out-of-range) loses its memory as in a crash
        lines = pd.concat([lines, halts.assign(controller_epoch=-1)[lines.columns]], ignore_index=True)
    brokers, effects = checkpoint_hw(config, now, replicas, futures, brokers,
                                     force=stopping | set(swaps["broker"].astype(int)))
    found = F.locate(wire_replicas, replicas)  # each replica's row as the round found it
    moved_dirs = set(zip(swaps["broker"], swaps["old_dir"], strict=True)) | set(
        zip(swaps["broker"], swaps["log_dir"], strict=True))
    replicas, futures, flushed = flush_logs(config, now, replicas, wire_replicas, found, stopping, futures, moved_dirs)
    effects += flushed
    effects += checkpoint_epochs(wire_replicas, found, replicas)
    effects += checkpoint_epochs(wire_futures, F.locate(wire_futures, futures), futures, future=True)
    dropped_f = F.stack([cancelled, f_dropped])
    effects += move_files(replicas, swaps, dropped_f)
    if len(k.leader_and_isr) or len(deleted) or len(swaps):
        effects += list_logs(config, listed_r, replicas)
    effects += list_logs(config, listed_f, futures, future=True)

    appended = log_rows(replicas, futures, F.concat([appended_f, appended_l], F.RECORD), copied, swaps)
    if len(appended):
        effects.append(AppendRecords(appended))
    if len(dropped_f) or len(swaps):  # else no cuts to add (and an empty frame adds nothing to all_cuts: ~1 ms)
        future_cuts = pd.concat([future_cuts, alter_log_dirs.dir_cuts(dropped_f),
                                 alter_log_dirs.dir_cuts(swaps[["broker", "topic", "partition", "old_dir"]].rename(
                                     columns={"old_dir": "log_dir"}))], ignore_index=True)
    all_cuts = F.stack([cuts, future_cuts])
    flips = swaps[FLIPS] if len(swaps) else F.from_rows([], FLIPS)  # selecting no rows costs ~80 us a round
    if len(all_cuts) or len(flips):
        effects.append(TruncateLog(all_cuts, flips))
    marked = None
    if config.write_history and present:
        # a paused broker's replicas are still there, unchanged: they keep their history rows
        hr, hm = (held.replicas, held.remotes) if held is not None else (F.empty(F.REPLICA), F.empty(F.REMOTE))
        effects += history(F.concat([replicas, hr], F.REPLICA), F.concat([remotes, hm], F.REMOTE), results,
                           F.stack([metadata_lines, lines, stop_lines]))
        marked = replica_marks(wire_replicas, replicas)  # (held rows are as they were: nothing to mark)
    sw.lap("write_files")
    summary = {"timings": sw.laps, "storage_reads": len(misses), "halted": sorted(int(b) for b in halted),
               **{c: int(v) for c, v in counts.items()},
               **isr.isr_gauge_counts(replicas, min_isr)}
    if marked is not None and len(marked):  # for the checker's state on the driver (RoundLoop.take_results)
        summary[MARKS] = marks_summary(marked)
    if cfg.idle_jump:  # quiescence, for the driver's idle jump (protocol/idle.py)
        others = [epoch_requests, epoch_answers, expand, shrink, offline_new, lai_offline, alter_answers, halts]
        summary.update(idle.quiescence(replicas, remotes, parked, pending, futures, brokers, new_requests, responses,
                                       resp_records, sum(map(len, others)) + len(stopping), now, cfg,
                                       config.unreachable))
    new_state = BrokerState(replicas, remotes, tail, brokers, parked, pending, futures, preferred, offline)
    outbox = Outbox(new_requests, responses, resp_records, F.concat([expand, shrink], F.ISR_CHANGE),
                    epoch_requests, epoch_answers, F.concat([offline_new, lai_offline], F.OFFLINE_REPLICA),
                    alter_answers, summary)
    if stopping or halted:  # a broker shutting down or exiting keeps nothing in memory and sends nothing more
        gone = list(stopping | halted)
        new_state = _drop(new_state, gone, "broker")
        outbox = _drop(outbox, gone, "src")
    if held is not None:
        new_state = BrokerState(**{f.name: F.stack([getattr(new_state, f.name), getattr(held, f.name)])
                                   for f in fields(BrokerState)})
    return Step(new_state, outbox, tuple(effects), deferred)


def _drop(obj, gone: list[int], message_col: str):
    """`obj` without the rows of brokers in `gone` (state rows by `broker`, a message by `message_col`:
    its sender)."""
    out = {}
    for f in fields(obj):
        v = getattr(obj, f.name)
        if isinstance(v, pd.DataFrame):
            col = "broker" if isinstance(obj, BrokerState) or f.name in ("isr_changes", "offline_replicas",
                                                                         "alter_log_dirs_responses") else message_col
            v = v[~v[col].isin(gone)]
        out[f.name] = v
    return replace(obj, **out)


def step(state: BrokerState, inbox: Inbox, now: int, rules: Rules, config: RoundFacts, read: Reader = no_reads,
         clock: Callable[[], float] = no_clock) -> Step:
    """Run one round for every broker in `state` and `inbox` under the version profile's `rules` (a broker in
    config.paused keeps its state and its messages untouched). `read` answers the round's ReadLog requests;
    `clock` (the caller's, e.g. time.perf_counter) times its phases in the summary's timings."""
    gen = round_steps(state, inbox, now, rules, config, clock)
    try:
        req = next(gen)
        while True:
            req = gen.send(read(req))
    except StopIteration as done:
        return done.value
