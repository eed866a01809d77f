"""Mid-run compaction of the run's Delta tables (Delta's auto compaction: round 10,000 costs
what round 100 does, docs/benchmarks.md "Long runs").

Every round (or resident window) adds small files: one log file per (broker, log_dir), history files per
task. Left alone, a table's live file list grows with the run, and so does everything that walks it:
each Delta checkpoint (it rewrites every live add action), every reader's `get_add_actions`, the
executors' log reads, the end-of-run compaction and audit. Delta's answer is auto compaction
(Databricks' `spark.databricks.delta.autoCompact.minNumFiles`, 50): once a partition holds that many
small files, fold them into one. Here the folding is tiered, as an LSM tree's: files a round wrote are
tier 0; `min_files` files of tier t in one partition (a (broker, log_dir) of `log`, the whole table for
the others) become one file of tier t + 1 (named `part-c<t+1>-...`). A row is rewritten about
log_min_files(rounds) times in a run, so a compaction's cost does not grow with the run, and a
partition keeps fewer than min_files files per tier.

A compaction is one Delta commit of adds and removes with dataChange = false: the table's rows are
unchanged (only its file layout), the run's app-transaction version is untouched (a retried round is
still refused), and readers pinned to a version (the resident tasks' cached add actions) keep reading
that version's files, which stay on disk. It runs on the driver right after a commit, between Spark
jobs, when no task is writing; `skip` names partitions it must leave alone all the same.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import defaultdict
from collections.abc import Collection
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from .data_files import PARTITION_BY, SCHEMAS, table_path, write_file

_TIER = re.compile(r"part-c(\d+)-")


def tier_of(path: str) -> int:
    """A data file's compaction tier: 0 for a file a round wrote, t for one `compact` made from tier t - 1."""
    m = _TIER.match(os.path.basename(path))
    return int(m.group(1)) if m else 0


def plan(actions: pa.Table, partition_by: list[str], min_files: int,
         skip: Collection[tuple[str, ...]] = ()) -> list[tuple[dict[str, str], int, list[tuple[str, int]]]]:
    """The folds to make over a table's live add actions (get_add_actions(flatten=True)): per partition
    (values as strings, in `partition_by` order) and tier with at least `min_files` files, those files
    as (raw relative path, size), sorted by path (rounds' files carry their round first: run order).
    Partitions in `skip` (tuples of partition values) are left alone."""
    groups: dict[tuple[tuple[str, ...], int], list[tuple[str, int]]] = defaultdict(list)
    cols = [actions[f"partition.{c}"].to_pylist() for c in partition_by]
    for i, (path, size) in enumerate(zip(actions["path"].to_pylist(), actions["size_bytes"].to_pylist(),
                                         strict=True)):
        key = tuple(str(c[i]) for c in cols)
        if key not in skip:
            raw = unquote(path)
            groups[(key, tier_of(raw))].append((raw, int(size)))
    return [(dict(zip(partition_by, key, strict=True)), tier, sorted(files))
            for (key, tier), files in sorted(groups.items()) if len(files) >= min_files]


def fold(tables_dir: str, name: str, files: list[tuple[str, int]], partition_values: dict[str, str],
         tier: int) -> dict:
    """Write the rows of `files` (tier `tier`) as one tier + 1 file of table `name`; its add action (a
    write_file dict). The name derives from the files folded, so a retry writes the same file."""
    root = table_path(tables_dir, name)
    keep = [f for f in SCHEMAS[name] if f.name not in partition_values]
    schema = pa.schema(keep)
    data = pa.concat_tables([pq.ParquetFile(os.path.join(root, p)).read().select(schema.names).cast(schema)
                             for p, _ in files])
    digest = hashlib.sha1("\n".join(p for p, _ in files).encode()).hexdigest()[:16]
    return write_file(tables_dir, name, data, f"c{tier + 1}-{digest}", partition_values)


def compact(writer, name: str, min_files: int, skip: Collection[tuple[str, ...]] = ()) -> int:
    """Fold every partition's tiers of `min_files` or more files of table `name`, committed by `writer`
    (a TableWriter) as one rearrangement; returns the number of files removed (0: nothing to do).
    Repeats until no tier is full (a fold may fill the tier above)."""
    removed = 0
    while True:
        acts = pa.table(writer.table(name).get_add_actions(flatten=True))
        todo = plan(acts, PARTITION_BY.get(name, []), min_files, skip) if acts.num_rows else []
        if not todo:
            return removed
        adds, removes = [], []
        for pv, tier, files in todo:
            adds.append(fold(writer.tables_dir, name, files, pv, tier))
            removes += [{"table": name, "path": p, "partition_values": pv, "size": s} for p, s in files]
        writer.rearrange(name, adds, removes)
        removed += len(removes)
