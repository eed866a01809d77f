"""`sparkkafka replay SCENARIO --on-kafka 2.8.2 --out DIR` (docs/replay.md): the same scenario on the emulator
(DIR/emulator, the run verb's own path) and on a real Kafka cluster (DIR/kafka), then each partition's
(time, leader, leader epoch, ISR) sequence of both sides compared within compare.py's tolerances, written
to DIR/comparison.json and printed.

The emulator runs first: its partition_state says which replicas each partition was created on (the seeded
placement of AdminUtils.assignReplicasToBrokers), and the real topics are created with that assignment, so
both sides start from the same preferred leaders. Spark has stopped before the JVMs start.

Beside the sequences: Kafka's tools at the end (kafka-topics --describe, kafka-log-dirs --describe,
kafka-reassign-partitions --verify of each plan) against the emulator's same verbs, byte for byte once
`masked`; and each throttled move's duration on Kafka against the emulator's and the ETA `whatif --reassign`
predicts from a snapshot of the emulated cluster just before the plan (`compare_moves`).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ScenarioError
from . import compare as C
from . import jars
from .timeline import all_topics

FIRST_FETCH_S = 1.0  # after the replicas' logs exist, for their followers' first fetch
SAMPLE_MS = 200  # observe.py's znode polling interval, and the shortest emulator state compared
RESTART_WAIT_MS = 30_000  # how long past the end a restarted broker's registration is waited for
OWN_ENTRIES = ("emulator", "kafka", "whatif", "comparison.json", "emulator-run.txt")  # what replay writes in DIR


def check_version(version: str) -> None:
    """--on-kafka names a version this harness can start (jars.SUPPORTED)."""
    if version not in jars.SUPPORTED:
        raise ScenarioError("--on-kafka", version, f"replay starts real Kafka {', '.join(jars.SUPPORTED)} only")


def check_out(out: str, overwrite: bool, scenario: str, version: str) -> None:
    """DIR is a directory (or can be one) and, without --overwrite, empty: a previous replay is not mixed
    with a new one (as `run --out` refuses a directory that holds a run)."""
    from ..run_dir import require_out_dir

    require_out_dir(out, "--out")
    if os.path.isdir(out) and os.listdir(out) and not overwrite:
        raise ScenarioError("--out", out, "directory is not empty (a previous replay?): replace it with --overwrite "
                                          f"(sparkkafka replay {scenario} --on-kafka {version} --out {out} "
                                          "--overwrite), or name another directory")


def clear_out(out: str) -> None:
    """--overwrite: remove what an earlier replay wrote into DIR (other files stay)."""
    for name in OWN_ENTRIES:
        path = os.path.join(out, name)
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)


# ------------------------------------------------------------------ the two sides


@dataclass
class Side:
    """What one side did: its partition states, records and replicas' log end offsets."""

    changes: dict[tuple[str, int], C.Seq]
    records: dict[str, Any]  # acked, not_acked, errors
    log_end_offsets: dict[tuple[str, int], dict[int, int]] = field(default_factory=dict)
    observed_until_ms: int = 0
    restarts: list[dict[str, Any]] = field(default_factory=list)
    wall_s: float = 0.0
    # the replicas reassignment plans name, at the end: (topic, partition) -> broker -> {"dir", "bytes"}
    replicas: dict[tuple[str, int], dict[int, dict[str, Any]]] = field(default_factory=dict)
    # a tool's output at the end, by the Kafka command it is: "kafka-topics --describe" -> its stdout
    tools: dict[str, str] = field(default_factory=dict)
    # (time_ms, epoch) of each controller epoch: Kafka's /controller_epoch, the emulator's metrics
    controller_epochs: list[tuple[int, int]] = field(default_factory=list)
    # (broker, the scenario's name of a log dir) -> the real broker's path for it (Kafka's side only)
    log_dir_paths: dict[tuple[int, str], str] = field(default_factory=dict)
    # each planned partition's move: (topic, partition) -> (started_ms, done_ms or None), ms after the start
    moves: dict[tuple[str, int], tuple[int, int | None]] = field(default_factory=dict)
    # whatif --reassign's ETA of each throttled move (the emulator's side: from a snapshot of its cluster)
    etas: dict[tuple[str, int], int | None] = field(default_factory=dict)
    # topic -> when it was marked for deletion ("marked_ms") and the states of its deletion's steps sampled
    # ("steps_not_compared": partition, leader, leader_epoch, isr; Kafka: observe.py leaves them out of `changes`)
    deletions: dict[str, dict[str, Any]] = field(default_factory=dict)


DESCRIBE = "kafka-topics --describe"
LOG_DIRS = "kafka-log-dirs --describe"
VERIFY = "kafka-reassign-partitions --verify"
_TOPIC_ID = re.compile(r"(\tTopicId: )[^\t\n]+")
_SIZE = re.compile(r'("size":)\d+')


def verify_name(index: int) -> str:
    """The tools entry of one `reassign` event's --verify: `kafka-reassign-partitions --verify timeline[i]`."""
    return f"{VERIFY} timeline[{index}]"


def what_masked(name: str) -> str:
    """What `masked` hides in the tool's output, as the comparison says it."""
    if name == DESCRIBE:
        return "TopicIds masked"
    return "log dirs by their scenario names" + (", sizes masked" if name == LOG_DIRS else "")


def masked(output: str, paths: Mapping[str, str] | None = None) -> str:
    """A tool's output with what differs by construction masked: a topic's TopicId (a random UUID on Kafka,
    seeded on the emulator); each real broker's log dir path (`paths`: path -> the scenario's dir name, the
    reverse of Timeline._real_plan's mapping; longest first, so no path's prefix is replaced alone); a
    kafka-log-dirs partition's `size` (Kafka's Log.size counts segment bytes, record batch framing
    included, the emulator its records' bytes: docs/replay.md, Tolerances). The tools compared print no
    hosts."""
    for path in sorted(paths or {}, key=len, reverse=True):
        output = output.replace(path, (paths or {})[path])
    return _SIZE.sub(r"\1<masked>", _TOPIC_ID.sub(r"\1<masked>", output))


def compare_tools(real: Mapping[str, str], emulated: Mapping[str, str],
                  paths: Mapping[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """Each tool both sides ran: both outputs (masked, `paths` as for `masked`), whether they are equal byte
    for byte, and a unified diff when not."""
    out = {}
    for name in sorted(set(real) & set(emulated)):
        k, e = masked(real[name], paths), masked(emulated[name], paths)
        diff = list(difflib.unified_diff(k.splitlines(), e.splitlines(), "Kafka", "emulator", lineterm=""))
        out[name] = {"kafka": k, "emulator": e, "equal": k == e, "diff": diff, "masked": what_masked(name)}
    return out


def reassigns(scenario) -> list:
    """The scenario's `reassign` events, in timeline order."""
    return sorted((e for e in scenario.timeline if e.type == "reassign"),
                  key=lambda e: (e.time_ms(scenario.round_ms), e.index))


def emulator_tools(run_dir: str, scenario, paths: Mapping[tuple[int, str], str]) -> dict[str, str]:
    """The emulator's tools at the end beside Kafka's (after `emulator_describe`, in the order Kafka's ran):
    `sparkkafka log-dirs RUN --describe --topic-list <the scenario's topics>` with each broker's dirs named
    by the real broker's paths for them (`paths`), so its JSON's logDirs order (a java.util.HashMap of the
    path strings, LogDirsCommand) is the emulator's for the same strings as Kafka's, then `sparkkafka
    reassign RUN --verify` of each `reassign` event's plan (as on Kafka, it clears the throttles once
    nothing moves)."""
    from ..tools import operator as op
    from ..tools.log_dirs import describe_log_dirs_text

    dirs, logs, live = op.log_dirs_frames(run_dir)

    def real(frame):
        return frame.assign(log_dir=[paths.get((int(b), str(d)), str(d))
                                     for b, d in zip(frame["broker"], frame["log_dir"], strict=True)])

    out = {LOG_DIRS: describe_log_dirs_text(real(dirs), real(logs), live,
                                            topic_list=[t.name for t in scenario.topics])}
    for e in reassigns(scenario):
        out[verify_name(e.index)] = op.reassign_verify(run_dir, json.dumps(e.args["plan"])).stdout
    return out


def compare_epochs(real: list[tuple[int, int]], emulated: list[tuple[int, int]]) -> dict[str, Any]:
    """The controller epochs both sides went through, with their times: one more epoch per controller
    election (KafkaController.elect increments /controller_epoch). Judged is the sequence of epochs, not
    which broker won (on Kafka every broker races to create /controller) nor when."""
    out: dict[str, Any] = {side: [{"time_ms": t, "epoch": e} for t, e in seq]
                           for side, seq in (("kafka", real), ("emulator", emulated))}
    k, e = [x for _, x in real], [x for _, x in emulated]
    out["mismatches"] = [] if k == e else [f"controller epochs differ: Kafka {k}, emulator {e}"]
    return out


def planned(scenario) -> dict[tuple[str, int], list[tuple[int, str]]]:
    """(broker, log dir or "any") of every replica a `reassign` event's plan names, per partition."""
    out: dict[tuple[str, int], list[tuple[int, str]]] = {}
    for e in scenario.timeline:
        if e.type == "reassign":
            for p in e.args["plan"]["partitions"]:
                dirs = p.get("log_dirs") or ["any"] * len(p["replicas"])
                out.setdefault((p["topic"], int(p["partition"])), []).extend(zip(p["replicas"], dirs, strict=True))
    return out


def emulator_side(run_dir: str, wall_s: float = 0.0, planned_keys: dict | None = None) -> Side:
    """The emulator's run read back from its tables (partition_state, replica_state, log for the planned
    replicas) and summary.json."""
    from ..storage.tables import read_table

    tables = os.path.join(run_dir, "tables")
    ps = read_table(tables, "partition_state").to_pandas()
    rs = read_table(tables, "replica_state", columns=["round", "broker", "topic", "partition", "leo"]).to_pandas()
    leo: dict[tuple[str, int], dict[int, int]] = {}
    for r in rs.sort_values("round", kind="stable").itertuples():
        leo.setdefault((r.topic, int(r.partition)), {})[int(r.broker)] = int(r.leo)
    with open(os.path.join(run_dir, "summary.json")) as f:
        summary = json.load(f)
    records = {"acked": summary["acked"], "not_acked": summary["not_acked"], "errors": summary["errors"],
               "by_topic": _emulator_by_topic(tables)}
    return Side(C.from_changes(list(ps.itertuples())), records, leo, int(summary["time_ms"]), wall_s=wall_s,
                replicas=_emulator_replicas(tables, rs_dirs(tables), planned_keys or {}),
                tools={DESCRIBE: emulator_describe(run_dir)}, controller_epochs=_emulator_epochs(tables))


def _emulator_epochs(tables: str) -> list[tuple[int, int]]:
    """(time_ms, controller epoch) of each epoch in the emulator's per-round metrics."""
    from ..storage.tables import read_table

    m = read_table(tables, "metrics", columns=["time_ms", "controller_epoch"]).to_pandas()
    out: list[tuple[int, int]] = []
    for r in m.sort_values("time_ms", kind="stable").itertuples():
        if int(r.controller_epoch) > 0 and (not out or out[-1][1] != int(r.controller_epoch)):
            out.append((max(int(r.time_ms), 0), int(r.controller_epoch)))
    return out


def emulator_describe(run_dir: str) -> str:
    """`sparkkafka describe RUN`'s stdout: the emulator's kafka-topics --describe of the run's end."""
    from ..run_views import describe_run

    lines = describe_run(run_dir)
    return "\n".join(lines) + "\n" if lines else ""


def rs_dirs(tables: str) -> dict[tuple[str, int, int], str]:
    """Each replica's log dir in its last replica_state row: (topic, partition, broker) -> dir."""
    from ..storage.tables import read_table

    rs = read_table(tables, "replica_state", columns=["round", "broker", "topic", "partition", "log_dir"]).to_pandas()
    return {(r.topic, int(r.partition), int(r.broker)): str(r.log_dir)
            for r in rs.sort_values("round", kind="stable").itertuples()}


def _emulator_replicas(tables: str, dirs: dict[tuple[str, int, int], str],
                       keys: dict[tuple[str, int], list[tuple[int, str]]]) -> dict[tuple[str, int], dict[int, dict]]:
    """The planned replicas' dir and bytes (their current log's value_bytes, future logs left out) at the
    end."""
    from ..storage.tables import read_table

    if not keys:
        return {}
    log = read_table(tables, "log", columns=["broker", "topic", "partition", "value_bytes", "is_future"]).to_pandas()
    size = log[~log["is_future"]].groupby(["topic", "partition", "broker"])["value_bytes"].sum()
    return {key: {b: {"dir": dirs.get((*key, b)), "bytes": int(size.get((*key, b), 0))} for b, _ in reps}
            for key, reps in keys.items()}


def _emulator_by_topic(tables: str) -> dict[str, dict[str, Any]]:
    """Acked records and failures by error name per topic, from produce_results (acks=0 records, never
    answered, are neither)."""
    from ..storage.tables import read_table

    pr = read_table(tables, "produce_results", columns=["topic", "error", "acked"]).to_pandas()
    out: dict[str, dict[str, Any]] = {}
    for topic, rows in pr.groupby("topic", sort=True):
        errs = rows["error"].dropna().value_counts()
        out[str(topic)] = {"acked": int(rows["acked"].sum()),
                           "errors": {str(k): int(v) for k, v in errs.sort_index().items()}}
    return out


def emulator_assignment(run_dir: str) -> dict[str, dict[int, tuple[int, ...]]]:
    """Each topic's replicas per partition as the emulator created them (its first partition_state row)."""
    from ..storage.tables import read_table

    ps = read_table(os.path.join(run_dir, "tables"), "partition_state").to_pandas()
    out: dict[str, dict[int, tuple[int, ...]]] = {}
    for r in ps.sort_values("time_ms", kind="stable").itertuples():
        out.setdefault(r.topic, {}).setdefault(int(r.partition), tuple(int(b) for b in r.replicas))
    return out


def with_assignment(scenario, assignment: Mapping[str, Mapping[int, tuple[int, ...]]]):
    """The scenario with each topic's assignment set to `assignment`'s, the topics of its create_topic events
    included (topics it does not name keep theirs)."""
    def placed(t):
        return dataclasses.replace(t, assignment=dict(assignment[t.name])) if t.name in assignment else t

    timeline = tuple(dataclasses.replace(e, args={**e.args, "topic": placed(e.args["topic"])})
                     if e.type == "create_topic" else e for e in scenario.timeline)
    return dataclasses.replace(scenario, topics=tuple(placed(t) for t in scenario.topics), timeline=timeline)


def _restarts(restarted: list[tuple[int, ...]], registered: list[tuple[int, int]], now_ms: int,
              alive: Callable[[int], bool]) -> list[dict[str, Any]]:
    """Each restart (its event's time, broker and, when later, the time its JVM started), when its broker
    registered again in /brokers/ids, and the delay from the event's time, as the emulator restarts then
    (until now, bounded by RESTART_WAIT_MS, while it has not registered and its JVM runs)."""
    out = []
    for at, b, *started in restarted:
        jvm = started[0] if started else at
        seen = next((t for t, rb in registered if rb == b and t >= jvm), None)
        waited = min(now_ms - at, RESTART_WAIT_MS) if alive(b) else 0
        out.append({"broker": b, "at_ms": at, "started_ms": jvm, "registered_ms": seen,
                    "delay_ms": seen - at if seen is not None else waited})
    return out


def _wait_ready(cluster, scenario, timeout_s: float = 60.0) -> None:
    """Every partition of the scenario has a leader in its state znode (the controller has elected them) and
    a log on each of its replicas' brokers (each has handled its LeaderAndIsr and started fetching), then
    FIRST_FETCH_S more. The scenario's clock starts after that: the emulator's followers fetch in its first
    round, and a Kafka follower that has not fetched yet when a fault cuts it off counts as out of sync to
    its leader (Partition.isFollowerOutOfSync: its log end offset is still unknown), which one slow
    LeaderAndIsr on a loaded machine made happen."""
    from .jars import KafkaSetupError

    topics = [t.name for t in scenario.topics]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        zk = cluster.zk()
        replicas = {(t, int(p)): r for t in topics if zk.exists(f"/brokers/topics/{t}") is not None
                    for p, r in json.loads(zk.get(f"/brokers/topics/{t}")[0])["partitions"].items()}
        states = [f"/brokers/topics/{t}/partitions/{p}/state" for t, p in replicas]
        if ({t for t, _ in replicas} == set(topics)
                and all(zk.exists(s) is not None and json.loads(zk.get(s)[0])["leader"] >= 0 for s in states)
                and all(cluster.replica_dir(b, t, p) is not None for (t, p), r in replicas.items() for b in r)):
            time.sleep(FIRST_FETCH_S)
            return
        time.sleep(0.2)
    raise KafkaSetupError(f"the topics' partitions had no leader or not every replica's log {timeout_s:.0f} s "
                          "after their creation")


def _observe_past_end(scenario, cluster, timeline, observer) -> tuple[int, list[dict[str, Any]]]:
    """Keep sampling after the timeline's end until one tolerance (restart delay included) has passed: the
    time reached and the restarts."""
    end = scenario.end_ms
    while True:
        now = timeline.now_ms()
        restarts = _restarts(timeline.restarted, observer.registered, now, lambda b: cluster.procs[b].alive())
        if now >= end + C.tolerance_ms(scenario.config, max((r["delay_ms"] for r in restarts), default=0)):
            return now, restarts
        time.sleep(0.1)


def _delivery(producers) -> dict[str, Any]:
    """Acked and failed records of the real producers (their delivery reports), failures by error name."""
    errors: dict[str, int] = {}
    by_topic: dict[str, dict[str, Any]] = {}
    for p in producers:
        t = by_topic.setdefault(p.topic, {"acked": 0, "errors": {}})
        t["acked"] += sum(p.acked.values())
        for k, v in p.errors.items():
            errors[k] = errors.get(k, 0) + v
            t["errors"][k] = t["errors"].get(k, 0) + v
    return {"acked": sum(sum(p.acked.values()) for p in producers),
            "not_acked": sum(sum(p.failed.values()) for p in producers), "errors": errors,
            "by_topic": {t: {"acked": v["acked"], "errors": dict(sorted(v["errors"].items()))}
                         for t, v in sorted(by_topic.items())}}


def kafka_side(scenario, workdir: Path, version: str = "2.8.2", log: Callable[[str], None] = print) -> Side:
    """The scenario on a real cluster: start it, create the topics (with the scenario's assignment), run the
    timeline on the wall clock to its end while observing every partition's state, keep observing one
    tolerance longer (a restarted broker's JVM start counted in it), then stop every process, also on an
    exception or Ctrl-C. The replicas' log end offsets and the planned replicas' log dirs are read from
    disk once the brokers stopped; the planned replicas' bytes at `until_ms`, where the emulator stopped
    (a throttle lets bytes through later, once the writes that held it stop)."""
    from .cluster import RealCluster
    from .observe import Observer
    from .timeline import Timeline
    from .tools import describe_log_dirs, log_bytes, log_end_offset, run_tool, verify

    t0 = time.perf_counter()
    cluster = RealCluster.for_scenario(scenario, workdir, version)
    timeline = Timeline(scenario, cluster, workdir)
    observer = Observer(cluster, list(dict.fromkeys(t.name for t in all_topics(scenario))), SAMPLE_MS)
    plans = planned(scenario)
    try:
        cluster.start()
        log(f"Kafka {version}: ZooKeeper and brokers {list(scenario.brokers)} up in {time.perf_counter() - t0:.1f} s, "
            f"controller broker {cluster.controller()}")
        timeline.create_topics()
        _wait_ready(cluster, scenario)
        timeline.started = time.monotonic()
        observer.start(timeline.started)
        sizes: dict[tuple[str, int, int], int] = {}
        timeline.run(scenario.end_ms, at_end=lambda: sizes.update(
            {(*key, b): log_bytes(cluster, b, *key) for key, named in plans.items() for b, _ in named}))
        now, restarts = _observe_past_end(scenario, cluster, timeline, observer)
        tools = {DESCRIBE: run_tool(cluster, "kafka.admin.TopicCommand", "--bootstrap-server", cluster.bootstrap,
                                    "--describe", "--exclude-internal"),
                 LOG_DIRS: describe_log_dirs(cluster, [t.name for t in scenario.topics])}
        for e in reassigns(scenario):  # last: once nothing moves, --verify removes the throttles
            tools[verify_name(e.index)] = verify(cluster, timeline._real_plan(e.args["plan"]), workdir)
    finally:
        observer.stop()
        for p in timeline.producers:
            p.halt()  # after an exception: no flush to wait for
        cluster.stop()
    leo = {(t.name, p): {b: o for b in sorted({*replicas, *(b for b, _ in plans.get((t.name, p), []))})
                         if (o := log_end_offset(cluster, b, t.name, p)) is not None}
           for t in all_topics(scenario) for p, replicas in (t.assignment or {}).items()}  # a plan's new replicas too
    reps = {key: {b: {"dir": cluster.replica_dir(b, *key), "bytes": sizes.get((*key, b), 0)} for b, _ in named}
            for key, named in plans.items()}
    paths = {(b, d): cluster.real_dir(b, d) for b in scenario.brokers for d in scenario.log_dirs}
    moves = {key: (at, observer.reassign_done.get(key)) for key, at in observer.reassign_started.items()}
    return Side(C.from_changes(observer.changes), _delivery(timeline.producers), leo, now, restarts,
                time.perf_counter() - t0, reps, tools, observer.controller_epochs, paths, moves,
                deletions=kafka_deletions(observer))


# ------------------------------------------------------------------ a throttled move's completion


def throttled_moves(scenario) -> list[tuple[Any, tuple[str, int], list[int]]]:
    """(event, partition, target replicas) of each partition a throttled `reassign` event's plan adds
    replicas to (KIP-455's adding replicas: the target less the replicas before it)."""
    current = {(t.name, p): list(r) for t in scenario.topics for p, r in (t.assignment or {}).items()}
    out = []
    for e in reassigns(scenario):
        for p in e.args["plan"]["partitions"]:
            key, target = (p["topic"], int(p["partition"])), [int(b) for b in p["replicas"]]
            if e.args.get("throttle") is not None and set(target) - set(current.get(key, target)):
                out.append((e, key, target))
            current[key] = target
    return out


def emulator_moves(run_dir: str, scenario) -> dict[tuple[str, int], tuple[int, int | None]]:
    """Each throttled move's (plan time, completion) on the emulator: its first partition_state row with the
    target replicas and nothing adding or removing (whatif.reassign_times), ms after the start."""
    from ..storage.tables import read_table
    from ..whatif import reassign_times

    moves = throttled_moves(scenario)
    if not moves:
        return {}
    ps = read_table(os.path.join(run_dir, "tables"), "partition_state").to_pandas()
    out: dict[tuple[str, int], tuple[int, int | None]] = {}
    for e, key, target in moves:
        at = e.time_ms(scenario.round_ms)
        done = reassign_times(ps, {key: target}, at)[key]
        out[key] = (at, None if done is None else at + done)
    return out


def snapshot_before(scenario, event, workdir: Path) -> Path:
    """A whatif SNAPSHOT of the emulated cluster just before `event` (docs/whatif.md): the scenario run on
    the in-process engine (the same tables as the others) until the round before the event's, then
    `sparkkafka describe` and `sparkkafka log-dirs --describe` of it as topics-describe.txt and
    log-dirs.txt, and the produce rates running then as rates.csv (per topic: the format spreads a
    topic's rate over its partitions)."""
    from ..cluster import Cluster
    from ..tools import operator as op

    at = event.time_ms(scenario.round_ms)
    run = workdir / "run"
    Cluster.from_scenario(scenario, out=str(run), engine="local").run(until_ms=max(at - scenario.round_ms, 0), progress=False)
    snap = workdir / "snapshot"
    snap.mkdir(parents=True, exist_ok=True)
    (snap / "topics-describe.txt").write_text(emulator_describe(str(run)))
    (snap / "log-dirs.txt").write_text(op.log_dirs_tool(str(run)).stdout)
    rates: dict[str, list] = {}
    for e in scenario.timeline:
        a = e.args
        start = e.time_ms(scenario.round_ms)
        if e.type == "produce" and a.get("rate_per_sec") and start <= at < start + int(a.get("duration_ms") or 0):
            r = rates.setdefault(a["topic"], [0.0, int(a["value_bytes"]), a["acks"]])
            r[0] += float(a["rate_per_sec"])
    (snap / "rates.csv").write_text("topic,records_per_sec,value_bytes,acks\n" + "".join(
        f"{t},{r:g},{v},{'all' if k in (-1, 'all') else k}\n" for t, (r, v, k) in sorted(rates.items())))
    return snap


def whatif_etas(scenario, out: Path) -> dict[tuple[str, int], int | None]:
    """What `sparkkafka whatif SNAPSHOT --reassign PLAN --throttle T` predicts (whatif.reassign_prediction,
    in-process) for each throttled move, SNAPSHOT the emulated cluster just before its event
    (`snapshot_before`, into OUT/whatif/timeline-I): ms after the plan, None when it predicts `never`."""
    import pandas as pd

    from ..whatif import reassign_prediction

    etas: dict[tuple[str, int], int | None] = {}
    for e in {e.index: e for e, _, _ in throttled_moves(scenario)}.values():
        snap = snapshot_before(scenario, e, out / "whatif" / f"timeline-{e.index}")
        plan = json.dumps(e.args["plan"])
        (snap / "plan.json").write_text(plan)
        _, _, predicted, _ = reassign_prediction(snap, plan, int(e.args["throttle"]))
        for r in predicted.itertuples():
            etas[(r.topic, int(r.partition))] = None if pd.isna(r.eta_ms) else int(r.eta_ms)  # None: never
    return etas


def move_tolerance_ms(real_ms: int, round_ms: int) -> int:
    """How far a throttled move's duration may be from Kafka's: 10 % of Kafka's, at least two rounds (the
    emulator's fetch cycle), plus the sampling interval (Kafka's start and end are each seen at a sample)."""
    return max(-(-real_ms // 10), 2 * round_ms) + SAMPLE_MS


def in_sync_ms(seq: C.Seq, target: list[int], started: int | None, done: int | None) -> int | None:
    """When a move that completed on Kafka (`done`) had every target replica in the ISR: the first sample
    from `started` on that shows it (the completion's own sample when none before does); None when it did
    not complete."""
    if started is None or done is None:
        return None
    return next((t for t, (_, _, isr) in seq if started <= t <= done and set(target) <= set(isr)), done)


def compare_moves(scenario, real: Side, emu: Side) -> list[dict]:
    """Each throttled move: its duration on Kafka (from its adding replicas' first sample in ZooKeeper to the
    first sample with every target replica in the ISR, the move complete: the copy the throttle paces; the
    controller's completion after it, a leader election and the old replicas' removal, each a ZooKeeper write
    and a LeaderAndIsr of a few hundred ms on a loaded machine and one round on the emulator, is printed,
    not judged), on the emulator (from the plan's time to its completion) and whatif's ETA (`emu.etas`). Judged when it completed on Kafka while observed: whatif's ETA, and the emulator's unless
    the emulator stopped (`until_ms`) before Kafka's duration plus the tolerance had passed (Kafka's start is
    later by the tool's JVM start), each within `move_tolerance_ms` of Kafka's."""
    out = []
    for e, key, target in throttled_moves(scenario):
        ks, kd = real.moves.get(key, (None, None))
        es, ed = emu.moves.get(key, (e.time_ms(scenario.round_ms), None))
        kj = in_sync_ms(real.changes.get(key, []), target, ks, kd)
        k_ms = None if ks is None or kj is None else kj - ks
        e_ms = None if ed is None else ed - es
        eta = emu.etas.get(key)
        tol = None if k_ms is None else move_tolerance_ms(k_ms, scenario.round_ms)
        judged = [] if tol is None else [("whatif's ETA", eta)] + (
            [("the emulator's", e_ms)] if ed is not None or es + k_ms + tol <= scenario.end_ms else [])
        mism = [f"{key[0]}-{key[1]}: the move to {target} took {k_ms} ms on Kafka, {what} "
                f"{'never' if v is None else f'{v} ms'}: more than {tol} ms apart"
                for what, v in judged if v is None or abs(v - k_ms) > tol]
        out.append({"event": f"timeline[{e.index}]", "topic": key[0], "partition": key[1], "target": target,
                    "throttle": int(e.args["throttle"]),
                    "kafka": {"started_ms": ks, "in_sync_ms": kj, "done_ms": kd, "ms": k_ms},
                    "emulator": {"started_ms": es, "done_ms": ed, "ms": e_ms},
                    "whatif_eta_ms": eta, "tolerance_ms": tol, "judged": [w for w, _ in judged],
                    "mismatches": mism})
    return out


def kafka_deletions(observer) -> dict[str, dict[str, Any]]:
    """Side.deletions of the real side: per topic marked for deletion, when, and the states of its deletion's
    steps the observer read (by partition, then epoch)."""
    return {t: {"marked_ms": at, "steps_not_compared": [
        {"partition": p, "leader": s[0], "leader_epoch": s[1], "isr": list(s[2])}
        for _, p, s in sorted((k for k in observer.deleting if k[0] == t), key=lambda k: (k[1], k[2][1]))]}
        for t, at in sorted(observer.marked_for_deletion.items())}


# ------------------------------------------------------------------ the comparison


def _states(seq: C.Seq) -> list[dict[str, Any]]:
    return [{"time_ms": t, "leader": s[0], "leader_epoch": s[1], "isr": list(s[2]), "deleted": s == C.DELETED}
            for t, s in seq]


def deleted_topics(side: Side) -> dict[str, dict[str, Any]]:
    """Each topic whose partitions all end in compare.DELETED: when the first of them did (`deleted_ms`),
    and the side's `deletions` entry (Kafka: when it was marked, the deletion's states not compared)."""
    last: dict[str, list[tuple[int, C.State]]] = {}
    for (topic, _), seq in side.changes.items():
        if seq:
            last.setdefault(topic, []).append(seq[-1])
    return {t: {"deleted_ms": min(at for at, _ in ends), **side.deletions.get(t, {})}
            for t, ends in sorted(last.items()) if all(s == C.DELETED for _, s in ends)}


def comparison(scenario, version: str, real: Side, emu: Side, engine: str) -> dict[str, Any]:
    """comparison.json: per partition both sequences, the tolerance and each mismatch; records and log end
    offsets of both sides (reported, not judged: the producers are different clients)."""
    delay = max((r["delay_ms"] for r in real.restarts), default=0)
    tol = C.tolerance_ms(scenario.config)
    starts = [e.time_ms(scenario.round_ms) for e in scenario.timeline if e.type == "restart"]
    restart = (min(starts), delay) if starts and delay > 0 else None
    end = scenario.end_ms
    plans = planned(scenario)
    # each partition's replicas at its creation
    emu_replicas = {(t.name, p): tuple(r) for t in all_topics(scenario) for p, r in (t.assignment or {}).items()}
    max_bytes = int(scenario.config.get("replica.fetch.max.bytes", 1048576))
    parts = []
    for key in sorted(set(real.changes) | set(emu.changes)):
        k, em = real.changes.get(key, []), emu.changes.get(key, [])
        r, e, after = C.aligned(k, em, tol + max(delay, 0), SAMPLE_MS, end)
        mism = C.compare_partition(key, k, em, tol, SAMPLE_MS, end, restart)
        named = plans.get(key, [])
        before = emu_replicas.get(key, ())
        mism += C.compare_replicas(key, real.replicas.get(key, {}), emu.replicas.get(key, {}),
                                   [b for b, _ in named if b not in before], {b: d for b, d in named if d != "any"},
                                   max_bytes)
        leo = {side: {str(b): o for b, o in sorted(s.log_end_offsets.get(key, {}).items())}
               for side, s in (("kafka", real), ("emulator", emu))}
        parts.append({"topic": key[0], "partition": key[1], "kafka": _states(r), "emulator": _states(e),
                      "kafka_after_end": _states(after), "mismatches": [m.message for m in mism],
                      "log_end_offsets": leo,
                      "planned_replicas": [{"broker": b, "log_dir": d, "added": b not in before,
                                            "kafka": real.replicas.get(key, {}).get(b),
                                            "emulator": emu.replicas.get(key, {}).get(b)} for b, d in named]})
    lag = int(scenario.config.get("replica.lag.time.max.ms", 30000))
    tools = compare_tools(real.tools, emu.tools, {p: d for (_, d), p in real.log_dir_paths.items()})
    epochs = compare_epochs(real.controller_epochs, emu.controller_epochs)
    moves = compare_moves(scenario, real, emu)
    return {
        "scenario": scenario.name, "kafka_version": version, "engine": engine, "until_ms": end,
        "kafka_observed_until_ms": real.observed_until_ms, "sampling_interval_ms": SAMPLE_MS,
        "tolerance_ms": tol, "tolerance_after_restart_ms": C.allowed_ms(tol, restart, end),
        "tolerance": {"base_ms": 2000, "half_replica_lag_time_max_ms": lag // 2, "restart_delay_ms": max(delay, 0),
                      "restart_from_ms": restart[0] if restart else None},
        "restarts": real.restarts,
        "partitions": parts,
        "mismatches": [f"{p['topic']}-{p['partition']}: {m}" for p in parts for m in p["mismatches"]]
        + [f"{name}: the outputs differ ({t['masked']})" for name, t in tools.items() if not t["equal"]]
        + epochs["mismatches"] + [m for mv in moves for m in mv["mismatches"]],
        "tools": tools,
        "controller_epochs": {"kafka": epochs["kafka"], "emulator": epochs["emulator"]},
        "reassignments": moves,
        "deleted_topics": {"kafka": deleted_topics(real), "emulator": deleted_topics(emu)},
        "records": {"kafka": real.records, "emulator": emu.records},
        "wall_s": {"kafka": round(real.wall_s, 1), "emulator": round(emu.wall_s, 1)},
    }


def _fmt(s: dict[str, Any] | None) -> str:
    if s is None:
        return "-"
    if s.get("deleted"):
        return f"{s['time_ms']:>7} ms  deleted"
    return f"{s['time_ms']:>7} ms  leader {s['leader']:>2}  epoch {s['leader_epoch']:>2}  isr {','.join(map(str, s['isr']))}"


def _replica(r: dict[str, Any] | None) -> str:
    return "-" if r is None else f"{r['bytes']} bytes in {r['dir']}"


def _at(ms: int | None, start: int | None, since: str) -> str:
    return "not complete" if ms is None else f"{ms} ms ({since} {start} ms)"


def move_line(mv: dict[str, Any]) -> str:
    """One throttled move's durations on both sides and whatif's ETA, and what of them is judged."""
    k, e, eta = mv["kafka"], mv["emulator"], mv["whatif_eta_ms"]
    if not mv["judged"]:
        verdict = "not judged (not complete on Kafka)"
    else:
        verdict = ("ok" if not mv["mismatches"] else "MISMATCH") + f" ({' and '.join(mv['judged'])} within " \
                  f"{mv['tolerance_ms']} ms of Kafka's)"
    done = "" if k.get("done_ms") is None or k.get("in_sync_ms") is None else \
        f", complete {k['done_ms'] - k['in_sync_ms']} ms later"
    return (f"Throttled move of {mv['topic']}-{mv['partition']} to {mv['target']} ({mv['event']}, --throttle "
            f"{mv['throttle']}): Kafka "
            f"{_at(k['ms'], k['started_ms'], 'to its new replicas in the ISR, from its adding replicas in ZooKeeper at')}"
            f"{done}"
            f", emulator {_at(e['ms'], e['started_ms'], 'from the plan at')}, whatif --reassign ETA "
            f"{'never' if eta is None else f'{eta} ms'}: {verdict}")


def text(cmp: dict[str, Any]) -> str:
    """The comparison as `replay` prints it."""
    t = cmp["tolerance"]
    lines = [f"Scenario {cmp['scenario']} on Kafka {cmp['kafka_version']} and on the emulator ({cmp['engine']} engine), "
             f"until {cmp['until_ms']} ms (Kafka observed until {cmp['kafka_observed_until_ms']} ms)",
             f"Tolerance per change: {cmp['tolerance_ms']} ms = {t['base_ms']} + replica.lag.time.max.ms/2 "
             f"{t['half_replica_lag_time_max_ms']}"
             + (f"; from the first restart ({t['restart_from_ms']} ms) on, + the restart delay "
                f"{t['restart_delay_ms']} = {cmp['tolerance_after_restart_ms']} ms" if t["restart_from_ms"] is not None
                else "")
             + f"; emulator states shorter than {cmp['sampling_interval_ms']} ms (the sampling interval) are not compared"]
    for r in cmp["restarts"]:
        seen = f"registered again at {r['registered_ms']} ms" if r["registered_ms"] is not None else "never registered"
        late = r.get("started_ms", r["at_ms"]) - r["at_ms"]
        jvm = f" (its JVM started {late} ms later: the timeline was held)" if late > 100 else ""
        lines.append(f"Broker {r['broker']} restarted at {r['at_ms']} ms on Kafka{jvm}, {seen}")
    for p in cmp["partitions"]:
        lines.append(f"\n{p['topic']}-{p['partition']}: {'ok' if not p['mismatches'] else 'MISMATCH'}")
        lines.append(f"  {'Kafka':<48}  emulator")
        ks, es = p["kafka"], p["emulator"]
        for i in range(max(len(ks), len(es))):
            lines.append(f"  {_fmt(ks[i] if i < len(ks) else None):<48}  {_fmt(es[i] if i < len(es) else None)}")
        for s in p["kafka_after_end"]:
            lines.append(f"  {_fmt(s):<48}  (after the end: not compared)")
        for r in p["planned_replicas"]:
            what = ("added by the plan" if r["added"] else "in the plan") + (
                f", to {r['log_dir']}" if r["log_dir"] != "any" else "")
            lines.append(f"  replica on broker {r['broker']} ({what}) at the end: Kafka {_replica(r['kafka'])}, "
                         f"emulator {_replica(r['emulator'])}")
        lines += [f"  mismatch: {m}" for m in p["mismatches"]]
        leo = p["log_end_offsets"]
        if leo["kafka"] or leo["emulator"]:
            lines.append("  log end offsets: Kafka " + json.dumps(leo["kafka"]) + ", emulator " + json.dumps(leo["emulator"]))
    rk, re_ = cmp["records"]["kafka"], cmp["records"]["emulator"]
    lines.append(f"\nRecords (reported, not compared): Kafka acked {rk['acked']}, not acked {rk['not_acked']} "
                 f"{rk['errors']}; emulator acked {re_['acked']}, not acked {re_['not_acked']} {re_['errors']}")
    none = {"acked": 0, "errors": {}}
    for topic in sorted(set(rk.get("by_topic", {})) | set(re_.get("by_topic", {}))):
        k, e = rk.get("by_topic", {}).get(topic, none), re_.get("by_topic", {}).get(topic, none)
        lines.append(f"  {topic}: Kafka acked {k['acked']}, failed {k['errors']}; "
                     f"emulator acked {e['acked']}, failed {e['errors']}")
    ce = cmp.get("controller_epochs", {"kafka": [], "emulator": []})
    if len(ce["kafka"]) > 1 or len(ce["emulator"]) > 1:
        def seq(side: str) -> str:
            return ", ".join(f"{x['epoch']} from {x['time_ms']} ms" for x in ce[side]) or "-"

        lines.append(f"\nController epochs (which broker is not compared): Kafka {seq('kafka')}; "
                     f"emulator {seq('emulator')}")
    gone = cmp.get("deleted_topics", {"kafka": {}, "emulator": {}})
    for topic in sorted(set(gone["kafka"]) | set(gone["emulator"])):
        k, e = gone["kafka"].get(topic), gone["emulator"].get(topic)
        kafka = "not deleted" if k is None else f"at {k['deleted_ms']} ms" + (
            f" (marked for deletion at {k['marked_ms']} ms; {len(k['steps_not_compared'])} states of its deletion sampled, "
            "not compared)" if "marked_ms" in k else "")
        lines.append(f"\nTopic {topic} deleted: Kafka {kafka}; emulator "
                     + ("not deleted" if e is None else f"at {e['deleted_ms']} ms"))
    for name, t in cmp.get("tools", {}).items():
        lines.append(f"\n{name} at the end ({t.get('masked', what_masked(name))}): " + (
            f"identical on both sides ({len(t['kafka'].splitlines())} lines)" if t["equal"] else "MISMATCH"))
        lines += [f"  {d}" for d in t["diff"]]
    for i, mv in enumerate(cmp.get("reassignments", [])):
        lines.append(("\n" if i == 0 else "") + move_line(mv))
    n = len(cmp["mismatches"])
    lines.append(f"{n} mismatch(es)" if n else "Within tolerance: the sequences and the tools' outputs agree")
    return "\n".join(lines) + "\n"


def write(out: str, cmp: dict[str, Any]) -> None:
    with open(os.path.join(out, "comparison.json"), "w") as f:
        json.dump(cmp, f, indent=2, sort_keys=True)
        f.write("\n")


def replay(scenario, out: str, version: str, engine: str, run_emulator: Callable[[str], None],
           log: Callable[[str], None] = print) -> int:
    """Both sides into `out` (already checked and empty of an earlier replay), comparison.json written and
    printed; 0 within tolerance, 1 on a mismatch. `run_emulator(dir)` is the run verb's path (its own
    output goes to DIR/emulator-run.txt)."""
    import contextlib
    import io

    os.makedirs(out, exist_ok=True)
    emu_dir = os.path.join(out, "emulator")
    t0 = time.perf_counter()
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            run_emulator(emu_dir)
    finally:
        Path(out, "emulator-run.txt").write_text(buf.getvalue())
    emu = emulator_side(emu_dir, time.perf_counter() - t0, planned(scenario))
    log(f"Emulator ({engine} engine): {emu.observed_until_ms} emulated ms in {emu.wall_s:.1f} s, {emu_dir}")
    scenario = with_assignment(scenario, emulator_assignment(emu_dir))
    emu.moves = emulator_moves(emu_dir, scenario)
    emu.etas = whatif_etas(scenario, Path(out))
    real = kafka_side(scenario, Path(out) / "kafka", version, log)
    log(f"Kafka {version}: {real.observed_until_ms} ms observed, {real.wall_s:.1f} s in all, {out}/kafka")
    emu.tools.update(emulator_tools(emu_dir, scenario, real.log_dir_paths))
    cmp = comparison(scenario, version, real, emu, engine)
    write(out, cmp)
    log(text(cmp) + f"Wrote {os.path.join(out, 'comparison.json')}")
    return 1 if cmp["mismatches"] else 0
