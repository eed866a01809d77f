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
    (a Databricks cluster's own must stay; chispa for its checks is one of them), then sparkkafka itself,
    from the Git folder's root (the notebook's directory is the working directory there), with --no-deps."""
    nb = ROOT / "jobs" / "notebooks" / "quickstart.py"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    cells = [c.strip() for c in nb.read_text().split("# COMMAND ----------")]
    pips = [shlex.split(c.removeprefix("# MAGIC %pip install")) for c in cells if c.startswith("# MAGIC %pip")]
    assert len(pips) == 2 and pips[1] == ["--no-deps", "../.."]
    assert sorted(pips[0]) == sorted(d for d in project["dependencies"] if not d.startswith("pyspark"))
    assert (nb.parent / ".." / "..").resolve() == ROOT


def test_every_module_the_notebook_and_docs_import_is_installed_by_pip_install_dot():
    """README command 1 (`pip install -e .`, no extras) installs what the notebook and the docs' Python
    blocks import: each third-party module maps to a distribution among pyproject's dependencies."""
    import ast
    import importlib.metadata as md
    import re
    import sys

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {re.split(r"[\[<>=!~ ;]", d, maxsplit=1)[0].lower().replace("_", "-") for d in project["dependencies"]}
    sources = [(ROOT / "jobs" / "notebooks" / "quickstart.py").read_text()]
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        sources += re.findall(r"```python\n(.*?)```", doc.read_text(), flags=re.S)
    modules = set()
    for src in sources:
        try:
            tree = ast.parse(src)
        except SyntaxError:  # a block with a `...` placeholder line or prose: its import lines still count
            tree = ast.parse("\n".join(line for line in src.splitlines() if line.startswith(("import ", "from "))))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    dists = md.packages_distributions()
    third_party = {m for m in modules if m not in sys.stdlib_module_names and m != "sparkkafka"}
    assert "chispa" in third_party
    missing = {m: dists.get(m) for m in third_party
               if not {d.lower().replace("_", "-") for d in dists.get(m, [m])} & declared}
    assert missing == {}, f"imported by the notebook or docs but not a dependency of `pip install -e .`: {missing}"
