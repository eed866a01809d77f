"""The driver's side of a run (between the Cluster facade and the engine's Spark jobs): the round loop
(round_loop.py), the scenario's timeline (timeline.py) and the idle jump (idle_jumps.py)."""

from .round_loop import RoundLoop

__all__ = ["RoundLoop"]
