"""What the scenario layer (its checker and an imported cluster's initial logs) uses of storage: reading a
run's tables, writing data files and committing them, and laying out a broker's log-dir files. scenario/
imports storage only through this module (tests/test_layers.py)."""

from __future__ import annotations

from .broker_disk import write_epoch_checkpoints, write_flushed, write_hw_checkpoint, write_partitions
from .data_files import SCHEMAS, write_file
from .delta_writes import append_files
from .tables import column_max, read_table, scan_table

__all__ = ["SCHEMAS", "append_files", "column_max", "read_table", "scan_table", "write_epoch_checkpoints", "write_file",
           "write_flushed", "write_hw_checkpoint", "write_partitions"]
