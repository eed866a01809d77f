"""OffsetsForLeaderEpoch between a truncating follower and its leader (KIP-101, KIP-279, KIP-320).

The follower (AbstractFetcherThread.maybeTruncate) asks for the end offset of its latest epoch; the
leader (ReplicaManager/Partition.lastOffsetForLeaderEpoch) answers from its epoch cache, offset only
on v0 (0.11-1.1), (epoch, offset) from v1 (2.0); from v2 (2.1) the request carries the follower's
current leader epoch and the leader fences it (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH, KIP-320;
Partition.lastOffsetForLeaderEpoch). The follower truncates by leader_epoch.truncation_offset and, when
KIP-279 says it is not done, asks again with its new latest epoch.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import errors, leader_epoch
from .config import RoundSettings
from .frames import (
    EPOCH_REQUEST,
    EPOCH_RESPONSE,
    FETCHING,
    REPLICA,
    TRUNCATING,
    array,
    conform,
    empty,
    locate,
    owned,
    positional,
    take,
)
from .rules import Rules, rules_for
from .truncation import no_cuts, truncate

FOREVER = np.iinfo("int64").max


def requests(replicas: pd.DataFrame, send: np.ndarray, now: int, rules: Rules | str) -> pd.DataFrame:
    """The request entries of the selected (truncating) followers: their latest epoch, their current one."""
    rows = np.flatnonzero(send)  # (the frame's own columns, not a filtered copy of all of them)
    current = array(replicas, "leader_epoch")[rows] if rules_for(rules).current_leader_epoch else np.full(len(rows), -1)
    return owned({"broker": array(replicas, "leader")[rows], "src": array(replicas, "broker")[rows],
                  "topic": array(replicas, "topic")[rows], "partition": array(replicas, "partition")[rows],
                  "leader_epoch": array(replicas, "last_fetched_epoch")[rows],
                  "current_leader_epoch": current,  # KIP-320
                  "sent_ms": np.full(len(rows), now, dtype="int64")}, EPOCH_REQUEST)


def answer(replicas: pd.DataFrame, reqs: pd.DataFrame, rules: Rules | str) -> pd.DataFrame:
    """The leader's answers: errors in Kafka's order (not hosted, fenced/unknown epoch, not leader),
    else end_offset_for on its cache; an empty cache answers (-1, -1) with no error."""
    if reqs.empty:
        return empty(EPOCH_RESPONSE)
    pos = locate(replicas, reqs)
    hosted = pos >= 0
    le = take(replicas, "leader_epoch", pos, -1)
    cle = array(reqs, "current_leader_epoch")
    lead = hosted & (take(replicas, "leader", pos, -1) == array(reqs, "broker"))
    err = np.select(
        [~hosted, (cle >= 0) & (cle < le), (cle >= 0) & (cle > le), ~lead],
        [errors.UNKNOWN_TOPIC_OR_PARTITION, errors.FENCED_LEADER_EPOCH, errors.UNKNOWN_LEADER_EPOCH,
         errors.NOT_LEADER_OR_FOLLOWER], default="")
    caches = take(replicas, "epoch_cache", pos, "")
    leos = take(replicas, "leo", pos, -1)
    rules = rules_for(rules)
    ans = [leader_epoch.offsets_for_leader_epoch(leader_epoch.decode(c), int(lo), int(e), rules) if ok
           else leader_epoch.UNDEFINED
           for c, lo, e, ok in zip(caches, leos, array(reqs, "leader_epoch"), err == "", strict=True)]
    return conform(pd.DataFrame({
        "broker": array(reqs, "src"), "src": array(reqs, "broker"), "topic": array(reqs, "topic"),
        "partition": array(reqs, "partition"), "leader_epoch": [a[0] for a in ans],
        "end_offset": [a[1] for a in ans], "error": np.where(err == "", None, err),
        "sent_ms": array(reqs, "sent_ms"),
    }), EPOCH_RESPONSE)


def apply_answers(replicas: pd.DataFrame, responses: pd.DataFrame, now: int, cfg: RoundSettings
                  ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The follower handles answers to its outstanding request: a stale one (the partition changed
    leader or epoch since, KAFKA-7786) is dropped; FENCED_LEADER_EPOCH marks the partition failed until
    the next LeaderAndIsr, other errors back off replica.fetch.backoff.ms; an answer truncates the log
    and, when done, moves the partition to Fetching. Returns (replicas, cuts)."""
    if responses.empty:  # nothing to change: no copy
        return positional(replicas), no_cuts()
    r = replicas.reset_index(drop=True)
    pos = locate(r, responses)
    mine = ((pos >= 0) & (take(r, "leader", pos, -1) == array(responses, "src"))
            & take(r, "fetch_in_flight", pos, False).astype(bool)
            & (take(r, "fetch_sent_ms", pos, -2) == array(responses, "sent_ms"))
            & (take(r, "fetch_state", pos, FETCHING) == TRUNCATING))
    r.loc[pos[mine], "fetch_in_flight"] = False
    err = array(responses, "error")
    failed = mine & pd.notna(err)
    if failed.any():
        fenced = err[failed] == errors.FENCED_LEADER_EPOCH
        r.loc[pos[failed], "backoff_until_ms"] = np.where(fenced, FOREVER, now + cfg.replica_fetch_backoff_ms)
    ok = np.flatnonzero(mine & pd.isna(err))
    rules = cfg.rules
    offs, done = [], []
    for i in ok:
        p = pos[i]
        off, fin = leader_epoch.truncation_offset(
            leader_epoch.decode(r.at[p, "epoch_cache"]), int(r.at[p, "leo"]), int(r.at[p, "hw"]),
            (int(responses["leader_epoch"].iat[i]), int(responses["end_offset"].iat[i])), rules)
        offs.append(off)
        done.append(fin)
    r, cuts = truncate(r, pos[ok], np.asarray(offs, dtype="int64"))
    fin_pos = pos[ok][np.asarray(done, dtype=bool)] if len(ok) else pos[ok]
    r.loc[fin_pos, "fetch_state"] = FETCHING
    return conform(r, REPLICA), cuts
