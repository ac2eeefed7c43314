"""PaSE's cost tables, read as they ship (Elango, "PaSE: Parallelization Strategies for
Efficient DNN Training", IPDPS 2021; github.com/baidu-research/PaSE ``scheduler.py``).

A ``.json.gz`` (or plain ``.json``) file holds ``vertices`` (``id``,
``configs``, ``cost``) and ``edges`` (``src``, ``dst``, ``cost[i][j]``); the
objective is ``Σ_v cost_v[c_v] + Σ_e cost_e[c_src][c_dst]`` (the file's
``objective`` string, checked against PaSE's own DP in the peers' README).
An edge that PaSE's ``networkx.DiGraph`` overwrote (several inputs from one
producer) is stored once with the cost PaSE kept, and is charged once here,
as PaSE's DP does.

Checks (each a :class:`SpecProblem`): vertex ids ``0..n-1`` unique, at least
one configuration per vertex, ``len(configs) == len(cost)``, every number
finite, edge ends exist, no self-loops or duplicate edges (a DiGraph has
none), the graph is a DAG, and every edge matrix is
``len(configs[src]) × len(configs[dst])``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from autopar_opt.core import limits
from autopar_opt.peers.piper.format import _cycle
from autopar_opt.core.errors import MISSING, SpecError, SpecProblem


@dataclass
class PaseInstance:
    """PaSE tables: per-vertex cost vectors and per-edge cost matrices (float64)."""

    name: str
    names: list[str]
    configs: list[list[list[int]]]
    vertex_cost: list[np.ndarray]
    edges: list[tuple[int, int]]
    edge_cost: list[np.ndarray]
    meta: dict[str, Any]

    @property
    def n(self) -> int:
        return len(self.names)

    @property
    def sizes(self) -> list[int]:
        return [len(c) for c in self.vertex_cost]


def _finite_array(value: Any, key: str, problems: list[SpecProblem], path: str,
                  ndim: int) -> np.ndarray | None:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError, OverflowError):   # OverflowError: an integer over 1e308
        arr = None
    if arr is None or arr.ndim != ndim or arr.size == 0:
        shape = "a non-empty list of numbers" if ndim == 1 else "a non-empty rectangular matrix of numbers"
        problems.append(SpecProblem(path, key, value, f"must be {shape}", "use the table as PaSE wrote it"))
        return None
    if not np.all(np.isfinite(arr)) or np.any(np.abs(arr) > limits.MAX_FLOAT):
        problems.append(SpecProblem(path, key, "non-finite or huge entries", "every cost must be "
                                    f"a finite number of at most {limits.MAX_FLOAT:.0e}",
                                    "replace NaN/inf entries"))
        return None
    return arr


def _vertices(data: dict, path: str, problems: list[SpecProblem]):
    verts = data.get("vertices")
    if not isinstance(verts, list) or not verts:
        problems.append(SpecProblem(path, "vertices", verts if verts is not None else MISSING,
                                    "must be a non-empty array", "write vertices: [{id, configs, cost}]"))
        return [], [], []
    names, configs, costs = [], [], []
    for i, v in enumerate(verts):
        where = f"vertices[{i}]"
        if not isinstance(v, dict) or v.get("id") != i:
            problems.append(SpecProblem(path, f"{where}.id", v.get("id", MISSING) if isinstance(v, dict) else v,
                                        f"vertex ids must be 0..n-1 in array order (expected {i})",
                                        "keep PaSE's node ids in creation order"))
            continue
        cost = _finite_array(v.get("cost", MISSING), f"{where}.cost", problems, path, 1)
        cfg = v.get("configs")
        if not isinstance(cfg, list) or (cost is not None and len(cfg) != len(cost)):
            problems.append(SpecProblem(path, f"{where}.configs", f"{len(cfg) if isinstance(cfg, list) else cfg} "
                                        f"configurations" if isinstance(cfg, list) else MISSING,
                                        f"must list one configuration per cost entry "
                                        f"({len(cost) if cost is not None else '?'} costs)",
                                        "make configs and cost the same length"))
            continue
        names.append(str(v.get("name", i)))
        configs.append(cfg)
        costs.append(cost)
    return names, configs, costs


def _edges(data: dict, sizes: list[int], path: str, problems: list[SpecProblem]):
    edges = data.get("edges")
    if not isinstance(edges, list):
        problems.append(SpecProblem(path, "edges", edges if edges is not None else MISSING,
                                    "must be an array (possibly empty)", "write edges: [{src, dst, cost}]"))
        return [], []
    pairs, mats, seen = [], [], set()
    n = len(sizes)
    for j, e in enumerate(edges):
        where = f"edges[{j}]"
        ends = [e.get(k) if isinstance(e, dict) else None for k in ("src", "dst")]
        bad = [k for k, x in zip(("src", "dst"), ends)
               if not isinstance(x, int) or isinstance(x, bool) or not 0 <= x < n]
        for k in bad:
            problems.append(SpecProblem(path, f"{where}.{k}", e.get(k, MISSING) if isinstance(e, dict) else e,
                                        "is not a vertex id", f"use an id in 0..{n - 1}"))
        if bad:
            continue
        u, v = ends
        if u == v or (u, v) in seen:
            rule = "an edge from a vertex to itself" if u == v else "duplicate edge (PaSE's DiGraph keeps one)"
            problems.append(SpecProblem(path, where, [u, v], rule, "keep one edge per (src, dst), no self-loops"))
            continue
        mat = _finite_array(e.get("cost", MISSING), f"{where}.cost", problems, path, 2)
        if mat is None:
            continue
        if mat.shape != (sizes[u], sizes[v]):
            problems.append(SpecProblem(path, f"{where}.cost", f"{mat.shape[0]}x{mat.shape[1]} matrix",
                                        f"must be len(configs[src]) x len(configs[dst]) = {sizes[u]}x{sizes[v]}",
                                        "write one row per producer configuration, one column per consumer's"))
            continue
        seen.add((u, v))
        pairs.append((u, v))
        mats.append(mat)
    return pairs, mats


def parse_pase(data: Any, path: str, name: str) -> tuple[PaseInstance | None, list[SpecProblem]]:
    """Check and convert a parsed PaSE table file."""
    problems: list[SpecProblem] = []
    if not isinstance(data, dict):
        return None, [SpecProblem(path, "", type(data).__name__, "the top level must be an object",
                                  "use a PaSE table file")]
    names, configs, costs = _vertices(data, path, problems)
    if problems:
        return None, problems
    pairs, mats = _edges(data, [len(c) for c in costs], path, problems)
    cyc = _cycle(len(names), [(u, v, 0.0) for u, v in pairs])
    if cyc:
        problems.append(SpecProblem(path, "edges", cyc[:8], "the graph has a cycle through these vertices "
                                    "(PaSE's graphs are DAGs)", "remove the edge that closes the cycle"))
    if problems:
        return None, problems
    meta = {k: v for k, v in data.items() if k not in ("vertices", "edges")}
    return PaseInstance(name, names, configs, costs, pairs, mats, meta), []


#: Largest count of JSON values in a PaSE table (counted from its commas and brackets
#: before it is parsed): 2.6 times PaSE's largest here, the Transformer on 64 devices
#: (15,169,253 counted: 14.8 million costs, 0.3 million configuration entries). Read at
#: 8 bytes per number this bounds the read's memory (benchmarks/peers/RESULTS.md).
MAX_VALUES = 40_000_000
#: Largest count of lists, objects and strings (the Transformer on 64 devices: 115 thousand).
MAX_CONTAINERS = 4_000_000
#: Largest text besides the arrays of numbers (the Transformer on 64 devices: 1.8 MB).
MAX_SKELETON_BYTES = 16 << 20


def load_pase(path: Path) -> PaseInstance:
    """Read ``.json.gz`` or ``.json`` PaSE tables; raises SpecError listing every problem.

    The costs are read straight into float64 arrays within :data:`MAX_VALUES`
    (:mod:`autopar_opt.core.numeric_json`), never as one Python float each."""
    from autopar_opt.core import numeric_json, reading

    raw = reading.read_bytes(path, reading.PASE)      # packed or not: read_bytes looks
    data = numeric_json.load_numeric_json(
        raw, str(path), reading.PASE, array_keys=("cost",), max_values=MAX_VALUES,
        max_containers=MAX_CONTAINERS, max_skeleton_bytes=MAX_SKELETON_BYTES,
        values_fix="PaSE's largest table here, the Transformer on 64 devices, holds 15.2 "
                   f"million; give a table of at most {MAX_VALUES:,} values")
    del raw
    stem = path.name.removesuffix(".gz").removesuffix(".json")
    inst, problems = parse_pase(data, str(path), stem)
    if problems:
        raise SpecError(problems)
    assert inst is not None
    return inst


def pase_objective(inst: PaseInstance, choice: list[int]) -> float:
    """The file's objective for one configuration index per vertex (independent evaluator).

    Source: the ``objective`` string of every PaSE table file and PaSE's
    ``scheduler.Processor`` (vertex costs plus one redistribution cost per
    DiGraph edge).
    """
    total = math.fsum(float(c[k]) for c, k in zip(inst.vertex_cost, choice))
    return total + math.fsum(float(m[choice[u], choice[v]]) for (u, v), m in zip(inst.edges, inst.edge_cost))
