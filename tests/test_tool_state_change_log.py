"""StateChangeLogMerger (Kafka 2.8) over the state_change_log table: lines, options and filters."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd
import pytest

from sparkkafka.errors import ScenarioError
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
