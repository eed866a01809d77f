"""A broker handling UpdateMetadata and StopReplica (ReplicaManager.maybeUpdateMetadataCache,
stopReplicas; protocol.md 7.3, 7.4). LeaderAndIsr has its own module."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .frames import BROKER, KEY, REMOTE, array, conform, from_rows, locate, take

LINES = ["broker", "controller_epoch", "topic", "partition", "message"]


def _known_epoch(brokers: pd.DataFrame, requests: pd.DataFrame) -> np.ndarray:
    return brokers.set_index("broker")["controller_epoch"].reindex(requests["broker"]).fillna(-1).to_numpy()


def update_metadata(brokers: pd.DataFrame, requests: pd.DataFrame) -> pd.DataFrame:
    """Adopt the controller id and epoch of UpdateMetadata requests that are not stale."""
    if requests.empty or brokers.empty:
        return brokers
    fresh = requests[array(requests, "controller_epoch") >= _known_epoch(brokers, requests)]
    last = fresh.sort_values("controller_epoch").groupby("broker").tail(1)
    b = brokers.set_index("broker")
    b.loc[last["broker"], "controller_epoch"] = array(last, "controller_epoch")
    b.loc[last["broker"], "controller_id"] = array(last, "controller_id")
    return conform(b.reset_index(), BROKER)


def stop_replicas(replicas: pd.DataFrame, remotes: pd.DataFrame, brokers: pd.DataFrame, requests: pd.DataFrame
                  ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """StopReplica: a stale controller epoch refuses the request (STALE_CONTROLLER_EPOCH); an
    entry whose leader epoch is older than the local one is refused (FENCED_LEADER_EPOCH); equal,
    newer, -1 and -2 stop the replica: it stops fetching and leading; with delete its log goes.
    Returns (replicas, remotes, deleted replicas (KEY + log_dir), state-change lines)."""
    lines = []
    empty_del = from_rows([], [*KEY, "log_dir"])
    if requests.empty:
        return replicas, remotes, empty_del, from_rows(lines, LINES)
    stale = array(requests, "controller_epoch") < _known_epoch(brokers, requests)
    for e in requests[stale].itertuples():
        lines.append((e.broker, e.controller_epoch, e.topic, e.partition,
                      f"Ignoring StopReplica request from controller with epoch {e.controller_epoch} since its "
                      f"controller epoch is old (STALE_CONTROLLER_EPOCH)"))
    req = requests[~stale].reset_index(drop=True)
    pos = locate(replicas, req)
    local = take(replicas, "leader_epoch", pos, -1)
    ep = array(req, "leader_epoch")
    fenced = (pos >= 0) & (ep >= 0) & (ep < local)
    for e in req[fenced].itertuples():
        lines.append((e.broker, e.controller_epoch, e.topic, e.partition,
                      f"Ignoring StopReplica for partition {e.topic}-{e.partition} with leader epoch "
                      f"{e.leader_epoch} below the current one (FENCED_LEADER_EPOCH)"))
    go = (pos >= 0) & ~fenced
    r = replicas.copy()
    stop = pos[go]
    r.loc[stop, "leader"] = -1
    r.loc[stop, "fetch_in_flight"] = False
    r.loc[stop, "pending_isr"] = ""
    delete = go & req["delete"].to_numpy(dtype=bool)
    gone = r.loc[pos[delete], [*KEY, "log_dir"]].reset_index(drop=True)
    for e in req[go].itertuples():
        lines.append((e.broker, e.controller_epoch, e.topic, e.partition,
                      f"Handling StopReplica for partition {e.topic}-{e.partition} (delete={bool(e.delete)})"))
    keep = np.ones(len(r), bool)
    keep[pos[delete]] = False
    r = r[keep].reset_index(drop=True)
    # a removed replica gets StopReplica twice in one batch (without, then with delete): keys repeat
    rk = locate(req[go].drop_duplicates(KEY), remotes) >= 0 if go.any() else np.zeros(len(remotes), bool)
    return r, conform(remotes[~rk], REMOTE), gone, from_rows(lines, LINES)
