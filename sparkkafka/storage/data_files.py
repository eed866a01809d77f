"""The run's table schemas and how one Parquet data file of a table is written (its name, its Hive-style
partition folders, its Delta statistics). tables.py commits these files; compaction.py rewrites them: both
build on this module, so neither imports the other for it."""

from __future__ import annotations

import itertools
import json
import os
import time
import uuid
from collections.abc import Mapping
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

LIST = pa.list_(pa.int32())

SCHEMAS: dict[str, pa.Schema] = {
    "log": pa.schema([
        ("broker", pa.int32()), ("log_dir", pa.string()), ("topic", pa.string()), ("partition", pa.int32()),
        ("offset", pa.int64()), ("leader_epoch", pa.int32()), ("record_id", pa.int64()),
        ("key", pa.string()), ("value", pa.binary()), ("value_bytes", pa.int32()), ("timestamp", pa.int64()),
        ("is_future", pa.bool_()), ("append_ms", pa.int64()),  # when this replica appended it (emulated)
    ]),
    "replica_state": pa.schema([
        ("round", pa.int64()), ("time_ms", pa.int64()), ("broker", pa.int32()), ("topic", pa.string()),
        ("partition", pa.int32()), ("log_dir", pa.string()), ("role", pa.string()), ("leader", pa.int32()),
        ("leo", pa.int64()), ("hw", pa.int64()), ("log_start_offset", pa.int64()), ("leader_epoch", pa.int32()),
    ]),
    "follower_state": pa.schema([
        ("round", pa.int64()), ("time_ms", pa.int64()), ("broker", pa.int32()), ("topic", pa.string()),
        ("partition", pa.int32()), ("replica", pa.int32()), ("remote_leo", pa.int64()),
        ("last_caught_up_ms", pa.int64()), ("in_isr", pa.bool_()),
    ]),
    "partition_state": pa.schema([
        ("time_ms", pa.int64()), ("topic", pa.string()), ("partition", pa.int32()), ("leader", pa.int32()),
        ("isr", LIST), ("replicas", LIST), ("leader_epoch", pa.int32()), ("controller_epoch", pa.int32()),
        ("version", pa.int32()),
        ("adding", LIST), ("removing", LIST),  # KIP-455: replicas being added / removed by a reassignment
    ]),
    "state_change_log": pa.schema([
        ("time_ms", pa.int64()), ("broker", pa.int32()), ("controller_epoch", pa.int32()),
        ("topic", pa.string()), ("partition", pa.int32()), ("message", pa.string()),
    ]),
    "produce_results": pa.schema([
        ("time_ms", pa.int64()), ("topic", pa.string()), ("partition", pa.int32()), ("record_id", pa.int64()),
        ("acks", pa.int32()), ("offset", pa.int64()), ("error", pa.string()), ("acked", pa.bool_()),
    ]),
    "metrics": pa.schema([
        ("round", pa.int64()), ("time_ms", pa.int64()), ("under_replicated", pa.int32()), ("offline", pa.int32()),
        ("under_min_isr", pa.int32()), ("isr_shrinks", pa.int32()), ("isr_expands", pa.int32()),
        ("unclean_elections", pa.int32()), ("active_controller", pa.int32()), ("controller_epoch", pa.int32()),
        ("live_brokers", pa.int32()),
    ]),
    # written once at the end of Cluster.run() by the durability checker (scenario/checker.py)
    "violations": pa.schema([
        ("round", pa.int64()), ("time_ms", pa.int64()), ("kind", pa.string()), ("topic", pa.string()),
        ("partition", pa.int32()), ("brokers", LIST), ("offset", pa.int64()), ("record_id", pa.int64()),
        ("detail", pa.string()),
    ]),
}
PARTITION_BY: dict[str, list[str]] = {"log": ["broker", "log_dir"]}


def table_path(tables_dir: str, name: str) -> str:
    return os.path.join(tables_dir, name)


def path_component(name: str) -> str:
    """`name` as one safe file-name component: urllib.parse.quote(name, safe="") (every byte of its UTF-8 but
    ASCII letters, digits and `_.-~` as `%XX`, as delta-rs names partition folders, so `/`, `%`, spaces and
    glob characters never reach a path), a name of dots only (`.`, `..`) fully escaped. Distinct names give
    distinct components; urllib.parse.unquote gives `name` back (Spark's partition discovery decodes each
    `%XX` as one Latin-1 character: run_views.read_table_df undoes that for non-ASCII names)."""
    out = quote(name, safe="")
    return "%2E" * len(name) if out and set(out) == {"."} else out


def _stats(table: pa.Table, footer: pq.FileMetaData | None = None) -> str:
    """Delta file statistics (numRecords, min/max and null counts of primitive columns). The min/max of a
    column come from the statistics the Parquet writer kept in `footer` (the file's metadata), combined
    over its row groups; computed only for a column the footer has none for. pc.min_max over a window's
    990,000-row replica_state file costs ~38 ms, reading the footer ~0.02 ms."""
    kept = _footer_min_max(footer) if footer is not None else {}
    mins, maxs, nulls = {}, {}, {}
    for name, col in zip(table.column_names, table.columns, strict=True):
        t = col.type
        nulls[name] = col.null_count
        if (pa.types.is_integer(t) or pa.types.is_string(t)) and len(col) > col.null_count:
            if name in kept:
                mins[name], maxs[name] = kept[name]
            else:
                mm = pc.min_max(col)
                mins[name], maxs[name] = mm["min"].as_py(), mm["max"].as_py()
    return json.dumps({"numRecords": table.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls})


def _footer_min_max(footer: pq.FileMetaData) -> dict[str, tuple]:
    """(min, max) per top-level column whose every row group has them in the Parquet footer (integers
    as ints, strings as str: the values pc.min_max gives). A column with a row group lacking them (all
    null there, or a value longer than the writer keeps statistics for) is left out."""
    out: dict[str, tuple] = {}
    missing: set[str] = set()
    for g in range(footer.num_row_groups):
        rg = footer.row_group(g)
        for i in range(rg.num_columns):
            c = rg.column(i)
            name, s = c.path_in_schema, c.statistics
            if "." in name or name in missing:
                continue
            if s is None or not s.has_min_max:
                missing.add(name)
                out.pop(name, None)
                continue
            lo, hi = s.min, s.max
            if name in out:
                lo, hi = min(out[name][0], lo), max(out[name][1], hi)
            out[name] = (lo, hi)
    return out


# temporary names: <path>.<this process's random token><a counter>.tmp, unique across processes and hosts
# (a uuid4 per file cost settle ~6 us a file, a 1M-replica run's ~1M leader-epoch checkpoints); a forked
# process (PySpark's workers fork from a daemon) draws a token of its own
_TOKEN = uuid.uuid4().hex[:16]
_TMP_SEQ = itertools.count()


def _new_token() -> None:
    global _TOKEN
    _TOKEN = uuid.uuid4().hex[:16]


if hasattr(os, "register_at_fork"):  # POSIX only; where there is no fork there are no forked workers
    os.register_at_fork(after_in_child=_new_token)


def _tmp_name(path: str) -> str:
    """A new temporary name beside `path` (written there, then renamed over it)."""
    return f"{path}.{_TOKEN}{next(_TMP_SEQ)}.tmp"


def write_file(tables_dir: str, name: str, table: pa.Table, tag: str,
               partition_values: Mapping[str, object] | None = None) -> dict:
    """Write one Parquet data file of table `name` and return its add action as a plain dict.

    The file name carries `tag` (round and writer), so a retried task rewrites the same file
    instead of leaving a second copy. Partition columns are kept out of the file, as Delta does.
    """
    part = partition_values or {}
    # Hive-style `key=value` folders, the value escaped (a log dir such as /var/kafka/d0 stays one folder)
    rel_dir = "/".join(f"{k}={path_component(str(v))}" for k, v in part.items())
    fname = f"part-{tag}.parquet"
    rel = f"{rel_dir}/{fname}" if rel_dir else fname
    full = os.path.join(table_path(tables_dir, name), rel)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    data = table.drop_columns([c for c in part if c in table.column_names])
    tmp = _tmp_name(full)
    footer: list[pq.FileMetaData] = []
    pq.write_table(data, tmp, compression="snappy", use_dictionary=_dictionary_columns(data.schema),
                   metadata_collector=footer)
    os.replace(tmp, full)  # not fsynced: neither is the Delta commit that makes it live (docs/run-directory.md)
    return {"table": name, "path": rel, "size": os.path.getsize(full),
            "partition_values": {k: str(v) for k, v in part.items()},
            "modification_time": int(time.time() * 1000), "stats": _stats(data, footer[0])}


def _dictionary_columns(schema: pa.Schema) -> list[str]:
    """The columns worth Parquet's dictionary encoding: the strings (a topic, a log dir, a role: a few
    values over many rows), not a record's binary value. pyarrow's default also tries it on every
    integer column, where offsets, record ids and times are nearly all distinct, before it falls back:
    over a third of the time of writing a window's log file (300,000 rows: ~61 -> ~39 ms), for a file
    ~12% larger."""
    return [f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
