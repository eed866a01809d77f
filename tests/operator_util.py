"""What the operator-tool tests share: running a `sparkkafka` verb as a user would, and working on a copy
of a run built once per module (each test then acts on its own cluster)."""

from __future__ import annotations

import os
import shutil

from sparkkafka.cli import main

# Two brokers, one topic of two partitions, two records: the smallest run a run-directory test needs.
TINY = {"cluster": {"brokers": [1, 2], "config": {"auto.leader.rebalance.enable": False}},
        "topics": [{"name": "t", "assignment": {0: [2, 1], 1: [1, 2]}}],
        "timeline": [{"at": 0, "produce": {"topic": "t", "partition": 0, "records": 2, "acks": "all"}}],
        "run": {"until_ms": 300}}


def tiny_run(spark, out: str, rounds: int = 0) -> str:
    """The TINY scenario's run directory at `out` after `rounds` rounds (0: saved, no Spark job)."""
    from sparkkafka import Cluster
    from sparkkafka.scenario import parse_scenario

    c = Cluster.from_scenario(parse_scenario(TINY, name="tiny"), spark=spark, out=out)
    if rounds:
        c.step(rounds=rounds)
    else:
        c.save()
    return out


def cli(capsys, *args) -> tuple[int, str, str]:
    """Run `sparkkafka ARGS...` in-process: (exit code, stdout, stderr)."""
    capsys.readouterr()
    rc = main([str(a) for a in args])
    got = capsys.readouterr()
    return rc, got.out, got.err


def copy_run(base: str, tmp_path) -> str:
    """A private copy of the run directory `base` (the run directory is the cluster)."""
    out = str(tmp_path / "run")
    shutil.copytree(base, out)
    return out


def snapshot(root: str) -> dict[str, bytes]:
    """Every file's bytes under `root` (directories by name): equal snapshots mean a byte-identical tree."""
    out = {}
    for d, dirs, files in os.walk(root):
        for f in files:
            with open(os.path.join(d, f), "rb") as fh:
                out[os.path.relpath(os.path.join(d, f), root)] = fh.read()
        for x in dirs:
            out.setdefault(os.path.relpath(os.path.join(d, x), root) + "/", b"")
    return out
