"""The Databricks-style notebook runs as a plain Python file (CI) and its chispa checks pass."""

from __future__ import annotations

import os
import runpy
from pathlib import Path

from sparkkafka.reporting.plots import TITLES

ROOT = Path(__file__).resolve().parents[1]


def test_quickstart_notebook_runs_as_python(spark, tmp_out, monkeypatch):
    nb = ROOT / "jobs" / "notebooks" / "quickstart.py"
    assert nb.read_text().startswith("# Databricks notebook source\n")
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("SPARKKAFKA_OUT", tmp_out)
    ns = runpy.run_path(str(nb), run_name="__main__")
    assert ns["summary"]["acked"] > 0 and ns["summary"]["lost_acked"] == 0
    # its plots: shown with display() (here saved as PNGs) and written as the report page
    assert list(ns["figs"]) == list(TITLES)
    assert sorted(os.listdir(os.path.join(tmp_out, "notebook"))) == sorted(f"{n}.png" for n in TITLES)
    page = Path(ns["written"].html).read_text()
    assert page.count('<img src="data:image/png;base64,') == len(TITLES)
