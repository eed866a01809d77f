"""Delta commits outside a run's rounds: a table overwritten whole (the checker's ``violations``, a
campaign's results) and files added in one commit (an imported cluster's initial ``log``). The rounds'
commits are TableWriter's (tables.py); every Delta write of the package is in storage/ (tests/test_layers.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import AddAction, CommitProperties

from .data_files import PARTITION_BY, SCHEMAS, table_path


def overwrite(path: str, table: pa.Table, schema: pa.Schema | None = None,
              configuration: Mapping[str, str] | None = None, custom_metadata: Mapping[str, str] | None = None
              ) -> None:
    """Replace the rows of the Delta table at `path` by `table` (one commit). With `schema`, a missing table
    is created first (empty, with `configuration`), so the overwrite is its second version."""
    if schema is not None and not DeltaTable.is_deltatable(path):
        DeltaTable.create(path, schema, mode="ignore", configuration=dict(configuration or {}))
    props = CommitProperties(custom_metadata=dict(custom_metadata)) if custom_metadata is not None else None
    write_deltalake(path, table, mode="overwrite", commit_properties=props)


def append_files(tables_dir: str, name: str, adds: Iterable[Mapping], custom_metadata: Mapping[str, str]) -> None:
    """Commit data files written by data_files.write_file (their add actions) to table `name` in one append."""
    dt = DeltaTable(table_path(tables_dir, name))
    dt.create_write_transaction(
        [AddAction(a["path"], a["size"], a["partition_values"], a["modification_time"], True, a["stats"])
         for a in adds], mode="append", schema=SCHEMAS[name], partition_by=PARTITION_BY.get(name),
        commit_properties=CommitProperties(custom_metadata=dict(custom_metadata)))
