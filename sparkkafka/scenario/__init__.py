"""Scenario files: YAML -> validated, normalised model (contract section 1)."""

from sparkkafka.scenario.loader import load_scenario, parse_scenario
from sparkkafka.scenario.model import Event, Scenario, TopicSpec

__all__ = ["Event", "Scenario", "TopicSpec", "load_scenario", "parse_scenario"]
