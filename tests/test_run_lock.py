"""One writer per run directory (docs/run-directory.md, "One writer at a time"): OUT/.lock (run_lock.py) names
its holder; a second writer is refused with exit 2 before it reads or starts anything; a lock left by a dead
process of this host is taken over, one of another host is honoured; a writer whose view of the run is older
than the last save is refused. The two-writer test runs two real `sparkkafka run` processes on one run
directory."""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from operator_util import cli, copy_run, snapshot, tiny_run

from sparkkafka import run_lock
from sparkkafka.tools import operator as op

ROOT = Path(__file__).resolve().parent.parent
@pytest.fixture(scope="module")
def base(spark, tmp_path_factory) -> str:
    """A run directory with its driver state saved and no round run yet (no Spark job)."""
    out = tiny_run(spark, str(tmp_path_factory.mktemp("lock") / "run"))
    assert not os.path.exists(run_lock.lock_path(out))
    return out


def _env() -> dict[str, str]:
    from sparkutil import spark_env  # not this process's Spark: the child starts its own

    return spark_env({"PYTHONPATH": str(ROOT)})


def _holder(run: str) -> subprocess.Popen:
    """Another process of this host that takes the run's lock and keeps it until killed."""
    code = (f"import sys, time\nfrom sparkkafka import run_lock\nrun_lock.acquire({run!r}, 'holder test')\n"
            "print('held', flush=True)\ntime.sleep(120)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=_env())
    assert p.stdout.readline() == "held\n"
    return p


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _write_lock(run: str, **info) -> None:
    Path(run_lock.lock_path(run)).write_text(json.dumps(info))


def test_the_lock_file_names_its_holder_and_goes_at_the_outermost_release(tmp_path):
    run = str(tmp_path)
    run_lock.acquire(run, "sparkkafka run X")
    info = run_lock.holder(run)
    assert (info["pid"], info["host"], info["command"]) == (os.getpid(), socket.gethostname(), "sparkkafka run X")
    assert abs(info["started"] - time.time()) < 60
    run_lock.acquire(run)  # re-entrant: nested writers of one process share it
    run_lock.release(run)
    assert run_lock.holder(run) == info
    run_lock.release(run)
    assert run_lock.holder(run) is None and os.listdir(run) == []


def test_a_writer_tool_is_refused_while_another_process_holds_the_run(base, tmp_path, capsys):
    run = copy_run(base, tmp_path)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}]}))
    p = _holder(run)
    try:
        before = snapshot(run)
        for verb in (["leader-election", run, "--election-type", "preferred", "--all-topic-partitions"],
                     ["reassign", run, "--execute", "--reassignment-json-file", plan],
                     ["reassign", run, "--cancel", "--reassignment-json-file", plan],
                     ["run", run, "--until-ms", "200", "--no-progress"]):
            code, out, err = cli(capsys, *verb)
            assert (code, out) == (2, ""), (verb, err)
            assert f"held by pid {p.pid} on host {socket.gethostname()}" in err and "holder test" in err, err
        assert snapshot(run) == before  # byte-identical: the refused writers read nothing, wrote nothing
        # readers take no lock
        assert cli(capsys, "reassign", run, "--list")[0] == 0
        assert cli(capsys, "describe", run)[0] == 0
        assert cli(capsys, "state-change-log", run)[0] == 0
    finally:
        p.kill()
        p.wait()
    # the holder was killed: its lock is stale, and the next writer takes it over and releases it
    assert run_lock.holder(run)["pid"] == p.pid
    code, out, err = cli(capsys, "reassign", run, "--execute", "--reassignment-json-file", plan)
    assert code == 0, err
    assert run_lock.holder(run) is None


def test_a_stale_lock_of_this_host_is_taken_over(tmp_path):
    run = str(tmp_path)
    _write_lock(run, pid=_dead_pid(), host=socket.gethostname(), started=0, command="killed")
    with run_lock.writing(run, "taker"):
        assert run_lock.holder(run)["command"] == "taker"
    assert run_lock.holder(run) is None
    # a live pid that now belongs to another process (pid reuse): its start time differs
    _write_lock(run, pid=os.getpid(), host=socket.gethostname(), started=0, command="old", pid_start="1")
    with run_lock.writing(run, "taker"):
        assert run_lock.holder(run)["command"] == "taker"


def test_a_lock_of_another_host_is_honoured_and_a_foreign_file_refused(tmp_path):
    run = str(tmp_path)
    _write_lock(run, pid=_dead_pid(), host="elsewhere.example", started=0, command="sparkkafka run")
    with pytest.raises(run_lock.RunLockedError, match="on host elsewhere.example"):
        run_lock.acquire(run)
    Path(run_lock.lock_path(run)).write_text("not json")
    with pytest.raises(run_lock.RunLockedError, match="not a sparkkafka lock"):
        run_lock.acquire(run)
    assert os.listdir(run) == [run_lock.LOCK]  # no temporary file left behind


def _contend(run: str, barrier, results) -> None:
    barrier.wait()
    try:
        run_lock.acquire(run, "contender")
    except run_lock.RunLockedError:
        results.put("refused")
        return
    results.put("took")
    time.sleep(1.0)  # still holding while the others try


def test_contenders_for_a_stale_lock_have_one_winner(tmp_path):
    run = str(tmp_path)
    _write_lock(run, pid=_dead_pid(), host=socket.gethostname(), started=0, command="killed")
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(6), ctx.Queue()
    procs = [ctx.Process(target=_contend, args=(run, barrier, results)) for _ in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    got = sorted(results.get(timeout=5) for _ in procs)
    assert got == ["refused"] * 5 + ["took"]


def test_a_writer_whose_view_is_older_than_the_last_save_is_refused(base, tmp_path, spark):
    """Between loading a run and saving it, another process saved it: saving would drop that change."""
    from sparkkafka import Cluster

    run = copy_run(base, tmp_path)
    first, second = op.Run.open(run), op.Run.open(run)
    second.save()
    before = snapshot(run)
    with pytest.raises(run_lock.RunLockedError, match="saved by another writer"):
        first.save()
    assert snapshot(run) == before
    c1, c2 = Cluster.for_path(spark, run), Cluster.for_path(spark, run)
    c2.save()
    c2.save()  # its own saves do not make it stale
    with pytest.raises(run_lock.RunLockedError, match="saved by another writer"):
        c1.save()


def test_jobs_hold_the_lock_and_saves_between_them_keep_the_cluster_current(base, tmp_path, spark):
    """`Cluster.jobs` runs the rounds a Spark job at a time under the run's lock and yields each job's rounds.
    A save between jobs (the loop's own every emulator.checkpoint.rounds, done here by hand) is this process's:
    the Cluster stays current and may save after (a bench's loop was refused here before it used `jobs`)."""
    from sparkkafka import Cluster

    run = copy_run(base, tmp_path)
    c = Cluster.for_path(spark, run)
    start, ran = c.round, []
    for n in c.jobs(3):
        assert run_lock.held(run)
        ran.append(n)
        c.loop.save()
    assert not run_lock.held(run)
    assert sum(ran) == 3 and c.round == start + 3
    c.save()
    assert Cluster.for_path(spark, run).round == start + 3


@pytest.mark.slow
def test_two_writers_on_one_run_directory_one_proceeds_the_other_exits_2(base, tmp_path):
    """Two `sparkkafka run RUN` processes started together: one runs (Spark), the other is refused before
    it starts Spark, naming the holder."""
    run = copy_run(base, tmp_path)
    cmd = [sys.executable, "-m", "sparkkafka.cli", "run", run, "--until-ms", "0", "--no-progress", "--master", "local[1]"]
    t0 = time.monotonic()
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
             for _ in range(2)]
    ended: dict[int, float] = {}
    while len(ended) < 2:
        for i, p in enumerate(procs):
            if i not in ended and p.poll() is not None:
                ended[i] = time.monotonic() - t0
        time.sleep(0.05)
    outs = [p.communicate() for p in procs]
    codes = [p.returncode for p in procs]
    assert sorted(codes) == [0, 2], (codes, outs)
    win, lose = codes.index(0), codes.index(2)
    err = outs[lose][1]
    assert f"held by pid {procs[win].pid} on host {socket.gethostname()}" in err, err
    assert "SparkContext" not in err and "log4j" not in err.lower(), err  # refused before Spark started
    assert ended[lose] < ended[win], ended
    print(f"refused after {ended[lose]:.1f} s, the winner ran {ended[win]:.1f} s")
    assert "Topic: t" in outs[win][0]
    assert json.loads(Path(run, "run.json").read_text())["round"] == 1  # round 0 run once
    assert run_lock.holder(run) is None
