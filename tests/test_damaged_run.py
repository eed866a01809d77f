"""A damaged run directory is refused before any tool reads or writes it (run_check.py): exit 2 naming the
damaged file and how to recover, and every file byte-identical afterwards. A refused request changes
nothing, a failed run does not block its retry, and `--out` naming a file is refused before anything starts.

Spark-free: the base run is the TINY scenario on the in-process engine, built once and copied per case."""

from __future__ import annotations

import copy
import json
import os
import shutil

import pytest
from operator_util import TINY, cli, snapshot

from sparkkafka.errors import ScenarioError
from sparkkafka.run_check import DamagedRunError

LOCAL = copy.deepcopy(TINY)
LOCAL["cluster"]["emulator"] = {"engine": "local"}  # every round in this process: no Spark
PLAN = {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}]}


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> str:
    """The TINY run after two rounds: data files in every history table, the brokers' rows in state/."""
    from sparkkafka import Cluster
    from sparkkafka.scenario import parse_scenario

    out = str(tmp_path_factory.mktemp("damaged") / "run")
    Cluster.from_scenario(parse_scenario(LOCAL, name="tiny"), out=out).step(rounds=2)
    return out


def _data_file(run: str) -> str:
    table = os.path.join(run, "tables", "replica_state")
    return os.path.join(table, sorted(n for n in os.listdir(table) if n.endswith(".parquet"))[-1])


def _last_commit(run: str) -> str:
    log = os.path.join(run, "tables", "partition_state", "_delta_log")
    return os.path.join(log, sorted(n for n in os.listdir(log) if n.endswith(".json"))[-1])


def _delete_data_file(run: str) -> str:
    path = _data_file(run)
    os.unlink(path)
    return os.path.relpath(path, run)


def _corrupt_log_line(run: str) -> str:
    path = _last_commit(run)
    with open(path) as f:
        lines = f.read().splitlines()
    lines[1] = lines[1][: len(lines[1]) // 2]  # a line cut in the middle
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return os.path.relpath(path, run)


def _remove_state(run: str) -> str:
    shutil.rmtree(os.path.join(run, "state"))
    return "state/"


def _truncate_zookeeper(run: str) -> str:
    path = os.path.join(run, "zookeeper.json")
    os.truncate(path, os.path.getsize(path) // 2)
    return "zookeeper.json"


def _empty_run_json(run: str) -> str:
    open(os.path.join(run, "run.json"), "w").close()
    return "run.json"


DAMAGE = {"deleted Parquet file": _delete_data_file, "corrupt _delta_log line": _corrupt_log_line,
          "state/ removed": _remove_state, "truncated zookeeper.json": _truncate_zookeeper,
          "empty run.json": _empty_run_json}
READ_DAMAGE = {k: v for k, v in DAMAGE.items() if k != "state/ removed"}  # readers do not read state/


def _writers(run: str, plan: str) -> dict[str, list[str]]:
    return {
        "run (continue)": ["run", run, "--no-progress"],
        "reassign --execute": ["reassign", run, "--execute", "--reassignment-json-file", plan],
        "reassign --cancel": ["reassign", run, "--cancel", "--reassignment-json-file", plan],
        "reassign --verify": ["reassign", run, "--verify", "--reassignment-json-file", plan],
        "leader-election": ["leader-election", run, "--election-type", "preferred", "--all-topic-partitions"],
    }


def _readers(run: str, plan: str) -> dict[str, list[str]]:
    return {
        "describe": ["describe", run],
        "log-dirs": ["log-dirs", run, "--describe"],
        "state-change-log": ["state-change-log", run],
        "verify-replicas": ["verify-replicas", run],
        "report": ["report", run],
        "reassign --verify --preserve-throttles": ["reassign", run, "--verify", "--preserve-throttles",
                                                   "--reassignment-json-file", plan],
    }


def _damaged_copy(base: str, tmp_path, damage) -> tuple[str, str, str]:
    run = str(tmp_path / "run")
    shutil.copytree(base, run)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    return run, damage(run), str(plan)


def _assert_refused(capsys, args: list[str], run: str, named: str) -> None:
    before = snapshot(run)
    code, out, err = cli(capsys, *args)
    assert (code, out) == (2, ""), (args, code, out, err)
    assert err.startswith(f"sparkkafka: error: run: {named} "), err
    assert "the run directory is damaged and was not changed" in err, err
    assert f"sparkkafka run SCENARIO.yaml --out {os.path.abspath(run)} --overwrite" in err, err
    assert snapshot(run) == before, args


@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
def test_every_write_tool_refuses_a_damaged_run_naming_the_file_and_changes_nothing(base, tmp_path, capsys, damage):
    run, named, plan = _damaged_copy(base, tmp_path, DAMAGE[damage])
    for args in _writers(run, plan).values():
        _assert_refused(capsys, args, run, named)


@pytest.mark.parametrize("damage", READ_DAMAGE, ids=list(READ_DAMAGE))
def test_every_read_tool_refuses_a_damaged_run_with_exit_2_not_a_stack_trace(base, tmp_path, capsys, damage):
    run, named, plan = _damaged_copy(base, tmp_path, READ_DAMAGE[damage])
    for args in _readers(run, plan).values():
        _assert_refused(capsys, args, run, named)


def test_readers_still_read_a_run_whose_brokers_rows_are_gone(base, tmp_path, capsys):
    """state/ is only what a continued run starts from: the tables are whole, so the readers answer."""
    run, _, plan = _damaged_copy(base, tmp_path, _remove_state)
    for name in ("describe", "log-dirs", "state-change-log", "reassign --verify --preserve-throttles"):
        code, _, err = cli(capsys, *_readers(run, plan)[name])
        assert code == 0, (name, err)


def test_the_python_api_refuses_a_damaged_run_before_its_first_write(base, tmp_path):
    from sparkkafka import Cluster
    from sparkkafka.tools import operator as op

    run, named, _ = _damaged_copy(base, tmp_path, _remove_state)
    before = snapshot(run)
    c = Cluster.for_path(None, run)  # a reader: the tables are whole
    with pytest.raises(DamagedRunError, match="state/ .*is missing"):
        c.step()
    r = op.Run.open(run)
    op.admin.elect_leaders(r.state, "preferred")
    with pytest.raises(DamagedRunError, match="state/ .*is missing"):
        r.save()
    assert snapshot(run) == before
    run2, named, _ = _damaged_copy(base, tmp_path / "b", _delete_data_file)
    with pytest.raises(DamagedRunError) as e:
        Cluster.for_path(None, run2)
    assert e.value.file == os.path.join(run2, named)


def test_a_writer_reads_each_delta_log_once(base, tmp_path, capsys, monkeypatch):
    """One writer command checks each table once: Run.open's read check covers Run.save's write check (which
    still checks the brokers' rows, as the test above shows), for_path's covers the first write, and the CLI's
    check under the lock covers the Run it opens."""
    from sparkkafka import Cluster, run_check
    from sparkkafka.storage import tables as T
    from sparkkafka.tools import operator as op

    read: list[str] = []
    check_table = run_check.check_table
    monkeypatch.setattr(run_check, "check_table", lambda run, name, *a: (read.append(name), check_table(run, name, *a)))
    run, _, plan = _damaged_copy(base, tmp_path, lambda run: "")
    r = op.Run.open(run)
    op.admin.elect_leaders(r.state, "preferred")
    r.save()
    assert sorted(read) == sorted(T.SCHEMAS)
    read.clear()
    Cluster.for_path(None, run).step()
    assert sorted(read) == sorted(T.SCHEMAS)
    read.clear()
    assert cli(capsys, *_writers(run, plan)["reassign --execute"])[0] == 0
    assert sorted(read) == sorted(T.SCHEMAS)


def test_a_corrupt_checkpoint_and_a_missing_commit_are_named(tmp_path, capsys):
    """What a reader loads besides the commits: a checkpoint's add actions, and no gap before the version. A
    whole checkpoint passes, and a commit before it is not read (a cut line there is no damage)."""
    from sparkkafka import Cluster
    from sparkkafka.run_check import check_run
    from sparkkafka.scenario import parse_scenario

    sc = copy.deepcopy(LOCAL)
    sc["cluster"]["emulator"]["delta.checkpoint.interval"] = 1  # a checkpoint at every version
    run = str(tmp_path / "run")
    Cluster.from_scenario(parse_scenario(sc, name="tiny"), out=run).step(rounds=2)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    log = os.path.join(run, "tables", "partition_state", "_delta_log")
    assert os.path.exists(os.path.join(log, f"{1:020d}.checkpoint.parquet"))
    check_run(run, writes=True)
    with open(os.path.join(log, f"{1:020d}.json"), "a") as f:
        f.write('{"add": {"pa\n')
    check_run(run, writes=True)
    os.unlink(os.path.join(log, f"{1:020d}.checkpoint.parquet"))
    with pytest.raises(DamagedRunError, match="00000000000000000001.json line 3 is not a JSON action"):
        check_run(run)
    os.unlink(os.path.join(log, f"{0:020d}.json"))
    with pytest.raises(DamagedRunError, match="commit 0 of the partition_state table, needed to load version 1"):
        check_run(run)
    with open(os.path.join(log, f"{1:020d}.checkpoint.parquet"), "wb") as f:
        f.write(b"PAR1 cut")
    with pytest.raises(DamagedRunError, match=r"00000000000000000001.checkpoint.parquet is not a readable Delta"):
        check_run(run)
    before = snapshot(run)
    assert cli(capsys, *_writers(run, plan)["leader-election"])[0] == 2 and snapshot(run) == before


@pytest.mark.parametrize("entry", [
    {"topic": "t", "partition": 7, "replicas": [1, 2]},  # no such partition: UNKNOWN_TOPIC_OR_PARTITION
])
@pytest.mark.parametrize("throttle", [None, "1000"])
def test_a_reassignment_refused_for_every_partition_exits_1_and_changes_no_byte(base, tmp_path, capsys, entry,
                                                                                throttle):
    run, _, _ = _damaged_copy(base, tmp_path, lambda r: None)
    plan = tmp_path / "refused.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [entry]}))
    before = snapshot(run)
    args = ["reassign", run, "--execute", "--reassignment-json-file", plan]
    code, out, _ = cli(capsys, *args, *(["--throttle", throttle] if throttle else []))
    assert code == 1 and "Error reassigning partition(s):\nt-7: This server does not host this topic-partition." in out
    assert snapshot(run) == before
    # a plan with one accepted partition is a change: saved
    plan.write_text(json.dumps({"version": 1, "partitions": [entry, PLAN["partitions"][0]]}))
    assert cli(capsys, *args)[0] == 1
    assert snapshot(run)["driver-state.json"] != before["driver-state.json"]


def _scenario(tmp_path) -> str:
    path = tmp_path / "tiny.yaml"
    path.write_text(json.dumps({**LOCAL, "name": "tiny"}))
    return str(path)


def test_a_failed_run_does_not_block_its_retry_with_overwrite(tmp_path, capsys, monkeypatch):
    """A run that fails after its directory was made (here: its first round raises, as a worker that cannot
    start its Python does) leaves a run; the retry is told how to replace it, and --overwrite does."""
    from sparkkafka.driver import round_loop

    scenario, out = _scenario(tmp_path), str(tmp_path / "out")

    def broken(self, limit, horizon=None):
        raise RuntimeError("Cannot run program \".venv/bin/python\"")

    with monkeypatch.context() as m:
        m.setattr(round_loop.RoundLoop, "advance", broken)
        code, _, err = cli(capsys, "run", scenario, "--out", out, "--no-progress")
    assert code == 1 and "Cannot run program" in err and os.path.exists(os.path.join(out, "run.json"))
    code, _, err = cli(capsys, "run", scenario, "--out", out, "--no-progress")
    assert code == 2, err
    assert f"replace it with --overwrite (sparkkafka run {scenario} --out {out} --overwrite" in err, err
    assert f"continue it with sparkkafka run {out}" in err, err
    code, out_text, err = cli(capsys, "run", scenario, "--out", out, "--overwrite", "--no-progress")
    assert code == 0, err
    assert json.loads(out_text[out_text.index("{"):])["acked"] == 2


@pytest.mark.parametrize("under", [False, True])
def test_run_out_naming_a_file_exits_2_before_anything_is_created(tmp_path, capsys, under):
    scenario = _scenario(tmp_path)
    existing = tmp_path / "a-file"
    existing.write_text("not a directory\n")
    out = existing / "run" if under else existing
    before = sorted(os.listdir(tmp_path))
    code, stdout, err = cli(capsys, "run", scenario, "--out", out, "--no-progress")
    assert (code, stdout) == (2, ""), err
    assert err.startswith("sparkkafka: error: --out: ") and f"(got '{out}')" in err, err
    assert "a file, not a directory" in err, err
    assert sorted(os.listdir(tmp_path)) == before and existing.read_text() == "not a directory\n"
    from sparkkafka import Cluster

    with pytest.raises(ScenarioError, match="^out: .*a file, not a directory"):
        Cluster.from_scenario(scenario, out=str(out))


def test_a_driver_state_that_is_json_but_not_a_state_is_named(base, tmp_path, capsys):
    """Whole JSON with the wrong fields: loading it (every tool that uses the driver state) names it."""
    def foreign(run: str) -> str:
        with open(os.path.join(run, "driver-state.json"), "w") as f:
            json.dump({"round": 3}, f)
        return "driver-state.json"

    run, named, plan = _damaged_copy(base, tmp_path, foreign)
    for args in (_writers(run, plan)["leader-election"], _writers(run, plan)["reassign --execute"],
                 _readers(run, plan)["describe"], _readers(run, plan)["log-dirs"]):
        _assert_refused(capsys, args, run, named)
