"""The run a Kafka tool or the Admin API acts on, as they may reach it: the run directory and the driver state
saved in it (run_dir.py), the lock a save holds (run_lock.py), and the driver-to-broker message kind the
admin's requests travel as (engine/rows.py). tools/ and admin.py import these from here, not from the engine
or the run's internals (tests/test_layers.py)."""

from __future__ import annotations

from .engine.rows import ALTER_LOG_DIRS
from .run_dir import DriverState, RunDir
from .run_lock import writing

__all__ = ["ALTER_LOG_DIRS", "DriverState", "RunDir", "writing"]
