"""The run directory's driver state (run_dir.py) as plain data, without Spark: typed state -> files ->
typed state gives the same values and types, a control plane reopened after every step goes on exactly as
one that never stopped, and a run saved in another format is refused by number."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_controller_handle import _drive

from sparkkafka import plaindata
from sparkkafka import run_dir as run_dir_mod
from sparkkafka.controller.control_plane import ControlPlane
from sparkkafka.controller.events import AlterIsrReceived, ApiPartitionReassignment
from sparkkafka.errors import ScenarioError
from sparkkafka.plaindata import from_plain, to_plain
from sparkkafka.protocol import frames as F
from sparkkafka.protocol.config import broker_config
from sparkkafka.run_dir import DRIVER_STATE, MANIFEST, RUN_FORMAT_VERSION, DriverState, RunDir
from sparkkafka.scenario import load_scenario
from sparkkafka.scenario.workload import Workload

SCENARIO = Path(__file__).resolve().parents[1] / "conf" / "scenarios" / "failures.yaml"


def _through_json(x):
    return json.loads(json.dumps(x))


def test_plain_values_come_back_equal_and_of_the_same_types():
    frame = pd.DataFrame({"broker": np.array([2, 1], dtype="int32"), "topic": ["a", None],
                          "ok": [True, False], "leo": np.array([5, -1], dtype="int64")}, index=[7, 3])
    value = {"t": (1, "a", None), 3: {frozenset({2, 1}), frozenset()}, "@": [1.5, float("inf")],
             "arr": np.arange(3, dtype="int32"), "np": np.int32(4), "frame": frame, "empty": frame.iloc[0:0]}
    back = from_plain(_through_json(to_plain(value)))
    assert list(back) == list(value)
    assert back["t"] == (1, "a", None) and back[3] == {frozenset({1, 2}), frozenset()}
    assert back["@"] == [1.5, float("inf")] and type(back["np"]) is int and back["np"] == 4
    assert back["arr"].dtype == np.int32 and back["arr"].tolist() == [0, 1, 2]
    pd.testing.assert_frame_equal(back["frame"], frame)
    pd.testing.assert_frame_equal(back["empty"], frame.iloc[0:0])
    with pytest.raises(TypeError, match="no plain form"):
        to_plain(object())
    with pytest.raises(ValueError, match="outside sparkkafka"):
        from_plain({"@": "os:system"})


def test_lists_that_are_not_alike_rows_are_stored_item_by_item():
    """Rows form only when every row has the same shape and every value is a JSON scalar (or a list of them):
    the checks a column at a time refuse what the checks a row at a time refused."""
    n = plaindata.ROWS + 2
    unlike = {
        "key order": [{"a": i, "b": i} for i in range(n - 1)] + [{"b": 0, "a": 0}],
        "nested list": [{"a": [i, {"x": 1}] if i == 5 else [i]} for i in range(n)],
        "tuple length": [(i, i) for i in range(n - 1)] + [(1,)],
        "a set": [(i, {i}) for i in range(n)],
        "a subclass": [(i, True if i else np.bool_(False)) for i in range(n)] + [(0, type("S", (str,), {})("s"))],
    }
    for what, items in unlike.items():
        assert plaindata._rows_of(items) is None, what
    alike = [(i, [i, None, "x"], np.int32(i), 1.5) for i in range(n)]
    assert plaindata._rows_of(alike) is not None
    assert plaindata._column(alike, 2, plaindata._rows_of(alike), 0, 3) == [0, 1, 2]
    assert [type(v) for v in plaindata._column(alike, 2, plaindata._rows_of(alike), 0, 3)] == [int] * 3


@pytest.mark.parametrize("batch", [4096, 3])
def test_long_lists_of_like_rows_and_long_maps_are_stored_by_column_and_come_back_equal(batch, monkeypatch):
    """A new cluster's controller queues a LeaderAndIsr entry per replica and maps every replica to a
    state: such lists and maps are written column by column (one tagged object, not one per entry),
    dump_fields' text still json.dumps(to_plain(...))'s, and read back equal, of the same types."""
    from sparkkafka.controller.instructions import LeaderAndIsr
    from sparkkafka.controller.state_machines import ReplicaState

    monkeypatch.setattr(plaindata, "BATCH", batch)
    n = plaindata.ROWS + 6
    value = {
        "entries": [LeaderAndIsr(i % 5, "t", i, i % 5, 0, 1, "0,1,2", "0,1,2", True, None if i % 2 else "/d0", 0)
                    for i in range(n)],
        "writes": [{"partition": i, "isr": [i, i + 1], "ok": i % 3 == 0, "x": np.int64(i)} for i in range(n)],
        "lines": [(i, "m", None) for i in range(n)],
        "states": {("t", i, i % 3): ReplicaState.OnlineReplica if i % 4 else ReplicaState.OfflineReplica
                   for i in range(n)},
        "by_id": {i: float(i) / 2 for i in range(n)},
        "mixed": [(i, "m") for i in range(n)] + [(1, 2, 3)],  # not alike: stored item by item
        "short": [(i, "m") for i in range(3)],
    }
    plain = to_plain(value)
    for k in ("entries", "writes", "lines"):
        assert plain[k]["@"] == "rows" and len(plain[k]["columns"][0]) == n
    assert plain["states"]["@"] == "map rows" and plain["by_id"]["@"] == "map rows"
    assert isinstance(plain["mixed"], list) and isinstance(plain["short"], list)
    back = from_plain(_through_json(plain))
    expected = {**value, "writes": [{**w, "x": int(w["x"])} for w in value["writes"]]}
    assert back == expected and list(back["states"]) == list(value["states"])
    assert type(back["entries"][0]) is LeaderAndIsr and type(back["writes"][0]["x"]) is int
    assert type(back["states"][("t", 1, 1)]) is ReplicaState and type(back["lines"][0]) is tuple
    chunks = "".join(plaindata._chunks(value))
    assert chunks == json.dumps(plain)


def _state() -> DriverState:
    """A run's driver state a few steps in: producers, a crash, an isolation, queued messages, rows."""
    sc = load_scenario(SCENARIO)
    cfg = broker_config(sc.config)
    cp = ControlPlane(list(sc.brokers), sc.racks, cfg, sc.seed, "2.8", emulator=dict(sc.emulator))
    for spec in sc.topics:
        cp.create_topic(spec, 0)
    cp.start(-100)
    wl = Workload(100, 30000)
    for e in sc.timeline[:2]:
        wl.add(e.args, 0, cp.partition_count(e.args["topic"]))
    wl.batches(0)
    cp.crash(2, 100)
    cp.tick(100, frozenset())
    cp.admin(ApiPartitionReassignment("admin-1", {("a", 0): [1, 0]}), 100)
    alter = F.conform(pd.DataFrame([{"broker": 0, "topic": "a", "partition": 1, "leader_epoch": 0, "zk_version": 0,
                                     "controller_epoch": 1, "isr": "0,1", "kind": "shrink"}]), F.ISR_CHANGE)
    cp.active().queue.append(AlterIsrReceived(alter))  # an event carrying a frame, waiting in the queue
    rows = defaultdict(list, {"state_change_log": [{"time_ms": 100, "broker": -1, "controller_epoch": -1,
                                                    "topic": None, "partition": None, "message": "[Admin] x"}]})
    return DriverState(
        scenario=sc, run_id="r1", round_ms=100, control=cp, workload=wl, spark_partitions=2, round=2,
        events=sorted(sc.timeline, key=lambda e: (e.time_ms(100), e.index)), next_event=3, crashed={2},
        paused_until={1: 1200}, isolations=[(frozenset({1}), frozenset({0}), 2100), (frozenset({0}), frozenset({2}), None)],
        offline_dirs={0: {"d1"}},
        alter_dir_responses=[pd.DataFrame({"broker": [0], "topic": ["a"], "partition": [1], "log_dir": ["d1"],
                                           "error": [None], "time_ms": [200]})],
        outbox=[(15, pd.DataFrame({"broker": [2]}), -1)], produced=12, driver_rows=rows,
        tool_state={"admin_seq": 1, "dir_moves": {("a", 1, 0): "d1"}}, flushed_round=2, state_folder="state/x")


def _same(a: DriverState, b: DriverState) -> None:
    assert json.dumps(a.to_dict()) == json.dumps(b.to_dict())
    assert b.scenario == a.scenario and b.events == a.events and b.crashed == {2}
    assert b.isolations == a.isolations and isinstance(b.isolations[0][0], frozenset)
    assert b.offline_dirs == {0: {"d1"}} and b.tool_state == a.tool_state
    assert isinstance(b.driver_rows, defaultdict) and b.driver_rows == a.driver_rows
    for (k1, f1, s1), (k2, f2, s2) in zip(a.outbox, b.outbox, strict=True):
        assert (k1, s1) == (k2, s2)
        pd.testing.assert_frame_equal(f1, f2)
    pd.testing.assert_frame_equal(a.alter_dir_responses[0], b.alter_dir_responses[0])
    assert b.workload.to_dict() == a.workload.to_dict() and b.workload.next_record_id == a.workload.next_record_id
    assert b.control.zk == a.control.zk
    ca, cb = a.control.active(), b.control.active()
    assert cb.zk is b.control.zk  # the controllers share the plane's ZooKeeper again
    assert cb.partition_states.states == ca.partition_states.states and cb.reassigning == ca.reassigning
    pd.testing.assert_frame_equal(cb.queue[-1].requests, ca.queue[-1].requests)
    assert cb.topic_config("a") == ca.topic_config("a")


def test_driver_state_round_trips_through_the_run_directory(tmp_path):
    d = _state()
    _same(d, DriverState.from_dict(_through_json(d.to_dict())))
    rd = RunDir(tmp_path)
    rd.save(d)
    assert sorted(os.listdir(tmp_path)) == [DRIVER_STATE, MANIFEST, "run.json", "zookeeper.json"]
    assert json.loads((tmp_path / MANIFEST).read_text()) == {"format_version": RUN_FORMAT_VERSION, "round": 2}
    assert rd.meta()["live_brokers"] == [0, 1, 2] and rd.meta()["round"] == 2  # 2 crashed: its session is open
    back = RunDir(tmp_path).load()
    _same(d, back)
    # the reopened state goes on as the original does
    for x in (d, back):
        x.control.tick(300, frozenset())
    assert json.dumps(d.to_dict()) == json.dumps(back.to_dict())
    pd.testing.assert_frame_equal(d.workload.batches(300), back.workload.batches(300))


@pytest.mark.parametrize("batch, small", [(4096, 64), (2, 1)])
def test_the_driver_state_file_is_written_as_it_goes_and_holds_to_dicts_text(tmp_path, monkeypatch, batch, small):
    """RunDir.save_driver streams the state (plaindata.dump_fields: walked containers, items in batches; at
    1M replicas its plain form whole is GBs): the file is json.dumps(to_dict()), byte for byte."""
    monkeypatch.setattr(plaindata, "BATCH", batch)
    monkeypatch.setattr(plaindata, "_SMALL", small)
    d = _state()
    d.driver_rows["metrics"] = [{"round": r, "x": (r, [r] * 3)} for r in range(7)]  # items batched around large ones
    d.tool_state["big"] = [(i, {"k": [i] * 3}) for i in range(5)] + [list(range(100))]
    RunDir(tmp_path).save_driver(d)
    assert (tmp_path / DRIVER_STATE).read_text() == json.dumps(d.to_dict())


def test_the_scenario_made_plain_once_is_still_the_saved_text_and_a_new_scenario_is_saved_anew(tmp_path, monkeypatch):
    """RunDir keeps the JSON text of the scenario it saved last (a frozen object): a later save of the same one
    reuses it, and one with another scenario (the engine changed on the command line) writes that one."""
    d = _state()
    rd = RunDir(tmp_path)
    rd.save_driver(d)
    made = []
    monkeypatch.setattr(run_dir_mod, "dumps", lambda v: made.append(v) or plaindata.dumps(v))
    d.round += 1
    rd.save_driver(d)
    assert made == [] and (tmp_path / DRIVER_STATE).read_text() == json.dumps(d.to_dict())
    d.scenario = d.scenario.on_engine("local")
    rd.save_driver(d)
    assert made == [d.scenario] and (tmp_path / DRIVER_STATE).read_text() == json.dumps(d.to_dict())
    assert RunDir(tmp_path).load().scenario.emulator["engine"] == "local"


@pytest.mark.parametrize("version", [1, 2])
def test_a_run_of_another_format_is_refused_naming_the_version(tmp_path, version):
    rd = RunDir(tmp_path)
    rd.save(_state())
    (tmp_path / MANIFEST).write_text(json.dumps({"format_version": version, "round": 2}))
    with pytest.raises(ScenarioError, match=rf"run format {version}; this sparkkafka continues format 3") as e:
        rd.load()
    assert (e.value.field, e.value.value) == ("driver.json format_version", version)
    assert rd.meta()["round"] == 2  # what describes the run stays readable


@pytest.mark.parametrize("seed,profile", [(1, "2.8"), (2, "2.1")])
def test_a_control_plane_reopened_after_every_step_goes_on_as_one_that_never_stopped(seed, profile):
    snapshots: dict[bool, list[str]] = {False: [], True: []}

    def keep(reopened: bool):
        def hook(cp: ControlPlane, step: int) -> ControlPlane:
            plain = json.dumps(cp.to_dict())
            snapshots[reopened].append(plain)
            return ControlPlane.from_dict(json.loads(plain)) if reopened else cp
        return hook

    _, lines = _drive(seed, profile, reopen=keep(False))
    _, reopened_lines = _drive(seed, profile, reopen=keep(True))
    assert reopened_lines == lines and len(lines) > 20
    assert snapshots[True] == snapshots[False]


def test_a_step_without_save_commits_the_tables_and_leaves_the_saved_run_as_it_was(tmp_path):
    """`step(n, save=False)` (what whatif's loops take between their reads): the rounds' rows are in the tables,
    the saved driver state is still the last save's; the next `step` saves it."""
    from sparkkafka import Cluster
    from sparkkafka.storage import tables as T

    sc = {"cluster": {"brokers": [1, 2, 3], "emulator": {"engine": "local"}},
          "topics": [{"name": "t", "partitions": 2, "replication_factor": 3}],
          "timeline": [{"at": 0, "produce": {"topic": "t", "partition": "all", "rate_per_sec": 100,
                                             "duration_ms": 2000, "acks": "all"}}],
          "run": {"until_ms": 2000}}
    c = Cluster.from_scenario(sc, out=str(tmp_path / "run")).step(3)
    saved = (tmp_path / "run" / DRIVER_STATE).read_bytes()
    c.step(5, save=False)
    rounds = T.read_table(c.tables_dir, "metrics", columns=["round"]).column("round").to_pylist()
    assert max(rounds) == 7 and (tmp_path / "run" / DRIVER_STATE).read_bytes() == saved
    c.step(1)
    assert (tmp_path / "run" / DRIVER_STATE).read_bytes() != saved
    assert Cluster.for_path(None, str(tmp_path / "run")).round == 9
