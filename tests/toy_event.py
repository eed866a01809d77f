"""A toy fault kind, registered as a plugin would: `crash_all_but: {keep: B}` crashes every broker but one.
The whole kind is this file: its value's shape, its check in the timeline's sequence, its action and its
docs row (tests/test_event_kinds.py runs it through the CLI)."""

from __future__ import annotations

from sparkkafka.scenario.event_kind import EventKind, child, register
from sparkkafka.scenario.schema import BrokerId, Shape


class CrashAllBut(Shape):
    keep: BrokerId


def check(seq, m: CrashAllBut, path: str) -> dict:
    """`keep` a broker of the cluster; the others must be up here, and are down after it (a restart may follow)."""
    keep = seq.broker(m.keep, child(path, "keep"))
    for b in seq.brokers:
        if b != keep:
            seq.broker_state(b, child(path, "keep"), "crash")
    return {"keep": keep}


def apply(run, args: dict, now: int) -> None:
    for b in run.brokers:
        if b != args["keep"]:
            run.crash(b, now)


KIND = EventKind("crash_all_but", CrashAllBut, check, apply, "`crash_all_but: {keep}`",
                 "every broker but `keep` crashes at once")


def install() -> EventKind:
    return register(KIND)
