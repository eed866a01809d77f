"""The Databricks-style notebook runs as a plain Python file (CI) and its chispa checks pass."""

from __future__ import annotations

import os
import runpy
import shlex
import tomllib
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


def test_notebook_installs_what_sparkkafka_needs_but_pyspark():
    """Its %pip cells (comments on plain Python) install every dependency pyproject declares except PySpark
    (a Databricks cluster's own must stay), chispa for its checks, then sparkkafka itself, from the Git
    folder's root (the notebook's directory is the working directory there), with --no-deps."""
    nb = ROOT / "jobs" / "notebooks" / "quickstart.py"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    chispa = [d for d in project["optional-dependencies"]["test"] if d.startswith("chispa")]
    cells = [c.strip() for c in nb.read_text().split("# COMMAND ----------")]
    pips = [shlex.split(c.removeprefix("# MAGIC %pip install")) for c in cells if c.startswith("# MAGIC %pip")]
    assert len(pips) == 2 and pips[1] == ["--no-deps", "../.."]
    assert sorted(pips[0]) == sorted([d for d in project["dependencies"] if not d.startswith("pyspark")] + chispa)
    assert (nb.parent / ".." / "..").resolve() == ROOT
