"""Kafka's timeline event kinds, each registered once (scenario/event_kind.py): its value's shape
(scenario/schema.py), its check in the timeline's sequence (`seq` is the loader's checker: the brokers, the
topics at that point, the brokers' up/down state), its action on the running emulation and its docs row.

The order here is the order error messages list the kinds in.
"""

from __future__ import annotations

from typing import Any

from sparkkafka.scenario import schema
from sparkkafka.scenario.event_kind import EventKind, RunActions, child, register


def _produce(seq: Any, m: schema.Produce, path: str) -> dict:
    spec = seq.topic(m.topic, child(path, "topic"))
    partition = m.partition if m.partition == "all" else seq.partition(m.partition, child(path, "partition"), spec)
    return {"topic": spec.name, "partition": partition, "records": m.records,
            "rate_per_sec": None if m.rate_per_sec is None else float(m.rate_per_sec),
            "duration_ms": m.duration_ms, "acks": m.acks, "value_bytes": m.value_bytes, "key": m.key}


def _broker_event(seq: Any, m: schema.Crash | schema.BrokerEvent, path: str) -> int:
    """The broker, up (crash, shutdown) or down (restart) at this point; a bare value's error names the event."""
    b = seq.broker(m.broker, child(path, "broker"))
    seq.broker_state(b, path if isinstance(m, schema.Bare) else child(path, "broker"), path.rsplit(".", 1)[-1])
    return b


def _crash(seq: Any, m: schema.Crash, path: str) -> dict:
    return {"broker": _broker_event(seq, m, path), "power_loss": m.power_loss}


def _broker(seq: Any, m: schema.BrokerEvent, path: str) -> dict:  # restart, shutdown
    return {"broker": _broker_event(seq, m, path)}


def _pause(seq: Any, m: schema.Pause, path: str) -> dict:
    b = seq.broker(m.broker, child(path, "broker"))
    seq.broker_state(b, child(path, "broker"), "pause")
    return {"broker": b, "duration_ms": m.duration_ms}


def _isolate(seq: Any, m: schema.Isolate, path: str) -> dict:
    group = seq.brokers_of(m.brokers, child(path, "brokers"))
    other = m.from_
    if other is None:
        other = tuple(b for b in seq.brokers if b not in group)
        if not other:
            seq.refuse(child(path, "brokers"), m.brokers, "covers every broker: nothing left to isolate "
                                                          "them from (give `from: controller`?)")
    elif other != "controller":
        other = seq.brokers_of(other, child(path, "from"))
    return {"brokers": group, "from": other, "duration_ms": m.duration_ms}


def _empty(seq: Any, m: schema.Empty | None, path: str) -> dict:  # heal, controller_failover
    return {}


def _fail_log_dir(seq: Any, m: schema.FailLogDir, path: str) -> dict:
    b = seq.broker(m.broker, child(path, "broker"))
    seq.unknown.add(b)  # a failed dir may stop its broker (protocol/log_dir_failure.py): its state is unknown
    return {"broker": b, "log_dir": seq.log_dir(m.log_dir, child(path, "log_dir"))}


def _create_topic(seq: Any, m: schema.NewTopic, path: str) -> dict:
    return {"topic": seq.create(seq.topic_spec(m, path), path)}


def _delete_topic(seq: Any, m: schema.DeleteTopic, path: str) -> dict:
    return {"topic": seq.delete(seq.topic(m.topic, child(path, "topic")).name)}


def _reassign(seq: Any, m: schema.Reassign, path: str) -> dict:
    parts = []
    for j, e in enumerate(m.plan.partitions):
        epath = f"{path}.plan.partitions[{j}]"
        spec = seq.topic(e.topic, child(epath, "topic"))
        replicas = seq.brokers_of(e.replicas, child(epath, "replicas"))
        dirs = [seq.log_dir(d, f"{epath}.log_dirs[{k}]", any_ok=True)
                for k, d in enumerate(e.log_dirs or ["any"] * len(replicas))]
        parts.append({"topic": spec.name, "partition": seq.partition(e.partition, child(epath, "partition"), spec),
                      "replicas": list(replicas), "log_dirs": dirs})
    return {"plan": {"version": 1, "partitions": parts}, "throttle": m.throttle,
            "log_dirs_throttle": m.log_dirs_throttle, "via": m.via}


def _elect_leaders(seq: Any, m: schema.ElectLeaders, path: str) -> dict:
    parts = None
    if m.partitions is not None:
        parts = []
        for j, e in enumerate(m.partitions):
            spec = seq.topic(e.topic, f"{path}.partitions[{j}].topic")
            parts.append((spec.name, seq.partition(e.partition, f"{path}.partitions[{j}].partition", spec)))
        parts = tuple(parts)
    return {"election_type": m.election_type, "partitions": parts}


def _set_config(seq: Any, m: schema.SetBrokerConfig | schema.SetTopicConfig, path: str) -> dict:
    npath = child(path, "name")
    if m.entity == "topics":
        name: Any = seq.topic(m.name, npath).name
    else:
        name = "default" if m.name == "default" else seq.broker(m.name, npath)
    return {"entity": m.entity, "name": name, "config": m.config.given()}


def _elect(run: RunActions, a: dict, now: int) -> None:
    parts = None if a.get("partitions") is None else [tuple(x) for x in a["partitions"]]
    run.elect_leaders(a["election_type"], parts, now)


for _kind in (
    EventKind("produce", schema.Produce, _produce, lambda run, a, now: run.produce(a, now),
              "`produce: {topic, partition, records, acks, value_bytes, key}`",
              "a producer sends `records` records; or `rate_per_sec` + `duration_ms` for a steady load. `partition` "
              "is a partition id or `all` (the default: round-robin, one batch per partition per round); `acks` 0, "
              "1 (the default, Kafka 2.8's), `all` or -1; `value_bytes` default 100. Producers do not retry"),
    EventKind("crash", schema.shorthand(schema.Crash, "broker"), _crash,
              lambda run, a, now: run.crash(a["broker"], now, bool(a.get("power_loss"))),
              "`crash: B` or `crash: {broker, power_loss}`",
              "hard kill: the broker's memory is gone, its log dirs survive; on restart it recovers from its "
              "checkpoints as Kafka does. With `power_loss: true` it also loses what it had not flushed "
              "([engine.md](engine.md#choices-and-limits-of-this-version-say-so-when-they-matter-to-you))"),
    EventKind("restart", schema.shorthand(schema.BrokerEvent, "broker"), _broker,
              lambda run, a, now: run.restart(a["broker"], now),
              "`restart: B`", "the broker starts again and rejoins"),
    EventKind("shutdown", schema.shorthand(schema.BrokerEvent, "broker"), _broker,
              lambda run, a, now: run.shutdown(a["broker"], now),
              "`shutdown: B`", "controlled shutdown (leadership moved away first)"),
    EventKind("pause", schema.Pause, _pause, lambda run, a, now: run.pause(a["broker"], now, int(a["duration_ms"])),
              "`pause: {broker, duration_ms}`", "a stop-the-world stall (GC): it processes and answers nothing "
                                                "meanwhile"),
    EventKind("isolate", schema.Isolate, _isolate,
              lambda run, a, now: run.isolate(a["brokers"], a["from"], now, a.get("duration_ms")),
              "`isolate: {brokers, from, duration_ms}`",
              "network partition between two groups of brokers (`from` defaults to every other broker, may be "
              "`controller`); without `duration_ms` it lasts until `heal: {}`, which ends all"),
    EventKind("heal", schema.Empty | None, _empty, lambda run, a, now: run.heal(now),
              "`heal: {}`", "ends every network partition"),
    EventKind("fail_log_dir", schema.FailLogDir, _fail_log_dir,
              lambda run, a, now: run.fail_log_dir(a["broker"], a["log_dir"], now),
              "`fail_log_dir: {broker, log_dir}`", "a disk dies: replicas in it go offline (KIP-112)"),
    EventKind("controller_failover", schema.Empty | None, _empty, lambda run, a, now: run.controller_failover(now),
              "`controller_failover: {}`",
              "the active controller loses its session; a new one is elected with a higher epoch"),
    EventKind("create_topic", schema.NewTopic, _create_topic, lambda run, a, now: run.create_topic(a["topic"], now),
              "`create_topic: {...}`", "as the topic tool does (it takes a `topics` entry)"),
    EventKind("delete_topic", schema.shorthand(schema.DeleteTopic, "topic"), _delete_topic,
              lambda run, a, now: run.delete_topic(a["topic"], now),
              "`delete_topic: NAME`", "as the topic tool does (`delete.topic.enable`)"),
    EventKind("reassign", schema.Reassign, _reassign,
              lambda run, a, now: run.reassign(a["plan"], a.get("throttle"), a.get("log_dirs_throttle"),
                                               a.get("via", "api"), now),
              "`reassign: {plan, throttle, log_dirs_throttle, via}`",
              "`plan` is Kafka's reassignment JSON (inline or a path relative to the scenario), `log_dirs` "
              "included; throttles in B/s; `via: api` (default, AlterPartitionReassignments) or `zookeeper`"),
    EventKind("elect_leaders", schema.ElectLeaders, _elect_leaders, _elect,
              "`elect_leaders: {election_type, partitions}`",
              "`preferred` or `unclean`, as kafka-leader-election does (`partitions`: `[{topic, partition}]`, "
              "default all)"),
    EventKind("set_config", schema.SetConfig, _set_config, lambda run, a, now: run.set_config(a, now),
              "`set_config: {entity, name, config}`",
              "dynamic config change, as kafka-configs does: `entity` `brokers` (`name` a broker id or `default`) "
              "or `topics`; a null value deletes the override"),
):
    register(_kind)
