"""The produce path on the leader: ReplicaManager.appendRecords, Partition.appendRecordsToLeader and
the produce purgatory (DelayedProduce / checkEnoughReplicasReachOffset).

All functions are vectorised over every broker and partition a task hosts.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from . import errors, leader_epoch
from .config import RoundSettings
from .frames import (
    PENDING,
    PRODUCE,
    RECORD,
    REPLICA,
    RESULT,
    STR,
    array,
    concat,
    conform,
    empty,
    filled,
    isr_sizes,
    locate,
    owned,
    per_topic,
    select_str,
    sort_order,
    take,
)
from .high_watermark import maybe_increment_leader_hw

VALID_ACKS = (-1, 0, 1)
Batches = pd.DataFrame | Mapping[str, np.ndarray]  # a frame, or its columns as arrays of one length


def _results(batches: Batches, now: int, error, base_offset, acked) -> pd.DataFrame:
    """RESULT rows for `batches` (a frame or its columns as arrays; error, base_offset, acked: a value for
    all or one per batch), built in one go: an assign and a conform each cost a frame."""
    n, given = len(batches["broker"]), {"error": error, "base_offset": base_offset, "acked": acked, "time_ms": now}
    cols = {}
    for c, t in RESULT.items():
        v = given[c] if c in given else array(batches, c) if isinstance(batches, pd.DataFrame) else batches[c]
        v = v.to_numpy() if isinstance(v, pd.Series) else v
        if isinstance(v, np.ndarray):
            cols[c] = v.copy() if t == STR else v.astype(t)
        else:
            cols[c] = filled(n, v, object if t == STR else t)
    return owned(cols, RESULT)  # every column a fresh array


def _answers(cols: dict[str, np.ndarray], rows: np.ndarray, now: int, error, base_offset, acked) -> pd.DataFrame:
    """`_results` for the batches `rows` selects (an array argument is one value per batch of `cols`, selected
    with them); no frame is built when none is selected, the common round's case for failures and acks 0/1."""
    if not rows.any():
        return empty(RESULT)

    def pick(v):
        return v[rows] if isinstance(v, np.ndarray) else v

    return _results(_subset(cols, rows), now, pick(error), pick(base_offset), acked)


def _subset(cols: dict[str, np.ndarray], rows: np.ndarray) -> dict[str, np.ndarray]:
    return {c: v[rows] for c, v in cols.items()}


def _offline(frame: pd.DataFrame, offline: pd.DataFrame | None) -> np.ndarray:
    """Which rows of `frame` name a replica its broker holds offline (OFFLINE rows: its log dir failed)."""
    if offline is None or offline.empty or frame.empty:
        return np.zeros(len(frame), dtype=bool)
    return locate(offline, frame) >= 0


def append_to_leader(
    replicas: pd.DataFrame, remotes: pd.DataFrame, batches: pd.DataFrame, min_isr: pd.Series, now: int,
    cfg: RoundSettings, offline: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Append produce batches on the brokers that lead their partitions.

    `min_isr` maps topic -> min.insync.replicas. Batches are appended in record_id order (the
    order the producers sent them). Returns (replicas with new LEOs, appended records, results
    answered now, acks=all batches now pending). Checks, in Kafka's order: acks value
    (INVALID_REQUIRED_ACKS), a replica in a failed log dir (`offline` rows: KAFKA_STORAGE_ERROR,
    HostedPartition.Offline), hosting and leadership (UNKNOWN_TOPIC_OR_PARTITION,
    NOT_LEADER_OR_FOLLOWER), then for acks=all the pre-append min-ISR check on the committed ISR
    (NOT_ENOUGH_REPLICAS). acks=0 is never answered; acks=1 is answered after the local append.
    After appending, the leader tries to advance its HW, which alone commits the records when
    no follower holds it back.
    """
    if batches.empty:
        return replicas, empty(RECORD), empty(RESULT), empty(PENDING)
    # the batches in partition order, as arrays (rows of a sorted copy of the frame would cost a frame each)
    order = sort_order([array(batches, c) for c in ("broker", "topic", "partition", "record_id")])
    b = {c: array(batches, c)[order] for c in PRODUCE}
    pos = locate(replicas, batches)[order]
    leader, epoch, leo_now = (take(replicas, c, pos, d) for c, d in (("leader", -1), ("leader_epoch", -1), ("leo", 0)))
    hosted = pos >= 0
    is_leader = hosted & (leader == b["broker"])
    need = per_topic(b["topic"], min_isr, 1)
    acks = b["acks"]
    sizes = np.append(isr_sizes(replicas), 0)  # a batch of no hosted partition (pos -1) finds 0
    too_few = (acks == -1) & (sizes[pos] < need)
    err = select_str(
        [~np.isin(acks, VALID_ACKS), _offline(batches, offline)[order], ~hosted, ~is_leader, too_few],
        [errors.INVALID_REQUIRED_ACKS, errors.KAFKA_STORAGE_ERROR, errors.UNKNOWN_TOPIC_OR_PARTITION,
         errors.NOT_LEADER_OR_FOLLOWER, errors.NOT_ENOUGH_REPLICAS],
        default="",
    )
    ok = err == ""  # an object array of the few strings: `select_str` (np.select's unicode costs ~10x)
    acks0 = acks == 0
    failed = _answers(b, ~ok & ~acks0, now, err, -1, False)
    # acks=0: the producer hears nothing, success or error; the row records that it was sent.
    unanswered = _answers(b, acks0, now, None, -1, False)

    if not ok.any():
        return replicas, empty(RECORD), concat([failed, unanswered], RESULT), empty(PENDING)
    a = dict(b) if ok.all() else _subset(b, ok)  # b's arrays are the sort's own copies: shared, not copied
    # Offsets: batches of one partition are appended one after another from the current LEO (rows are
    # sorted by partition, so each partition's batches are one run of rows).
    at = pos[ok]
    count = a["count"].astype("int64")
    cum = np.cumsum(count)
    first = np.r_[True, at[1:] != at[:-1]]
    before = (cum - count)[first]  # records of earlier partitions
    within = cum - np.repeat(before, np.diff(np.r_[np.flatnonzero(first), len(at)]))
    a["base_offset"] = leo_now[ok].astype("int64") + within - count
    leo = array(replicas, "leo").astype("int64")  # a copy: replicas is not changed
    np.maximum.at(leo, at, a["base_offset"] + count)
    replicas = conform(replicas, REPLICA, copy=False)  # only replaced columns below: no copy
    replicas["leo"] = leo
    # Message format v2 (0.11+) stamps each batch with the leader's epoch; older formats carry none (-1).
    rules = cfg.rules
    records = expand_batches({**a, "leader_epoch": epoch[ok] if rules.leader_epoch_cache else np.full(len(at), -1),
                              "src": a["broker"], "timestamp": a["sent_ms"]})
    replicas = leader_epoch.on_append(replicas, records, rules, at=np.repeat(at, count), in_order=True)
    replicas = maybe_increment_leader_hw(replicas, remotes, rules, cfg.replica_lag_time_max_ms, now)

    ack1 = a["acks"] == 1
    answered = _answers(a, ack1, now, None, a["base_offset"], True)
    pend = _subset(a, a["acks"] == -1)
    pend["required_offset"] = pend["base_offset"] + pend["count"]
    return replicas, records, concat([failed, unanswered, answered], RESULT), owned(pend, PENDING)


def expand_batches(batches: Batches) -> pd.DataFrame:
    """One RECORD row per record of each batch (offsets base_offset.., ids record_id..); `batches` holds
    the RECORD columns but offset, and count and base_offset."""
    n = np.asarray(batches["count"]).astype("int64")
    if n.sum() == 0:
        return empty(RECORD)
    rows = np.repeat(np.arange(len(n)), n)
    within = np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)
    cols = {c: np.asarray(batches[c])[rows] for c in RECORD if c != "offset"}
    cols["offset"] = np.asarray(batches["base_offset"])[rows] + within
    cols["record_id"] = cols["record_id"] + within
    return owned(cols, RECORD)


def disconnect(pending: pd.DataFrame, now: int) -> pd.DataFrame:
    """Results for the batches still in a broker's produce purgatory when it stops (clean shutdown or
    exit): KafkaServer.shutdown closes the sockets before the purgatory, so the producer's NetworkClient
    sees the connection drop and fails them with NETWORK_EXCEPTION (the data stays appended)."""
    return _results(pending, now, errors.NETWORK_EXCEPTION, -1, False)


def complete_delayed_produce(
    replicas: pd.DataFrame, pending: pd.DataFrame, min_isr: pd.Series, now: int,
    offline: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Check the produce purgatory (DelayedProduce.tryComplete / onExpiration).

    A pending acks=all batch completes with NOT_LEADER_OR_FOLLOWER once its broker no longer
    leads the partition; with success once HW >= its last offset + 1, or with
    NOT_ENOUGH_REPLICAS_AFTER_APPEND if at that moment the ISR is smaller than min.insync.replicas
    (the data stays: no error path rolls back an append); with REQUEST_TIMED_OUT at its deadline.
    A batch whose replica went offline (its log dir failed; `offline` rows) completes with
    KAFKA_STORAGE_ERROR (DelayedProduce's getPartitionOrError). Returns (still pending, results).
    """
    if pending.empty:
        return pending, empty(RESULT)
    pos = locate(replicas, pending)
    leader, hw = take(replicas, "leader", pos, -1), take(replicas, "hw", pos, -1)
    gone = _offline(pending, offline)
    lost = ~(leader == array(pending, "broker"))
    reached = ~lost & (hw >= array(pending, "required_offset"))
    small = np.zeros(len(pending), dtype=bool)  # the ISR check, for the batches that reached the HW only
    if reached.any():
        small[reached] = isr_sizes(replicas)[pos[reached]] < per_topic(
            array(pending, "topic")[reached], min_isr, 1)
    expired = ~lost & ~reached & (array(pending, "deadline_ms") <= now)
    code = np.select([gone, lost, reached & small, reached, expired], np.arange(1, 6), 0)
    done = code > 0
    d = {c: array(pending, c)[done] for c in PENDING}  # the answered batches' columns (no frame needed)
    answer = code[done]
    ok = answer == 4  # reached the HW with enough of the ISR: acked
    error = np.array([None, errors.KAFKA_STORAGE_ERROR, errors.NOT_LEADER_OR_FOLLOWER,
                      errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, None, errors.REQUEST_TIMED_OUT], dtype=object)[answer]
    res = _results(d, now, error, np.where(ok, d["base_offset"], -1), ok)
    return owned({c: array(pending, c)[~done] for c in PENDING}, PENDING), res


def unsent_batch_errors(leaders, acks) -> list[str | None]:
    """The error a producer's batch gets when it cannot reach a leader (the producer's Sender and
    NetworkClient): LEADER_NOT_AVAILABLE when its metadata has no leader (-1), NETWORK_EXCEPTION when the
    leader's connection fails; with acks=0 the producer waits for no response and records no error."""
    err = ["LEADER_NOT_AVAILABLE" if int(x) < 0 else errors.NETWORK_EXCEPTION for x in leaders]
    return [None if a == 0 else e for a, e in zip(acks, err, strict=True)]
