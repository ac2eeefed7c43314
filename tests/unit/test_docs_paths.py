"""Every repository path README.md and docs/*.md name exists (QA round 12: docs/DESIGN.md's
flow named ``autopar_opt/graph`` and ``autopar_opt/evaluate``, README ``autopar_opt/reports/
cost.py``; none exists: the layer graph is ``autopar_opt/ir/graph.py``, ``evaluate`` is in
``autopar_opt/cost/evaluate.py`` and the reports package lives in ``reports/``).

Oracle: the file system. A path is a run of ``name/`` segments starting at a top-level
folder of the repository; a trailing ``::name``, ``:line``, ``.`` or ``,`` is not part of it.
"""

from __future__ import annotations

import re

from support import paths

ROOT = paths.REPO
TOP = ("autopar_opt", "benchmarks", "tests", "examples", "docs", "model_zoo", "formulations",
       "solvers", "reports")
PATH = re.compile(r"(?<![\w./-])((?:%s)/[A-Za-z0-9_./-]*[A-Za-z0-9_/])" % "|".join(TOP))


def named_paths(text: str) -> set[str]:
    """The repository paths a document names (see the module docstring)."""
    return {m.group(1).rstrip("/") for m in PATH.finditer(text)}


def test_named_paths_reads_the_forms_the_docs_use():
    text = ("see `autopar_opt/cost/params.py::RANGES`, benchmarks/dp/RESULTS.md. and "
            "(`tests/data/placement/`) or docs/DESIGN.md §3")
    assert named_paths(text) == {"autopar_opt/cost/params.py", "benchmarks/dp/RESULTS.md",
                                 "tests/data/placement", "docs/DESIGN.md"}


def test_every_path_the_docs_name_exists():
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    missing = sorted(f"{doc.relative_to(ROOT)}: {p}" for doc in docs
                     for p in named_paths(doc.read_text()) if not (ROOT / p).exists())
    assert not missing, missing


#: a Python module a document names alone in backticks (`dp.py`, `exact/milp.py`), a trailing
#: ``::name`` allowed
MODULE = re.compile(r"`((?:[A-Za-z0-9_]+/)*[A-Za-z0-9_]+\.py)(?:::[\w.]+)?`")
#: modules of other projects the docs name (Megatron-LM's launcher script)
FOREIGN = {"pretrain_gpt.py"}


def test_every_module_the_docs_name_by_its_short_path_exists():
    """A module named by a short path (the section says which package: DESIGN §9's
    `exact/milp.py`) must be a file of the repository whose path ends so (QA session 35:
    DESIGN §9 named `latency_bounds.py`, which does not exist; the latency bound is
    ``autopar_opt/placement/bounds/latency.py``)."""
    files = [p.relative_to(ROOT).as_posix() for top in TOP for p in (ROOT / top).rglob("*.py")]
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    missing = sorted(f"{doc.relative_to(ROOT)}: {name}" for doc in docs
                     for name in set(MODULE.findall(doc.read_text())) - FOREIGN
                     if not any(f == name or f.endswith("/" + name) for f in files))
    assert not missing, missing
