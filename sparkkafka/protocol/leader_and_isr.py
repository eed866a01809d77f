"""A broker handling LeaderAndIsr: ReplicaManager.becomeLeaderOrFollower, Partition.makeLeader and
makeFollower. Vectorised over every broker and partition of a task.

Returns state-change lines in the words of Kafka's state-change log so the tables can show them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from .controller_requests import broker_lines, handling, requests_in, text
from .frames import (
    BROKER,
    REMOTE,
    REPLICA,
    array,
    concat,
    conform,
    distinct_rows,
    from_rows,
    ids,
    new_replicas,
)
from .java_hash import partition_hash, scala_hash_keys
from .log_manager import choose_log_dir, fewest_first


def creation_order(entries: pd.DataFrame) -> pd.DataFrame:
    """LeaderAndIsr entries in the order a broker creates their logs (ReplicaManager.becomeLeaderOrFollower,
    2.8): per broker, request by request (correlation id), topic by topic (a topic's creation is one
    CreateTopics and one LeaderAndIsr on Kafka; the emulator creates a scenario's topics in one request),
    makeLeaders over the partitions it is to lead, then makeFollowers over the others, each
    iterating a Scala ``mutable.HashMap[Partition, LeaderAndIsrPartitionState]`` filtered from the request's
    (so in the hash order of ``Partition.hashCode``, not partition order). With several log dirs this
    decides which dir each new log gets (LogManager.nextLogDirs: fewest logs first)."""
    if entries.empty:
        return entries
    broker, topic, part = array(entries, "broker"), array(entries, "topic"), array(entries, "partition")
    follower = array(entries, "leader") != broker
    topic_hash = {t: partition_hash(t, 0) for t in set(topic.tolist())}
    hashes = np.fromiter((topic_hash[t] for t in topic), np.int64, len(topic)) + 17 * part.astype(np.int64)
    request = array(entries, "correlation_id") if "correlation_id" in entries else np.zeros(len(entries), np.int64)
    tpos = pd.factorize(pd.Series(topic), sort=True)[0]
    counts = pd.DataFrame({"b": broker, "r": request, "t": tpos, "f": follower}).groupby(
        ["b", "r", "t", "f"])["b"].transform("size").to_numpy()  # each map's size
    slot, signed = scala_hash_keys(hashes, counts)
    return entries.iloc[np.lexsort((signed, slot, follower, tpos, request, broker))]


def _create_missing(replicas: pd.DataFrame, entries: pd.DataFrame, log_dirs: list[str],
                    offline_dirs: Mapping[int, Iterable[str]] | None = None,
                    preferred: pd.DataFrame | None = None, futures: pd.DataFrame | None = None) -> pd.DataFrame:
    """Create the logs of partitions a broker is told about for the first time, in `creation_order`, each in
    the log dir LogManager would pick (LogManager.getOrCreateLog): the dir AlterReplicaLogDirs remembered for it
    (`preferred`, PREFERRED_DIR rows), else the entry's requested dir, else the live dir holding fewest
    logs, current and future (`futures`) alike. A log whose dir is not live is not created (Kafka's
    KafkaStorageException; log_dir_failure.screen_leader_and_isr answers those entries)."""
    known = replicas.set_index(["broker", "topic", "partition"]).index
    new = entries[~entries.set_index(["broker", "topic", "partition"]).index.isin(known)]
    if new.empty:
        return replicas
    ordered = creation_order(entries)  # the hash order of each whole map, then the logs it lacks
    new = ordered[~ordered.set_index(["broker", "topic", "partition"]).index.isin(known)]
    offline_dirs = offline_dirs or {}
    remembered = {} if preferred is None or preferred.empty else dict(zip(
        zip(preferred["broker"].astype(int), preferred["topic"], preferred["partition"].astype(int), strict=True),
        preferred["log_dir"], strict=True))
    held_logs = replicas[["broker", "log_dir"]]
    if futures is not None and len(futures):
        held_logs = pd.concat([held_logs, futures[["broker", "log_dir"]]], ignore_index=True)
    held = held_logs.groupby(["broker", "log_dir"]).size().to_dict()  # (broker, dir) -> logs it holds
    made: list[tuple[np.ndarray, np.ndarray]] = []  # (rows of `new`, their dirs) per broker
    topics, parts, asks = array(new, "topic"), array(new, "partition"), array(new, "log_dir")
    for b, pos in sorted(new.groupby("broker").indices.items()):
        gone = set(offline_dirs.get(int(b), ()))
        live = list(dict.fromkeys(d for d in log_dirs if d not in gone))
        counts = {d: held.get((b, d), 0) for d in live}
        wants = [remembered.get((int(b), t, int(p))) for t, p in zip(topics[pos], parts[pos], strict=True)
                 ] if remembered else [None] * len(pos)
        if all(w is None for w in wants) and not pd.Series(asks[pos]).isin(log_dirs).any():
            if live:  # no dir asked for: LogManager's choice for each log in turn, all at once
                made.append((pos, np.asarray(live, dtype=object)[fewest_first(list(counts.values()), len(pos))]))
            continue
        ok, dirs = [], []
        for j, (want, asked) in enumerate(zip(wants, asks[pos], strict=True)):
            if want is None and isinstance(asked, str) and asked in log_dirs:
                want = asked
            d = choose_log_dir(counts, live, want)
            if d is not None:
                counts[d] += 1
                ok.append(j)
                dirs.append(d)
        made.append((pos[ok], np.asarray(dirs, dtype=object)))
    rows = np.concatenate([r for r, _ in made]) if made else np.zeros(0, dtype=np.intp)
    if not len(rows):
        return replicas
    dirs = np.concatenate([d for _, d in made])
    created = new_replicas(pd.DataFrame({"broker": array(new, "broker")[rows], "topic": topics[rows],
                                         "partition": parts[rows], "log_dir": dirs}))
    return concat([replicas, created], REPLICA)


LINE_COLUMNS = ["broker", "controller_epoch", "topic", "partition", "message"]  # a state-change line


def become_leader_or_follower(
    replicas: pd.DataFrame, remotes: pd.DataFrame, brokers: pd.DataFrame, requests: pd.DataFrame,
    log_dirs: list[str], now: int, *, offline_dirs: Mapping[int, Iterable[str]] | None = None,
    preferred: pd.DataFrame | None = None, futures: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Apply LeaderAndIsr entries. Returns (replicas, remotes, brokers, state-change lines).

    A request whose controller epoch is below the highest the broker has seen is refused whole
    (STALE_CONTROLLER_EPOCH); an entry whose leader epoch is not newer than the local one is
    ignored (also STALE_CONTROLLER_EPOCH in ZK mode). makeLeader records the leader epoch start
    offset (= LEO) and resets its view of the followers: remote LEOs become unknown (-1) unless it
    already led, lastCaughtUpTime becomes now for ISR members and "never" for the rest; a leader
    alone in its ISR commits up to its LEO at once. makeFollower stops leading and fetches from the
    new leader (truncation rules come with the leader-epoch work).

    New logs go where LogManager puts them (_create_missing): `offline_dirs` (broker -> failed dirs) are
    not live, `preferred` holds AlterReplicaLogDirs' remembered dirs and `futures` the future logs each
    dir also counts. Entries for offline replicas must be screened out first
    (log_dir_failure.screen_leader_and_isr).
    """
    if requests.empty:
        return replicas, remotes, brokers, _lines([])
    known = brokers.set_index("broker")["controller_epoch"]
    heads = requests_in(requests[requests["broker"].isin(known.index).to_numpy()])  # only running brokers answer
    seen = heads["broker"].map(known).astype("int64").to_numpy()
    refused = array(heads, "controller_epoch") < seen
    old = heads[refused].assign(latest=seen[refused])
    lines = [handling(heads, "LeaderAndIsr"), broker_lines(
        old, "Ignoring LeaderAndIsr request from controller " + text(old, "controller_id") + " with correlation id "
        + text(old, "correlation_id") + " since its controller epoch " + text(old, "controller_epoch")
        + " is old. Latest known controller epoch is " + text(old, "latest"))]
    # A controller batch carries one entry per partition and broker (ControllerBrokerRequestBatch keeps
    # the last one added); requests of one round from several batches: the newest leader epoch wins.
    req = requests.sort_values(["broker", "topic", "partition", "controller_epoch", "leader_epoch"], kind="stable")
    req = req.drop_duplicates(["broker", "topic", "partition"], keep="last")
    seen = req["broker"].map(known).fillna(-1).astype("int64").to_numpy()
    stale_ctrl = array(req, "controller_epoch") < seen
    req = req[~stale_ctrl & req["broker"].isin(known.index).to_numpy()]  # only running brokers answer
    top = req.groupby("broker")["controller_epoch"].max()
    brokers = brokers.set_index("broker")
    epochs = brokers["controller_epoch"]
    brokers.loc[top.index, "controller_epoch"] = np.maximum(
        epochs.loc[top.index].to_numpy(), top.to_numpy()).astype(epochs.dtype, copy=False)
    brokers = conform(brokers.reset_index(), BROKER)

    replicas = _create_missing(replicas, req, log_dirs, offline_dirs, preferred, futures)
    m = req.merge(replicas[["broker", "topic", "partition", "leader", "leader_epoch"]].rename(
        columns={"leader": "_old_leader", "leader_epoch": "_old_epoch"}), on=["broker", "topic", "partition"])
    newer = array(m, "leader_epoch") > array(m, "_old_epoch")
    if not newer.all():  # e.g. a new controller's LeaderAndIsr for every replica (ReplicaStateMachine.startup)
        old = m[~newer]
        same = array(old, "leader_epoch") == array(old, "_old_epoch")
        lines.append(broker_lines(old, "Ignoring LeaderAndIsr request from controller " + text(old, "controller_id")
                                  + " with correlation id " + text(old, "correlation_id") + " epoch "
                                  + text(old, "controller_epoch") + " for partition "
                                  + array(old, "topic").astype(object) + "-" + text(old, "partition")
                                  + " since its associated leader epoch " + text(old, "leader_epoch")
                                  + np.where(same, " matches the current leader epoch",
                                             " is smaller than the current leader epoch "
                                             + text(old, "_old_epoch")).astype(object)))
    m = m[newer]
    if m.empty:
        return replicas, remotes, brokers, _lines(lines)

    r = replicas.set_index(["broker", "topic", "partition"])
    idx = m.set_index(["broker", "topic", "partition"]).index
    for c in ("leader", "leader_epoch", "controller_epoch", "isr", "replicas", "zk_version"):
        r.loc[idx, c] = array(m, c).astype(r[c].dtype, copy=False)  # a request's int64 into int32 columns
    r.loc[idx, "pending_isr"] = ""  # an ISR change in flight is dropped (Partition.makeLeader)
    lead = (m["leader"] == m["broker"]).to_numpy()
    was_leader = (m["_old_leader"] == m["broker"]).to_numpy()
    li, fi = idx[lead], idx[~lead]
    r.loc[li, "epoch_start_offset"] = r.loc[li, "leo"].to_numpy()
    r.loc[li, "fetch_in_flight"] = False
    r.loc[fi, "epoch_start_offset"] = -1
    r.loc[fi, "fetch_in_flight"] = False
    r.loc[fi, "backoff_until_ms"] = -1
    alone = lead & (m["isr"].astype(str) == m["broker"].astype(str)).to_numpy()
    r.loc[idx[alone], "hw"] = r.loc[idx[alone], "leo"].to_numpy()
    replicas = conform(r.reset_index(), REPLICA)

    # Remote replica state: rebuilt for new leaders, kept (LEOs) for leaders whose epoch rose.
    rem_key = remotes.set_index(["broker", "topic", "partition"]).index
    kept = remotes[rem_key.isin(idx[lead & was_leader])][
        ["broker", "topic", "partition", "replica", "leo", "log_start_offset"]]
    remotes = remotes[~rem_key.isin(idx)]
    fr = _followers(m[lead])
    if len(fr):
        fr = fr.merge(kept, on=["broker", "topic", "partition", "replica"], how="left")
        fr["leo"] = fr["leo"].fillna(-1)
        fr["log_start_offset"] = fr["log_start_offset"].fillna(-1)
        fr["last_caught_up_ms"] = np.where(fr["in_isr"], now, -1)
        fr["last_fetch_leader_leo"] = -1
        fr["last_fetch_ms"] = -1
        fr["leo_changed_ms"] = now
        remotes = concat([remotes, fr], REMOTE)
    role = np.where(lead, "leader", "follower").astype(object)
    follow = np.where(lead, "", " with leader " + text(m, "leader")).astype(object)
    done = broker_lines(m, "Completed LeaderAndIsr request correlationId " + text(m, "correlation_id")
                        + " from controller " + text(m, "controller_id") + " epoch " + text(m, "controller_epoch")
                        + " for the become-" + role + " transition for partition " + array(m, "topic").astype(object)
                        + "-" + text(m, "partition") + follow)
    return replicas, remotes, brokers, _lines([*lines, done])


def _followers(leaders: pd.DataFrame) -> pd.DataFrame:
    """(broker, topic, partition, replica, in_isr): each follower of each entry in `leaders` (entries in
    order, followers in replica-list order, the leader itself left out), whether it is in the entry's
    ISR. Replica lists and ISRs repeat across partitions: each distinct (replicas, isr, leader) is parsed
    once, not once per partition."""
    cols = ["broker", "topic", "partition", "replica", "in_isr"]
    if leaders.empty:
        return pd.DataFrame(columns=cols)
    key = [array(leaders, c) for c in ("replicas", "isr", "broker")]
    codes, first = distinct_rows(*key)
    fol, flag = [], []
    for reps, isr, b in zip(*(c[first] for c in key), strict=True):
        members = set(ids(isr))
        f = [x for x in ids(reps) if x != b]
        fol.append(np.array(f, dtype="int64"))
        flag.append(np.array([x in members for x in f], dtype=bool))
    n = np.array([len(f) for f in fol], dtype="int64")
    start = np.cumsum(n) - n
    per_row = n[codes]
    rows = np.repeat(np.arange(len(codes)), per_row)
    at = np.repeat(start[codes], per_row) + np.arange(per_row.sum()) - np.repeat(np.cumsum(per_row) - per_row, per_row)
    return pd.DataFrame({"broker": array(leaders, "broker")[rows].astype("int64"), "topic": array(leaders, "topic")[rows],
                         "partition": array(leaders, "partition")[rows].astype("int64"),
                         "replica": np.concatenate(fol)[at], "in_isr": np.concatenate(flag)[at]})


def _lines(lines: list[pd.DataFrame]) -> pd.DataFrame:
    """The request's state-change lines, in order."""
    lines = [f for f in lines if len(f)]
    if len(lines) == 1:
        return lines[0]
    return pd.concat(lines, ignore_index=True) if lines else from_rows([], LINE_COLUMNS)


def new_broker_rows(brokers: list[int]) -> pd.DataFrame:
    """Broker-wide state of freshly started brokers."""
    return conform(pd.DataFrame({"broker": brokers, "controller_epoch": -1, "hw_checkpoint_ms": -1,
                                 "controller_id": -1, "leader_quota": "", "follower_quota": ""}), BROKER)

