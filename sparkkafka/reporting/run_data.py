"""What the report reads from a run directory: its tables through delta-rs (no Spark) and run.json.

``load_run`` returns plain pandas frames (``RunData``); the plots (``plots.py``) are pure functions of
them. What each frame holds:

* ``metrics``: the ``metrics`` table, one row per round (the report's time axis);
* ``partition_state``: the metadata history (leader, ISR, replicas, KIP-455 adding/removing);
* ``leader_rows``: ``replica_state`` rows of replicas that were leaders (LEO and HW per round);
* ``copied``: the ``log`` rows a broker appended while it was not the partition's leader (ZooKeeper's
  leader at the round of ``append_ms``): the bytes replica fetchers moved, ``fetch.record_bytes`` each (the
  bytes the KIP-73 quota counts). Rows truncated or deleted since (an old replica after a move) are gone
  from the table, so they are not counted; future logs (KIP-113 moves inside a broker) are left out;
* ``config_lines``: the ``Processing override for entityPath: ...`` lines (the dynamic configs' history);
* ``disk_before`` / ``disk_after``: bytes per (broker, log_dir) in the ``log`` table at the Delta version
  in effect just before ``before_ms`` and now, sized as kafka-log-dirs is here (tools/operator.py).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow.compute as pc
from deltalake import DeltaTable

from ..errors import ScenarioError
from ..protocol.fetch import record_bytes
from ..storage.tables import checkpoint_round, checkpoint_versions, loadable_versions, read_table, table_path

OVERRIDE_PREFIX = "Processing override for entityPath: "
SIZE_COLUMNS = ["broker", "log_dir", "key", "value_bytes"]


@dataclass
class RunData:
    run_dir: str
    meta: dict
    summary: dict
    metrics: pd.DataFrame
    partition_state: pd.DataFrame
    leader_rows: pd.DataFrame
    copied: pd.DataFrame
    config_lines: pd.DataFrame
    before_ms: int
    disk_before: pd.DataFrame
    disk_after: pd.DataFrame

    @property
    def round_ms(self) -> int:
        return int(self.meta.get("round_ms") or 100)


def require_run(run_dir: str) -> None:
    """A run directory has run.json and its tables (ScenarioError naming the path otherwise)."""
    if not os.path.isdir(run_dir) or not os.path.exists(os.path.join(run_dir, "run.json")):
        raise ScenarioError("run", run_dir, "is not a sparkkafka run directory (no run.json)")
    if not os.path.isdir(os.path.join(run_dir, "tables", "metrics")):
        raise ScenarioError("run", run_dir, "has no tables (tables/metrics is missing)")


def sort_partition_state(ps: pd.DataFrame) -> pd.DataFrame:
    """Metadata rows in the order they were written: time, znode version, leader epoch; of rows alike in
    those, a reassignment's step with adding/removing replicas before the one that completes it."""
    if ps.empty:
        return ps.reset_index(drop=True)
    moving = ps["adding"].map(len) + ps["removing"].map(len)
    return (ps.assign(_moving=-moving).sort_values(["time_ms", "version", "leader_epoch", "_moving"], kind="stable")
            .drop(columns="_moving").reset_index(drop=True))


def default_before_ms(ps: pd.DataFrame) -> int:
    """When "before" is, unless given: the first reassignment's start (a row with adding replicas), else the
    first metadata change after a partition was created (version > 0), else the run's start."""
    if ps.empty:
        return 0
    moving = ps[ps["adding"].map(len) > 0]
    if len(moving):
        return int(moving["time_ms"].min())
    changed = ps[ps["version"] > 0]
    return int(changed["time_ms"].min()) if len(changed) else 0


def leaders_at(ps: pd.DataFrame, keys: pd.DataFrame, time_col: str) -> np.ndarray:
    """ZooKeeper's leader of each row of `keys` (topic, partition, `time_col`) as of that time (-3: the
    partition had no metadata yet)."""
    out = np.full(len(keys), -3, dtype="int64")
    if ps.empty or keys.empty:
        return out
    left = keys[["topic", "partition", time_col]].assign(_i=np.arange(len(keys)))
    left = left.assign(_t=left[time_col].astype("int64")).sort_values("_t", kind="stable")
    right = ps[["topic", "partition", "time_ms", "leader"]].assign(_t=ps["time_ms"].astype("int64"))
    m = pd.merge_asof(left, right.sort_values("_t", kind="stable").drop(columns="time_ms"), on="_t",
                      by=["topic", "partition"], direction="backward")
    out[m["_i"].to_numpy()] = m["leader"].fillna(-3).astype("int64").to_numpy()
    return out


def disk_usage(log: pd.DataFrame, brokers: list[int], log_dirs: list[str]) -> pd.DataFrame:
    """Bytes per (broker, log_dir) of `log` rows, every configured dir listed (0 when empty)."""
    grid = pd.MultiIndex.from_product([[int(b) for b in brokers], [str(d) for d in log_dirs]],
                                      names=["broker", "log_dir"])
    if len(log):
        sizes = log.assign(bytes=record_bytes(log)).groupby(["broker", "log_dir"])["bytes"].sum()
        sizes.index = sizes.index.set_levels(sizes.index.levels[0].astype(int), level=0)
        grid = grid.union(sizes.index)
    else:
        sizes = pd.Series(dtype="int64")
    return sizes.reindex(grid, fill_value=0).astype("int64").rename("bytes").reset_index()


def log_version_before(tables_dir: str, before_round: int) -> tuple[int, int | None]:
    """The newest version of the log table committed before round `before_round` started, among the
    versions that still load (storage/tables.loadable_versions: a long run's older history keeps one
    checkpoint per emulator delta.log.retention.commits versions). Commits carry the round they end
    (``sparkkafka.round``, in commitInfo.tags when Delta's JVM writer made them); a commit without one (create, compaction) changes no content and counts as
    the round of the commit before it; a checkpoint's round is its app transaction's. Returns the
    version and, when the thinned history moved the picture off `before_round`, the round it ends
    (None otherwise)."""
    path = table_path(tables_dir, "log")
    loadable = set(loadable_versions(tables_dir, "log"))
    points = loadable & set(checkpoint_versions(tables_dir, "log"))
    rounds: dict[int, int | None] = {v: checkpoint_round(tables_dir, "log", v) for v in points}
    current = None
    for h in sorted(DeltaTable(path).history(), key=lambda h: h["version"]):
        v = int(h["version"])
        if v not in loadable:
            continue
        tag = h.get("sparkkafka.round") or (h.get("tags") or {}).get("sparkkafka.round")  # delta-rs, delta-spark
        current = int(tag) if tag is not None else rounds.get(v, current)
        rounds[v] = current
    before = [v for v in sorted(loadable) if rounds.get(v) is None or rounds[v] < before_round]
    best = before[-1] if before else min(loadable)
    # versions after `best` are gone up to the next that loads: one of them may have ended before before_round
    gap = best + 1 not in loadable and best < max(loadable)
    moved = not before or (gap and rounds.get(best) is not None and rounds[best] < before_round - 1)
    return best, (rounds.get(best) if moved else None)


def _log_at(tables_dir: str, columns: list[str], version: int | None = None) -> pd.DataFrame:
    return DeltaTable(table_path(tables_dir, "log"), version=version).to_pyarrow_dataset().to_table(
        columns=columns).to_pandas()


def load_run(run_dir: str, before_ms: int | None = None) -> RunData:
    """Read what the report plots from a run directory (ScenarioError when it is not one)."""
    require_run(run_dir)
    tables = os.path.join(run_dir, "tables")
    with open(os.path.join(run_dir, "run.json")) as f:
        meta = json.load(f)
    summary = {}
    if os.path.exists(os.path.join(run_dir, "summary.json")):
        with open(os.path.join(run_dir, "summary.json")) as f:
            summary = json.load(f)
    round_ms = int(meta.get("round_ms") or 100)
    metrics = read_table(tables, "metrics").to_pandas().sort_values("round", kind="stable").reset_index(drop=True)
    ps = sort_partition_state(read_table(tables, "partition_state").to_pandas())

    rs = DeltaTable(table_path(tables, "replica_state")).to_pyarrow_dataset()
    leader_rows = rs.to_table(columns=["round", "time_ms", "broker", "topic", "partition", "leo", "hw"],
                              filter=pc.field("role") == "leader").to_pandas()

    log = _log_at(tables, [*SIZE_COLUMNS, "topic", "partition", "append_ms", "is_future"])
    current = log[~log["is_future"].astype(bool)]
    lead = leaders_at(ps, current.assign(_t=(current["append_ms"] // round_ms) * round_ms), "_t")
    copied = current[lead != current["broker"].to_numpy()]
    copied = copied[["broker", "topic", "partition", "append_ms"]].assign(bytes=record_bytes(copied) if len(copied)
                                                                          else np.zeros(0, "int64"))

    scl = read_table(tables, "state_change_log").to_pandas()
    config_lines = scl[scl["message"].str.startswith(OVERRIDE_PREFIX, na=False)][["time_ms", "message"]]
    config_lines = config_lines.sort_values("time_ms", kind="stable").reset_index(drop=True)

    brokers = [int(b) for b in meta.get("brokers", [])]
    dirs = [str(d) for d in meta.get("log_dirs", [])]
    before = default_before_ms(ps) if before_ms is None else int(before_ms)
    version, ended = log_version_before(tables, before // round_ms)
    if ended is not None:  # the thinned history's nearest checkpoint: label the picture with its time
        before = (ended + 1) * round_ms
    disk_before = disk_usage(_log_at(tables, SIZE_COLUMNS, version), brokers, dirs)
    disk_after = disk_usage(log[SIZE_COLUMNS], brokers, dirs)
    return RunData(run_dir=run_dir, meta=meta, summary=summary, metrics=metrics, partition_state=ps,
                   leader_rows=leader_rows, copied=copied.reset_index(drop=True), config_lines=config_lines,
                   before_ms=before, disk_before=disk_before, disk_after=disk_after)
