"""Fuzz of the input checks: seeded mutants of conf/scenarios/*.yaml, of Kafka reassignment
plans and of leader-election JSON go through validation alone (no Spark). Each one either validates or raises
ScenarioError - never another exception - and nothing is written, accepted or rejected.

Mutations: a key dropped, a value retyped or out of range, an unknown key, an unknown broker id, a bad event
time, a list entry repeated, and (for the files) the text cut or a byte changed. Reproduce one case with
`_scenario_mutant(SEED, i)` / `_plan_mutant(SEED, i)`.
"""

from __future__ import annotations

import copy
import json
import os
import random
from pathlib import Path
from typing import Any

import yaml

from sparkkafka.cli import main
from sparkkafka.errors import ScenarioError
from sparkkafka.scenario.loader import load_scenario, parse_scenario
from sparkkafka.tools.leader_election import parse_election_json
from sparkkafka.tools.reassign_partitions import parse_reassignment_json

SEED = 13
SCENARIOS = sorted((Path(__file__).resolve().parent.parent / "conf" / "scenarios").glob("*.yaml"))
BASES = [yaml.safe_load(p.read_text()) for p in SCENARIOS]
PLAN = {"version": 1, "partitions": [
    {"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "d1"]},
    {"topic": "t", "partition": 1, "replicas": [2, 3], "log_dirs": ["d0", "any"]},
    {"topic": "u", "partition": 0, "replicas": [3]}]}
ELECTION = {"partitions": [{"topic": "t", "partition": 0}, {"topic": "u", "partition": 1}]}
ODD_VALUES = [None, "", "x", "all", -1, 0, 1, 1.5, -0.5, float("nan"), float("inf"), True, False, [], {},
              [None], {"x": 1}, 2**31, 2**63, -(2**63) - 1, 10**30, "1", "-5", "999"]
TIME_VALUES = [-5, -1, "soon", 1.5, None, True, 2**63, [], "100ms"]
EVENT_NAMES = ["crash", "restart", "produce", "reassign", "elect_leaders", "explode", "set_config", "isolate"]


def _paths(node: Any, path: tuple = ()) -> list[tuple]:
    """Every path into a nested dict/list (the root included)."""
    out = [path]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*path, i))
    return out


def _get(node: Any, path: tuple) -> Any:
    for k in path:
        node = node[k]
    return node


def _pick(rng: random.Random, values: list) -> Any:
    return copy.deepcopy(rng.choice(values))  # never share a mutable value between mutants


def _mutate(doc: Any, rng: random.Random, brokers: list[int]) -> Any:
    """One to three random mutations of a copy of `doc`."""
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        paths = _paths(doc)
        path = rng.choice(paths)
        op = rng.randrange(8)
        if not path:
            if op == 0:
                return _pick(rng, ODD_VALUES)
            continue
        parent, key = _get(doc, path[:-1]), path[-1]
        if op == 0 and isinstance(parent, dict):  # drop a key
            del parent[key]
        elif op == 0:  # drop a list entry
            del parent[key]
        elif op in (1, 2):  # retype / out of range
            parent[key] = _pick(rng, ODD_VALUES)
        elif op == 3:  # an unknown key
            target = _get(doc, path)
            if isinstance(target, dict):
                target[rng.choice(["bogus", "at", "round", "topic", "broker", "retention.ms", 7])] = \
                    _pick(rng, ODD_VALUES)
            else:
                parent[key] = {"unknown.key": target}
        elif op == 4:  # an unknown broker id (or a known one where it does not belong)
            parent[key] = rng.choice([999, -3, 0, *brokers])
        elif op == 5:  # a bad event time
            parent[key] = _pick(rng, TIME_VALUES)
            if isinstance(parent, dict):
                parent[rng.choice(["at", "round"])] = _pick(rng, TIME_VALUES)
        elif op == 6 and isinstance(parent, list):  # an entry twice
            parent.append(copy.deepcopy(parent[key]))
        elif op == 6 and isinstance(parent, dict):  # another event name
            parent[rng.choice(EVENT_NAMES)] = parent.pop(key)
        else:  # a string or number nudged
            v = parent[key]
            if isinstance(v, bool):
                parent[key] = not v
            elif isinstance(v, int):
                parent[key] = v + rng.choice([-(10**6), -1, 1, 10**6])
            elif isinstance(v, str):
                parent[key] = v[: rng.randrange(len(v) + 1)] + rng.choice(["", "x", " ", "\x00", "é"])
    return doc


def _brokers(doc: dict) -> list[int]:
    b = doc["cluster"]["brokers"]
    return list(b) if isinstance(b, list) else list(range(b))


def _scenario_mutant(seed: int, i: int) -> Any:
    rng = random.Random(seed * 1_000_003 + i)
    base = BASES[i % len(BASES)]
    return _mutate(base, rng, _brokers(base))


def _plan_mutant(seed: int, i: int) -> str:
    """A mutated plan (or election) JSON text: the document mutated, then sometimes the text cut or changed."""
    rng = random.Random(seed * 7_000_003 + i)
    text = json.dumps(_mutate(PLAN if i % 4 else ELECTION, rng, [1, 2, 3]), allow_nan=True)
    r = rng.random()
    if r < 0.1:
        text = text[: rng.randrange(len(text) + 1)]
    elif r < 0.2:
        k = rng.randrange(len(text))
        text = text[:k] + rng.choice('{}[]",:0-9 x\\') + text[k + 1:]
    return text


def _listing(root: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, ds, fs in os.walk(root) for f in fs + ds)


def _check(fn, *args, **kwargs) -> str:
    """'ok' or 'rejected'; anything but ScenarioError propagates (a traceback is a failure)."""
    try:
        fn(*args, **kwargs)
    except ScenarioError:
        return "rejected"
    return "ok"


def test_fuzzed_scenarios_validate_or_raise_scenario_error_and_write_nothing(tmp_path, monkeypatch):
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)  # a plan path in a mutant resolves here; nothing may appear
    counts = {"ok": 0, "rejected": 0}
    for i in range(8000):
        doc = _scenario_mutant(SEED, i)
        try:
            counts[_check(parse_scenario, doc, name="fuzz", base_dir=work)] += 1
        except Exception as exc:  # noqa: BLE001 - report the case that escaped
            raise AssertionError(f"_scenario_mutant({SEED}, {i}) raised {type(exc).__name__}: {exc}\n{doc!r}") from exc
    assert counts["rejected"] >= 4000 and counts["ok"] >= 100, counts
    assert _listing(str(work)) == []


def _text_mutant(seed: int, i: int) -> str:
    """A scenario file's YAML text mutated as text: a line dropped, repeated or re-indented, a value swapped
    for an odd one, an unknown key added, a character changed, the text cut."""
    rng = random.Random(seed * 5_000_011 + i)
    lines = SCENARIOS[i % len(SCENARIOS)].read_text().splitlines()
    for _ in range(rng.randint(1, 3)):
        k = rng.randrange(len(lines))
        op = rng.randrange(6)
        if op == 0:
            del lines[k]
        elif op == 1:
            lines.insert(k, lines[k])
        elif op == 2:
            lines[k] = rng.choice(["", " ", "  ", "\t"]) + lines[k].lstrip()
        elif op == 3 and ":" in lines[k]:
            head = lines[k].rsplit(":", 1)[0]
            lines[k] = f"{head}: {rng.choice(['-1', '2147483648', 'x', 'null', '[]', '{}', '1.5', 'true', '~'])}"
        elif op == 4:
            lines.insert(k, " " * (len(lines[k]) - len(lines[k].lstrip())) + "bogus_key: 1")
        elif lines[k]:
            j = rng.randrange(len(lines[k]))
            lines[k] = lines[k][:j] + rng.choice(":-{}[]'\"#&*!|> 9x") + lines[k][j + 1:]
    text = "\n".join(lines)
    return text[: rng.randrange(len(text) + 1)] if rng.random() < 0.05 else text


def test_fuzzed_scenario_files_are_refused_by_the_cli_with_exit_2(tmp_path, monkeypatch, capsys):
    """Mutated YAML files: load_scenario validates or raises ScenarioError; a sample of the rejected ones
    through `sparkkafka run FILE --out DIR` exits 2 before Spark, DIR never appears, the working
    directory gets no file."""
    work, inputs = tmp_path / "cwd", tmp_path / "in"
    work.mkdir()
    inputs.mkdir()
    monkeypatch.chdir(work)
    counts = {"ok": 0, "rejected": 0}
    refused = 0
    for i in range(2000):
        text = _text_mutant(SEED, i)
        f = inputs / f"m{i}.yaml"
        f.write_text(text)
        try:
            verdict = _check(load_scenario, f)
        except Exception as exc:  # noqa: BLE001
            raise AssertionError(f"_text_mutant({SEED}, {i}) raised {type(exc).__name__}: {exc}\n{text}") from exc
        counts[verdict] += 1
        if verdict == "rejected" and refused < 100:  # the CLI path for a sample: exit 2, nothing written
            assert main(["run", str(f), "--out", str(work / "out"), "--no-progress"]) == 2
            assert capsys.readouterr().err.startswith("sparkkafka: error: ")
            refused += 1
        f.unlink()
    assert refused == 100 and counts["rejected"] >= 1000 and counts["ok"] >= 100, counts
    assert _listing(str(work)) == []


def test_fuzzed_plans_and_election_files_validate_or_raise_scenario_error():
    counts = {"ok": 0, "rejected": 0}
    dirs = {1: ["d0", "d1"], 2: ["d0", "d1"], 3: ["d0"]}
    for i in range(6000):
        text = _plan_mutant(SEED, i)
        try:
            if i % 4:
                for kw in ({"validate": False}, {"brokers": [1, 2, 3], "topics": ["t", "u"], "log_dirs": dirs}):
                    counts[_check(parse_reassignment_json, text, **kw)] += 1
            else:
                counts[_check(parse_election_json, text)] += 1
        except Exception as exc:  # noqa: BLE001
            raise AssertionError(f"_plan_mutant({SEED}, {i}) raised {type(exc).__name__}: {exc}\n{text}") from exc
    assert counts["rejected"] >= 3000 and counts["ok"] >= 300, counts
