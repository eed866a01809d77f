"""The one scenario builder for tests: a scenario document (docs/scenario-format.md) from its parts, parsed,
and, where a test wants a run directory, run to the end on an engine (sparkkafka.Cluster)."""

from __future__ import annotations

from typing import Any

from sparkkafka import Cluster, parse_scenario


def produce(items, at: int = 0, acks: str = "all", value_bytes: int = 100) -> list[dict]:
    """Timeline produce events at `at`, one per (topic, partition, records)."""
    return [{"at": at, "produce": {"topic": t, "partition": p, "records": n, "acks": acks,
                                   "value_bytes": value_bytes}} for t, p, n in items]


def scenario(brokers, topics: list[dict], until_ms: int, *, log_dirs=None, config: dict | None = None,
             emulator: dict | None = None, timeline: list[dict] = (), seed: int | None = None,
             name: str | None = None) -> dict[str, Any]:
    """A scenario document: its name and seed, the cluster (brokers, log dirs, broker config, emulator
    settings), topics, timeline, run length; a part left None is left out (the scenario's default)."""
    head = {k: v for k, v in (("name", name), ("seed", seed)) if v is not None}
    cluster: dict[str, Any] = {"brokers": brokers}
    for key, value in (("log_dirs", log_dirs and list(log_dirs)), ("config", config), ("emulator", emulator)):
        if value is not None:
            cluster[key] = value
    return {**head, "cluster": cluster, "topics": topics, "timeline": list(timeline), "run": {"until_ms": until_ms}}


def run_to_end(doc: dict[str, Any], name: str, out: str, spark=None) -> str:
    """Parse `doc` as scenario `name`, run it to its end into `out`; the run directory."""
    Cluster.from_scenario(parse_scenario(doc, name=name), spark=spark, out=out).run()
    return out
