"""Crash safety (docs/run-directory.md "Crash safety"): a run killed at any moment and
continued from its run directory ends with the tables and summary of an uninterrupted run.

The kill is simulated in-process: every write of the run's files and every Delta commit the driver
makes is counted, and the Nth (seeded) raises `Crash`, a BaseException nothing catches, leaving the
directory as a kill at that point would. The run is then reopened with Cluster.for_path and run to
its end.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import IO

import pandas as pd
import pytest
import yaml
from crash_util import killed_and_continued, outcome, scenario, uninterrupted
from sparkutil import PYTHON, _stop_group, spark_env
from test_determinism import ROOT, assert_same

from sparkkafka import Cluster
from sparkkafka.scenario import parse_scenario
from sparkkafka.storage import broker_disk

SEED = 1301


@pytest.fixture(scope="module")
def reference(spark, tmp_path_factory):
    """The uninterrupted run's (tables, summary, I/O points), on the round engine (the resident engine
    gives the same tables: test_resident), run once per module."""
    out = str(tmp_path_factory.mktemp("reference") / "run")
    return uninterrupted(spark, scenario("rounds"), out)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["rounds", "resident", "local"])
def test_a_run_killed_at_seeded_io_points_continues_to_the_uninterrupted_tables(spark, tmp_path, reference, engine):
    """10 kills per engine, one after another in one run: each continuation is killed again at the next
    seeded point (its recovery included), the last one runs to the end. The in-process engine's kills also
    land in the brokers' own writes (their files, the held log rows written at a commit point)."""
    want_tables, want_summary, points = reference
    assert points > 50  # every round commits: the kills spread over every kind of write
    out = str(tmp_path / "run")
    c, kills = killed_and_continued(spark, scenario(engine), out, random.Random(f"{SEED}-{engine}"), points, 10)
    assert kills == [k for k in kills if k <= points // 6] and len(kills) == 10
    got_tables, got_summary = outcome(out)
    try:
        assert_same(got_tables, want_tables)
        assert got_summary == want_summary
    except AssertionError as e:
        raise AssertionError(f"{engine}: killed at I/O points {kills} (of {points}): {e}") from None
    assert c.round == c.scenario.end_ms // c.round_ms + 1
    assert not [f for _, _, fs in os.walk(out) for f in fs if f.endswith(".tmp")]


# ------------------------------------------------------------------------------------------------
# the brokers' files: versions by round (storage/broker_disk.py)
# ------------------------------------------------------------------------------------------------
def test_broker_files_are_read_as_of_a_round_and_rolled_back_and_settled(tmp_path):
    d = str(tmp_path)
    broker_disk.write_partitions(d, 1, "d0", [("t", 0)])  # an imported cluster's file, before round 0
    broker_disk.write_hw_checkpoint(d, 1, "d0", [("t", 0, 3)], round_no=4)
    broker_disk.write_epoch_checkpoint(d, 1, "d0", "t", 0, [(0, 0)], round_no=4)
    broker_disk.write_hw_checkpoint(d, 1, "d0", [("t", 0, 7)], round_no=6)
    broker_disk.write_epoch_checkpoint(d, 1, "d0", "t", 0, [(0, 0), (1, 5)], round_no=6)
    broker_disk.remove_log_files(d, 1, "d0", "t", 0, round_no=8)

    def seen(before):
        return broker_disk.read_disk(d, 1, ["d0"], before=before)[["hw", "epoch_cache"]].to_dict("records")

    assert seen(4) == [{"hw": 0, "epoch_cache": seen(0)[0]["epoch_cache"]}]  # a task of round 4: nothing yet
    assert seen(6)[0]["hw"] == 3 and seen(7)[0]["hw"] == 7
    assert broker_disk.read_epoch_checkpoint(d, 1, "d0", "t", 0, before=7) == [(0, 0), (1, 5)]
    assert broker_disk.read_epoch_checkpoint(d, 1, "d0", "t", 0, before=9) == []  # removed in round 8
    assert broker_disk.read_epoch_checkpoint(d, 1, "d0", "t", 0) == []  # the newest version

    # a run continued from its state saved before round 7: rounds 7 on run again
    assert broker_disk.rollback(d, 7) == 1
    assert broker_disk.read_epoch_checkpoint(d, 1, "d0", "t", 0) == [(0, 0), (1, 5)]
    before = seen(None)
    broker_disk.settle(d, 7)  # the files without versions only, the same content
    base = broker_disk.dir_path(d, 1, "d0")
    assert sorted(os.listdir(base)) == ["leader-epoch-checkpoints", "partitions", "replication-offset-checkpoint"]
    assert seen(None) == before and seen(3) == before

    # a tombstone settles into no entry (and the dir's last one into no file)
    broker_disk.remove_log_files(d, 1, "d0", "t", 0, round_no=9)
    broker_disk.settle(d, 10)
    assert sorted(os.listdir(base)) == ["partitions", "replication-offset-checkpoint"]


def test_a_rounds_epoch_checkpoints_are_one_file_per_dir_read_as_of_a_round_and_settled_into_one_per_dir(
        tmp_path):
    d = str(tmp_path)
    base = broker_disk.dir_path(d, 1, "d0")
    first = [(1, "d0", "t", p, False, [(0, 0)]) for p in range(50)] + [(1, "d1", "t", 50, False, [(0, 0)])]
    broker_disk.write_epoch_checkpoints(d, 3, first)
    assert sorted(os.listdir(base)) == ["leader-epoch-checkpoints.r0000000003"]  # not 50 folders
    broker_disk.write_epoch_checkpoints(d, 3, first[:2])  # a re-run task of round 3: the same entries again
    later = [(1, "d0", "t", 0, False, [(0, 0), (2, 9)]), (1, "d0", "t", 1, False, None),  # removed
             (1, "d0", "t", 2, True, []), (1, "d0", "t", 3, False, [(0, 0), (1, 4)]),
             (1, "d0", "t", 3, False, [(0, 0), (1, 5)])]  # written twice in a round: the later stands
    broker_disk.write_epoch_checkpoints(d, 5, later)

    def cache(p, before=None, future=False):
        return broker_disk.read_epoch_checkpoint(d, 1, "d0", "t", p, future, before)

    assert [cache(p, 4) for p in range(4)] == [[(0, 0)]] * 4
    assert [cache(p) for p in range(4)] == [[(0, 0), (2, 9)], [], [(0, 0)], [(0, 0), (1, 5)]]
    assert cache(2, future=True) == [] and cache(49) == [(0, 0)] and cache(60) == []
    assert broker_disk.read_epoch_checkpoint(d, 1, "d1", "t", 50) == [(0, 0)]
    broker_disk.write_partitions(d, 1, "d0", [("t", p) for p in range(4)], round_no=3)
    assert broker_disk.read_disk(d, 1, ["d0"], before=6)["epoch_cache"].tolist() == ["0:0,2:9", "", "0:0", "0:0,1:5"]

    broker_disk.settle(d, 5)  # round 3's journal folded; round 5's stays a version
    assert os.path.exists(os.path.join(base, "leader-epoch-checkpoints.r0000000005"))
    assert not os.path.exists(os.path.join(base, "leader-epoch-checkpoints.r0000000003"))
    assert [cache(p) for p in range(4)] == [[(0, 0), (2, 9)], [], [(0, 0)], [(0, 0), (1, 5)]]
    broker_disk.settle(d, 6)
    assert sorted(os.listdir(base)) == ["leader-epoch-checkpoints", "partitions"]  # no folder per log
    with open(os.path.join(base, "leader-epoch-checkpoints")) as f:
        lines = f.read().splitlines()
    assert len(lines) == 50 and not [x for x in lines if x.startswith("+ 0 1 ")]  # t-0, t-2..t-49 and t-2's future log; t-1 gone
    assert lines[:4] == ["+ 0 0 0:0,2:9 t", "+ 0 2 0:0 t", "+ 1 2 . t", "+ 0 3 0:0,1:5 t"]
    assert [cache(p) for p in range(4)] == [[(0, 0), (2, 9)], [], [(0, 0)], [(0, 0), (1, 5)]]
    assert broker_disk.rollback(d, 0) == 0  # nothing versioned is left


def test_the_older_layouts_per_log_epoch_files_are_read_and_folded_into_the_dirs_file(tmp_path):
    """A run saved by an earlier version keeps a folder per log with Kafka's leader-epoch-checkpoint: it is read
    as before, and the next save that folds the dir's journal folds those files in and removes them."""
    d = str(tmp_path)
    base = broker_disk.dir_path(d, 1, "d0")
    for name, text in (("t-0", "0\n1\n0 0\n"), ("t-1", "0\n2\n0 0\n3 7\n"), ("t-2", "0\n1\n0 0\n"),
                       ("my-topic-5-future", "0\n0\n")):
        os.makedirs(os.path.join(base, name))
        with open(os.path.join(base, name, "leader-epoch-checkpoint"), "w") as f:
            f.write(text)

    def caches():
        return [broker_disk.read_epoch_checkpoint(d, 1, "d0", t, p, fut) for t, p, fut in
                (("t", 0, False), ("t", 1, False), ("t", 2, False), ("my-topic", 5, True))]

    assert caches() == [[(0, 0)], [(0, 0), (3, 7)], [(0, 0)], []]
    broker_disk.write_epoch_checkpoints(d, 4, [(1, "d0", "t", 0, False, [(0, 0), (1, 9)]),
                                               (1, "d0", "t", 2, False, None)])  # t-2 removed in round 4
    expected = [[(0, 0), (1, 9)], [(0, 0), (3, 7)], [], []]
    assert caches() == expected
    broker_disk.settle(d, 5)
    assert os.listdir(base) == ["leader-epoch-checkpoints"] and caches() == expected
    with open(os.path.join(base, "leader-epoch-checkpoints")) as f:
        assert f.read() == "+ 1 5 . my-topic\n+ 0 0 0:0,1:9 t\n+ 0 1 0:0,3:7 t\n"


def test_a_retried_round_task_writes_the_same_files_and_rows(spark, tmp_path):
    """Executor lost mid-job: Spark runs the task again on the same input. Round 5 restarts broker 0
    (it reads its files back); the round's function, run twice as a retry would, returns the same rows
    and leaves the same files, whatever the first attempt wrote."""
    from sparkkafka.engine import rows as W
    from sparkkafka.engine.broker_round import BrokerRound

    out = str(tmp_path / "run")
    c = Cluster.from_scenario(parse_scenario(scenario("rounds")), spark=spark, out=out).step(5)
    now = c.round * c.round_ms
    c.loop.prepare(now)
    wire = c.loop.input().toPandas()
    assert set(wire.loc[wire["kind"] == W.START, "broker"]) == {0}

    def attempt():
        fn = BrokerRound(c.loop.params(now))
        res = pd.concat(list(fn(iter([wire]))), ignore_index=True)
        files = {}
        for folder, _, names in os.walk(out):
            if "_delta_log" in folder or os.sep + "state" in folder:
                continue
            for n in names:
                with open(os.path.join(folder, n), "rb") as f:
                    files[os.path.relpath(os.path.join(folder, n), out)] = f.read()
        payload = res["payload"].map(lambda p: None if p is None else json.dumps(
            {k: v for k, v in json.loads(p).items() if k not in ("modification_time", "timings")}, sort_keys=True)
            if isinstance(p, str) and p.startswith("{") else p)
        return res.assign(payload=payload), files

    first_rows, first_files = attempt()
    again_rows, again_files = attempt()
    pd.testing.assert_frame_equal(first_rows, again_rows)
    assert first_files == again_files
    assert any(".r0000000005" in f for f in first_files)  # round 5's versions of the brokers' files


def _cli_run(tmp: Path, master: str, stderr: int | IO[bytes] = subprocess.DEVNULL) -> tuple[subprocess.Popen, Path]:
    """`sparkkafka run` of the rounds crash scenario on `master` in a child process (its own session and
    process group), started: the process and its run directory."""
    path = tmp / "crash.yaml"
    path.write_text(yaml.safe_dump(scenario("rounds")))
    out = tmp / "run"
    proc = subprocess.Popen([PYTHON, "-m", "sparkkafka.cli", "run", str(path), "--out", str(out), "--no-progress",
                             "--master", master], env=spark_env({"PYTHONPATH": str(ROOT)}),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                            start_new_session=True)
    return proc, out


def _log_commits(out: Path) -> int:
    log = out / "tables" / "log" / "_delta_log"
    return sum(n.endswith(".json") for n in os.listdir(log)) if log.is_dir() else 0


def killed_by_sigkill(tmp: Path) -> tuple[int, Path]:
    """The run killed with SIGKILL after a seeded number of the log table's commits and a seeded pause: how
    it ended, and its run directory."""
    rng = random.Random(SEED)
    commits, pause = rng.randint(2, 9), rng.uniform(0, 0.3)
    proc, out = _cli_run(tmp, "local[2]")
    try:
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline and _log_commits(out) <= commits:
            time.sleep(0.05)
        time.sleep(pause)
        os.kill(proc.pid, signal.SIGKILL)
        return proc.wait(timeout=30), out
    finally:
        _stop_group(proc.pid, grace=5.0)  # the JVM and Python workers it started


@pytest.mark.slow
@pytest.mark.offload(work=killed_by_sigkill)
def test_a_sparkkafka_run_killed_with_sigkill_is_continued_by_sparkkafka_run(spark, offloaded, reference, capsys):
    """A real kill -9 of a `sparkkafka run` process at a seeded moment (after a seeded number of the log
    table's commits), then `sparkkafka run RUN --until-ms T`: the uninterrupted run's tables."""
    from sparkkafka.cli import main

    code, out = offloaded
    assert code == -signal.SIGKILL and not (out / "summary.json").exists()  # killed, not finished
    assert main(["run", str(out), "--until-ms", str(scenario("rounds")["run"]["until_ms"]), "--no-progress"]) == 0
    capsys.readouterr()
    want_tables, want_summary, _ = reference
    got_tables, got_summary = outcome(str(out))
    assert_same(got_tables, want_tables)
    assert got_summary == want_summary


def _python_workers(session: int) -> list[int]:
    """The Python worker processes of the Spark driver leading `session` that are running a task now
    (state R): forked by the worker daemon, so each one's parent runs the same command line. An idle
    worker killed is only replaced when next needed, which fails no task."""
    procs, running = {}, set()
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if int(fields[3]) == session:  # the session id (0-based from the state field)
            procs[pid] = (int(fields[1]), cmd)
            if fields[0] == "R":
                running.add(pid)
    return sorted(pid for pid, (ppid, cmd) in procs.items()
                  if b"fastdaemon" in cmd and ppid in procs and procs[ppid][1] == cmd and pid in running)


def workers_killed(tmp: Path) -> tuple[int, list[int], str, Path]:
    """The run on `local[2,4]` (a task may be tried 4 times) with up to three of its Python workers killed
    with SIGKILL while they run a task, after a seeded number of the log table's commits, until Spark reports
    a lost task: its exit code, the PIDs killed, its stderr and its run directory."""
    commits = random.Random(SEED + 1).randint(2, 6)
    err = tmp / "stderr.txt"
    with open(err, "wb") as stderr:
        proc, out = _cli_run(tmp, "local[2,4]", stderr)
    killed = []
    try:
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline and "Lost task" not in err.read_text():
            workers = _python_workers(proc.pid) if _log_commits(out) > commits and len(killed) < 3 else []
            if workers:
                os.kill(workers[-1], signal.SIGKILL)
                killed.append(workers[-1])
                time.sleep(1.0)
            time.sleep(0.005)
        return proc.wait(timeout=300), killed, err.read_text(), out
    finally:
        _stop_group(proc.pid, grace=5.0)


@pytest.mark.slow
@pytest.mark.offload(work=workers_killed)
def test_a_python_worker_killed_mid_run_is_retried_to_the_uninterrupted_tables(offloaded, reference):
    """An executor's Python worker killed with SIGKILL mid-run: Spark runs the lost task again on the same
    input, and the run ends with the uninterrupted run's tables."""
    code, killed, stderr, out = offloaded
    assert code == 0, stderr[-3000:]
    assert killed and "Lost task" in stderr  # a task died with its worker and was run again
    want_tables, want_summary, _ = reference
    got_tables, got_summary = outcome(str(out))
    assert_same(got_tables, want_tables)
    assert got_summary == want_summary


def test_table_rollback_drops_later_commits_and_their_checkpoints(tmp_path):
    """A table rolled back to a version reads as it did then, its app transaction included (the round
    committed again is accepted), whatever checkpoints were written after it."""
    import pyarrow as pa

    from sparkkafka.storage import tables as T

    d = str(tmp_path)
    T.create_tables(d, checkpoint_interval=2)
    w = T.TableWriter(d, "r1")

    def commit(r):
        rows = pa.Table.from_pylist([{"round": r, "time_ms": r * 100}], schema=T.SCHEMAS["metrics"])
        assert w.commit("metrics", [T.write_file(d, "metrics", rows, f"{r:08d}-driver")], r)

    for r in range(3):
        commit(r)
    keep = T.table_versions(d)
    before = T.read_table(d, "metrics").sort_by("round")
    for r in range(3, 7):
        commit(r)
    log = os.path.join(d, "metrics", "_delta_log")
    assert any(n.endswith(".checkpoint.parquet") and int(n[:20]) > keep["metrics"] for n in os.listdir(log))
    open(os.path.join(d, "metrics", "part-x.parquet.0.tmp"), "w").close()  # a write a kill cut short

    assert T.rollback(d, keep) == ["metrics"]
    assert T.table_versions(d) == keep
    assert T.read_table(d, "metrics").sort_by("round").equals(before)
    assert not any(int(n[:20]) > keep["metrics"] for n in os.listdir(log) if n[:20].isdigit())
    assert not any(n.endswith(".tmp") for n in os.listdir(os.path.join(d, "metrics")))
    w = T.TableWriter(d, "r1")
    commit(3)  # round 3 is not committed any more: accepted again
    assert T.read_table(d, "metrics").num_rows == 4
    assert T.rollback(d, T.table_versions(d)) == []
