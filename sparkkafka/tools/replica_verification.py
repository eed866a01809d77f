"""``kafka-replica-verification.sh`` (``kafka.tools.ReplicaVerificationTool``, Kafka 2.8) over a run's final state.

Kafka's tool fetches every replica of the selected partitions (replica id -2, up to the log end) and
one fetcher compares them (``ReplicaBuffer.verifyCheckSum``): per partition it walks the batches of
every replica in lock-step, each replica only below its own HW. Differing batch last offsets print
``<ts>: partition <tp>: replica <a>'s offset <x> doesn't match replica <b>'s offset <y>`` and the
tool exits 1; differing batch checksums print ``<ts>: partition <tp> has unmatched checksum at offset
<o>; replica <a>'s checksum <c1>; replica <b>'s checksum <c2>`` and it goes on. The verified offset
moves past every step that all replicas passed; the report is ``<ts>: max lag is <n> for partition
<tp> at offset <o> among <k> partitions``, lag = the partition's highest HW minus its verified offset,
keeping the first partition (in iteration order) with the largest lag.

Here the fetch is the run's tables: the ``log`` rows (current logs, not future ones) and the last
round of ``replica_state`` (the hosted replicas, their HW and log start offset). One pass is made, as
if each fetch returned the whole log, from the lowest offset every replica still holds (Kafka starts
at ``--time``'s offsets, by default the end). Replicas on brokers down at the end are left out
(Kafka's tool needs every broker up at start). Every record is its own batch (last offset = its
offset). Its checksum is a CRC32C (Castagnoli, as Kafka's v2 batch CRC) computed here with numpy
over a fixed big-endian encoding of record_id, timestamp, value_bytes, key and value; like Kafka's,
it does not cover the offset or partitionLeaderEpoch, so a record copied under another epoch matches.
``<ts>`` is the run's emulated time (run.json ``time_ms``) as ``yyyy-MM-dd HH:mm:ss,SSS`` from the
epoch, UTC. Partitions and replicas are visited in the iteration order of the tool's
``kafka.utils.Pool`` (a ``ConcurrentHashMap``: slot of the key's spread hash, then key order).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd

from ..errors import ScenarioError
from ..protocol.java_hash import concurrent_hash_map_slots, string_hash
from ..storage import tables as T

__all__ = ["Verification", "crc32c", "record_checksums", "timestamp", "topic_filter", "verify", "verify_run"]

DEFAULT_REPORT_INTERVAL_MS = 30_000
NO_TOPICS = ("No topics found. --topic-white-list if specified, is either filtering out all topics or there "
             "is no topic.")


@dataclass
class Verification:
    """What the tool printed and its exit code (1: two replicas' batch offsets differ)."""

    lines: list[str] = field(default_factory=list)
    exit_code: int = 0
    error: str | None = None  # for stderr (Kafka logs it at ERROR and exits 1)


def timestamp(time_ms: int) -> str:
    """``SimpleDateFormat("yyyy-MM-dd HH:mm:ss,SSS")`` of an emulated time, in UTC."""
    t = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=int(time_ms))
    return f"{t:%Y-%m-%d %H:%M:%S},{t.microsecond // 1000:03d}"


def topic_filter(raw: str, name: str = "topic-white-list") -> re.Pattern:
    """Kafka's ``IncludeList`` (``kafka.utils.TopicFilter``): trimmed, commas as ``|``, spaces and
    surrounding quotes dropped, matched against the whole topic name."""
    try:
        re.compile(raw)
        regex = raw.strip().replace(",", "|").replace(" ", "")
        regex = re.sub(r"[\"']+$", "", re.sub(r"^[\"']+", "", regex))
        return re.compile(regex)
    except (re.error, TypeError) as e:
        raise ScenarioError(name, raw, f"is an invalid regex ({e})") from None


# ---------------------------------------------------------------------- checksums
def _crc32c_table() -> np.ndarray:
    table = np.zeros(256, np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        table[i] = c
    return table


_CRC32C = _crc32c_table()


def _crc_update(crc: np.ndarray, data: np.ndarray, lengths: np.ndarray | None = None) -> np.ndarray:
    """Feed column j of `data` (n x w bytes) into each row's running CRC, where j < that row's length."""
    for j in range(data.shape[1]):
        nxt = _CRC32C[(crc ^ data[:, j]) & 0xFF] ^ (crc >> np.uint32(8))
        crc = nxt if lengths is None else np.where(j < lengths, nxt, crc)
    return crc


def _padded(chunks: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Byte strings as an n x max-length uint8 matrix (zero padded) and their lengths."""
    lengths = np.fromiter((len(c) for c in chunks), np.int64, len(chunks))
    width = int(lengths.max()) if len(lengths) else 0
    buf = np.frombuffer(b"".join(chunks) + b"\0", np.uint8)
    starts = np.cumsum(lengths) - lengths
    idx = np.minimum(starts[:, None] + np.arange(width)[None, :], len(buf) - 1)
    return np.where(np.arange(width)[None, :] < lengths[:, None], buf[idx], 0).astype(np.uint8), lengths


def crc32c(chunks: Sequence[bytes]) -> np.ndarray:
    """CRC32C (Castagnoli) of each byte string, vectorised over them."""
    data, lengths = _padded(chunks)
    crc = np.full(len(chunks), 0xFFFFFFFF, np.uint32)
    return _crc_update(crc, data, lengths) ^ np.uint32(0xFFFFFFFF)


def record_checksums(log: pd.DataFrame) -> np.ndarray:
    """Per log row, the CRC32C of record_id, timestamp, value_bytes (int64, int64, int32), then key and
    value each as an int32 length (-1 when null) and their bytes, all big-endian."""
    n = len(log)
    keys = [None if k is None or k is pd.NA or (isinstance(k, float) and np.isnan(k)) else str(k).encode()
            for k in log["key"]]
    values = [None if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)) else bytes(v)
              for v in log["value"]]
    fixed = np.zeros(n, [("id", ">i8"), ("ts", ">i8"), ("vb", ">i4"), ("kl", ">i4"), ("vl", ">i4")])
    fixed["id"] = log["record_id"].to_numpy("int64")
    fixed["ts"] = pd.to_numeric(log["timestamp"]).fillna(-1).to_numpy("int64")
    fixed["vb"] = pd.to_numeric(log["value_bytes"]).fillna(-1).to_numpy("int64")
    fixed["kl"] = [-1 if k is None else len(k) for k in keys]
    fixed["vl"] = [-1 if v is None else len(v) for v in values]
    crc = _crc_update(np.full(n, 0xFFFFFFFF, np.uint32), fixed.view(np.uint8).reshape(n, fixed.dtype.itemsize))
    for chunks in (keys, values):
        if any(c for c in chunks):
            data, lengths = _padded([c or b"" for c in chunks])
            crc = _crc_update(crc, data, lengths)
    return crc ^ np.uint32(0xFFFFFFFF)


# ---------------------------------------------------------------------- iteration order
def _topic_partition_hash(topic: str, partition: int) -> int:
    """``TopicPartition.hashCode``: 31 * (31 + partition) + topic.hashCode(), as int."""
    return (31 * (31 + partition) + string_hash(topic)) & 0xFFFFFFFF


# ---------------------------------------------------------------------- the verification pass
def verify(log: pd.DataFrame, replicas: pd.DataFrame, topics: Sequence[str], time_ms: int,
           topic_white_list: str = ".*") -> Verification:
    """One ``verifyCheckSum`` pass over `replicas` (broker, topic, partition, hw, log_start_offset:
    the hosted replicas) and their `log` rows, for the `topics` the white list matches."""
    pattern = topic_filter(topic_white_list)
    chosen = sorted(t for t in topics if pattern.fullmatch(t))
    if not chosen:
        return Verification([], 1, NO_TOPICS)
    ts = timestamp(time_ms)
    out = Verification([f"{ts}: verification process is started."])
    reps = replicas[replicas["topic"].isin(chosen)][["topic", "partition", "broker", "hw", "log_start_offset"]]
    parts = reps[["topic", "partition"]].drop_duplicates().sort_values(["topic", "partition"])
    hashes = [_topic_partition_hash(t, int(p)) for t, p in zip(parts["topic"], parts["partition"], strict=True)]
    slots = concurrent_hash_map_slots(np.array(hashes, np.int64), np.full(len(parts), len(parts)))
    parts = parts.iloc[np.lexsort((np.arange(len(parts)), slots))].reset_index(drop=True)
    parts = parts.assign(p_rank=np.arange(len(parts)))
    reps = reps.merge(parts, on=["topic", "partition"])
    # replica order within a partition: the tool's Pool[Int, ...] (Integer.hashCode is the id itself)
    count = reps.groupby("p_rank")["broker"].transform("size").to_numpy()
    reps = reps.assign(_slot=concurrent_hash_map_slots(reps["broker"].to_numpy(np.int64), count))
    reps = reps.sort_values(["p_rank", "_slot", "broker"], kind="stable")
    reps = reps.assign(r_rank=reps.groupby("p_rank").cumcount().to_numpy(),
                       start=reps.groupby("p_rank")["log_start_offset"].transform("max").to_numpy())

    lg = log[~log["is_future"]] if "is_future" in log else log
    lg = lg.merge(reps[["topic", "partition", "broker", "hw", "start", "p_rank", "r_rank"]],
                  on=["topic", "partition", "broker"])
    lg = lg[lg["offset"] >= lg["start"]].sort_values(["p_rank", "r_rank", "offset"], kind="stable")
    lg = lg.assign(step=lg.groupby(["p_rank", "r_rank"]).cumcount().to_numpy(), checksum=record_checksums(lg))
    lg = lg[lg["offset"] < lg["hw"]]  # batches from a replica's HW on end its walk
    full = (lg.groupby(["p_rank", "r_rank"]).size().reindex(pd.MultiIndex.from_frame(reps[["p_rank", "r_rank"]]),
                                                            fill_value=0).groupby(level=0).min())
    lg = lg[lg["step"] <= full.reindex(lg["p_rank"]).to_numpy()]  # the full steps, then the last, partial one
    ref = lg.drop_duplicates(["p_rank", "step"])[["p_rank", "step", "broker", "offset", "checksum"]]
    cmp = lg.merge(ref, on=["p_rank", "step"], suffixes=("", "_ref"))
    cmp = cmp[cmp["broker"] != cmp["broker_ref"]]
    bad = cmp[(cmp["offset"] != cmp["offset_ref"]) | (cmp["checksum"] != cmp["checksum_ref"])]
    for r in bad.sort_values(["p_rank", "step", "r_rank"], kind="stable").itertuples():
        tp = f"{r.topic}-{r.partition}"
        if r.offset != r.offset_ref:
            out.lines.append(f"{ts}: partition {tp}: replica {r.broker_ref}'s offset {r.offset_ref} doesn't match "
                             f"replica {r.broker}'s offset {r.offset}")
            out.exit_code = 1
            return out
        out.lines.append(f"{ts}: partition {tp} has unmatched checksum at offset {r.offset}; replica "
                         f"{r.broker_ref}'s checksum {r.checksum_ref}; replica {r.broker}'s checksum {r.checksum}")

    # verified offset: one past the reference batch of the last full step, else where the walk began
    last = ref[ref["step"] == full.reindex(ref["p_rank"]).to_numpy() - 1].set_index("p_rank")["offset"] + 1
    verified = last.reindex(parts["p_rank"]).fillna(reps.groupby("p_rank")["start"].first()).astype("int64")
    lag = (reps.groupby("p_rank")["hw"].max() - verified).to_numpy()
    max_lag, at, worst = -1, -1, "null"
    for i in range(len(parts)):  # first partition with the largest lag, as the tool's strict `>`
        if lag[i] > max_lag:
            max_lag, at, worst = int(lag[i]), int(verified.iat[i]), f"{parts['topic'].iat[i]}-{parts['partition'].iat[i]}"
    out.lines.append(f"{ts}: max lag is {max_lag} for partition {worst} at offset {at} among {len(parts)} partitions")
    return out


def verify_run(out: str, topic_white_list: str = ".*", option: str = "topic-white-list") -> Verification:
    """The tool over a run directory's final state; bad input (no run dir, a bad regex given as
    `option`) raises ScenarioError before any table is read."""
    from ..scenario.checker import final_replicas

    if not os.path.exists(os.path.join(out, "run.json")):
        raise ScenarioError("run", out, "is not a sparkkafka run directory (no run.json)")
    topic_filter(topic_white_list, option)
    with open(os.path.join(out, "run.json")) as f:
        meta = json.load(f)
    tables_dir = os.path.join(out, "tables")
    final = final_replicas(tables_dir)
    topics = list(meta["topics"]) if "topics" in meta else sorted(set(final["topic"]))
    log = T.read_table(tables_dir, "log").to_pandas()
    return verify(log, final, topics, int(meta.get("time_ms", 0)), topic_white_list)
