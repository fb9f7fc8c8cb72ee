"""The import graph of ``ledger/`` and ``pipelines/``: no circles, nothing imported upward.

Read from the source (``ast``), function-level imports included, so that a lazy import cannot
hide a circle. One edge is allowed by design: a verb's ``main(argv=None)`` (console script,
spark-submit file, Databricks entry point) calls ``pipelines.cli`` at call time.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]

# Packages below every verb: they never import one (nor the CLI, nor the developer tools).
FOUNDATION = ("pipelines.args", "pipelines.edge", "pipelines.passes", "pipelines.spark",
              "pipelines.metrics")
VERBS = ("pipelines.audit", "pipelines.checkpoint", "pipelines.failover", "pipelines.mm2",
         "pipelines.replicate", "pipelines.status", "pipelines.validate", "pipelines.acls",
         "pipelines.allowlists", "pipelines.devtools", "pipelines.ledger_admin",
         "pipelines.cli")
# What only the CLI (its `clusters` and `demo` verbs) and the tools themselves may import.
DEVTOOLS = "pipelines.devtools"


def _modules() -> dict[str, Path]:
    out = {}
    for path in [*ROOT.glob("ledger/**/*.py"), *ROOT.glob("pipelines/**/*.py")]:
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        entry_points = {n for f in tree.body if isinstance(f, ast.FunctionDef)
                        and f.name == "main" for n in ast.walk(f)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                target = _resolve(name)
                if target is None or target == module:
                    continue
                if target == "pipelines.cli" and node in entry_points:
                    continue  # main(argv=None) runs the CLI: an entry point, not a dependency
                edges[module].add(target)
    return edges


EDGES = _edges()


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in EDGES[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(MODULES):
        if module not in index:
            visit(module)
    return found


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_no_import_circles():
    assert _cycles() == []


def test_the_ledger_never_imports_the_pipelines():
    upward = {(m, t) for m, ts in EDGES.items() if m.startswith("ledger")
              for t in ts if t.startswith("pipelines")}
    assert upward == set()


def test_the_foundation_never_imports_a_verb():
    upward = {(m, t) for m, ts in EDGES.items() if _package(m) in FOUNDATION
              for t in ts if _package(t) in VERBS}
    assert upward == set()


def test_the_kafka_edge_imports_only_the_ledger_and_itself():
    outside = {(m, t) for m, ts in EDGES.items() if _package(m) == "pipelines.edge"
               for t in ts if not (t.startswith("ledger") or _package(t) == "pipelines.edge")}
    assert outside == set()
    assert EDGES["pipelines.edge.preflight"] >= {"pipelines.edge.kafka_admin"}  # read at all


def test_no_production_job_imports_the_developer_tools():
    users = {(m, t) for m, ts in EDGES.items()
             if _package(m) not in (DEVTOOLS, "pipelines.cli")
             for t in ts if _package(t) == DEVTOOLS}
    assert users == set()


def test_the_graph_is_read():
    # Guards the test itself: the readers of the one readiness rule are all seen.
    readers = {m for m, ts in EDGES.items() if "pipelines.checkpoint.readiness" in ts}
    assert {"pipelines.status.gather", "pipelines.failover.mover",
            "pipelines.checkpoint.job"} <= readers
