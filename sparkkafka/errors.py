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


class DamagedRunError(ScenarioError):
    """A file of a run directory is missing, cut or unreadable (run_check.py): the run is refused, nothing is
    changed. The message names the file and how to recover: every such damage loses state the run cannot
    rebuild from the rest, so the file comes back from a copy or the scenario is run again into the directory."""

    def __init__(self, run: str, file: str, problem: str) -> None:
        import os

        rel = os.path.relpath(file, run) + ("/" if file.endswith(os.sep) else "")  # a folder ends with "/"
        super().__init__("run", run, f"{rel} {problem}: the run directory is damaged and was not changed. "
                                     f"Restore {rel} from a copy, or run the scenario again into the directory: "
                                     f"sparkkafka run SCENARIO.yaml --out {run} --overwrite")
        self.file = file


class NotYetSupportedError(ScenarioError):
    """A valid event or setting whose behaviour a later issue implements."""


class ReassignError(ScenarioError):
    """A failure of kafka-reassign-partitions (tools/reassign_partitions.py), with Kafka's message.

    ``exception`` names the Java exception class when Kafka's printed message starts with it (an exception
    wrapped in ``ExecutionException``); ``terse`` marks ``TerseReassignmentFailureException``s, which the tool
    prints without the ``Error: `` prefix and without a stack trace.
    """

    def __init__(
        self, field: str, value: Any, message: str, *, exception: str | None = None, terse: bool = False
    ) -> None:
        super().__init__(field, value, message)
        self.exception = exception
        self.terse = terse

    def tool_output(self) -> str:
        """What the tool prints for this failure, without the stack trace of non-terse errors (exit 1)."""
        if self.terse:
            return self.message + "\n"
        prefix = f"{self.exception}: " if self.exception else ""
        return f"Error: {prefix}{self.message}\n"
