"""kafka-reassign-partitions.sh (Kafka 2.8, Scala ReassignPartitionsCommand) as
sparkkafka.tools.reassign_partitions reproduces it: JSON in/out, error messages and the printed text, byte for
byte. Pure Python, no Spark.

Expected texts are the 2.8 source's format strings filled in by hand; the Scala Set orders were worked out
from scala.collection.Hashing.improve and the 2.13 CHAMP layout (slot = improved hash & 31, then the next 5
bits).
"""

from __future__ import annotations

import pytest

from sparkkafka.controller.placement import assign_replicas_to_brokers
from sparkkafka.errors import ScenarioError
from sparkkafka.tools.reassign_partitions import (
    DirMoveStatus,
    ReassignError,
    cancel_errors_text,
    cancel_text,
    execute_text,
    existing_refusal_text,
    format_assignment_json,
    generate,
    list_text,
    log_dir_move_state,
    log_dir_moves_line,
    log_dir_timeout_text,
    parse_broker_list,
    parse_reassignment_json,
    parse_topics_to_move_json,
    reassign_errors_text,
    scala_set_order,
    throttle_clearing_brokers,
    throttle_configs,
    throttled_brokers,
    verify_text,
)

DOC_JSON = (
    '{"version":1,"partitions":[{"topic":"bar","partition":0,"replicas":[7,8],"log_dirs":["any","any"]},'
    '{"topic":"foo","partition":1,"replicas":[4,5,6],"log_dirs":["any","any","any"]}]}'
)


def plan(*entries: str, version: str = '"version":1,') -> str:
    return "{" + version + '"partitions":[' + ",".join(entries) + "]}"


def raises(text: str, **kwargs) -> ReassignError:
    with pytest.raises(ReassignError) as info:
        parse_reassignment_json(text, **kwargs)
    return info.value


# --- JSON output ------------------------------------------------------------------------------------------


def test_format_matches_tool_formats_example_byte_for_byte():
    assert format_assignment_json({("foo", 1): [4, 5, 6], ("bar", 0): [7, 8]}) == DOC_JSON


def test_format_sorts_partitions_numerically_and_keeps_replica_order_and_log_dirs():
    out = format_assignment_json({("t", 10): [3, 1], ("t", 2): [2, 1]}, log_dirs={("t", 10): ["d1", "any"]})
    assert out == (
        '{"version":1,"partitions":[{"topic":"t","partition":2,"replicas":[2,1],"log_dirs":["any","any"]},'
        '{"topic":"t","partition":10,"replicas":[3,1],"log_dirs":["d1","any"]}]}'
    )


def test_format_empty_assignment():
    assert format_assignment_json({}) == '{"version":1,"partitions":[]}'


# --- plan JSON parsing --------------------------------------------------------------------------------------


def test_parse_round_trips_the_formatted_json_and_fills_any():
    entries = parse_reassignment_json(DOC_JSON)
    assert entries == [
        {"topic": "bar", "partition": 0, "replicas": [7, 8], "log_dirs": ["any", "any"]},
        {"topic": "foo", "partition": 1, "replicas": [4, 5, 6], "log_dirs": ["any", "any", "any"]},
    ]
    no_dirs = parse_reassignment_json('{"partitions":[{"topic":"a","partition":0,"replicas":[1,2]}]}')
    assert no_dirs[0]["log_dirs"] == ["any", "any"]  # no version: defaults to 1


def test_parse_keeps_explicit_log_dirs_known_to_the_broker():
    text = plan('{"topic":"a","partition":0,"replicas":[1,2],"log_dirs":["d1","any"]}')
    entries = parse_reassignment_json(text, brokers=[1, 2], log_dirs={1: ["d0", "d1"], 2: ["d0"]})
    assert entries[0]["log_dirs"] == ["d1", "any"]


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        ("", "reassignment_json", "Expected JSON object, received "),
        ("[1]", "reassignment_json", "Expected JSON object, received [1]"),
        (
            plan('{"topic":"a","partition":0,"replicas":[1]}', version='"version":2,'),
            "reassignment_json.version",
            "Not supported version field value 2",
        ),
        (
            plan('{"topic":"a","partition":0,"replicas":[1]}', version='"version":"1",'),
            "reassignment_json.version",
            'Expected `Int` value, received "1"',
        ),
        ('{"version":1,"partitions":{}}', "partitions", "Expected JSON array, received {}"),
        (
            plan('{"topic":"a","partition":"0","replicas":[1]}'),
            "partitions[0].partition",
            'Expected `Int` value, received "0"',
        ),
        (plan('{"topic":"a","partition":0}'), "partitions[0].replicas", "No such field exists: `replicas`"),
        (
            plan('{"topic":"a","partition":0,"replicas":[1,"x"]}'),
            "partitions[0].replicas[1]",
            'Expected `Int` value, received "x"',
        ),
        (
            plan('{"topic":"a","partition":0,"replicas":[1,2],"log_dirs":["any"]}'),
            "partitions[0].log_dirs",
            "Size of replicas list List(1, 2) is different from size of log dirs list List(any) "
            "for partition a-0",
        ),
        ('{"version":1,"partitions":[]}', "partitions", "Partition reassignment list cannot be empty"),
        ('{"version":1}', "partitions", "Partition reassignment list cannot be empty"),
        (
            plan('{"topic":"a","partition":0,"replicas":[1]}', '{"topic":"a","partition":1,"replicas":[]}'),
            "partitions[1].replicas",
            "Partition replica list cannot be empty",
        ),
        (
            plan('{"topic":"a","partition":0,"replicas":[1]}', '{"topic":"a","partition":0,"replicas":[2]}'),
            "partitions[0]",
            "Partition reassignment contains duplicate topic partitions: a-0",
        ),
        (
            plan('{"topic":"a","partition":0,"replicas":[1,2,1]}'),
            "partitions[0].replicas",
            "Partition replica lists may not contain duplicate entries: a-0 contains multiple entries for 1",
        ),
    ],
)
def test_parse_errors_carry_kafkas_message_and_the_field(text, field, message):
    err = raises(text)
    assert (err.field, err.message) == (field, message)
    assert isinstance(err, ScenarioError)
    assert err.tool_output() == f"Error: {message}\n"


def test_unparsable_json_is_an_error_naming_the_file():
    err = raises('{"version":1,')
    assert err.field == "reassignment_json"
    assert err.message.startswith("Invalid JSON: ")  # Kafka passes Jackson's own message on here


def test_duplicate_replicas_in_several_partitions_are_joined_with_a_period():
    # Duplicates come out in Scala HashMap order: 5 sits in slot 1, 1 in slot 7, so "5,1".
    err = raises(
        plan(
            '{"topic":"a","partition":0,"replicas":[1,5,1,5]}', '{"topic":"b","partition":3,"replicas":[2,2]}'
        )
    )
    assert err.message == (
        "Partition replica lists may not contain duplicate entries: a-0 contains multiple entries for 5,1. "
        "b-3 contains multiple entries for 2"
    )


def test_unknown_broker_unknown_topic_and_unknown_log_dir():
    text = plan('{"topic":"a","partition":0,"replicas":[1,7]}')
    err = raises(text, brokers=[0, 1, 2])
    assert (err.field, err.value, err.message) == ("partitions[0].replicas[1]", 7, "Unknown broker id 7")

    err = raises(plan('{"topic":"nope","partition":0,"replicas":[1]}'), brokers=[1], topics=["a"])
    assert err.message == "Topic nope not found."
    assert err.tool_output() == (
        "Error: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: Topic nope not found.\n"
    )

    text = plan('{"topic":"a","partition":0,"replicas":[1,2],"log_dirs":["any","d9"]}')
    err = raises(text, brokers=[1, 2], log_dirs={1: ["d0"], 2: ["d0", "d1"]})
    assert (err.field, err.message) == ("partitions[0].log_dirs[1]", "Failed to alter dir for a-0-2")


def test_verify_and_cancel_parse_without_the_execute_checks():
    dup = plan('{"topic":"a","partition":0,"replicas":[1]}', '{"topic":"a","partition":0,"replicas":[1]}')
    assert len(parse_reassignment_json(dup, validate=False)) == 2
    assert parse_reassignment_json('{"version":1,"partitions":[]}', validate=False) == []


def test_topics_to_move_json():
    assert parse_topics_to_move_json('{"topics":[{"topic":"foo"},{"topic":"bar"}],"version":1}') == [
        "foo",
        "bar",
    ]
    assert parse_topics_to_move_json('{"version":1}') == []
    with pytest.raises(ReassignError, match="The input string is not a valid JSON"):
        parse_topics_to_move_json("{topics")
    with pytest.raises(ReassignError, match="Not supported version field value 3"):
        parse_topics_to_move_json('{"topics":[],"version":3}')
    with pytest.raises(ReassignError, match="No such field exists: `topic`"):
        parse_topics_to_move_json('{"topics":[{"name":"foo"}]}')


def test_broker_list_parses_like_integer_parse_int():
    assert parse_broker_list("0,1,2") == [0, 1, 2]
    with pytest.raises(ReassignError) as info:
        parse_broker_list("0, 1")
    assert info.value.message == 'For input string: " 1"'


# --- --generate ---------------------------------------------------------------------------------------------

CURRENT = {("foo", p): [p % 3, (p + 1) % 3] for p in range(4)} | {("bar", 0): [0, 1, 2], ("other", 0): [0]}


def test_generate_prints_current_then_proposed_and_keeps_partition_counts_and_rf():
    text, proposed = generate(CURRENT, ["foo", "bar"], [3, 4, 5, 6], None, seed=7)
    current_json = format_assignment_json({tp: r for tp, r in CURRENT.items() if tp[0] in ("foo", "bar")})
    assert text == (
        f"Current partition replica assignment\n{current_json}\n\n"
        f"Proposed partition reassignment configuration\n{format_assignment_json(proposed)}\n"
    )
    assert sorted(proposed) == [("bar", 0), ("foo", 0), ("foo", 1), ("foo", 2), ("foo", 3)]
    assert len(proposed[("bar", 0)]) == 3 and all(len(proposed[("foo", p)]) == 2 for p in range(4))
    assert {b for reps in proposed.values() for b in reps} <= {3, 4, 5, 6}
    assert all(len(set(reps)) == len(reps) for reps in proposed.values())


def test_generate_is_deterministic_per_seed_and_matches_admin_utils_for_one_topic():
    assert generate(CURRENT, ["foo", "bar"], [3, 4, 5, 6], None, seed=11) == generate(
        CURRENT, ["foo", "bar"], [3, 4, 5, 6], None, seed=11
    )
    _, proposed = generate(CURRENT, ["foo"], [3, 4, 5, 6], None, seed=5)
    expected = assign_replicas_to_brokers([3, 4, 5, 6], 4, 2, None, seed=5)
    assert proposed == {("foo", p): reps for p, reps in expected.items()}
    layouts = {str(generate(CURRENT, ["foo"], [3, 4, 5, 6], None, seed=s)[1]) for s in range(20)}
    assert len(layouts) > 1  # the start index really is random


def test_generate_drops_brokers_that_are_not_live_and_is_rack_aware():
    _, proposed = generate(CURRENT, ["foo"], [0, 1, 9], None, seed=1, live_brokers=[0, 1, 2])
    assert {b for reps in proposed.values() for b in reps} == {0, 1}
    racks = {0: "r1", 1: "r1", 2: "r2", 3: "r2"}
    _, proposed = generate(CURRENT, ["foo"], [0, 1, 2, 3], racks, seed=3)
    assert all(racks[a] != racks[b] for a, b in proposed.values())
    _, unaware = generate(CURRENT, ["foo"], [0, 1, 2, 3], {0: "r1"}, seed=3, disable_rack_aware=True)
    assert len(unaware) == 4


@pytest.mark.parametrize(
    ("topics", "brokers", "racks", "message"),
    [
        (["foo"], [1, 2, 1], None, "Broker list contains duplicate entries: 1"),
        (["foo", "bar", "foo"], [1, 2], None, "List of topics to reassign contains duplicate entries: foo"),
        (["foo", "nope"], [1, 2], None, "Topic nope not found."),
        (["bar"], [1, 2], None, "Replication factor: 3 larger than available brokers: 2."),
        (
            ["foo"],
            [1, 2],
            {1: "r1"},
            "Not all brokers have rack information. Add --disable-rack-aware in command line to make replica "
            "assignment without rack information.",
        ),
    ],
)
def test_generate_errors(topics, brokers, racks, message):
    with pytest.raises(ReassignError) as info:
        generate(CURRENT, topics, brokers, racks, seed=0)
    assert info.value.message == message


# --- throttles ----------------------------------------------------------------------------------------------


def test_throttle_lists_are_lexicographic_and_follower_skips_sources():
    leader, follower = throttle_configs(
        {("foo", 10): ([1, 2], [3, 1]), ("foo", 2): ([1], [4]), ("bar", 0): ([5], [5])}
    )
    assert leader == {"bar": "0:5", "foo": "10:1,10:2,2:1"}
    assert follower == {"bar": "", "foo": "10:3,2:4"}
    assert throttled_brokers({("foo", 10): ([1, 2], [3, 1]), ("foo", 2): ([1], [4])}) == [1, 2, 3, 4]


def test_additional_throttles_cover_ongoing_moves_and_keep_their_sources():
    ongoing = {("foo", 0): ([4, 5, 1, 2], [4, 5]), ("baz", 1): ([7, 8], [8])}
    leader, follower = throttle_configs({("foo", 0): ([4, 5, 1, 2], [6, 1])}, ongoing)
    assert leader == {"baz": "1:7", "foo": "0:1,0:2"}
    assert follower == {"baz": "1:8", "foo": "0:6"}


# --- --execute ----------------------------------------------------------------------------------------------


def test_execute_without_throttle_singular():
    current = {("foo", 0): [1, 2], ("foo", 1): [2, 3]}
    assert execute_text(current, [("foo", 0)]) == (
        "Current partition replica assignment\n\n"
        '{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2],'
        '"log_dirs":["any","any"]}]}\n\n'
        "Save this to use as the --reassignment-json-file option during rollback\n"
        "Successfully started partition reassignment for foo-0\n"
    )


def test_execute_with_throttles_plural_and_the_28_log_dir_line():
    current = {("foo", 1): [1, 2], ("bar", 0): [3], ("foo", 0): [2, 3]}
    out = execute_text(
        current,
        [("foo", 1), ("bar", 0), ("foo", 0)],
        throttle=50000,
        log_dirs_throttle=1000,
        log_dir_moves=[("foo", 1, 2), ("bar", 0, 1), ("foo", 0, 1)],
    )
    assert out.endswith(
        "Save this to use as the --reassignment-json-file option during rollback\n"
        "Warning: You must run --verify periodically, until the reassignment completes, "
        "to ensure the throttle is removed.\n"
        "The inter-broker throttle limit was set to 50000 B/s\n"
        "The replica-alter-dir throttle limit was set to 1000 B/s\n"
        "Successfully started partition reassignments for bar-0,foo-0,foo-1\n"
        "Successfully started log directory moves for: bar-0-1,foo-0-1,foo-1-2\n"
    )
    only_dirs = execute_text(current, [("bar", 0)], log_dirs_throttle=0)
    assert "Warning: You must run --verify" in only_dirs and "inter-broker" not in only_dirs
    assert "replica-alter-dir throttle limit was set to 0 B/s" in only_dirs


def test_log_dir_lines_singular_batches_and_timeout():
    assert log_dir_moves_line([("foo", 0, 1)]) == "Successfully started log directory move for: foo-0-1\n"
    batches = execute_text({("a", 0): [1]}, [("a", 0)], log_dir_move_batches=[[("a", 0, 1)], [("a", 0, 2)]])
    assert batches.endswith("move for: a-0-1\nSuccessfully started log directory move for: a-0-2\n")
    assert log_dir_timeout_text([("b", 0, 2), ("a", 1, 1)]) == (
        "Timed out before log directory moves could be started for: a-1-1,b-0-2\n"
    )


def test_refusal_and_error_texts():
    assert existing_refusal_text() == (
        "Cannot execute because there is an existing partition assignment.  Use --additional to override "
        "this and create a new partition assignment in addition to the existing one. The --additional flag "
        "can also be used to change the throttle by resubmitting the current reassignment.\n"
    )
    assert reassign_errors_text({("foo", 9): "This server does not host this topic-partition."}) == (
        "Error reassigning partition(s):\nfoo-9: This server does not host this topic-partition.\n"
    )
    assert cancel_errors_text({("b", 0): "x", ("a", 0): "y"}) == (
        "Error cancelling partition reassignments for:\na-0: y\nb-0: x\n"
    )


# --- --verify -----------------------------------------------------------------------------------------------


def test_verify_uses_28_wording_sorted_and_prints_a_blank_line_without_dir_moves():
    status = [
        (("foo", 10), "complete", [1, 2], [1, 2]),
        (("foo", 2), "in_progress", [1, 2, 3], [3]),
        (("bar", 0), "mismatch", [1, 2], [3, 4]),
    ]
    assert verify_text(status, [], None, None) == (
        "Status of partition reassignment:\n"
        "There is no active reassignment of partition bar-0, but replica set is 1,2 rather than 3,4.\n"
        "Reassignment of partition foo-2 is still in progress.\n"
        "Reassignment of partition foo-10 is complete.\n"
        "\n"
    )


def test_verify_clearing_lines_singular_and_plural():
    done = [(("foo", 0), "complete", [3], [3])]
    out = verify_text(done, [], throttle_clearing_brokers([2, 1], [[3]]), ["foo"])
    assert out.endswith(
        "\n\nClearing broker-level throttles on brokers 1,2,3\nClearing topic-level throttles on topic foo\n"
    )
    single = verify_text(done, [], [3], ["foo", "foo"])
    assert "Clearing broker-level throttles on broker 3\n" in single


def test_clearing_topics_use_scala_set_order():
    # Up to four topics: a Scala Set1..Set4 keeps plan order (not sorted, not Java HashSet order).
    done = [(("zeta", 0), "complete", [1], [1])]
    out = verify_text(done, [], None, ["zeta", "alpha", "zeta", "mid"])
    assert out.endswith("Clearing topic-level throttles on topics zeta,alpha,mid\n")
    # Five: a CHAMP HashSet. Slots of improve(String.hashCode): alpha 0, epsilon 13, gamma 26, beta and
    # delta share 22 and go one level down (delta 16 < beta 20), after the root's own entries.
    five = ["alpha", "beta", "gamma", "delta", "epsilon"]
    out = verify_text(done, [], None, five)
    assert out.endswith("Clearing topic-level throttles on topics alpha,epsilon,gamma,delta,beta\n")


def test_clearing_brokers_use_scala_set_order():
    # improve(i) & 31 for 0..5 is 0, 7, 14, 20, 29, 1: a sixth broker jumps to second place.
    assert scala_set_order([0, 1, 2, 3, 4, 5]) == [0, 5, 1, 2, 3, 4]
    assert scala_set_order([4, 3, 2, 1, 0]) == [0, 1, 2, 3, 4]
    assert scala_set_order([3, 1, 3]) == [3, 1]
    done = [(("t", 0), "complete", [1], [1])]
    out = verify_text(done, [], throttle_clearing_brokers(range(6), [[1]]), ["t"])
    assert "Clearing broker-level throttles on brokers 0,5,1,2,3,4\n" in out
    # describeCluster hands the live brokers over in java.util.HashMap order: 16 lands in slot 0, 15 in 15.
    assert throttle_clearing_brokers([15, 16], [[15]]) == [16, 15, 15]


def test_verify_log_dir_lines_sorted_by_broker_topic_partition():
    dirs = [
        DirMoveStatus("b", 0, 1, "completed", "d2", "d2"),
        DirMoveStatus("a", 0, 2, "in_progress", "d0", "d1", "d1"),
        DirMoveStatus("a", 1, 1, "moving_elsewhere", "d0", "d2", "d3"),
        DirMoveStatus("a", 0, 1, "not_moving", "d1", "d2"),
        ("a", 2, 3, "missing_replica", None, "d1"),
        ("a", 3, 3, "missing_log_dir", None, "d1"),
    ]
    out = verify_text([(("a", 0), "complete", [1, 2], [1, 2])], dirs, None, None)
    assert out == (
        "Status of partition reassignment:\n"
        "Reassignment of partition a-0 is complete.\n"
        "Partition a-0 on broker 1 is not being moved from log dir d1 to d2.\n"
        "Partition a-1 on broker 1 is being moved to log dir d3 instead of d2.\n"
        "Reassignment of replica b-0-1 completed successfully.\n"
        "Reassignment of replica a-0-2 is still in progress.\n"
        "Partition a-2 cannot be found in any live log directory on broker 3.\n"
        "Partition a-3 is not found in any live log dir on broker 3. "
        "There is likely an offline log directory on the broker.\n"
    )


def test_log_dir_move_state():
    assert log_dir_move_state(False, None, None, "d1") == "missing_replica"
    assert log_dir_move_state(True, None, None, "d1") == "missing_log_dir"
    assert log_dir_move_state(True, "d1", None, "d1") == "completed"
    assert log_dir_move_state(True, "d0", None, "d1") == "not_moving"
    assert log_dir_move_state(True, "d0", "d1", "d1") == "in_progress"
    assert log_dir_move_state(True, "d0", "d2", "d1") == "moving_elsewhere"


# --- --cancel and --list ------------------------------------------------------------------------------------


def test_cancel_texts():
    assert cancel_text([("foo", 1), ("foo", 0)], [], [1, 2], ["foo"]) == (
        "Successfully cancelled partition reassignments for: foo-0,foo-1\n"
        "None of the specified partition moves are active.\n"
        "Clearing broker-level throttles on brokers 1,2\n"
        "Clearing topic-level throttles on topic foo\n"
    )
    assert cancel_text([], [("foo", 0, 2)]) == (
        "None of the specified partition reassignments are active.\n"
        "Successfully started log directory move for: foo-0-2\n"
    )
    assert cancel_text([("foo", 0)], []) == (
        "Successfully cancelled partition reassignment for: foo-0\n"
        "None of the specified partition moves are active.\n"
    )


def test_list_texts():
    assert list_text({("foo", 1): ([1, 2, 3], [4, 5], [1, 2]), ("bar", 0): ([2, 3, 0], [], [0])}) == (
        "Current partition reassignments:\n"
        "bar-0: replicas: 2,3,0. removing: 0.\n"
        "foo-1: replicas: 1,2,3. adding: 4,5. removing: 1,2.\n"
    )
    assert list_text({}) == "No partition reassignments found.\n"
