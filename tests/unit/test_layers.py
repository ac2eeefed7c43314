"""Layers without cycles: the import graph between the top-level packages of
``autopar_opt`` (docs/ARCHITECTURE.md) must be acyclic.

Every ``import`` statement counts, including the lazy ones inside functions
(a lazy import hides a cycle from Python, not from the design). Nodes are the
first component under ``autopar_opt`` (``autopar_opt.solvers.dp.chain`` ->
``solvers``; a module such as ``autopar_opt.ir.plan`` is its own node). The
package root ``autopar_opt/__init__.py`` is the public facade that re-exports
from the layers, so it is left out as a node and as a target.
"""

from __future__ import annotations

import ast
import re
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
    for node in ("core", "ir", "cost", "formulations", "solvers", "search", "spec", "reports", "cli"):
        assert node in g, node
    assert g.has_edge("search", "solvers") and g.has_edge("formulations", "cost")


def test_no_cycle_between_top_level_packages():
    g = import_graph()
    cycles = list(nx.simple_cycles(g))
    assert not cycles, "import cycles between top-level packages: " + "; ".join(
        " -> ".join(c + [c[0]]) for c in cycles[:10])


def test_core_imports_no_other_layer():
    """``autopar_opt.core`` (SolveResult, matrix form, bounds, assignment, errors,
    files, limits, interrupts) is neutral."""
    assert list(import_graph().successors("core")) == []


def test_ir_imports_only_core():
    """``autopar_opt.ir`` (the typed problem and plan) imports nothing but ``core``."""
    assert set(import_graph().successors("ir")) <= {"core"}


def test_cli_is_imported_by_nothing():
    """The command line is the top layer: the library never imports it."""
    assert list(import_graph().predecessors("cli")) == []


@pytest.mark.parametrize("other", ["peers", "placement", "capacity", "cli", "calibration", "learn"])
def test_search_does_not_know_the_other_subsystems(other):
    """The hybrid-parallel search knows nothing of peers, placement, capacity or the
    command line (the CLI routes a ``problem:`` spec to ``peers``)."""
    assert not import_graph().has_edge("search", other)


@pytest.mark.parametrize("low, high", [("formulations", "solvers"), ("solvers", "formulations"),
                                       ("cost", "search"), ("solvers", "search"),
                                       ("formulations", "search")])
def test_layer_direction(low, high):
    """Formulations and backends never import each other; neither reaches up to the search."""
    assert not import_graph().has_edge(low, high)


def documented_imports() -> dict[str, set[str]]:
    """docs/ARCHITECTURE.md's table: package -> the packages it "may import" (cli's
    "everything" left out)."""
    from support import paths
    text = (paths.REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([a-z_]+)/` \| .* \| ([^|]+) \|$", text, re.M)
    return {pkg: {part.strip().split(" ")[0] for part in may.split(",")}
            for pkg, may in rows if not may.strip().startswith("everything")}


def test_every_import_is_one_architecture_md_allows():
    """ARCHITECTURE.md says this file enforces its table's "may import" column: every
    edge of the import graph from a package in the table is listed there (QA session 35:
    capacity imported cost, export imported core, neither listed)."""
    g, table = import_graph(), documented_imports()
    assert {"core", "ir", "cost", "search", "capacity", "export"} <= set(table)
    extra = {pkg: sorted(set(g.successors(pkg)) - allowed) for pkg, allowed in table.items()
             if pkg in g and set(g.successors(pkg)) - allowed}
    assert not extra, extra


def _private_imports(paths, own: str | None) -> list[str]:
    """``from autopar_opt.X... import _name`` where X is not ``own`` (the importer's node)."""
    found = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for stmt in ast.walk(tree):
            if not (isinstance(stmt, ast.ImportFrom) and not stmt.level and stmt.module):
                continue
            parts = stmt.module.split(".")
            if parts[0] != "autopar_opt" or len(parts) < 2 or parts[1] == own:
                continue
            found += [f"{path.name}: {stmt.module}.{a.name}" for a in stmt.names
                      if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_no_package_imports_a_private_name_of_another():
    """A leading underscore means "this package only": no other package imports it."""
    found = [hit for node, paths in _source_files().items() for hit in _private_imports(paths, node)]
    assert found == [], found


def test_tests_import_no_private_name_of_the_library():
    """Tests use the library's public names (a private helper a test needs is made public)."""
    tests = Path(__file__).resolve().parents[1]
    assert _private_imports(sorted(tests.rglob("*.py")), None) == []


def test_tests_import_no_other_test_module():
    """Shared test helpers live in ``tests/support`` and are imported from there."""
    tests = Path(__file__).resolve().parents[1]
    bad = []
    for path in sorted(tests.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for stmt in ast.walk(tree):
            mods = ([a.name for a in stmt.names] if isinstance(stmt, ast.Import)
                    else [stmt.module or ""] if isinstance(stmt, ast.ImportFrom) else [])
            bad += [f"{path.name}: {m}" for m in mods
                    if m.split(".")[-1].startswith("test_") or m.startswith("tests")]
    assert bad == [], bad
