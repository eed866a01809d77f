"""The docs run as written: every ```bash/```sh/```shell and ```python block of README.md and docs/*.md.

Each page's blocks run in order in one temporary copy of the repository (its ``git ls-files``), so a block
may use what an earlier one made (README's ``runs/quickstart``). Shell blocks run under ``bash -euo pipefail``
with the venv's bin first on PATH, as for a user who followed README command 1; Python blocks run as
``script.py`` with ``.venv/bin/python`` and the venv *off* PATH and VIRTUAL_ENV unset (the venv not
activated, the system python3 first on PATH), so the workers' interpreter is what sparkkafka chooses.

A block is run unless it is declared: ``<!-- docs-test: skip REASON -->`` on the line before its fence, or
an entry of DECLARED (keyed by page and a snippet of the block) that skips it or runs a cheaper form of it,
each with its reason. A new block is therefore run by default, and a declaration that matches no block
fails, so the list cannot go stale. Marked slow: it starts Spark several times (measured on the shared 2-core
machine, other jobs running: 578 s, README 315 s, campaigns.md 209 s in its cheaper form, the rest 54 s).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from sparkutil import BASE_ENV, _run

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
LANGS = {"bash": "shell", "sh": "shell", "shell": "shell", "python": "python"}
_FENCE = re.compile(r"^```(\w*)\s*$")
_MARKER = re.compile(r"^<!--\s*docs-test:\s*skip\s+(.+?)\s*-->\s*$")
TIMEOUT_S = 900


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page: its language kind (shell/python), text, line and declared skip."""

    page: str
    line: int
    kind: str
    text: str
    skip: str | None = None


def extract_blocks(page: str, text: str) -> list[Block]:
    """The shell and Python blocks of one Markdown page, in order (other fences: yaml, text, ... are not code
    a user runs). A ``<!-- docs-test: skip REASON -->`` line right before the fence declares the block."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), None)
        assert end is not None, f"{page}:{i + 1}: code fence never closed"
        kind = LANGS.get(m.group(1).lower())
        if kind:
            marker = _MARKER.match(lines[i - 1]) if i else None
            blocks.append(Block(page, i + 1, kind, "\n".join(lines[i + 1:end]) + "\n",
                                marker.group(1) if marker else None))
        i = end + 1
    return blocks


def pages() -> list[str]:
    """README.md and every docs/*.md page, relative to the repository root."""
    return ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]


def _drop_lines(*needles: str) -> Callable[[str], str]:
    return lambda text: "".join(ln for ln in text.splitlines(keepends=True) if not any(n in ln for n in needles))


def _sub(*pairs: tuple[str, str]) -> Callable[[str], str]:
    def rewrite(text: str) -> str:
        for pattern, repl in pairs:
            text = re.sub(pattern, repl, text)
        return text

    return rewrite


#: A campaign or an exploration as the doc writes it costs minutes (its measured runs); the same commands
#: run here on 2 schedules / depth 1, in-process (no Spark start), which checks every flag and the output.
_CHEAP_CAMPAIGN = _sub((r"--schedules \d+", "--schedules 2"), (r"--depth \d+", "--depth 1"),
                       (r"--master 'local\[2\]'", ""), (r"(sparkkafka (?:campaign|explore) \S+)", r"\1 --in-process"))


@dataclass(frozen=True)
class Declared:
    """Why a block is not run as written: skipped (rewrite None) or run in a cheaper form (rewrite)."""

    reason: str
    rewrite: Callable[[str], str] | None = None


#: (page, a snippet of the block) -> its declaration.
DECLARED: dict[tuple[str, str], Declared] = {
    ("README.md", ".venv/bin/pip install -e . &&"): Declared(
        "the venv is the test's own (made by README command 2, which runs this test); the scenario run is run",
        _sub((r"^python3 -m venv \.venv && \.venv/bin/pip install -e \. && ", ""),)),
    ("README.md", "pip install -e '.[test]'"): Declared("README command 2 is the test suite that holds this test"),
    ("README.md", "sparkkafka describe runs/quickstart --under-replicated-partitions"): Declared(
        "the reassign, --verify and continued-run lines run, with the move's progress asserted, in "
        "tests/test_readme_reassign.py; here describe and report run on the quickstart run",
        _drop_lines("> plan.json", "reassign runs/quickstart", "sparkkafka run runs/quickstart")),
    ("README.md", "whatif data/snapshots/sample --lose-rack rack-a"): Declared(
        "the emulated half costs 3-5 min of Spark on 2 cores (302 partitions over ~20 emulated s); run here as "
        "its prediction (--no-emulate), which checks the import of the sample and the question",
        _sub((r"--lose-rack rack-a", "--lose-rack rack-a --no-emulate"),)),
    ("docs/cli.md", "--master 'local-cluster[2,1,1024]'"): Declared(
        "run with the venv off PATH by tests/test_worker_python.py::test_spark_submit_recipe (local-cluster)"),
    ("docs/cli.md", "--master spark://127.0.0.1:7077"): Declared(
        "needs a standalone master: run with the venv off PATH on one started for it by "
        "tests/test_worker_python.py::test_spark_submit_recipe_on_a_standalone_master"),
    ("docs/campaigns.md", "--schedules 1000 --seed 1 --master 'local[2]'\n"): Declared(
        "cheaper form (see _CHEAP_CAMPAIGN); the replay line names a failing schedule of the full campaign",
        lambda text: _CHEAP_CAMPAIGN(_drop_lines("failing/safe-s1-00042.yaml")(text))),
    ("docs/campaigns.md", "--set log.flush.interval.messages=1"): Declared("cheaper form", _CHEAP_CAMPAIGN),
    ("docs/campaigns.md", "--schedules 1000 --seed 1 \\\n    --kinds"): Declared("cheaper form", _CHEAP_CAMPAIGN),
    ("docs/campaigns.md", "--schedules 200 --seed 1 \\\n    --kinds"): Declared("cheaper form", _CHEAP_CAMPAIGN),
    ("docs/campaigns.md", "--no-power-loss --set unclean"): Declared("cheaper form", _CHEAP_CAMPAIGN),
    ("docs/scenario-format.md", "kafka-topics.sh --bootstrap-server B"): Declared(
        "Kafka's own tools against a live cluster (B), then the import synopsis; the next block is the same "
        "import, concrete, on the shipped sample"),
    ("docs/whatif.md", "--lose-rack rack-a            # or"): Declared(
        "first line: the emulated what-if on the sample, run as its prediction like README's (see there)",
        _sub((r"--lose-rack rack-a ", "--lose-rack rack-a --no-emulate "),)),
    ("docs/whatif.md", "SNAPSHOT --lose-broker 1 --lose-broker 2 --unclean"): Declared(
        "a template (SNAPSHOT): the flags are shown on the sample above"),
    ("docs/whatif.md", "--balance-dirs --plan balance.json"): Declared(
        "second line is a template for the user's own run (RUN); the --balance-dirs line is run",
        _drop_lines("reassign RUN")),
}


def declaration(block: Block) -> Declared | None:
    """The DECLARED entry whose snippet is in `block` (at most one may match)."""
    found = [d for (page, snippet), d in DECLARED.items() if page == block.page and snippet in block.text]
    assert len(found) <= 1, f"{block.page}:{block.line}: {len(found)} declarations match one block"
    return found[0] if found else None


def all_blocks() -> list[Block]:
    return [b for page in pages() for b in extract_blocks(page, (ROOT / page).read_text())]


def repo_copy(dest: Path) -> Path:
    """A copy of the tracked files (``git ls-files``) under `dest`: what a fresh clone holds, no runs/."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True, env=BASE_ENV).stdout
    for name in filter(None, files.decode().split("\0")):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    (dest / ".venv").symlink_to(VENV_BIN.parent)  # README command 1's venv, as `.venv/bin/...` names it
    return dest


def _without_venv(path: str) -> str:
    return os.pathsep.join(p for p in path.split(os.pathsep) if p and Path(p).resolve() != VENV_BIN.resolve())


def block_env(kind: str) -> dict[str, str]:
    """The environment a block runs in: shell with the venv's bin first on PATH, Python without it."""
    env = {k: v for k, v in BASE_ENV.items()
           if k not in ("VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH")
           and not k.startswith(("PYSPARK_GATEWAY", "SPARK_"))}
    path = _without_venv(env.get("PATH", "/usr/bin:/bin"))
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{path}" if kind == "shell" else path
    return env


def run_block(block: Block, text: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run one block's `text` in `cwd` (bash -euo pipefail, or the venv's python on script.py)."""
    if block.kind == "shell":
        cmd = ["bash", "-euo", "pipefail", "-c", text]
    else:
        (cwd / "script.py").write_text(text)
        cmd = [str(VENV_BIN / "python"), "script.py"]
    return _run(cmd, env=block_env(block.kind), timeout=TIMEOUT_S, cwd=str(cwd))  # its own process group


# ------------------------------------------------------------------ Spark-free checks of the test itself


def test_extract_blocks_finds_fences_languages_and_markers():
    text = ("intro\n```bash\necho a\n```\n```yaml\nx: 1\n```\n<!-- docs-test: skip a synopsis -->\n"
            "```sh\nls RUN\n```\n```python\nprint(1)\n```\n")
    assert extract_blocks("p.md", text) == [
        Block("p.md", 2, "shell", "echo a\n"),
        Block("p.md", 9, "shell", "ls RUN\n", "a synopsis"),
        Block("p.md", 12, "python", "print(1)\n"),
    ]


def test_every_declaration_matches_one_block():
    """A declaration whose block was edited or removed fails here instead of silently skipping nothing."""
    blocks = all_blocks()
    stale = [key for key in DECLARED if not any(b.page == key[0] and key[1] in b.text for b in blocks)]
    assert stale == []
    for block in blocks:
        assert not (block.skip and declaration(block)), f"{block.page}:{block.line}: declared twice"


def test_docs_have_blocks_to_run():
    """README and at least three docs pages have shell blocks that run (the extraction finds what is there)."""
    run = {b.page for b in all_blocks() if not b.skip and (declaration(b) is None or declaration(b).rewrite)}
    assert "README.md" in run and len(run) >= 4, run


# ------------------------------------------------------------------ the docs, run


def run_page(tmp: Path, page: str) -> str | None:
    """Every block of `page`, in order, in one fresh copy of the repository under `tmp`: None when all exit
    0, else what the first that did not printed."""
    cwd = repo_copy(tmp / "repo")
    for block in extract_blocks(page, (ROOT / page).read_text()):
        declared = declaration(block)
        if block.skip or (declared and declared.rewrite is None):
            continue
        text = declared.rewrite(block.text) if declared else block.text
        result = run_block(block, text, cwd)
        if result.returncode != 0:
            return (f"{page}:{block.line} exited {result.returncode}\n--- block\n{text}"
                    f"--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-5000:]}")
    return None


@pytest.mark.slow
@pytest.mark.offload(work=run_page)
@pytest.mark.parametrize("page", [p for p in pages() if extract_blocks(p, (ROOT / p).read_text())])
def test_page_runs_as_written(page, offloaded):
    """Every block of `page`, in order, in one fresh copy of the repository, exits 0."""
    assert offloaded is None, offloaded
