"""Exact condensation of a placement problem: colocation classes become single units.

Every exact method works on this condensed form. Two steps keep the optimum
because they only merge nodes that every feasible placement already keeps
together (Tarnawski et al., NeurIPS 2020, §3 "colocation" and their DP's
preprocessing):

1. **colour classes**: the forward nodes of a class become one *unit*; the
   backward nodes of the class ride on it (they must share its device and do
   not take part in the contiguity order). A class with backward nodes only
   gets an artificial forward unit whose precedence edges mirror the
   backward edges (the backward graph runs in reverse).
2. **cycles**: if merging classes creates a directed cycle among units, every
   contiguous placement must put the whole cycle on one device (a chain of
   ideals orders the parts along every edge), so strongly connected
   components are merged (for the contiguous variant only).

The load of a part is then ``Σ time + Σ_{hyperedges h cut} w_h`` where each
original node ``u`` with consumers gives the hyperedge
``{unit(u)} ∪ {unit(v) : v consumes u}`` of weight ``comm[u]`` (identical
hyperedges are merged, their weights added; single-unit ones dropped: they
can never be cut).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autopar_opt.placement.problem import PlacementProblem


@dataclass
class Condensed:
    """Units (merged nodes) of a placement problem.

    Attributes
    ----------
    unit_of : ``(n,)`` unit of every original node.
    members : original nodes of each unit.
    prec : ``(P, 2)`` precedence edges between units (the forward order).
    time : device-type -> ``(U,)`` summed time (``inf`` if any member cannot run there).
    size_bytes : ``(U,)`` summed sizes.
    hyper : list of unit-index arrays (each of length ≥ 2), ``hyper_w`` their weights.
    """

    problem: PlacementProblem
    unit_of: np.ndarray
    members: list[np.ndarray]
    prec: np.ndarray
    time: dict[str, np.ndarray]
    size_bytes: np.ndarray
    hyper: list[np.ndarray]
    hyper_w: np.ndarray

    @property
    def num_units(self) -> int:
        return len(self.members)

    def expand(self, unit_device: np.ndarray) -> np.ndarray:
        """Unit -> device map to an original-node -> device map."""
        return np.asarray(unit_device, dtype=np.int64)[self.unit_of]


def _class_units(p: PlacementProblem) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Unit per node (forward part of a colour class = one unit) and mirrored edges."""
    fwd_unit: dict[int, int] = {}
    for v in np.flatnonzero(~p.is_backward):
        fwd_unit.setdefault(int(p.color[v]), len(fwd_unit))
    for v in np.flatnonzero(p.is_backward):           # orphan classes: artificial unit
        fwd_unit.setdefault(int(p.color[v]), len(fwd_unit))
    unit = np.array([fwd_unit[int(c)] for c in p.color], dtype=np.int64)
    orphan = {u for c, u in fwd_unit.items()
              if not np.any((p.color == c) & ~p.is_backward)}
    extra = []
    for u, v in p.edges:
        if p.is_backward[u] and p.is_backward[v] and (unit[u] in orphan or unit[v] in orphan):
            extra.append((int(unit[v]), int(unit[u])))   # mirror of a backward edge
    return unit, extra


def _acyclic(num: int, edges) -> bool:
    from autopar_opt.core.ideals import topological_order

    try:
        topological_order(num, sorted(edges))
    except ValueError:
        return False
    return True


def condense(p: PlacementProblem, *, fuse_cycles: bool = True) -> Condensed:
    """Condense ``p`` (see the module docstring); ``fuse_cycles`` for contiguous variants."""
    if np.any(p.is_backward[p.edges[:, 0]] & ~p.is_backward[p.edges[:, 1]]):
        raise ValueError(f"{p.name}: an edge goes from a backward node to a forward node")
    unit, extra = _class_units(p)
    fwd = ~p.is_backward[p.edges[:, 0]] & ~p.is_backward[p.edges[:, 1]]
    prec = {(int(unit[u]), int(unit[v])) for u, v in p.edges[fwd]} | set(extra)
    prec = {(a, b) for a, b in prec if a != b}
    if fuse_cycles and not _acyclic(int(unit.max()) + 1 if len(unit) else 0, prec):
        import networkx as nx                      # only when there is a cycle to fuse

        g = nx.DiGraph()
        g.add_nodes_from(range(int(unit.max()) + 1 if len(unit) else 0))
        g.add_edges_from(prec)
        comp = {v: i for i, scc in enumerate(nx.strongly_connected_components(g)) for v in scc}
        unit = np.array([comp[int(u)] for u in unit], dtype=np.int64)
        prec = {(comp[a], comp[b]) for a, b in prec if comp[a] != comp[b]}
    remap: dict[int, int] = {}
    for u in unit.tolist():                      # dense ids in order of first appearance
        remap.setdefault(u, len(remap))
    unit = np.array([remap[u] for u in unit.tolist()], dtype=np.int64)
    prec_arr = np.array(sorted({(remap[a], remap[b]) for a, b in prec}),
                        dtype=np.int64).reshape(-1, 2)
    return _finish(p, unit, prec_arr)


def from_units(p: PlacementProblem, unit: np.ndarray, prec: np.ndarray) -> Condensed:
    """The condensed problem for a given node -> unit map (dense ids) and unit precedence
    edges: times, sizes and hyperedges recomputed from the original graph (used by
    :mod:`autopar_opt.placement.coarsen` after merging units)."""
    return _finish(p, np.asarray(unit, dtype=np.int64), np.asarray(prec, dtype=np.int64).reshape(-1, 2))


def _finish(p: PlacementProblem, unit: np.ndarray, prec: np.ndarray) -> Condensed:
    nu = int(unit.max()) + 1 if len(unit) else 0
    members = [np.flatnonzero(unit == u) for u in range(nu)]
    time = {k: np.bincount(unit, weights=np.where(np.isinf(t), 0.0, t), minlength=nu)
            for k, t in p.time.items()}
    for k, t in p.time.items():
        bad = np.bincount(unit, weights=np.isinf(t).astype(float), minlength=nu) > 0
        time[k][bad] = np.inf
    size = np.bincount(unit, weights=p.size_bytes, minlength=nu)
    agg: dict[tuple[int, ...], float] = {}
    for u, cons in enumerate(p.consumers()):
        if cons.size == 0 or p.comm[u] == 0:
            continue
        key = tuple(sorted({int(unit[u])} | set(unit[cons].tolist())))
        if len(key) > 1:
            agg[key] = agg.get(key, 0.0) + float(p.comm[u])
    keys = sorted(agg)
    return Condensed(problem=p, unit_of=unit, members=members, prec=prec, time=time,
                     size_bytes=size, hyper=[np.asarray(k, dtype=np.int64) for k in keys],
                     hyper_w=np.array([agg[k] for k in keys], dtype=float))
