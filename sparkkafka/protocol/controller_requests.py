"""A broker handling UpdateMetadata and StopReplica (ReplicaManager.maybeUpdateMetadataCache,
stopReplicas), and what every controller request's lines share: the request's
correlation id and controller id (frames.LEADER_AND_ISR). LeaderAndIsr has its own module."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .frames import BROKER, KEY, REMOTE, array, conform, from_rows, locate, take

LINES = ["broker", "controller_epoch", "topic", "partition", "message"]
REQUEST = ["broker", "controller_id", "correlation_id", "controller_epoch"]  # what one request's entries share


def text(frame: pd.DataFrame, column: str) -> np.ndarray:
    """An integer column as decimal strings (an object array, for building messages column-wise)."""
    return array(frame, column).astype(str).astype(object)


def broker_lines(rows: pd.DataFrame, message: np.ndarray) -> pd.DataFrame:
    """State-change lines, one `message` per row of `rows` (broker, controller_epoch, and topic and partition
    when it has them: a request's own lines have none), built column-wise: a new controller's request for
    every replica is ~60,000 entries at 60k replicas (~3 s row by row). Each starts with the broker's logger
    prefix, ``[Broker id=N] `` (StateChangeLogger outside the controller)."""
    n = len(rows)
    per_entry = "topic" in rows.columns
    return pd.DataFrame({"broker": array(rows, "broker").astype("int64"),
                         "controller_epoch": array(rows, "controller_epoch").astype("int64"),
                         "topic": array(rows, "topic") if per_entry else np.full(n, None, dtype=object),
                         "partition": array(rows, "partition").astype("int64") if per_entry else np.full(n, np.nan),
                         "message": "[Broker id=" + text(rows, "broker") + "] " + message})


def requests_in(entries: pd.DataFrame) -> pd.DataFrame:
    """The controller requests `entries` belong to, one row each (REQUEST, and `partitions`: how many distinct
    partitions it names), by broker, controller and correlation id."""
    if entries.empty:
        return pd.DataFrame({c: np.empty(0, "int64") for c in [*REQUEST, "partitions"]})
    named = entries.drop_duplicates([*REQUEST, "topic", "partition"])
    return named.groupby(REQUEST, sort=True).size().rename("partitions").reset_index()


def handling(requests: pd.DataFrame, api: str) -> pd.DataFrame:
    """ReplicaManager's first line of each request: ``Handling <api> request correlationId N from controller C
    for K partitions``."""
    return broker_lines(requests, f"Handling {api} request correlationId " + text(requests, "correlation_id")
                        + " from controller " + text(requests, "controller_id") + " for "
                        + text(requests, "partitions") + " partitions")


def _known_epoch(brokers: pd.DataFrame, requests: pd.DataFrame) -> np.ndarray:
    return brokers.set_index("broker")["controller_epoch"].reindex(requests["broker"]).fillna(-1).to_numpy()


def update_metadata(brokers: pd.DataFrame, requests: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Adopt the controller id and epoch of UpdateMetadata requests that are not stale; a stale one is refused
    (ControllerMovedException) with Kafka's warning. Returns (brokers, state-change lines)."""
    if requests.empty or brokers.empty:
        return brokers, from_rows([], LINES)
    known = _known_epoch(brokers, requests)
    ok = array(requests, "controller_epoch") >= known
    stale = requests[~ok].assign(latest=known[~ok].astype("int64"))
    lines = broker_lines(stale, "Received update metadata request with correlation id " + text(stale, "correlation_id")
                         + " from an old controller " + text(stale, "controller_id") + " with epoch "
                         + text(stale, "controller_epoch") + ". Latest known controller epoch is "
                         + text(stale, "latest"))
    fresh = requests[ok]
    last = fresh.sort_values("controller_epoch").groupby("broker").tail(1)
    b = brokers.set_index("broker")
    b.loc[last["broker"], "controller_epoch"] = array(last, "controller_epoch")
    b.loc[last["broker"], "controller_id"] = array(last, "controller_id")
    return conform(b.reset_index(), BROKER), lines


def stop_replicas(replicas: pd.DataFrame, remotes: pd.DataFrame, brokers: pd.DataFrame, requests: pd.DataFrame
                  ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """StopReplica: a stale controller epoch refuses the request (STALE_CONTROLLER_EPOCH); an
    entry whose leader epoch is older than the local one is refused (FENCED_LEADER_EPOCH); equal,
    newer, -1 and -2 stop the replica: it stops fetching and leading; with delete its log goes.
    Returns (replicas, remotes, deleted replicas (KEY + log_dir), state-change lines in Kafka's words:
    each request's Handling line, each entry's Received line, then the refusals)."""
    empty_del = from_rows([], [*KEY, "log_dir"])
    if requests.empty:
        return replicas, remotes, empty_del, from_rows([], LINES)
    heads = requests_in(requests)
    # a request holds one state per partition (the batch keeps the last added: with delete, once asked)
    named = requests.drop_duplicates([*REQUEST, "topic", "partition"], keep="last")
    lines = [handling(heads, "StopReplica"), broker_lines(
        named, "Received StopReplica request StopReplicaPartitionState(partitionIndex=" + text(named, "partition")
        + ", leaderEpoch=" + text(named, "leader_epoch") + ", deletePartition=" + _bools(named)
        + ") correlation id " + text(named, "correlation_id") + " from controller "
        + text(named, "controller_id") + " epoch " + text(named, "controller_epoch") + " for partition "
        + array(named, "topic").astype(object) + "-" + text(named, "partition"))]
    old = heads[array(heads, "controller_epoch") < _known_epoch(brokers, heads)]
    old = old.assign(latest=_known_epoch(brokers, old).astype("int64"))
    lines.append(broker_lines(old, "Ignoring StopReplica request from controller " + text(old, "controller_id")
                              + " with correlation id " + text(old, "correlation_id") + " since its controller epoch "
                              + text(old, "controller_epoch") + " is old. Latest known controller epoch is "
                              + text(old, "latest")))
    stale = array(requests, "controller_epoch") < _known_epoch(brokers, requests)
    req = requests[~stale].reset_index(drop=True)
    pos = locate(replicas, req)
    local = take(replicas, "leader_epoch", pos, -1)
    ep = array(req, "leader_epoch")
    fenced = (pos >= 0) & (ep >= 0) & (ep < local)
    f = req[fenced].assign(local=local[fenced].astype("int64"))
    lines.append(broker_lines(f, "Ignoring StopReplica request (delete=" + _bools(f) + ") from controller "
                              + text(f, "controller_id") + " with correlation id " + text(f, "correlation_id")
                              + " epoch " + text(f, "controller_epoch") + " for partition "
                              + array(f, "topic").astype(object) + "-" + text(f, "partition")
                              + " since its associated leader epoch " + text(f, "leader_epoch")
                              + " is smaller than the current leader epoch " + text(f, "local")))
    go = (pos >= 0) & ~fenced
    r = replicas.copy()
    stop = pos[go]
    r.loc[stop, "leader"] = -1
    r.loc[stop, "fetch_in_flight"] = False
    r.loc[stop, "pending_isr"] = ""
    delete = go & req["delete"].to_numpy(dtype=bool)
    gone = r.loc[pos[delete], [*KEY, "log_dir"]].reset_index(drop=True)
    keep = np.ones(len(r), bool)
    keep[pos[delete]] = False
    r = r[keep].reset_index(drop=True)
    # a removed replica gets StopReplica twice in one batch (without, then with delete): keys repeat
    rk = locate(req[go].drop_duplicates(KEY), remotes) >= 0 if go.any() else np.zeros(len(remotes), bool)
    return r, conform(remotes[~rk], REMOTE), gone, pd.concat([x for x in lines if len(x)] or lines[:1],
                                                             ignore_index=True)


def _bools(frame: pd.DataFrame) -> np.ndarray:
    """The `delete` column as Java prints booleans."""
    return np.where(array(frame, "delete").astype(bool), "true", "false").astype(object)
