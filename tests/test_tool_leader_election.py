"""kafka-leader-election.sh (Kafka 2.8) validation and output. Expected orders were checked against
scala-library 2.13 (mutable.HashSet / HashMap, immutable.HashMap for CoreUtils.duplicates)."""

from __future__ import annotations

import pytest

from sparkkafka.errors import ScenarioError
from sparkkafka.tools.leader_election import (
    ElectionRequest,
    champ_order,
    election_stderr,
    election_text,
    parse_election_json,
    parse_election_type,
    validate_election_args,
)

PLNA = "org.apache.kafka.common.errors.PreferredLeaderNotAvailableException"
UTOP = "org.apache.kafka.common.errors.UnknownTopicOrPartitionException"


def test_succeeded_in_scala_hash_set_order():
    # foo-0/1/2 hash 102535/102566/102597, bar-0 98260; h ^ (h >>> 16) lands in slots 6, 7, 4, 5
    text, code = election_text("preferred", [("foo", 0), ("foo", 1), ("foo", 2), ("bar", 0)], [], {})
    assert (text, code) == (
        "Successfully completed leader election (PREFERRED) for partitions foo-2, bar-0, foo-0, foo-1\n",
        0,
    )


def test_table_grows_to_32_slots():
    # 14 partitions: the Scala set doubles to 32 slots at its 12th element
    text, _ = election_text("PREFERRED", [("orders", i) for i in range(14)], [], {})
    order = [7, 8, 9, 10, 11, 12, 13, 0, 1, 2, 3, 4, 5, 6]
    assert text == (
        "Successfully completed leader election (PREFERRED) for partitions "
        + ", ".join(f"orders-{i}" for i in order)
        + "\n"
    )


def test_valid_replica_line_lists_the_succeeded_set_as_2_8_does():
    # KAFKA-12684 (fixed in 3.0): 2.8 prints `succeeded` on the "Valid replica" line
    text, code = election_text("preferred", [("foo", 0), ("foo", 2)], [("foo", 1)], {})
    assert (text, code) == (
        "Successfully completed leader election (PREFERRED) for partitions foo-2, foo-0\n"
        "Valid replica already elected for partitions foo-2, foo-0\n",
        0,
    )
    assert election_text("unclean", [], [("foo", 1)], {}) == (
        "Valid replica already elected for partitions \n",
        0,
    )


def test_failures_exit_1_in_scala_hash_map_order():
    failed = {
        ("foo", 3): ("PREFERRED_LEADER_NOT_AVAILABLE", None),
        ("nope", 0): ("UNKNOWN_TOPIC_OR_PARTITION", "The partition does not exist."),
        ("foo", 1): ("ELECTION_NOT_NEEDED", None),  # the tool files it under "valid replica"
    }
    text, code = election_text("preferred", [("foo", 0)], [], failed)
    assert code == 1
    assert text == (
        "Successfully completed leader election (PREFERRED) for partitions foo-0\n"
        "Valid replica already elected for partitions foo-0\n"
        f"Error completing leader election (PREFERRED) for partition: nope-0: {UTOP}: The partition does not exist.\n"
        f"Error completing leader election (PREFERRED) for partition: foo-3: {PLNA}: The preferred leader was not available.\n"
    )
    assert election_stderr(failed) == (
        'Exception in thread "main" kafka.common.AdminCommandFailedException: 2 replica(s) could not be elected\n'
        f"\tSuppressed: {UTOP}: The partition does not exist.\n"
        f"\tSuppressed: {PLNA}: The preferred leader was not available.\n"
    )
    assert election_stderr({}) == ""


def test_equal_hash_codes_keep_the_given_order():
    # "Aa" and "BB" share String.hashCode, so Aa-p and BB-p share TopicPartition.hashCode
    failed = {
        ("Aa", 1): ("ELIGIBLE_LEADERS_NOT_AVAILABLE", None),
        ("BB", 1): ("INVALID_TOPIC_EXCEPTION", "The topic is being deleted"),
    }
    text, code = election_text("unclean", [("BB", 0), ("Aa", 0)], [], failed)
    assert code == 1
    assert text == (
        "Successfully completed leader election (UNCLEAN) for partitions BB-0, Aa-0\n"
        "Error completing leader election (UNCLEAN) for partition: Aa-1: "
        "org.apache.kafka.common.errors.EligibleLeadersNotAvailableException: "
        "Eligible topic partition leaders are not available.\n"
        "Error completing leader election (UNCLEAN) for partition: BB-1: "
        "org.apache.kafka.common.errors.InvalidTopicException: The topic is being deleted\n"
    )


def test_nothing_to_print():
    assert election_text("preferred", [], [], {}) == ("", 0)


def test_bad_results_rejected():
    with pytest.raises(ScenarioError, match="unknown election error"):
        election_text("preferred", [], [], {("foo", 0): ("NO_SUCH_ERROR", None)})
    with pytest.raises(ScenarioError, match="more than one election result"):
        election_text("preferred", [("foo", 0)], [("foo", 0)], {})


def test_election_type_is_case_insensitive():
    assert parse_election_type("Preferred") == "PREFERRED"
    assert parse_election_type("unclean") == "UNCLEAN"
    with pytest.raises(ScenarioError) as err:
        parse_election_type("bogus")
    assert err.value.message == "Cannot parse argument 'bogus' of option election-type"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"election_type": None, "all_topic_partitions": True}, "Missing required option(s): election-type"),
        (
            {},
            "One and only one of the following options is required: topic, all-topic-partitions, path-to-json-file",
        ),
        (
            {"topic": "foo", "partition": 0, "all_topic_partitions": True},
            "One and only one of the following options is required: topic, all-topic-partitions, path-to-json-file",
        ),
        (
            {"all_topic_partitions": True, "path_to_json_file": "x.json"},
            "One and only one of the following options is required: topic, all-topic-partitions, path-to-json-file",
        ),
        ({"topic": "foo"}, "Missing required option(s): partition"),
        ({"all_topic_partitions": True, "partition": 1}, "Option partition is only allowed if topic is used"),
        (
            {"election_type": "bogus", "all_topic_partitions": True},
            "Cannot parse argument 'bogus' of option election-type",
        ),
    ],
)
def test_option_validation(kwargs, message):
    kwargs = {"election_type": "preferred", **kwargs}
    election_type = kwargs.pop("election_type")
    with pytest.raises(ScenarioError) as err:
        validate_election_args(election_type, **kwargs)
    assert err.value.message == message


def test_valid_requests(tmp_path):
    assert validate_election_args("preferred", all_topic_partitions=True) == ElectionRequest(
        "PREFERRED", None
    )
    assert validate_election_args("UNCLEAN", topic="foo", partition=0) == ElectionRequest(
        "UNCLEAN", (("foo", 0),)
    )
    path = tmp_path / "e.json"
    path.write_text('{"partitions":[{"topic":"foo","partition":1},{"topic":"foobar","partition":2}]}')
    assert validate_election_args("preferred", path_to_json_file=path) == ElectionRequest(
        "PREFERRED", (("foo", 1), ("foobar", 2))
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "Replica election data is empty"),
        ("", "Expected JSON object, received "),  # Jackson 2.10 reads empty content as a MissingNode
        ("\n", "Expected JSON object, received "),
        ("[1, 2]", "Expected JSON object, received [1,2]"),
        ("{}", 'Replica election data is missing "partitions" field'),
        ('{"partitions": {"a": 1}}', 'Expected JSON array, received {"a":1}'),
        ('{"partitions": [1]}', "Expected JSON object, received 1"),
        ('{"partitions": [{"partition": 1}]}', "No such field exists: `topic`"),
        ('{"partitions": [{"topic": "foo"}]}', "No such field exists: `partition`"),
        ('{"partitions": [{"topic": 7, "partition": 1}]}', "Expected `String` value, received 7"),
        ('{"partitions": [{"topic": "foo", "partition": "1"}]}', 'Expected `Int` value, received "1"'),
        ('{"partitions": [{"topic": "foo", "partition": 1.0}]}', "Expected `Int` value, received 1.0"),
        (
            '{"partitions": [{"topic": "foo", "partition": 4294967296}]}',
            "Expected `Int` value, received 4294967296",
        ),
        (
            '{"partitions": [{"topic": "foo", "partition": 1}, {"topic": "foo", "partition": 1}]}',
            "Replica election data contains duplicate partitions: foo-1",
        ),
        (
            # CoreUtils.duplicates: groupBy's immutable.HashMap (CHAMP) order
            '{"partitions": ['
            + ",".join(
                [
                    '{"topic":"foo","partition":1}',
                    '{"topic":"bar","partition":2}',
                    '{"topic":"foo","partition":7}',
                    '{"topic":"baz","partition":0}',
                ]
                * 2
            )
            + "]}",
            "Replica election data contains duplicate partitions: baz-0,foo-1,foo-7,bar-2",
        ),
    ],
)
def test_json_errors(text, message):
    with pytest.raises(ScenarioError) as err:
        parse_election_json(text)
    assert err.value.message == message
    assert err.value.field == "--path-to-json-file"


def test_json_leniency():
    # trailing content ignored (Jackson readTree), empty list allowed, a later duplicate key wins
    assert parse_election_json('{"partitions": []} trailing') == ()
    assert parse_election_json('{"partitions": 1, "partitions": [{"topic": "a", "partition": 0}]}') == (
        ("a", 0),
    )


def test_champ_order_of_ints():
    # improved hashes put 10 before 3, 5 before 1, 31 before 30
    assert champ_order([3, 10]) == [1, 0]
    assert champ_order([1, 5, 9, 12]) == [1, 0, 2, 3]
    assert champ_order([7, 30, 31]) == [0, 2, 1]
