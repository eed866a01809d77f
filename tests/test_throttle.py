"""KIP-73 replication throttles end to end: a move under `--throttle T` (the CLI, or the
scenario's `reassign: {plan, throttle}`) takes at least N/T emulated seconds for N bytes, and never completes
while a producer writes faster than T (the ops docs' warning). Rounds of 100 ms, at most ~40 per run."""

from __future__ import annotations

import json

import pandas as pd

from sparkkafka import Cluster, parse_scenario
from sparkkafka.cli import main
from sparkkafka.protocol.fetch import record_bytes
from sparkkafka.storage.tables import read_table


def _history(run: str, topic: str = "t", partition: int = 0) -> pd.DataFrame:
    ps = read_table(f"{run}/tables", "partition_state").to_pandas()
    ps = ps[(ps["topic"] == topic) & (ps["partition"] == partition)]
    return ps.sort_values(["time_ms", "version"]).reset_index(drop=True)


def _move_window(run: str, target: list[int]) -> tuple[int, int | None]:
    """(when the reassignment started: first row with adding replicas, when it completed: first later row
    whose replicas are the target with nothing adding/removing; None if it has not)."""
    h = _history(run)
    moving = h[h["adding"].map(len) > 0]
    start = int(moving["time_ms"].iloc[0])
    done = h[(h["time_ms"] >= start) & h["replicas"].map(lambda r: list(r) == target) & (h["adding"].map(len) == 0)
             & (h["removing"].map(len) == 0)]
    return start, (int(done["time_ms"].iloc[0]) if len(done) else None)


def _bytes(run: str, broker: int) -> int:
    log = read_table(f"{run}/tables", "log").to_pandas()
    log = log[(log["broker"] == broker) & (log["topic"] == "t") & (log["partition"] == 0)]
    return int(record_bytes(log).sum())


def test_a_throttled_move_takes_at_least_n_over_t_and_completes(spark, tmp_path, capsys):
    """20 records of 100 bytes (N = 2000) moved to broker 2 under --throttle 2000: at least 1 s."""
    run, plan = str(tmp_path / "run"), tmp_path / "plan.json"
    sc = parse_scenario({
        "cluster": {"brokers": [0, 1, 2], "config": {"auto.leader.rebalance.enable": False}},
        "topics": [{"name": "t", "assignment": {0: [0, 1]}}],
        "timeline": [{"at": 0, "produce": {"topic": "t", "partition": 0, "records": 20, "acks": "all",
                                           "value_bytes": 100}}],
        "run": {"until_ms": 200}}, name="throttled-move")
    Cluster.from_scenario(sc, spark=spark, engine="local", out=run).run()
    n = _bytes(run, 0)
    assert n == 2000
    rate = 2000
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}]}))
    assert main(["reassign", run, "--execute", "--reassignment-json-file", str(plan), "--throttle", str(rate)]) == 0

    # kafka-topics --describe shows the topic-level throttled replica lists the tool set
    capsys.readouterr()
    assert main(["describe", run]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    configs = first[first.index("Configs: ") + len("Configs: "):].split(",")
    # the leader list holds every source replica (0:0,0:1), the follower list the new one (0:2)
    assert "leader.replication.throttled.replicas=0:0" in configs and "0:1" in configs
    assert "follower.replication.throttled.replicas=0:2" in configs
    c = Cluster.for_path(spark, run)
    for b in (0, 1, 2):
        assert c.control.dynamic[b]["leader.replication.throttled.rate"] == rate
        assert c.control.dynamic[b]["follower.replication.throttled.rate"] == rate

    assert main(["run", run, "--until-ms", "3500", "--no-progress"]) == 0
    start, done = _move_window(run, [1, 2])
    assert done is not None, _history(run)
    assert done - start >= 1000 * n / rate, (start, done)
    assert _bytes(run, 2) == n
    # and at the throttle, not half of it: the new replica's appends (log.append_ms), each fetch cycle's bytes
    # counted over the cycle (two rounds) that fetched them
    log = read_table(f"{run}/tables", "log").to_pandas()
    mine = log[(log["broker"] == 2) & (log["topic"] == "t")]
    first, last = int(mine["append_ms"].min()), int(mine["append_ms"].max())
    measured = n * 1000 / (last - first + 2 * 100)
    assert abs(measured - rate) <= 0.1 * rate, (measured, first, last)
    capsys.readouterr()
    assert main(["reassign", run, "--verify", "--reassignment-json-file", str(plan)]) == 0
    assert capsys.readouterr().out == (
        "Status of partition reassignment:\nReassignment of partition t-0 is complete.\n\n"
        "Clearing broker-level throttles on brokers 0,1,2\nClearing topic-level throttles on topic t\n")


def test_the_same_move_unthrottled_is_faster(spark, tmp_path):
    """The control: without a throttle the 2000 bytes move well within N/T of the throttled test."""
    run = str(tmp_path / "run")
    sc = parse_scenario({
        "cluster": {"brokers": [0, 1, 2], "config": {"auto.leader.rebalance.enable": False}},
        "topics": [{"name": "t", "assignment": {0: [0, 1]}}],
        "timeline": [{"at": 0, "produce": {"topic": "t", "partition": 0, "records": 20, "acks": "all",
                                           "value_bytes": 100}},
                     {"at": 200, "reassign": {"plan": {"version": 1, "partitions": [
                         {"topic": "t", "partition": 0, "replicas": [1, 2]}]}}}],
        "run": {"until_ms": 1500}}, name="unthrottled-move")
    Cluster.from_scenario(sc, spark=spark, engine="local", out=run).run()
    start, done = _move_window(run, [1, 2])
    assert done is not None and done - start < 1000


def test_a_throttle_below_the_producers_rate_never_lets_the_move_complete(spark, tmp_path, capsys):
    """A producer writing 3000 B/s into t-0 while the move is throttled at 1000 B/s (the scenario's
    reassign event): the new replica never catches up, long after N/T of the bytes present at the start."""
    run = str(tmp_path / "run")
    sc = parse_scenario({
        "cluster": {"brokers": [0, 1, 2], "config": {"auto.leader.rebalance.enable": False}},
        "topics": [{"name": "t", "assignment": {0: [0, 1]}}],
        "timeline": [{"at": 0, "produce": {"topic": "t", "partition": 0, "rate_per_sec": 30, "duration_ms": 4000,
                                           "acks": 1, "value_bytes": 100}},
                     {"at": 100, "reassign": {"plan": {"version": 1, "partitions": [
                         {"topic": "t", "partition": 0, "replicas": [1, 2]}]}, "throttle": 1000}}],
        "run": {"until_ms": 4000}}, name="never-catches-up")
    c = Cluster.from_scenario(sc, spark=spark, engine="local", out=run).run()
    start, done = _move_window(run, [1, 2])
    assert done is None
    h = _history(run)
    produced_by_start = 30 * 100 * (start + 100) / 1000  # bytes written up to the move's start (one round slack)
    assert (4000 - start) / 1000 >= 3 * produced_by_start / 1000  # the run is several times N/T
    assert c.control.reassignments() == {("t", 0): ([1, 2, 0], [2], [0])}
    assert 2 not in list(h["isr"].iloc[-1])
    # it falls behind: the in-sync follower's 3000 B/s count against the leader's 1000 B/s (KafkaApis records
    # every throttled partition's bytes, in-sync ones included, and never holds those back), so the
    # windowed rate stays exceeded and the new replica is served nothing at all
    assert _bytes(run, 2) == 0 < _bytes(run, 1)
    capsys.readouterr()
    assert main(["reassign", run, "--list"]) == 0
    assert capsys.readouterr().out == (
        "Current partition reassignments:\nt-0: replicas: 1,2,0. adding: 2. removing: 0.\n")
