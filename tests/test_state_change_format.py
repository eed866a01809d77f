"""`sparkkafka state-change-log` lines in Kafka 2.8's state-change.log form: `[Broker id=N] ` on the brokers'
lines, `[Controller id=N epoch=E] ` on the controller's, and no time before the run's start. No Spark."""

from __future__ import annotations

import re

from operator_util import cli

from sparkkafka import Cluster
from sparkkafka.scenario import parse_scenario


def test_state_change_lines_carry_logger_prefixes_and_no_time_before_the_run(tmp_path, capsys):
    out = str(tmp_path / "run")
    sc = parse_scenario({
        "cluster": {"brokers": [1, 2, 3], "config": {"zookeeper.session.timeout.ms": 1000,
                                                     "auto.leader.rebalance.enable": False},
                    "emulator": {"engine": "local"}},
        "topics": [{"name": "t", "assignment": {0: [3, 1, 2], 1: [1, 2, 3]}}],
        "timeline": [{"at": 500, "crash": 3}, {"at": 2500, "restart": 3}],
        "run": {"until_ms": 4000}}, name="scl")
    Cluster.from_scenario(sc, out=out).run()
    rc, text, err = cli(capsys, "state-change-log", out)
    assert rc == 0, err
    lines = text.splitlines()
    assert lines and all(line.startswith("[1970-01-01 ") for line in lines), lines[:3]  # 0 ms is the epoch here
    bodies = [re.sub(r"^\[[^]]+\] TRACE ", "", line) for line in lines]
    assert all(b.startswith(("[Broker id=", "[Controller id=")) for b in bodies), bodies[:3]
    assert any(b.startswith("[Broker id=3] Completed LeaderAndIsr request") for b in bodies)
