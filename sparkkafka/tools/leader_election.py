"""``kafka-leader-election.sh`` (``kafka.admin.LeaderElectionCommand``, Kafka 2.8, Scala 2.13 build).

Options are checked as the tool's ``validate`` does: ``--election-type`` is required; exactly one of
``--topic``, ``--all-topic-partitions``, ``--path-to-json-file``; ``--partition`` if and only if
``--topic``. The JSON file is read by ``parseReplicaElectionData`` (Jackson via ``kafka.utils.Json``),
with Kafka's messages. Results print as the tool's ``electLeaders`` does: the partitions come out of
Scala 2.13 ``mutable.Set``/``mutable.Map`` (``mutable.HashSet``/``HashMap``), so they are listed in that
order (see ``log_dirs.scala_hash_order``; ties of equal hash codes in the order given), not
``java.util.HashSet`` order. Any failure makes the tool throw ``AdminCommandFailedException``
uncaught: exit code 1, and the JVM prints the exception, its stack and each failure as ``Suppressed``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from ..errors import ScenarioError
from .log_dirs import _json_string, scala_hash_order, topic_partition_hash

_MASK = 0xFFFFFFFF
ELECTION_TYPES = ("PREFERRED", "UNCLEAN")  # org.apache.kafka.common.ElectionType

#: Kafka error name -> (exception class, ``Errors`` default message), for ElectLeaders results.
ELECTION_ERRORS: dict[str, tuple[str, str]] = {
    "PREFERRED_LEADER_NOT_AVAILABLE": (
        "org.apache.kafka.common.errors.PreferredLeaderNotAvailableException",
        "The preferred leader was not available.",
    ),
    "ELIGIBLE_LEADERS_NOT_AVAILABLE": (
        "org.apache.kafka.common.errors.EligibleLeadersNotAvailableException",
        "Eligible topic partition leaders are not available.",
    ),
    "ELECTION_NOT_NEEDED": (
        "org.apache.kafka.common.errors.ElectionNotNeededException",
        "Leader election not needed for topic partition.",
    ),
    "UNKNOWN_TOPIC_OR_PARTITION": (
        "org.apache.kafka.common.errors.UnknownTopicOrPartitionException",
        "This server does not host this topic-partition.",
    ),
    "INVALID_TOPIC_EXCEPTION": (
        "org.apache.kafka.common.errors.InvalidTopicException",
        "The request attempted to perform an operation on an invalid topic.",
    ),
    "REQUEST_TIMED_OUT": ("org.apache.kafka.common.errors.TimeoutException", "The request timed out."),
    "NOT_CONTROLLER": (
        "org.apache.kafka.common.errors.NotControllerException",
        "This is not the correct controller for this cluster.",
    ),
    "CLUSTER_AUTHORIZATION_FAILED": (
        "org.apache.kafka.common.errors.ClusterAuthorizationException",
        "Cluster authorization failed.",
    ),
    "UNKNOWN_SERVER_ERROR": (
        "org.apache.kafka.common.errors.UnknownServerException",
        "The server experienced an unexpected error when processing the request.",
    ),
}


def _improve(h: int) -> int:
    """``scala.collection.Hashing.improve``, the hash of Scala 2.13's immutable ``HashMap``/``HashSet``."""
    h = (h + ~(h << 9)) & _MASK
    h ^= h >> 14
    h = (h + (h << 4)) & _MASK
    return h ^ (h >> 10)


def champ_order(hashes: Sequence[int]) -> list[int]:
    """Positions of distinct keys (hash codes `hashes`) in the iteration order of a Scala 2.13 immutable
    ``HashMap`` (a CHAMP trie, 5 bits of the improved hash per level, low bits first): at each node its
    single keys by fragment, then its sub-tries by fragment; equal hashes in insertion order."""
    improved = [_improve(h & _MASK) for h in hashes]

    def walk(members: list[int], shift: int) -> list[int]:
        if shift >= 32 or len({improved[i] for i in members}) == 1:
            return members
        groups: dict[int, list[int]] = {}
        for i in members:
            groups.setdefault((improved[i] >> shift) & 31, []).append(i)
        singles = [g[0] for _, g in sorted(groups.items()) if len(g) == 1]
        nested = [i for _, g in sorted(groups.items()) if len(g) > 1 for i in walk(g, shift + 5)]
        return singles + nested

    return walk(list(range(len(hashes))), 0)


def scala_duplicates(items: Sequence, hashes: Sequence[int]) -> list:
    """``kafka.utils.CoreUtils.duplicates``: each repeated item once, in ``groupBy`` (CHAMP) order."""
    first: dict = {}
    counts: dict = {}
    for item, h in zip(items, hashes, strict=True):
        first.setdefault(item, h)
        counts[item] = counts.get(item, 0) + 1
    repeated = [item for item in first if counts[item] > 1]
    return [repeated[i] for i in champ_order([first[item] for item in repeated])]


@dataclass(frozen=True)
class ElectionRequest:
    """A validated ``kafka-leader-election.sh`` invocation; `partitions` None means all partitions."""

    election_type: str
    partitions: tuple[tuple[str, int], ...] | None


def parse_election_type(value: str) -> str:
    """jopt-simple's ``EnumConverter`` over ``ElectionType``: case-insensitive name."""
    for name in ELECTION_TYPES:
        if str(value).upper() == name:
            return name
    raise ScenarioError("--election-type", value, f"Cannot parse argument '{value}' of option election-type")


def _java_double(x: float) -> str:
    """``Double.toString``: plain between 1e-3 and 1e7, else ``d.dddE<n>``."""
    if x == 0:
        return "-0.0" if str(x).startswith("-") else "0.0"
    d = Decimal(repr(abs(x))).normalize()
    sign = "-" if x < 0 else ""
    if 1e-3 <= abs(x) < 1e7:
        text = format(d, "f")
        return sign + (text if "." in text else text + ".0")
    digits = "".join(map(str, d.as_tuple().digits))
    exponent = d.adjusted()
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


def _node_text(value: object) -> str:
    """A Jackson ``JsonNode.toString`` of a parsed value (``MissingNode`` is the empty string)."""
    if value is _MISSING:
        return ""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, list):
        return "[" + ",".join(_node_text(v) for v in value) + "]"
    return "{" + ",".join(f"{_json_string(k)}:{_node_text(v)}" for k, v in value.items()) + "}"


_MISSING = object()


def _reject_constant(name: str) -> object:
    raise ValueError(name)


def _read_tree(text: str) -> object:
    """``ObjectMapper.readTree``: one value, trailing content ignored, empty content a MissingNode."""
    body = text.lstrip(" \t\r\n")
    if not body:
        return _MISSING
    decoder = json.JSONDecoder(parse_constant=_reject_constant)
    return decoder.raw_decode(body)[0]


def parse_election_json(text: str, source: str = "--path-to-json-file") -> tuple[tuple[str, int], ...]:
    """``LeaderElectionCommand.parseReplicaElectionData`` (2.8) over the JSON file's text: the distinct
    partitions of ``{"partitions":[{"topic":"foo","partition":1}]}``; errors carry Kafka's messages."""
    try:
        try:
            tree = _read_tree(text)
        except ValueError:  # kafka.utils.Json.parseFull retries with backslashes doubled
            tree = _read_tree(text.replace("\\", "\\\\"))
    except ValueError:
        raise ScenarioError(source, text, "Replica election data is empty") from None

    def fail(message: str) -> ScenarioError:
        return ScenarioError(source, text, message)

    if not isinstance(tree, dict):
        raise fail(f"Expected JSON object, received {_node_text(tree)}")
    if "partitions" not in tree:
        raise fail('Replica election data is missing "partitions" field')
    entries = tree["partitions"]
    if not isinstance(entries, list):
        raise fail(f"Expected JSON array, received {_node_text(entries)}")
    partitions: list[tuple[str, int]] = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise fail(f"Expected JSON object, received {_node_text(entry)}")
        for name in ("topic", "partition"):
            if name not in entry:
                raise fail(f"No such field exists: `{name}`")
            value = entry[name]
            if name == "topic" and not isinstance(value, str):
                raise fail(f"Expected `String` value, received {_node_text(value)}")
            if name == "partition" and not (
                isinstance(value, int) and not isinstance(value, bool) and -(2**31) <= value < 2**31
            ):
                raise fail(f"Expected `Int` value, received {_node_text(value)}")
        partitions.append((entry["topic"], entry["partition"]))
    repeated = scala_duplicates(partitions, [topic_partition_hash(t, p) for t, p in partitions])
    if repeated:
        names = ",".join(f"{t}-{p}" for t, p in repeated)
        raise fail(f"Replica election data contains duplicate partitions: {names}")
    return tuple(dict.fromkeys(partitions))


def validate_election_args(
    election_type: str | None,
    *,
    topic: str | None = None,
    partition: int | None = None,
    all_topic_partitions: bool = False,
    path_to_json_file: str | Path | None = None,
) -> ElectionRequest:
    """``LeaderElectionCommand.validate`` then the option reads of ``run`` (2.8), in that order."""
    if election_type is None:
        raise ScenarioError("--election-type", None, "Missing required option(s): election-type")
    given = [topic is not None, bool(all_topic_partitions), path_to_json_file is not None]
    if sum(given) != 1:
        raise ScenarioError(
            "--topic",
            topic,
            "One and only one of the following options is required: topic, all-topic-partitions, path-to-json-file",
        )
    if topic is not None and partition is None:
        raise ScenarioError("--partition", None, "Missing required option(s): partition")
    if topic is None and partition is not None:
        raise ScenarioError("--partition", partition, "Option partition is only allowed if topic is used")
    kind = parse_election_type(election_type)
    if path_to_json_file is not None:
        text = Path(path_to_json_file).read_text(encoding="utf-8")
        return ElectionRequest(kind, parse_election_json(text))
    if topic is not None:
        return ElectionRequest(kind, ((topic, int(partition)),))
    return ElectionRequest(kind, None)


def _exception_text(error: str, message: str | None) -> str:
    """``Throwable.toString`` of ``Errors.forName(error).exception(message)``: a null message takes
    the error's default one."""
    if error not in ELECTION_ERRORS:
        raise ScenarioError(
            "failed", error, f"unknown election error; expected one of {sorted(ELECTION_ERRORS)}"
        )
    cls, default = ELECTION_ERRORS[error]
    return f"{cls}: {default if message is None else message}"


def _hash_ordered(partitions: Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
    distinct = list(dict.fromkeys((str(t), int(p)) for t, p in partitions))
    return [distinct[i] for i in scala_hash_order([topic_partition_hash(t, p) for t, p in distinct])]


def _classify(
    succeeded: Sequence[tuple[str, int]],
    not_needed: Sequence[tuple[str, int]],
    failed: Mapping[tuple[str, int], tuple[str, str | None]],
) -> tuple[list[tuple[str, int]], list[tuple[str, int]], list[tuple[tuple[str, int], str]]]:
    noop = list(not_needed)
    failures: list[tuple[tuple[str, int], str]] = []
    for tp, (error, message) in failed.items():
        if error == "ELECTION_NOT_NEEDED":  # the tool files ElectionNotNeededException under noop
            noop.append(tp)
        else:
            failures.append(((str(tp[0]), int(tp[1])), _exception_text(error, message)))
    seen: set[tuple[str, int]] = set()
    for group in (set(_hash_ordered(succeeded)), set(_hash_ordered(noop)), {tp for tp, _ in failures}):
        if seen & group:
            raise ScenarioError(
                "failed", sorted(seen & group), "a partition has more than one election result"
            )
        seen |= group
    order = {tp: i for i, tp in enumerate(_hash_ordered([tp for tp, _ in failures]))}
    failures.sort(key=lambda item: order[item[0]])
    return _hash_ordered(succeeded), _hash_ordered(noop), failures


def election_text(
    election_type: str,
    succeeded: Sequence[tuple[str, int]],
    not_needed: Sequence[tuple[str, int]],
    failed: Mapping[tuple[str, int], tuple[str, str | None]],
) -> tuple[str, int]:
    """What ``kafka-leader-election.sh`` prints on stdout, and its exit code, for ElectLeaders results.

    `failed` maps a partition to (Kafka error name, message or None for the error's default message)."""
    kind = parse_election_type(election_type)
    done, noop, failures = _classify(succeeded, not_needed, failed)
    lines = []
    if done:
        names = ", ".join(f"{t}-{p}" for t, p in done)
        lines.append(f"Successfully completed leader election ({kind}) for partitions {names}")
    if noop:
        # Kafka 2.8 bug (KAFKA-12684, fixed in 3.0): this line lists the *succeeded* set, not the
        # partitions that needed no election, so it may even end with "partitions " and nothing.
        names = ", ".join(f"{t}-{p}" for t, p in done)
        lines.append(f"Valid replica already elected for partitions {names}")
    for (t, p), exception in failures:
        lines.append(f"Error completing leader election ({kind}) for partition: {t}-{p}: {exception}")
    text = "".join(line + "\n" for line in lines)
    return text, 1 if failures else 0


def election_stderr(failed: Mapping[tuple[str, int], tuple[str, str | None]]) -> str:
    """The uncaught ``AdminCommandFailedException`` the JVM prints on stderr when elections failed,
    without its ``at ...`` stack frames (they depend on the build); the suppressed Kafka
    ``ApiException``s carry no stack. Empty when nothing failed."""
    _, _, failures = _classify([], [], failed)
    if not failures:
        return ""
    head = (
        'Exception in thread "main" kafka.common.AdminCommandFailedException: '
        f"{len(failures)} replica(s) could not be elected\n"
    )
    return head + "".join(f"\tSuppressed: {exception}\n" for _, exception in failures)
