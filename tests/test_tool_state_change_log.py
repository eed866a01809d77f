"""StateChangeLogMerger (Kafka 2.8) over the state_change_log table: lines, options and filters."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pandas as pd
import pytest
from operator_util import cli

from sparkkafka import Cluster
from sparkkafka.errors import ScenarioError
from sparkkafka.scenario import parse_scenario
from sparkkafka.tools.state_change_log import (
    format_timestamp,
    merge_text,
    parse_merger_time,
    parse_partitions,
    render_line,
)

COLUMNS = ["time_ms", "broker", "controller_epoch", "topic", "partition", "message"]
C = "[Controller id=0 epoch=1] "
B1 = "[Broker id=1] "
B2 = "[Broker id=2] "


@pytest.fixture
def frame():
    return pd.DataFrame(
        [
            (1500, 0, 1, "orders", 0, C + "Changed partition orders-0 from NewPartition to OnlinePartition"),
            (
                1500,
                0,
                1,
                None,
                None,
                C + "Sending UpdateMetadata request to brokers Set(1, 2) for 2 partitions",
            ),
            (2000, 2, 1, "orders", 1, B2 + "Follower orders-1 starts at leader epoch 0"),
            (1000, 1, 1, "orders", 0, B1 + "Handling LeaderAndIsr request correlationId 1"),
            (
                2000,
                1,
                1,
                "payments",
                0,
                B1 + "Leader payments-0 starts at leader epoch 0\n\tat a.Stack(frame)",
            ),
            (1500, 1, 1, "orders", 1, B1 + "Follower orders-1 starts at leader epoch 0"),
        ],
        columns=COLUMNS,
    )


def line(ts, message):
    return f"[1970-01-01 00:00:{ts}] TRACE {message} (state.change.logger)\n"


def test_render_line_and_base():
    assert render_line(1500, "x") == "[1970-01-01 00:00:01,500] TRACE x (state.change.logger)"
    base = datetime(2021, 4, 19, 12, 0, tzinfo=UTC)
    assert render_line(61_007, "y", base) == "[2021-04-19 12:01:01,007] TRACE y (state.change.logger)"
    assert (
        render_line(5, "z", datetime(2021, 4, 19, 12, 0))
        == "[2021-04-19 12:00:00,005] TRACE z (state.change.logger)"
    )
    assert format_timestamp(-1) == "1969-12-31 23:59:59,999"


def test_merge_by_time_then_broker_then_row(frame):
    # ties at 1,500 ms: broker 0's two rows (row order) before broker 1's; the stack-trace
    # continuation line of the payments row carries no timestamp and is dropped
    assert merge_text(frame) == (
        line("01,000", B1 + "Handling LeaderAndIsr request correlationId 1")
        + line("01,500", C + "Changed partition orders-0 from NewPartition to OnlinePartition")
        + line("01,500", C + "Sending UpdateMetadata request to brokers Set(1, 2) for 2 partitions")
        + line("01,500", B1 + "Follower orders-1 starts at leader epoch 0")
        + line("02,000", B1 + "Leader payments-0 starts at leader epoch 0")
        + line("02,000", B2 + "Follower orders-1 starts at leader epoch 0")
    )


def test_topic_and_partition_filters_use_columns(frame):
    assert merge_text(frame, topic="orders", partitions="1") == (
        line("01,500", B1 + "Follower orders-1 starts at leader epoch 0")
        + line("02,000", B2 + "Follower orders-1 starts at leader epoch 0")
    )
    by_topic = merge_text(frame, topic="orders")
    assert "Sending UpdateMetadata" not in by_topic and "payments" not in by_topic
    assert by_topic.count("\n") == 4
    assert merge_text(frame, topic="orders", partitions=[0, 1]) == by_topic
    assert merge_text(frame, topic="orders", partitions=",,") == by_topic  # Java split: no partitions
    assert merge_text(frame, topic="nope") == ""


def test_time_bounds_inclusive(frame):
    text = merge_text(frame, start_time="1970-01-01 00:00:01,500", end_time='"1970-01-01 00:00:01,500"')
    assert text.count("\n") == 3 and all("00:00:01,500" in x for x in text.splitlines())
    # lenient SimpleDateFormat: 00:00:00,2000 is two seconds
    assert merge_text(frame, start_time="1970-01-01 00:00:00,2000").count("\n") == 2


def test_parse_merger_time_is_lenient():
    assert parse_merger_time("--start-time", "1970-01-01 00:00:00,000") == 0
    assert parse_merger_time("--start-time", "2021-04-19 12:00:00,123") == 1618833600123
    assert parse_merger_time("--start-time", "2021-02-30 25:61:61,1001") == 1614736922001
    assert parse_merger_time("--start-time", "2021- 3-4  5:06:07,8") == 1614834367008
    assert parse_merger_time("--start-time", "2021-03-04 05:06:07,008xyz") == 1614834367008
    assert parse_merger_time("--start-time", "2021-13-01 00:00:00,000") == 1640995200000
    assert parse_merger_time("--end-time", "9999-12-31 23:59:59,999") == 253402300799999
    assert parse_merger_time("--start-time", "1999-00-00 00:00:00,000") == 912384000000


@pytest.mark.parametrize(
    ("kwargs", "field", "message"),
    [
        (
            {"partitions": "0"},
            "--partitions",
            'The option "[topic]" needs to be provided an argument when specifying partition ids',
        ),
        (
            {"topic": "t", "partitions": "1,2,1,2,3"},
            "--partitions",
            "The list of partitions contains repeated entries: 1,2",
        ),
        # CoreUtils.duplicates lists repeats in groupBy's (CHAMP) order: 10 before 3
        (
            {"topic": "t", "partitions": [3, 10, 3, 10]},
            "--partitions",
            "The list of partitions contains repeated entries: 10,3",
        ),
        ({"topic": "t", "partitions": "1,x"}, "--partitions", 'For input string: "x"'),
        ({"topic": "t", "partitions": ""}, "--partitions", 'For input string: ""'),
        (
            {"start_time": "2021-03-04T05:06:07,008"},
            "--start-time",
            'Unparseable date: "2021-03-04T05:06:07,008"',
        ),
        ({"end_time": " yesterday "}, "--end-time", 'Unparseable date: "yesterday"'),
    ],
)
def test_option_errors(frame, kwargs, field, message):
    with pytest.raises(ScenarioError) as err:
        merge_text(frame, **kwargs)
    assert (err.value.field, err.value.message) == (field, message)


def test_parse_partitions():
    assert parse_partitions("0,+1,-2") == [0, 1, -2]
    assert parse_partitions([2, 0]) == [2, 0]


def test_empty_frame():
    assert merge_text(pd.DataFrame(columns=COLUMNS)) == ""


HANDLING = re.compile(r"\[Broker id=(\d+)\] Handling (LeaderAndIsr|StopReplica) request correlationId (\d+) "
                      r"from controller (\d+) for (\d+) partitions")
SENDING = re.compile(r"\[Controller id=(\d+) epoch=(\d+)\] Sending (?:(LeaderAndIsr) request to broker (\d+) with "
                     r"(\d+) become-leader and (\d+) become-follower|(StopReplica) request for (\d+) replicas to "
                     r"broker (\d+))")
COMPLETED = re.compile(r"\[Broker id=(\d+)\] Completed LeaderAndIsr request correlationId (\d+) from controller (\d+) ")


@pytest.fixture(scope="module")
def requests_run(spark, tmp_path_factory):
    """A small run whose controllers send every kind of request: a topic deletion (StopReplica with delete), a
    reassignment (LeaderAndIsr, StopReplica) and a controller failover (a new controller, new connections)."""
    out = str(tmp_path_factory.mktemp("scl") / "run")
    sc = parse_scenario({
        "cluster": {"brokers": [1, 2, 3], "config": {"auto.leader.rebalance.enable": False}},
        "topics": [{"name": "t", "assignment": {0: [1, 2, 3], 1: [2, 3, 1]}}, {"name": "u", "assignment": {0: [1, 2]}}],
        "timeline": [{"at": 300, "delete_topic": "u"},
                     {"at": 600, "reassign": {"plan": {"version": 1, "partitions": [
                         {"topic": "t", "partition": 1, "replicas": [3, 1]}]}}},
                     {"at": 1200, "controller_failover": {}}],
        "run": {"until_ms": 2500}}, name="scl-ids")
    Cluster.from_scenario(sc, spark=spark, engine="local", out=out).run()
    return out


def test_requests_carry_the_controller_connections_correlation_ids(requests_run, capsys):
    """Each controller request carries the next correlation id of the controller's NetworkClient to its broker:
    per controller (a failover opens new clients) and destination broker the ids the brokers log rise strictly;
    the controller's sends and the brokers' Handling lines pair up in order with the same partition counts; a
    request's Completed lines carry its Handling line's id. The same run gives the same log."""
    rc, text, err = cli(capsys, "state-change-log", requests_run)
    assert rc == 0, err
    bodies = [re.sub(r"^\[[^]]+\] TRACE ", "", line) for line in text.splitlines()]
    handled: dict[tuple[int, int], list[tuple[str, int, int]]] = {}  # (controller, broker) -> (api, id, partitions)
    for m in filter(None, map(HANDLING.match, bodies)):
        broker, api, cid, controller, n = m.groups()
        handled.setdefault((int(controller), int(broker)), []).append((api, int(cid), int(n)))
    sent: dict[tuple[int, int], list[tuple[str, int]]] = {}  # (controller, broker) -> (api, partitions)
    epochs: dict[int, set[int]] = {}
    for m in filter(None, map(SENDING.search, bodies)):
        c, e, lai, lb, lead, follow, sr, sn, sb = m.groups()
        epochs.setdefault(int(c), set()).add(int(e))
        key, item = ((int(c), int(lb)), ("LeaderAndIsr", int(lead) + int(follow))) if lai else (
            (int(c), int(sb)), ("StopReplica", int(sn)))
        sent.setdefault(key, []).append(item)
    assert {api for reqs in handled.values() for api, *_ in reqs} == {"LeaderAndIsr", "StopReplica"}
    assert len({e for es in epochs.values() for e in es}) == 2  # the failover's new controller epoch
    assert all(len(es) == 1 for es in epochs.values()), epochs  # else one (controller, broker) spans two clients
    assert handled.keys() == sent.keys()
    for key, reqs in handled.items():
        ids = [cid for _, cid, _ in reqs]
        assert ids == sorted(set(ids)), (key, ids)  # strictly increasing on each connection
        assert [(api, n) for api, _, n in reqs] == sent[key], key  # every send handled, in order
    # a new client counts from 0: each controller's failover sends UpdateMetadata (0), then LeaderAndIsr (1)
    assert {reqs[0][:2] for reqs in handled.values()} == {("LeaderAndIsr", 1)}
    for m in filter(None, map(COMPLETED.match, bodies)):
        broker, cid, controller = (int(g) for g in m.groups())
        assert ("LeaderAndIsr", cid) in {(api, i) for api, i, _ in handled[(controller, broker)]}
    assert cli(capsys, "state-change-log", requests_run)[1] == text
