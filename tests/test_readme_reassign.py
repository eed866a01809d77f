"""README.md's "Using it" commands: the reassignment it shows is in progress after --execute and complete after
the run continues (a KIP-113 move under its throttle), run exactly as the README writes them."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from sparkkafka.cli import main

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[list[str]]:
    """The shell lines of the README's bash block that operates on runs/quickstart, split as the shell would
    (comments dropped), after the README's first command that creates that run."""
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    first = next(b for b in blocks if "--out runs/quickstart" in b)
    ops = next(b for b in blocks if "reassign runs/quickstart" in b)
    run = shlex.split(first.split("&&")[-1], comments=True)
    run[0] = Path(run[0]).name  # .venv/bin/sparkkafka
    return [run] + [shlex.split(line, comments=True) for line in ops.splitlines() if line.strip()]


def test_readme_still_shows_a_move_in_progress_then_complete():
    cmds = [" ".join(c) for c in readme_commands()]
    assert cmds[0] == "sparkkafka run conf/scenarios/quickstart.yaml --out runs/quickstart --overwrite"
    verify = [i for i, c in enumerate(cmds) if c.startswith("sparkkafka reassign") and "--verify" in c]
    execute = next(i for i, c in enumerate(cmds) if "--execute" in c)
    run = next(i for i, c in enumerate(cmds) if c.startswith("sparkkafka run runs/quickstart"))
    assert execute < verify[0] < run < verify[1]


@pytest.mark.slow
def test_readme_reassign_commands_move_a_log_dir_under_the_throttle(spark, tmp_path, monkeypatch, capsys):
    """Each README line run in a fresh directory holding the repo's conf/ (the report's plots are left out)."""
    (tmp_path / "conf").symlink_to(ROOT / "conf")
    monkeypatch.chdir(tmp_path)
    outputs = []
    for argv in readme_commands():
        if argv[0] == "echo":  # echo JSON > plan.json
            Path(argv[3]).write_text(argv[1] + "\n")
            json.loads(Path("plan.json").read_text())
            continue
        assert argv[0] == "sparkkafka"
        if argv[1] == "report":
            continue
        assert main(argv[1:]) == 0, argv
        outputs.append((argv, capsys.readouterr().out))
    verifies = [out for argv, out in outputs if "--verify" in argv]
    assert "Reassignment of replica orders-0-1 is still in progress." in verifies[0]
    assert "Reassignment of replica orders-0-1 completed successfully." in verifies[1]
    assert "Clearing broker-level throttles on brokers 1,2,3" in verifies[1]
    assert main(["log-dirs", "runs/quickstart", "--describe", "--broker-list", "1"]) == 0
    dirs = json.loads(capsys.readouterr().out.splitlines()[-1])["brokers"][0]["logDirs"]
    where = {p["partition"]: d["logDir"] for d in dirs for p in d["partitions"] if not p["isFuture"]}
    assert where["orders-0"] == "d0"  # from d1, where broker 1 created it (leaders first, as Kafka does)
