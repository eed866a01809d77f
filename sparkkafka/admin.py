"""The Admin API's calls against the emulated cluster (what the operator tools and timeline events ask):
AlterPartitionReassignments (KIP-455), ElectLeaders (KIP-460), AlterReplicaLogDirs (KIP-113) and
IncrementalAlterConfigs for the reassignment throttles (KIP-73), over the driver's state of a run
(run_dir.DriverState). The controller acts at once (ZooKeeper writes, requests queued); requests to
brokers wait in the driver's outbox for the next round. Nothing here needs Spark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from .controller.events import ApiPartitionReassignment, ReplicaLeaderElection
from .errors import ReassignError
from .protocol.frames import ALTER_LOG_DIRS, conform
from .run_access import ALTER_LOG_DIRS as ALTER_LOG_DIRS_KIND
from .run_access import DriverState

TP = tuple[str, int]

NOT_CONTROLLER = ("NOT_CONTROLLER", "This is not the correct controller for this cluster.")


def _now(d: DriverState, now: int | None) -> int:
    d.outside_change()  # every admin call changes what the next round does: no idle jump over it
    return d.round * d.round_ms if now is None else now


def _admin_key(d: DriverState) -> str:
    d.tool_state["admin_seq"] = d.tool_state.get("admin_seq", 0) + 1
    return f"admin-{d.tool_state['admin_seq']}"


def reassign(d: DriverState, plan: dict, throttle: int | None = None, log_dirs_throttle: int | None = None,
             via: str = "api", now: int | None = None) -> dict:
    """AlterPartitionReassignments for a Kafka reassignment plan (validated by the caller), the
    throttles `kafka-reassign-partitions --execute` sets, and AlterReplicaLogDirs for its explicit
    log dirs. Returns {(topic, partition): None or (error, message)} from the controller;
    via="zookeeper" writes /admin/reassign_partitions instead (results then {})."""
    now = _now(d, now)
    c = d.control
    if throttle is not None and throttle >= 0:
        # calculateProposedMoveMap: every planned partition (moving or not) and every ongoing move
        moves = {(e["topic"], int(e["partition"])): (c.zk.topic_assignment(e["topic"])[int(e["partition"])],
                                                     list(e["replicas"]))
                 for e in plan["partitions"]
                 if e["topic"] in c.zk.topics() and int(e["partition"]) in c.zk.topic_assignment(e["topic"])}
        ongoing = {tp: (reps, adding) for tp, (reps, adding, _) in c.reassignments().items()}
        leader, follower = throttle_configs(moves, ongoing)
        for b in throttled_brokers(moves, ongoing):
            c.set_config({"entity": "brokers", "name": b, "config": {
                "leader.replication.throttled.rate": int(throttle),
                "follower.replication.throttled.rate": int(throttle)}}, now)
        for t in sorted(set(leader) | set(follower)):
            c.set_config({"entity": "topics", "name": t, "config": {
                "leader.replication.throttled.replicas": leader.get(t, ""),
                "follower.replication.throttled.replicas": follower.get(t, "")}}, now)
    dir_moves = [(e["topic"], int(e["partition"]), int(b), ld) for e in plan["partitions"]
                 for b, ld in zip(e["replicas"], e.get("log_dirs") or ["any"] * len(e["replicas"]), strict=True)
                 if ld != "any"]
    if log_dirs_throttle is not None and log_dirs_throttle >= 0 and dir_moves:
        for b in sorted({m[2] for m in dir_moves}):
            c.set_config({"entity": "brokers", "name": b, "config": {
                "replica.alter.log.dirs.io.max.bytes.per.second": int(log_dirs_throttle)}}, now)
    if via == "zookeeper":
        c.reassign_via_zookeeper({"version": 1, "partitions": [
            {"topic": e["topic"], "partition": int(e["partition"]), "replicas": list(e["replicas"])}
            for e in plan["partitions"]]}, now)
        results: dict = {}
    else:
        targets = {(e["topic"], int(e["partition"])): list(e["replicas"]) for e in plan["partitions"]}
        results = c.admin(ApiPartitionReassignment(_admin_key(d), targets), now)
        if results is None:
            results = dict.fromkeys(targets, NOT_CONTROLLER)
    if dir_moves:
        alter_replica_log_dirs(d, pd.DataFrame(
            [(b, t, p, ld) for t, p, b, ld in dir_moves], columns=["broker", "topic", "partition", "log_dir"]))
        d.tool_state.setdefault("dir_moves", {}).update({(t, p, b): ld for t, p, b, ld in dir_moves})
    lines = [f"Reassignment requested for {t}-{p}: " + ("accepted" if r is None else f"{r[0]}: {r[1]}")
             for (t, p), r in sorted(results.items())]
    d.driver_rows["state_change_log"] += [
        {"time_ms": now, "broker": -1, "controller_epoch": -1, "topic": None, "partition": None,
         "message": "[Admin] " + x} for x in lines]
    return results


def cancel_reassignments(d: DriverState, tps: list[tuple[str, int]], now: int | None = None) -> dict:
    """AlterPartitionReassignments with a null target for each partition (cancellation)."""
    results = d.control.admin(ApiPartitionReassignment(_admin_key(d), dict.fromkeys(tps)), _now(d, now))
    return results if results is not None else {}


def elect_leaders(d: DriverState, election_type: str, partitions: list[tuple[str, int]] | None = None,
                  now: int | None = None) -> dict:
    """ElectLeaders (KIP-460) through the controller: {(topic, partition): None or (error, message)}."""
    results = d.control.admin(ReplicaLeaderElection(_admin_key(d), election_type, partitions), _now(d, now))
    if results is None:
        return dict.fromkeys(partitions or [], NOT_CONTROLLER)
    return results


def clear_throttles(d: DriverState, brokers: list[int], topics: list[str], now: int | None = None) -> None:
    """What --verify / --cancel do once nothing is moving: remove the five throttle settings."""
    now = _now(d, now)
    for b in brokers:
        d.control.set_config({"entity": "brokers", "name": b, "config": {
            "leader.replication.throttled.rate": None, "follower.replication.throttled.rate": None,
            "replica.alter.log.dirs.io.max.bytes.per.second": None}}, now)
    for t in topics:
        d.control.set_config({"entity": "topics", "name": t, "config": {
            "leader.replication.throttled.replicas": None,
            "follower.replication.throttled.replicas": None}}, now)


def alter_replica_log_dirs(d: DriverState, entries: pd.DataFrame) -> None:
    """AlterReplicaLogDirs requests (broker, topic, partition, log_dir) sent to the brokers now (KIP-113)."""
    d.send(ALTER_LOG_DIRS_KIND, conform(entries, ALTER_LOG_DIRS))


# --- the throttles --execute --throttle sets (ReassignPartitionsCommand) ---


def _move_map(
    moves: Mapping[TP, tuple[Sequence[int], Sequence[int]]],
    ongoing: Mapping[TP, tuple[Sequence[int], Sequence[int]]] | None,
) -> dict[TP, tuple[list[int], list[int]]]:
    """``calculateProposedMoveMap``: tp -> (sources, destinations not among the sources)."""
    out: dict[TP, tuple[list[int], list[int]]] = {}
    for tp, (replicas, adding) in (ongoing or {}).items():
        sources = [r for r in replicas if r not in set(adding)]
        out[tp] = (sources, list(adding))
    for tp, (current, target) in moves.items():
        sources = out[tp][0] if tp in out else list(current)
        if not sources:
            name = f"{tp[0]}-{tp[1]}"
            raise ReassignError("moves", name, f"Trying to reassign a topic partition {name} with 0 replicas")
        out[tp] = (sources, [r for r in target if r not in set(sources)])
    return out


def throttle_configs(
    moves: Mapping[TP, tuple[Sequence[int], Sequence[int]]],
    ongoing: Mapping[TP, tuple[Sequence[int], Sequence[int]]] | None = None,
) -> tuple[dict[str, str], dict[str, str]]:
    """Topic throttle lists ``--execute --throttle`` sets: (leader.replication.throttled.replicas,
    follower.replication.throttled.replicas), each keyed by topic.

    ``moves`` maps a planned partition to (current replicas, target replicas). ``ongoing`` (for
    ``--additional``) maps every partition being reassigned in the cluster to (replicas, adding replicas):
    Kafka throttles those too, with sources = replicas minus adding, and uses those sources for planned
    partitions already moving. Leader list: ``partition:broker`` for every source; follower list: for every
    destination that is not a source (possibly empty, which Kafka still sets). Entries sorted as strings (a
    TreeSet), so ``10:1`` < ``2:1``.
    """
    leader: dict[str, set[str]] = {}
    follower: dict[str, set[str]] = {}
    for (topic, partition), (sources, destinations) in _move_map(moves, ongoing).items():
        leader.setdefault(topic, set()).update(f"{partition}:{b}" for b in sources)
        follower.setdefault(topic, set()).update(f"{partition}:{b}" for b in destinations)
    return (
        {t: ",".join(sorted(v)) for t, v in sorted(leader.items())},
        {t: ",".join(sorted(v)) for t, v in sorted(follower.items())},
    )


def throttled_brokers(
    moves: Mapping[TP, tuple[Sequence[int], Sequence[int]]],
    ongoing: Mapping[TP, tuple[Sequence[int], Sequence[int]]] | None = None,
) -> list[int]:
    """Brokers whose leader/follower throttled rates ``--throttle`` sets (``calculateReassigningBrokers``)."""
    brokers: set[int] = set()
    for sources, destinations in _move_map(moves, ongoing).values():
        brokers.update(sources)
        brokers.update(destinations)
    return sorted(brokers)
