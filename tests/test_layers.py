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


def _module_graph() -> dict[str, set[str]]:
    """module -> the sparkkafka modules it imports: `from a.b import c` counts as importing a.b.c when
    that is a module, else a.b (a name defined there)."""
    out: dict[str, set[str]] = defaultdict(set)
    found = {".".join(p for p in ["sparkkafka", *path.relative_to(PKG).with_suffix("").parts] if p != "__init__")
             for path in PKG.rglob("*.py")}
    for path in PKG.rglob("*.py"):
        parts = ["sparkkafka", *path.relative_to(PKG).with_suffix("").parts]
        package = parts if parts[-1] == "__init__" else parts[:-1]
        name = ".".join(p for p in parts if p != "__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = ".".join(package[: len(package) - (node.level - 1)] + ([node.module] if node.module else [])
                                ) if node.level else (node.module or "")
                targets = {f"{base}.{a.name}" if f"{base}.{a.name}" in found else base for a in node.names}
            elif isinstance(node, ast.Import):
                targets = {a.name for a in node.names}
            else:
                continue
            out[name] |= {t for t in targets if t in found and t != name}
    return out


def _module_cycles() -> list[list[str]]:
    """Import circles between sparkkafka modules (a lazy import inside a function counts)."""
    return _cycles(_module_graph())


def test_no_import_circle_between_modules():
    """No module imports itself back around a circle (config <-> rules, tables <-> compaction were two)."""
    assert _module_cycles() == []


def test_the_module_graph_sees_a_lazy_import_and_a_submodule():
    g = _module_graph()
    assert "sparkkafka.storage.compaction" in g["sparkkafka.storage.tables"]  # inside TableWriter._maybe_compact
    assert "sparkkafka.scenario.schema" in g["sparkkafka.scenario.loader"]  # from sparkkafka.scenario import schema


# sideways reaches a layer makes only through a named interface: (importing layer, forbidden targets,
# the interface modules it goes through instead)
SIDEWAYS = [
    ("tools", ("sparkkafka.engine", "sparkkafka.run_dir", "sparkkafka.run_lock"), ("sparkkafka.run_access",)),
    ("admin", ("sparkkafka.engine",), ("sparkkafka.run_access",)),
    ("controller", ("sparkkafka.scenario",), ()),
    ("scenario", ("sparkkafka.storage",), ("sparkkafka.storage.api",)),
]


def _reaches(module: str, target: str) -> bool:
    return module == target or module.startswith(target + ".")


@pytest.mark.parametrize(("layer", "forbidden", "interfaces"), SIDEWAYS, ids=[s[0] for s in SIDEWAYS])
def test_no_sideways_import_but_through_its_interface(layer, forbidden, interfaces):
    bad = {m: sorted(t for t in ts if any(_reaches(t, f) for f in forbidden)
                     and not any(_reaches(t, i) for i in interfaces))
           for m, ts in _module_graph().items() if _unit(m) == layer}
    assert {m: ts for m, ts in bad.items() if ts} == {}


def test_the_sideways_check_sees_an_import():
    assert any(_reaches(t, "sparkkafka.protocol") for t in _module_graph()["sparkkafka.engine.broker_round"])
    assert not _reaches("sparkkafka.storage_x", "sparkkafka.storage")


_DELTA_WRITES = {"write_deltalake", "create", "create_write_transaction", "merge", "delete", "update", "restore",
                 "vacuum", "optimize", "convert_to_deltalake", "Transaction", "AddAction", "RemoveAction"}


def _delta_writes(path: Path) -> list[str]:
    """The Delta-writing names a file uses: deltalake's write functions and transaction actions imported,
    and any DeltaTable.<write method> call in a file that imports deltalake."""
    tree = ast.parse(path.read_text())
    imported = set()
    uses_delta = False
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "deltalake":
            uses_delta = True
            imported |= {a.name for a in node.names} & _DELTA_WRITES
        elif isinstance(node, ast.Import) and any(a.name.split(".")[0] == "deltalake" for a in node.names):
            uses_delta = True
    calls = set()
    if uses_delta:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                    _DELTA_WRITES - {"update", "delete"}):  # dict.update / set.delete are not Delta's
                calls.add(node.func.attr)
    return sorted(imported | calls)


def test_delta_writes_only_in_storage():
    """Only sparkkafka/storage/ commits to a Delta table (its writers keep the run's app transaction and
    metadata); elsewhere a Delta table is read."""
    bad = {str(p.relative_to(PKG)): w for p in PKG.rglob("*.py")
           if p.relative_to(PKG).parts[0] != "storage" and (w := _delta_writes(p))}
    assert bad == {}


def test_the_delta_write_check_sees_a_write(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("from deltalake import DeltaTable\nDeltaTable.create('p', s)\n")
    assert _delta_writes(f) == ["create"]
    f.write_text("from deltalake import write_deltalake\n")
    assert _delta_writes(f) == ["write_deltalake"]
    f.write_text("d = {}\nd.create_write_transaction()\n")
    assert _delta_writes(f) == []


def test_the_protocol_core_reads_no_clock():
    """The sans-IO core neither times itself nor reads the wall clock: `now` and a timing clock are the
    caller's (broker.step's `clock`)."""
    bad = {m: sorted(t for t in ts if t.split(".")[0] in ("time", "datetime"))
           for m, ts in _imports().items() if _unit(m) == "protocol"}
    assert {m: ts for m, ts in bad.items() if ts} == {}
