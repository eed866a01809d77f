"""Fault schedules for campaigns: a base scenario plus timeline faults, drawn at random or enumerated.

A schedule is a complete scenario mapping (what `sparkkafka run` reads from YAML): the base
scenario's cluster, topics and workload, with fault events added to its timeline in the scenario's
own event format (scenario/loader.py): crash, crash with power_loss, restart, pause, isolate and
heal, controller_failover, fail_log_dir. Every crashed broker is restarted before the schedule ends
and every isolation healed, so that the checker judges a cluster that had time to recover (an
offline partition's acked records are not judged: scenario/checker.py). Drawing is seeded per
schedule (numpy's generator seeded with [seed, schedule number]): schedule i of seed S is the same
whatever N is. Enumeration (`enumerate_schedules`) lists every sequence of a bounded fault alphabet
up to a depth, at fixed time slots: Jepsen-style random search next to a bounded exhaustive one.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ScenarioError
from ..protocol.config import EmulatorSettings

# the fault kinds a campaign draws from (KINDS) and what each adds to the timeline
KINDS = ("crash", "power_loss", "pause", "isolate", "controller_failover", "fail_log_dir")
FAULT_EVENTS = ("crash", "restart", "pause", "isolate", "heal", "controller_failover", "fail_log_dir")


@dataclass(frozen=True)
class Plan:
    """How faults are drawn: 1..`max_faults` faults of `kinds`, each starting at a round-aligned time
    in [`window_ms`[0], `window_ms`[1]) and lasting (a crash's downtime, a pause, an isolation)
    `round_ms`..`max_down_ms`; then `settle_ms` with every broker back and every partition healed. With
    `max_crashed`, a crash that would take down more brokers at once is left out (the faults a
    configuration claims to tolerate: f = 1 for replication factor 3 and min.insync.replicas 2)."""

    window_ms: tuple[int, int]
    max_faults: int = 3
    max_down_ms: int = 3000
    settle_ms: int = 6000
    kinds: tuple[str, ...] = KINDS
    round_ms: int = 100
    max_crashed: int | None = None  # at most this many brokers down at once (crash, power loss); None: any

    def __post_init__(self) -> None:
        bad = [k for k in self.kinds if k not in KINDS]
        if bad or not self.kinds:
            raise ScenarioError("kinds", ",".join(self.kinds), f"fault kinds are {', '.join(KINDS)}")
        if self.window_ms[1] <= self.window_ms[0] or self.window_ms[0] < 0:
            raise ScenarioError("window", f"{self.window_ms[0]}:{self.window_ms[1]}",
                                "expected FROM:UNTIL emulated ms with 0 <= FROM < UNTIL")
        for name in ("max_faults", "max_down_ms", "settle_ms", "max_crashed"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ScenarioError(name, getattr(self, name), "must be >= 1")


def brokers_of(base: dict) -> list[int]:
    b = base["cluster"]["brokers"]
    return list(b) if isinstance(b, list) else list(range(int(b)))


def log_dirs_of(base: dict) -> list[str]:
    return list(base["cluster"].get("log_dirs") or ["d0"])


def _ms(entry: dict, round_ms: int) -> int:
    return int(entry["at"]) if "at" in entry else int(entry.get("round", 0)) * round_ms


def default_plan(base: dict, **kw) -> Plan:
    """Faults while the base scenario's workload runs: from its first event to its last one's end."""
    round_ms = int(EmulatorSettings.of(base["cluster"].get("emulator")).round_ms)
    times = []
    for e in base.get("timeline") or []:
        t = _ms(e, round_ms)
        times.append(t)
        p = e.get("produce")
        if isinstance(p, dict) and p.get("duration_ms"):
            times.append(t + int(p["duration_ms"]))
    lo, hi = (min(times), max(times)) if times else (0, 5000)
    return Plan(window_ms=(lo, max(hi, lo + round_ms)), round_ms=round_ms, **kw)


def _fault(kind: str, t: int, down: int, rng: np.random.Generator, brokers: list[int],
           dirs: list[str]) -> list[dict]:
    """The timeline entries of one fault starting at `t` ms."""
    b = int(rng.choice(brokers))
    if kind in ("crash", "power_loss"):
        crash = {"broker": b, "power_loss": True} if kind == "power_loss" else b
        return [{"at": t, "crash": crash}, {"at": t + down, "restart": b}]
    if kind == "pause":
        return [{"at": t, "pause": {"broker": b, "duration_ms": down}}]
    if kind == "isolate":
        side = "controller" if rng.random() < 0.5 else [x for x in brokers if x != b]
        return [{"at": t, "isolate": {"brokers": [b], "from": side}}, {"at": t + down, "heal": {}}]
    if kind == "controller_failover":
        return [{"at": t, "controller_failover": {}}]
    return [{"at": t, "fail_log_dir": {"broker": b, "log_dir": str(rng.choice(dirs))}}]


def with_faults(base: dict, faults: list[dict], settle_ms: int, name: str) -> dict:
    """The base scenario with `faults` added to its timeline, every crashed broker restarted and every
    isolation healed at the end of the faults, and the run lasting `settle_ms` after that."""
    sc = copy.deepcopy(base)
    sc["name"] = name
    round_ms = int(EmulatorSettings.of(sc["cluster"].get("emulator")).round_ms)
    last = max([_ms(e, round_ms) for e in [*(sc.get("timeline") or []), *faults]] or [0])
    recover = last + round_ms
    tail = [{"at": recover, "heal": {}}, *({"at": recover, "restart": b} for b in brokers_of(sc))]
    base_timeline = list(sc.get("timeline") or [])
    added = [*sorted(faults, key=lambda e: _ms(e, round_ms)), *tail]
    sc["timeline"] = base_timeline + _taking_effect(base_timeline, added, round_ms)
    sc["run"] = {"until_ms": recover + settle_ms}
    return sc


def _broker_of(entry: dict, kind: str) -> int:
    v = entry[kind]
    return int(v["broker"] if isinstance(v, dict) else v)


def _taking_effect(base: list[dict], added: list[dict], round_ms: int) -> list[dict]:
    """`added` without the steps that would change nothing when they run (a crash or pause of a broker
    already down, a restart of a running one), which the scenario's sequence check refuses. The run is
    the same: the driver ignores such steps. Walked in run order (time, then position) over the base
    timeline too; a broker whose log dir failed may have stopped (KIP-112), so its steps are all kept."""
    entries = [(e, False) for e in base] + [(e, True) for e in added]
    order = sorted(range(len(entries)), key=lambda i: (_ms(entries[i][0], round_ms), i))
    down: set[int] = set()
    unknown: set[int] = set()
    keep: set[int] = set()
    for i in order:
        e, ours = entries[i]
        kind = next((k for k in ("crash", "shutdown", "restart", "pause", "fail_log_dir") if k in e), None)
        b = _broker_of(e, kind) if kind else None
        if kind == "fail_log_dir":
            unknown.add(b)
        effective = (kind is None or b in unknown
                     or (kind == "restart") == (b in down))
        if effective and kind in ("crash", "shutdown"):
            down.add(b)
        elif effective and kind == "restart":
            down.discard(b)
        if ours and effective:
            keep.add(i)
    return [entries[i][0] for i in range(len(base), len(entries)) if i in keep]


def draw_schedule(base: dict, plan: Plan, seed: int, number: int) -> dict:
    """Schedule `number` of the campaign seeded `seed` (deterministic, independent of the others)."""
    rng = np.random.default_rng([seed, number])
    brokers, dirs = brokers_of(base), log_dirs_of(base)
    kinds = [k for k in plan.kinds if k != "fail_log_dir" or len(dirs) > 1]  # one dir: the broker just exits
    lo, hi = plan.window_ms[0] // plan.round_ms, -(-plan.window_ms[1] // plan.round_ms)
    faults: list[dict] = []
    crashed: list[tuple[int, int, int]] = []  # (broker, from, until) of the crashes kept
    for _ in range(int(rng.integers(1, plan.max_faults + 1))):
        t = int(rng.integers(lo, hi)) * plan.round_ms
        down = int(rng.integers(1, plan.max_down_ms // plan.round_ms + 1)) * plan.round_ms
        entries = _fault(str(rng.choice(kinds)), t, down, rng, brokers, dirs)
        if "crash" in entries[0]:
            c = entries[0]["crash"]
            b = c["broker"] if isinstance(c, dict) else c
            also = {x for x, a, z in crashed if a < t + down and t < z} | {b}
            if plan.max_crashed is not None and len(also) > plan.max_crashed:
                continue
            crashed.append((b, t, t + down))
        faults += entries
    return with_faults(base, faults, plan.settle_ms, f"{base.get('name', 'campaign')}-s{seed}-{number:05d}")


def draw_schedules(base: dict, plan: Plan, seed: int, n: int, first: int = 0) -> list[dict]:
    """Schedules first .. first + n - 1 of the campaign seeded `seed` (a long campaign runs in parts)."""
    return [draw_schedule(base, plan, seed, i) for i in range(first, first + n)]


# ------------------------------------------------------------------------------------------------
# bounded exhaustive exploration


def alphabet(brokers: Sequence[int], power_loss: bool = True, failover: bool = False) -> list[dict]:
    """The fault steps of an exploration: crash, (power loss,) restart each broker, (controller failover)."""
    steps: list[dict] = [{"crash": b} for b in brokers]
    if power_loss:
        steps += [{"crash": {"broker": b, "power_loss": True}} for b in brokers]
    steps += [{"restart": b} for b in brokers]
    if failover:
        steps.append({"controller_failover": {}})
    return steps


def _effective(seq: Sequence[dict], brokers: Sequence[int]) -> bool:
    """Whether every step changes something: no crash of a down broker, no restart of a running one."""
    down: set[int] = set()
    for s in seq:
        if "crash" in s:
            b = s["crash"]["broker"] if isinstance(s["crash"], dict) else s["crash"]
            if b in down:
                return False
            down.add(b)
        elif "restart" in s:
            if s["restart"] not in down:
                return False
            down.discard(s["restart"])
    return True


def label(step: dict) -> str:
    """A step as a short word: crash1, power1, restart1, failover."""
    if "crash" in step:
        c = step["crash"]
        return f"power{c['broker']}" if isinstance(c, dict) and c.get("power_loss") else f"crash{c}"
    if "restart" in step:
        return f"restart{step['restart']}"
    return "failover"


def enumerate_schedules(base: dict, steps: Sequence[dict], depth: int, slots_ms: Sequence[int],
                        settle_ms: int) -> Iterator[tuple[str, dict]]:
    """Every sequence of 1..`depth` steps whose steps all take effect, step i at `slots_ms`[i] (fixed
    slots: the bound is the alphabet, the depth and the slots), as (sequence label, scenario)."""
    if depth < 1 or depth > len(slots_ms):
        raise ScenarioError("depth", depth, f"must be between 1 and the {len(slots_ms)} time slots")
    brokers = brokers_of(base)
    for k in range(1, depth + 1):
        for seq in itertools.product(steps, repeat=k):
            if not _effective(seq, brokers):
                continue
            words = "-".join(label(s) for s in seq)
            faults = [{"at": int(t), **copy.deepcopy(s)} for t, s in zip(slots_ms, seq, strict=False)]
            yield words, with_faults(base, faults, settle_ms, f"{base.get('name', 'explore')}-{words}")


__all__ = ["FAULT_EVENTS", "KINDS", "Plan", "alphabet", "default_plan", "draw_schedule", "draw_schedules",
           "enumerate_schedules", "label", "with_faults"]
