"""What consumers see: a consumer fetch (read_uncommitted isolation) is served by the leader and
returns only records below the leader's high watermark (ReplicaManager
readFromLocalLog with FetchHighWatermark). The same rule defines a partition's committed log."""

from __future__ import annotations

import pandas as pd


def visible_records(log: pd.DataFrame, replicas: pd.DataFrame) -> pd.DataFrame:
    """Records of `log` (broker, topic, partition, offset ...) a consumer can read, given
    `replicas` (broker, topic, partition, role, hw): the leader's rows below its HW."""
    leaders = replicas.loc[replicas["role"] == "leader", ["broker", "topic", "partition", "hw"]]
    out = log.merge(leaders, on=["broker", "topic", "partition"])
    return out[out["offset"] < out["hw"]].drop(columns=["hw"]).sort_values(["topic", "partition", "offset"])
