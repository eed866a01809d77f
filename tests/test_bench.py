"""The benchmark's reference scenario is the one docs/benchmarks.md describes, and its flags are checked (no
Spark needed but for the one repeated run)."""

from pathlib import Path

import pytest

from sparkkafka.bench import reference_scenario


def test_reference_scenario_shape():
    sc = reference_scenario()
    assert len(sc.brokers) == 12
    assert list(sc.log_dirs) == ["d0", "d1", "d2"]
    (t,) = sc.topics
    assert (t.partitions, t.replication_factor) == (3000, 3)
    assert sc.end_ms == 60000
    kinds = [(e.type, e.time_ms(sc.round_ms)) for e in sc.timeline]
    assert ("crash", 20000) in kinds and ("restart", 40000) in kinds
    (prod,) = [e for e in sc.timeline if e.type == "produce"]
    assert str(prod.args["acks"]) in ("all", "-1") and prod.args["partition"] == "all"
    assert prod.args["duration_ms"] == 60000


def test_reference_scenario_scales():
    sc = reference_scenario(96, 20000, 6)
    assert len(sc.brokers) == 96 and sc.topics[0].partitions * sc.topics[0].replication_factor == 60000
    assert [(e.type, e.time_ms(sc.round_ms)) for e in sc.timeline if e.type != "produce"] == [
        ("crash", 2000), ("restart", 4000)]


def test_long_run_scenario_shape():
    from sparkkafka.bench import long_run_scenario

    sc = long_run_scenario(3, 6, 10_000, **{"delta.compact.min.files": 7})
    assert len(sc.brokers) == 3 and len(sc.log_dirs) == 2 and sc.emulator["engine"] == "resident"
    assert sc.emulator["delta.compact.min.files"] == 7
    assert sc.end_ms // sc.round_ms + 1 == 10_000  # rounds 0 .. 9,999
    (prod,) = sc.timeline
    assert prod.args["duration_ms"] > sc.end_ms and prod.args["partition"] == "all"


def _bench_args(*argv):
    from sparkkafka.cli import _parser

    return _parser().parse_args(["bench", *argv])


def test_bench_flags_get_the_chosen_benchs_defaults():
    from sparkkafka.bench import check_args

    ref = check_args(_bench_args("--reference"))
    assert (ref.scale, ref.seconds, ref.engine, ref.repeat) == ("12,3000", 60.0, "rounds,resident", 1)
    long = check_args(_bench_args("--long-run", "--scale", "3,9"))
    assert (long.scale, long.rounds, long.engine) == ("3,9", 10_000, "resident")
    assert check_args(_bench_args("--exchange")).rounds == 200
    table = check_args(_bench_args("--rounds", "5"))
    assert (table.brokers, table.partitions, table.rounds) == ("3,12,48", "100,1000,10000", 5)



@pytest.mark.parametrize("argv,field", [
    (["--scale", "96,20000"], "--scale"),  # without --reference it ran the round-cost table, silently
    (["--seconds", "10"], "--seconds"),
    (["--reference", "--scale", "96"], "--scale"),
    (["--reference", "--scale", "0,10"], "--scale"),
    (["--reference", "--seconds", "0"], "--seconds"),
    (["--reference", "--engine", "rounds,fast"], "--engine"),
    (["--reference", "--rounds", "5"], "--rounds"),
    (["--reference", "--brokers", "3"], "--brokers"),
    (["--long-run", "--engine", "rounds,resident"], "--engine"),
    (["--reference", "--long-run"], "--long-run"),
    (["--reference", "--repeat", "0"], "--repeat"),
    (["--long-run", "--repeat", "3"], "--repeat"),
    (["--partitions", "10,x"], "--partitions"),
])
def test_a_flag_the_bench_does_not_use_or_a_bad_value_exits_2_naming_it(argv, field, capsys):
    """Refused before Spark starts: exit 2 and the flag and value named, as for any bad input."""
    from sparkkafka.cli import main

    assert main(["bench", *argv]) == 2
    err = capsys.readouterr().err
    assert f"error: {field}:" in err


def test_medians_pick_each_engines_middle_run_by_loop_time():
    from sparkkafka.bench import medians, reference_table

    def run(k, engine, loop):
        return {"run": k, "engine": engine, "brokers": 12, "replicas": 9000, "emulated_s": 60.1, "rounds": 601,
                "jobs": 6, "loop_s": loop, "realtime": 60.1 / loop, "replica_rounds_per_s": 1.0,
                "median_round_ms": 30.0, "first_rounds_ms": 30.0, "last_rounds_ms": 30.0, "setup_s": 0.3,
                "end_s": 14.0, "acked": 1, "lost_acked": 0}

    runs = [run(1, "job per round", 250.0), run(1, "resident", 23.0), run(2, "job per round", 270.0),
            run(2, "resident", 19.0), run(3, "job per round", 260.0), run(3, "resident", 21.0)]
    med = medians(runs)
    assert [(m["engine"], m["loop_s"], m["run"]) for m in med] == [
        ("job per round", 260.0, "median of 3"), ("resident", 21.0, "median of 3")]
    assert [m["loop_s"] for m in medians(runs[:4])] == [270.0, 23.0]  # even: the slower of the middle two
    lines = reference_table(runs + med).splitlines()
    assert len(lines) == 2 + 6 + 2
    assert lines[-1].startswith("| median of 3 | resident | 12 |") and "| 2.862x |" in lines[-1]


def bench(tmp: Path, args: tuple[str, ...]) -> str:
    """`sparkkafka bench ARGS` in a child process (its own Spark session): its stdout; it must exit 0."""
    from sparkutil import PYTHON, _run, spark_env

    result = _run([PYTHON, "-m", "sparkkafka.cli", "bench", *args], env=spark_env(), timeout=900, cwd=str(tmp))
    assert result.returncode == 0, result.stderr[-5000:]
    return result.stdout


REPEATED = ("--reference", "--scale", "3,6", "--seconds", "1", "--engine", "rounds,resident", "--repeat", "2",
            "--no-progress")


@pytest.mark.offload(work=bench)
@pytest.mark.parametrize("args", [REPEATED])
def test_a_repeated_reference_run_reports_every_run_and_the_median(offloaded, args):
    """`bench --reference --repeat 2` on a tiny cluster: a row per engine and run, in turn, then the medians."""
    out = offloaded
    final = [row for row in out[out.rindex("| run | engine"):].splitlines()[2:] if row]
    assert [row.split("|")[1:3] for row in final] == [
        [" 1 ", " job per round "], [" 1 ", " resident "], [" 2 ", " job per round "], [" 2 ", " resident "],
        [" median of 2 ", " job per round "], [" median of 2 ", " resident "]]
    assert all(row.split("|")[-2].strip() == "0" for row in final)  # no acked record lost
    # the driver's own peak per run (reset at each run's start): pyspark, pandas and pyarrow alone are ~100 MiB
    assert all(100 < float(row.split("|")[-4].replace(",", "")) < 2048 for row in final)


def test_the_idle_hour_bench_runs_to_its_end_past_the_drivers_checkpoint_saves(spark, capsys):
    """`bench --idle-hour`: 36,001 rounds, so the driver saves the run every emulator.checkpoint.rounds (1000)
    inside the bench's own loop; the run's end (`Cluster.run`) used to be refused as if another writer had
    saved it. The hour is 14 rounds of work, 4 of them after the first 10 s."""
    from sparkkafka.cli import main

    assert main(["bench", "--idle-hour", "--scale", "3,3", "--engine", "resident", "--no-progress"]) == 0
    row = capsys.readouterr().out.strip().splitlines()[-1].split("|")
    assert [c.strip() for c in row[1:8]] == ["resident", "3", "9", "3600", "36001", "14", "4"]


def test_the_long_run_bench_runs_past_a_checkpoint_save(spark, tmp_path):
    """`bench --long-run` over more rounds than emulator.checkpoint.rounds (here 25 of 60): the loop's saves
    do not stop the run's end, and every acked record is kept."""
    from sparkkafka.bench import measure_long_run

    r = measure_long_run(spark, 3, 6, 60, str(tmp_path), span=10, **{"checkpoint.rounds": 25, "resident.rounds": 20})
    assert (r["rounds"], r["jobs"], r["lost_acked"]) == (60, 3, 0)
    assert 6 * 50 < r["acked"] <= 6 * 60  # one record per partition a round; the last rounds' are not acked yet


def test_the_driver_peak_is_this_process_peak_since_its_reset():
    """The reference table's driver peak column: VmHWM of this process, started afresh for each run."""
    from sparkkafka.bench import driver_peak_mib, reset_driver_peak

    assert reset_driver_peak()
    before = driver_peak_mib()
    block = bytearray(256 * 2**20)  # touched: resident, not only reserved
    assert driver_peak_mib() >= before + 250
    del block
    assert reset_driver_peak()
    assert driver_peak_mib() < before + 100


def test_the_operator_bench_defaults_and_refusals(capsys):
    from sparkkafka.bench import check_args
    from sparkkafka.cli import main

    op = check_args(_bench_args("--operator"))
    assert (op.scale, op.seconds, op.engine) == ("200,100000", 60.0, "resident")
    for argv, field in ((["--engine", "rounds,resident"], "--engine"), (["--repeat", "2"], "--repeat"),
                        (["--scale", "200"], "--scale"), (["--reference"], "--operator")):
        assert main(["bench", "--operator", *argv]) == 2
        assert f"error: {field}:" in capsys.readouterr().err


def test_the_operator_benchs_move_is_every_tenth_partition_within_its_rack():
    from sparkkafka import whatif as W
    from sparkkafka.bench_operator import reassign_plan
    from sparkkafka.scenario.loader import parse_scenario

    sc = parse_scenario(W.load_snapshot("data/snapshots/sample"))
    parts = W.partitions_frame(sc).sort_values(["topic", "partition"]).reset_index(drop=True)
    plan = reassign_plan(parts, sc.racks)["partitions"]
    tenth = parts.iloc[::10]
    assert len(plan) == len(tenth[tenth["adding"].map(len) == 0])  # a move in flight is left alone
    by = parts.set_index(["topic", "partition"])
    for e in plan:
        before = list(by.loc[(e["topic"], e["partition"]), "replicas"])
        assert e["replicas"][:-1] == before[:-1] and e["replicas"][-1] not in before
        assert sc.racks[e["replicas"][-1]] == sc.racks[before[-1]]


@pytest.mark.slow  # ~35-60 s: whatif --lose-rack emulates 21 s (the default ZooKeeper session timeout) and the recovery
@pytest.mark.offload(work=bench)
@pytest.mark.parametrize("args", [("--operator", "--scale", "6,40", "--seconds", "1")])
def test_the_operator_bench_times_each_question_phase_by_phase(offloaded, args):
    """`bench --operator` on a small generated snapshot: the import, `whatif --lose-rack` and the first emulated
    second of a move whose throttle the prediction puts at two hours, each with its phases' wall time."""
    import re

    out = offloaded
    rows = [r.split("|")[1:-1] for r in out[out.rindex("| row |"):].splitlines()[2:5]]
    assert [r[0].strip().split(":")[0] for r in rows] == ["import", "whatif --lose-rack rack-a",
                                                           "reassign 4 partitions"]
    assert all(r[1].strip() == "6" and r[2].strip() == "40" for r in rows)
    lose, move = rows[1], rows[2]
    assert 21.0 < float(lose[4]) <= 81.0 and float(lose[7]) > 0 and float(lose[9]) >= sum(float(x) for x in lose[5:9]) - 0.2
    assert "under replicated" in lose[11] and float(move[4]) == 2.0
    hours = float(re.search(r"predicted ([\d.]+) h", move[11]).group(1))
    assert 1.9 <= hours <= 2.1, move[11]
    assert re.search(r"Engine floor of this session: \d+ ms a round", out)
