"""A log dir fails on a broker (KIP-112, Kafka 1.0+): ReplicaManager.handleLogDirFailure and the
LeaderAndIsr handling of offline replicas (ReplicaManager.becomeLeaderOrFollower). Vectorised over every
broker a task hosts; pure pandas.

A failed dir is offline for good: the driver lists it in RoundFacts.offline_dirs from the round its
LOG_DIR_FAILURE is sent, and a broker restarting later loads nothing from it. On the failure the broker
* takes every replica whose current log is in the dir offline: it leaves REPLICA (no fetching, no
  leading, no HW checkpoint; Kafka's HostedPartition.Offline) for the broker's OFFLINE rows, and is
  reported to the controller (OFFLINE_REPLICA, Kafka's log_dir_event_notification + the
  KAFKA_STORAGE_ERROR it then answers to LeaderAndIsr);
* drops the future logs (KIP-113 moves) in the dir, without deleting their files, and the future logs of
  the replicas going offline (the move ends silently);
* halts when no live dir remains ("Shutdown broker because all log dirs in ... have failed"), and before
  inter.broker.protocol.version 1.0 on any failure ("Halting broker because dir ... is offline"): the
  emulator's profiles put 0.11-1.1 together, so the 0.8 and 0.10 profiles halt, 0.11 handles it.
Produce to an offline replica gets KAFKA_STORAGE_ERROR (produce.py). A follower fetching from it or
asking it OffsetsForLeaderEpoch gets UNKNOWN_TOPIC_OR_PARTITION here (it is no longer a hosted replica;
Kafka answers KAFKA_STORAGE_ERROR): either way the follower backs off until the controller names a new
leader.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from .frames import (
    FUTURE,
    KEY,
    LEADER_AND_ISR,
    OFFLINE_REPLICA,
    RECORD,
    REMOTE,
    REPLICA,
    array,
    concat,
    conform,
    empty,
    from_rows,
    locate,
)
from .rules import Rules, rules_for

HALT_COLUMNS = ["broker", "topic", "partition", "message"]


def offline_dirs_now(known: Mapping[int, Iterable[str]], failures: pd.DataFrame) -> dict[int, frozenset[str]]:
    """Every broker's offline dirs: those the driver lists (`known`, RoundFacts.offline_dirs) and those
    this round's LOG_DIR_FAILURE rows name."""
    out = {int(b): frozenset(d) for b, d in known.items()}
    for b, d in zip(array(failures, "broker"), array(failures, "log_dir"), strict=True):
        out[int(b)] = out.get(int(b), frozenset()) | {d}
    return out


def _in_offline_dir(frame: pd.DataFrame, offline_dirs: Mapping[int, Iterable[str]]) -> np.ndarray:
    if frame.empty or not offline_dirs:
        return np.zeros(len(frame), dtype=bool)
    pairs = [f"{int(b)}/{d}" for b, ds in offline_dirs.items() for d in ds]
    if not pairs:
        return np.zeros(len(frame), dtype=bool)
    keys = frame["broker"].astype("int64").astype(str) + "/" + frame["log_dir"].astype(str)
    return keys.isin(pairs).to_numpy()


def _drop_keys(frame: pd.DataFrame, keys: pd.DataFrame) -> pd.DataFrame:
    if frame.empty or keys.empty:
        return frame
    return frame[locate(keys.drop_duplicates(KEY), frame) < 0].reset_index(drop=True)


def fail_log_dirs(
    replicas: pd.DataFrame, remotes: pd.DataFrame, futures: pd.DataFrame, offline: pd.DataFrame,
    tail: pd.DataFrame, offline_dirs: Mapping[int, Iterable[str]], log_dirs: Iterable[str], rules: Rules | str,
    brokers: Iterable[int] = (),
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """ReplicaManager.handleLogDirFailure for every replica and future log in an offline dir.

    `offline_dirs` maps broker -> its offline dirs (offline_dirs_now); `brokers` are the brokers running
    here (for the halt rule; those with no live dir left halt). Returns (replicas, remotes, futures,
    offline, tail, newly offline replicas (OFFLINE_REPLICA rows, for the controller), halts (broker,
    topic, partition, message))."""
    halts = []
    all_dirs = list(log_dirs)
    for b in sorted({int(x) for x in brokers}):
        gone = set(offline_dirs.get(b, ()))
        if not gone:
            continue
        if rules_for(rules).halt_on_log_dir_failure:  # IBP < 1.0; the emulator's profile 0.11 holds 0.11-1.1
            halts.append((b, "", -1, f"Halting broker because dir {sorted(gone)[0]} is offline"))
        elif all(d in gone for d in all_dirs):
            halts.append((b, "", -1, f"Shutdown broker because all log dirs in {', '.join(all_dirs)} have failed"))
    halts_df = from_rows(halts, HALT_COLUMNS)
    down = _in_offline_dir(replicas, offline_dirs)
    newly = (conform(replicas.loc[down, ["broker", "topic", "partition", "log_dir"]], OFFLINE_REPLICA) if down.any()
             else empty(OFFLINE_REPLICA))  # the common round: no dir failed, no selection to build
    if not down.any():
        f_down = _in_offline_dir(futures, offline_dirs)
        if f_down.any():
            futures = conform(futures[~f_down], FUTURE)
        return replicas, remotes, futures, offline, tail, newly, halts_df
    replicas = conform(replicas[~down], REPLICA)
    remotes = conform(_drop_keys(remotes, newly), REMOTE)
    tail = conform(_drop_keys(tail, newly), RECORD)
    futures = _drop_keys(futures, newly)
    futures = conform(futures[~_in_offline_dir(futures, offline_dirs)], FUTURE)
    offline = concat([offline, newly], OFFLINE_REPLICA)
    return replicas, remotes, futures, offline, tail, newly, halts_df


def screen_leader_and_isr(
    requests: pd.DataFrame, replicas: pd.DataFrame, offline: pd.DataFrame, brokers: pd.DataFrame,
    offline_dirs: Mapping[int, Iterable[str]], log_dirs: Iterable[str], preferred: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """LeaderAndIsr entries an offline replica answers with KAFKA_STORAGE_ERROR (KIP-112).

    * an entry for a replica held offline (HostedPartition.Offline);
    * an entry that would create a log while the broker has an offline dir and is_new is false (the log
      may be on the failed disk: LogManager.getOrCreateLog refuses), or whose remembered dir (`preferred`)
      is offline; Kafka then marks the partition Offline too.
    Entries of a request whose controller epoch is stale are left to become_leader_or_follower (it
    ignores them). Returns (entries to apply, offline rows (with the new markers), OFFLINE_REPLICA rows to
    report: every refused entry, so a LeaderAndIsr naming an offline replica is answered again)."""
    if requests.empty:
        return requests, offline, empty(OFFLINE_REPLICA)
    req = requests.reset_index(drop=True)
    known = brokers.set_index("broker")["controller_epoch"] if len(brokers) else pd.Series(dtype="int64")
    seen = req["broker"].map(known).fillna(-1).astype("int64").to_numpy()
    live_request = array(req, "controller_epoch") >= seen
    held = (locate(offline, req) >= 0) if len(offline) else np.zeros(len(req), dtype=bool)
    hosted = locate(replicas, req) >= 0
    any_dir_down = np.array([bool(offline_dirs.get(int(b))) for b in req["broker"]], dtype=bool)
    pref_dir = np.full(len(req), None, dtype=object)
    if preferred is not None and len(preferred):
        pos = locate(preferred, req)
        pref_dir = np.where(pos >= 0, array(preferred, "log_dir")[np.maximum(pos, 0)], None)
    pref_down = np.array([d is not None and d in set(offline_dirs.get(int(b), ()))
                          for b, d in zip(req["broker"], pref_dir, strict=True)], dtype=bool)
    cannot_create = ~hosted & ~held & ((any_dir_down & ~req["is_new"].to_numpy(dtype=bool)) | pref_down)
    refuse = live_request & (held | cannot_create)
    marks = conform(req.loc[live_request & cannot_create].assign(log_dir=""), OFFLINE_REPLICA)
    offline = concat([offline, marks], OFFLINE_REPLICA).drop_duplicates(KEY).reset_index(drop=True)
    at = locate(offline, req[refuse])
    report = req.loc[refuse, ["broker", "topic", "partition"]].assign(log_dir=array(offline, "log_dir")[at])
    return conform(req[~refuse], LEADER_AND_ISR), conform(offline, OFFLINE_REPLICA), conform(report, OFFLINE_REPLICA)

