"""The package's layers import downwards only: no two top-level modules or subpackages of sparkkafka import
each other (directly or around a circle), and the protocol core imports neither Spark nor Delta.
Read from the source with `ast` (no import runs), so a lazy import inside a function counts too."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "sparkkafka"


def _imports() -> dict[str, set[str]]:
    """module (dotted, under sparkkafka) -> the sparkkafka modules and third-party roots it imports."""
    out: dict[str, set[str]] = defaultdict(set)
    for path in PKG.rglob("*.py"):
        parts = ["sparkkafka", *path.relative_to(PKG).with_suffix("").parts]
        package = parts if parts[-1] == "__init__" else parts[:-1]
        name = ".".join(p for p in parts if p != "__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
                out[name] |= {f"{target}.{a.name}" for a in node.names} if not node.module else {target}
            elif isinstance(node, ast.ImportFrom):
                out[name].add(node.module or "")
            elif isinstance(node, ast.Import):
                out[name] |= {a.name for a in node.names}
    return out


def _unit(module: str) -> str | None:
    """The layer a sparkkafka module belongs to: its subpackage or top-level module (None: not ours)."""
    parts = module.split(".")
    return parts[1] if parts[0] == "sparkkafka" and len(parts) > 1 else None


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _layer_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for module, targets in _imports().items():
        a = _unit(module)
        for t in targets:
            b = _unit(t)
            if a and b and a != b:
                graph[a].add(b)
    return graph


def test_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_between_layers():
    assert _cycles(_layer_graph()) == []


@pytest.mark.parametrize("layer", ["protocol", "controller"])
def test_pure_layers_import_neither_spark_nor_delta(layer):
    """The sans-IO core (protocol/) and the controller's state machines run without Spark or Delta."""
    bad = {m: sorted(t for t in ts if t.split(".")[0] in ("pyspark", "deltalake", "delta", "py4j"))
           for m, ts in _imports().items() if _unit(m) == layer}
    assert {m: ts for m, ts in bad.items() if ts} == {}


def test_tools_and_storage_do_not_import_upwards():
    """Kafka's tool modules and the storage layer never reach up to the Cluster facade or the driver loop."""
    graph = _layer_graph()
    for low in ("tools", "storage", "protocol", "controller", "engine", "scenario"):
        assert not graph[low] & {"cluster", "driver", "whatif", "campaign", "bench", "cli"}, low
