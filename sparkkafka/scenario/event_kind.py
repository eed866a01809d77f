"""What a timeline event kind is, and the one registry of them.

Each kind is registered once with everything that makes it work: the shape of its value (the scenario
document's check, scenario/schema.py), its check as part of the timeline's sequence (the loader's, against the
topics and brokers at that point of the timeline, giving the args the driver reads), its action on a running
emulation (through `RunActions`, which the driver implements: driver/timeline.py) and its row of the
scenario format's events table (docs/scenario-format.md). Kafka's kinds are scenario/events.py; a new fault
kind is one more `register(EventKind(...))`, with no other file to touch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

from sparkkafka.errors import ScenarioError


class RunActions(Protocol):
    """What an event may do to a running emulation (driver/timeline.py's Actions): each is what the cluster's
    controller, brokers, clients or network see at emulated time `now` (ms)."""

    brokers: Sequence[int]

    def produce(self, args: dict[str, Any], now: int) -> None: ...
    def crash(self, broker: int, now: int, power_loss: bool = False) -> None: ...
    def restart(self, broker: int, now: int) -> None: ...
    def shutdown(self, broker: int, now: int) -> None: ...
    def pause(self, broker: int, now: int, duration_ms: int) -> None: ...
    def isolate(self, brokers: Sequence[int], other: Sequence[int] | str, now: int,
                duration_ms: int | None) -> None: ...
    def heal(self, now: int) -> None: ...
    def fail_log_dir(self, broker: int, log_dir: str, now: int) -> None: ...
    def controller_failover(self, now: int) -> None: ...
    def create_topic(self, topic: str, now: int) -> None: ...
    def delete_topic(self, topic: str, now: int) -> None: ...
    def set_config(self, change: dict[str, Any], now: int) -> None: ...
    def reassign(self, plan: dict[str, Any], throttle: int | None, log_dirs_throttle: int | None, via: str,
                 now: int) -> None: ...
    def elect_leaders(self, election_type: str, partitions: Sequence[tuple[str, int]] | None, now: int) -> None: ...


#: (the loader's timeline checker, the shape's validated value, the event's path) -> the args the driver reads
Check = Callable[[Any, Any, str], dict[str, Any]]
#: (the running emulation, the args, emulated now in ms)
Apply = Callable[[RunActions, dict[str, Any], int], None]


@dataclass(frozen=True)
class EventKind:
    """One kind of timeline event: `name` is its key in a timeline entry (`{at: 0, crash: 1}`)."""

    name: str
    shape: Any  # the value's type as pydantic validates it (scenario/schema.py's shapes)
    check: Check
    apply: Apply
    syntax: str  # how it is written, for the docs table: "`crash: B` or `crash: {broker, power_loss}`"
    meaning: str


KINDS: dict[str, EventKind] = {}


def register(kind: EventKind) -> EventKind:
    """Add a kind; a name already registered is refused (one registration per kind)."""
    if kind.name in KINDS or kind.name in ("at", "round"):
        raise ValueError(f"event kind {kind.name!r} is already registered")
    KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Remove a kind (a test's toy kind, once the test is done)."""
    del KINDS[name]


def names() -> tuple[str, ...]:
    """The kinds in registration order (the order error messages list them in)."""
    return tuple(KINDS)


def docs_table() -> str:
    """The scenario format's events table (docs/scenario-format.md keeps this copy; tests check it)."""
    rows = ["| event | meaning |", "| --- | --- |"]
    rows += [f"| {k.syntax} | {k.meaning} |" for k in KINDS.values()]
    return "\n".join(rows)


def refuse(path: str, value: Any, message: str) -> NoReturn:
    """A check's refusal: ScenarioError naming the field (`timeline[3].crash.broker`) and the value."""
    raise ScenarioError(path, value, message)


def child(path: str, key: Any) -> str:
    """Child path: `a.b` for a name, `a[3]` for an index or an integer key."""
    return f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}"
