"""The leader's read for follower fetches (protocol/fetch._read) against the merges and groupbys it
replaced, with the per-partition and per-response byte limits cutting. Pure: no Spark."""

import numpy as np
import pandas as pd
import pytest

from sparkkafka.protocol import fetch
from sparkkafka.protocol import frames as F

PART = ["_dst", "broker", "sent_ms", "topic", "partition"]


def _pandas_read(m, log, cfg):
    want = m.loc[(m["_err"] == "") & (m["_de"] < 0), fetch.REQUEST + ["topic", "partition", "fetch_offset", "leo"]]
    lg = log.drop(columns=["src"]).merge(want.rename(columns={"src": "_dst"}), on=["broker", "topic", "partition"])
    lg = lg[(lg["offset"] >= lg["fetch_offset"]) & (lg["offset"] < lg["leo"])]
    lg = lg.sort_values([*PART, "offset"], kind="stable")
    lg["_size"] = fetch.record_bytes(lg)
    lg = lg[lg.groupby(PART)["_size"].cumsum() - lg["_size"] < cfg["replica.fetch.max.bytes"]]
    per = lg.groupby(PART, as_index=False)["_size"].sum()
    per["_before"] = per.groupby(fetch.RESPONSE)["_size"].cumsum() - per["_size"]
    per = per[per["_before"] < cfg["replica.fetch.response.max.bytes"]]
    return lg.merge(per[PART], on=PART).drop(columns=["_size"])


def _case(seed: int):
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
    return m, log


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("limits", [(10**6, 10**6), (50, 10**6), (1, 120), (60, 90), (0, 10**6)])
def test_read_matches_the_merge_and_groupby_it_replaced(seed, limits):
    m, log = _case(seed)
    cfg = {"replica.fetch.max.bytes": limits[0], "replica.fetch.response.max.bytes": limits[1]}
    pd.testing.assert_frame_equal(fetch._read(m, log, cfg), _pandas_read(m, log, cfg), check_dtype=True)


def test_read_of_nothing_wanted_or_nothing_inside():
    m, log = _case(1)
    cfg = {"replica.fetch.max.bytes": 10**6, "replica.fetch.response.max.bytes": 10**6}
    outside = m.assign(fetch_offset=50, leo=60)
    pd.testing.assert_frame_equal(fetch._read(outside, log, cfg), _pandas_read(outside, log, cfg), check_dtype=True)
    empty = fetch._read(m.assign(_err="E"), log, cfg)
    assert empty.empty and {"sent_ms", "_dst"} <= set(empty.columns)
