"""Kills at seeded I/O points of a run (test_crash.py, crash_bench.py): the driver's writes are counted and
the Nth raises `Crash`, leaving the run directory as a kill -9 at that point would."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import types

import pytest
from test_determinism import tables

from sparkkafka import Cluster
from sparkkafka.scenario import parse_scenario
from sparkkafka.storage import broker_disk


def scenario(engine: str, **emulator) -> dict:
    """11 rounds of 200 ms of 3 brokers: a leader crash and restart (its disk files are read back), the
    driver state saved every 3 rounds, history committed every 2, Delta checkpoints and compactions
    every few commits (so kills land before, inside and after each of them)."""
    return {
        "name": "crash", "seed": 7,
        "cluster": {"brokers": 3, "config": {"replica.high.watermark.checkpoint.interval.ms": 400},
                    "emulator": {"engine": engine, "round.ms": 200, "history.commit.rounds": 2,
                                 "checkpoint.rounds": 3, "resident.rounds": 4, "delta.compact.min.files": 3,
                                 "delta.checkpoint.interval": 3, **emulator}},
        "topics": [{"name": "t", "partitions": 2, "replication_factor": 3}],
        "timeline": [{"at": 0, "produce": {"topic": "t", "partition": "all", "rate_per_sec": 40,
                                           "duration_ms": 1500, "acks": "all"}},
                     {"at": 400, "crash": 0}, {"at": 1000, "restart": 0}],
        "run": {"until_ms": 2000},
    }


class Crash(BaseException):
    """The process dies here (a BaseException: no `except Exception` in the code under test stops it)."""


class IoPoints:
    """Counts the driver's I/O: file renames and deletes of the run's modules, Delta commits, the Spark
    write of the brokers' rows. With `crash_at` = N, the Nth call raises Crash instead of running."""

    OS_CALLS = ("replace", "unlink", "rmdir")

    def __init__(self, crash_at: int | None = None) -> None:
        self.n = 0
        self.crash_at = crash_at

    def hit(self) -> None:
        self.n += 1
        if self.n == self.crash_at:
            raise Crash(self.n)

    def wrap(self, fn):
        def wrapped(*a, **kw):
            self.hit()
            return fn(*a, **kw)
        return wrapped

    @contextlib.contextmanager
    def installed(self, monkeypatch):
        import deltalake.table
        from pyspark.sql.readwriter import DataFrameWriter

        import sparkkafka.cluster
        import sparkkafka.controller.zookeeper
        import sparkkafka.run_dir
        import sparkkafka.storage.tables as T

        with monkeypatch.context() as m:
            proxy = types.SimpleNamespace(**{n: getattr(os, n) for n in dir(os) if not n.startswith("__")})
            for n in self.OS_CALLS:
                setattr(proxy, n, self.wrap(getattr(os, n)))
            for mod in (broker_disk, T, sparkkafka.run_dir, sparkkafka.controller.zookeeper):
                m.setattr(mod, "os", proxy)
            m.setattr(sparkkafka.run_dir.shutil, "rmtree", self.wrap(shutil.rmtree))
            for cls, name in ((T.TableWriter, "commit"), (T.TableWriter, "rearrange"),
                              (deltalake.table.TableOptimizer, "compact"), (DataFrameWriter, "parquet")):
                m.setattr(cls, name, self.wrap(getattr(cls, name)))
            m.setattr(sparkkafka.cluster, "write_violations", self.wrap(sparkkafka.cluster.write_violations))
            yield self


def outcome(out: str) -> tuple[dict, dict]:
    """The run's tables (canonical order) and summary.json."""
    with open(os.path.join(out, "summary.json")) as f:
        return tables(out), json.load(f)


def uninterrupted(spark, sc: dict, out: str) -> tuple[dict, dict, int]:
    """Run `sc` without a kill: its tables, its summary and how many I/O points it passed."""
    with pytest.MonkeyPatch.context() as mp, IoPoints().installed(mp) as io:
        Cluster.from_scenario(parse_scenario(sc), spark=spark, out=out).run()
    return (*outcome(out), io.n)


def continued(spark, sc: dict, out: str) -> Cluster:
    """The run in `out` reopened, or (killed before its run.json was written, while being created: not
    a run yet) created again."""
    if os.path.exists(os.path.join(out, "run.json")):
        return Cluster.for_path(spark, out)
    return Cluster.from_scenario(parse_scenario(sc), spark=spark, out=out)


def killed_and_continued(spark, sc: dict, out: str, rng: random.Random, points: int,
                         kills: int) -> tuple[Cluster, list[int]]:
    """Run `sc` into `out`, killing it `kills` times, each at a point drawn from 1..points // 6 I/O
    points into the attempt (its reopening and recovery included); then run it to its end. Returns the
    finished cluster and the points each kill came at."""
    at: list[int] = []
    while len(at) < kills:
        n = rng.randint(1, max(1, points // 6))
        try:
            with pytest.MonkeyPatch.context() as mp, IoPoints(n).installed(mp):
                c = continued(spark, sc, out).run()
        except Crash:
            at.append(n)
            continue
        return c, at  # it ended before the kill point
    return continued(spark, sc, out).run(), at
