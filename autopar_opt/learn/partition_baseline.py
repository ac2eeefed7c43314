"""METIS-style balanced partitioning of a placement problem: the graph-partitioning
baseline of GDP's comparison (Zhou et al. 2019, §4; METIS: Karypis and Kumar 1998).

``pymetis`` (a maintained binding of METIS 5, pinned in the ``learn`` extra) splits the
unit graph (:class:`~autopar_opt.learn.place_graph.UnitGraph`, colour classes kept
whole) into one part per accelerator, balancing the units' accelerator time (vertex
weights) and minimising the transfer weight cut (edge weights: each hyperedge as a star
from its first unit). METIS knows nothing of contiguity, memory or the host, so its
partition is priced as it is (:func:`autopar_opt.placement.evaluate.evaluate_placement`)
and reported with its violations; :func:`metis_placement` also tries several seeds and
imbalance tolerances and keeps the best placement feasible for the problem's variant.
Integer weights: times and transfers are scaled to ``[1, 10^4]`` (METIS takes integers).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autopar_opt.learn.place_graph import UnitGraph, unit_graph
from autopar_opt.placement.evaluate import evaluate_placement
from autopar_opt.placement.problem import PlacementProblem

#: METIS's load-imbalance tolerances tried (ufactor, in 1/1000: 1.03, 1.10, 1.30).
UFACTORS = (30, 100, 300)


@dataclass
class MetisResult:
    """The best METIS placement found (``assignment`` None when none was feasible)."""

    value: float | None           # max-load of the best feasible placement
    assignment: np.ndarray | None
    first_value: float            # max-load of the first partition (seed 0, ufactor 30)
    first_feasible: bool
    first_violations: list[str]
    tries: int
    feasible_tries: int


def _csr(g: UnitGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    m = g.num_units
    acc = g.pays
    t = np.where(acc & np.isfinite(g.time), g.time, np.inf).min(axis=1) if acc.any() \
        else np.zeros(m)
    t = np.where(np.isfinite(t), t, 0.0)
    sizes = np.diff(g.h_ptr)
    src = np.repeat(g.h_pos[g.h_ptr[:-1]], sizes - 1)
    keep = np.ones(len(g.h_pos), dtype=bool)
    keep[g.h_ptr[:-1]] = False
    dst, w = g.h_pos[keep], np.repeat(g.h_w, sizes - 1)
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    pairs, inv = np.unique(np.stack([lo, hi], axis=1), axis=0, return_inverse=True)
    pw = np.bincount(inv.ravel(), weights=w, minlength=len(pairs))
    a = np.r_[pairs[:, 0], pairs[:, 1]]
    b = np.r_[pairs[:, 1], pairs[:, 0]]
    ew = np.r_[pw, pw]
    order = np.lexsort((b, a))
    a, b, ew = a[order], b[order], ew[order]
    xadj = np.searchsorted(a, np.arange(m + 1))
    escale = 1e4 / max(float(ew.max()) if len(ew) else 1.0, 1e-30)
    vscale = 1e4 / max(float(t.max()) if m else 1.0, 1e-30)
    return (xadj, b, np.maximum(1, np.round(t * vscale)).astype(np.int64),
            np.maximum(1, np.round(ew * escale)).astype(np.int64))


def metis_parts(g: UnitGraph, parts: int, seed: int = 0, ufactor: int = 30) -> np.ndarray:
    """Part (0..parts-1) of every position of ``σ`` by METIS k-way."""
    import pymetis

    if parts <= 1 or g.num_units <= 1:
        return np.zeros(g.num_units, dtype=np.int64)
    xadj, adjncy, vw, ew = _csr(g)
    options = pymetis.Options(seed=seed, ufactor=ufactor)
    _, membership = pymetis.part_graph(parts, adjacency=pymetis.CSRAdjacency(xadj, adjncy),
                                       vweights=vw, eweights=ew, options=options)
    return np.asarray(membership, dtype=np.int64)


def metis_placement(problem: PlacementProblem, contiguous: bool = True,
                    seeds: int = 8) -> MetisResult:
    """METIS on the accelerators (host-only units on the first host), priced by the
    evaluator; the best feasible placement over ``seeds`` seeds × :data:`UFACTORS`."""
    g = unit_graph(problem, contiguous)
    accel = np.flatnonzero(g.pays)
    host = np.flatnonzero(~g.pays)
    host_only = ~(np.isfinite(g.time[:, accel]).any(axis=1)) if len(accel) else \
        np.ones(g.num_units, dtype=bool)
    best, best_a, first, tries, ok = None, None, None, 0, 0
    for seed in range(seeds):
        for uf in UFACTORS:
            dev = accel[metis_parts(g, len(accel), seed, uf)] if len(accel) else \
                np.full(g.num_units, host[0])
            if len(host):
                dev = np.where(host_only, host[0], dev)
            assign = g.node_assignment(dev)
            m = evaluate_placement(problem, assign, objective="max-load", contiguous=contiguous)
            tries += 1
            if first is None:
                first = m
            if m.feasible:
                ok += 1
                if best is None or m.value < best:
                    best, best_a = m.value, assign
    return MetisResult(best, best_a, first.value, first.feasible, first.violations, tries, ok)
