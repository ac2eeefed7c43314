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

Cost (issue 33): every step is array work over the nodes and edges — sorts,
``bincount``, one strongly-connected-components pass in C when a cycle is
possible — so condensing is ``O((n + E) log(n + E))``; a million-node graph
condenses in about a second (before: a loop over classes × nodes and one over
units × nodes, 30 s at 10^5 nodes). Hyperedges are held as one flat array with
offsets (:attr:`Condensed.hyper_ptr`, :attr:`Condensed.hyper_flat`); the list
form :attr:`Condensed.hyper` and the per-unit :attr:`Condensed.members` are
made on first use, for the exact methods that run on small graphs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import numpy as np

from autopar_opt.core.ideals import unique_rows
from autopar_opt.placement.problem import PlacementProblem

#: Hyperedges are ordered by their first units as arrays; longer ones that tie
#: on this many units are ordered as tuples (rare: a node with that many consumers).
_SORT_WIDTH = 4


@dataclass
class Condensed:
    """Units (merged nodes) of a placement problem.

    Attributes
    ----------
    unit_of : ``(n,)`` unit of every original node.
    prec : ``(P, 2)`` precedence edges between units (the forward order).
    time : device-type -> ``(U,)`` summed time (``inf`` if any member cannot run there).
    size_bytes : ``(U,)`` summed sizes.
    hyper_ptr, hyper_flat : hyperedge ``k`` holds units ``hyper_flat[hyper_ptr[k]:hyper_ptr[k+1]]``
        (ascending, at least two), in lexicographic order of those unit tuples.
    hyper_w : ``(H,)`` their weights.
    """

    problem: PlacementProblem
    unit_of: np.ndarray
    prec: np.ndarray
    time: dict[str, np.ndarray]
    size_bytes: np.ndarray
    hyper_ptr: np.ndarray
    hyper_flat: np.ndarray
    hyper_w: np.ndarray

    @property
    def num_units(self) -> int:
        return int(self.size_bytes.shape[0])

    @property
    def num_hyper(self) -> int:
        return int(self.hyper_w.shape[0])

    @cached_property
    def hyper_size(self) -> np.ndarray:
        """``(H,)`` units per hyperedge."""
        return np.diff(self.hyper_ptr)

    @cached_property
    def hyper(self) -> list[np.ndarray]:
        """Hyperedges as a list of unit arrays (views into :attr:`hyper_flat`)."""
        return np.split(self.hyper_flat, self.hyper_ptr[1:-1]) if self.num_hyper else []

    @cached_property
    def members(self) -> list[np.ndarray]:
        """Original nodes of each unit (ascending)."""
        order = np.argsort(self.unit_of, kind="stable")
        counts = np.bincount(self.unit_of, minlength=self.num_units)
        return np.split(order, np.cumsum(counts)[:-1]) if self.num_units else []

    def expand(self, unit_device: np.ndarray) -> np.ndarray:
        """Unit -> device map to an original-node -> device map."""
        return np.asarray(unit_device, dtype=np.int64)[self.unit_of]


def first_seen_ids(values: np.ndarray) -> np.ndarray:
    """Dense ids ``0, 1, ...`` of ``values`` numbered in order of first appearance
    (what ``dict.setdefault(v, len(d))`` over the values gives, as array work)."""
    values = np.asarray(values, dtype=np.int64)
    if values.size == 0:
        return values.copy()
    order = np.argsort(values, kind="stable")
    sorted_v = values[order]
    new = np.r_[True, sorted_v[1:] != sorted_v[:-1]]
    group = np.cumsum(new) - 1                          # group of each sorted position
    first_pos = order[new]                              # first appearance of each group
    rank = np.empty(first_pos.size, dtype=np.int64)
    rank[np.argsort(first_pos, kind="stable")] = np.arange(first_pos.size)
    out = np.empty(values.size, dtype=np.int64)
    out[order] = rank[group]
    return out


def _class_units(p: PlacementProblem) -> tuple[np.ndarray, np.ndarray]:
    """Unit per node (forward part of a colour class = one unit; classes numbered in
    order of their first forward node, then of their first backward node) and the
    mirrored edges ``(P, 2)`` of classes without a forward node."""
    fwd, bwd = np.flatnonzero(~p.is_backward), np.flatnonzero(p.is_backward)
    order = np.concatenate([fwd, bwd])
    ids = np.empty(p.num_nodes, dtype=np.int64)
    ids[order] = first_seen_ids(p.color[order])
    unit = ids
    nu = int(unit.max()) + 1 if unit.size else 0
    orphan = np.bincount(unit[fwd], minlength=nu) == 0
    e = p.edges
    both_bwd = p.is_backward[e[:, 0]] & p.is_backward[e[:, 1]]
    touch = both_bwd & (orphan[unit[e[:, 0]]] | orphan[unit[e[:, 1]]])
    extra = np.stack([unit[e[touch, 1]], unit[e[touch, 0]]], axis=1).reshape(-1, 2)
    return unit, extra


def order_edges(p: PlacementProblem) -> np.ndarray:
    """``(E', 2)`` node pairs ``(u, v)`` along which a contiguous placement runs forward
    (``dev(u)`` no later than ``dev(v)`` in the chain of devices): the forward edges,
    and every backward edge touching a class without a forward node, reversed (the
    mirrored edges of the artificial forward unit of :func:`_class_units`, as the
    authors' DP's ``createArtificialForwardNodes``). Backward nodes of other classes
    ride on their forward unit and add nothing.

    The evaluator's contiguity check and the searchers' use these, so their space is
    the exact methods' (QA round 12: with forward edges only, an annealed plan that
    spread bert_l-3 training's loss nodes over three devices priced 65.303093, under
    the DP's proven optimum 65.303149, and the answer stated a bound above its value)."""
    e = p.edges
    bwd = p.is_backward
    fwd = ~bwd[e[:, 0]] & ~bwd[e[:, 1]]
    _, cls = np.unique(p.color, return_inverse=True)
    has_fwd = np.bincount(cls[~bwd], minlength=int(cls.max()) + 1 if cls.size else 0) > 0
    orphan = bwd & ~has_fwd[cls] if cls.size else bwd
    touch = bwd[e[:, 0]] & bwd[e[:, 1]] & (orphan[e[:, 0]] | orphan[e[:, 1]])
    return np.concatenate([e[fwd], e[touch][:, ::-1]]).reshape(-1, 2)


#: Above this many units a cycle check counts strongly connected components with scipy
#: (linear, in C); below, Kahn's algorithm in Python is quicker than importing scipy.
_SCIPY_CHECK_UNITS = 50_000


def is_acyclic(num: int, edges: np.ndarray) -> bool:
    """Whether the directed graph on ``0..num-1`` with ``edges`` ``(E, 2)`` has no cycle:
    at once when every edge goes to a higher id, else by Kahn's algorithm (small graphs)
    or by counting strongly connected components (scipy's linear-time pass in C)."""
    from autopar_opt.core.ideals import topological_order

    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    if edges.size == 0 or np.all(edges[:, 0] < edges[:, 1]):
        return True
    if num > _SCIPY_CHECK_UNITS:
        return _scc_labels(num, edges)[0] == num
    try:
        topological_order(num, edges)
    except ValueError:
        return False
    return True


def _scc_labels(num: int, edges: np.ndarray) -> tuple[int, np.ndarray]:
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    graph = coo_matrix((np.ones(len(edges), dtype=np.int8), (edges[:, 0], edges[:, 1])),
                       shape=(num, num)).tocsr()
    count, labels = connected_components(graph, directed=True, connection="strong")
    return int(count), labels.astype(np.int64)


def condense(p: PlacementProblem, *, fuse_cycles: bool = True,
             check: Callable[[], None] | None = None) -> Condensed:
    """Condense ``p`` (see the module docstring); ``fuse_cycles`` for contiguous variants.

    ``check`` is called between the steps (a deadline check that raises)."""
    check = check or (lambda: None)
    if np.any(p.is_backward[p.edges[:, 0]] & ~p.is_backward[p.edges[:, 1]]):
        raise ValueError(f"{p.name}: an edge goes from a backward node to a forward node")
    unit, extra = _class_units(p)
    check()
    fwd = ~p.is_backward[p.edges[:, 0]] & ~p.is_backward[p.edges[:, 1]]
    prec = np.concatenate([unit[p.edges[fwd]].reshape(-1, 2), extra])
    prec = unique_rows(prec[prec[:, 0] != prec[:, 1]]) if len(prec) else prec
    num = int(unit.max()) + 1 if len(unit) else 0
    if fuse_cycles and not is_acyclic(num, prec):
        _, comp = _scc_labels(num, prec)
        unit = comp[unit]
        prec = comp[prec]
        prec = prec[prec[:, 0] != prec[:, 1]]
    check()
    remap = np.empty(int(unit.max()) + 1 if len(unit) else 0, dtype=np.int64)
    dense = first_seen_ids(unit)                  # dense ids in order of first appearance
    remap[unit] = dense
    prec_arr = unique_rows(remap[prec]) if len(prec) else np.zeros((0, 2), dtype=np.int64)
    return _finish(p, dense, prec_arr, check)


def from_units(p: PlacementProblem, unit: np.ndarray, prec: np.ndarray,
               check: Callable[[], None] | None = None) -> Condensed:
    """The condensed problem for a given node -> unit map (dense ids) and unit precedence
    edges: times, sizes and hyperedges recomputed from the original graph (used by
    :mod:`autopar_opt.placement.coarsen` after merging units)."""
    return _finish(p, np.asarray(unit, dtype=np.int64),
                   np.asarray(prec, dtype=np.int64).reshape(-1, 2), check or (lambda: None))


def _finish(p: PlacementProblem, unit: np.ndarray, prec: np.ndarray,
            check: Callable[[], None]) -> Condensed:
    nu = int(unit.max()) + 1 if len(unit) else 0
    time = {k: np.bincount(unit, weights=np.where(np.isinf(t), 0.0, t), minlength=nu)
            for k, t in p.time.items()}
    for k, t in p.time.items():
        bad = np.bincount(unit, weights=np.isinf(t).astype(float), minlength=nu) > 0
        time[k][bad] = np.inf
    size = np.bincount(unit, weights=p.size_bytes, minlength=nu)
    check()
    ptr, flat, w = hyperedges(p, unit)
    return Condensed(problem=p, unit_of=unit, prec=prec, time=time, size_bytes=size,
                     hyper_ptr=ptr, hyper_flat=flat, hyper_w=w)


def hyperedges(p: PlacementProblem, unit: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The merged hyperedges of the module docstring as (offsets, flat units, weights).

    Each node ``u`` with consumers and ``comm[u] != 0`` gives the unit set of ``u``
    and its consumers; sets of one unit are dropped; equal sets are merged, their
    weights added in node order; the result is in lexicographic order of the sets."""
    e = unique_rows(p.edges) if len(p.edges) else p.edges
    src = e[:, 0]
    sources = np.flatnonzero((np.bincount(src, minlength=p.num_nodes) > 0) & (p.comm != 0))
    keep = p.comm[src] != 0
    rows = np.concatenate([np.stack([sources, unit[sources]], axis=1),
                           np.stack([src[keep], unit[e[keep, 1]]], axis=1)]).reshape(-1, 2)
    rows = unique_rows(rows) if len(rows) else rows           # sorted by node, then unit
    if not len(rows):
        return np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
    start = np.flatnonzero(np.r_[True, rows[1:, 0] != rows[:-1, 0]])
    size = np.diff(np.r_[start, len(rows)])
    multi = size >= 2
    start, size = start[multi], size[multi]
    owner = rows[start, 0]
    if not len(start):
        return np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
    ptr = np.r_[0, np.cumsum(size)]
    take = np.repeat(start - ptr[:-1], size) + np.arange(ptr[-1])
    flat = rows[take, 1]
    return _merge_sets(ptr, flat, p.comm[owner].astype(float))


def _merge_sets(ptr: np.ndarray, flat: np.ndarray, w: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sort the sets ``flat[ptr[k]:ptr[k+1]]`` lexicographically (stable: equal sets
    keep their input order) and merge equal ones, adding their weights in that order."""
    m = len(w)
    size = np.diff(ptr)
    cols = np.full((m, _SORT_WIDTH), -1, dtype=np.int64)
    for k in range(_SORT_WIDTH):
        has = size > k
        cols[has, k] = flat[ptr[:-1][has] + k]
    order = np.lexsort(tuple(cols[:, k] for k in reversed(range(_SORT_WIDTH))))
    key = cols[order]
    tie = np.r_[False, np.all(key[1:] == key[:-1], axis=1)]
    block = np.cumsum(~tie) - 1
    nblocks = int(block[-1]) + 1 if m else 0
    mixed = (np.bincount(block, minlength=nblocks) > 1) & (
        np.bincount(block, weights=(size[order] > _SORT_WIDTH).astype(float), minlength=nblocks) > 0)
    if mixed.any():                      # resolve ties that involve long sets as tuples
        order = order.copy()
        starts = np.flatnonzero(~tie)
        ends = np.r_[starts[1:], m]
        for a, b in zip(starts[mixed], ends[mixed]):
            tied = order[a:b].tolist()
            tied.sort(key=lambda s: tuple(flat[ptr[s]:ptr[s + 1]].tolist()))
            order[a:b] = tied
    sizes = size[order]
    same = np.r_[False, tie[1:] & (sizes[1:] == sizes[:-1])]
    for i in np.flatnonzero(same & (sizes > _SORT_WIDTH)):   # prefixes equal: compare whole
        x, y = order[i - 1], order[i]
        same[i] = np.array_equal(flat[ptr[x]:ptr[x + 1]], flat[ptr[y]:ptr[y + 1]])
    first = ~same
    groups = np.cumsum(first) - 1
    weights = w[order]
    merged = weights[first].copy()
    for i in np.flatnonzero(same):          # sequential sums (the order the loop used)
        merged[groups[i]] = merged[groups[i]] + weights[i]
    reps = order[first]
    out_size = size[reps]
    out_ptr = np.r_[0, np.cumsum(out_size)]
    take = np.repeat(ptr[reps] - out_ptr[:-1], out_size) + np.arange(out_ptr[-1])
    return out_ptr.astype(np.int64), flat[take], merged


def merge_units(cond: Condensed, parent: np.ndarray,
                check: Callable[[], None] | None = None) -> Condensed:
    """``cond`` with unit ``x`` merged into ``parent[x]`` (``parent[parent[x]] ==
    parent[x]``), worked out on the units rather than again from the original graph:
    times and sizes add up, precedence edges map across, and hyperedges map to the
    sets of merged units (repeated units dropped, one-unit sets dropped, equal sets
    merged with their weights added). New ids are the ranks of the parents."""
    from autopar_opt.core.ideals import unique_ints

    check = check or (lambda: None)
    parent = np.asarray(parent, dtype=np.int64)
    roots = unique_ints(parent)
    new = np.searchsorted(roots, parent)
    unit_of = new[cond.unit_of]
    nu = len(roots)
    time = {k: np.bincount(new, weights=np.where(np.isinf(t), 0.0, t), minlength=nu)
            for k, t in cond.time.items()}
    for k, t in cond.time.items():
        time[k][np.bincount(new, weights=np.isinf(t).astype(float), minlength=nu) > 0] = np.inf
    size = np.bincount(new, weights=cond.size_bytes, minlength=nu)
    prec = new[cond.prec]
    prec = unique_rows(prec[prec[:, 0] != prec[:, 1]]) if len(prec) else prec
    check()
    owner = np.repeat(np.arange(cond.num_hyper), cond.hyper_size)
    rows = unique_rows(np.stack([owner, new[cond.hyper_flat]], axis=1)) if len(owner) \
        else np.zeros((0, 2), dtype=np.int64)
    start = np.flatnonzero(np.r_[True, rows[1:, 0] != rows[:-1, 0]]) if len(rows) else rows[:, 0]
    count = np.diff(np.r_[start, len(rows)])
    keep = count >= 2
    start, count = start[keep], count[keep]
    if len(start):
        ptr = np.r_[0, np.cumsum(count)]
        flat = rows[np.repeat(start - ptr[:-1], count) + np.arange(ptr[-1]), 1]
        ptr, flat, w = _merge_sets(ptr, flat, cond.hyper_w[rows[start, 0]])
    else:
        ptr, flat, w = np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
    return Condensed(problem=cond.problem, unit_of=unit_of, prec=prec, time=time,
                     size_bytes=size, hyper_ptr=ptr, hyper_flat=flat, hyper_w=w)
