"""`sparkkafka bench`: the cost of a round against the engine floor, and the reference scenario.

`sparkkafka bench --reference` runs the reference scenario end to end: 12 brokers x 3 log
dirs, 3,000 partitions RF 3, a steady acks=all producer on every partition, one broker crash at
20 s and its restart at 40 s, 60 emulated seconds. It prints the real-time factor (emulated seconds /
wall seconds of the run loop), replica-rounds per second and the time of the run's first and last
rounds, per engine. `--scale B,P` runs the same shape on B brokers and P partitions (60k replicas:
`--scale 96,20000`), `--seconds S` shortens it (the crash and restart stay at 1/3 and 2/3).

`sparkkafka bench --long-run --rounds 10000` (the target: round 10,000 <= 1.2x round 100) runs a small cluster
(`--scale 3,6`: 3 brokers x 2 log dirs, 6 partitions RF 3, a steady acks=all producer) on the resident
engine and prints, around round 100 and over the last rounds, the median wall and CPU time per round
(CPU of the driver, its JVM and Python workers: on a shared machine the figure others' load does not
move) split into the Spark job, the log commit, the history flush (with the compaction they ran) and
the tasks' storage reads, and each table's live files and _delta_log entries.
`sparkkafka bench --operator` times an operator's questions on a generated 200-broker, 100,000-partition snapshot
end to end, phase by phase (bench_operator.py).
`sparkkafka bench --idle-hour` runs an idle emulated hour on each engine: `--scale` brokers and partitions
at RF 3, one acks=all record per partition at 0 s, then nothing until 3,600 s. It prints the rounds of
work (rounds run; the others are skipped by the idle jump, protocol/idle.py), those after the burst
settled (after 10 s), the Spark jobs and the wall time.

The grid mode (no --reference):

For each (brokers, partitions) at RF 3 under a steady acks=1 producer (one record per partition
per round), it runs warm-up rounds, then times `--rounds` rounds, and in the same process times
the engine floor: the very same input rows (replica state and messages) pushed through an
identity round, i.e. `repartitionById` by broker + `mapInPandas` returning its input +
`localCheckpoint`, on the same number of Spark partitions. It prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import tempfile
import time
from collections.abc import Iterator

import pandas as pd

WARMUP = 5


def _identity(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    yield from batches


def _scenario(brokers: int, partitions: int, rounds: int):
    from .scenario import parse_scenario

    horizon = (WARMUP + rounds + 10) * 100
    return parse_scenario({
        "seed": 1,
        "cluster": {"brokers": brokers},
        "topics": [{"name": "bench", "partitions": partitions, "replication_factor": 3}],
        "timeline": [{"at": 0, "produce": {"topic": "bench", "partition": "all", "acks": 1, "value_bytes": 100,
                                           "rate_per_sec": partitions * 10, "duration_ms": horizon}}],
        "run": {"until_ms": horizon},
    }, name=f"bench-{brokers}x{partitions}")


def measure(spark, brokers: int, partitions: int, rounds: int, workdir: str) -> dict:
    """Time `rounds` emulator rounds and as many identity rounds over the same input."""
    from .cluster import Cluster
    from .engine import rows as W

    c = Cluster.from_scenario(_scenario(brokers, partitions, rounds), spark=spark,
                              out=os.path.join(workdir, f"{brokers}x{partitions}"), overwrite=True)
    c.step(WARMUP)
    c.timings.clear()
    walls = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ran in c.jobs(1):  # one round, one Spark job
            pass
        walls.append(time.perf_counter() - t)
    c.flush()
    phases = {k: v / rounds * 1000 for k, v in c.timings.items()}
    state = c.loop.route(c.loop.state_rows()).localCheckpoint(eager=True)
    n_rows = state.count()
    floors = []
    for _ in range(rounds):
        t = time.perf_counter()
        out = state.repartitionById(c.spark_partitions, "broker").mapInPandas(_identity, W.SPARK_SCHEMA)
        out.localCheckpoint(eager=True)
        floors.append(time.perf_counter() - t)
    rnd, floor = statistics.median(walls), statistics.median(floors)
    return {"brokers": brokers, "partitions": partitions, "replicas": partitions * 3, "rows": n_rows,
            "spark_partitions": c.spark_partitions, "round_ms": rnd * 1000, "floor_ms": floor * 1000,
            "ratio": rnd / floor, "replica_rounds_per_s": partitions * 3 / rnd, "phases": phases}


ENGINE_NAMES = {"rounds": "job per round", "resident": "resident"}


def reference_scenario(brokers: int = 12, partitions: int = 3000, seconds: float = 60.0, engine: str = "rounds",
                       delta_writer: str = "deltalake"):
    """The reference scenario (docs/benchmarks.md): brokers x 3 dirs, RF 3, one 100-byte acks=all record per
    partition per 100 ms round, a crash of broker 0 at 1/3 of the run and its restart at 2/3, on `engine`,
    its tables committed by `delta_writer` (emulator delta.writer)."""
    from .scenario import parse_scenario

    end = int(seconds * 1000)
    third = (end // 3) // 100 * 100
    return parse_scenario({
        "seed": 11,
        "cluster": {"brokers": brokers, "log_dirs": ["d0", "d1", "d2"],
                    "config": {"min.insync.replicas": 2},
                    "emulator": {"engine": engine, "delta.writer": delta_writer}},
        "topics": [{"name": "ref", "partitions": partitions, "replication_factor": 3}],
        "timeline": [
            {"at": 0, "produce": {"topic": "ref", "partition": "all", "acks": "all", "value_bytes": 100,
                                  "rate_per_sec": partitions * 10, "duration_ms": end}},
            {"at": third, "crash": 0},
            {"at": 2 * third, "restart": 0},
        ],
        "run": {"until_ms": end},
    }, name=f"reference-{brokers}x{partitions}")


def measure_reference(spark, brokers: int, partitions: int, seconds: float, workdir: str,
                      progress: bool = False, engine: str = "rounds", delta_writer: str = "deltalake") -> dict:
    """Run the reference scenario on `engine` and time it: setup (run directory, tables, controller), the
    run loop, and the end (save, compaction, audit). A resident window's wall time is spread evenly over
    its rounds for the per-round figures."""
    from .cluster import Cluster

    sc = reference_scenario(brokers, partitions, seconds, engine, delta_writer)
    peak_of_run = reset_driver_peak()
    t0 = time.perf_counter()
    c = Cluster.from_scenario(sc, spark=spark, out=os.path.join(workdir, sc.name), overwrite=True)
    t1 = time.perf_counter()
    rounds = sc.end_ms // c.round_ms + 1
    walls = []
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=rounds, unit="round", desc=sc.name, leave=False)
    jobs = 0
    t = time.perf_counter()
    for ran in c.jobs(rounds):  # the run's lock and the loop's checkpoint saves as Cluster.run has them
        walls += [(time.perf_counter() - t) / ran] * ran
        jobs += 1
        if bar is not None:
            bar.update(ran)
        t = time.perf_counter()
    if bar is not None:
        bar.close()
    t2 = time.perf_counter()
    c.run(sc.end_ms)  # nothing left to run: saves, compacts and audits
    t3 = time.perf_counter()
    s = c.summary()
    loop = t2 - t1
    emulated = rounds * c.round_ms / 1000
    head, tail = walls[: min(10, len(walls))], walls[-min(10, len(walls)):]
    return {"engine": ENGINE_NAMES[engine], "jobs": jobs, "brokers": brokers, "partitions": partitions, "replicas": partitions * 3,
            "rounds": rounds, "emulated_s": emulated, "setup_s": t1 - t0, "loop_s": loop, "end_s": t3 - t2,
            "realtime": emulated / loop, "replica_rounds_per_s": partitions * 3 * rounds / loop,
            "first_rounds_ms": statistics.median(head) * 1000, "last_rounds_ms": statistics.median(tail) * 1000,
            "median_round_ms": statistics.median(walls) * 1000, "acked": s.get("acked"),
            "lost_acked": s.get("lost_acked"), "driver_peak_mib": driver_peak_mib() if peak_of_run else None}


def long_run_scenario(brokers: int = 3, partitions: int = 6, rounds: int = 10_000, **emulator):
    """The long run (docs/benchmarks.md): a small cluster (brokers x 2 log dirs, RF 3) under a steady acks=all
    producer (one 100-byte record per partition per 100 ms round) for `rounds` rounds on the resident engine,
    no faults."""
    from .scenario import parse_scenario

    end = (rounds - 1) * 100
    return parse_scenario({
        "seed": 11,
        "cluster": {"brokers": brokers, "log_dirs": ["d0", "d1"], "config": {"min.insync.replicas": 2},
                    "emulator": {"engine": "resident", **emulator}},
        "topics": [{"name": "long", "partitions": partitions, "replication_factor": 3}],
        "timeline": [{"at": 0, "produce": {"topic": "long", "partition": "all", "acks": "all", "value_bytes": 100,
                                           "rate_per_sec": partitions * 10, "duration_ms": end + 100}}],
        "run": {"until_ms": end},
    }, name=f"long-{brokers}x{partitions}")


LONG_PHASES = {"Spark job": ("driver", "job", "collect"), "log commit": ("commit",), "history flush": ("history",),
               "of which compaction": ("upkeep",), "reads": ("task.storage_reads",)}


def reset_driver_peak() -> bool:
    """Start this process's peak RSS (VmHWM) afresh, so that it covers one run only (Linux: writing 5 to
    /proc/self/clear_refs). False where that cannot be done: a peak read then would be the process's own
    since it started, not the run's."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def driver_peak_mib() -> float | None:
    """This (the driver's) Python process's peak RSS since `reset_driver_peak`, in MiB: the 1M-replica
    target bounds it at 2 GiB (docs/benchmarks.md). Spark's JVM and the Python workers are other processes,
    not counted."""
    try:
        with open("/proc/self/status") as f:
            kb = next((int(line.split()[1]) for line in f if line.startswith("VmHWM:")), None)
    except OSError:
        return None
    return None if kb is None else kb / 1024


def tree_cpu_seconds(root: int | None = None) -> float:
    """CPU seconds (user + system, with reaped children's) of process `root` (default this one) and every
    live descendant: the driver, Spark's JVM and its Python workers. On a shared machine this is the
    figure that does not move with other users' load, where wall time does (Linux /proc; 0.0 elsewhere)."""
    root = os.getpid() if root is None else root
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    stats: dict[int, tuple[int, int]] = {}
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except FileNotFoundError:
        return 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        # after the command: state ppid ... utime(12) stime(13) cutime(14) cstime(15), 0-based from state
        stats[pid] = (int(fields[1]), sum(int(x) for x in fields[11:15]))
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += stats.get(pid, (0, 0))[1]
        todo += children.get(pid, [])
    return total / tick


def table_files(tables_dir: str) -> dict[str, tuple[int, int]]:
    """Per table: (live data files, entries in _delta_log)."""
    from deltalake import DeltaTable

    from .storage import tables as T

    out = {}
    for name in T.SCHEMAS:
        path = T.table_path(tables_dir, name)
        if DeltaTable.is_deltatable(path):
            out[name] = (len(DeltaTable(path).file_uris()), len(os.listdir(os.path.join(path, "_delta_log"))))
    return out


def measure_long_run(spark, brokers: int, partitions: int, rounds: int, workdir: str, progress: bool = False,
                     span: int = 500, **emulator) -> dict:
    """Run the long-run scenario window by window and time each window (one Spark job, its log commit, the
    history flush when due, and the tables' upkeep), spread evenly over its rounds. Per-round figures are
    medians over the windows starting in [100, 100 + span) ("round 100") and in the last `span` rounds
    ("round N"); phases are split as LONG_PHASES ("reads": the tasks' storage reads, summed over tasks)."""
    from .cluster import Cluster

    sc = long_run_scenario(brokers, partitions, rounds, **emulator)
    c = Cluster.from_scenario(sc, spark=spark, out=os.path.join(workdir, sc.name), overwrite=True)
    windows: list[tuple[int, int, float, dict]] = []  # (first round, rounds, wall s, phase seconds)
    files_at: dict[int, dict] = {}
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=rounds, unit="round", desc=sc.name, leave=False)
    t0 = time.perf_counter()
    def mark() -> tuple[int, dict, float, float, float]:  # where the next job starts: round, timings, clocks
        return c.round, dict(c.timings), time.perf_counter(), tree_cpu_seconds(), c.writer.upkeep_s

    first, before, t, cpu, upkeep = mark()
    for ran in c.jobs(rounds):
        wall = time.perf_counter() - t
        phases = {k: c.timings.get(k, 0.0) - before.get(k, 0.0) for k in set(c.timings)}
        phases["cpu"] = tree_cpu_seconds() - cpu
        phases["upkeep"] = c.writer.upkeep_s - upkeep
        windows.append((first, ran, wall, phases))
        if first < 100 + span <= c.round:
            files_at[100 + span] = table_files(c.tables_dir)
        if bar is not None:
            bar.update(ran)
        first, before, t, cpu, upkeep = mark()
    loop = time.perf_counter() - t0
    if bar is not None:
        bar.close()
    files_at[rounds] = table_files(c.tables_dir)

    def around(lo: int, hi: int) -> dict:
        sel = [w for w in windows if lo <= w[0] < hi] or windows[-1:]
        out = {"round_ms": statistics.median(w[2] / w[1] for w in sel) * 1000, "windows": len(sel),
               "cpu_ms": statistics.median(w[3]["cpu"] / w[1] for w in sel) * 1000}
        for name, keys in LONG_PHASES.items():
            out[name] = statistics.median(sum(w[3].get(k, 0.0) for k in keys) / w[1] for w in sel) * 1000
        return out

    early, late = around(100, 100 + span), around(rounds - span, rounds)
    c.run(c.round * c.round_ms)  # nothing left to run: saves, compacts and audits
    s = c.summary()
    return {"brokers": brokers, "partitions": partitions, "rounds": rounds, "jobs": len(windows), "loop_s": loop,
            "early": early, "late": late, "ratio": late["round_ms"] / early["round_ms"],
            "cpu_ratio": late["cpu_ms"] / early["cpu_ms"], "files": files_at, "windows": windows,
            "acked": s.get("acked"), "lost_acked": s.get("lost_acked"), "emulator": emulator, "span": span}


def long_run_table(r: dict) -> str:
    from .protocol.config import EmulatorSettings

    rows = ["| rounds | wall per round (ms) | CPU per round (ms) | " + " | ".join(f"{k} (ms)" for k in LONG_PHASES)
            + " |", "|---|---|---|" + "---|" * len(LONG_PHASES)]
    span = r["span"]
    for label, m in ((f"{100}-{99 + span}", r["early"]), (f"{r['rounds'] - span}-{r['rounds'] - 1}", r["late"])):
        rows.append(f"| {label} | {m['round_ms']:.1f} | {m['cpu_ms']:.1f} | "
                    + " | ".join(f"{m[k]:.2f}" for k in LONG_PHASES) + " |")
    files = ["| table | " + " | ".join(f"files / _delta_log at round {n}" for n in sorted(r["files"])) + " |",
             "|---|" + "---|" * len(r["files"])]
    for name in sorted(r["files"][max(r["files"])]):
        files.append(f"| {name} | " + " | ".join(
            "{} / {}".format(*r["files"][n].get(name, (0, 0))) for n in sorted(r["files"])) + " |")
    engine = EmulatorSettings.of(r["emulator"]).engine
    jobs = "windows (no Spark job)" if engine == "local" else "Spark jobs"
    head = (f"{r['brokers']} brokers x 2 dirs, engine {engine}, {r['partitions']} partitions RF 3, {r['rounds']} rounds, "
            f"{r['jobs']} {jobs}, run loop {r['loop_s']:.0f} s; last rounds / round 100: wall **{r['ratio']:.2f}x**, "
            f"CPU **{r['cpu_ratio']:.2f}x**; "
            f"acked {r['acked']}, lost {r['lost_acked']}\n\n")
    return head + "\n".join(rows) + "\n\n" + "\n".join(files) + "\n"
def idle_hour_scenario(brokers: int, partitions: int, engine: str, seconds: float = 3600.0):
    """`partitions` RF 3 partitions on `brokers` brokers, one acks=all record per partition at 0 s, then
    nothing until `seconds`."""
    from .scenario import parse_scenario

    return parse_scenario({
        "seed": 11, "cluster": {"brokers": brokers, "log_dirs": ["d0", "d1"], "emulator": {"engine": engine}},
        "topics": [{"name": "idle", "partitions": partitions, "replication_factor": min(3, brokers)}],
        "timeline": [{"at": 0, "produce": {"topic": "idle", "partition": "all", "records": partitions,
                                           "acks": "all"}}],
        "run": {"until_ms": int(seconds * 1000)}}, name=f"idle-hour-{brokers}x{partitions}")


def measure_idle_hour(spark, brokers: int, partitions: int, workdir: str, engine: str = "rounds") -> dict:
    """Run the idle hour on `engine`: rounds run (and after 10 s), Spark jobs, wall time of the run loop."""
    from .cluster import Cluster

    sc = idle_hour_scenario(brokers, partitions, engine)
    c = Cluster.from_scenario(sc, spark=spark, out=os.path.join(workdir, sc.name), overwrite=True)
    total = sc.end_ms // c.round_ms + 1
    t = time.perf_counter()
    jobs = sum(1 for _ in c.jobs(total))
    loop = time.perf_counter() - t
    c.run(sc.end_ms)
    m = c._df("metrics").select("time_ms").toPandas()["time_ms"]
    return {"engine": ENGINE_NAMES[engine], "brokers": brokers, "replicas": partitions * min(3, brokers),
            "emulated_s": sc.end_ms / 1000, "rounds": total, "rounds_run": len(m), "after_10s": int((m > 10000).sum()),
            "jobs": jobs, "loop_s": loop, "realtime": sc.end_ms / 1000 / loop}


def idle_hour_table(results: list[dict]) -> str:
    head = ("| engine | brokers | replicas | emulated s | rounds | rounds of work | of them after 10 s | Spark jobs | "
            "run loop (s) | real-time factor |\n|---|---|---|---|---|---|---|---|---|---|\n")
    return head + "\n".join(
        f"| {r['engine']} | {r['brokers']} | {r['replicas']} | {r['emulated_s']:.0f} | {r['rounds']} | "
        f"{r['rounds_run']} | {r['after_10s']} | {r['jobs']} | {r['loop_s']:.1f} | {r['realtime']:.0f}x |"
        for r in results) + "\n"


def medians(runs: list[dict]) -> list[dict]:
    """Each engine's median run of `runs` (measure_reference's dicts) by run-loop time, as a row of its own
    (run "median of N"): with 10-25% between runs minutes apart on a shared machine, one run says little.
    An odd N gives a run that happened; an even N the slower of the middle two."""
    out = []
    for engine in dict.fromkeys(r["engine"] for r in runs):
        mine = sorted((r for r in runs if r["engine"] == engine), key=lambda r: r["loop_s"])
        out.append({**mine[len(mine) // 2], "run": f"median of {len(mine)}"})
    return out


def _mib(v: float | None) -> str:
    return "?" if v is None else f"{v:,.0f}"


def reference_table(results: list[dict]) -> str:
    head = ("| run | engine | brokers | replicas | emulated s | rounds | Spark jobs | run loop (s) | real-time factor | "
            "replica-rounds/s | median round (ms) | first / last 10 rounds (ms) | setup / end (s) | driver peak (MiB) | acked | "
            "lost |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    lines = [f"| {r.get('run', 1)} | {r['engine']} | {r['brokers']} | {r['replicas']} | {r['emulated_s']:.1f} | {r['rounds']} | "
             f"{r.get('jobs', r['rounds'])} | "
             f"{r['loop_s']:.1f} | {r['realtime']:.3f}x | {r['replica_rounds_per_s']:.0f} | "
             f"{r['median_round_ms']:.0f} | {r['first_rounds_ms']:.0f} / {r['last_rounds_ms']:.0f} | "
             f"{r['setup_s']:.1f} / {r['end_s']:.1f} | {_mib(r.get('driver_peak_mib'))} | {r['acked']} | "
             f"{r['lost_acked']} |" for r in results]
    return head + "\n".join(lines) + "\n"


def table(results: list[dict]) -> str:
    head = ("| brokers | partitions | replicas | rows/round | Spark partitions | round (ms) | floor (ms) | "
            "round/floor | replica-rounds/s | driver / job / collect / commit / history (ms) |\n"
            "|---|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in results:
        ph = r["phases"]
        split = " / ".join(f"{ph.get(k, 0):.0f}" for k in ("driver", "job", "collect", "commit", "history"))
        lines.append(f"| {r['brokers']} | {r['partitions']} | {r['replicas']} | {r['rows']} | "
                     f"{r['spark_partitions']} | {r['round_ms']:.0f} | {r['floor_ms']:.0f} | {r['ratio']:.2f} | "
                     f"{r['replica_rounds_per_s']:.0f} | {split} |")
    return head + "\n".join(lines) + "\n"


MODES = ("reference", "long_run", "idle_hour", "exchange", "operator")
SCALED = ("reference", "long_run", "idle_hour", "operator")  # the modes --scale applies to


def check_args(args: argparse.Namespace) -> argparse.Namespace:
    """`args` with each flag's default for the bench chosen, or a ScenarioError naming the flag and value,
    before Spark starts: a flag the chosen bench does not use is refused, not ignored (`--scale 96,20000`
    without --reference ran the round-cost table)."""
    from .errors import ScenarioError

    flag = lambda m: "--" + m.replace("_", "-")  # noqa: E731
    modes = [m for m in MODES if getattr(args, m, False)]
    if len(modes) > 1:
        raise ScenarioError(flag(modes[1]), True, f"is a bench of its own: not with {flag(modes[0])}")
    mode = modes[0] if modes else None
    unused = {"scale": mode not in SCALED, "seconds": mode not in ("reference", "operator"),
              "repeat": mode != "reference",
              "brokers": mode is not None,
              "partitions": mode is not None, "engine": mode not in SCALED,
              "rounds": mode in ("reference", "idle_hour")}
    for name, refused in unused.items():
        if refused and getattr(args, name) is not None:
            raise ScenarioError("--" + name, getattr(args, name),
                                f"not used by {flag(mode) if mode else 'the round-cost table (no --reference, ...)'}")
    if args.scale is not None and not re.fullmatch(r"[1-9]\d*,[1-9]\d*", args.scale):
        raise ScenarioError("--scale", args.scale, "must be BROKERS,PARTITIONS: two positive integers")
    for name in ("brokers", "partitions"):
        if getattr(args, name) is not None and not re.fullmatch(r"[1-9]\d*(,[1-9]\d*)*", getattr(args, name)):
            raise ScenarioError("--" + name, getattr(args, name), "must be positive integers, comma-separated")
    if args.seconds is not None and not args.seconds > 0:
        raise ScenarioError("--seconds", args.seconds, "must be > 0 (emulated seconds)")
    if args.repeat is not None and args.repeat < 1:
        raise ScenarioError("--repeat", args.repeat, "must be >= 1")
    if args.rounds is not None and args.rounds < 1:
        raise ScenarioError("--rounds", args.rounds, "must be >= 1")
    if args.engine is not None:
        bad = [e for e in args.engine.split(",") if e not in ENGINE_NAMES]
        if bad:
            raise ScenarioError("--engine", args.engine, f"the engines are {', '.join(ENGINE_NAMES)}")
        if mode in ("long_run", "operator") and "," in args.engine:
            raise ScenarioError("--engine", args.engine, f"{flag(mode)} runs one engine")
    defaults = {"scale": {"reference": "12,3000", "long_run": "3,6", "idle_hour": "3,30",
                          "operator": "200,100000"}.get(mode or ""),
                "seconds": 60.0, "repeat": 1, "brokers": "3,12,48", "partitions": "100,1000,10000",
                "engine": "resident" if mode in ("long_run", "operator") else "rounds,resident",
                "rounds": {"long_run": 10_000, "exchange": 200}.get(mode or "", 10)}
    return argparse.Namespace(**{**vars(args), **{k: v for k, v in defaults.items() if getattr(args, k) is None}})


def main(args: argparse.Namespace) -> int:
    from .engine.session import get_spark

    args = check_args(args)
    spark = get_spark(args.master)
    if args.exchange:
        print(exchange_table(spark, rounds=args.rounds))
        return 0
    if args.operator:
        from .bench_operator import main as operator_main

        return _emit(operator_main(args, spark, lambda b, p, work: measure(spark, b, p, 3, work)["floor_ms"]),
                     args.markdown)
    if args.long_run:
        b, p = (int(x) for x in args.scale.split(","))
        with tempfile.TemporaryDirectory(prefix="sparkkafka-bench-") as work:
            n = args.rounds
            engine = args.engine
            md = long_run_table(measure_long_run(spark, b, p, n, work, progress=not args.no_progress,
                                                 span=min(500, max(1, n // 5)), engine=engine))
        return _emit(md, args.markdown)
    if args.idle_hour:
        b, p = (int(x) for x in args.scale.split(","))
        runs = []
        for engine in args.engine.split(","):
            with tempfile.TemporaryDirectory(prefix="sparkkafka-bench-") as work:
                runs.append(measure_idle_hour(spark, b, p, work, engine=engine))
            print(idle_hour_table(runs[-1:]), flush=True)
        return _emit(idle_hour_table(runs), args.markdown)
    if args.reference:
        b, p = (int(x) for x in args.scale.split(","))
        runs = []
        for k in range(args.repeat):  # the engines in turn: a slower stretch of the machine hits both alike
            for engine in args.engine.split(","):
                with tempfile.TemporaryDirectory(prefix="sparkkafka-bench-") as work:
                    runs.append({"run": k + 1, **measure_reference(spark, b, p, args.seconds, work,
                                                                   progress=not args.no_progress, engine=engine)})
                print(reference_table(runs[-1:]), flush=True)
        md = reference_table(runs + (medians(runs) if args.repeat > 1 else []))
        return _emit(md, args.markdown)
    results = []
    with tempfile.TemporaryDirectory(prefix="sparkkafka-bench-") as work:
        for b in [int(x) for x in args.brokers.split(",")]:
            for p in [int(x) for x in args.partitions.split(",")]:
                r = measure(spark, b, p, args.rounds, work)
                results.append(r)
                print(f"brokers={b} partitions={p}: round {r['round_ms']:.0f} ms, floor {r['floor_ms']:.0f} ms, "
                      f"ratio {r['ratio']:.2f}", flush=True)
    return _emit(table(results), args.markdown)


def _emit(md: str, path: str | None) -> int:
    """Print a Markdown table, and write it to `path` when given."""
    print(md)
    if path:
        with open(path, "w") as f:
            f.write(md)
    return 0


class Relay:
    """The exchange probe, run inside one barrier stage (`mapInPandas(..., barrier=True)`): brokers
    0..n-1 live in the tasks (broker b in task b % tasks); each round every broker sends its value + 1
    and a `payload`-byte blob to broker b + 1 through the mesh (engine/exchange.py). After `rounds` rounds,
    or once any task's header asks to stop (`stop_at`), every task returns its brokers' values and its
    median exchange time. Broker b starts at 100 b, so after k rounds it holds 100 ((b - k) mod n) + k."""

    SCHEMA = "broker int, value long, rounds long, exchange_ms double"

    def __init__(self, brokers: int, rounds: int, payload: int = 0, stop_at: int | None = None) -> None:
        self.brokers, self.rounds, self.payload, self.stop_at = brokers, rounds, payload, stop_at

    def __call__(self, batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        import numpy as np
        from pyspark import BarrierTaskContext

        from .engine.exchange import Mesh, exchange_frames

        mine = pd.concat(list(batches), ignore_index=True)
        ctx = BarrierTaskContext.get()
        mesh = Mesh.rendezvous(ctx)
        try:
            values = dict(zip(mine["broker"].tolist(), (mine["broker"] * 100).tolist(), strict=True))
            times, done = [], 0
            blob = "x" * self.payload
            for k in range(1, self.rounds + 1):
                out = pd.DataFrame({"dest": [(b + 1) % self.brokers for b in values],
                                    "value": [v + 1 for v in values.values()], "blob": blob})
                t = time.perf_counter()
                headers, inbox = exchange_frames(mesh, out, "dest", {"stop": self.stop_at == k})
                times.append(time.perf_counter() - t)
                values = dict(zip(inbox["dest"].tolist(), inbox["value"].tolist(), strict=True))
                done = k
                if any(h.get("stop") for h in headers):
                    break
        finally:
            mesh.close()
        yield pd.DataFrame({"broker": list(values), "value": list(values.values()), "rounds": done,
                            "exchange_ms": float(np.median(times) * 1000) if times else 0.0})


def relay(spark, brokers: int, rounds: int, tasks: int = 2, payload: int = 0,
          stop_at: int | None = None) -> pd.DataFrame:
    """Run the exchange probe as one barrier job over `tasks` tasks; returns one row per broker."""
    df = spark.range(brokers).selectExpr("CAST(id AS INT) AS broker").repartitionById(tasks, "broker")
    return df.mapInPandas(Relay(brokers, rounds, payload, stop_at), Relay.SCHEMA, barrier=True).toPandas()


def exchange_table(spark, rounds: int = 200, brokers: int = 12, tasks: int = 2,
                   payloads: tuple[int, ...] = (0, 10_000, 100_000, 1_000_000)) -> str:
    """`bench --exchange`: the cost of one round's message exchange between resident tasks, against one
    Spark job per round. Per payload (bytes each broker sends per round): the median exchange inside
    the tasks, and the whole barrier job's wall time per round (Spark's job, the rendezvous and the
    rounds)."""
    lines = ["| brokers | tasks | rounds | bytes per broker per round | median exchange (ms) | "
             "job wall per round (ms) |", "|---|---|---|---|---|---|"]
    for size in payloads:
        t = time.perf_counter()
        rows = relay(spark, brokers, rounds, tasks, payload=size)
        wall = time.perf_counter() - t
        lines.append(f"| {brokers} | {tasks} | {rounds} | {size} | {rows['exchange_ms'].median():.2f} | "
                     f"{wall / rounds * 1000:.1f} |")
    return "\n".join(lines) + "\n"
