"""The validated, normalised form of a scenario file (docs/scenario-format.md).

Built only by `sparkkafka.scenario.loader`; every field here has already been checked, so the rest
of the emulator never re-validates user input.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from ..protocol.config import EmulatorSettings


@dataclass(frozen=True)
class TopicSpec:
    """A topic as the topic tool would create it: `assignment` None = Kafka's placement algorithm."""

    name: str
    partitions: int
    replication_factor: int
    assignment: dict[int, tuple[int, ...]] | None = None
    config: dict[str, Any] = field(default_factory=dict)
    topic_id: str | None = None  # Kafka's Uuid text (KIP-516); None = derived from the seed and name
    state: dict[int, PartitionStateSpec] | None = None  # an imported cluster's partitions at the start


@dataclass(frozen=True)
class ReplicaLogSpec:
    """A replica's log at the start of a run: its dir and size, and a KIP-113 future log if a move is in flight."""

    log_dir: str
    size: int
    future_dir: str | None = None
    future_size: int = 0


@dataclass(frozen=True)
class PartitionStateSpec:
    """A partition's state at the start of a run (the partition state znode, the topic znode's adding and
    removing replicas of a KIP-455 reassignment in flight, and the replicas' logs); leader -1 = none."""

    leader: int
    isr: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    logs: dict[int, ReplicaLogSpec] = field(default_factory=dict)


@dataclass(frozen=True)
class Event:
    """One timeline entry; `index` is its position in the file, exactly one of at_ms/round is set."""

    index: int
    at_ms: int | None
    round: int | None
    type: str
    args: dict[str, Any]

    def time_ms(self, round_ms: int) -> int:
        """The emulated time the event is due at."""
        return self.at_ms if self.at_ms is not None else self.round * round_ms


@dataclass(frozen=True)
class Scenario:
    """A cluster, its topics and a timeline (kept in file order: runners sort by (time, index))."""

    name: str
    seed: int
    brokers: tuple[int, ...]
    racks: dict[int, str] | None
    log_dirs: tuple[str, ...]
    config: dict[str, Any]
    emulator: dict[str, Any]
    topics: tuple[TopicSpec, ...]
    timeline: tuple[Event, ...]
    until_ms: int | None
    until_round: int | None

    @cached_property
    def emulator_settings(self) -> EmulatorSettings:
        """The emulator settings, typed (missing ones at their defaults: a run saved before a setting existed).
        Built once per Scenario and not a field, so a run directory saves the mapping alone."""
        return EmulatorSettings.of(self.emulator)

    @property
    def round_ms(self) -> int:
        """Emulated milliseconds per round."""
        return self.emulator_settings.round_ms

    def on_engine(self, engine: str) -> Scenario:
        """The same scenario on another engine (cluster.emulator.engine; `run --engine`,
        `Cluster.from_scenario(engine=...)`): all three give the same tables."""
        return replace(self, emulator={**self.emulator, "engine": engine})

    @property
    def end_ms(self) -> int:
        """The emulated time the run stops at."""
        return self.until_ms if self.until_ms is not None else self.until_round * self.round_ms
