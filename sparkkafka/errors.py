"""Exceptions raised to users of sparkkafka (not Kafka protocol errors: see protocol/errors.py)."""

from __future__ import annotations

from typing import Any


class SparkKafkaError(Exception):
    """Base class of every error sparkkafka raises on purpose."""


class ScenarioError(SparkKafkaError, ValueError):
    """Bad input: names the offending field (a dotted path) and value. The CLI exits 2 on it."""

    def __init__(self, field: str, value: Any, message: str) -> None:
        self.field = field
        self.value = value
        self.message = message
        super().__init__(f"{field}: {message} (got {value!r})")


class NotYetSupportedError(ScenarioError):
    """A valid event or setting whose behaviour a later issue implements."""
