"""Scenario files: YAML -> validated, normalised model (docs/scenario-format.md)."""

from sparkkafka.scenario.loader import load_scenario, parse_scenario
from sparkkafka.scenario.model import Event, PartitionStateSpec, ReplicaLogSpec, Scenario, TopicSpec

__all__ = ["Event", "PartitionStateSpec", "ReplicaLogSpec", "Scenario", "TopicSpec", "load_scenario",
           "parse_scenario"]
