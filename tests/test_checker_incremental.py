"""The incremental checker (scenario/checker.Checks, protocol/replica_marks.py): the end of a run reads
replica_state's history only where the brokers' marks make a partition suspect, and finds what the
full-history audit (the reference: `audit` without checks) finds, on hand-built histories holding every
rule's violation and on real runs with lost, pending, divergent and StrongIsr findings, on every engine."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest
import yaml
from test_checker import ROUND_MS, every_kind_of_finding, make_run, ps, rs
from test_durability import e02, kip101_scenario_1, kip101_scenario_2, zombie

from sparkkafka import Cluster, parse_scenario
from sparkkafka.protocol import replica_marks as M
from sparkkafka.scenario import checker
from sparkkafka.scenario.checker import Checks, audit, suspect_partitions

CONF = os.path.join(os.path.dirname(__file__), os.pardir, "conf", "scenarios")


def replica(broker: int, leo: int, hw: int, *, leader: int = 0, epoch: int = 0, partition: int = 0) -> dict:
    """One broker-state replica row with the columns the marks read."""
    return {"broker": broker, "topic": "t", "partition": partition, "leader": leader, "leo": leo, "hw": hw,
            "leader_epoch": epoch}


def marks_of(before: list[dict], after: list[dict]) -> dict[tuple[int, int], int]:
    """(partition, broker) -> mark bits of the rows of `after` against `before`."""
    m = M.replica_marks(pd.DataFrame(before or {k: [] for k in replica(0, 0, 0)}), pd.DataFrame(after))
    return {(int(p), int(b)): int(x) for p, b, x in zip(m["partition"], m["broker"], m["marks"], strict=True)}


def test_a_round_marks_only_the_rows_a_rule_may_break_on():
    before = [replica(0, 10, 8, epoch=1), replica(1, 10, 8, epoch=1),  # p0: leader 0, follower 1
              replica(0, 5, 5, epoch=1, partition=1), replica(1, 5, 5, epoch=1, partition=1),
              replica(0, 7, 7, epoch=2, partition=2)]
    after = [replica(0, 12, 9, epoch=1), replica(1, 12, 9, epoch=1),  # progress: nothing to mark
             replica(0, 5, 4, epoch=1, partition=1),  # the leader's HW moved back in its epoch
             replica(1, 3, 3, epoch=1, partition=1),  # the follower truncated
             replica(1, 6, 7, leader=1, epoch=3, partition=2),  # a new leader of epoch 3, HW above LEO
             replica(2, 0, 0, partition=3)]  # a replica the broker did not hold
    assert marks_of(before, after) == {(1, 0): M.SUSPECT, (1, 1): M.LEO_DROP, (2, 1): M.APPEARED | M.CLAIMED | M.SUSPECT,
                                       (3, 2): M.APPEARED}
    assert marks_of(before, [replica(0, 12, 9, epoch=2)]) == {(0, 0): M.CLAIMED}  # a new epoch: a claim
    assert marks_of(before, [replica(0, 12, 9, leader=1, epoch=2)]) == {}  # a follower's new epoch: not


def history_checks(rows: list[dict]) -> Checks:
    """The Checks the brokers would have sent for a hand-built replica_state history: each broker's rows of
    a round against its rows of the round before (none: it was down, or did not hold the replica)."""
    frame = pd.DataFrame(rows)
    state = frame.drop(columns=["round", "time_ms", "role"])
    out = Checks()
    for r in sorted(set(frame["round"])):
        parts = []
        for b in sorted(set(frame.loc[frame["round"] == r, "broker"])):
            now = state[(frame["round"] == r).to_numpy() & (frame["broker"] == b).to_numpy()]
            was = state[(frame["round"] == r - 1).to_numpy() & (frame["broker"] == b).to_numpy()]
            parts.append((int(r), M.to_summary(M.replica_marks(was, now))))
        out = out.fold(M.from_summaries(parts), ROUND_MS)
    return out


def same_audit(out: str, checks: Checks, rows: int = checker.AUDIT_ROWS) -> tuple[dict, pd.DataFrame]:
    """The full audit and the incremental one of run `out`, asserted equal; the full one."""
    with open(os.path.join(out, "run.json")) as f:
        meta = json.load(f)
    tables = os.path.join(out, "tables")
    full, incremental = audit(tables, meta, rows=rows), audit(tables, meta, rows=rows, checks=checks)
    assert incremental[0] == full[0]
    pd.testing.assert_frame_equal(incremental[1], full[1])
    return full


def hand_run(out: str) -> tuple[str, list[dict]]:
    """test_checker's slice case: every kind of finding, each on its own partitions, plus clean history
    (many rounds of progress on partition 50) that the incremental audit must not read."""
    cases = every_kind_of_finding()
    add, rows = cases.add, cases.rows
    # a replica that comes back (a restart) below what it had, in the ISR: StrongIsr with no LEO drop seen
    add(60, replica_state=[rs(1, 0, 4, 4), rs(1, 1, 4, 4), rs(2, 0, 4, 4), rs(4, 0, 4, 4), rs(4, 1, 1, 1)],
        partition_state=[ps(-100, 0, [0, 1])])
    add(50, replica_state=[rs(r, b, r, r) for r in range(10) for b in (0, 1)], partition_state=[ps(-100, 0, [0, 1])])
    return make_run(out, **rows), rows["replica_state"]


@pytest.mark.parametrize("rows", [checker.AUDIT_ROWS, 1])
def test_hand_built_history_gives_the_full_audits_findings(tmp_path, rows):
    out, history = hand_run(str(tmp_path))
    checks = history_checks(history)
    found = same_audit(out, checks, rows)[1]
    assert set(found["kind"]) >= {"lost", "pending", "divergent", "HwWithinLeo", "LeaderHwMonotonic",
                                  "UniqueLeaderPerEpoch", "StrongIsr"}
    assert (60, [1]) in [(int(p), list(b)) for p, b, k in zip(found["partition"], found["brokers"], found["kind"],
                                                               strict=True) if k == "StrongIsr"]
    ps_ = checker.T.read_table(os.path.join(out, "tables"), "partition_state").to_pandas()
    suspects = set(map(tuple, suspect_partitions(checks.marks, ps_)[["topic", "partition"]].values.tolist()))
    assert ("t", 50) not in suspects and {("t", 20), ("t", 30), ("t", 60)} <= suspects
    assert checker.reduced_replica_state(os.path.join(out, "tables"), checks).num_rows < len(history)


def conf(name: str, **config) -> dict:
    with open(os.path.join(CONF, f"{name}.yaml")) as f:
        raw = yaml.safe_load(f)
    raw["cluster"]["config"].update(config)
    return parse_scenario(raw, name=name)


REAL = {  # runs whose full audits find lost (an unclean election), divergent and pending records; a deleted topic
    "kip101-1-0.10": lambda: kip101_scenario_1("0.10"),
    "kip101-2-0.10": lambda: kip101_scenario_2("0.10"), "zombie-2.0": lambda: zombie("2.0"),
    "elect-delete": lambda: conf("diff-elect-delete"), "failures": lambda: conf("failures"),
}


def run_and_compare(sc, out: str, spark=None, engine: str = "local") -> dict:
    c = Cluster.from_scenario(sc, spark=spark, engine=engine, out=out)
    c.run()
    reopened = Cluster.for_path(spark, out)  # the state saved in the run directory, as another process reads it
    full = same_audit(out, reopened.loop.checks)
    assert c.summary() == full[0]
    return full[0]


@pytest.mark.parametrize("name", sorted(REAL))
def test_a_real_run_gives_the_full_audits_findings(tmp_path, name):
    run_and_compare(REAL[name](), str(tmp_path / "run"))


@pytest.fixture(scope="module")
def e02_local(tmp_path_factory) -> dict:
    """E-02 under 0.10's rules (test_durability) on the local engine, compared once: its summary."""
    return run_and_compare(e02("0.10"), str(tmp_path_factory.mktemp("e02") / "run"))


def test_the_real_runs_hold_findings_of_several_kinds(e02_local):
    """E-02 under 0.10's rules: the comparison covers lost, divergent and StrongIsr findings."""
    s = e02_local
    assert s["violations"]["lost"] == 5 and s["violations"]["StrongIsr"] == 1 and s["violations"]["divergent"] == 1


@pytest.mark.parametrize("engine", ["resident"])  # the round engine's summaries come from `process`, as the local one's
def test_spark_engines_give_the_local_engines_findings(spark, tmp_path, engine, e02_local):
    assert run_and_compare(e02("0.10"), str(tmp_path / engine), spark, engine) == e02_local


def test_a_run_continued_in_another_process_keeps_its_marks(tmp_path, e02_local):
    """Stepped, saved and reopened (the driver state's Checks from disk), then run to the end: the same
    findings as one uninterrupted run."""
    one = e02_local
    out = str(tmp_path / "two")
    Cluster.from_scenario(e02("0.10"), engine="local", out=out).step(39)
    c = Cluster.for_path(None, out)
    c.run()
    assert same_audit(out, Cluster.for_path(None, out).loop.checks)[0] == c.summary() == one
