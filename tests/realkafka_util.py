"""Running `sparkkafka replay` as a user does, for the slow tests on real Kafka 2.8.2 (test_replay.py,
test_differential.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def jvms_under(path: Path) -> list[str]:
    """Command lines of running processes that name `path` (the brokers' and ZooKeeper's config files)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(path) in cmd and "java" in cmd:
            found.append(cmd)
    return found


@dataclass(frozen=True)
class Replayed:
    """What a user has after `sparkkafka replay`: comparison.json, the printed output, the wall time, DIR."""

    cmp: dict[str, Any]
    stdout: str
    wall_s: float
    out: Path

    @property
    def partitions(self) -> dict[tuple[str, int], dict[str, Any]]:
        """comparison.json's partitions by (topic, partition)."""
        return {(p["topic"], p["partition"]): p for p in self.cmp["partitions"]}


#: the replay's niceness: its JVMs run the scenario on the wall clock, so when the rest of the suite runs beside
#: it (tests/background.py) it gets the CPU first; the suite's own tests keep no time (a raise needs root, CI's
#: user; without it the replay runs at the suite's priority)
REPLAY_NICENESS = -10


def _ahead_of_the_suite() -> None:
    try:
        os.setpriority(os.PRIO_PROCESS, 0, REPLAY_NICENESS)
    except OSError:
        pass


def replay(tmp_path: Path, scenario: Path, timeout_s: float = 300) -> Replayed:
    """`sparkkafka replay SCENARIO --on-kafka 2.8.2 --engine local` from a fresh directory (at
    REPLAY_NICENESS, its JVMs too); asserts exit 0 (every partition agrees within the tolerance) and that
    no JVM is left."""
    out = tmp_path / "replay"
    t0 = time.perf_counter()
    done = subprocess.run([str(Path(sys.executable).parent / "sparkkafka"), "replay", str(scenario),
                           "--on-kafka", "2.8.2", "--out", str(out), "--engine", "local"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=timeout_s,
                          preexec_fn=_ahead_of_the_suite)
    wall = time.perf_counter() - t0
    (tmp_path / "replay-output.txt").write_text(done.stdout + done.stderr)  # what the user would see
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-4000:]
    assert "Within tolerance: the sequences and the tools' outputs agree" in done.stdout
    assert jvms_under(out) == []
    return Replayed(json.loads((out / "comparison.json").read_text()), done.stdout, wall, out)
