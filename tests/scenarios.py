"""The one scenario builder for tests: a scenario document (docs/scenario.md) from its parts, parsed,
and, where a test wants a run directory, run to the end on an engine (sparkkafka.Cluster)."""

from __future__ import annotations

from typing import Any

from sparkkafka import Cluster, parse_scenario


def produce(items, at: int = 0, acks: str = "all", value_bytes: int = 100) -> list[dict]:
    """Timeline produce events at `at`, one per (topic, partition, records)."""
    return [{"at": at, "produce": {"topic": t, "partition": p, "records": n, "acks": acks,
                                   "value_bytes": value_bytes}} for t, p, n in items]


def scenario(brokers, topics: list[dict], until_ms: int, *, log_dirs=None, config: dict | None = None,
             timeline: list[dict] = ()) -> dict[str, Any]:
    """A scenario document: the cluster (brokers, log dirs, broker config), topics, timeline, run length."""
    cluster: dict[str, Any] = {"brokers": brokers}
    if log_dirs is not None:
        cluster["log_dirs"] = list(log_dirs)
    if config is not None:
        cluster["config"] = config
    return {"cluster": cluster, "topics": topics, "timeline": list(timeline), "run": {"until_ms": until_ms}}


def run_to_end(doc: dict[str, Any], name: str, out: str, spark=None) -> str:
    """Parse `doc` as scenario `name`, run it to its end into `out`; the run directory."""
    Cluster.from_scenario(parse_scenario(doc, name=name), spark=spark, out=out).run()
    return out
