"""Every `sparkkafka whatif` flag, emulated on the shipped sample snapshot (data/snapshots/sample: 12 brokers in
3 racks, 302 partitions, two moves in flight adding broker 1), on the in-process engine (`--engine local`: the
same `broker_round.process` as the Spark engines, no Spark job per round; about a minute a run here where the
default engine takes about five). Each test asserts what a user of that flag checks in the answer or the run.
`test_the_local_engine_gives_the_default_engines_answer` checks the engine choice itself."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from sparkkafka import whatif as W
from sparkkafka.cli import main
from sparkkafka.scenario.checker import latest_of
from sparkkafka.scenario.loader import parse_scenario
from sparkkafka.storage import tables as T
from sparkkafka.tools.reassign_partitions import parse_reassignment_json

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "data" / "snapshots" / "sample"
MOVE_PLAN = ROOT / "data" / "plans" / "sample-move.json"
SESSION_MS = 18000  # zookeeper.session.timeout.ms: the sample's server.properties keeps Kafka 2.8's default
COUNT_LINE = re.compile(r"^  (offline|under min isr|under replicated|leader moved):\s+(\d+)\s+(\d+)\s+(\S+)$")

pytestmark = pytest.mark.slow  # every test here runs one or two emulated runs of the sample (timings: docs/whatif.md)


def cli(*args: str) -> str:
    """stdout of `sparkkafka ARGS`, which must exit 0."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(list(args))
    assert code == 0, buf.getvalue()
    return buf.getvalue()


def whatif(run_dir: Path, *args: str, snapshot: Path = SAMPLE, engine: str = "local") -> str:
    return cli("whatif", str(snapshot), *args, "--engine", engine, "--run-dir", str(run_dir))


def counts(text: str) -> dict[str, tuple[int, int, str]]:
    """The answer's count lines: flag -> (predicted, emulated, emulated metrics)."""
    found = [COUNT_LINE.match(line) for line in text.splitlines()]
    return {m[1]: (int(m[2]), int(m[3]), m[4]) for m in found if m}


def table(text: str, fmt: str = "text") -> list[dict[str, str]]:
    """The predicted-vs-emulated table of a loss answer, parsed back from `fmt`: one dict per row."""
    lines = text.splitlines()
    if fmt == "csv":
        start = next(i for i, line in enumerate(lines) if line.startswith("topic,partition,"))
        end = next((i for i, line in enumerate(lines) if i > start and "," not in line), len(lines))
        return list(csv.DictReader(lines[start:end]))
    if fmt == "markdown":
        rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines if line.startswith("| ")]
        return [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["topic", "partition"])
    head = lines[start].split()
    rows = []
    for line in lines[start + 1:]:
        cells = line.split()
        if len(cells) != len(head):
            break
        rows.append(dict(zip(head, cells, strict=True)))
    return rows


def partitions() -> pd.DataFrame:
    return W.partitions_frame(parse_scenario(W.load_snapshot(SAMPLE)))


def latest_state(run_dir: Path) -> pd.DataFrame:
    return latest_of(T.read_table(str(run_dir / "tables"), "partition_state").to_pandas()).set_index(W.TP)


def metrics(run_dir: Path) -> pd.DataFrame:
    return T.read_table(str(run_dir / "tables"), "metrics").to_pandas().sort_values("round").reset_index(drop=True)


def go_on(run_dir: Path, until_ms: int) -> None:
    """Continue a local-engine run directory (`sparkkafka run RUN --until-ms`, here without the SparkSession
    that command starts for any run)."""
    from sparkkafka import Cluster

    Cluster.for_path(None, str(run_dir)).run(until_ms=until_ms)


def assert_agrees(text: str, fmt: str = "text") -> list[dict[str, str]]:
    """Predicted, emulated and the emulated metrics row give the same counts, and every row agrees."""
    c = counts(text)
    for k in ("offline", "under min isr", "under replicated"):
        assert c[k][0] == c[k][1] == int(c[k][2]), (k, c[k])
    assert c["leader moved"][0] == c["leader moved"][1]
    rows = table(text, fmt)
    assert rows and all(r["agree"] == "True" for r in rows), [r for r in rows if r["agree"] != "True"]
    return rows


@pytest.fixture(scope="module")
def rack_a(tmp_path_factory) -> tuple[str, Path]:
    """README's question, `whatif data/snapshots/sample --lose-rack rack-a`, emulated once for the module."""
    run = tmp_path_factory.mktemp("rack") / "run"
    return whatif(run, "--lose-rack", "rack-a"), run


def test_lose_rack_agrees_partition_by_partition_and_the_moves_in_flight_complete(rack_a):
    """Every partition has one replica per rack: none goes offline, all 302 are under-replicated; predicted and
    emulated agree row by row; the brokers come back within --recover-ms, and the two moves in flight (both
    adding broker 1, in rack-a) complete then, dropping their removing replica."""
    text, run = rack_a
    parts = partitions()
    inside = {1, 4, 7, 10}
    rows = assert_agrees(text)
    assert counts(text)["offline"][0] == sum(set(r) <= inside for r in parts["replicas"]) == 0
    assert len(rows) == len(parts) == counts(text)["under replicated"][1]
    recovered = re.search(r"time to recover \(brokers back, under-replicated 0\): (\d+) ms", text)
    assert recovered and 0 < int(recovered[1]) <= 60000
    ps = latest_state(run)
    assert list(ps.loc[("orders", 7), "replicas"]) == [6, 5, 1]
    assert list(ps.loc[("clickstream", 40), "replicas"]) == [11, 9, 1]
    assert metrics(run)["under_replicated"].iloc[-1] == 0


@pytest.fixture(scope="module")
def lose_dir(tmp_path_factory) -> tuple[str, Path]:
    """`whatif data/snapshots/sample --lose-dir 1:/var/kafka/data-2`, emulated once for the module (no session
    timeout to wait for: the controller acts on a failed dir at once, KIP-112)."""
    run = tmp_path_factory.mktemp("dir") / "run"
    return whatif(run, "--lose-dir", "1:/var/kafka/data-2"), run


@pytest.mark.parametrize("fmt", ["csv", "markdown"])
def test_format_csv_and_markdown_carry_the_text_answer(lose_dir, fmt, tmp_path):
    """The same what-if in another --format: the lines above the table are the text answer's, and the table,
    parsed (csv with the csv module), has the text table's rows and numbers."""
    text, _ = lose_dir
    other = whatif(tmp_path / "run", "--lose-dir", "1:/var/kafka/data-2", "--format", fmt)
    head = text[:text.index("\n        topic")]
    assert other.startswith(head + "\n")
    assert table(other, fmt) == table(text)


def test_lose_broker_repeated_loses_both_and_only_auto_rebalance_moves_other_leaders(tmp_path):
    """--lose-broker 4 --lose-broker 7: no partition is led by either afterwards; offline, under min ISR and
    under-replicated agree per partition. Broker 1 stays, so the moves in flight complete (predicted too)
    and the controller's automatic preferred-leader check, which waits while a reassignment is in flight
    and first runs 5 s after the run's controller took office (KafkaController.onControllerFailover),
    moves some leaders back to their preferred replica: those are the only rows whose leader differs
    from the prediction, which leaves that check out."""
    run = tmp_path / "run"
    out = whatif(run, "--lose-broker", "4", "--lose-broker", "7", "--format", "csv")
    assert out.startswith("Losing broker(s) 4,7:\n")
    c = counts(out)
    for k in ("offline", "under min isr", "under replicated"):
        assert c[k][0] == c[k][1] == int(c[k][2]), (k, c[k])
    rows = table(out, "csv")
    assert not {int(r["leader_emulated"]) for r in rows} & {4, 7}
    flags = ("offline", "under_min_isr", "under_replicated")
    assert all(r[f] == r[f + "_emulated"] for r in rows for f in flags)
    preferred = {(t, p): r[0] for t, p, r in zip(partitions()["topic"], partitions()["partition"],
                                                 partitions()["replicas"], strict=True)}
    differ = [r for r in rows if r["leader_predicted"] != r["leader_emulated"]]
    assert differ and all(int(r["leader_emulated"]) == preferred[(r["topic"], int(r["partition"]))]
                          for r in differ)
    ps = latest_state(run)
    assert list(ps.loc[("orders", 7), "replicas"]) == [6, 5, 1]  # the removing replica 7 was lost: dropped


def test_lose_dir_takes_only_that_dirs_replicas_and_the_run_agrees(lose_dir):
    """--lose-dir 1:/var/kafka/data-2: exactly the partitions with broker 1's replica in that dir change, each
    under-replicated without 1 in its ISR; broker 1's other replicas stay in sync; there is no recovery time
    (the dir stays failed)."""
    out, run = lose_dir
    rows = assert_agrees(out)
    parts = partitions()
    in_dir = {(t, p) for t, p, d in zip(parts["topic"], parts["partition"], parts["dirs"], strict=True)
              if d.get(1) == "/var/kafka/data-2"}
    assert {(r["topic"], int(r["partition"])) for r in rows} == in_dir
    assert all(1 not in map(int, r["isr_emulated"].split(",")) for r in rows)
    ps = latest_state(run)
    on_1 = [(t, p) for t, p, r, d in zip(parts["topic"], parts["partition"], parts["replicas"], parts["dirs"],
                                         strict=True) if 1 in r and d.get(1) != "/var/kafka/data-2"]
    assert on_1 and all(1 in list(ps.loc[tp, "isr"]) for tp in on_1)
    assert "time to recover: none measured" in out


def test_unclean_best_candidate_loses_what_was_predicted(tmp_path):
    """Losing brokers 8 and 6 at 500 ms, before inventory-4's out-of-sync replica 7 has caught up (600 ms), leaves
    inventory-4 offline with 7 live: --unclean names 7 and the acked records it lacks; electing it uncleanly
    (kafka-leader-election) and running on loses exactly that many (the checker's lost_acked)."""
    run = tmp_path / "run"
    out = whatif(run, "--lose-broker", "8", "--lose-broker", "6", "--at-ms", "500", "--unclean")
    best = re.findall(r"^  (\S+)-(\d+): elect (\d+), losing (\d+) of (\d+) acked$", out, re.M)
    assert best, out
    topic, partition, leader, lost, _ = best[0]
    before = json.loads((run / "summary.json").read_text())["lost_acked"]
    cli("leader-election", str(run), "--election-type", "unclean", "--topic", topic, "--partition", partition)
    reached = int(metrics(run)["time_ms"].iloc[-1])
    go_on(run, reached + 2000)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["lost_acked"] - before == int(lost)
    assert int(latest_state(run).loc[(topic, int(partition)), "leader"]) == int(leader)


def test_reassign_with_throttle_completes_within_the_documented_tolerance(tmp_path):
    """--reassign data/plans/sample-move.json --throttle 1 GB/s: every planned partition reaches its target in
    the run, the total within 10 % of the prediction (docs/whatif.md), no new replica's broker above the
    throttle."""
    out = whatif(tmp_path / "run", "--reassign", str(MOVE_PLAN), "--throttle", "1000000000")
    emulated = out[out.index("Predicted vs emulated:"):]
    predicted = int(re.search(r"predicted completion: (\d+) ms", emulated)[1])
    done = int(re.search(r"emulated completion:  (\d+) ms", emulated)[1])
    assert abs(predicted - done) <= 0.1 * done, (predicted, done)
    rates = [int(r) for r in re.findall(r"into broker \d+: \d+ bytes by \d+ ms, (\d+) B/s", emulated)]
    assert len(rates) == 2 and all(0 < r <= 1_000_000_000 for r in rates)
    target = {(e["topic"], e["partition"]): e["replicas"] for e in json.loads(MOVE_PLAN.read_text())["partitions"]}
    ps = latest_state(tmp_path / "run")
    assert all(list(ps.loc[tp, "replicas"]) == r and not len(ps.loc[tp, "adding"]) for tp, r in target.items())


def test_reassign_until_ms_ends_the_run_before_the_move(tmp_path):
    """--until-ms 3000 (the plan at 1000 ms, the first partition predicted at 6.2 s): the run stops at 3 s,
    nothing completed, and the answer says so."""
    run = tmp_path / "run"
    out = whatif(run, "--reassign", str(MOVE_PLAN), "--throttle", "1000000000", "--until-ms", "3000")
    assert "emulated completion:  not within the run (3000 ms)" in out
    assert int(metrics(run)["time_ms"].iloc[-1]) <= 3000
    target = {(e["topic"], e["partition"]) for e in json.loads(MOVE_PLAN.read_text())["partitions"]}
    assert all(len(latest_state(run).loc[tp, "adding"]) for tp in target)


def test_at_settle_and_recover_ms_move_the_emulated_timeline(tmp_path):
    """--at-ms 3000 --settle-ms 500 --recover-ms 5000 on --lose-broker 4: broker 4's ZooKeeper session ends
    18 s after the crash (live brokers 11 from 21 s), the state is read 500 ms later and the broker restarts
    then; the run stops once recovered, within 5 s of the restart."""
    run = tmp_path / "run"
    out = whatif(run, "--lose-broker", "4", "--at-ms", "3000", "--settle-ms", "500", "--recover-ms", "5000")
    c = counts(out)  # leaders may differ: broker 1 stays, the moves complete, the auto rebalance runs (above)
    assert all(c[k][0] == c[k][1] == int(c[k][2]) for k in ("offline", "under min isr", "under replicated")), c
    m = metrics(run)
    down = m[m["live_brokers"] < 12]
    assert int(down["time_ms"].iloc[0]) == 3000 + SESSION_MS
    acted = 3000 + SESSION_MS + 500
    assert int(down["time_ms"].iloc[-1]) <= acted + 100  # back one round after the restart
    recovered = int(re.search(r"time to recover \(brokers back, under-replicated 0\): (\d+) ms", out)[1])
    assert 0 < recovered <= 5000
    assert acted + recovered <= int(m["time_ms"].iloc[-1]) <= acted + 5000


def test_run_dir_holds_the_run_and_a_second_whatif_replaces_it(tmp_path):
    """--run-dir D: the emulated run is a run directory there (sparkkafka describe reads it); a second what-if
    on the same D replaces it: D then shows the second loss only."""
    run = tmp_path / "whatif-run"
    whatif(run, "--lose-dir", "1:/var/kafka/data-2")
    assert (run / "run.json").is_file()
    second = table(whatif(run, "--lose-dir", "2:/var/kafka/data-1"))
    urp = cli("describe", str(run), "--under-replicated-partitions")
    described = set(re.findall(r"Topic: (\S+)\tPartition: (\d+)\t", urp))
    assert described == {(r["topic"], r["partition"]) for r in second}
    assert all(2 not in list(latest_state(run).loc[(r["topic"], int(r["partition"])), "isr"]) for r in second)


def test_record_bytes_sets_the_emulated_logs_record_size(tmp_path):
    """--record-bytes 1000000000: each replica's log of the snapshot becomes records of at most 1 GB summing
    to its size in log-dirs.txt, cut every 1 GB (and where another replica's log starts or ends:
    scenario/initial_logs.py): broker 1's 5.97 GB orders-39 holds at least four records of exactly 1 GB."""
    run = tmp_path / "run"
    assert_agrees(whatif(run, "--lose-dir", "1:/var/kafka/data-2", "--record-bytes", "1000000000"))
    log = T.read_table(str(run / "tables"), "log").to_pandas()
    first = log[(log["append_ms"] <= 0) & ~log["is_future"]]
    assert len(first) and first["value_bytes"].max() <= 1_000_000_000
    parts = partitions().set_index(W.TP)
    size = parts.loc[("orders", 39), "bytes"][1]
    mine = first[(first["topic"] == "orders") & (first["partition"] == 39) & (first["broker"] == 1)]
    assert int(mine["value_bytes"].sum()) == size  # the replica's exact size, cut at every R bytes and at the
    assert (mine["value_bytes"] == 1_000_000_000).sum() >= size // 1_000_000_000 - 1  # other replicas' starts


def test_balance_dirs_plan_is_kafkas_format_and_evens_the_dirs_when_run(tmp_path):
    """--balance-dirs --plan P writes kafka-reassign-partitions' JSON (Kafka's parser accepts it); executed with
    `sparkkafka reassign --execute --additional` (the sample's moves in flight make Kafka's tool ask for it)
    on a run of the snapshot, the run's `log-dirs --describe` then shows the
    widest gap between two dirs of a broker down from 455.6 GB to about the predicted 1.9 GB."""
    plan = tmp_path / "balance.json"
    out = cli("whatif", str(SAMPLE), "--balance-dirs", "--plan", str(plan))
    before, after = (int(x) for x in re.search(r"dirs: (\d+) -> (\d+) bytes", out).groups())
    sc = parse_scenario(W.load_snapshot(SAMPLE))
    entries = parse_reassignment_json(plan.read_text(), sc.brokers, {b: list(sc.log_dirs) for b in sc.brokers},
                                      topics=[t.name for t in sc.topics])
    assert entries and all(list(e["replicas"]) == list(partitions().set_index(W.TP).loc[
        (e["topic"], e["partition"]), "replicas"]) for e in entries)
    scenario, run = tmp_path / "sample.yaml", tmp_path / "run"
    cli("import", str(SAMPLE / "topics-describe.txt"), "--log-dirs", str(SAMPLE / "log-dirs.txt"),
        "--racks", str(SAMPLE / "racks.txt"), "--configs", str(SAMPLE / "server.properties"),
        "--rates", str(SAMPLE / "rates.csv"), "--record-bytes", str(2**31 - 1), "--out", str(scenario))
    cli("run", str(scenario), "--out", str(run), "--engine", "local", "--until-ms", "1000", "--no-progress")
    cli("reassign", str(run), "--execute", "--additional", "--reassignment-json-file", str(plan))
    go_on(run, 15000)
    described = cli("log-dirs", str(run), "--describe")
    doc = json.loads(described[described.index("{"):])
    usage = pd.DataFrame([{"broker": b["broker"], "dir": d["logDir"], "bytes": sum(
        p["size"] for p in d["partitions"] if not p["isFuture"])} for b in doc["brokers"] for d in b["logDirs"]])
    assert not any(p["isFuture"] for b in doc["brokers"] for d in b["logDirs"] for p in d["partitions"])
    gap = W.widest_gap(usage)
    assert gap < before / 10 and abs(gap - after) < 0.01 * before, (gap, after, before)


def test_the_local_engine_gives_the_default_engines_answer(lose_dir, tmp_path):
    """`--engine local` (every test above) against the default engine (resident, Spark): the same question on
    the sample prints the same answer, every emulated count, row and figure."""
    local, _ = lose_dir
    spark = cli("whatif", str(SAMPLE), "--lose-dir", "1:/var/kafka/data-2", "--run-dir", str(tmp_path / "default"))
    assert len(table(local)) > 0 and counts(local)["under replicated"][1] > 0
    assert local == spark
