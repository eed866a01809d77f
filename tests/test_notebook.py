"""The Databricks-style notebook runs as a plain Python file (CI) and its chispa checks pass."""

from __future__ import annotations

import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_quickstart_notebook_runs_as_python(spark, tmp_out, monkeypatch):
    nb = ROOT / "jobs" / "notebooks" / "quickstart.py"
    assert nb.read_text().startswith("# Databricks notebook source\n")
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("SPARKKAFKA_OUT", tmp_out)
    ns = runpy.run_path(str(nb), run_name="__main__")
    assert ns["summary"]["acked"] > 0 and ns["summary"]["lost_acked"] == 0
