"""The idle jump end to end: an idle emulated hour in a few rounds of work, with the
outcome of running every round.

Timers are short so that the no-jump run stays small: a 200 ms fetch wait (a 4-round fetch cycle), HW
checkpoints every 700 ms, ISR checks every 500 ms, ZooKeeper sessions of 600 ms.
"""

from __future__ import annotations

import pandas as pd
import pytest
from scenarios import scenario
from test_determinism import tables

from sparkkafka import Cluster
from sparkkafka.errors import ScenarioError
from sparkkafka.scenario import parse_scenario

CRASH_SHORT_MS, HOUR_MS, TAIL_MS = 2000, 3_600_000, 1000


def _scenario(crash_ms: int, engine: str, jump: bool):
    return parse_scenario(scenario(
        [1, 2, 3], [{"name": "a", "partitions": 3, "replication_factor": 3},
                    {"name": "b", "partitions": 2, "replication_factor": 2}], crash_ms + TAIL_MS,
        log_dirs=["d0", "d1"], name="idle", seed=5, emulator={"engine": engine, "idle.jump": jump},
        config={"replica.fetch.wait.max.ms": 200, "replica.high.watermark.checkpoint.interval.ms": 700,
                "replica.lag.time.max.ms": 1000, "zookeeper.session.timeout.ms": 600},
        timeline=[{"at": 0, "produce": {"topic": "a", "partition": "all", "records": 30, "acks": "all"}},
                  {"at": 200, "produce": {"topic": "b", "partition": "all", "records": 10, "acks": 1}},
                  {"at": crash_ms, "crash": 2}]), name="idle")


def _run(spark, path, crash_ms: int, engine: str, jump: bool) -> dict[str, pd.DataFrame]:
    out = str(path / f"{engine}-{jump}-{crash_ms}")
    Cluster.from_scenario(_scenario(crash_ms, engine, jump), spark=spark, out=out).run()
    return tables(out)


@pytest.fixture(scope="module")
def unjumped(spark, tmp_path_factory):
    """The short scenario with every round run."""
    return _run(spark, tmp_path_factory.mktemp("idle"), CRASH_SHORT_MS, "resident", False)


def test_jumping_gives_the_tables_of_running_every_round(spark, tmp_path, unjumped):
    """Every table is the same, the per-round ones (metrics, replica_state, follower_state) on the rounds
    the jumping run ran: the state a round starts from after a jump is the state the rounds would leave."""
    got = _run(spark, tmp_path, CRASH_SHORT_MS, "rounds", True)
    ran = set(got["metrics"]["round"])
    assert len(ran) < len(unjumped["metrics"])  # some rounds were skipped
    for name, df in got.items():
        want = unjumped[name]
        if "round" in want.columns:
            want = want[want["round"].isin(ran)]
        pd.testing.assert_frame_equal(df.reset_index(drop=True), want.reset_index(drop=True), check_dtype=False,
                                      obj=name)


def test_an_idle_hour_costs_a_few_rounds_and_ends_as_running_it(spark, tmp_path, unjumped):
    got = _run(spark, tmp_path, HOUR_MS, "resident", True)
    m = got["metrics"]
    idle_rounds = m[(m["time_ms"] > 1500) & (m["time_ms"] < HOUR_MS)]  # the burst has settled by 1.5 s
    assert len(idle_rounds) <= 10, idle_rounds["round"].tolist()
    # the same outcome as the short run with every round run, an hour later: partition states (their
    # order, leaders, ISRs, epochs), the records, and each replica's last offsets
    shift = HOUR_MS - CRASH_SHORT_MS
    ps, want = got["partition_state"], unjumped["partition_state"]
    late = want["time_ms"] >= CRASH_SHORT_MS
    pd.testing.assert_frame_equal(ps.drop(columns="time_ms"), want.drop(columns="time_ms"), check_dtype=False)
    assert (ps["time_ms"] == want["time_ms"] + late * shift).all()
    pd.testing.assert_frame_equal(got["log"], unjumped["log"], check_dtype=False)
    cols = ["topic", "partition", "broker", "role", "leader", "leader_epoch", "leo", "hw"]
    last = lambda t: t["replica_state"].sort_values("round").groupby(["topic", "partition", "broker"]).tail(1)  # noqa
    pd.testing.assert_frame_equal(last(got)[cols].sort_values(cols).reset_index(drop=True),
                                  last(unjumped)[cols].sort_values(cols).reset_index(drop=True), check_dtype=False)


def test_idle_jump_setting_is_checked():
    raw = {"name": "x", "cluster": {"brokers": [1], "emulator": {"idle.jump": "sometimes"}},
           "topics": [{"name": "t", "partitions": 1, "replication_factor": 1}]}
    with pytest.raises(ScenarioError, match=r"cluster\.emulator\.idle\.jump"):
        parse_scenario(raw, name="x")
    assert _scenario(1000, "rounds", False).emulator["idle.jump"] is False
    assert _scenario(1000, "rounds", True).emulator["idle.jump"] is True


def _throttled(jump: bool):
    """Throttles left set (KIP-73: every replica of t, 1000 B/s on every broker, a 2 x 1 s sensor window)
    through an idle stretch, then broker 1 crashes, misses 2000 bytes and catches up under the throttle."""
    return parse_scenario({
        "name": "throttled-idle", "seed": 1,
        "cluster": {"brokers": [0, 1, 2],
                    "config": {"auto.leader.rebalance.enable": False, "zookeeper.session.timeout.ms": 600,
                               "replica.lag.time.max.ms": 1000, "replication.quota.window.num": 2},
                    "emulator": {"engine": "local", "idle.jump": jump}},
        "topics": [{"name": "t", "assignment": {0: [0, 1]}, "config": {
            "leader.replication.throttled.replicas": "*", "follower.replication.throttled.replicas": "*"}}],
        "timeline": [
            {"at": 0, "set_config": {"entity": "brokers", "name": "default", "config": {
                "leader.replication.throttled.rate": 1000, "follower.replication.throttled.rate": 1000}}},
            {"at": 0, "produce": {"topic": "t", "partition": 0, "records": 5, "acks": "all", "value_bytes": 100}},
            {"at": 3000, "crash": 1},
            {"at": 3100, "produce": {"topic": "t", "partition": 0, "records": 20, "acks": 1, "value_bytes": 100}},
            {"at": 3500, "restart": 1}],
        "run": {"until_ms": 5000}}, name="throttled-idle")


def test_a_throttle_left_set_keeps_every_round(tmp_path):
    """An idle broker's quota sensors change as time passes (a throttled fetch keeps a sample alive; the
    allowance a request carries grows with the window), so skipping rounds would change how fast broker 1
    catches up later. With a throttle set nothing is skipped, and the tables are those of every round."""
    got = {}
    for jump in (True, False):
        out = str(tmp_path / f"jump-{jump}")
        Cluster.from_scenario(_throttled(jump), spark=None, out=out).run()
        got[jump] = tables(out)
    assert len(got[True]["metrics"]) == len(got[False]["metrics"]) == 51
    for name, df in got[True].items():
        pd.testing.assert_frame_equal(df, got[False][name], check_dtype=False, obj=name)


def test_resident_windows_jump_where_the_round_engine_does(spark, tmp_path):
    """With idle jumps on, the resident engine runs the rounds the round engine runs and leaves its
    tables, though its windows run the controller's requests ahead (plan_window): the expiry of broker
    2's session (2.6 s) elects new leaders, whose requests reach the brokers in the next round of the
    same window; the window then ends where the driver would jump, not at the delivery."""
    want = _run(spark, tmp_path, CRASH_SHORT_MS, "rounds", True)
    c = Cluster.from_scenario(_scenario(CRASH_SHORT_MS, "resident", True), spark=spark, out=str(tmp_path / "res"))
    total, windows = c.scenario.end_ms // c.round_ms + 1, []
    while c.round < total:
        first = c.round
        windows.append((first, c.loop.advance(min(total - first, c.loop.window_limit()), total - first)))
    c.run()
    assert any(first <= 26 < first + n - 1 for first, n in windows), windows
    got = tables(c.out)
    for name, df in got.items():
        pd.testing.assert_frame_equal(df, want[name], check_dtype=False, obj=name)
