"""What-if questions over a cluster snapshot: predicted from the snapshot alone, then
confirmed by an emulated run.

A SNAPSHOT is a directory holding the files ``sparkkafka import`` reads, under fixed names:
``topics-describe.txt`` (required), ``log-dirs.txt``, ``racks.txt``, ``server.properties`` and
``rates.csv`` (each optional; docs/whatif.md).

* Losing brokers, a rack or one log dir: the controller takes the lost replicas out of every ISR and
  elects, for each partition whose leader is lost, the first live ISR member in replica order
  (``PartitionLeaderElectionAlgorithms.offlinePartitionLeaderElection``, clean); with none the partition
  goes offline (leader none, the ISR keeps its last member, KIP-966's note on ZooKeeper mode).
  UnderReplicatedPartitions and UnderMinIsrPartitionCount are leaders' gauges: offline partitions count in
  neither (ReplicaManager, Partition.isUnderReplicated / isUnderMinIsr).
* Unclean election (``--unclean``): for each offline partition, each replica as candidate leader and the
  acknowledged records its log lacks (they are lost when it becomes leader: the others truncate to it).
* Balancing dirs (``--balance-dirs``): KIP-113 moves within brokers that even out the bytes per log dir,
  as a ``kafka-reassign-partitions --reassignment-json-file`` plan with ``log_dirs``.

The prediction functions are pure (pandas, no Spark); ``emulate_loss`` runs the scenario.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .errors import ScenarioError
from .protocol.config import BROKER_DEFAULTS, ClusterSettings, TopicSettings, broker_config
from .scenario.model import Scenario

SNAPSHOT_FILES = {"topics_describe": "topics-describe.txt", "log_dirs": "log-dirs.txt", "racks": "racks.txt",
                  "configs": "server.properties", "rates": "rates.csv"}
TP = ["topic", "partition"]


# ---------------------------------------------------------------------------------------------- snapshot
def load_snapshot(directory: str | Path, *, record_bytes: int | None = None, duration_ms: int = 60000,
                  rates: bool = True) -> dict:
    """The scenario mapping of a SNAPSHOT directory (``import_cluster`` over its files)."""
    from .scenario.kafka_import import import_cluster

    d = Path(directory)
    if not (d / SNAPSHOT_FILES["topics_describe"]).is_file():
        raise ScenarioError("SNAPSHOT", str(directory), f"is not a snapshot directory (no {SNAPSHOT_FILES['topics_describe']})")

    def opt(key: str) -> Path | None:
        p = d / SNAPSHOT_FILES[key]
        return p if p.is_file() else None

    cfg = opt("configs")
    return import_cluster(d / SNAPSHOT_FILES["topics_describe"], opt("log_dirs"), racks=opt("racks"),
                          configs=[cfg] if cfg else [], rates=opt("rates") if rates else None,
                          name=d.name or "snapshot", record_bytes=record_bytes, duration_ms=duration_ms)


def partitions_frame(sc: Scenario) -> pd.DataFrame:
    """One row per partition at the snapshot: replicas, isr, leader, min.insync.replicas, replica dirs/bytes,
    the replicas with a future log (``moving``, its dir in ``future_dirs``: KIP-113) and a move in flight's
    adding/removing (KIP-455)."""
    broker = broker_config(sc.config)
    rows = []
    for t in sc.topics:
        min_isr = TopicSettings.of(broker, t.config).min_insync_replicas
        for p, replicas in sorted((t.assignment or {}).items()):
            st = (t.state or {}).get(p)
            rows.append({"topic": t.name, "partition": int(p), "replicas": list(replicas),
                         "isr": list(st.isr) if st else list(replicas),
                         "leader": int(st.leader) if st else int(replicas[0]), "min_isr": min_isr,
                         "dirs": {b: lg.log_dir for b, lg in st.logs.items()} if st else {},
                         "bytes": {b: lg.size for b, lg in st.logs.items()} if st else {},
                         "moving": sorted(b for b, lg in st.logs.items() if lg.future_dir) if st else [],
                         "future_dirs": {b: lg.future_dir for b, lg in st.logs.items() if lg.future_dir} if st else {},
                         "adding": list(st.adding) if st else [], "removing": list(st.removing) if st else []})
    return pd.DataFrame(rows, columns=["topic", "partition", "replicas", "isr", "leader", "min_isr", "dirs",
                                       "bytes", "moving", "future_dirs", "adding", "removing"])


# ---------------------------------------------------------------------------------------------- losses
@dataclass(frozen=True)
class Loss:
    """What is lost: whole brokers (a crash), or one dir of one broker (KIP-112 log dir failure)."""

    brokers: tuple[int, ...] = ()
    log_dir: tuple[int, str] | None = None
    rack: str | None = None

    def label(self) -> str:
        if self.log_dir:
            return f"log dir {self.log_dir[1]} of broker {self.log_dir[0]}"
        return (f"rack {self.rack}: " if self.rack else "") + "broker(s) " + ",".join(map(str, self.brokers))

    def events(self, at_ms: int) -> list[dict]:
        if self.log_dir:
            return [{"at": at_ms, "fail_log_dir": {"broker": self.log_dir[0], "log_dir": self.log_dir[1]}}]
        return [{"at": at_ms, "crash": b} for b in self.brokers]

    def recovery_events(self) -> list[dict]:
        """Bringing the lost brokers back. A failed log dir has none: it stays offline until the disk is
        replaced, which the emulator does not model (a restart keeps it failed, as Kafka with the bad disk)."""
        return [] if self.log_dir else [{"restart": b} for b in self.brokers]


def resolve_loss(sc: Scenario, broker: Iterable[int] = (), rack: str | None = None,
                 log_dir: str | None = None) -> Loss:
    """--lose-broker B (repeatable) | --lose-rack R | --lose-dir B:DIR against the snapshot; ScenarioError
    naming the flag and value for an unknown broker, rack or dir."""
    broker = list(broker)
    if sum(bool(x) for x in (broker, rack, log_dir)) != 1:
        raise ScenarioError("--lose-broker/--lose-rack/--lose-dir", None, "give exactly one of them")
    known = set(sc.brokers)
    if broker:
        for b in broker:
            if b not in known:
                raise ScenarioError("--lose-broker", b, f"not a broker of the snapshot {sorted(known)}")
        return Loss(tuple(sorted(set(broker))))
    if rack is not None:
        racks = sc.racks or {}
        if rack not in set(racks.values()):
            raise ScenarioError("--lose-rack", rack, f"not a rack of the snapshot {sorted(set(racks.values()))}"
                                if racks else "the snapshot has no racks.txt")
        return Loss(tuple(sorted(b for b, r in racks.items() if r == rack)), rack=rack)
    b_text, sep, d = str(log_dir).partition(":")
    if not sep or not b_text.strip().isdigit():
        raise ScenarioError("--lose-dir", log_dir, "expected BROKER:DIR")
    b = int(b_text)
    if b not in known:
        raise ScenarioError("--lose-dir", log_dir, f"broker {b} is not a broker of the snapshot {sorted(known)}")
    if d not in sc.log_dirs:
        raise ScenarioError("--lose-dir", log_dir, f"dir {d!r} is not a log dir of the snapshot {list(sc.log_dirs)}")
    return Loss(log_dir=(b, d))


def lost_replicas(parts: pd.DataFrame, loss: Loss) -> list[set[int]]:
    """Per partition (row of ``parts``), the brokers whose replica is lost."""
    if loss.log_dir:
        b, d = loss.log_dir
        return [{b} if dirs.get(b) == d else set() for dirs in parts["dirs"]]
    gone = set(loss.brokers)
    return [gone & set(r) for r in parts["replicas"]]


def predict_loss(parts: pd.DataFrame, loss: Loss, catch_up: bool = True) -> pd.DataFrame:
    """Per partition, after the controller has acted: leader (-1 = offline), ISR (its live members), and
    the flags offline, under_min_isr, under_replicated (leaders' gauges: offline partitions in neither),
    leader_moved. ``catch_up``: a surviving replica outside the snapshot's ISR is fetching and rejoins the
    ISR once it has caught up (Partition.maybeExpandIsr), as it does within seconds in the emulated run; the
    election itself only picks from the snapshot's ISR. With it, a move in flight whose target replicas all
    survive completes (replicas: the target), as the controller resumes it in the run."""
    rows = []
    for (_, p), gone in zip(parts.iterrows(), lost_replicas(parts, loss), strict=True):
        in_sync = [b for b in p["isr"] if b not in gone]
        leader = p["leader"]
        if leader in gone or leader < 0:
            leader = next((b for b in p["replicas"] if b in in_sync), -1)  # offlinePartitionLeaderElection
        replicas = list(p["replicas"])
        isr = [b for b in replicas if b not in gone] if catch_up and leader >= 0 else in_sync
        target = [b for b in replicas if b not in p["removing"]]
        if catch_up and leader >= 0 and p["adding"] and not set(target) & gone:
            # a move in flight whose target replicas all live: they join the ISR and the controller completes
            # it (KafkaController.isReassignmentComplete), dropping the removing replicas; a removed leader
            # gives way to the first target replica in the ISR (reassignPartitionLeaderElection)
            replicas, isr = target, target
            leader = leader if leader in target else target[0]
        offline = leader < 0
        rows.append({"topic": p["topic"], "partition": p["partition"], "replicas": replicas,
                     "leader_before": p["leader"], "leader": leader, "isr": isr, "offline": offline,
                     "under_min_isr": not offline and len(isr) < p["min_isr"],
                     "under_replicated": not offline and len(isr) < len(replicas),
                     "leader_moved": leader != p["leader"]})
    return pd.DataFrame(rows, columns=["topic", "partition", "replicas", "leader_before", "leader", "isr",
                                       "offline", "under_min_isr", "under_replicated", "leader_moved"])


COUNTS = ("offline", "under_min_isr", "under_replicated", "leader_moved")


def counts(frame: pd.DataFrame) -> dict[str, int]:
    return {k: int(frame[k].sum()) for k in COUNTS}


def rates_at_risk(sc: Scenario, predicted: pd.DataFrame) -> pd.DataFrame:
    """Per acks setting, the produce rate (records/s) into partitions that go offline (every write fails)
    and into under-min-ISR partitions (acks=all writes fail with NOT_ENOUGH_REPLICAS; acks=1/0 are taken
    by one replica only: at risk of a second failure)."""
    pc = {t.name: t.partitions for t in sc.topics}
    rows = []
    for ev in sc.timeline:
        if ev.type != "produce":
            continue
        a = ev.args
        acks = {-1: "all"}.get(a.get("acks", -1), str(a.get("acks", -1)))
        per = float(a.get("rate_per_sec", 0)) / max(pc.get(a["topic"], 1), 1)
        mine = predicted[predicted["topic"] == a["topic"]]
        if a.get("partition", "all") != "all":
            mine = mine[mine["partition"] == int(a["partition"])]
        rows.append({"acks": acks, "offline_records_per_sec": per * int(mine["offline"].sum()),
                     "under_min_isr_records_per_sec": per * int(mine["under_min_isr"].sum())})
    out = pd.DataFrame(rows, columns=["acks", "offline_records_per_sec", "under_min_isr_records_per_sec"])
    return out.groupby("acks", as_index=False).sum()


# ---------------------------------------------------------------------------------------------- emulation
@dataclass
class Emulated:
    """What an emulated run showed: the per-partition state when the controller had acted, the metrics
    row then, the checker summary, and the recovery time (None: not reached within the bound)."""

    state: pd.DataFrame
    metrics: dict[str, int]
    summary: dict
    recovery_ms: int | None
    recovery_bound_ms: int
    run_dir: str
    wall_s: dict = field(default_factory=dict)  # Cluster.wall_s of the run: setup, loop, end
    end_s: dict = field(default_factory=dict)  # Cluster.end_s: the end by part


def _state_frame(parts_latest: pd.DataFrame, before: pd.DataFrame, live: set[int]) -> pd.DataFrame:
    m = before[[*TP, "leader"]].rename(columns={"leader": "leader_before"}).merge(parts_latest, on=TP)
    isr_len = m["isr"].map(len)
    rep_len = m["replicas"].map(len)
    offline = ~m["leader"].isin(sorted(live)) | (m["leader"] < 0)
    return pd.DataFrame({"topic": m["topic"], "partition": m["partition"].astype(int),
                         "leader": m["leader"].where(~offline, -1).astype(int),
                         "isr": [list(map(int, x)) for x in m["isr"]], "offline": offline,
                         "under_min_isr": ~offline & (isr_len < m["min_isr"]),
                         "under_replicated": ~offline & (isr_len < rep_len),
                         "leader_moved": m["leader"].where(~offline, -1) != m["leader_before"]})


def loss_acted_ms(sc: Scenario, loss: Loss, at_ms: int, settle_ms: int | None = None) -> int:
    """When emulate_loss reads the state: the loss at ``at_ms``, the controller noticing it (a broker's
    zookeeper.session.timeout.ms, the version's historic default included, as the controller reads it:
    ClusterSettings; a failed dir at once, KIP-112), then ``settle_ms`` (default 2000)."""
    session = ClusterSettings.of(broker_config(sc.config), sc.emulator_settings).zookeeper_session_timeout_ms
    return at_ms + (0 if loss.log_dir else session) + (2000 if settle_ms is None else settle_ms)


def _metrics(tables_dir: str) -> pd.DataFrame:
    """The metrics table in round order, read through delta-rs: no SparkSession needed (the local engine's
    run has none)."""
    from .storage import tables as T

    return T.read_table(tables_dir, "metrics").to_pandas().sort_values("round", kind="stable").reset_index(drop=True)


def emulate_loss(mapping: dict, loss: Loss, *, spark: Any = None, out: str, at_ms: int = 1000,
                 settle_ms: int | None = None, recover_ms: int = 0) -> Emulated:
    """Run the snapshot, lose at ``at_ms``, run until the controller has acted (the ZooKeeper session
    timeout plus ``settle_ms``), read partition_state and metrics; then (``recover_ms`` > 0) restart and
    run until UnderReplicatedPartitions is 0 again, at most ``recover_ms``."""
    from .cluster import Cluster
    from .scenario.checker import latest_of
    from .scenario.loader import parse_scenario
    from .storage import tables as T

    mapping = json.loads(json.dumps(mapping))
    mapping["timeline"] = mapping.get("timeline", []) + loss.events(at_ms)
    sc = parse_scenario(mapping, name=mapping.get("name", "snapshot"))
    acted = loss_acted_ms(sc, loss, at_ms, settle_ms)
    mapping["run"] = {"until_ms": acted + recover_ms}
    for e in mapping["timeline"]:
        if "produce" in e:
            e["produce"]["duration_ms"] = acted + recover_ms
    c = Cluster.from_scenario(mapping, spark=spark, out=out, overwrite=True)
    parts = partitions_frame(c.scenario)
    c.run(until_ms=acted)
    ps = latest_of(T.read_table(c.tables_dir, "partition_state").to_pandas())
    ps = ps.merge(parts[[*TP, "min_isr"]], on=TP)
    state = _state_frame(ps, parts, set(c.control.live()))
    met = _metrics(c.tables_dir)
    last = met.iloc[-1]
    metrics = {k: int(last[k]) for k in ("offline", "under_min_isr", "under_replicated")}
    summary = c.summary()
    recovery = None
    if recover_ms > 0 and not loss.log_dir:
        start = c.round * c.round_ms
        for e in loss.recovery_events():
            c.apply(e)
        step_rounds = max(1, 1000 // c.round_ms)
        while c.round * c.round_ms - start < recover_ms:
            c.step(step_rounds, save=False)
            m = _metrics(c.tables_dir)
            done = m[(m["time_ms"] > start) & (m["under_replicated"] == 0) & (m["offline"] == 0)]
            if len(done):
                recovery = int(done["time_ms"].iloc[0]) - start
                break
        c.run(until_ms=c.round * c.round_ms)
    else:
        recover_ms = 0
    return Emulated(state, metrics, summary, recovery, recover_ms, c.out, dict(c.wall_s), dict(c.end_s))


def compare(predicted: pd.DataFrame, emulated: pd.DataFrame | None) -> pd.DataFrame:
    """Predicted vs emulated per partition that changes (any flag or the leader), side by side."""
    p = predicted[predicted[list(COUNTS)].any(axis=1)]
    cols = [*TP, "leader_before", "leader", "isr", "offline", "under_min_isr", "under_replicated"]
    out = p[cols].rename(columns={"leader": "leader_predicted", "isr": "isr_predicted"})
    if emulated is not None:
        e = emulated.rename(columns={"leader": "leader_emulated", "isr": "isr_emulated"})
        changed = e[e[list(COUNTS)].any(axis=1)][TP]
        keys = pd.concat([p[TP], changed]).drop_duplicates()
        out = keys.merge(predicted[cols].rename(columns={"leader": "leader_predicted", "isr": "isr_predicted"}),
                         on=TP).merge(e[[*TP, "leader_emulated", "isr_emulated", "offline", "under_min_isr",
                                         "under_replicated"]], on=TP, suffixes=("", "_emulated"))
        out["agree"] = ((out["leader_predicted"] == out["leader_emulated"])
                        & (out["offline"] == out["offline_emulated"])
                        & (out["under_min_isr"] == out["under_min_isr_emulated"])
                        & (out["under_replicated"] == out["under_replicated_emulated"]))
    return out.sort_values(TP, kind="stable").reset_index(drop=True)


# ---------------------------------------------------------------------------------------------- unclean
def unclean_candidates(produce_results: pd.DataFrame, log: pd.DataFrame, offline: pd.DataFrame,
                       live: Iterable[int]) -> pd.DataFrame:
    """For each offline partition (rows topic, partition, replicas) and each replica as the candidate of an
    unclean election: the acked records absent from its log (``lost_if_elected``, what the election loses:
    the other replicas truncate to the new leader's log), whether it is live (only a live replica can be
    elected), and ``best``: the live candidate losing the fewest (ties: replica order)."""
    live = set(live)
    acked = produce_results[produce_results["acked"]][[*TP, "record_id"]].drop_duplicates()
    held = log[~log["is_future"]][[*TP, "broker", "record_id"]].drop_duplicates()
    rows = []
    for _, p in offline.iterrows():
        a = acked[(acked["topic"] == p["topic"]) & (acked["partition"] == p["partition"])]
        h = held[(held["topic"] == p["topic"]) & (held["partition"] == p["partition"])]
        for b in p["replicas"]:
            has = set(h.loc[h["broker"] == b, "record_id"])
            rows.append({"topic": p["topic"], "partition": int(p["partition"]), "candidate": int(b),
                         "live": b in live, "acked": len(a),
                         "lost_if_elected": int((~a["record_id"].isin(has)).sum())})
    out = pd.DataFrame(rows, columns=[*TP, "candidate", "live", "acked", "lost_if_elected"])
    out["live"] = out["live"].astype(bool)  # typed even when empty: an empty object mask selects columns
    out["best"] = False
    for _, g in out[out["live"]].groupby(TP, sort=False):
        out.loc[g["lost_if_elected"].idxmin(), "best"] = True  # idxmin: the first minimum (replica order)
    return out


# ---------------------------------------------------------------------------------------------- balance dirs
def balance_dirs(parts: pd.DataFrame, log_dirs: Iterable[str], max_moves: int | None = None) -> list[dict]:
    """A greedy KIP-113 plan per broker: repeatedly move the replica that best narrows the gap between the
    fullest and the emptiest dir of that broker (no move when it would not narrow it; a replica whose move
    is already in flight, a future log, is not moved again). It plans for the dirs once what is in flight has
    completed (``_placement``: a future log swapped in by ReplicaAlterLogDirsThread, lagging and adding
    replicas caught up, removing ones deleted), as the cluster will be when the plan runs. Returns the moves
    (topic, partition, broker, from_dir, to_dir, bytes)."""
    dirs = list(log_dirs)
    where: dict[int, dict[tuple[str, int], tuple[str, int]]] = {}
    for (t, n, b), place in _placement(parts, settled=True).items():
        where.setdefault(b, {})[(t, n)] = place
    fixed = {(p["topic"], int(p["partition"]), int(b)) for _, p in parts.iterrows() for b in p["moving"]}
    moves = []
    for b in sorted(where):
        used = {d: 0 for d in dirs}
        for d, n in where[b].values():
            used[d] = used.get(d, 0) + n
        while max_moves is None or len(moves) < max_moves:
            hi = max(used, key=lambda d: (used[d], d))
            lo = min(used, key=lambda d: (used[d], d))
            gap = used[hi] - used[lo]
            best = None
            for tp, (d, n) in sorted(where[b].items()):
                if d == hi and 0 < n < gap and (*tp, b) not in fixed:  # moving n leaves the pair |gap - 2n| < gap apart
                    if best is None or abs(gap - 2 * n) < abs(gap - 2 * best[1]):
                        best = (tp, n)
            if best is None:
                break
            tp, n = best
            where[b][tp] = (lo, n)
            used[hi] -= n
            used[lo] += n
            moves.append({"topic": tp[0], "partition": tp[1], "broker": b, "from_dir": hi, "to_dir": lo, "bytes": n})
    return moves


def _placement(parts: pd.DataFrame, settled: bool) -> dict[tuple[str, int, int], tuple[str, int]]:
    """(topic, partition, broker) -> (dir, bytes) of each replica's log: where it is now, or (``settled``) once
    what is in flight has completed: a KIP-113 move's log in its future dir, a replica outside the ISR (an
    adding one included) caught up to the leader's size, a KIP-455 move's removing replicas deleted."""
    out = {}
    for _, p in parts.iterrows():
        sizes = p["bytes"]
        for b, d in p["dirs"].items():
            if not settled:
                out[(p["topic"], int(p["partition"]), int(b))] = (d, int(sizes.get(b, 0)))
            elif b not in p["removing"]:
                n = sizes.get(b, 0) if b in p["isr"] or p["leader"] not in sizes else sizes[p["leader"]]
                out[(p["topic"], int(p["partition"]), int(b))] = (p["future_dirs"].get(b, d), int(n))
    return out


def dir_usage(parts: pd.DataFrame, moves: Iterable[Mapping] = (), settled: bool = False) -> pd.DataFrame:
    """Bytes per (broker, dir) now, or (``settled``) once the moves in flight have completed, after applying
    ``moves``."""
    where = _placement(parts, settled)
    for m in moves:
        k = (m["topic"], m["partition"], m["broker"])
        where[k] = (m["to_dir"], where[k][1])
    rows = [{"broker": k[2], "dir": d, "bytes": n} for k, (d, n) in where.items()]
    return pd.DataFrame(rows).groupby(["broker", "dir"], as_index=False)["bytes"].sum()


def widest_gap(usage: pd.DataFrame) -> int:
    """The largest difference in bytes between the fullest and the emptiest dir of one broker."""
    g = usage.groupby("broker")["bytes"]
    return int((g.max() - g.min()).max()) if len(usage) else 0


def moves_frame(moves: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(moves, columns=["topic", "partition", "broker", "from_dir", "to_dir", "bytes"])


def plan_json(parts: pd.DataFrame, moves: Iterable[Mapping]) -> str:
    """The moves as kafka-reassign-partitions' --reassignment-json-file: replicas unchanged, ``log_dirs``
    naming the target dir of the moved replica and ``any`` for the others (ReassignPartitionsCommand)."""
    target: dict[tuple[str, int], dict[int, str]] = {}
    for m in moves:
        target.setdefault((m["topic"], m["partition"]), {})[m["broker"]] = m["to_dir"]
    reps = {(p["topic"], int(p["partition"])): list(p["replicas"]) for _, p in parts.iterrows()}
    entries = [{"topic": t, "partition": p, "replicas": reps[(t, p)],
                "log_dirs": [target[(t, p)].get(b, "any") for b in reps[(t, p)]]}
               for (t, p) in sorted(target)]
    return json.dumps({"version": 1, "partitions": entries})


def unclean_of_run(run_dir: str, state: pd.DataFrame | None = None) -> pd.DataFrame:
    """unclean_candidates over a run's tables, for the partitions offline in ``state`` (default: those whose
    latest partition_state leader is not a live broker)."""
    from .scenario.checker import latest_of
    from .storage import tables as T

    tables = Path(run_dir) / "tables"
    live = json.loads((Path(run_dir) / "run.json").read_text()).get("live_brokers", [])
    ps = latest_of(T.read_table(str(tables), "partition_state").to_pandas())
    if state is None:
        offline = ps[~ps["leader"].isin(live)][[*TP, "replicas"]]
    else:
        offline = state[state["offline"]][TP].merge(ps[[*TP, "replicas"]], on=TP)
    offline = offline.assign(replicas=[list(map(int, r)) for r in offline["replicas"]])
    return unclean_candidates(T.read_table(str(tables), "produce_results").to_pandas(),
                              T.read_table(str(tables), "log").to_pandas(), offline, live)


# ---------------------------------------------------------------------------------------------- output
def table_text(frame: pd.DataFrame, fmt: str) -> str:
    """A frame as ``text`` (aligned), ``markdown`` or ``csv``; list cells as comma-joined ids."""
    f = frame.copy()
    for c in f.columns:
        if f[c].map(lambda v: isinstance(v, list)).any():
            f[c] = f[c].map(lambda v: ",".join(map(str, v)) if isinstance(v, list) else v)
    if fmt == "csv":
        return f.to_csv(index=False)
    if fmt == "markdown":
        head = "| " + " | ".join(map(str, f.columns)) + " |"
        rule = "|" + "|".join("---" for _ in f.columns) + "|"
        body = ["| " + " | ".join(map(str, r)) + " |" for r in f.itertuples(index=False)]
        return "\n".join([head, rule, *body]) + "\n"
    return (f.to_string(index=False) if len(f) else "(none)") + "\n"


def loss_text(loss: Loss, predicted: pd.DataFrame, emulated: Emulated | None, at_risk: pd.DataFrame) -> str:
    """The text answer: counts predicted (and emulated: the metrics row once the controller has acted),
    acked writes at risk per acks, and the time to recover."""
    p = counts(predicted)
    lines = [f"Losing {loss.label()}:"]
    if emulated is None:
        lines += [f"  {k.replace('_', ' ')}: {v} partition(s)" for k, v in p.items()]
    else:
        e = counts(emulated.state)
        lines.append(f"  {'':22}predicted  emulated  emulated metrics")
        for k in COUNTS:
            lines.append(f"  {k.replace('_', ' ') + ':':22}{p[k]:>9}  {e[k]:>8}  {emulated.metrics.get(k, '-'):>16}")
    offline = predicted[predicted["offline"]]
    if len(offline):
        lines.append("  offline: " + ", ".join(f"{t}-{n}" for t, n in zip(offline["topic"], offline["partition"],
                                                                            strict=True)))
    for _, r in at_risk.iterrows():
        lines.append(f"  acks={r['acks']}: {r['offline_records_per_sec']:g} records/s into offline partitions (fail), "
                     f"{r['under_min_isr_records_per_sec']:g} records/s into under-min-ISR partitions"
                     + (" (fail: NOT_ENOUGH_REPLICAS)" if r["acks"] == "all" else " (one copy: at risk)"))
    if emulated is not None:
        s = emulated.summary
        lines.append(f"  emulated run: {s['acked']} acked, lost by acks {s['lost_acked_by_acks']}, "
                     f"{s['unavailable_acked']} acked records unavailable (offline partitions), "
                     f"{s['pending_acked']} pending (on the leader above its HW, not yet committed)")
        if loss.log_dir:
            lines.append("  time to recover: none measured (a failed log dir stays offline until its disk is "
                         "replaced, which the emulator does not model)")
        elif emulated.recovery_bound_ms:
            lines.append(f"  time to recover (brokers back, under-replicated 0): {emulated.recovery_ms} ms"
                         if emulated.recovery_ms is not None else
                         f"  time to recover: not reached within {emulated.recovery_bound_ms} ms")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------- reassign
FETCH_CYCLE_ROUNDS = 2  # a follower's fetch: request out one round, response back the next
# Rounds a move spends outside the copy: the controller's LeaderAndIsr reaches the new replica, its first
# fetch reaches the leader; at the end the leader's ISR expansion reaches the controller, which completes
# the reassignment (KIP-455: the target replicas, nothing adding or removing).
MOVE_OVERHEAD_ROUNDS = 4


def reassign_record_bytes(parts: pd.DataFrame, throttle: int, round_ms: int, max_rows: int = 200_000) -> int:
    """The record size the logs are expanded to for an emulated move: what the throttle moves in one fetch
    cycle (so a move advances every cycle, not in lumps of records the quota must save up for), unless the
    cluster's bytes would then take more than ``max_rows`` log rows (then bytes / max_rows)."""
    total = sum(sum(b.values()) for b in parts["bytes"])
    cycle = throttle * FETCH_CYCLE_ROUNDS * round_ms // 1000
    return int(min(max(cycle, -(-total // max_rows), 1), 2**31 - 1))


def ingest_rates(sc: Scenario) -> dict[tuple[str, int], float]:
    """Bytes/s the scenario's produce events write into each partition (``partition: all`` spread evenly)."""
    pc = {t.name: t.partitions for t in sc.topics}
    out: dict[tuple[str, int], float] = {}
    for ev in sc.timeline:
        if ev.type != "produce":
            continue
        a = ev.args
        n = max(pc.get(a["topic"], 1), 1)
        per_record = float(a.get("value_bytes", 0)) + len(str(a.get("key") or ""))
        rate = float(a.get("rate_per_sec", 0)) * per_record
        targets = range(n) if a.get("partition", "all") == "all" else [int(a["partition"])]
        for p in targets:
            out[(a["topic"], p)] = out.get((a["topic"], p), 0.0) + (rate / n if a.get("partition", "all") == "all"
                                                                    else rate)
    return out


def reassign_plan(sc: Scenario, text: str, field: str = "--reassign") -> list[dict]:
    """The entries of a kafka-reassign-partitions plan (JSON text) against the snapshot, validated as the tool
    validates them (reassign_partitions.parse_reassignment_json: version, fields, duplicates, unknown brokers
    and topics, log dirs); a ReassignError (a ScenarioError naming the field and value) otherwise."""
    from .tools.reassign_partitions import parse_reassignment_json

    dirs = {b: list(sc.log_dirs) for b in sc.brokers}
    return parse_reassignment_json(text, sc.brokers, dirs, topics=[t.name for t in sc.topics])


def reassign_moves(parts: pd.DataFrame, entries: Iterable[Mapping], ingest: Mapping[tuple[str, int], float]
                   ) -> pd.DataFrame:
    """Per planned partition: current replicas, target, the adding replicas (target less current), the leader
    they copy from, the bytes to copy (the leader's log in the snapshot), the ingest (bytes/s) and how many
    in-sync followers fetch it from the leader meanwhile."""
    by_tp = {(r["topic"], int(r["partition"])): r for _, r in parts.iterrows()}
    rows = []
    for e in entries:
        tp = (e["topic"], int(e["partition"]))
        p = by_tp[tp]
        target = [int(b) for b in e["replicas"]]
        adding = [b for b in target if b not in p["replicas"]]
        sizes = p["bytes"] or {}
        n = int(sizes.get(p["leader"], max(sizes.values(), default=0)))
        rows.append({"topic": tp[0], "partition": tp[1], "replicas": list(p["replicas"]), "target": target,
                     "adding": adding, "leader": int(p["leader"]), "bytes": n, "ingest_bps": float(ingest.get(tp, 0.0)),
                     "isr_followers": len([b for b in p["isr"] if b != p["leader"]])})
    return pd.DataFrame(rows, columns=["topic", "partition", "replicas", "target", "adding", "leader", "bytes",
                                       "ingest_bps", "isr_followers"])


def _fair_rates(streams: list[dict], capacity: dict) -> dict[int, float]:
    """Max-min fair rates (progressive filling) of the streams over the resources they use (capacity:
    resource -> bytes/s); streams is a list of {"id", "uses": [resources]}. The resource whose capacity left
    divided by its unfrozen streams is least (ties: by its name) gives each of them that share and freezes
    them, until every stream is frozen. A heap of the shares, each re-pushed when a stream of it freezes:
    O(uses x log resources), where rescanning every resource per step took minutes for 2,000 moves."""
    import heapq

    rate = {s["id"]: 0.0 for s in streams}
    left = dict(capacity)
    users: dict = {}
    for s in streams:
        for r in s["uses"]:
            users.setdefault(r, set()).add(s["id"])
    uses = {s["id"]: s["uses"] for s in streams}
    heap = [(left[r] / len(u), str(r), r) for r, u in users.items() if r in left]
    heapq.heapify(heap)
    while heap:
        share, _, r = heapq.heappop(heap)
        u = users.get(r)
        if not u or r not in left or share != left[r] / len(u):
            continue  # a stale entry: r's share changed since, or r is done
        inc = max(share, 0.0)
        touched = set()
        for i in sorted(u):
            rate[i] += inc
            for x in uses[i]:
                left[x] -= inc
                if x != r:
                    users[x].discard(i)
                    touched.add(x)
        del left[r], users[r]
        for x in touched:
            if users[x] and x in left:
                heapq.heappush(heap, (left[x] / len(users[x]), str(x), x))
    return rate


def predict_reassign(moves: pd.DataFrame, throttle: int, round_ms: int, *,
                     fetch_max_bytes: int = BROKER_DEFAULTS["replica.fetch.max.bytes"],
                     response_max_bytes: int = BROKER_DEFAULTS["replica.fetch.response.max.bytes"],
                     record_bytes: int = 1) -> pd.DataFrame:
    """The predicted time (ms after the plan is submitted) each planned partition completes, before any run.

    Each adding replica copies the leader's log and then keeps up with the ingest until it joins the ISR.
    The copies share, max-min fairly, what `kafka-reassign-partitions --throttle T` allows: each leader's
    quota (T, less what the in-sync followers of its throttled partitions fetch: that traffic counts against
    it and is never held back) and each new replica's broker's follower quota (T); and what one fetch can
    carry per fetch cycle (two rounds): replica.fetch.max.bytes per partition and
    replica.fetch.response.max.bytes per leader and follower, at least one record. The time is rounded up to
    the fetch cycle, plus MOVE_OVERHEAD_ROUNDS rounds of requests (LeaderAndIsr, ISR change, completion).
    A copy whose share does not exceed its ingest never completes (eta_ms None).
    Returns the moves with bytes_to_move, rate_bps (its share at the start) and eta_ms."""
    cycle_s = FETCH_CYCLE_ROUNDS * round_ms / 1000
    per_part = max(fetch_max_bytes, record_bytes) / cycle_s
    per_pair = max(response_max_bytes, record_bytes) / cycle_s
    streams, remaining, ingest = [], {}, {}
    capacity: dict = {}
    for i, m in moves.reset_index(drop=True).iterrows():
        for f in m["adding"]:
            sid = len(streams)
            uses = [("leader", m["leader"]), ("follower", f), ("partition", i, f), ("pair", m["leader"], f)]
            streams.append({"id": sid, "row": i, "uses": uses})
            remaining[sid] = float(m["bytes"])
            ingest[sid] = float(m["ingest_bps"])
            capacity[("leader", m["leader"])] = float(throttle)
            capacity[("follower", f)] = float(throttle)
            capacity[("partition", i, f)] = per_part
            capacity[("pair", m["leader"], f)] = per_pair
    for _, m in moves.iterrows():
        if m["adding"] and ("leader", m["leader"]) in capacity:
            capacity[("leader", m["leader"])] -= m["ingest_bps"] * m["isr_followers"]
    t, done, first_rate = 0.0, {}, {}
    live = list(streams)
    while live:
        rates = _fair_rates(live, capacity)
        for s in live:
            first_rate.setdefault(s["id"], rates[s["id"]])
        net = {s["id"]: rates[s["id"]] - ingest[s["id"]] for s in live}
        ends = {i: remaining[i] / v for i, v in net.items() if v > 0}
        if not ends:
            break
        step = min(ends.values())
        t += step
        for s in list(live):
            i = s["id"]
            remaining[i] -= net[i] * step
            if i in ends and ends[i] <= step * (1 + 1e-12):
                done[i] = t
                live.remove(s)
                # it joins the ISR: its fetches of the (still throttled) partition now count against the leader
                capacity[s["uses"][0]] -= ingest[i]
    cycle_ms = FETCH_CYCLE_ROUNDS * round_ms
    out = moves.reset_index(drop=True).copy()
    etas, rates = [], []
    for i in range(len(out)):
        mine = [s["id"] for s in streams if s["row"] == i]
        rates.append(round(min((first_rate.get(j, 0.0) for j in mine), default=0.0)))
        if any(j not in done for j in mine):
            etas.append(None)
            continue
        copy_ms = max((done[j] for j in mine), default=0.0) * 1000
        etas.append(int(-(-copy_ms // cycle_ms) * cycle_ms) + MOVE_OVERHEAD_ROUNDS * round_ms)
    out["bytes_to_move"] = [int(b) * len(a) for b, a in zip(out["bytes"], out["adding"], strict=True)]
    out["rate_bps"] = rates
    out["eta_ms"] = etas
    return out


def reassign_prediction(snapshot: str | Path, text: str, throttle: int, record_bytes: int | None = None
                        ) -> tuple[dict, list[dict], pd.DataFrame, int]:
    """`whatif SNAPSHOT --reassign PLAN --throttle T`'s prediction before the move: the snapshot's scenario
    mapping (its logs expanded to records of `record_bytes`, by default reassign_record_bytes), the plan's
    entries (validated as the tool does), predict_reassign's frame and the record size used."""
    from .scenario.loader import parse_scenario

    # the probe reads the replicas' sizes only: its logs as records of the largest size, so that a large
    # cluster's fit the import's bound on records
    probe = parse_scenario(load_snapshot(snapshot, rates=False, record_bytes=2**31 - 1), name="snapshot")
    rb = record_bytes or reassign_record_bytes(partitions_frame(probe), throttle, probe.round_ms)
    mapping = load_snapshot(snapshot, record_bytes=rb)
    sc = parse_scenario(mapping, name=mapping["name"])
    entries = reassign_plan(sc, text)
    moves = reassign_moves(partitions_frame(sc), entries, ingest_rates(sc))
    return mapping, entries, predict_reassign(moves, throttle, sc.round_ms, record_bytes=rb), rb


def reassign_times(partition_state: pd.DataFrame, targets: Mapping[tuple[str, int], list[int]], at_ms: int
                   ) -> dict[tuple[str, int], int | None]:
    """Per planned partition, when its reassignment completed in a run (ms after `at_ms`): the first
    partition_state row from `at_ms` on with the target replicas and nothing adding or removing; None if
    it had not."""
    ps = partition_state[partition_state["time_ms"] >= at_ms].sort_values(["time_ms", "version"], kind="stable")
    out: dict[tuple[str, int], int | None] = {}
    for tp, target in targets.items():
        h = ps[(ps["topic"] == tp[0]) & (ps["partition"] == tp[1])]
        ok = h[h["replicas"].map(lambda r, t=target: list(map(int, r)) == t) & (h["adding"].map(len) == 0)
               & (h["removing"].map(len) == 0)]
        out[tp] = int(ok["time_ms"].iloc[0]) - at_ms if len(ok) else None
    return out


@dataclass
class EmulatedMove:
    """An emulated reassignment: per planned partition its completion (ms after the plan, None: not within
    the run), the bytes each new replica's broker appended for the planned partitions, and the run."""

    done_ms: dict
    moved: dict  # broker -> bytes its new replicas appended
    until_ms: int
    run_dir: str
    wall_s: dict = field(default_factory=dict)  # Cluster.wall_s of the run: setup, loop, end
    end_s: dict = field(default_factory=dict)  # Cluster.end_s: the end by part

    @property
    def moved_bytes(self) -> int:
        return int(sum(self.moved.values()))


def emulate_reassign(mapping: dict, entries: list[dict], throttle: int, *, spark: Any = None, out: str,
                     at_ms: int = 1000, until_ms: int) -> EmulatedMove:
    """Run the snapshot and submit the plan at ``at_ms`` with ``--throttle`` (the scenario's reassign event:
    the throttles kafka-reassign-partitions sets, then AlterPartitionReassignments), until the controller has
    completed every planned move (checked every 2 s of emulated time) or ``until_ms``."""
    from .cluster import Cluster

    mapping = json.loads(json.dumps(mapping))
    plan = {"version": 1, "partitions": [{k: e[k] for k in ("topic", "partition", "replicas")} for e in entries]}
    mapping["timeline"] = mapping.get("timeline", []) + [{"at": at_ms, "reassign": {"plan": plan,
                                                                                     "throttle": int(throttle)}}]
    mapping["run"] = {"until_ms": until_ms}
    for e in mapping["timeline"]:
        if "produce" in e:
            e["produce"]["duration_ms"] = until_ms
    c = Cluster.from_scenario(mapping, spark=spark, out=out, overwrite=True)
    parts = partitions_frame(c.scenario)
    targets = {(e["topic"], int(e["partition"])): [int(b) for b in e["replicas"]] for e in entries}
    chunk = max(1, 2000 // c.round_ms)  # each step commits the tables: look every 2 s of emulated time
    while c.round * c.round_ms <= until_ms:
        c.step(min(chunk, until_ms // c.round_ms + 1 - c.round), save=False)
        if c.round * c.round_ms > at_ms and not set(targets) & set(c.control.reassignments()):
            break
    c.run(until_ms=c.round * c.round_ms - 1)  # the summary of the rounds run
    moved = reassign_of_run(c.out, parts, entries, at_ms, until_ms)
    moved.wall_s, moved.end_s = dict(c.wall_s), dict(c.end_s)
    return moved


def reassign_of_run(run_dir: str, parts: pd.DataFrame, entries: list[dict], at_ms: int, until_ms: int
                    ) -> EmulatedMove:
    """What a run shows of a plan submitted at ``at_ms`` (``parts``: the partitions before it)."""
    from .protocol.fetch import record_bytes
    from .storage import tables as T

    tables = str(Path(run_dir) / "tables")
    targets = {(e["topic"], int(e["partition"])): [int(b) for b in e["replicas"]] for e in entries}
    done = reassign_times(T.read_table(tables, "partition_state").to_pandas(), targets, at_ms)
    current = {(r["topic"], int(r["partition"])): set(r["replicas"]) for _, r in parts.iterrows()}
    new = pd.DataFrame([(t, p, b) for (t, p), tgt in targets.items() for b in tgt if b not in current[(t, p)]],
                       columns=["topic", "partition", "broker"])
    log = T.read_table(tables, "log").to_pandas()
    moved = log[~log["is_future"]].merge(new, on=["topic", "partition", "broker"])
    per = moved.assign(_n=record_bytes(moved)).groupby("broker")["_n"].sum() if len(moved) else pd.Series(dtype=int)
    return EmulatedMove(done, {int(b): int(n) for b, n in per.items()}, until_ms, run_dir)


def reassign_table(predicted: pd.DataFrame, emulated: EmulatedMove | None) -> pd.DataFrame:
    """Predicted vs emulated completion per planned partition, side by side (ms after the plan)."""
    cols = [*TP, "replicas", "target", "leader", "bytes_to_move", "rate_bps", "eta_ms"]
    out = predicted[cols].rename(columns={"eta_ms": "predicted_ms"})
    if emulated is not None:
        out["emulated_ms"] = [emulated.done_ms.get((t, int(p))) for t, p in zip(out["topic"], out["partition"],
                                                                                strict=True)]
        out["error_pct"] = [None if e in (None, 0) or pr is None else round(100.0 * (pr - e) / e, 1)
                            for pr, e in zip(out["predicted_ms"], out["emulated_ms"], strict=True)]
    return out.astype(object).where(out.notna(), None)


def total_ms(values: Iterable) -> int | None:
    """The move's completion: the last partition's (None if any never completes)."""
    v = list(values)
    return None if any(x is None for x in v) else max((int(x) for x in v), default=0)


def reassign_text(predicted: pd.DataFrame, throttle: int, emulated: EmulatedMove | None, wall_s: float | None = None
                  ) -> str:
    """The text answer: bytes to move, the predicted total (and emulated, with the measured rate)."""
    moving = predicted[predicted["adding"].map(len) > 0]
    n = int(predicted["bytes_to_move"].sum())
    p_total = total_ms(predicted["eta_ms"])
    lines = [f"Reassigning {len(predicted)} partition(s) ({len(moving)} moving, {n} bytes to copy) "
             f"under --throttle {throttle} B/s:",
             "  predicted completion: " + (f"{p_total} ms" if p_total is not None else
                                           "never (a partition's ingest is at least its share of the throttle)")]
    if emulated is not None:
        e_total = total_ms(emulated.done_ms.values())
        lines.append("  emulated completion:  " + (f"{e_total} ms" if e_total is not None else
                                                    f"not within the run ({emulated.until_ms} ms)"))
        if p_total and e_total:
            lines.append(f"  prediction error: {100.0 * (p_total - e_total) / e_total:+.1f} %")
        for b, n in sorted(emulated.moved.items()):
            ends = [emulated.done_ms.get((t, int(p))) for t, p, add in
                    predicted[["topic", "partition", "adding"]].itertuples(index=False) if b in add]
            if ends and None not in ends:
                rate = n * 1000 / max(ends)
                lines.append(f"  into broker {b}: {n} bytes by {max(ends)} ms, {rate:.0f} B/s ({100 * rate / throttle:.0f} "
                             f"% of the throttle, the requests around the copy included)")
        if wall_s is not None:
            lines.append(f"  emulated run: {emulated.run_dir} ({wall_s:.0f} s wall)")
    return "\n".join(lines) + "\n"
