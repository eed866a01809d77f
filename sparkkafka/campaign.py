"""Fault campaigns: many seeded fault schedules of a small cluster, each run whole inside one Spark task.

The driver draws N schedules (scenario/faults.py), makes a DataFrame of N rows (schedule id, the
scenario as JSON) and maps it over a few partitions; each row runs its cluster on the in-process
engine (engine/local.py: the round engine's `process`, no Spark job per round) in a temporary run
directory on the executor, and yields one result row: the checker's verdicts (scenario/checker.py:
lost, divergent and the history invariants: docs/tables.md, the `violations` table), the unavailability time
and the wall time. The driver writes the rows to the Delta table OUT/tables/campaign, OUT/summary.json, and
every failing schedule as OUT/failing/<schedule>.yaml: a complete scenario that `sparkkafka run` replays on
the normal engine, giving the same numbers (the engines give the same tables). `explore` runs every sequence
of a bounded fault alphabet (faults.enumerate_schedules) under each inter.broker.protocol.version asked for,
and reports which invariants break under which version.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import yaml

from .scenario.checker import KINDS

RESULT = pa.schema([
    ("schedule", pa.string()), ("faults", pa.string()), ("rounds", pa.int64()), ("acked", pa.int64()),
    *[(k, pa.int64()) for k in KINDS],  # lost, divergent, then the history invariants
    ("unavailable_ms", pa.int64()), ("wall_ms", pa.int64()), ("error", pa.string()),
])
RESULT_DDL = ", ".join(f"{f.name} {'string' if f.type == pa.string() else 'bigint'}" for f in RESULT)


def unavailable_ms(metrics: pd.DataFrame, end_ms: int) -> int:
    """Emulated ms during which some partition had no live leader (OfflinePartitionsCount > 0) or was
    under its min.insync.replicas (acks=all produce refused, UnderMinIsrPartitionCount > 0). Each
    metrics row holds until the next one (rounds an idle jump skipped changed nothing)."""
    if metrics.empty:
        return 0
    m = metrics.sort_values("round", kind="stable")
    t = m["time_ms"].to_numpy()
    span = np.diff(np.r_[t, max(end_ms, int(t[-1])) + 1])
    bad = (m["offline"].to_numpy() > 0) | (m["under_min_isr"].to_numpy() > 0)
    return int(span[bad].sum())


def faults_of(scenario: dict) -> str:
    """The schedule's fault events, as compact JSON (the result row's `faults`)."""
    from .scenario.faults import FAULT_EVENTS

    ev = [e for e in scenario.get("timeline") or [] if any(k in e for k in FAULT_EVENTS)]
    return json.dumps(ev, separators=(",", ":"), sort_keys=True)


def run_schedule(schedule: str, scenario: dict, workdir: str | None = None) -> dict:
    """Run one schedule on the in-process engine in a temporary run directory; its result row. A
    schedule that fails to run is a result too (`error`), not the campaign's end."""
    from .cluster import Cluster
    from .storage import tables as T

    sc = copy.deepcopy(scenario)
    sc.setdefault("cluster", {}).setdefault("emulator", {})["engine"] = "local"
    t0 = time.perf_counter()
    out = tempfile.mkdtemp(prefix="sparkkafka-schedule-", dir=workdir)
    row: dict = {"schedule": schedule, "faults": faults_of(scenario), "error": None}
    try:
        c = Cluster.from_scenario(sc, spark=None, out=os.path.join(out, "run")).run()
        s = c.summary()
        row.update(rounds=int(s["rounds"]), acked=int(s["acked"]), **{k: int(s["violations"][k]) for k in KINDS},
                   unavailable_ms=unavailable_ms(T.read_table(c.tables_dir, "metrics").to_pandas(), s["time_ms"]))
    except Exception as e:  # noqa: BLE001 - reported in the row, replayable from the failing file
        row["error"] = f"{type(e).__name__}: {e}"
    finally:
        shutil.rmtree(out, ignore_errors=True)
    row["wall_ms"] = int((time.perf_counter() - t0) * 1000)
    return {f.name: row.get(f.name, 0 if f.type != pa.string() else None) for f in RESULT}


class CampaignTask:
    """The function given to mapInPandas: (schedule, scenario JSON) rows -> result rows."""

    def __call__(self, batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in batches:
            rows = [run_schedule(s, json.loads(j)) for s, j in zip(batch["schedule"], batch["scenario"], strict=True)]
            if rows:
                yield pd.DataFrame(rows, columns=RESULT.names)


def failing(results: pd.DataFrame) -> pd.Series:
    """Rows with any violation, or that did not run."""
    return (results[list(KINDS)].sum(axis=1) > 0) | results["error"].notna()


def run_schedules(spark, schedules: Sequence[tuple[str, dict]], tasks: int | None = None) -> pd.DataFrame:
    """Every schedule run in a Spark task (spark None: in this process, one after another)."""
    if spark is None:
        return pd.DataFrame([run_schedule(s, sc) for s, sc in schedules], columns=RESULT.names)
    tasks = tasks or int(spark.sparkContext.defaultParallelism)
    rows = pd.DataFrame({"schedule": [s for s, _ in schedules], "scenario": [json.dumps(sc) for _, sc in schedules]})
    # several small partitions per task slot: a slow schedule holds up only its own partition
    parts = max(1, min(len(rows), tasks * 4))
    df = spark.createDataFrame(rows, schema="schedule string, scenario string").repartition(parts)
    out = df.mapInPandas(CampaignTask(), RESULT_DDL).toPandas()
    return out.sort_values("schedule", kind="stable").reset_index(drop=True)


def write_results(out: str, results: pd.DataFrame, schedules: Sequence[tuple[str, dict]], summary: dict) -> dict:
    """OUT/tables/campaign (Delta), OUT/failing/<schedule>.yaml, OUT/summary.json; returns the summary."""
    from .storage.delta_writes import overwrite

    os.makedirs(out, exist_ok=True)
    table = pa.Table.from_pandas(results[RESULT.names], schema=RESULT, preserve_index=False)
    overwrite(os.path.join(out, "tables", "campaign"), table)
    bad = results[failing(results)]
    by_id = dict(schedules)
    shutil.rmtree(os.path.join(out, "failing"), ignore_errors=True)
    if len(bad):
        os.makedirs(os.path.join(out, "failing"))
    for r in bad.itertuples():
        found = {k: int(getattr(r, k)) for k in KINDS if getattr(r, k)}
        head = (f"# {r.schedule}: {json.dumps(found) if found else r.error}\n"
                f"# replay: sparkkafka run {os.path.join(out, 'failing', r.schedule + '.yaml')}\n")
        with open(os.path.join(out, "failing", f"{r.schedule}.yaml"), "w") as f:
            f.write(head + yaml.safe_dump(by_id[r.schedule], sort_keys=False, default_flow_style=None))
    summary = {**summary, "schedules": int(len(results)), "failing": int(len(bad)),
               "errors": int(results["error"].notna().sum()),
               "violations": {k: int(results[k].sum()) for k in KINDS},
               "schedules_with": {k: int((results[k] > 0).sum()) for k in KINDS},
               "unavailable_ms": {"total": int(results["unavailable_ms"].sum()),
                                  "max": int(results["unavailable_ms"].max()) if len(results) else 0},
               "failing_schedules": sorted(bad["schedule"].tolist())}
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2, sort_keys=True)
    return summary


def campaign(spark, base: dict, out: str, n: int, seed: int, plan=None, tasks: int | None = None,
             first: int = 0) -> dict:
    """`sparkkafka campaign`: N seeded schedules of `base` from schedule `first` on (faults.Plan;
    default: faults while its workload runs); returns OUT/summary.json's content."""
    from .scenario import faults

    plan = plan or faults.default_plan(base)
    schedules = [(sc["name"], sc) for sc in faults.draw_schedules(base, plan, seed, n, first)]
    for _, sc in schedules[:1]:  # a base scenario the loader refuses fails here, before any task
        _validate(sc)
    t0 = time.perf_counter()
    results = run_schedules(spark, schedules, tasks)
    wall = time.perf_counter() - t0
    return write_results(out, results, schedules, {
        "scenario": base.get("name"), "seed": seed, "first": first, "plan": _plain(plan), "wall_s": round(wall, 3),
        "schedules_per_s": round(len(schedules) / wall, 3) if wall else None,
        "master": None if spark is None else spark.conf.get("spark.master", None)})


def _validate(sc: dict) -> None:
    from .scenario.loader import parse_scenario

    parse_scenario(copy.deepcopy(sc), name=sc.get("name", "campaign"))


def _plain(x) -> dict:
    import dataclasses

    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(x).items()}


def explore(spark, base: dict, out: str, depth: int, slots_ms: Sequence[int], versions: Sequence[str],
            settle_ms: int = 3000, power_loss: bool = True, failover: bool = False,
            tasks: int | None = None) -> dict:
    """Bounded exploration: every sequence of up to `depth` fault steps (faults.alphabet of the base's
    brokers) at `slots_ms`, under each inter.broker.protocol.version in `versions`; OUT/<version>/ is
    a campaign's output, OUT/exploration.json which invariants broke under which version and the bound."""
    from .scenario import faults

    steps = faults.alphabet(faults.brokers_of(base), power_loss=power_loss, failover=failover)
    report: dict = {"scenario": base.get("name"), "bound": {
        "depth": depth, "slots_ms": list(slots_ms), "steps": [faults.label(s) for s in steps],
        "settle_ms": settle_ms, "rule": "every sequence of 1..depth steps, step i at slots_ms[i], skipping "
                                        "sequences with a step that changes nothing (crash of a down broker, "
                                        "restart of a running one); every broker restarted after the base "
                                        "timeline's last event"},
        "versions": {}}
    t0 = time.perf_counter()
    for v in versions:
        vb = copy.deepcopy(base)
        vb["cluster"].setdefault("config", {})["inter.broker.protocol.version"] = v
        vb["name"] = f"{base.get('name', 'explore')}-ibp{v}"
        schedules = [(sc["name"], sc) for _, sc in faults.enumerate_schedules(vb, steps, depth, slots_ms, settle_ms)]
        _validate(schedules[0][1])
        t = time.perf_counter()
        results = run_schedules(spark, schedules, tasks)
        s = write_results(os.path.join(out, f"ibp-{v}"), results, schedules,
                          {"scenario": vb["name"], "wall_s": round(time.perf_counter() - t, 3)})
        bad = results[failing(results)]
        report["versions"][v] = {
            "schedules": s["schedules"], "errors": s["errors"],
            "broken": {k: n for k, n in s["schedules_with"].items() if n},
            "first": {k: bad.loc[bad[k] > 0, "schedule"].iloc[0] for k in KINDS if (bad[k] > 0).any()}}
    report["wall_s"] = round(time.perf_counter() - t0, 3)
    with open(os.path.join(out, "exploration.json"), "w") as f:
        json.dump(report, f, indent=2, sort_keys=True)
    return report


__all__ = ["RESULT", "campaign", "explore", "failing", "run_schedule", "run_schedules", "unavailable_ms"]
