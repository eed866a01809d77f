"""`sparkkafka bench --operator`: an operator's questions on a cluster of operator size, end to end.

A generated snapshot (sparkkafka/tools/snapshot.py: `--scale 200,100000` by default, 200 brokers in 3 racks,
100,000 partitions at RF 3, uneven disks, moves in flight) is written, then timed as a user meets it:

* import: the snapshot's files read into a scenario (`whatif` and `import` start with it);
* `whatif SNAPSHOT --lose-rack rack-a`, the whole command in this process: the import again, the
  prediction, the emulated run (setup, loop, end of run: Cluster.wall_s) and the answer's text;
* a reassignment of every tenth partition (its last replica to another broker of the same rack) under a
  throttle at which `whatif --reassign`'s prediction takes MOVE_S (two emulated hours): the prediction,
  then the emulated move for its first `--seconds` (default 60) emulated seconds, every round run. The
  wall time of the whole move is projected from that loop's real-time factor.

Each row has the wall time per phase and the real-time factor of the whole command (emulated seconds /
wall seconds, setup and end included), beside the engine-floor figure of the same session (one
identity round over the same brokers: bench.py's floor) so that a slower machine is seen as such.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from pathlib import Path
from typing import Any

MOVE_S = 7200  # the reassignment's predicted length: two emulated hours
PROBE_THROTTLE = 10 << 20  # B/s: the prediction at this throttle scales the one that takes MOVE_S


def reassign_plan(parts, racks: dict[int, str], every: int = 10) -> dict:
    """kafka-reassign-partitions JSON moving every `every`-th partition's last replica to another broker of its
    rack (a rack-preserving move), the rack's brokers taken in turn so that the new replicas spread evenly;
    partitions already reassigning are left out."""
    by_rack: dict[str, list[int]] = {}
    for b, rack in sorted(racks.items()):
        by_rack.setdefault(rack, []).append(b)
    moves = []
    for i, r in enumerate(parts.sort_values(["topic", "partition"]).itertuples()):
        if i % every or len(r.adding) or len(r.removing):
            continue
        old = list(r.replicas)[-1]
        rack = by_rack[racks[old]]
        turn = len(moves)
        new = next((b for j in range(len(rack)) if (b := rack[(turn + j) % len(rack)]) not in r.replicas), None)
        if new is not None:
            moves.append({"topic": r.topic, "partition": int(r.partition),
                          "replicas": [*list(r.replicas)[:-1], new], "log_dirs": ["any"] * len(r.replicas)})
    return {"version": 1, "partitions": moves}


def _emulated_s(run_dir: str) -> float:
    """The emulated seconds a run reached (its last metrics row: the recovery's rounds included)."""
    from .whatif import _metrics

    times = _metrics(str(Path(run_dir) / "tables"))["time_ms"]
    return int(times.max()) / 1000 if len(times) else 0.0


def _replicas(sc) -> int:
    return sum(len(r) for t in sc.topics for r in (t.assignment or {}).values())


def _ends(run) -> str:
    return "; end: " + ", ".join(f"{k} {v:.1f} s" for k, v in run.end_s.items())


def _row(name: str, sc, emulated_s: float, total_s: float, wall: dict, note: str, **more) -> dict:
    """A row: the run's phases (Cluster.wall_s), the rest of the command counted as import."""
    return {"row": name, "brokers": len(sc.brokers), "partitions": sum(t.partitions for t in sc.topics),
            "replicas": _replicas(sc), "emulated_s": emulated_s, "import_s": total_s - sum(wall.values()),
            "setup_s": wall.get("setup", 0.0), "loop_s": wall.get("loop", 0.0), "end_s": wall.get("end", 0.0),
            "total_s": total_s, "realtime": emulated_s / total_s if emulated_s else None, "note": note, **more}


def measure_operator(spark: Any, brokers: int, partitions: int, workdir: str, seconds: float = 60.0,
                     engine: str = "resident", report: Any = None) -> list[dict]:
    """The three rows (import, whatif --lose-rack, the throttled move) on a generated snapshot; `report(row)`
    is called as each is measured (the bench prints it: at operator size a row takes minutes)."""
    from . import whatif as W
    from .scenario.loader import INT_MAX, parse_scenario
    from .tools import snapshot
    from .whatif_questions import add_whatif_arguments, loss_run

    work = Path(workdir)
    t = time.perf_counter()
    snap = snapshot.write(work / "snapshot", brokers, partitions)
    generated = time.perf_counter() - t

    t = time.perf_counter()
    sc = parse_scenario(W.load_snapshot(snap, record_bytes=INT_MAX), name="operator")
    rows = [_row("import", sc, 0.0, time.perf_counter() - t, {}, f"snapshot generated in {generated:.1f} s")]
    report = report or (lambda row: None)
    report(rows[-1])

    parser = argparse.ArgumentParser(prog="sparkkafka whatif")
    add_whatif_arguments(parser)
    args = parser.parse_args([str(snap), "--lose-rack", "rack-a", "--engine", engine, "--run-dir", str(work / "lose-rack")])
    t = time.perf_counter()
    loss, predicted, emulated, lsc = loss_run(args, lambda: contextlib.nullcontext(spark))
    W.loss_text(loss, predicted, emulated, W.rates_at_risk(lsc, predicted))
    m = emulated.metrics
    rows.append(_row("whatif --lose-rack rack-a", lsc, _emulated_s(emulated.run_dir),
                     time.perf_counter() - t, emulated.wall_s,
                     f"offline {m['offline']}, under min ISR {m['under_min_isr']}, under replicated "
                     f"{m['under_replicated']}; recovered "
                     + ("not" if emulated.recovery_ms is None else f"{emulated.recovery_ms / 1000:g} s")
                     + " after the restart" + _ends(emulated)))
    report(rows[-1])

    plan = json.dumps(reassign_plan(W.partitions_frame(sc), sc.racks))
    t = time.perf_counter()
    _, _, probe, _ = W.reassign_prediction(snap, plan, PROBE_THROTTLE)
    throttle = int(PROBE_THROTTLE * W.total_ms(probe["eta_ms"]) / (MOVE_S * 1000)) + 1
    mapping, entries, predicted, _ = W.reassign_prediction(snap, plan, throttle)
    mapping["cluster"].setdefault("emulator", {})["engine"] = engine
    until = 1000 + int(seconds * 1000)
    moved = W.emulate_reassign(mapping, entries, throttle, spark=spark, out=str(work / "move"), at_ms=1000,
                               until_ms=until)
    wall = moved.wall_s
    eta_s = W.total_ms(predicted["eta_ms"]) / 1000
    loop_rtf = (until / 1000) / wall["loop"]
    projected = wall["setup"] + (1 + eta_s) / loop_rtf + wall["end"]
    rows.append(_row(f"reassign {len(entries):,} partitions: its first {seconds:g} s", sc, until / 1000,
                     time.perf_counter() - t, wall,
                     f"throttle {throttle:,} B/s, predicted {eta_s / 3600:.2f} h; the whole move at this loop's "
                     f"{loop_rtf:.2f}x: ~{projected / 60:.0f} min wall" + _ends(moved), projected_s=projected))
    report(rows[-1])
    return rows


def operator_table(rows: list[dict], floor_ms: float | None = None) -> str:
    head = ("| row | brokers | partitions | replicas | emulated s | import (s) | setup (s) | loop (s) | end (s) | "
            "whole command (s) | real-time factor | |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    lines = [f"| {r['row']} | {r['brokers']} | {r['partitions']:,} | {r['replicas']:,} | {r['emulated_s']:g} | "
             f"{r['import_s']:.1f} | {r['setup_s']:.1f} | {r['loop_s']:.1f} | {r['end_s']:.1f} | {r['total_s']:.1f} | "
             + (f"{r['realtime']:.2f}x" if r["realtime"] else "-") + f" | {r['note']} |" for r in rows]
    tail = "" if floor_ms is None else f"\nEngine floor of this session: {floor_ms:.0f} ms a round.\n"
    return head + "\n".join(lines) + "\n" + tail


def main(args: argparse.Namespace, spark: Any, floor_ms: Any) -> str:
    """The bench's table; `floor_ms(brokers, partitions, workdir)` measures the engine floor (bench.py's)."""
    import tempfile

    b, p = (int(x) for x in args.scale.split(","))
    with tempfile.TemporaryDirectory(prefix="sparkkafka-bench-") as work:
        rows = measure_operator(spark, b, p, work, seconds=args.seconds, engine=args.engine,
                                report=lambda row: print(operator_table([row]), flush=True))
    with tempfile.TemporaryDirectory(prefix="sparkkafka-bench-") as work:
        floor = floor_ms(b, p, work)
    return operator_table(rows, floor)
