"""The `sparkkafka` console script never dies at exit: native threads (delta-rs, Arrow) still running at
interpreter shutdown once aborted a finished `describe` with SIGABRT ("terminate called without an active
exception"). cli.entry flushes and leaves with os._exit, so no shutdown-time code can turn exit 0 into an abort.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from operator_util import TINY
from sparkutil import BASE_ENV

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, "data", "snapshots", "sample")
# the console script's own code path (pyproject's [project.scripts] entry point), for this interpreter
SCRIPT = [sys.executable, "-c", "import sys; from sparkkafka.cli import entry; sys.argv[0] = 'sparkkafka'; entry()"]


def _sparkkafka(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*SCRIPT, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=BASE_ENV)


def test_a_shutdown_time_abort_does_not_reach_the_exit_code(tmp_path):
    """What a native destructor aborting at interpreter shutdown does, made deterministic: an atexit handler
    that calls abort(). The console script has finished its work by then and must still exit 0."""
    code = ("import atexit, os, sys\n"
            "from sparkkafka import cli\n"
            "atexit.register(os.abort)  # as a C++ std::thread destructor on a joinable thread would\n"
            f"sys.argv = ['sparkkafka', 'describe', {str(tmp_path / 'none')!r}]\n"
            "cli.entry()\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 2, p.stderr  # describe's own answer (not a run directory), not -6 (SIGABRT)
    assert "is not a sparkkafka run directory" in p.stderr


def test_usage_errors_keep_argparse_exit_code_and_output():
    p = _sparkkafka("describe")
    assert p.returncode == 2
    assert "the following arguments are required: run" in p.stderr
    p = _sparkkafka("--help")
    assert (p.returncode, p.stdout.startswith("usage: sparkkafka")) == (0, True)


# 5 runs of each tool in CI (about a minute and a half); SPARKKAFKA_EXIT_RUNS=20 for the full check.
RUNS = int(os.environ.get("SPARKKAFKA_EXIT_RUNS", "5"))


def tools_in_a_row(tmp: Path) -> tuple[list[str], int, float]:
    """TINY on the in-process engine (no Spark) for 300 emulated ms, made by a child process, then RUNS runs
    in a row of each read-only verb on it: what went wrong, how many verbs, and the seconds they took."""
    out = tmp / "run"
    make = ("import json, sys\nfrom sparkkafka import Cluster\nfrom sparkkafka.scenario import parse_scenario\n"
            "Cluster.from_scenario(parse_scenario(json.loads(sys.argv[1]), name='exit'), out=sys.argv[2]).run()\n")
    scenario = {**TINY, "cluster": {**TINY["cluster"], "emulator": {"engine": "local"}}}
    subprocess.run([sys.executable, "-c", make, json.dumps(scenario), str(out)], check=True, timeout=300, cwd=ROOT,
                   env=BASE_ENV)
    plan = tmp / "plan.json"
    plan.write_text('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,1]}]}')
    tools = {
        "describe": ["describe", str(out)],
        "log-dirs": ["log-dirs", str(out), "--describe"],
        "state-change-log": ["state-change-log", str(out)],
        "verify-replicas": ["verify-replicas", str(out)],
        "reassign --verify": ["reassign", str(out), "--verify", "--preserve-throttles",
                              "--reassignment-json-file", str(plan)],
        "report": ["report", str(out), "--out", str(tmp / "report")],
        "whatif --no-emulate": ["whatif", SAMPLE, "--lose-broker", "4", "--no-emulate"],
    }
    failures, started = [], time.perf_counter()
    for name, args in tools.items():
        for i in range(RUNS):
            p = _sparkkafka(*args)
            if p.returncode != 0 or "terminate called" in p.stderr:
                failures.append(f"{name} run {i + 1}: exit {p.returncode}: {p.stderr[-300:]}")
    return failures, len(tools), time.perf_counter() - started


@pytest.mark.slow
@pytest.mark.offload(work=tools_in_a_row)
def test_runs_in_a_row_of_every_read_only_tool_exit_0(offloaded):
    """RUNS runs in a row of each read-only verb exit 0 with no abort message."""
    failures, tools, took = offloaded
    print(f"{tools} tools x {RUNS} runs in {took:.0f} s")
    assert failures == []
