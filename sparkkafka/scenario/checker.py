"""The durability checker: what a run did to acknowledged records, from its tables alone.

Vocabulary from Jepsen and the TLA+ specs: a *lost* record was acknowledged to its producer and is
absent from its partition's committed log (the leader's log below its HW at the end); replicas
are *divergent* when two of them hold different records at the same offset below both HWs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..protocol.consumer import visible_records
from ..storage import tables as T


def final_replicas(tables_dir: str) -> pd.DataFrame:
    rs = T.read_table(tables_dir, "replica_state").to_pandas()
    if rs.empty:
        return rs
    last = rs["round"].max()
    return rs[rs["round"] == last]


def check(tables_dir: str, meta: dict) -> dict:
    """The summary of a run (OUT/summary.json and Cluster.summary())."""
    results = T.read_table(tables_dir, "produce_results").to_pandas()
    log = T.read_table(tables_dir, "log").to_pandas()
    log = log[~log["is_future"]] if len(log) else log
    reps = final_replicas(tables_dir)
    from ..cluster import latest_partitions

    parts = latest_partitions(tables_dir)
    live = set(meta.get("live_brokers", []))
    offline = parts[~parts["leader"].isin(list(live))] if len(parts) else parts
    under = parts[[len(i) < len(r) for i, r in zip(parts["isr"], parts["replicas"], strict=True)]] if len(parts) else parts

    acked = results[results["acked"]] if len(results) else results
    errors = results["error"].dropna().value_counts().sort_index().to_dict() if len(results) else {}
    lost = unavailable = 0
    divergent = 0
    if len(reps):
        committed = visible_records(log, reps)[["topic", "partition", "record_id"]].assign(_in=True)
        a = acked[["topic", "partition", "record_id"]].merge(committed, how="left", on=["topic", "partition", "record_id"])
        off = (a.merge(offline[["topic", "partition"]].assign(_off=True), how="left", on=["topic", "partition"])
               ["_off"].notna().to_numpy() if len(offline) else np.zeros(len(a), bool))
        unavailable = int(off.sum())
        lost = int((~off & a["_in"].isna().to_numpy()).sum())
        # divergence: any two replicas disagreeing below both HWs
        hw = reps[["topic", "partition", "broker", "hw"]]
        lg = log.merge(hw, on=["topic", "partition", "broker"])
        lg = lg[lg["offset"] < lg["hw"]][["topic", "partition", "broker", "offset", "record_id", "hw"]]
        pair = lg.merge(lg, on=["topic", "partition", "offset"], suffixes=("", "_o"))
        pair = pair[(pair["broker"] < pair["broker_o"]) & (pair["record_id"] != pair["record_id_o"])]
        divergent = int(len(set(zip(pair["topic"], pair["partition"], pair["broker"], pair["broker_o"], strict=True))))
    return {
        "scenario": meta.get("scenario"), "seed": meta.get("seed"),
        "rounds": int(meta.get("round", 0)), "time_ms": int(meta.get("time_ms", 0)),
        "produced": int(len(results)), "acked": int(len(acked)),
        "not_acked": int(len(results) - len(acked)), "errors": {k: int(v) for k, v in errors.items()},
        "lost_acked": int(lost), "unavailable_acked": int(unavailable), "divergent_replicas": divergent,
        "offline_partitions": int(len(offline)), "under_replicated_partitions": int(len(under)),
        "log_records": int(len(log)),
    }
