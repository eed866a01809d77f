"""The emulator's per-partition (leader, leader epoch, ISR) sequence beside the one observed on real Kafka,
with the tolerances stated here (docs/fidelity.md):

* the sequences of states must be equal, an emulator state that lasted less than the sampling interval
  paired when Kafka shows it and left out when not (the sampler may not see it); so is an emulator state
  whose start and end are both within the tolerance of the one Kafka change that skipped it (the two
  changes fell within a sampling interval on Kafka: an ISR join and the leader-imbalance check after it
  are up to one check period apart, as the check's phase falls);
* each change's time may differ by at most `tolerance_ms(config, restart_delay_ms)`: 2,000 ms (ZooKeeper's
  tickTime of session expiry granularity, the controller's processing, the sampling interval) plus half of
  `replica.lag.time.max.ms` (Kafka's ISR shrink check runs every half of it) plus the longest measured
  restart delay of a real broker (the JVM start the emulator does not have); given `restart=(from_ms,
  delay_ms)`, the delay is allowed only to changes the emulator makes from `from_ms` (the first restart) on,
  the earlier ones are held to the tolerance without it;
* the replicas a reassignment plan names, at the end: a replica the plan adds must hold the same log bytes on
  both sides within one `replica.fetch.max.bytes` (a throttled leader serves one whole fetch before its
  rate sensor is full, ReplicationQuotaManager, where the emulator never exceeds the rate: docs/fidelity.md),
  and a replica the plan gives a log dir (KIP-113) must be in the same dir on both sides;
* a deleted topic's partitions end in DELETED on both sides (the emulator's partition_state row of the
  deletion; on Kafka the sample that finds the topic's znode gone, observe.py), a change like another;
* at the end of a run (`end_ms`): the real side is observed one tolerance longer than the emulator ran, so
  every emulator state must show on Kafka; real states past the emulator's last one that start later than
  `end_ms - tol_ms` are not compared (the emulator, stopped at `end_ms`, could make them that much later).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

State = tuple[int, int, tuple[int, ...]]  # leader, leader epoch, sorted ISR
Seq = list[tuple[int, State]]  # (time_ms, state), in time order
# a deleted partition's last state: LeaderAndIsr.LeaderDuringDelete and EpochDuringDelete (-2), no ISR
DELETED: State = (-2, -2, ())


def tolerance_ms(config: Mapping, restart_delay_ms: int = 0) -> int:
    """How far apart in time one change may be on the two sides."""
    lag = int(config.get("replica.lag.time.max.ms", 30000))
    return 2000 + lag // 2 + max(int(restart_delay_ms), 0)


def visible(seq: Seq, interval_ms: int) -> Seq:
    """`seq` without consecutive repeats and without states shorter than `interval_ms` (not the last)."""
    out: Seq = []
    for i, (t, s) in enumerate(seq):
        nxt = seq[i + 1][0] if i + 1 < len(seq) else None
        if nxt is not None and nxt - t < interval_ms and seq[i + 1][1] != s:
            continue
        if out and out[-1][1] == s:
            continue
        out.append((max(t, 0), s))
    return out


@dataclass(frozen=True)
class Mismatch:
    partition: tuple[str, int]
    message: str


def aligned(real: Seq, emulated: Seq, tol_ms: int, interval_ms: int = 200,
            end_ms: int | None = None) -> tuple[Seq, Seq, Seq]:
    """The visible sequences the comparison pairs up, and the real states past the end it leaves out.

    An emulator state shorter than `interval_ms` may or may not have been seen on Kafka, where the same
    step lasts longer (a reassignment's completion: the new replica joins the ISR, the controller elects
    it, then drops the old one, 0 ms apart in one emulator round, ~235 ms apart on Kafka): it pairs with a
    real state when Kafka shows it and is left out when not."""
    r = visible(real, 0)
    full = visible(emulated, 0)
    short = [i + 1 < len(full) and full[i + 1][0] - t < interval_ms for i, (t, _) in enumerate(full)]
    cut = len(r)
    while True:
        pairs = _pairs(r[:cut], full, short, tol_ms)
        if pairs is not None or end_ms is None or cut == 0 or r[cut - 1][0] <= end_ms - tol_ms:
            break
        cut -= 1
    if pairs is None:
        return r[:cut], visible(emulated, interval_ms), r[cut:]
    return r[:cut], [full[j] for j in pairs], r[cut:]


def _pairs(real: Seq, emulated: Seq, short: list[bool], tol_ms: int) -> list[int] | None:
    """For each real state in order, the index of the emulator state it pairs with; every emulator state
    pairs, or is short, or repeats the state paired before it (a short one between them left out), or is
    collapsed: Kafka went past it in one change (to the next real state) within `tol_ms` of both its start
    and its end. None when no such pairing exists."""
    def collapsed(i: int, j: int) -> bool:
        return (0 < i < len(real) and j + 1 < len(emulated) and abs(real[i][0] - emulated[j][0]) <= tol_ms
                and abs(real[i][0] - emulated[j + 1][0]) <= tol_ms)

    @functools.cache
    def go(i: int, j: int) -> tuple[int, ...] | None:
        if j == len(emulated):
            return () if i == len(real) else None
        if i < len(real) and real[i][1] == emulated[j][1]:
            rest = go(i + 1, j + 1)
            if rest is not None:
                return (j, *rest)
        if short[j] or (i > 0 and real[i - 1][1] == emulated[j][1]) or collapsed(i, j):
            return go(i, j + 1)
        return None

    found = go(0, 0)
    return None if found is None else list(found)


def allowed_ms(tol_ms: int, restart: tuple[int, int] | None, emulated_ms: int) -> int:
    """The tolerance of one change the emulator made at `emulated_ms` (module docstring)."""
    return tol_ms + restart[1] if restart is not None and emulated_ms >= restart[0] else tol_ms


def compare_partition(key: tuple[str, int], real: Seq, emulated: Seq, tol_ms: int,
                      interval_ms: int = 200, end_ms: int | None = None,
                      restart: tuple[int, int] | None = None) -> list[Mismatch]:
    """Mismatches of one partition's sequences (empty when they agree within the tolerance)."""
    r, e, _ = aligned(real, emulated, tol_ms + (restart[1] if restart else 0), interval_ms, end_ms)
    if [s for _, s in r] != [s for _, s in e]:
        return [Mismatch(key, f"states differ: real {[s for _, s in r]} emulator {[s for _, s in e]}")]
    out = []
    for (tr, s), (te, _) in zip(r, e, strict=True):
        tol = allowed_ms(tol_ms, restart, te)
        if abs(tr - te) > tol:
            out.append(Mismatch(key, f"{s} at {tr} ms on Kafka, {te} ms on the emulator: more than {tol} ms apart"))
    return out


def compare(real: Mapping[tuple[str, int], Seq], emulated: Mapping[tuple[str, int], Seq],
            tol_ms: int, interval_ms: int = 200, end_ms: int | None = None,
            restart: tuple[int, int] | None = None) -> list[Mismatch]:
    """Every partition of either side."""
    out: list[Mismatch] = []
    for key in sorted(set(real) | set(emulated)):
        out += compare_partition(key, list(real.get(key, [])), list(emulated.get(key, [])), tol_ms, interval_ms,
                                 end_ms, restart)
    return out


def compare_replicas(key: tuple[str, int], real: Mapping[int, Mapping], emulated: Mapping[int, Mapping],
                     added: Sequence[int], dirs: Mapping[int, str], max_bytes: int) -> list[Mismatch]:
    """Mismatches of the replicas a plan named (module docstring): `real`/`emulated` map a broker to its
    replica's {"dir", "bytes"} at the end; `added` are the replicas the plan adds, `dirs` the log dirs it
    names."""
    out = []
    none = {"dir": None, "bytes": 0}
    for b in added:
        kb, eb = real.get(b, none)["bytes"], emulated.get(b, none)["bytes"]
        if abs(kb - eb) > max_bytes:
            out.append(Mismatch(key, f"new replica on broker {b} holds {kb} bytes on Kafka, {eb} on the emulator: "
                                     f"more than replica.fetch.max.bytes {max_bytes} apart"))
    for b, d in sorted(dirs.items()):
        kd, ed = real.get(b, none)["dir"], emulated.get(b, none)["dir"]
        if kd != ed:
            out.append(Mismatch(key, f"replica on broker {b} (moved to {d}) is in {kd} on Kafka, "
                                     f"{ed} on the emulator"))
    return out


def from_changes(changes: Sequence) -> dict[tuple[str, int], Seq]:
    """observe.Change rows (or the emulator's partition_state rows as tuples) grouped per partition."""
    out: dict[tuple[str, int], Seq] = {}
    for c in changes:
        out.setdefault((c.topic, c.partition), []).append(
            (int(c.time_ms), (int(c.leader), int(c.leader_epoch), tuple(sorted(int(b) for b in c.isr)))))
    return {k: sorted(v, key=lambda x: x[0]) for k, v in out.items()}
