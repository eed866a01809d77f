"""The durability checker: what a run did to acknowledged records, and which replication invariants
it broke, from its tables alone.

Vocabulary from Jepsen and the TLA+ spec hachikuji/kafka-specification (KafkaReplication.tla;
the table's columns: docs/tables.md). One `violations` row per finding:

* ``lost``: an acknowledged record (produce_results.acked) absent from its partition's committed
  log, i.e. the final leader's log below its HW (protocol/consumer.visible_records), and absent from
  that leader's log above the HW too: truncated away, or never on the leader that now serves the
  partition (a follower holding it will truncate to the leader's log, KIP-101/KIP-279). Partitions
  offline at the end are not judged: their acked records count as ``unavailable_acked``. So are
  partitions whose leader (by the controller) serves no log at the end: it crashed and its ZooKeeper
  session is still open (the controller has not seen it go), or it has not yet had its LeaderAndIsr;
  their records sit on the replicas, and which survive is decided by the election still to come.
* ``pending`` (not a violation; not counted under ``violations``): an acknowledged record on the
  serving leader's log at or above its HW when the run ends. It is not committed yet, and not lost:
  an acks=1/0 record the followers have not fetched, or one acked by the previous leader whose
  successor has not yet advanced its HW past it (Partition.maybeIncrementLeaderHW, a new leader's HW
  starts at its follower HW). ``pending_acked`` counts them.
* ``divergent``: two replicas holding different records at the same offset below both their HWs
  at the end; one row per partition and replica pair, at the first offset where they differ.
* ``HwWithinLeo``: a replica_state row with hw > leo ("HW <= LEO on every replica").
* ``UniqueLeaderPerEpoch``: two brokers leading the same leader epoch of a partition, by the
  controller's partition_state or the brokers' own replica_state.
* ``LeaderHwMonotonic``: a leader's HW moving back between consecutive rounds of one epoch.
* ``StrongIsr``: a replica truncated (its LEO dropped) below the committed offset (the highest
  leader HW seen so far) while a member of the quorum ISR (the latest partition_state row).

A topic deleted and created again is a new incarnation (its partition_state starts again at
version 0); the history rules compare rows of one incarnation only. All rules are vectorised
over the history tables; Python loops run only over the rows found.

Every rule judges one partition's rows. The end of a run (Cluster.run) does not read replica_state's
whole history (one row per replica per round): the brokers mark, as they make the rows, those that may
break a rule (protocol/replica_marks.py), the driver folds the marks into `Checks` (kept with its
state), and the audit reads the whole history of the partitions the marks make suspect
(`suspect_partitions`) and only the final round's rows of the others: the same findings as the full
audit (`audit` without `checks`), which stays the reference.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..protocol import replica_marks as M
from ..protocol.consumer import visible_records
from ..storage import api as T

KINDS: tuple[str, ...] = ("lost", "divergent", "HwWithinLeo", "UniqueLeaderPerEpoch", "LeaderHwMonotonic",
                          "StrongIsr")
PENDING = "pending"  # the `violations` table's kind for acked records not yet committed (not a violation)
COLUMNS: list[str] = T.SCHEMAS["violations"].names
FINAL_ROUND = -1  # the `round` of rows about the run's final state
ACKS_LABEL = {-1: "all", 1: "1", 0: "0"}
TP = ["topic", "partition"]


def final_replicas(tables_dir: str) -> pd.DataFrame:
    """The last round's replica_state rows (one per hosted replica)."""
    return _final(T.read_table(tables_dir, "replica_state").to_pandas())


#: rows of the large tables (log, replica_state, produce_results) the checker holds at once: it reads a run
#: in slices of whole partitions of about this many rows, so a large run's audit does not hold its tables
#: (~300 MB of driver memory a slice; the 1-second reference run at 100k replicas is 2.3M rows)
AUDIT_ROWS = 500_000
#: the columns the rules read, per table (the others stay on disk)
READ_COLUMNS: dict[str, list[str]] = {
    "produce_results": ["topic", "partition", "record_id", "acks", "offset", "error", "acked"],
    "log": ["broker", "topic", "partition", "offset", "record_id", "is_future"],
    "replica_state": ["round", "time_ms", "broker", "topic", "partition", "role", "leo", "hw", "leader_epoch"],
    "partition_state": ["time_ms", "topic", "partition", "leader", "isr", "replicas", "leader_epoch", "version",
                        "adding", "removing"],
}
SLICED = ("log", "replica_state", "produce_results")  # the tables whose rows size the slices


@dataclass(frozen=True)
class RunTables:
    """The tables the checker reads, as pandas frames."""

    produce_results: pd.DataFrame
    log: pd.DataFrame
    replica_state: pd.DataFrame
    partition_state: pd.DataFrame

    @classmethod
    def read(cls, tables_dir: str, replica_state: pa.Table | None = None) -> RunTables:
        """The columns the rules read (READ_COLUMNS) of every row (replica_state's: `replica_state` when
        given, see reduced_replica_state); each Arrow table is freed as it becomes pandas."""
        return cls(*(_pandas(_columns(tables_dir, n, READ_COLUMNS[n], replica_state)) for n in TABLES))

    @classmethod
    def read_spilled(cls, folder: str, i: int) -> RunTables:
        """Slice `i` of the tables, from the files _spill wrote into `folder`."""
        return cls(*(_pandas(_read_arrow(os.path.join(folder, f"{n}-{i}.arrow"))) for n in TABLES))


TABLES = ("produce_results", "log", "replica_state", "partition_state")  # RunTables' fields


def _columns(tables_dir: str, name: str, columns: list[str], replica_state: pa.Table | None) -> pa.Table:
    """Table `name`'s `columns`: read, or taken from `replica_state` (its rows the audit judges) when given."""
    if name == "replica_state" and replica_state is not None:
        return replica_state.select(columns)
    return T.read_table(tables_dir, name, columns=columns)


def _read_arrow(path: str) -> pa.Table:
    with pa.OSFile(path) as f:
        return pa.ipc.open_file(f).read_all()


def _pandas(t: pa.Table) -> pd.DataFrame:
    return t.to_pandas(split_blocks=True, self_destruct=True)  # frees each column's Arrow buffers as it goes


@dataclass(frozen=True)
class Whole:
    """What the per-partition rules need to know about the whole run when they see a slice of it: the final
    round (replica_state's newest), and whether some partition was created twice (topic incarnations)."""

    final_round: int | None
    recreated: bool

    @classmethod
    def of(cls, t: RunTables) -> Whole:
        return cls(int(t.replica_state["round"].max()) if len(t.replica_state) else None,
                   _recreated(t.partition_state))

    @classmethod
    def read(cls, tables_dir: str, replica_state: pa.Table | None = None) -> Whole:
        rounds = _columns(tables_dir, "replica_state", ["round"], replica_state).column("round")
        ps = T.read_table(tables_dir, "partition_state", columns=["topic", "partition", "version"]).to_pandas()
        return cls(None if len(rounds) == 0 else int(pc.max(rounds).as_py()), _recreated(ps))


def check(tables_dir: str, meta: dict) -> dict:
    """The summary of a run (OUT/summary.json and Cluster.summary())."""
    return audit(tables_dir, meta)[0]


def violations(tables_dir: str, meta: dict) -> pd.DataFrame:
    """Every violation found in a run, in the `violations` table's schema (pandas, nullable ints)."""
    return audit(tables_dir, meta)[1]


def audit(tables_dir: str, meta: dict, rows: int = AUDIT_ROWS, checks: Checks | None = None
          ) -> tuple[dict, pd.DataFrame]:
    """The summary and the violations of a run, reading its tables once. A run of more than `rows` rows is
    cut into slices of whole partitions (ranges of partition numbers) of about `rows` rows each, spilled to
    local files in one pass over each table, and judged slice by slice: every rule judges one partition's
    rows, so the slices' findings and counts add up to the whole run's, and the driver holds one slice.
    `checks` (the run's Checks): replica_state's rows are only those reduced_replica_state keeps, the same
    findings; without it, its whole history is read (the reference)."""
    rs = None if checks is None else reduced_replica_state(tables_dir, checks)
    whole = Whole.read(tables_dir, rs)
    starts = _slices(tables_dir, rows, rs)
    pa.default_memory_pool().release_unused()  # the columns read to plan the slices
    if len(starts) == 1:
        return audit_tables(RunTables.read(tables_dir, rs), meta, whole)
    summary, found = None, []
    with tempfile.TemporaryDirectory(prefix="sparkkafka-audit-") as folder:
        _spill(tables_dir, starts, folder, rs)
        pa.default_memory_pool().release_unused()
        for i in range(len(starts)):
            s, f = audit_tables(RunTables.read_spilled(folder, i), meta, whole)
            summary = s if summary is None else _add(summary, s)
            found.append(f)
            pa.default_memory_pool().release_unused()  # the slice's Arrow buffers, back to the system
    return summary, _conform(pd.concat(found, ignore_index=True))


def _slices(tables_dir: str, rows: int, replica_state: pa.Table | None = None) -> list[int]:
    """The first partition number of each slice: ranges of partition numbers of about `rows` rows of the
    SLICED tables each ([0]: one slice, the whole run)."""
    counts = np.zeros(1, np.int64)
    for name in SLICED:
        col = _columns(tables_dir, name, ["partition"], replica_state).column("partition")
        c = np.bincount(col.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)) if len(col) else counts
        counts = np.pad(counts, (0, max(0, len(c) - len(counts)))) + np.pad(c, (0, max(0, len(counts) - len(c))))
    cum = np.cumsum(counts)
    starts = [0]
    while cum[-1] - (cum[starts[-1] - 1] if starts[-1] else 0) > rows:
        done = cum[starts[-1] - 1] if starts[-1] else 0
        starts.append(max(starts[-1] + 1, int(np.searchsorted(cum, done + rows, side="right"))))
    return starts


def _spill(tables_dir: str, starts: list[int], folder: str, replica_state: pa.Table | None = None) -> None:
    """Write each table's READ_COLUMNS, cut by slice (`starts`), into `folder` as Arrow files
    `<table>-<slice>.arrow`, in one streaming pass per table (rows keep their order within a slice)."""
    bounds = np.asarray(starts, np.int64)
    for name in TABLES:
        if name == "replica_state" and replica_state is not None:
            t = replica_state.select(READ_COLUMNS[name])
            schema, batches = t.schema, iter(t.to_batches())
        else:
            schema, batches = T.scan_table(tables_dir, name, READ_COLUMNS[name])
        writers = [pa.ipc.new_file(os.path.join(folder, f"{name}-{i}.arrow"), schema) for i in range(len(starts))]
        try:
            for batch in batches:
                part = batch.column("partition").to_numpy(zero_copy_only=False)
                which = np.searchsorted(bounds, part, side="right") - 1
                for i in np.unique(which):
                    writers[i].write_batch(batch.filter(pa.array(which == i)))
        finally:
            for w in writers:
                w.close()


def _add(a: dict, b: dict) -> dict:
    """Two slices' summaries as one: counts add up, the run's own keys are the same in both."""
    out = {}
    for k, v in a.items():
        if isinstance(v, dict):
            keys = sorted(set(v) | set(b[k])) if k == "errors" else list(v)  # errors: sorted, as value_counts gives
            out[k] = {x: v.get(x, 0) + b[k].get(x, 0) for x in keys}
        elif k in RUN_KEYS:
            out[k] = v
        else:
            out[k] = v + b[k]
    return out


RUN_KEYS = ("scenario", "seed", "rounds", "time_ms")  # the summary's keys about the run, not counts
DELETED_LEADER = -2  # a deleted partition's last partition_state row (LeaderAndIsr.LeaderDuringDelete)


def _under_replicated(parts: pd.DataFrame) -> list[bool]:
    """Per latest partition row: under-replicated as kafka-topics --under-replicated-partitions and the
    brokers' UnderReplicatedPartitions gauge define it (KIP-352: adding replicas left out of the count)."""
    from ..protocol.under_replicated import is_under_replicated

    none = [()] * len(parts)
    adding = parts["adding"] if "adding" in parts else none
    removing = parts["removing"] if "removing" in parts else none
    return [is_under_replicated(_listed(r), _listed(i), _listed(a), _listed(m)) for r, i, a, m in
            zip(parts["replicas"], parts["isr"], adding, removing, strict=True)]


def _listed(value: Any) -> list[int]:
    """A broker-id list cell (list, array, or None for empty)."""
    return [] if value is None else [int(v) for v in value]


def audit_tables(t: RunTables, meta: dict, whole: Whole | None = None) -> tuple[dict, pd.DataFrame]:
    """The summary (every key of the original checker, plus violation counts) and the violations; `whole`
    is what the rules need to know of the run when `t` is a slice of it (default: `t` is the whole run)."""
    whole = Whole.of(t) if whole is None else whole
    results, log = t.produce_results, t.log
    if len(log) and log["is_future"].any():  # (no copy of the log when it holds no future replica)
        log = log[~log["is_future"]]
    reps = _final(t.replica_state, whole.final_round)
    parts = latest_of(t.partition_state)
    live = sorted(set(meta.get("live_brokers", [])))
    # a deleted partition (leader -2) is neither offline nor under-replicated: Kafka's OfflinePartitionsCount
    # leaves out topics being deleted (ControllerContext.updatePartitionStateMetrics) and a deleted partition
    # exists on no broker (UnderReplicatedPartitions); its acked records stay unjudged (no leader serves them)
    existing = parts[parts["leader"] != DELETED_LEADER] if len(parts) else parts
    offline = parts[~parts["leader"].isin(live)] if len(parts) else parts
    under = existing[_under_replicated(existing)] if len(existing) else existing
    acked = results[results["acked"]] if len(results) else results
    errors = results["error"].dropna().value_counts().sort_index().to_dict() if len(results) else {}
    now = int(meta.get("time_ms", 0))
    round_ms = int(meta.get("round_ms") or 100)

    judged = whole.final_round is not None  # the run has final replicas (a slice may hold none of them)
    lost, pending, unavailable = _lost(acked, log, reps, parts, _unjudged(parts, reps, offline), now, judged)
    divergent, divergent_offsets = _divergent(log, reps, now)
    ps, rs = _incarnations(t.partition_state, t.replica_state, whole.recreated)
    # typed before the concat: a rule whose offsets are all NA would otherwise leave the result's dtype to pandas
    found = pd.concat([_typed(f) for f in (lost, pending, divergent, _hw_within_leo(rs), _unique_leader(ps, rs, round_ms),
                                           *_history_rules(ps, rs)) if len(f)] or [_empty()], ignore_index=True)
    found = _conform(found)
    by_acks = lost["_acks"].value_counts() if len(lost) else pd.Series(dtype="int64")
    summary = {
        "scenario": meta.get("scenario"), "seed": meta.get("seed"),
        "rounds": int(meta.get("round", 0)), "time_ms": now,
        "produced": int(len(results)), "acked": int(len(acked)),
        "not_acked": int(len(results) - len(acked)), "errors": {k: int(v) for k, v in errors.items()},
        "lost_acked": int(len(lost)), "pending_acked": int(len(pending)), "unavailable_acked": int(unavailable),
        "divergent_replicas": int(len(divergent)),
        "offline_partitions": int((offline["leader"] != DELETED_LEADER).sum()) if len(offline) else 0,
        "under_replicated_partitions": int(len(under)),
        "log_records": int(len(log)),
        "violations": {k: int((found["kind"] == k).sum()) for k in KINDS},
        "lost_acked_by_acks": {label: int(by_acks.get(a, 0)) for a, label in ACKS_LABEL.items()},
        "divergent_offsets": int(divergent_offsets),
    }
    return summary, found


def violations_table(frame: pd.DataFrame) -> pa.Table:
    """A violations frame as Arrow in the table's schema."""
    return pa.Table.from_pandas(_conform(frame)[COLUMNS], schema=T.SCHEMAS["violations"], preserve_index=False)


def latest_of(ps: pd.DataFrame) -> pd.DataFrame:
    """The newest partition_state row of every partition."""
    if ps.empty:
        return ps
    ps = ps.sort_values(["topic", "partition", "time_ms", "version", "leader_epoch"], kind="stable")
    return ps.groupby(TP, as_index=False).tail(1).reset_index(drop=True)


# ---------------------------------------------------------------------- final state
def _final(rs: pd.DataFrame, last: int | None = None) -> pd.DataFrame:
    """The rows of round `last` (default: the newest round of `rs`)."""
    if rs.empty:
        return rs
    return rs[rs["round"] == (rs["round"].max() if last is None else last)]


def _unjudged(parts: pd.DataFrame, reps: pd.DataFrame, offline: pd.DataFrame) -> pd.DataFrame:
    """(topic, partition) of the partitions the lost rule does not judge: offline ones, and those whose
    leader holds no leader replica in the final round."""
    if not len(parts):
        return offline
    serving = (reps.loc[reps["role"] == "leader", [*TP, "broker"]].rename(columns={"broker": "leader"})
               .drop_duplicates())
    s = parts[[*TP, "leader"]].merge(serving.assign(_s=True), how="left", on=[*TP, "leader"])
    idle = parts.loc[s["_s"].isna().to_numpy(), TP]
    return pd.concat([offline[TP], idle], ignore_index=True).drop_duplicates() if len(offline) else idle


def _lost(acked: pd.DataFrame, log: pd.DataFrame, reps: pd.DataFrame, parts: pd.DataFrame,
          offline: pd.DataFrame, now: int, judged: bool | None = None) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """Acked records missing from the committed log of the partitions judged (not in `offline`: those
    unjudged at the end, see _unjudged), split into the lost ones and the pending ones (still on the
    serving leader, above its HW); returns both and the count of acked records not judged. `judged` False:
    the run has no final replicas, nothing is judged (a slice of a run that has some is judged even with
    none of its own: its partitions are then all unjudged)."""
    if not (len(reps) if judged is None else judged) or not len(acked):
        return _empty(), _empty(), 0
    a = acked[[*TP, "record_id", "acks", "offset"]].reset_index(drop=True)
    committed = _found(a, visible_records(log, reps))
    off = (a.merge(offline[TP].assign(_off=True), how="left", on=TP)["_off"].notna().to_numpy()
           if len(offline) else np.zeros(len(a), bool))
    missing = a[~off & ~committed]
    if not len(missing):
        return _empty(), _empty(), int(off.sum())
    # the controller's leader of a judged partition holds a leader replica (_unjudged): its whole log
    on_leader = (log.merge(parts[[*TP, "leader"]].rename(columns={"leader": "broker"}), on=[*TP, "broker"])
                 [[*TP, "record_id"]].drop_duplicates().assign(_pending=True))
    missing = missing.merge(on_leader, how="left", on=[*TP, "record_id"])
    pending = missing["_pending"].notna().to_numpy()
    leaders = (reps[reps["role"] == "leader"].sort_values([*TP, "leader_epoch"], kind="stable")
               .drop_duplicates(TP, keep="last")[[*TP, "broker", "hw"]].rename(columns={"broker": "_leader"}))
    missing = missing.merge(parts[[*TP, "replicas"]], how="left", on=TP).merge(leaders, how="left", on=TP)
    label = missing["acks"].map(ACKS_LABEL).fillna(missing["acks"].astype(str))
    where = [(f"on leader {int(b)} at or above its HW {int(h)}: not yet committed" if p else
              f"absent from the committed log ({f'leader {int(b)} below HW {int(h)}' if pd.notna(b) else 'no leader'})")
             for p, b, h in zip(pending, missing["_leader"], missing["hw"], strict=True)]
    out = pd.DataFrame({
        "round": FINAL_ROUND, "time_ms": now, "kind": np.where(pending, PENDING, "lost"),
        "topic": missing["topic"].to_numpy(), "partition": missing["partition"].to_numpy(),
        "brokers": [_ids(r) for r in missing["replicas"]], "offset": missing["offset"].to_numpy(),
        "record_id": missing["record_id"].to_numpy(),
        "detail": [f"acked with acks={k} at offset {_num(o)}, {w}"
                   for k, o, w in zip(label, missing["offset"], where, strict=True)],
        "_acks": missing["acks"].to_numpy(),
    })
    return (out[~pending].reset_index(drop=True) if (~pending).any() else _empty(),
            out[pending].reset_index(drop=True) if pending.any() else _empty(), int(off.sum()))


def _found(rows: pd.DataFrame, among: pd.DataFrame) -> np.ndarray:
    """Whether each row of `rows` has a row of `among` with its topic, partition and record id: a join on the
    record id alone (an integer: one produce's id matches a row per replica that holds it, not millions of
    string keys hashed), then its topic and partition compared (a record found in another partition than the
    one it was acked in is not found)."""
    m = pd.DataFrame({"_row": np.arange(len(rows)), "record_id": rows["record_id"].to_numpy()}).merge(
        among[[*TP, "record_id"]], on="record_id")
    at = m["_row"].to_numpy()
    same = ((m["partition"].to_numpy() == rows["partition"].to_numpy()[at])
            & (m["topic"].to_numpy() == rows["topic"].to_numpy()[at]))
    out = np.zeros(len(rows), bool)
    out[at[same]] = True
    return out


def _replica_codes(log: pd.DataFrame, reps: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Integer codes, the same key the same code in both frames: of each log row's (topic, partition), of its
    (topic, partition, broker), and of each replica row's (topic, partition, broker)."""
    n = len(log)
    topic = pd.factorize(np.concatenate([log["topic"].to_numpy(object), reps["topic"].to_numpy(object)]))[0]
    part = np.concatenate([log["partition"].to_numpy(np.int64), reps["partition"].to_numpy(np.int64)])
    tp = pd.factorize((topic.astype(np.int64) << 32) | part)[0].astype(np.int64)  # partitions and broker ids < 2^31
    broker = np.concatenate([log["broker"].to_numpy(np.int64), reps["broker"].to_numpy(np.int64)])
    replica = pd.factorize((tp << 32) | broker)[0]
    return tp[:n], replica[:n], replica[n:]


def _divergent(log: pd.DataFrame, reps: pd.DataFrame, now: int) -> tuple[pd.DataFrame, int]:
    """Replica pairs holding different records at an offset below both HWs, and how many
    (topic, partition, offset) are affected."""
    if not len(reps) or not len(log):
        return _empty(), 0
    # the log's rows below their replica's HW, then only offsets whose replicas differ pair up; keyed by integer
    # codes of (topic, partition[, broker]), not by the topic strings of every record
    tp, replica, rep_code = _replica_codes(log, reps)
    m = pd.DataFrame({"_k": replica, "_row": np.arange(len(log))}).merge(
        pd.DataFrame({"_k": rep_code, "hw": reps["hw"].to_numpy()}), on="_k")
    rows = m["_row"].to_numpy()
    offsets = log["offset"].to_numpy()
    rows = rows[offsets[rows] < m["hw"].to_numpy()]
    ids = pd.DataFrame({"tp": tp[rows], "offset": offsets[rows], "record_id": log["record_id"].to_numpy()[rows]}
                       ).groupby(["tp", "offset"], sort=False)["record_id"]
    lg = log.iloc[rows[(ids.transform("min") != ids.transform("max")).to_numpy()]][[*TP, "broker", "offset", "record_id"]]
    pair = lg.merge(lg, on=[*TP, "offset"], suffixes=("", "_o"))
    pair = pair[(pair["broker"] < pair["broker_o"]) & (pair["record_id"] != pair["record_id_o"])]
    if not len(pair):
        return _empty(), 0
    keys = [*TP, "broker", "broker_o"]
    pair = pair.sort_values([*keys, "offset"], kind="stable")
    first = pair.drop_duplicates(keys).merge(pair.groupby(keys, as_index=False).size(), on=keys)
    detail = [f"{n} offset(s) below both HWs differ; at offset {o} replica {a} has record {x}, "
              f"replica {b} has record {y}"
              for n, o, a, x, b, y in zip(first["size"], first["offset"], first["broker"], first["record_id"],
                                          first["broker_o"], first["record_id_o"], strict=True)]
    out = pd.DataFrame({
        "round": FINAL_ROUND, "time_ms": now, "kind": "divergent", "topic": first["topic"].to_numpy(),
        "partition": first["partition"].to_numpy(),
        "brokers": [[int(a), int(b)] for a, b in zip(first["broker"], first["broker_o"], strict=True)],
        "offset": first["offset"].to_numpy(), "record_id": None, "detail": detail,
    })
    return out, len(pair.drop_duplicates([*TP, "offset"]))


# ---------------------------------------------------------------------- history
def _recreated(ps: pd.DataFrame) -> bool:
    """Whether some partition of partition_state was created (version 0) more than once."""
    created = (ps["version"] == 0).astype("int64")
    return bool(len(ps)) and created.groupby([ps["topic"], ps["partition"]]).sum().max() > 1


def _incarnations(ps: pd.DataFrame, rs: pd.DataFrame, recreated: bool | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """partition_state sorted in time, and both tables with `_inc`, the topic incarnation
    (count of version-0 rows so far); constant unless some partition of the run was created twice
    (`recreated`, default: one of `ps`)."""
    ps = ps.sort_values([*TP, "time_ms", "version", "leader_epoch"], kind="stable").reset_index(drop=True)
    created = (ps["version"] == 0).astype("int64")
    if not len(ps) or not (_recreated(ps) if recreated is None else recreated):
        return ps.assign(_inc=0), rs.assign(_inc=0)
    ps = ps.assign(_inc=created.groupby([ps["topic"], ps["partition"]]).cumsum())
    if not len(rs):
        return ps, rs.assign(_inc=0)
    rs = pd.merge_asof(rs.sort_values("time_ms", kind="stable"),
                       ps[["time_ms", *TP, "_inc"]].sort_values("time_ms", kind="stable"),
                       on="time_ms", by=TP)
    return ps, rs.assign(_inc=rs["_inc"].fillna(0).astype("int64"))


def _hw_within_leo(rs: pd.DataFrame) -> pd.DataFrame:
    bad = rs[rs["hw"] > rs["leo"]]
    if not len(bad):
        return _empty()
    return pd.DataFrame({
        "round": bad["round"].to_numpy(), "time_ms": bad["time_ms"].to_numpy(), "kind": "HwWithinLeo",
        "topic": bad["topic"].to_numpy(), "partition": bad["partition"].to_numpy(),
        "brokers": [[int(b)] for b in bad["broker"]], "offset": bad["hw"].to_numpy(), "record_id": None,
        "detail": [f"{r} HW {h} is above its LEO {e} (leader epoch {p})"
                   for r, h, e, p in zip(bad["role"], bad["hw"], bad["leo"], bad["leader_epoch"], strict=True)],
    })


def _unique_leader(ps: pd.DataFrame, rs: pd.DataFrame, round_ms: int) -> pd.DataFrame:
    """Leader epochs of a partition that more than one broker led (controller's or brokers' view)."""
    cols = [*TP, "_inc", "leader_epoch", "broker", "time_ms", "round", "source"]
    a = ps[ps["leader"] >= 0].rename(columns={"leader": "broker"})
    a = a.assign(round=np.maximum(a["time_ms"].to_numpy(), 0) // max(round_ms, 1), source="partition_state")
    b = rs[rs["role"] == "leader"].assign(source="replica_state")
    both = pd.concat([a[cols], b[cols]], ignore_index=True)
    keys = [*TP, "_inc", "leader_epoch"]
    n = both.groupby(keys)["broker"].transform("nunique")
    both = both[n > 1]
    if not len(both):
        return _empty()
    both = both.sort_values([*keys, "time_ms", "source", "broker"], kind="stable")
    rows = []
    for key, g in both.groupby(keys, sort=True):
        second = g[g["broker"] != g["broker"].iloc[0]].iloc[0]  # when a second leader shows up
        says = "; ".join(f"{src} says {', '.join(str(x) for x in sorted(set(s['broker'].tolist())))}"
                         for src, s in g.groupby("source", sort=True))
        rows.append({"round": int(second["round"]), "time_ms": int(second["time_ms"]), "kind": "UniqueLeaderPerEpoch",
                     "topic": key[0], "partition": int(key[1]), "brokers": sorted(int(x) for x in set(g["broker"])),
                     "offset": None, "record_id": None,
                     "detail": f"leader epoch {int(key[3])} has more than one leader ({says})"})
    return pd.DataFrame(rows)


def _history_rules(ps: pd.DataFrame, rs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """LeaderHwMonotonic and StrongIsr: each replica's rows compared with its previous row."""
    if len(rs) < 2:
        return _empty(), _empty()
    s = rs.sort_values([*TP, "_inc", "broker", "round"], kind="stable").reset_index(drop=True)
    col = {c: s[c].to_numpy() for c in ("topic", "partition", "_inc", "broker", "round", "role", "leo", "hw",
                                         "leader_epoch")}
    same = np.ones(len(s) - 1, bool)
    for c in ("topic", "partition", "_inc", "broker"):
        same &= col[c][1:] == col[c][:-1]
    cur = s.iloc[1:]  # row i + 1 of s, after row i (only the rows picked below are copied)
    prev_hw, prev_leo = col["hw"][:-1], col["leo"][:-1]

    back = (same & (col["round"][1:] == col["round"][:-1] + 1) & (col["role"][1:] == "leader")
            & (col["role"][:-1] == "leader") & (col["leader_epoch"][1:] == col["leader_epoch"][:-1])
            & (col["hw"][1:] < prev_hw))
    mono = _empty()
    if back.any():
        m = cur[back]
        mono = pd.DataFrame({
            "round": m["round"].to_numpy(), "time_ms": m["time_ms"].to_numpy(), "kind": "LeaderHwMonotonic",
            "topic": m["topic"].to_numpy(), "partition": m["partition"].to_numpy(),
            "brokers": [[int(b)] for b in m["broker"]], "offset": m["hw"].to_numpy(), "record_id": None,
            "detail": [f"leader HW moved back from {p} to {h} in leader epoch {e}"
                       for p, h, e in zip(prev_hw[back], m["hw"], m["leader_epoch"], strict=True)],
        })

    drop = same & (col["leo"][1:] < prev_leo)
    if not drop.any():
        return mono, _empty()
    c = cur[drop].assign(prev_leo=prev_leo[drop])
    lead = s[s["role"] == "leader"].groupby([*TP, "_inc", "round"], as_index=False)["hw"].max()
    lead = lead.sort_values([*TP, "_inc", "round"], kind="stable")
    lead["committed"] = lead.groupby([*TP, "_inc"])["hw"].cummax()
    c = pd.merge_asof(c.sort_values("round", kind="stable"),
                      lead[["round", *TP, "_inc", "committed"]].sort_values("round", kind="stable"),
                      on="round", by=[*TP, "_inc"])
    c = _isr_at(c, ps)
    c = c[_in_isr(c) & (c["leo"] < c["committed"]).fillna(False).to_numpy(bool)]
    if not len(c):
        return mono, _empty()
    strong = pd.DataFrame({
        "round": c["round"].to_numpy(), "time_ms": c["time_ms"].to_numpy(), "kind": "StrongIsr",
        "topic": c["topic"].to_numpy(), "partition": c["partition"].to_numpy(),
        "brokers": [[int(b)] for b in c["broker"]], "offset": c["leo"].to_numpy(), "record_id": None,
        "detail": [f"truncated from LEO {p} to {n}, below the committed offset {int(k)}, while in the ISR "
                   f"[{','.join(str(int(x)) for x in i)}]"
                   for p, n, k, i in zip(c["prev_leo"], c["leo"], c["committed"], c["isr"], strict=True)],
    })
    return mono, strong


def _in_isr(rows: pd.DataFrame) -> np.ndarray:
    """Whether each row's broker is in its `isr` (a list, an array, or missing)."""
    return np.array([isinstance(i, list | np.ndarray) and b in list(i) for b, i in zip(rows["broker"], rows["isr"],
                                                                                       strict=True)], bool)


def _isr_at(rows: pd.DataFrame, ps: pd.DataFrame) -> pd.DataFrame:
    """`rows` (topic, partition, broker, time_ms) with the `isr` of their partition's latest partition_state
    row at their time (`ps` in time order, as _incarnations sorts it): StrongIsr's view of the ISR."""
    return pd.merge_asof(rows.sort_values("time_ms", kind="stable"),
                         ps[["time_ms", *TP, "isr"]].sort_values("time_ms", kind="stable"), on="time_ms", by=TP)


# ---------------------------------------------------------------------- incremental
def _no_marks() -> pd.DataFrame:
    return pd.DataFrame({"round": pd.Series(dtype="int64"), "time_ms": pd.Series(dtype="int64"),
                         "topic": pd.Series(dtype=object), "partition": pd.Series(dtype="int32"),
                         "broker": pd.Series(dtype="int32"), "leader_epoch": pd.Series(dtype="int32"),
                         "marks": pd.Series(dtype="int64")})


@dataclass(frozen=True)
class Checks:
    """The checker's incremental state, kept with the driver's (DriverState.checks) so a run continued in
    another process or recovered after a crash has the marks of exactly the rounds its tables hold: every
    replica_state row the brokers marked (protocol/replica_marks.py), with its round and time. A handful a
    round once the replicas exist (their first rows, leader changes, truncations)."""

    marks: pd.DataFrame = field(default_factory=_no_marks)

    def fold(self, rows: pd.DataFrame, round_ms: int) -> Checks:
        """This state with a job's mark rows (replica_marks.from_summaries) added; rows of round r at time
        r x round_ms, as the engine stamps replica_state."""
        if not len(rows):
            return self
        new = rows.assign(time_ms=rows["round"].astype("int64") * round_ms)[list(self.marks.columns)]
        new = new.astype(self.marks.dtypes.to_dict())
        return Checks(pd.concat([self.marks, new], ignore_index=True) if len(self.marks) else new)


def suspect_partitions(marks: pd.DataFrame, ps: pd.DataFrame) -> pd.DataFrame:
    """(topic, partition) of every partition whose replica_state history may break a rule, from the marks
    and partition_state: a replica row marked SUSPECT (HwWithinLeo, LeaderHwMonotonic); a LEO drop, or a
    replica appearing again (after a restart or a move back: its previous row is not its broker's), while
    in the ISR (StrongIsr's truncation in the ISR); a leader epoch claimed by more than one broker across
    both tables (UniqueLeaderPerEpoch, incarnations taken together: more, never fewer). Every partition
    the full audit finds such a violation on is one of them."""
    ps = _incarnations(ps, ps.iloc[:0])[0]
    bits = marks["marks"].to_numpy()
    hw = marks.loc[(bits & M.SUSPECT) != 0, TP]
    appeared = marks[(bits & M.APPEARED) != 0].sort_values("round", kind="stable")
    again = appeared[appeared.duplicated([*TP, "broker"], keep="first")]
    drops = pd.concat([marks[(bits & M.LEO_DROP) != 0], again], ignore_index=True)
    if len(drops) and len(ps):
        drops = drops.astype({"partition": ps["partition"].dtype})
        drops = _isr_at(drops[[*TP, "broker", "time_ms"]], ps)
        drops = drops[_in_isr(drops)]
    claims = marks.loc[(bits & M.CLAIMED) != 0, [*TP, "leader_epoch", "broker"]]
    led = ps.loc[ps["leader"] >= 0, [*TP, "leader_epoch", "leader"]].rename(columns={"leader": "broker"})
    both = pd.concat([claims, led], ignore_index=True).astype({"partition": "int64", "leader_epoch": "int64",
                                                                "broker": "int64"})
    n = both.groupby([*TP, "leader_epoch"])["broker"].nunique()
    shared = n[n > 1].reset_index()[TP]
    out = pd.concat([x[TP].astype({"partition": "int64"}) for x in (hw, drops, shared)], ignore_index=True)
    return out.drop_duplicates().sort_values(TP, kind="stable").reset_index(drop=True)


def reduced_replica_state(tables_dir: str, checks: Checks) -> pa.Table:
    """The replica_state rows (READ_COLUMNS) the audit needs given the run's `checks`: every row of the
    suspect partitions (suspect_partitions), and the final round's rows of the others (the final replicas
    the lost and divergent rules read). The rules find on them what they find on the whole table: the
    other partitions' history breaks no rule, and one row per replica makes no pair to compare."""
    cols = READ_COLUMNS["replica_state"]
    final = T.column_max(tables_dir, "replica_state", "round")
    if final is None:
        return T.read_table(tables_dir, "replica_state", columns=cols)
    ps = T.read_table(tables_dir, "partition_state", columns=READ_COLUMNS["partition_state"]).to_pandas()
    suspects = suspect_partitions(checks.marks, ps)
    keep = pc.field("round") == final
    if len(suspects):
        keep = keep | pc.field("partition").isin(pa.array(sorted(set(suspects["partition"].tolist())), pa.int32()))
    t = T.read_table(tables_dir, "replica_state", columns=cols, filter=keep)
    if len(suspects):  # the rows of suspect (topic, partition) pairs, not of every topic's partition of that number
        tp = pd.MultiIndex.from_arrays([t.column("topic").to_pandas(), t.column("partition").to_pandas().astype("int64")])
        mine = tp.isin(pd.MultiIndex.from_frame(suspects))
        t = t.filter(pa.array(mine | (t.column("round").to_numpy() == final)))
    return t


# ---------------------------------------------------------------------- frames
def _empty() -> pd.DataFrame:
    return _conform(pd.DataFrame({c: [] for c in COLUMNS}))


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    """The violations schema's columns and types, rows in their order."""
    return pd.DataFrame({
        "round": df["round"].astype("int64"), "time_ms": df["time_ms"].astype("int64"),
        "kind": df["kind"].astype(object), "topic": df["topic"].astype(object),
        "partition": df["partition"].astype("int32"),
        "brokers": pd.Series([_ids(b) for b in df["brokers"]], index=df.index, dtype=object),
        "offset": pd.array(df["offset"], dtype="Int64"), "record_id": pd.array(df["record_id"], dtype="Int64"),
        "detail": df["detail"].astype(object),
    })


def _conform(df: pd.DataFrame) -> pd.DataFrame:
    """Column types of the violations schema, rows in a canonical order (round, topic, partition,
    kind, brokers, offset, record_id), so equal runs give equal tables."""
    out = _typed(df)
    out = out.assign(_b=[tuple(b) for b in out["brokers"]])
    out = out.sort_values(["round", "topic", "partition", "kind", "_b", "offset", "record_id"], kind="stable")
    return out.drop(columns="_b").reset_index(drop=True)


def _ids(value: Any) -> list[int]:
    if isinstance(value, list | tuple | np.ndarray):
        return sorted(int(x) for x in value)
    return []


def _num(value: Any) -> str:
    return "none" if value is None or pd.isna(value) else str(int(value))
