"""Quiescence and the idle jump: rounds in which nothing can change are skipped (docs/engine.md,
"Idle rounds are skipped").

An idle Kafka cluster (no produce, every replica caught up, HW == LEO, no ISR change, no move, no
controller work) still does things as time passes, all of them periodic:

* every follower keeps one fetch outstanding per leader (AbstractFetcherThread); the leader finds
  nothing to return and parks it in its fetch purgatory (DelayedFetch) until
  replica.fetch.wait.max.ms passes, then answers it empty, and the follower sends the next one.
  In rounds: sent in round a, parked in a+1 with deadline now + wait, answered in the first round at
  or after the deadline, the answer read in the next round, where the next fetch goes out. The cycle
  is `fetch_cycle_rounds` = 2 + ceil(wait / round.ms) rounds (2 when wait <= 0), the same for every
  (follower, leader) pair. Each fetch that arrives at the LEO refreshes the leader's view of the
  follower (Replica.updateFetchState: lastCaughtUpTimeMs, lastFetchTimeMs, 0.8's
  logEndOffsetUpdateTimeMs), so no ISR shrinks;
* the leader's isr-expiration check (ReplicaManager.maybeShrinkIsr every replica.lag.time.max.ms / 2)
  and the HW checkpoint (replica.high.watermark.checkpoint.interval.ms) fire on fixed intervals and
  change nothing but their own timestamps (and rewrite identical checkpoint files).

So the state after D more idle rounds is known without running them, provided D is a multiple of
the fetch cycle (`jump_rounds`): every pair is then at the same point of its cycle, all its times
moved by D rounds (`shift_time`), and the interval timers have fired floor(...) more times
(`advance_timer`). Everything else stays as it is: records, offsets, epochs, ISR, backoff deadlines
already passed, flush times of clean logs, the tail.

`quiescence` is what one task says about the brokers it hosts after a round: how many things would
still change (blockers) and signatures of both ends of every fetch cycle. A pair's ends live on
different tasks (the follower's state and its request or the answer in flight on one, the leader's
parked request and its view of the follower on another), so each task sums a hash of the keys it
holds and the driver checks the sums agree (`cluster_idle`): every follower's fetch is outstanding
somewhere it will be answered from, and the leader's view of a follower is refreshed exactly when a
follower fetches. Nothing here reads a clock; `now` is the round's emulated time.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from .config import LONG_MAX, RoundSettings
from .frames import FETCHING, REMOTE, REPLICA, array, conform, ids, locate, str_len

MASK = (1 << 64) - 1  # signatures are sums of 64-bit hashes, mod 2**64
SIGNATURES = (("idle_fetch_sig", "idle_entry_sig"), ("idle_pair_sig", "idle_remote_sig"))
KEYS = ("idle_checked", "idle_blockers") + tuple(k for pair in SIGNATURES for k in pair)


def fetch_cycle_rounds(wait: int, round_ms: int) -> int:
    """Rounds of one idle fetch cycle: the request's hop, the purgatory wait (replica.fetch.wait.max.ms),
    the answer's hop."""
    return 2 if wait <= 0 else 2 + -(-wait // round_ms)


def jump_rounds(span: int, cycle: int) -> int:
    """Rounds that may be skipped out of `span` idle ones: whole fetch cycles only."""
    return max(0, span) // cycle * cycle


def advance_timer(last: np.ndarray, interval: int, round_ms: int, until: int) -> np.ndarray:
    """A timer that fires in the first round with now - last >= interval and then sets last := now
    (the HW checkpoint, the isr-expiration check), as it is after the rounds up to `until` ran.
    `last` is a round time, so it fires every ceil(interval / round_ms) rounds; -1 (never) stays."""
    step = max(1, -(-int(interval) // round_ms)) * round_ms
    fired = np.maximum(until - last, 0) // step
    return np.where(last >= 0, last + fired * step, last)


def isr_check_interval(cfg: RoundSettings) -> int:
    """maybeShrinkIsr's period: replica.lag.time.max.ms / 2 (the whole lag before 0.10.2, KAFKA-4485)."""
    return int(cfg.replica_lag_time_max_ms) // cfg.rules.isr_check_period_divisor


def _signature(cols: list[np.ndarray]) -> int:
    """Sum (mod 2**64) of a hash of each row of `cols` (ints, then topic, then ints)."""
    if len(cols[0]) == 0:
        return 0
    df = pd.DataFrame({f"c{i}": (c.astype(object) if c.dtype == object else c.astype("int64"))
                       for i, c in enumerate(cols)})
    h = pd.util.hash_pandas_object(df, index=False).to_numpy(dtype="uint64")
    return int(h.sum(dtype="uint64")) & MASK


def _cut(src: np.ndarray, dst: np.ndarray, unreachable: Mapping[int, frozenset]) -> np.ndarray:
    """Whether src cannot reach dst (a crash or a network partition: the message is dropped)."""
    if not unreachable or len(src) == 0:
        return np.zeros(len(src), dtype=bool)
    return np.array([int(d) in unreachable.get(int(s), ()) for s, d in zip(src, dst, strict=True)], dtype=bool)


def _followers(replicas: pd.DataFrame) -> np.ndarray:
    leader = array(replicas, "leader")
    return (leader >= 0) & (leader != array(replicas, "broker"))


def live_remotes(remotes: pd.DataFrame, now: int, cycle_ms: int, unreachable: Mapping[int, frozenset]) -> np.ndarray:
    """The leader's views of followers that fetch in the idle cycle: fetched within the last cycle and
    reachable (a crashed or cut-off follower fetches no more; its view must not be refreshed)."""
    recent = array(remotes, "last_fetch_ms") > now - cycle_ms
    return recent & ~_cut(array(remotes, "broker"), array(remotes, "replica"), unreachable)


def quiescence(replicas: pd.DataFrame, remotes: pd.DataFrame, parked: pd.DataFrame, pending: pd.DataFrame,
               futures: pd.DataFrame, brokers: pd.DataFrame, fetches: pd.DataFrame, responses: pd.DataFrame,
               records: pd.DataFrame, others: int, now: int, cfg: RoundSettings,
               unreachable: Mapping[int, frozenset]) -> dict[str, int]:
    """One task's report after the round at `now` over the frames it hosts (replicas, remotes, parked
    fetches, pending produce, future logs, broker rows) and the messages it sent (fetch requests,
    fetch responses, their records; `others`: how many other messages or rows for the driver, e.g.
    OffsetsForLeaderEpoch, ISR changes). Keys: KEYS; `cluster_idle` combines the tasks' sums."""
    round_ms = int(cfg.round_ms)
    cycle_ms = fetch_cycle_rounds(cfg.replica_fetch_wait_max_ms, round_ms) * round_ms
    r = replicas
    fol = _followers(r)
    lead = array(r, "leader") == array(r, "broker")
    role = array(r, "leader") >= 0
    flush_ms = cfg.topic_flush
    timed_topics = [t for t, (_, x) in flush_ms.items() if x is not None and int(x) < LONG_MAX]
    timed = r["topic"].isin(timed_topics).to_numpy() if timed_topics else np.zeros(len(r), dtype=bool)
    dirty = array(r, "leo") > array(r, "recovery_point")
    blockers = [
        others, len(pending), len(futures), len(records),
        int((str_len(array(r, "pending_isr")) > 0).sum()),  # fillna("") != "", per distinct value
        int((role & (array(r, "hw") != array(r, "leo"))).sum()),  # a HW still to move
        int((dirty & timed).sum()), int((array(r, "last_flush_ms") < 0).sum()),  # a flush due
        int((lead & (array(r, "isr_check_ms") < 0)).sum()),
        int((fol & ((array(r, "fetch_state") != FETCHING) | ~r["fetch_in_flight"].to_numpy(dtype=bool)
                    | (array(r, "backoff_until_ms") > now))).sum()),
        int((array(brokers, "hw_checkpoint_ms") < 0).sum()),
        int(responses["error"].notna().sum() + (array(responses, "diverging_end_offset") >= 0).sum()),
    ]
    if sum(blockers):
        return {"idle_checked": 1, "idle_blockers": int(sum(blockers))}
    # the leader's view of each follower: a live one is in the ISR and caught up, any other is out of it
    live = live_remotes(remotes, now, cycle_ms, unreachable)
    pos = locate(r, remotes)
    ok = pos >= 0
    leo = np.where(ok, array(r, "leo")[np.maximum(pos, 0)] if len(r) else -1, -1)
    isr = np.where(ok, array(r, "isr")[np.maximum(pos, 0)] if len(r) else "", "")
    in_isr = np.array([int(x) in ids(s) for x, s in zip(remotes["replica"], isr, strict=True)], dtype=bool)
    blockers.append(int((~ok | (live & (~in_isr | (array(remotes, "leo") != leo)))
                         | (~live & (in_isr | remotes["in_isr"].to_numpy(dtype=bool)))).sum()))
    # both ends of every fetch cycle: (follower, leader, topic, partition[, request's sent_ms])
    f = r[fol]
    out_f = fetches[~_cut(array(fetches, "src"), array(fetches, "broker"), unreachable)]
    out_r = responses[~_cut(array(responses, "src"), array(responses, "broker"), unreachable)]
    entries = [np.concatenate(x) for x in zip(
        (array(out_f, "src"), array(out_f, "broker"), array(out_f, "topic"), array(out_f, "partition"),
         array(out_f, "sent_ms")),
        (array(parked, "src"), array(parked, "broker"), array(parked, "topic"),
         array(parked, "partition"), array(parked, "sent_ms")),
        (array(out_r, "broker"), array(out_r, "src"), array(out_r, "topic"), array(out_r, "partition"),
         array(out_r, "sent_ms")), strict=True)]
    entries[2] = entries[2].astype(object)
    pair = [array(f, "broker"), array(f, "leader"), array(f, "topic"), array(f, "partition")]
    lr = remotes[live]
    return {
        "idle_checked": 1, "idle_blockers": int(sum(blockers)),
        "idle_fetch_sig": _signature([*pair, array(f, "fetch_sent_ms")]),
        "idle_entry_sig": _signature(entries),
        "idle_pair_sig": _signature(pair),
        "idle_remote_sig": _signature([array(lr, "replica"), array(lr, "broker"), array(lr, "topic"),
                                       array(lr, "partition")]),
    }


def cluster_idle(totals: Mapping[str, int]) -> bool:
    """Whether the tasks' summed reports (`quiescence`) say nothing in the cluster can change but the
    idle cycles: some task reported, none has a blocker, and both ends of every fetch cycle agree."""
    if int(totals.get("idle_checked", 0)) < 1 or int(totals.get("idle_blockers", 1)) != 0:
        return False
    return all((int(totals.get(a, 0)) - int(totals.get(b, 0))) & MASK == 0 for a, b in SIGNATURES)


def shift_time(replicas: pd.DataFrame, remotes: pd.DataFrame, parked: pd.DataFrame, fetches: pd.DataFrame,
               responses: pd.DataFrame, brokers: pd.DataFrame, rounds: int, last_ms: int, cfg: RoundSettings,
               unreachable: Mapping[int, frozenset]
               ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The frames of an idle cluster after the round at `last_ms` as they are `rounds` rounds later
    (a multiple of the fetch cycle, `jump_rounds`), without running them. Per field:

    * a follower's outstanding fetch (fetch_sent_ms), the request in flight or parked at its leader
      (sent_ms, deadline_ms) and its answer in flight (sent_ms): the cycle repeats, all move by dt;
    * the leader's view of a live follower (last_caught_up_ms, last_fetch_ms, leo_changed_ms): set to
      `now` by each fetch at the LEO, so they move by dt; a dead follower's view does not change;
    * isr_check_ms of led partitions and the brokers' hw_checkpoint_ms: the timers fire on their
      interval (`advance_timer`); a checkpoint in the span rewrites the same HWs (the engine writes it);
    * backoff_until_ms (already passed), last_flush_ms (clean logs or no flush.ms), log offsets,
      epochs, ISR, the tail's records: unchanged, as the skipped rounds leave them.
    Returns (replicas, remotes, parked, fetches, responses, brokers)."""
    round_ms = int(cfg.round_ms)
    dt = int(rounds) * round_ms
    until = last_ms + dt
    cycle_ms = fetch_cycle_rounds(cfg.replica_fetch_wait_max_ms, round_ms) * round_ms
    r = replicas.copy()
    fol = _followers(r) & r["fetch_in_flight"].to_numpy(dtype=bool)
    r.loc[fol, "fetch_sent_ms"] = r.loc[fol, "fetch_sent_ms"] + dt
    lead = (r["leader"] == r["broker"]).to_numpy()
    r.loc[lead, "isr_check_ms"] = advance_timer(r.loc[lead, "isr_check_ms"].to_numpy(), isr_check_interval(cfg),
                                                round_ms, until)
    rem = remotes.copy()
    live = live_remotes(rem, last_ms, cycle_ms, unreachable)
    for c in ("last_caught_up_ms", "last_fetch_ms", "leo_changed_ms"):
        rem.loc[live, c] = rem.loc[live, c] + dt
    park = parked.assign(sent_ms=parked["sent_ms"] + dt, deadline_ms=parked["deadline_ms"] + dt)
    fet = fetches.assign(sent_ms=fetches["sent_ms"] + dt)
    resp = responses.assign(sent_ms=responses["sent_ms"] + dt)
    b = brokers.assign(hw_checkpoint_ms=advance_timer(
        array(brokers, "hw_checkpoint_ms"), int(cfg.replica_high_watermark_checkpoint_interval_ms),
        round_ms, until))
    return conform(r, REPLICA), conform(rem, REMOTE), park, fet, resp, b
