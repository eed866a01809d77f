"""Replica fetching: the follower's fetcher (AbstractFetcherThread / ReplicaFetcherThread) and the
leader's side (ReplicaManager.fetchMessages, Partition.readRecords / updateFollowerFetchState,
DelayedFetch).

A follower keeps one fetch request outstanding per leader it fetches from; the request carries
every partition it follows from that leader. The leader answers at once when it has at least
replica.fetch.min.bytes to return or an error, and otherwise parks the request in its fetch
purgatory until replica.fetch.wait.max.ms passes or data arrives; a parked request re-reads at
completion, so it reports the HW of that moment.

Replication throttles (KIP-73) act on the leader's reads (_throttle) and, as a
safety net for the follower's rate, on its appends (_cap_appends); the bytes are recorded in the brokers'
sensors after the fetch (record_quota); see replication_quota.py.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from . import errors, leader_epoch, offsets_for_leader_epoch, replication_quota
from .config import RoundSettings
from .frames import (
    EPOCH_REQUEST,
    FETCH,
    FETCH_RESPONSE,
    RECORD,
    REMOTE,
    TRUNCATING,
    array,
    concat,
    conform,
    empty,
    from_rows,
    group_any,
    group_ids,
    join,
    joined_order,
    locate,
    owned,
    positional,
    run_ids,
    select,
    select_str,
    stack,
    str_len,
    take,
    with_values,
)
from .high_watermark import follower_hw, maybe_increment_leader_hw
from .rules import Rules
from .truncation import no_cuts, truncate

FOREVER = np.iinfo("int64").max
REQUEST = ["src", "broker", "sent_ms"]  # one fetch request = these + many partitions
RESPONSE = ["_dst", "broker", "sent_ms"]  # the same request, seen from the records read for it


def record_bytes(records: pd.DataFrame) -> np.ndarray:
    """Bytes a record costs against fetch limits (value plus key; at least one byte)."""
    key = str_len(records["key"])
    return np.maximum(array(records, "value_bytes").astype("int64") + key, 1)


def _cut_off(src: np.ndarray, dst: np.ndarray, unreachable: Mapping[int, frozenset[int]]) -> np.ndarray:
    """Whether each src can not reach its dst (a crash or a network partition between them)."""
    if not unreachable:
        return np.zeros(len(src), dtype=bool)
    pairs = np.array([(a << 32) | b for a, bs in unreachable.items() for b in bs if b >= 0], dtype="int64")
    return np.isin((src.astype("int64") << 32) | np.maximum(dst, 0).astype("int64"), pairs) & (dst >= 0)


def fetch_requests(
    replicas: pd.DataFrame, now: int, unreachable: Mapping[int, frozenset[int]], cfg: RoundSettings,
    quota: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Each follower sends a request to each leader it has no request outstanding with: a Fetch for
    its partitions in the Fetching state, OffsetsForLeaderEpoch for those still Truncating.

    A request to a leader the follower cannot reach fails at once (the connection is refused or
    reset) and the partitions back off replica.fetch.backoff.ms; a request that got no answer for
    replica.socket.timeout.ms past the leader's wait time is given up and sent again.
    Each request carries the follower's quota left (`quota`: the brokers' sensors, replication_quota.py).
    Returns (replicas, fetch requests, OffsetsForLeaderEpoch requests).
    """
    r = replicas.copy(deep=False)  # its columns are replaced below, not written into
    broker, leader = array(r, "broker"), array(r, "leader")
    follower = (leader >= 0) & (leader != broker)
    cut = _cut_off(broker, leader, unreachable)
    in_flight = r["fetch_in_flight"].to_numpy(dtype=bool).copy()
    timeout = cfg.replica_socket_timeout_ms + cfg.replica_fetch_wait_max_ms
    dropped = follower & in_flight & (cut | (now - array(r, "fetch_sent_ms") >= timeout))
    in_flight[dropped] = False
    backoff = array(r, "backoff_until_ms").copy()
    backoff[dropped & cut] = now + cfg.replica_fetch_backoff_ms
    r["fetch_in_flight"], r["backoff_until_ms"] = in_flight, backoff
    busy = group_any(in_flight, group_ids(r, ["broker", "leader"]))  # a request out to that leader
    send = follower & ~busy & ~cut & (backoff <= now)
    if not send.any():
        return r, empty(FETCH), empty(EPOCH_REQUEST)
    truncating = array(r, "fetch_state") == TRUNCATING
    rules = cfg.rules
    epoch_reqs = offsets_for_leader_epoch.requests(r, send & truncating, now, rules)
    rows = np.flatnonzero(send & ~truncating)

    def sending(c: str) -> np.ndarray:
        return array(r, c)[rows]

    req = owned({
        "broker": sending("leader"), "src": sending("broker"), "topic": sending("topic"),
        "partition": sending("partition"), "fetch_offset": sending("leo"),
        "current_leader_epoch": sending("leader_epoch") if rules.current_leader_epoch else np.full(len(rows), -1),
        "last_fetched_epoch": sending("last_fetched_epoch") if rules.fetch_divergence else np.full(len(rows), -1),
        "log_start_offset": sending("log_start_offset"), "sent_ms": np.full(len(rows), now),
        "deadline_ms": np.full(len(rows), -1),
        "quota_bytes": replication_quota.allowances(cfg, "follower", sending("broker"), now, quota),
    }, FETCH)
    in_flight[send] = True
    sent_ms = array(r, "fetch_sent_ms").copy()
    sent_ms[send] = now
    r["fetch_in_flight"], r["fetch_sent_ms"] = in_flight, sent_ms
    return r, req, epoch_reqs


def _filled(m: pd.DataFrame, c: str, value: int) -> np.ndarray:
    """m[c].fillna(value).to_numpy(): an integer column (every column taken from the replicas) has no
    null to fill, and is read as it is (a Series and its fillna cost ~40 us a column, five a round)."""
    v = array(m, c)
    return v if v.dtype.kind in "iub" else m[c].fillna(value).to_numpy()


def _validate(m: pd.DataFrame, hosted: np.ndarray) -> np.ndarray:
    """Per-partition errors of a follower fetch found before reading, in Partition.fetchRecords'
    order. The read's own range check comes after the divergence check (_out_of_range)."""
    cle = array(m, "current_leader_epoch")
    le = _filled(m, "leader_epoch", -1)
    leader = hosted & (_filled(m, "leader", -1) == array(m, "broker"))
    return select_str(
        [~hosted, (cle >= 0) & (cle < le), (cle >= 0) & (cle > le), ~leader],
        [errors.UNKNOWN_TOPIC_OR_PARTITION, "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH",
         errors.NOT_LEADER_OR_FOLLOWER],
        default="",
    )


def _out_of_range(m: pd.DataFrame) -> None:
    """Log.read's range check, in place: a fetch offset outside [logStart, LEO] is OFFSET_OUT_OF_RANGE.
    Partition.readRecords runs it after the lastFetchedEpoch check, so a diverging follower whose
    fetch offset is past the leader's LEO gets its DivergingEpoch."""
    off = array(m, "fetch_offset")
    bad = (off < _filled(m, "_lls", 0)) | (off > _filled(m, "leo", 0))
    bad &= (array(m, "_err") == "") & (array(m, "_de") < 0)
    m["_err"] = np.where(bad, errors.OFFSET_OUT_OF_RANGE, array(m, "_err"))


def _diverging(m: pd.DataFrame) -> None:
    """Partition.readRecords' lastFetchedEpoch check (Fetch v12, 2.8), in place:
    `_de`/`_do` get the DivergingEpoch (-1 when none) and an epoch the leader cannot place becomes
    OFFSET_OUT_OF_RANGE. A follower whose last epoch is the leader's latest diverges only when its
    fetch offset is past the leader's LEO (endOffsetFor gives (latest, LEO)), so only the few other
    rows reach the epoch cache."""
    m["_de"], m["_do"] = -1, -1
    lfe = array(m, "last_fetched_epoch")
    past_leo = array(m, "fetch_offset") > _filled(m, "leo", 0)
    check = np.flatnonzero((array(m, "_err") == "") & (lfe >= 0)
                           & ((lfe != _filled(m, "_lle", -1)) | past_leo))
    if len(check) == 0:
        return
    de, do, err = array(m, "_de").copy(), array(m, "_do").copy(), array(m, "_err").copy()
    de[check], do[check], oor = leader_epoch.diverging_epochs(
        array(m, "_cache")[check], array(m, "leo")[check].astype(np.int64), lfe[check].astype(np.int64),
        array(m, "fetch_offset")[check].astype(np.int64), array(m, "_lls")[check].astype(np.int64))
    err[check[oor]] = errors.OFFSET_OUT_OF_RANGE
    m["_de"], m["_do"], m["_err"] = de, do, err


def _update_followers(remotes: pd.DataFrame, ok: pd.DataFrame, now: int) -> pd.DataFrame:
    """Replica.updateFetchState: remote LEO := fetch offset, and the lastCaughtUpTime rule (4.1), for the
    remotes of the fetches in `ok` (src = the remote replica; leo = the leader's, req_log_start = the
    follower's log start)."""
    key, ok_key = ["broker", "topic", "partition", "replica"], ["broker", "topic", "partition", "src"]
    at = locate(remotes, ok, key, ok_key)  # each fetch's remote row: the remotes' keys are coded once, kept
    found = at >= 0
    if not found.any():
        return remotes
    if np.bincount(at[found], minlength=len(remotes)).max() > 1:  # one remote fetched twice: the general join
        li, ri = join(remotes, ok, key, ok_key, how="left")
    else:  # every remote row once, with its fetch, if any (the join's answer, found without one)
        li, ri = np.arange(len(remotes)), np.full(len(remotes), -1)
        ri[at[found]] = np.flatnonzero(found)
    hit = ri >= 0
    m = {c: array(remotes, c)[li] for c in REMOTE}

    def fetched(c: str) -> np.ndarray:
        return np.where(hit, array(ok, c)[ri], -1).astype("int64")

    f, lnow = fetched("fetch_offset"), fetched("leo")
    caught = m["last_caught_up_ms"]
    m["last_caught_up_ms"] = np.where(hit & (f >= lnow), np.maximum(caught, now),
                                      np.where(hit & (f >= m["last_fetch_leader_leo"]),
                                               np.maximum(caught, m["last_fetch_ms"]), caught))
    m["leo"] = np.where(hit, f, m["leo"])
    m["log_start_offset"] = np.where(hit, fetched("req_log_start"), m["log_start_offset"])
    m["last_fetch_leader_leo"] = np.where(hit, lnow, m["last_fetch_leader_leo"])
    m["last_fetch_ms"] = np.where(hit, now, m["last_fetch_ms"])
    m["leo_changed_ms"] = np.where(hit, now, m["leo_changed_ms"])  # set on every fetch, as 0.8 did
    return owned(m, REMOTE)


def _read(m: pd.DataFrame, log: pd.DataFrame, cfg: RoundSettings) -> pd.DataFrame:
    """Records each (request, partition) row gets: from fetch_offset up to LEO, at most
    replica.fetch.max.bytes per partition and replica.fetch.response.max.bytes per response, but
    always at least one record for the first partition with data (KIP-74). In (request, partition,
    offset) order: the log's columns but src, then _dst (the fetching follower), sent_ms, fetch_offset,
    leo and _m (the row of `m` it was read for). Joined and cut with numpy over positions: the merges and
    groupbys cost ~10x more."""
    rows = np.flatnonzero((array(m, "_err") == "") & (array(m, "_de") < 0))
    want = select(m, REQUEST + ["topic", "partition", "fetch_offset", "leo"], rows)
    if want.empty or log.empty:
        return empty(RECORD).assign(sent_ms=pd.Series(dtype="int64"), _dst=pd.Series(dtype="int32"),
                                    _m=pd.Series(dtype="int64"))
    # each wanted partition's log rows, in `want`'s order and, within a partition, in the log's (offset) order
    wi, li = join(want, log, ["broker", "topic", "partition"])
    off = array(log, "offset")[li]
    inside = (off >= array(want, "fetch_offset")[wi]) & (off < array(want, "leo")[wi])
    li, wi, off = li[inside], wi[inside], off[inside]
    part = ["_dst", "broker", "sent_ms", "topic", "partition"]  # the records' names for want's REQUEST, topic, partition
    order = joined_order([array(want, c) for c in (*REQUEST, "topic", "partition")], wi, off)
    if order is not None:  # only the key columns were taken to sort by: every column is taken once, in order
        li, wi = li[order], wi[order]
    cols = {c: array(log, c)[li] for c in log.columns if c != "src"}
    cols.update({"_dst" if c == "src" else c: array(want, c)[wi] for c in ("src", "sent_ms", "fetch_offset", "leo")})
    cols["_m"] = rows[wi]
    if len(li):
        size = record_bytes(log)[li]
        # runs of one (request, partition), then of one request: the rows are in that order
        part_run = run_ids([cols[c] for c in part])
        kept = _within(size, part_run, cfg.replica_fetch_max_bytes)
        per = np.zeros(part_run[-1] + 1, dtype="int64")  # each partition's bytes kept
        np.add.at(per, part_run[kept], size[kept])
        parts = np.flatnonzero(np.bincount(part_run[kept], minlength=len(per)))  # those left with a record
        first = _starts(part_run)[parts]
        ok = np.zeros(len(per), dtype=bool)
        ok[parts] = _within(per[parts], run_ids([cols[c][first] for c in RESPONSE]),
                            cfg.replica_fetch_response_max_bytes)
        keep = kept & ok[part_run]
        if not keep.all():  # most rounds stay within both limits: nothing to cut
            cols = {c: v[keep] for c, v in cols.items()}
    return owned(cols)  # every array a fresh take: owned as it is


def _starts(run: np.ndarray) -> np.ndarray:
    """The first row of each run (`frames.run_ids`)."""
    return np.flatnonzero(np.r_[True, run[1:] != run[:-1]]) if len(run) else run


def _within(size: np.ndarray, run: np.ndarray, limit: int) -> np.ndarray:
    """Which rows start within `limit` bytes of their run's beginning (bytes of the run's rows before < limit)."""
    if not len(size):
        return np.zeros(0, dtype=bool)
    before = np.cumsum(size) - size
    return before - before[_starts(run)][run] < limit


def _throttle(m: pd.DataFrame, recs: pd.DataFrame, replicas: pd.DataFrame, now: int, cfg: RoundSettings,
              quota: pd.DataFrame | None) -> pd.DataFrame:
    """KIP-73 on the leader's reads (ReplicaManager.readFromLocalLog, shouldLeaderThrottle), keeping the
    records the quotas allow (replication_quota.py), in (request, partition, offset) order:

    * follower throttle (ReplicaFetcherThread.shouldFollowerThrottle): a partition the fetching
      broker throttles whose lag (the HW this response reports - fetch offset) is above 0 gets at
      most the follower's quota left (the request's quota_bytes, grown by the follower's rate while the
      request waits in the purgatory) less the bytes of its in-sync
      throttled partitions in the same response. Kafka's follower leaves such a partition out of its
      request; the lag it needs is the leader's, so the leader applies the rule for it and the
      partition's records are empty.
    * leader throttle (ReplicaManager.shouldLeaderThrottle): partitions this leader throttles,
      fetched by a replica outside the (committed) ISR, share the leader's quota left (its sensor in
      `quota`, now) less the bytes of its throttled partitions going to in-sync followers this round;
      in-sync followers are never withheld.

    Withheld records do not count as data, so a request whose only data is withheld is parked or
    stays parked (DelayedFetch skips throttled partitions when summing bytes toward min_bytes).
    """
    if recs.empty:
        return recs
    hw = np.where(m["_new"].to_numpy(dtype=bool), m["_hw_snapshot"], m["hw"]).astype(float)
    isr = take(replicas, "isr", locate(replicas, m), "")
    info = pd.DataFrame({
        "_dst": array(m, "src"), "broker": array(m, "broker"), "sent_ms": array(m, "sent_ms"),
        "topic": array(m, "topic"), "partition": array(m, "partition"),
        "_lag": np.nan_to_num(hw, nan=-1).astype("int64") - array(m, "fetch_offset"),
        "_isr": replication_quota.in_csv(isr, array(m, "src")),
        "_fq": array(m, "quota_bytes"),
    })
    cols = list(recs.columns)
    r = recs.merge(info, on=["_dst", "broker", "sent_ms", "topic", "partition"], how="left") \
        .sort_values(["broker", "_dst", "sent_ms", "topic", "partition", "offset"], kind="stable") \
        .reset_index(drop=True)
    q = replication_quota
    size = record_bytes(r)
    # the quota the follower had left when it sent, grown by its rate for the time the request waited parked
    fb = replication_quota.grown(array(r, "_fq"), cfg, r["_dst"], now - array(r, "sent_ms"))
    f_thr = q.is_throttled(cfg, "follower", r["topic"], r["partition"], r["_dst"])
    lag = array(r, "_lag")
    f_hold = q.should_follower_throttle(f_thr, lag, fb < q.UNLIMITED)
    if f_hold.any():
        req = r.groupby(["_dst", "broker", "sent_ms"], sort=False).ngroup().to_numpy()
        in_sync = q.group_sum(np.where(f_thr & (lag <= 0), size, 0), req)
        keep = q.within_budget(size, req, f_hold, np.maximum(fb - in_sync, 0))
        r, size = r[keep].reset_index(drop=True), size[keep]
    lb = q.allowances(cfg, "leader", r["broker"], now, quota)
    l_thr = q.is_throttled(cfg, "leader", r["topic"], r["partition"], r["broker"])
    in_isr = r["_isr"].to_numpy(dtype=bool)
    l_hold = q.should_leader_throttle(l_thr, in_isr, lb < q.UNLIMITED)
    if l_hold.any():
        leader = array(r, "broker")
        in_sync = q.group_sum(np.where(l_thr & in_isr, size, 0), leader)
        r = r[q.within_budget(size, leader, l_hold, np.maximum(lb - in_sync, 0))]
    return r[cols]


def _cap_appends(appended: pd.DataFrame, now: int, cfg: RoundSettings, quota: pd.DataFrame | None) -> pd.DataFrame:
    """The follower's side of the rate (ReplicaFetcherThread.shouldFollowerThrottle): per follower
    broker, the bytes appended for throttled partitions that are not in sync (response HW - fetch
    offset > 0) stay within its quota left (its sensor in `quota`, now) less its in-sync throttled
    bytes, whatever its leaders sent. The leaders already keep each response within that (_throttle), so this only cuts when
    responses from several leaders land in one round; cut records are fetched again.
    `appended` is in (broker, topic, partition, offset) order and carries the response's hw and
    fetch_offset."""
    q = replication_quota
    fb = q.allowances(cfg, "follower", appended["broker"], now, quota)
    thr = q.is_throttled(cfg, "follower", appended["topic"], appended["partition"], appended["broker"])
    lag = array(appended, "hw") - array(appended, "fetch_offset")
    hold = q.should_follower_throttle(thr, lag, fb < q.UNLIMITED)
    if not hold.any():
        return appended
    size = record_bytes(appended)
    follower = array(appended, "broker")
    in_sync = q.group_sum(np.where(thr & (lag <= 0), size, 0), follower)
    return appended[q.within_budget(size, follower, hold, np.maximum(fb - in_sync, 0))]


def serve_fetch(
    replicas: pd.DataFrame, remotes: pd.DataFrame, log: pd.DataFrame, requests: pd.DataFrame,
    parked: pd.DataFrame, now: int, cfg: RoundSettings, quota: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Serve new follower fetches and re-check parked ones on the leaders (`quota`: the leaders'
    KIP-73 sensors, a BROKER frame; None = fresh ones).

    `log` holds the records the leaders can read (their tail and whatever the engine read from
    storage for lagging followers). Returns (replicas with new HWs, remotes, responses,
    response records, still-parked requests).
    """
    reqs = concat([requests, parked], FETCH)  # new requests first (an empty part is left out)
    if reqs.empty:
        return replicas, remotes, empty(FETCH_RESPONSE), empty(RECORD), empty(FETCH)
    # the leader's replica of each requested partition (-1 / "" where it hosts none: those get an error)
    pos = locate(replicas, reqs)
    hosted = pos >= 0
    m = owned({  # every array a new one: the requests' columns copied (m's are written below)
        **{"req_log_start" if c == "log_start_offset" else c: array(reqs, c).copy() for c in FETCH},
        "_new": np.arange(len(reqs)) < len(requests),
        **{name: take(replicas, col, pos, default) for col, name, default in (
            ("leader", "leader", -1), ("leader_epoch", "leader_epoch", -1), ("leo", "leo", -1), ("hw", "hw", -1),
            ("log_start_offset", "_lls", -1), ("last_fetched_epoch", "_lle", -1), ("epoch_cache", "_cache", ""))}})
    m["_err"] = _validate(m, hosted)
    _diverging(m)
    _out_of_range(m)
    m["_hw_snapshot"] = m["hw"]
    new_ok = select(m, ["broker", "topic", "partition", "src", "fetch_offset", "leo", "req_log_start"],
                    array(m, "_new") & (array(m, "_err") == "") & (array(m, "_de") < 0))
    remotes = _update_followers(remotes, new_ok, now)
    replicas = maybe_increment_leader_hw(replicas, remotes, cfg.rules, cfg.replica_lag_time_max_ms, now)
    m["hw"] = take(replicas, "hw", pos, -1)  # replicas keep their rows: pos still holds
    recs = _read(m, log, cfg)
    if replication_quota.active(cfg):
        recs = _throttle(m, recs, replicas, now, cfg, quota)
    req = group_ids(m, REQUEST)
    has_err = group_any(array(m, "_err") != "", req)
    # one request: any partition with data answers all (a record's request is that of its row of m)
    read_for = array(recs, "_m")
    has_data = group_any(np.bincount(read_for, minlength=len(m)) > 0, req)
    is_new = m["_new"].to_numpy(dtype=bool)
    expired = ~is_new & (array(m, "deadline_ms") <= now)
    has_div = group_any(array(m, "_de") >= 0, req)
    respond = has_err | has_data | has_div | expired | (cfg.replica_fetch_wait_max_ms <= 0)
    # New requests answered at once report the HW read before this fetch moved it; parked ones
    # re-read at completion and report the current HW (DelayedFetch.onComplete).
    done = np.flatnonzero(respond)

    def answered(c: str) -> np.ndarray:
        return array(m, c)[done]

    hw = np.where(is_new[done], answered("_hw_snapshot"), answered("hw"))
    err = answered("_err")
    resp = owned({
        "broker": answered("src"), "src": answered("broker"), "topic": answered("topic"),
        "partition": answered("partition"), "fetch_offset": answered("fetch_offset"),
        "hw": np.nan_to_num(hw.astype(float), nan=-1), "log_start_offset": answered("_lls"), "leo": answered("leo"),
        "leader_epoch": answered("leader_epoch"), "error": np.where(err != "", err, None),
        "sent_ms": answered("sent_ms"), "diverging_epoch": answered("_de"), "diverging_end_offset": answered("_do"),
    }, FETCH_RESPONSE)
    # the records of the answered requests, sent back: from the leader (src) to the follower (broker)
    sent = group_any(respond, req)[read_for]
    out_recs = owned({**{c: array(recs, c)[sent] for c in RECORD if c not in ("broker", "src")},
                      "broker": array(recs, "_dst")[sent], "src": array(recs, "broker")[sent]}, RECORD)
    # the rest wait in the purgatory: the new ones (first) until replica.fetch.wait.max.ms from now
    wait = np.r_[np.flatnonzero(~respond & is_new), np.flatnonzero(~respond & ~is_new)]
    still = {c: array(m, "req_log_start" if c == "log_start_offset" else c)[wait] for c in FETCH}
    still["deadline_ms"] = np.where(is_new[wait], now + cfg.replica_fetch_wait_max_ms, still["deadline_ms"])
    return replicas, remotes, resp, out_recs, owned(still, FETCH)


def apply_fetch_responses(
    replicas: pd.DataFrame, responses: pd.DataFrame, records: pd.DataFrame, now: int, cfg: RoundSettings,
    quota: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The follower processes fetch responses (AbstractFetcherThread.processFetchRequest).

    A response to anything but the partition's outstanding request (from a broker that is no
    longer its leader, or to a request a LeaderAndIsr superseded) is dropped, and so are the
    records of one whose fetch offset is not the log end any more. Otherwise records are appended
    as sent (offsets and epochs kept, the epoch cache updated), then HW := clamp(response HW,
    logStart, LEO) and logStart := max(own, leader's). A DivergingEpoch truncates the log by the
    KIP-279 rule and touches nothing else (KAFKA-14704); OFFSET_OUT_OF_RANGE runs the out-of-range
    recovery (out_of_range). Other errors back the partition off replica.fetch.backoff.ms;
    FENCED_LEADER_EPOCH stops fetching it until the next LeaderAndIsr. `quota`: the followers' KIP-73
    sensors (a BROKER frame; None = fresh ones).
    Returns (replicas, appended records, log cuts, halts: brokers that exit, as pre-2.1 ones did).
    """
    replicas = positional(replicas)  # positions below index rows; its columns are replaced, not written into
    if responses.empty:
        return replicas, empty(RECORD), no_cuts(), _halts(replicas, [], [], [])
    pos = locate(replicas, responses)
    leader = take(replicas, "leader", pos, -1)
    leo = take(replicas, "leo", pos, -1)
    same_request = take(replicas, "fetch_sent_ms", pos, -2) == array(responses, "sent_ms")
    waiting = take(replicas, "fetch_in_flight", pos, False).astype(bool)
    mine = (pos >= 0) & (leader == array(responses, "src")) & waiting & same_request
    error = array(responses, "error")
    has_err = pd.notna(error)
    diverging = ~has_err & (array(responses, "diverging_end_offset") >= 0)
    ok = mine & ~has_err & ~diverging & (array(responses, "fetch_offset") == leo)
    out_of_range = mine & has_err & (error == errors.OFFSET_OUT_OF_RANGE)
    err = mine & has_err & ~out_of_range
    r = with_values(replicas, "fetch_in_flight", pos[mine], False)
    if err.any():
        fenced = error[err] == errors.FENCED_LEADER_EPOCH
        r = with_values(r, "backoff_until_ms", pos[err], np.where(fenced, FOREVER, now + cfg.replica_fetch_backoff_ms))
    cuts_d, cuts_o, halts = no_cuts(), no_cuts(), _halts(r, [], [], [])  # the common round: neither case
    if (mine & diverging).any():
        r, cuts_d = _truncate_diverging(r, pos[mine & diverging], responses[mine & diverging], cfg.rules)
    if out_of_range.any():
        r, cuts_o, halts = out_of_range_recovery(r, pos[out_of_range], responses[out_of_range], cfg)
    cuts = stack([cuts_d, cuts_o])
    appended = empty(RECORD)
    if not ok.any():
        return r, appended, cuts, halts
    okr = responses[ok]
    if len(records):
        # the records of the ok responses from their fetch offsets, in (broker, topic, partition, offset) order
        ri, li = join(okr, records, ["broker", "topic", "partition", "src"])
        off = array(records, "offset")[li]
        inside = off >= array(okr, "fetch_offset")[ri]
        li, ri, off = li[inside], ri[inside], off[inside]
        order = joined_order([array(okr, c) for c in ("broker", "topic", "partition")], ri, off)
        if order is not None:
            li, ri = li[order], ri[order]
        cols = {c: array(records, c)[li] for c in RECORD}
        at = pos[ok][ri]  # each record's replica: its response's (r keeps the rows of replicas)
        if replication_quota.active(cfg):
            cols.update(fetch_offset=array(okr, "fetch_offset")[ri], hw=array(okr, "hw")[ri], _at=at)
            capped = _cap_appends(pd.DataFrame(cols, copy=False), now, cfg, quota)
            appended, at = conform(capped, RECORD), array(capped, "_at")
        else:
            appended = owned(cols, RECORD)
    if len(appended):
        end = np.full(len(r), -1, dtype="int64")
        np.maximum.at(end, at, array(appended, "offset").astype("int64") + 1)
        r["leo"] = np.where(end >= 0, end, array(r, "leo"))
        r = leader_epoch.on_append(r, appended, cfg.rules, at=at, in_order=True)  # sorted above
    op = pos[ok]
    ls = np.maximum(array(r, "log_start_offset")[op], array(okr, "log_start_offset"))
    r = with_values(r, "log_start_offset", op, ls)
    r = with_values(r, "hw", op, follower_hw(array(okr, "hw"), array(r, "leo")[op], ls))
    return r, appended, cuts, halts


def record_quota(quota: pd.DataFrame, side: str, records: pd.DataFrame, by: str, now: int, cfg: RoundSettings
                 ) -> pd.DataFrame:
    """Record a round's replication bytes in the brokers' sensors (ReplicationQuotaManager.record):
    `records` are what the leaders sent (side "leader", charged to `by` = "src") or what the followers
    appended (side "follower", `by` = "broker"); only partitions the charged broker throttles count,
    in-sync ones included, as Kafka counts them."""
    if records.empty or not replication_quota.active(cfg):
        return quota
    who = records[by].to_numpy()
    thr = replication_quota.is_throttled(cfg, side, records["topic"], records["partition"], who)
    if not thr.any():
        return quota
    return replication_quota.record(quota, side, who[thr], record_bytes(records[thr]), now, cfg)


def touch_quota(quota: pd.DataFrame, side: str, requests: pd.DataFrame, now: int, cfg: RoundSettings) -> pd.DataFrame:
    """Start the sensors the round's fetch requests reach (replication_quota.touch): the leader's (side
    "leader", the requests it serves) and the follower's (side "follower", the requests it sent), for the
    throttled partitions in them. Kafka records every follower fetch of a throttled partition, 0 bytes
    too (KafkaApis on the leader, ReplicaFetcherThread.processPartitionData on the follower), which
    creates the sensor's first sample: the window runs from the first fetch after the throttle is set."""
    if requests.empty or not replication_quota.active(cfg):
        return quota
    who = requests["broker" if side == "leader" else "src"].to_numpy()
    thr = replication_quota.is_throttled(cfg, side, requests["topic"], requests["partition"], who)
    return replication_quota.touch(quota, side, who[thr], now, cfg) if thr.any() else quota


def _truncate_diverging(r: pd.DataFrame, pos: np.ndarray, resp: pd.DataFrame, rules: Rules
                        ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """AbstractFetcherThread.truncateOnFetchResponse: the KIP-279 arithmetic on the DivergingEpoch."""
    offs = [leader_epoch.truncation_offset(leader_epoch.decode(r.at[p, "epoch_cache"]), int(r.at[p, "leo"]),
                                           int(r.at[p, "hw"]), (int(e), int(o)), rules)[0]
            for p, e, o in zip(pos, resp["diverging_epoch"], resp["diverging_end_offset"], strict=True)]
    return truncate(r, pos, np.asarray(offs, dtype="int64"))


def out_of_range_recovery(r: pd.DataFrame, pos: np.ndarray, resp: pd.DataFrame, cfg: RoundSettings
                          ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """AbstractFetcherThread.fetchOffsetAndTruncate, with the
    leader's LEO and log start as its ListOffsets answers would give them (the response's snapshot).

    Leader LEO below the follower's: truncate to it, except before 2.1 (KAFKA-7414) on a topic with
    unclean election disabled, where the broker exits ("log truncation is not allowed"). Leader log
    start above the follower's LEO: the log is emptied and restarts at the leader's log start."""
    leader_leo = array(resp, "leo")
    leader_ls = array(resp, "log_start_offset")
    own = array(r, "leo")[pos]
    behind = leader_leo < own
    unclean = cfg.topic_unclean
    old = cfg.rules.halt_on_out_of_range_truncation  # KAFKA-7414
    halt = behind & old & ~np.array([bool(unclean.get(t, cfg.unclean_leader_election_enable))
                                     for t in resp["topic"]], dtype=bool)
    halts = _halts(r, pos[halt], leader_leo[halt], array(resp, "src")[halt])
    cut_pos = pos[behind & ~halt]
    r, cuts = truncate(r, cut_pos, leader_leo[behind & ~halt])
    reset = ~behind & (leader_ls > own)
    if reset.any():  # truncateFullyAndStartAt(leader log start)
        rp = pos[reset]
        r, c2 = truncate(r, rp, np.zeros(len(rp), dtype="int64"))
        for col in ("leo", "hw", "log_start_offset", "recovery_point"):
            r.loc[rp, col] = leader_ls[reset]
        cuts = pd.concat([cuts, c2], ignore_index=True)
    return r, cuts, halts


def _halts(r: pd.DataFrame, pos, leader_leo, leader) -> pd.DataFrame:
    """Brokers that exit, with ReplicaFetcherThread's FATAL line (0.10.2 handleOffsetOutOfRange)."""
    rows = [(int(r.at[p, "broker"]), r.at[p, "topic"], int(r.at[p, "partition"]),
             f"[ReplicaFetcherThread-0-{int(ld)}]: Exiting because log truncation is not allowed for partition "
             f"{r.at[p, 'topic']}-{int(r.at[p, 'partition'])}, current leader's latest offset {int(lo)} is less "
             f"than replica {int(r.at[p, 'broker'])}'s latest offset {int(r.at[p, 'leo'])}")
            for p, lo, ld in zip(pos, leader_leo, leader, strict=True)]
    return from_rows(rows, ["broker", "topic", "partition", "message"])


def trim_tail(tail: pd.DataFrame, replicas: pd.DataFrame, remotes: pd.DataFrame, cap: int, now: int,
              cfg: RoundSettings) -> pd.DataFrame:
    """Keep, per led partition, the records a fetching follower may still fetch: from the lowest LEO
    of the known followers that fetched within replica.fetch.wait.max.ms + replica.fetch.backoff.ms (one
    long-polled fetch and one error backoff), at most `cap` records back from the LEO. Older records
    are read from storage. The tail is only the leader's cache (the page cache, in Kafka): a follower
    that is down or cut off no longer holds records in it, or a broker crashed for 20 s would keep
    20 s of every partition it follows (the round's cost grows with the tail); once it fetches again,
    its first fetches read from storage, the same records."""
    if tail.empty:
        return tail
    leads = array(replicas, "leader") == array(replicas, "broker")
    floor = np.maximum(array(replicas, "leo").astype("int64") - cap, array(replicas, "log_start_offset"))
    remote_leo = array(remotes, "leo").astype("int64")
    low = np.full(len(replicas), np.iinfo("int64").max)
    at = locate(replicas, remotes)
    since = now - int(cfg.replica_fetch_wait_max_ms) - int(cfg.replica_fetch_backoff_ms)
    known = (at >= 0) & (remote_leo >= 0)
    # a known follower that stopped fetching holds nothing (the leader's LEO); one never heard of, `cap`
    held = np.where(array(remotes, "last_fetch_ms") >= since, remote_leo, array(replicas, "leo")[np.maximum(at, 0)])
    np.minimum.at(low, at[known], held[known])
    floor = np.maximum(floor, np.where(low == np.iinfo("int64").max, 0, low))
    pos = locate(replicas, tail)
    keep = (pos >= 0) & leads[np.maximum(pos, 0)] & (array(tail, "offset") >= floor[np.maximum(pos, 0)])
    return owned({c: array(tail, c)[keep] for c in RECORD}, RECORD)


def tail_misses(requests: pd.DataFrame, tail: pd.DataFrame, replicas: pd.DataFrame, max_records: int) -> pd.DataFrame:
    """Offset ranges [from_offset, to_offset) fetch requests need that the tail does not hold."""
    cols = ["broker", "topic", "partition", "from_offset", "to_offset"]
    if requests.empty:
        return from_rows([], cols)
    # the tail's first offset per replica row (none: the LEO)
    first = array(replicas, "leo").astype("int64")
    if len(tail):
        none = np.iinfo("int64").max
        start = np.full(len(replicas), none)
        at = locate(replicas, tail)
        np.minimum.at(start, at[at >= 0], array(tail, "offset").astype("int64")[at >= 0])
        first = np.where(start == none, first, start)
    pos = locate(replicas, requests)
    hosted = pos >= 0
    ts = first[pos[hosted]]
    need = array(requests, "fetch_offset")[hosted] < ts
    if not need.any():  # the common round: the tails hold every fetch (no frame built)
        return from_rows([], cols)
    q = requests.loc[hosted, ["broker", "topic", "partition", "fetch_offset"]]
    q = q[need].assign(from_offset=lambda d: d["fetch_offset"], to_offset=ts[need])
    q["to_offset"] = np.minimum(q["to_offset"], q["from_offset"] + max_records)
    return q.groupby(["broker", "topic", "partition"], as_index=False).agg(
        from_offset=("from_offset", "min"), to_offset=("to_offset", "max"))[cols]
