"""Truncating replicas' logs in the `log` Delta table (Delta's Remove + Add actions,
written by hand through delta-rs).

A data file of `log` holds what one round appended to one (broker, log_dir): many (topic,
partition) ranges. Cutting a suffix of one replica (truncation to an offset) or its whole log
(offset 0, StopReplica with delete) therefore rewrites every file holding a cut row: the file is
removed and, unless nothing is left, replaced by a copy without the cut rows. `truncate` runs on
an executor against a pinned Delta version and returns plain-dict actions; the driver commits them
with `TableWriter.commit` (which converts the removes with `tables.remove_actions`, re-exported here).
"""

from __future__ import annotations

import hashlib
import os
import time
from urllib.parse import unquote

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .tables import LogSnapshot, files_overlapping, log_file_actions, remove_actions, table_path, write_file

KEYS = ["topic", "partition", "offset"]
def _cut_table(cuts: pd.DataFrame) -> pa.Table:
    """One row per (log_dir, topic, partition) with the lowest cut offset asked for it."""
    c = cuts.groupby(["log_dir", "topic", "partition"], as_index=False, sort=True)["offset"].min()
    return pa.table({
        "log_dir": pa.array(c["log_dir"].astype(str).tolist(), pa.string()),
        "topic": pa.array(c["topic"].astype(str).tolist(), pa.string()),
        "partition": pa.array(c["partition"].astype("int64").tolist(), pa.int32()),
        "cut": pa.array(c["offset"].astype("int64").tolist(), pa.int64()),
    })


def _file_actions(tables_dir: str, version: int | LogSnapshot, broker: int) -> pa.Table:
    """Live files of `broker` at `version`: their add actions, with the stats used to prune."""
    acts = log_file_actions(tables_dir, version)
    return acts.filter(pc.equal(acts["partition.broker"].cast(pa.int64()), int(broker)))


def _candidates(files: pa.Table, cut: pa.Table) -> dict[str, tuple[int, str]]:
    """Files whose stats say they may hold a cut row (a row at or above its partition's cut, in the
    cut's log dir): path -> (size, log_dir)."""
    out: dict[str, tuple[int, str]] = {}
    if not files.num_rows or not cut.num_rows:
        return out
    dirs = files["partition.log_dir"].to_numpy(zero_copy_only=False)
    for d in sorted(set(cut["log_dir"].to_pylist())):
        here, c = files.filter(pa.array(dirs == d)), cut.filter(pc.equal(cut["log_dir"], d))
        if not here.num_rows:
            continue
        may = here.filter(files_overlapping(here, {
            "topic": c["topic"].to_numpy(zero_copy_only=False), "partition": c["partition"].to_numpy(),
            "from_offset": c["cut"].to_numpy(), "to_offset": np.full(c.num_rows, np.iinfo(np.int64).max)}))
        out.update({p: (int(s), d) for p, s in zip(may["path"].to_pylist(), may["size_bytes"].to_pylist(), strict=True)})
    return out


_JOIN_ABOVE = 8  # more cuts in one log_dir than this: one hash join instead of a mask per cut


def _cut_rows(keys: pa.Table, cut: pa.Table) -> np.ndarray:
    """Boolean mask over `keys` (topic, partition, offset): rows at or above their replica's cut."""
    n = keys.num_rows
    mask = np.zeros(n, dtype=bool)
    if not n or not cut.num_rows:
        return mask
    if cut.num_rows <= _JOIN_ABOVE:
        for topic, part, off in zip(cut["topic"].to_pylist(), cut["partition"].to_pylist(),
                                    cut["cut"].to_pylist(), strict=True):
            m = pc.and_(pc.and_(pc.equal(keys["topic"], topic), pc.equal(keys["partition"], part)),
                        pc.greater_equal(keys["offset"], off))
            mask |= m.to_numpy(zero_copy_only=False)
        return mask
    k = pa.table({"topic": keys["topic"].cast(pa.string()), "partition": keys["partition"].cast(pa.int32()),
                  "offset": keys["offset"].cast(pa.int64()),
                  "__row": pa.array(np.arange(n, dtype=np.int64))})
    j = k.join(cut.select(["topic", "partition", "cut"]), keys=["topic", "partition"], join_type="inner")
    if j.num_rows:
        j = j.filter(pc.greater_equal(j["offset"], j["cut"]))
        mask[j["__row"].to_numpy()] = True
    return mask


def _new_tag(tag: str, path: str) -> str:
    """Deterministic name for the rewrite of `path` under `tag`: a retried task writes the same file."""
    return f"{tag}-x{hashlib.sha1(path.encode()).hexdigest()[:16]}"


def truncate(tables_dir: str, version: int | LogSnapshot, broker: int, cuts: pd.DataFrame,
             tag: str, flips: pd.DataFrame | None = None) -> tuple[list[dict], list[dict]]:
    """Drop every record of the given replicas of `broker` at or above a cut offset (executor side).

    `cuts` has columns topic, partition, log_dir, offset; a record of (topic, partition) in
    log_dir with offset >= offset goes (offset 0 deletes the replica's whole log). is_future rows
    are cut like any other row of their log_dir. Candidate files of (broker, log_dir) at the pinned
    `version` are found from the add actions' partition values and min/max stats; each is read once
    and, if it holds a cut row, rewritten without all its cut rows in one go.

    Returns (adds, removes) as plain dicts: an add (from `write_file`, file name derived from
    `tag` and the replaced file, so a retry rewrites the same file) for what remains of each
    rewritten file (none if nothing remains), and a remove {"table", "path", "partition_values",
    "size", "deletion_timestamp"} per rewritten file. `tag` should be unique per truncation
    (e.g. carry the round) so that its rewrites never collide with other files.

    `flips` (log_dir, topic, partition) name future logs that became current logs (a KIP-113 move's
    swap): their is_future rows in log_dir are rewritten with is_future = false, in the same pass as
    the cuts (a file is rewritten once, whatever it holds).
    """
    has_cuts = cuts is not None and len(cuts) > 0
    has_flips = flips is not None and len(flips) > 0
    if not has_cuts and not has_flips:
        return [], []
    cut = _cut_table(cuts) if has_cuts else _cut_table(pd.DataFrame(
        {"log_dir": [], "topic": [], "partition": [], "offset": []}))
    flip = _cut_table(flips.assign(offset=0)) if has_flips else cut.slice(0, 0)
    root = table_path(tables_dir, "log")
    cands = _candidates(_file_actions(tables_dir, version, broker), pa.concat_tables([cut, flip]))
    adds: list[dict] = []
    removes: list[dict] = []
    now = int(time.time() * 1000)
    dirs = {d for _, d in cands.values()}
    dir_cuts = {d: cut.filter(pc.equal(cut["log_dir"], d)) for d in dirs}
    dir_flips = {d: flip.filter(pc.equal(flip["log_dir"], d)) for d in dirs}
    for enc_path in sorted(cands):
        size, log_dir = cands[enc_path]
        path = unquote(enc_path)  # delta-rs returns the path URL-encoded; the log and disk hold it raw
        data = pq.read_table(os.path.join(root, path))
        drop = _cut_rows(data.select(KEYS), dir_cuts[log_dir])
        turn = np.zeros(len(drop), dtype=bool)
        if dir_flips[log_dir].num_rows and "is_future" in data.column_names:
            fut = data["is_future"].to_numpy(zero_copy_only=False)
            turn = _cut_rows(data.select(KEYS), dir_flips[log_dir]) & ~drop & (fut == True)  # noqa: E712
        if not drop.any() and not turn.any():
            continue  # stats overlapped but no row of a cut replica is in the file: leave it alone
        if turn.any():
            i = data.column_names.index("is_future")
            data = data.set_column(i, "is_future", pa.array(np.where(turn, False, fut), pa.bool_()))
        pv = {"broker": str(int(broker)), "log_dir": str(log_dir)}
        if not drop.all():
            rest = data.filter(pa.array(~drop))
            adds.append(write_file(tables_dir, "log", rest, _new_tag(tag, path),
                                   {"broker": int(broker), "log_dir": log_dir}))
        removes.append({"table": "log", "path": path, "partition_values": pv, "size": size,
                        "deletion_timestamp": now})
    return adds, removes


__all__ = ["remove_actions", "truncate"]
