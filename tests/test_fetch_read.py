"""The leader's side of follower fetches on numpy positions against the pandas code they replaced: the
read (protocol/fetch._read) with the per-partition and per-response byte limits cutting, and the
remotes' update (fetch._update_followers). Pure: no Spark."""

import harness as H
import numpy as np
import pandas as pd
import pytest

from sparkkafka.protocol import fetch
from sparkkafka.protocol import frames as F

PART = ["_dst", "broker", "sent_ms", "topic", "partition"]


def _pandas_read(m, log, cfg):
    want = m.loc[(m["_err"] == "") & (m["_de"] < 0), fetch.REQUEST + ["topic", "partition", "fetch_offset", "leo"]]
    want = want.assign(_m=want.index)  # the row of m each record is read for (m is indexed 0..n-1)
    lg = log.drop(columns=["src"]).merge(want.rename(columns={"src": "_dst"}), on=["broker", "topic", "partition"])
    lg = lg[(lg["offset"] >= lg["fetch_offset"]) & (lg["offset"] < lg["leo"])]
    lg = lg.sort_values([*PART, "offset"], kind="stable")
    lg["_size"] = fetch.record_bytes(lg)
    lg = lg[lg.groupby(PART)["_size"].cumsum() - lg["_size"] < cfg.replica_fetch_max_bytes]
    per = lg.groupby(PART, as_index=False)["_size"].sum()
    per["_before"] = per.groupby(fetch.RESPONSE)["_size"].cumsum() - per["_size"]
    per = per[per["_before"] < cfg.replica_fetch_response_max_bytes]
    return lg.merge(per[PART], on=PART).drop(columns=["_size"])


def _case(seed: int, ordered: str = ""):
    """Fetches `m` of four followers and the leaders' `log`, both shuffled. `ordered` "log": the log holds
    each partition's records in offset order, as a round's does (the read then sorts only the requests);
    "both": the requests are sorted by follower, leader, sent_ms, topic and partition too (no sort)."""
    rng = np.random.default_rng(seed)
    parts = [(b, t, p) for b in range(3) for t in ("b", "a") for p in range(3)]
    log = pd.DataFrame([(b, -1, t, p, o, 1, o * 10 + b, int(rng.integers(0, 40)),
                         None if rng.random() < 0.3 else "k" * int(rng.integers(0, 5)), 0)
                        for b, t, p in parts for o in rng.permutation(8)], columns=list(F.RECORD))
    log = F.conform(log.sample(frac=1, random_state=seed), F.RECORD)
    rows = [(dst, b, sent, t, p, int(rng.integers(0, 9)), int(rng.integers(4, 9)))
            for dst in range(4) for sent in (5, 9) for b, t, p in parts if rng.random() < 0.4 and dst != b]
    m = pd.DataFrame(rows, columns=["src", "broker", "sent_ms", "topic", "partition", "fetch_offset", "leo"])
    m = m.astype({"src": "int32", "broker": "int32", "partition": "int32"}).sample(frac=1, random_state=seed)
    m = m.reset_index(drop=True).assign(_err=np.where(rng.random(len(m)) < 0.1, "E", ""),
                                        _de=np.where(rng.random(len(m)) < 0.1, 3, -1))
    if ordered:
        log = F.conform(log.sort_values(["broker", "topic", "partition", "offset"], kind="stable"), F.RECORD)
    if ordered == "both":
        m = m.sort_values(["src", "broker", "sent_ms", "topic", "partition"], kind="stable").reset_index(drop=True)
    return m, log


@pytest.mark.parametrize("ordered", ["", "log", "both"])
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("limits", [(10**6, 10**6), (50, 10**6), (1, 120), (60, 90), (0, 10**6)])
def test_read_matches_the_merge_and_groupby_it_replaced(seed, limits, ordered):
    m, log = _case(seed, ordered)
    cfg = H.settings(replica_fetch_max_bytes=limits[0], replica_fetch_response_max_bytes=limits[1])
    pd.testing.assert_frame_equal(fetch._read(m, log, cfg), _pandas_read(m, log, cfg), check_dtype=True)


def test_read_of_nothing_wanted_or_nothing_inside():
    m, log = _case(1)
    cfg = H.settings(replica_fetch_max_bytes=10**6, replica_fetch_response_max_bytes=10**6)
    outside = m.assign(fetch_offset=50, leo=60)
    pd.testing.assert_frame_equal(fetch._read(outside, log, cfg), _pandas_read(outside, log, cfg), check_dtype=True)
    empty = fetch._read(m.assign(_err="E"), log, cfg)
    assert empty.empty and {"sent_ms", "_dst"} <= set(empty.columns)


def _pandas_update_followers(remotes, ok, now):
    upd = ok[["broker", "topic", "partition", "src", "fetch_offset", "req_log_start", "leo"]].rename(
        columns={"src": "replica", "fetch_offset": "_f", "leo": "_lnow", "req_log_start": "_ls"})
    m = remotes.merge(upd, on=["broker", "topic", "partition", "replica"], how="left")
    hit = m["_f"].notna().to_numpy()
    if not hit.any():
        return remotes
    f = m["_f"].fillna(-1).to_numpy().astype("int64")
    lnow = m["_lnow"].fillna(-1).to_numpy().astype("int64")
    caught = m["last_caught_up_ms"].to_numpy()
    caught = np.where(hit & (f >= lnow), np.maximum(caught, now),
                      np.where(hit & (f >= m["last_fetch_leader_leo"].to_numpy()),
                               np.maximum(caught, m["last_fetch_ms"].to_numpy()), caught))
    m["last_caught_up_ms"] = caught
    m["leo"] = np.where(hit, f, m["leo"])
    m["log_start_offset"] = np.where(hit, m["_ls"].fillna(-1).to_numpy().astype("int64"), m["log_start_offset"])
    m["last_fetch_leader_leo"] = np.where(hit, lnow, m["last_fetch_leader_leo"])
    m["last_fetch_ms"] = np.where(hit, now, m["last_fetch_ms"])
    m["leo_changed_ms"] = np.where(hit, now, m["leo_changed_ms"])
    return F.conform(m, F.REMOTE)


@pytest.mark.parametrize("seed", range(4))
def test_update_followers_matches_the_left_merge_it_replaced(seed):
    rng = np.random.default_rng(seed)
    keys = [(b, t, p, r) for b in range(3) for t in ("b", "a") for p in range(2) for r in range(3) if r != b]
    remotes = F.conform(pd.DataFrame([(b, t, p, r, *rng.integers(-1, 20, 2), *rng.integers(-1, 100, 3),
                                       bool(rng.random() < 0.5), int(rng.integers(-1, 100)))
                                      for b, t, p, r in keys], columns=list(F.REMOTE)), F.REMOTE)
    pick = [k for k in keys if rng.random() < 0.5] + [(9, "a", 0, 1)]  # one fetch for a remote nobody has
    ok = pd.DataFrame([(b, t, p, r, *rng.integers(0, 20, 3)) for b, t, p, r in pick],
                      columns=["broker", "topic", "partition", "src", "fetch_offset", "req_log_start", "leo"])
    ok = ok.astype({"broker": "int32", "partition": "int32", "src": "int32"})
    got = fetch._update_followers(remotes, ok, 50)
    pd.testing.assert_frame_equal(got, _pandas_update_followers(remotes, ok, 50), check_dtype=True)
    assert fetch._update_followers(remotes, ok.iloc[:0], 50) is remotes
