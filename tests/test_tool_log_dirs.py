"""kafka-log-dirs.sh --describe (Kafka 2.8) text. Expected strings were produced by replaying 2.8's
LogDirsCommand.formatAsJson and the admin client's maps on JDK 17 + scala-library 2.13 + Jackson."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from sparkkafka.errors import ScenarioError
from sparkkafka.tools.log_dirs import (
    cluster_broker_order,
    describe_log_dirs_text,
    java_hash_map_order,
    scala_hash_order,
    topic_partition_hash,
)

KSE = "org.apache.kafka.common.errors.KafkaStorageException"
HEAD = "Querying brokers for log directories information\nReceived log directory information from brokers "
# the text of the cluster fixture up to broker 0's partitions in d1 (its d2 is offline)
BROKER0_OPEN = (HEAD + "0,1,2\n"
                '{"version":1,"brokers":['
                '{"broker":0,"logDirs":['
                '{"logDir":"/var/kafka/d2","error":"org.apache.kafka.common.errors.KafkaStorageException",'
                '"partitions":[]},'
                '{"logDir":"/var/kafka/d1","error":null,"partitions":[')


def frames(dirs, logs):
    return (
        pd.DataFrame(dirs, columns=["broker", "log_dir", "error"]),
        pd.DataFrame(
            logs, columns=["broker", "log_dir", "topic", "partition", "size", "offset_lag", "is_future"]
        ),
    )


@pytest.fixture
def cluster():
    """Three brokers; broker 0's d2 is offline, broker 1 moves orders-1 from d1 to d2 (a future log)."""
    return frames(
        [
            (0, "/var/kafka/d1", None),
            (0, "/var/kafka/d2", KSE),
            (1, "/var/kafka/d1", None),
            (1, "/var/kafka/d2", None),
            (2, "/var/kafka/d1", None),
        ],
        [
            (0, "/var/kafka/d1", "orders", 0, 1048576, 0, False),
            (0, "/var/kafka/d2", "orders", 2, 99, 0, False),  # on the offline dir: not listed
            (0, "/var/kafka/d1", "payments", 0, 2048, 0, False),
            (1, "/var/kafka/d1", "orders", 1, 524288, 0, False),
            (1, "/var/kafka/d2", "orders", 1, 262144, 5, True),
            (1, "/var/kafka/d1", "orders", 0, 1048576, 0, False),
            (2, "/var/kafka/d1", "orders", 2, 4096, 0, False),
            (2, "/var/kafka/d1", "payments", 0, 2048, 0, False),
            (2, "/var/kafka/d1", "orders", 1, 524288, 0, False),
        ],
    )


def test_multi_broker_with_offline_dir_and_future_log(cluster):
    dirs, logs = cluster
    expected = (
        BROKER0_OPEN +
        '{"partition":"payments-0","size":2048,"offsetLag":0,"isFuture":false},'
        '{"partition":"orders-0","size":1048576,"offsetLag":0,"isFuture":false}]}]},'
        '{"broker":1,"logDirs":['
        '{"logDir":"/var/kafka/d2","error":null,"partitions":['
        '{"partition":"orders-1","size":262144,"offsetLag":5,"isFuture":true}]},'
        '{"logDir":"/var/kafka/d1","error":null,"partitions":['
        '{"partition":"orders-0","size":1048576,"offsetLag":0,"isFuture":false},'
        '{"partition":"orders-1","size":524288,"offsetLag":0,"isFuture":false}]}]},'
        '{"broker":2,"logDirs":['
        '{"logDir":"/var/kafka/d1","error":null,"partitions":['
        '{"partition":"payments-0","size":2048,"offsetLag":0,"isFuture":false},'
        '{"partition":"orders-1","size":524288,"offsetLag":0,"isFuture":false},'
        '{"partition":"orders-2","size":4096,"offsetLag":0,"isFuture":false}]}]}]}\n'
    )
    assert describe_log_dirs_text(dirs, logs, [0, 1, 2]) == expected


def test_topic_list_filters_client_side(cluster):
    dirs, logs = cluster
    expected = (
        BROKER0_OPEN +
        '{"partition":"payments-0","size":2048,"offsetLag":0,"isFuture":false}]}]},'
        '{"broker":1,"logDirs":['
        '{"logDir":"/var/kafka/d2","error":null,"partitions":[]},'
        '{"logDir":"/var/kafka/d1","error":null,"partitions":[]}]},'
        '{"broker":2,"logDirs":['
        '{"logDir":"/var/kafka/d1","error":null,"partitions":['
        '{"partition":"payments-0","size":2048,"offsetLag":0,"isFuture":false}]}]}]}\n'
    )
    assert describe_log_dirs_text(dirs, logs, [0, 1, 2], topic_list="payments") == expected
    assert describe_log_dirs_text(dirs, logs, [0, 1, 2], topic_list=",payments,") == expected
    assert describe_log_dirs_text(dirs, logs, [0, 1, 2], topic_list=["payments"]) == expected


def test_broker_list_printed_as_typed_json_in_hash_order(cluster):
    dirs, logs = cluster
    text = describe_log_dirs_text(dirs, logs, [0, 1, 2], broker_list="2,0,0")
    head, body = text.split("\n")[1:3]
    assert head == "Received log directory information from brokers 2,0,0"
    assert [b["broker"] for b in json.loads(body)["brokers"]] == [0, 2]
    assert describe_log_dirs_text(dirs, logs, [0, 1, 2], broker_list=[2, 0, 0]) == text


def test_broker_list_errors(cluster):
    dirs, logs = cluster
    with pytest.raises(ScenarioError, match="not a live broker") as err:
        describe_log_dirs_text(dirs, logs, [0, 1, 2], broker_list="0,7")
    assert (err.value.field, err.value.value) == ("--broker-list", 7)
    with pytest.raises(ScenarioError) as err:
        describe_log_dirs_text(dirs, logs, [0, 1, 2], broker_list="0, 1")
    assert err.value.message == 'For input string: " 1"'


def test_dir_order_table_growth_and_equal_hash_ties():
    # HashMap<String>(3): table of 4, so /data/a (bucket 0) comes before /data/b (bucket 1) whatever
    # the log.dirs order. 17 partitions grow the Scala table to 32; Aa-0 and BB-0 share a hash code,
    # so they keep row order.
    dirs, logs = frames(
        [(1001, "/data/b", None), (1001, "/data/a", None), (1001, "/data/c", None)],
        [(1001, "/data/a", "orders", i, 100 * i, 0, False) for i in range(15)]
        + [(1001, "/data/a", "BB", 0, 2, 0, False), (1001, "/data/a", "Aa", 0, 1, 0, False)],
    )
    text = describe_log_dirs_text(dirs, logs, [1001, 1002, 1003])
    order = ["orders-7", "orders-8", "BB-0", "Aa-0"] + [f"orders-{i}" for i in [*range(9, 15), *range(7)]]
    sizes = {"BB-0": 2, "Aa-0": 1} | {f"orders-{i}": 100 * i for i in range(15)}
    parts = ",".join(
        f'{{"partition":"{name}","size":{sizes[name]},"offsetLag":0,"isFuture":false}}' for name in order
    )
    assert text == (
        HEAD + "1001,1002,1003\n"
        '{"version":1,"brokers":[{"broker":1001,"logDirs":['
        '{"logDir":"/data/a","error":null,"partitions":[' + parts + "]},"
        '{"logDir":"/data/b","error":null,"partitions":[]},'
        '{"logDir":"/data/c","error":null,"partitions":[]}]},'
        '{"broker":1002,"logDirs":[]},{"broker":1003,"logDirs":[]}]}\n'
    )


def test_cluster_order_java_hash_map_and_json_order_scala_hash_map():
    # Java HashMap<Integer> (16 buckets) filled in the given order: 16 (bucket 0), then 33 and 17
    # (bucket 1, insertion order), 1 (bucket 1), 2; the Scala map sorts a bucket by hash: 1, 17, 33.
    dirs, logs = frames([(b, "/k", None) for b in [33, 2, 17, 16, 1]], [])
    text = describe_log_dirs_text(dirs, logs, [33, 2, 17, 16, 1])
    assert text.split("\n")[1] == "Received log directory information from brokers 16,33,17,1,2"
    assert [b["broker"] for b in json.loads(text.split("\n")[2])["brokers"]] == [16, 1, 17, 33, 2]
    assert cluster_broker_order([1, 2, 16, 17, 33]) == [16, 1, 17, 33, 2]


def test_json_escaping_as_jackson():
    dirs, logs = frames([(0, '/tmp/k"x\\1\t', None)], [])
    body = describe_log_dirs_text(dirs, logs, [0]).split("\n")[2]
    assert (
        body
        == '{"version":1,"brokers":[{"broker":0,"logDirs":[{"logDir":"/tmp/k\\"x\\\\1\\t","error":null,"partitions":[]}]}]}'
    )


def test_hash_helpers():
    # TopicPartition("foo", p).hashCode = 31 * (31 + p) + "foo".hashCode (101574)
    assert topic_partition_hash("foo", 0) == 102535
    assert topic_partition_hash("Aa", 0) == topic_partition_hash("BB", 0)
    # improved hashes (h ^ h >>> 16) of foo-0..2 and bar-0 land in slots 6, 7, 4, 5 of 16
    tps = [("foo", 0), ("foo", 1), ("foo", 2), ("bar", 0)]
    assert [tps[i] for i in scala_hash_order([topic_partition_hash(*tp) for tp in tps])] == [
        ("foo", 2),
        ("bar", 0),
        ("foo", 0),
        ("foo", 1),
    ]
    # HashMap(1) resizes to 2 then 4 buckets: keys 4, 1, 2 iterate 4 (bucket 0), 1, 2
    assert java_hash_map_order([4, 1, 2], 1) == [0, 1, 2]
    assert java_hash_map_order([1, 4], 2) == [1, 0]  # table of 4 after the second put
