"""Layers without cycles: the import graph between the top-level packages of
``autopar_opt`` (docs/ARCHITECTURE.md) must be acyclic.

Every ``import`` statement counts, including the lazy ones inside functions
(a lazy import hides a cycle from Python, not from the design). Nodes are the
first component under ``autopar_opt`` (``autopar_opt.solvers.dp.chain`` ->
``solvers``; a module such as ``autopar_opt.plan`` is its own node). The
package root ``autopar_opt/__init__.py`` is the public facade that re-exports
from the layers, so it is left out as a node and as a target.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

import autopar_opt

ROOT = Path(autopar_opt.__file__).resolve().parent
#: import name -> folder (pyproject.toml [tool.setuptools.package-dir])
MAPPED = {"formulations": "formulations", "solvers": "solvers", "model_zoo": "model_zoo",
          "reports": "reports"}


def _source_files() -> dict[str, Path]:
    """Top-level node -> its files (package folders and single modules)."""
    out: dict[str, list[Path]] = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel == Path("__init__.py"):
            continue
        node = rel.parts[0].removesuffix(".py")
        out.setdefault(node, []).append(path)
    for name, folder in MAPPED.items():
        pkg = ROOT.parent / folder
        if not pkg.is_dir():          # installed (non-editable) layout: already under ROOT
            continue
        out[name] = list(pkg.rglob("*.py"))
    return out


def _targets(tree: ast.AST, node: str, package: str) -> set[str]:
    found = set()
    for stmt in ast.walk(tree):
        names: list[str] = []
        if isinstance(stmt, ast.Import):
            names = [a.name for a in stmt.names]
        elif isinstance(stmt, ast.ImportFrom):
            if stmt.level:           # relative import: stays inside its package
                continue
            mod = stmt.module or ""
            names = [mod] if mod != "autopar_opt" else [f"autopar_opt.{a.name}" for a in stmt.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "autopar_opt" and len(parts) > 1 and parts[1] != node:
                found.add(parts[1])
    return found


def import_graph() -> nx.DiGraph:
    """Directed graph node -> imported node over all top-level nodes."""
    files = _source_files()
    g = nx.DiGraph()
    g.add_nodes_from(files)
    for node, paths in files.items():
        for path in paths:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for target in _targets(tree, node, node):
                if target in files:
                    g.add_edge(node, target)
    return g


def test_the_import_graph_is_found():
    """The scan sees the layers it must see (guards against a vacuous pass)."""
    g = import_graph()
    for node in ("core", "cost", "formulations", "solvers", "search", "spec", "reports", "plan"):
        assert node in g, node
    assert g.has_edge("search", "solvers") and g.has_edge("formulations", "cost")


def test_no_cycle_between_top_level_packages():
    g = import_graph()
    cycles = list(nx.simple_cycles(g))
    assert not cycles, "import cycles between top-level packages: " + "; ".join(
        " -> ".join(c + [c[0]]) for c in cycles[:10])


def test_core_imports_no_other_layer():
    """``autopar_opt.core`` (SolveResult, matrix form, bounds, assignment) is neutral."""
    assert list(import_graph().successors("core")) == []


@pytest.mark.parametrize("low, high", [("formulations", "solvers"), ("solvers", "formulations"),
                                       ("cost", "search"), ("solvers", "search"),
                                       ("formulations", "search")])
def test_layer_direction(low, high):
    """Formulations and backends never import each other; neither reaches up to the search."""
    assert not import_graph().has_edge(low, high)
