"""The resident engine (engine/resident.py): many rounds per Spark job, the same tables as one job per round."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import harness as H
import pandas as pd
import pytest
import yaml
from test_determinism import assert_same, tables

from sparkkafka import Cluster
from sparkkafka.driver.round_loop import RoundLoop
from sparkkafka.engine import rows as W
from sparkkafka.scenario import parse_scenario

ROOT = Path(__file__).resolve().parents[1]


def _scenario(name: str, engine: str, **emulator):
    raw = yaml.safe_load((ROOT / "conf" / "scenarios" / f"{name}.yaml").read_text())
    raw.setdefault("cluster", {}).setdefault("emulator", {}).update({"engine": engine, **emulator})
    return parse_scenario(raw, name=name)


@pytest.fixture(scope="module")
def round_engine(spark, tmp_path_factory):
    """The round engine's (tables, summary) of a scenario, run once per module (the reference every
    resident variant of it is compared with)."""
    done: dict[str, tuple] = {}

    def get(name: str) -> tuple:
        if name not in done:
            out = str(tmp_path_factory.mktemp(f"rounds-{name}") / "run")
            c = Cluster.from_scenario(_scenario(name, "rounds"), spark=spark, out=out).run()
            done[name] = (tables(out), c.summary())
        return done[name]

    return get


@pytest.mark.parametrize(("name", "emulator", "reopen_ms"), [
    # stopped at 0.65 s (in the middle of a window, while broker 2 is down) and reopened from its run
    # directory: the state is read back from disk and shuffled into place again
    ("failures", {}, 650),
    # one task hosting every broker, and windows cut short by resident.rounds as well as by the controller
    pytest.param("failures", {"spark.partitions": 1, "resident.rounds": 7}, None, marks=pytest.mark.slow),
])
def test_resident_engine_gives_the_round_engines_tables(spark, tmp_path, round_engine, name, emulator,
                                                       reopen_ms):
    out = str(tmp_path / "resident")
    c = Cluster.from_scenario(_scenario(name, "resident", **emulator), spark=spark, out=out)
    if reopen_ms is not None:
        c.run(until_ms=reopen_ms)
        assert c.round == reopen_ms // 100 + 1
        c = Cluster.for_path(spark, out)
    c.run()
    want_tables, want_summary = round_engine(name)
    assert_same(tables(out), want_tables)
    assert c.summary() == want_summary


def test_unknown_engine_is_a_scenario_error():
    from sparkkafka.errors import ScenarioError

    with pytest.raises(ScenarioError, match=r"cluster\.emulator\.engine.*warp"):
        _scenario("quickstart", "warp")


class _Conf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)


class _Session:
    def __init__(self, **values: str) -> None:
        self.conf = _Conf({k.replace("_", "."): v for k, v in values.items()})


@pytest.mark.parametrize(("master", "dynamic", "engine", "window"), [
    ("local[2]", "false", "resident", 200),
    ("spark://host:7077", "false", "resident", 200),
    ("spark://host:7077", "true", "rounds", 1),  # Spark refuses barrier jobs with dynamic allocation
    ("local[2]", "true", "resident", 200),  # which local mode ignores
])
def test_resident_is_the_default_engine_except_under_dynamic_allocation(master, dynamic, engine, window):
    from sparkkafka.driver.round_loop import RoundLoop

    raw = yaml.safe_load((ROOT / "conf" / "scenarios" / "failures.yaml").read_text())
    raw["cluster"].get("emulator", {}).pop("engine", None)
    sc = parse_scenario(raw, name="failures")
    assert sc.emulator["engine"] == "resident"
    loop = object.__new__(RoundLoop)  # only the two things the choice reads: the scenario and the session
    loop.driver = SimpleNamespace(scenario=sc)
    loop.spark = _Session(spark_master=master, spark_dynamicAllocation_enabled=dynamic)
    assert (loop.engine, loop.window_limit()) == (engine, window)


def test_window_log_files_merge_into_one_per_broker_dir(tmp_path):
    """A window's own log files become one file per (broker, log_dir); reads see the same records."""
    import os

    from deltalake import DeltaTable
    from test_log_truncation import LAYOUT, _build, _file_table

    from sparkkafka.engine.resident import merge_window_logs
    from sparkkafka.storage import tables as T
    from sparkkafka.storage.broker_disk import read_log

    tmp = str(tmp_path / "tables")
    _build(tmp, LAYOUT)
    v = DeltaTable(T.table_path(tmp, "log")).version()
    files = [T.write_file(tmp, "log", _file_table([(1, "d0", "t0", 0, 20 + 5 * r + i, 1000 + 10 * r + i, False)
                                                   for i in range(5)]), f"{r:08d}-b1", {"broker": 1, "log_dir": "d0"})
             for r in (4, 5, 6)]
    files.append(T.write_file(tmp, "log", _file_table([(1, "d1", "t1", 1, 20, 2000, False)]), "00000006-b1",
                              {"broker": 1, "log_dir": "d1"}))
    snap = T.LogSnapshot(v).then(files)
    cols = ["broker", "log_dir", "topic", "partition", "offset", "record_id"]
    before = read_log(tmp, snap, 1, cols).to_pandas().sort_values(cols).reset_index(drop=True)

    merged = merge_window_logs(tmp, snap, 4, 6)
    adds = [a for a in merged if not a.get("remove")]
    assert len(adds) == 1 and adds[0]["partition_values"] == {"broker": "1", "log_dir": "d0"}
    assert sorted(a["path"] for a in merged if a.get("remove")) == sorted(f["path"] for f in files[:3])
    assert json.loads(adds[0]["stats"])["numRecords"] == 15
    root = T.table_path(tmp, "log")
    assert not any(os.path.exists(os.path.join(root, f["path"])) for f in files[:3])  # replaced files deleted
    assert os.path.exists(os.path.join(root, files[3]["path"]))  # a lone file stays as it is
    after = read_log(tmp, snap.then(merged), 1, cols).to_pandas().sort_values(cols).reset_index(drop=True)
    pd.testing.assert_frame_equal(after, before)


def test_a_fetch_read_in_a_window_takes_the_held_rows_from_memory(tmp_path):
    """A round's log read (a follower behind the leader's tail) sees the rows earlier rounds of the window
    hold, the same records in the same order as after writing them, and writes no file for it: a mid-window
    write split a window's log into files that its end then merged again."""
    import os
    from dataclasses import replace

    from deltalake import DeltaTable
    from test_log_truncation import LAYOUT, _build, _file_table

    from sparkkafka.engine.broker_round import RoundParams, WindowFiles, _read
    from sparkkafka.protocol.broker import ReadLog, RoundFacts
    from sparkkafka.storage import tables as T

    tmp = str(tmp_path / "tables")
    _build(tmp, LAYOUT)
    p = RoundParams(run_id="test", round_no=7, now=700, tables_dir=tmp, brokers_dir=str(tmp_path / "brokers"),
                    log_version=T.LogSnapshot(DeltaTable(T.table_path(tmp, "log")).version()), facts=RoundFacts(cfg=H.settings(), min_isr={}, log_dirs=("d0", "d1")))
    held = WindowFiles(writer=0)
    part = ["broker", "log_dir"]
    for r in (4, 5, 6):  # t0-0 offsets 20.. in d0, round by round, and one future row that a read skips
        held.hold(r, [(1, "d0", _file_table([(1, "d0", "t0", 0, 20 + 2 * (r - 4) + i, 900 + 2 * r + i, False)
                                             for i in range(2)]).drop_columns(part))], [])
    held.hold(6, [(1, "d1", _file_table([(1, "d1", "t0", 0, 26, 999, True)]).drop_columns(part))], [])
    req = ReadLog(pd.DataFrame({"broker": [1, 1], "topic": ["t0", "t1"], "partition": [0, 0],
                                "from_offset": [0, 0], "to_offset": [24, 100]}))
    root = T.table_path(tmp, "log")
    files_before = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)

    got = _read(p, req, held)

    assert sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs) == files_before
    t0 = got[got["topic"] == "t0"]
    assert t0["offset"].tolist()[-4:] == [20, 21, 22, 23]  # the held rows in range, after the committed ones
    assert t0["record_id"].tolist()[-4:] == [908, 909, 910, 911]
    written = held.flush(tmp, history=False)
    pd.testing.assert_frame_equal(_read(replace(p, log_version=p.log_version.then(written)), req), got)


def test_local_engine_gives_the_round_engines_tables(tmp_path, round_engine):
    """The in-process engine (engine/local.py) runs without a Spark job per round, nor a SparkSession;
    stopped during the network partition (broker 1 cut off from 0, a pause over) and reopened, its
    brokers' rows are saved and read back as pandas."""
    name, reopen_ms = "failures", 1650
    out = str(tmp_path / "local")
    c = Cluster.from_scenario(_scenario(name, "local"), spark=None, out=out)
    assert c.spark is None
    if reopen_ms is not None:
        c.run(until_ms=reopen_ms)
        c = Cluster.for_path(None, out)
        assert c.spark is None and isinstance(c.state, pd.DataFrame) and len(c.state)
    c.run()
    want_tables, want_summary = round_engine(name)
    assert_same(tables(out), want_tables)
    assert c.summary() == want_summary


def test_carried_frames_lose_what_a_crash_or_a_partition_loses_between_windows():
    # as RoundLoop.route filters the brokers' rows between jobs: a crashed broker's state and what is sent
    # to it; messages across a network partition; but a parked fetch (state) stays on a cut link
    from sparkkafka.engine.resident import arrive
    from sparkkafka.protocol import frames as F

    def frame(spec, rows):
        return F.conform(pd.DataFrame([{c: "t" if t == F.STR else 0 for c, t in spec.items()} | r for r in rows]), spec)

    reps = F.new_replicas(pd.DataFrame({"broker": [1, 2, 3], "topic": "t", "partition": 0, "log_dir": "d"}))
    msgs = frame(F.FETCH, [{"broker": b, "src": s} for b, s in ((1, 2), (2, 3), (3, 1))])
    parked = frame(F.FETCH, [{"broker": 1, "src": 2}, {"broker": 3, "src": 2}])
    got = arrive({W.REPLICA: reps, W.FETCH: msgs, W.PARKED_FETCH: parked}, frozenset({3}), (({1}, {2}),))
    assert got[W.REPLICA]["broker"].tolist() == [1, 2]
    assert got[W.FETCH][["broker", "src"]].values.tolist() == [[2, 3]]  # 1<-2 cut, 3 crashed
    assert got[W.PARKED_FETCH][["broker", "src"]].values.tolist() == [[1, 2]]
    assert arrive({W.FETCH: msgs}, frozenset(), ())[W.FETCH] is msgs


@pytest.mark.parametrize("route_rows", [200_000, 1])
def test_batches_sent_to_a_down_leader_in_a_window_fail_in_the_round_they_were_sent(spark, tmp_path, monkeypatch,
                                                                                    route_rows):
    """The tasks make a window's produce batches themselves; the driver answers the ones with no live
    leader for all the window's rounds at once (or in runs of rounds, `ROUTE_ROWS`), each failing at its own
    round's time, as one job per round answers them."""
    monkeypatch.setattr(RoundLoop, "ROUTE_ROWS", route_rows)
    sc = parse_scenario({
        "seed": 3, "cluster": {"brokers": 2, "log_dirs": ["d0"], "emulator": {"engine": "resident"}},
        "topics": [{"name": "solo", "partitions": 1, "replication_factor": 1, "assignment": {0: [1]}}],
        "timeline": [{"at": 0, "produce": {"topic": "solo", "partition": "all", "acks": 1, "rate_per_sec": 10,
                                           "duration_ms": 1500}},
                     {"at": 300, "crash": 1}, {"at": 1000, "restart": 1}],
        "run": {"until_ms": 1500}}, name="solo")
    c = Cluster.from_scenario(sc, spark=spark, out=str(tmp_path / "run"))
    windows = []
    while c.round <= 15:
        first = c.round
        windows.append((first, c.loop.advance(min(16 - c.round, c.loop.window_limit()))))
    assert any(first <= 3 and first + n >= 10 for first, n in windows)  # one window spans the crash
    c.run()
    r = c.produce_results().orderBy("record_id").toPandas()
    down = r[(r["time_ms"] >= 300) & (r["time_ms"] < 1000)]
    assert down["time_ms"].tolist() == list(range(300, 1000, 100))
    assert down["record_id"].tolist() == list(range(3, 10))
    assert (~down["acked"]).all() and set(down["error"]) == {"NETWORK_EXCEPTION"} and down["offset"].isna().all()


def _on_both_engines(spark, tmp_path, raw: dict, name: str):
    """Scenario `raw` as a new cluster on the round engine, then on the resident engine: (engine, the Cluster
    not run yet, its run directory)."""
    for engine in ("rounds", "resident"):
        sc = parse_scenario({**raw, "cluster": {**raw["cluster"], "emulator": {"engine": engine}}}, name=name)
        out = str(tmp_path / engine)
        yield engine, Cluster.from_scenario(sc, spark=spark, out=out), out


def test_crashes_inside_a_window_give_the_round_engines_tables(spark, tmp_path):
    """The controller's broker and another broker crash (at 400 and 700 ms, both leading partitions): nothing
    needs the driver until their ZooKeeper sessions expire (1.5 s later). One resident window runs through
    both crashes, its tasks dropping each broker's memory and what is sent to it from the crash's round on,
    and the driver applying the events after the window. The tables and the summary are the round engine's."""
    raw = {"seed": 5, "cluster": {"brokers": 4, "log_dirs": ["d0", "d1"],
                                  "config": {"zookeeper.session.timeout.ms": 1500, "min.insync.replicas": 2}},
           "topics": [{"name": "t", "partitions": 6, "replication_factor": 3}],
           "timeline": [{"at": 0, "produce": {"topic": "t", "partition": "all", "acks": "all", "rate_per_sec": 120,
                                              "duration_ms": 2500}},
                        {"at": 400, "crash": 0}, {"at": 700, "crash": 3}, {"at": 2600, "restart": 0}],
           "run": {"until_ms": 3000}}
    got = {}
    for engine, c, out in _on_both_engines(spark, tmp_path, raw, "crashes"):
        if engine == "resident":
            assert c.loop.control.controller_id() == 0
            windows = []
            while c.round < 20:
                first = c.round
                windows.append((first, c.loop.advance(min(20 - c.round, c.loop.window_limit()))))
            assert any(first <= 4 and first + n > 7 for first, n in windows), windows  # both crashes in one
            assert c.loop.crashed == {0, 3}
        c.run()
        got[engine] = (tables(out), c.summary())
    assert got["resident"][1]["acked"] > 0
    assert_same(got["resident"][0], got["rounds"][0])
    assert got["resident"][1] == got["rounds"][1]


def test_a_windows_rounds_run_without_full_collections_and_the_collector_comes_back_after():
    """young_only: automatic (full) collections are off while a window's rounds run; every YOUNG_ROUNDS-th
    round's end (collect_round) still frees the cycles the rounds made; the collector is on again
    afterwards, also after an error inside."""
    import gc
    import weakref
    from collections import defaultdict

    from sparkkafka.engine.resident import YOUNG_ROUNDS, collect_round, young_only

    class Node:
        pass

    assert gc.isenabled()
    spent: dict[str, float] = defaultdict(float)
    with young_only():
        assert not gc.isenabled()
        n = Node()
        n.me = n  # a cycle: only the cyclic collector frees it
        alive = weakref.ref(n)
        del n
        assert alive() is not None
        for k in range(YOUNG_ROUNDS - 1):
            collect_round(spent, k)
        assert alive() is not None and spent["resident.gc"] == 0
        collect_round(spent, YOUNG_ROUNDS - 1)
        assert alive() is None and spent["resident.gc"] > 0
    assert gc.isenabled()
    with pytest.raises(RuntimeError), young_only():
        raise RuntimeError("a round failed")
    assert gc.isenabled()


def _history_spans(out: Path, table: str) -> list[tuple[int, int]]:
    """(first, last) round of each file a resident task wrote for a history table (its Delta log's adds)."""
    import re

    spans = []
    for f in sorted((out / "tables" / table / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            add = json.loads(line).get("add")
            m = re.search(r"part-h(\d+)-(\d+)-t\d+", add["path"]) if add else None
            if m:
                spans.append((int(m.group(1)), int(m.group(2))))
    return spans


@pytest.mark.parametrize("budget", [1, 10**9])
def test_a_task_writes_its_history_mid_window_past_its_budget(spark, tmp_path, round_engine, budget):
    """emulator.resident.history.rows bounds the history rows a resident task holds: past it, the task writes
    them (one file per table for the rounds held) and the window goes on. The tables are the round engine's
    either way."""
    out = tmp_path / "resident"
    c = Cluster.from_scenario(_scenario("failures", "resident", **{"resident.history.rows": budget}), spark=spark,
                              out=str(out)).run()
    want_tables, want_summary = round_engine("failures")
    assert_same(tables(str(out)), want_tables)
    assert c.summary() == want_summary
    spans = _history_spans(out, "replica_state")
    rounds_held = max(last - first + 1 for first, last in spans)
    if budget == 1:  # every round with history rows writes them: one round a file
        assert rounds_held == 1 and len(spans) > c.round
    else:  # one file per task and window (the longest window here: 15 rounds)
        assert rounds_held > 10 and len(spans) < c.round


def test_a_topic_created_while_no_controller_acts_runs_on_both_engines(spark, tmp_path):
    """The controller's broker crashes; its ZooKeeper session stays open (6 s here), so no controller acts and
    a topic created meanwhile has no partition state yet (Kafka's New partitions). The resident window's
    leader table used to fail on it (NoNodeError, exit 1). Both engines now run through, with the same tables:
    the topic has no leader until the session expires and a new controller creates its partitions."""
    raw = {"seed": 3, "cluster": {"brokers": [1, 2, 3], "config": {"zookeeper.session.timeout.ms": 6000}},
           "topics": [{"name": "t", "partitions": 2, "replication_factor": 2}],
           "timeline": [{"at": 0, "produce": {"topic": "t", "partition": "all", "rate_per_sec": 20,
                                              "duration_ms": 9000, "acks": 1}},
                        {"at": 300, "crash": 1},
                        {"at": 1000, "create_topic": {"name": "u", "partitions": 1, "replication_factor": 2}}],
           "run": {"until_ms": 9000}}
    got = {}
    for engine, c, out in _on_both_engines(spark, tmp_path, raw, "new-topic"):
        assert c.control.controller_id() == 1  # the broker about to crash leads
        c.run()
        got[engine] = tables(out)
        ps = c.partition_state().toPandas()
        u = ps[ps["topic"] == "u"]
        assert len(u) and u["time_ms"].min() >= 300 + 6000  # its first state once broker 1's session expired
        assert c.describe_topics().toPandas().set_index("topic").loc["u", "leader"] in (2, 3)
    assert_same(got["rounds"], got["resident"])
