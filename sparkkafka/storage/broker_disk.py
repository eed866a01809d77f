"""What survives a broker crash besides its Delta log: the per-log-dir files Kafka keeps.

Under OUT/brokers/<id>/<log_dir>/:
- `replication-offset-checkpoint`: the HW of every log in the dir, in Kafka's text layout
  (version line `0`, entry count, then `topic partition offset`), rewritten every
  replica.high.watermark.checkpoint.interval.ms (LogManager / ReplicaManager).
- `partitions`: the logs that exist in the dir (Kafka sees them as `<topic>-<p>` directories),
  rewritten whenever a log is created, so an empty log is found again after a restart.
Also, executor-side reads of a broker's log from a pinned Delta snapshot (restart recovery and
catch-up reads for lagging followers).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from deltalake import DeltaTable

from .tables import table_path

HW_CHECKPOINT = "replication-offset-checkpoint"
PARTITIONS = "partitions"


def dir_path(brokers_dir: str, broker: int, log_dir: str) -> str:
    return os.path.join(brokers_dir, str(int(broker)), log_dir)


def _write_atomic(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def format_checkpoint(entries: Iterable[tuple[str, int, int]]) -> str:
    """Kafka's OffsetCheckpointFile text: version 0, count, then `topic partition offset` lines."""
    rows = sorted(entries)
    return "0\n" + f"{len(rows)}\n" + "".join(f"{t} {p} {o}\n" for t, p, o in rows)


def parse_checkpoint(text: str) -> list[tuple[str, int, int]]:
    lines = text.splitlines()
    if not lines or lines[0].strip() != "0":
        raise ValueError(f"unrecognised checkpoint version: {lines[:1]}")
    n = int(lines[1])
    out = []
    for line in lines[2:2 + n]:
        t, p, o = line.rsplit(" ", 2)
        out.append((t, int(p), int(o)))
    return out


def write_hw_checkpoint(brokers_dir: str, broker: int, log_dir: str, entries: Iterable[tuple[str, int, int]]) -> None:
    _write_atomic(os.path.join(dir_path(brokers_dir, broker, log_dir), HW_CHECKPOINT), format_checkpoint(entries))


def write_partitions(brokers_dir: str, broker: int, log_dir: str, parts: Iterable[tuple[str, int]]) -> None:
    _write_atomic(os.path.join(dir_path(brokers_dir, broker, log_dir), PARTITIONS),
                  "".join(f"{t} {p}\n" for t, p in sorted(parts)))


def read_disk(brokers_dir: str, broker: int, log_dirs: list[str]) -> pd.DataFrame:
    """Logs a starting broker finds in its dirs, with their checkpointed HW (0 when missing)."""
    rows = []
    for d in log_dirs:
        base = dir_path(brokers_dir, broker, d)
        hw = {}
        ck = os.path.join(base, HW_CHECKPOINT)
        if os.path.exists(ck):
            with open(ck) as f:
                hw = {(t, p): o for t, p, o in parse_checkpoint(f.read())}
        pf = os.path.join(base, PARTITIONS)
        if os.path.exists(pf):
            with open(pf) as f:
                for line in f:
                    if line.strip():
                        t, p = line.rsplit(" ", 1)
                        rows.append((int(broker), t, int(p), d, hw.get((t, int(p)), 0)))
    return pd.DataFrame(rows, columns=["broker", "topic", "partition", "log_dir", "hw"])


def read_log(tables_dir: str, version: int, broker: int, columns: list[str],
             ranges: pd.DataFrame | None = None) -> pa.Table:
    """Rows of one broker's log at a committed Delta version.

    `ranges` (topic, partition, from_offset, to_offset) limits the read to those offset ranges.
    Files are pruned by partition values, then read with pyarrow (the fast path measured in the
    engine notes); log_dir comes from the file path, as Delta keeps partition values out of files.
    """
    dt = DeltaTable(table_path(tables_dir, "log"), version=version)
    uris = dt.file_uris(partition_filters=[("broker", "=", str(int(broker)))])
    want = [c for c in columns if c not in ("broker", "log_dir")]
    if not uris:
        return pa.table({c: pa.array([], type=_type(c)) for c in columns})
    parts = []
    filt = None
    if ranges is not None and len(ranges):
        topics = pc.field("topic").isin(pa.array(sorted(set(ranges["topic"]))))
        filt = topics & (pc.field("offset") >= int(ranges["from_offset"].min()))
    for uri in uris:
        path = uri.removeprefix("file://")
        log_dir = path.split("/log_dir=")[1].split("/")[0]
        t = ds.dataset(path, format="parquet").to_table(columns=want, filter=filt)
        if t.num_rows:
            parts.append(t.append_column("log_dir", pa.array([log_dir] * t.num_rows, pa.string())))
    if not parts:
        return pa.table({c: pa.array([], type=_type(c)) for c in columns})
    tab = pa.concat_tables(parts)
    tab = tab.append_column("broker", pa.array([int(broker)] * tab.num_rows, pa.int32()))
    if ranges is not None and len(ranges):
        df = tab.to_pandas().merge(ranges, on=["topic", "partition"])
        df = df[(df["offset"] >= df["from_offset"]) & (df["offset"] < df["to_offset"])]
        return pa.Table.from_pandas(df[columns], preserve_index=False)
    return tab.select(columns)


def _type(col: str) -> pa.DataType:
    from .tables import SCHEMAS

    return SCHEMAS["log"].field(col).type
