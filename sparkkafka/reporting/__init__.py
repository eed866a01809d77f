"""Operators' pictures of a run (docs/cli.md, "report"): ``report(RUN)`` writes RUN/report/index.html and a
PNG per plot; ``figures(RUN)`` returns the same plots as matplotlib Figures (for a notebook's ``display``).
Reads the run's Delta tables with delta-rs: no Spark needed."""

from __future__ import annotations

from matplotlib.figure import Figure

from . import plots
from .html import Report, write_report
from .run_data import RunData, load_run


def report(run_dir: str, out: str | None = None, before_ms: int | None = None) -> Report:
    """Write the run's report (default into RUN/report) and return where: ``.html`` and ``.pngs``."""
    return write_report(run_dir, out, before_ms)


def figures(run_dir: str, before_ms: int | None = None) -> dict[str, Figure]:
    """The report's plots of a run directory as matplotlib Figures, by plot name."""
    return plots.figures(load_run(run_dir, before_ms))


__all__ = ["Report", "RunData", "figures", "load_run", "plots", "report"]
