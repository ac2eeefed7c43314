"""A placement problem as the per-node decoder sees it: units in one topological order.

The decision unit is the exact search's unit (:func:`autopar_opt.placement.condense.condense`:
a colour class with its backward nodes, strongly connected classes fused for the
contiguous variant). Chain coarsening is **not** applied: it keeps the optimum but
removes feasible placements, and the decoder's space must be the whole feasible set.

Units are listed in one fixed topological order ``σ`` of their precedence graph: a
LIFO Kahn order (continue with the most recently released unit), which follows
chains (an unrolled RNN layer, a residual block) instead of sweeping across them,
so that consecutive positions tend to belong together. Everything below indexes
units by their position in ``σ``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autopar_opt.placement.condense import Condensed, condense
from autopar_opt.placement.problem import PlacementProblem

#: Devices are tracked as bits of one int64 (the decoder's reachability closure).
MAX_DEVICES = 63


@dataclass
class UnitGraph:
    """Units of a placement problem in decode order (see the module docstring).

    Attributes
    ----------
    problem, contiguous : the instance and whether placements must be contiguous.
    cond : the condensed problem (units, hyperedges).
    order : ``(m,)`` unit index at each position of ``σ``.
    pred_ptr, pred_pos : CSR, for each position the positions of its predecessors
        (forward precedence; empty in the non-contiguous variant, where order is free).
    in_ptr, in_pos, in_w : CSR, for each position the positions of the units whose output
        it reads (first member of each hyperedge → the others) and the transfer weight.
    h_ptr, h_pos, h_w : hyperedges over positions (each of size ≥ 2) and their weights.
    time : ``(m, D)`` time of each unit on each device (``inf``: cannot run there).
    size : ``(m,)`` bytes; cap : ``(D,)`` device memory; pays : ``(D,)`` pays transfers.
    """

    problem: PlacementProblem
    contiguous: bool
    cond: Condensed
    order: np.ndarray
    pred_ptr: np.ndarray
    pred_pos: np.ndarray
    in_ptr: np.ndarray
    in_pos: np.ndarray
    in_w: np.ndarray
    h_ptr: np.ndarray
    h_pos: np.ndarray
    h_w: np.ndarray
    time: np.ndarray
    size: np.ndarray
    cap: np.ndarray
    pays: np.ndarray

    @property
    def num_units(self) -> int:
        return len(self.order)

    @property
    def num_devices(self) -> int:
        return len(self.cap)

    def node_assignment(self, dev_by_pos: np.ndarray) -> np.ndarray:
        """Device per original node from a device per position of ``σ``."""
        unit_dev = np.empty(self.num_units, dtype=np.int64)
        unit_dev[self.order] = dev_by_pos
        return self.cond.expand(unit_dev)

    def positions_of(self, node_assignment: np.ndarray) -> np.ndarray:
        """Device per position from a device per original node (its unit's first node)."""
        first = np.array([m[0] for m in self.cond.members], dtype=np.int64)
        return np.asarray(node_assignment, dtype=np.int64)[first][self.order]


def lifo_topological_order(m: int, prec: np.ndarray) -> np.ndarray:
    """A topological order of ``m`` units under ``prec`` edges, LIFO Kahn (module docstring)."""
    prec = np.asarray(prec, dtype=np.int64).reshape(-1, 2)
    indeg = np.bincount(prec[:, 1], minlength=m).tolist()
    srt = np.argsort(prec[:, 0], kind="stable")
    dst = prec[srt, 1].tolist()
    ptr = np.searchsorted(prec[srt, 0], np.arange(m + 1)).tolist()
    stack = [u for u in range(m - 1, -1, -1) if indeg[u] == 0]
    out: list[int] = []
    while stack:
        u = stack.pop()
        out.append(u)
        released = []
        for k in range(ptr[u], ptr[u + 1]):
            v = dst[k]
            indeg[v] -= 1
            if indeg[v] == 0:
                released.append(v)
        stack.extend(reversed(released))
    if len(out) != m:
        raise ValueError("the unit precedence graph has a cycle")
    return np.asarray(out, dtype=np.int64)


def _csr(keys: np.ndarray, vals: np.ndarray, m: int, *extra: np.ndarray) -> tuple:
    o = np.argsort(keys, kind="stable")
    return (np.searchsorted(keys[o], np.arange(m + 1)), vals[o], *(x[o] for x in extra))


def unit_graph(problem: PlacementProblem, contiguous: bool = True) -> UnitGraph:
    """Build the :class:`UnitGraph` of ``problem`` (raises ValueError above 63 devices)."""
    devs = problem.devices()
    if len(devs) > MAX_DEVICES:
        raise ValueError(f"{problem.name}: {len(devs)} devices; GDP's per-node decoder and "
                         f"the hierarchical planner track at most {MAX_DEVICES}: use --searcher "
                         "gdp --decoder block, --searcher anneal or random, or fewer devices")
    cond = condense(problem, fuse_cycles=contiguous)
    m = cond.num_units
    try:
        order = lifo_topological_order(m, cond.prec)
    except ValueError:
        if contiguous:           # condense fused every cycle: cannot happen
            raise
        order = np.arange(m)     # non-contiguous: colour classes may form cycles; any order
    rank = np.empty(m, dtype=np.int64)
    rank[order] = np.arange(m)
    if contiguous and len(cond.prec):
        a, b = rank[cond.prec[:, 0]], rank[cond.prec[:, 1]]
        pred_ptr, pred_pos = _csr(b, a, m)
    else:
        pred_ptr, pred_pos = np.zeros(m + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    hs = [np.sort(rank[h]) for h in cond.hyper]
    sizes = np.array([len(h) for h in hs], dtype=np.int64)
    h_ptr = np.r_[0, np.cumsum(sizes)].astype(np.int64)
    h_pos = np.concatenate(hs) if hs else np.zeros(0, dtype=np.int64)
    h_w = np.asarray(cond.hyper_w, dtype=float)
    src = np.repeat(h_pos[h_ptr[:-1]], sizes - 1) if hs else np.zeros(0, dtype=np.int64)
    keep = np.ones(len(h_pos), dtype=bool)
    keep[h_ptr[:-1]] = False
    dst, w = h_pos[keep], np.repeat(h_w, sizes - 1)
    in_ptr, in_pos, in_w = _csr(dst, src, m, w)
    time = np.stack([cond.time[dt.name] for dt in devs], axis=1)[order]
    return UnitGraph(problem=problem, contiguous=contiguous, cond=cond, order=order,
                     pred_ptr=pred_ptr, pred_pos=pred_pos, in_ptr=in_ptr, in_pos=in_pos,
                     in_w=in_w, h_ptr=h_ptr, h_pos=h_pos, h_w=h_w, time=time,
                     size=cond.size_bytes[order].astype(float),
                     cap=np.array([dt.memory_bytes for dt in devs], dtype=float),
                     pays=np.array([dt.pays_comm for dt in devs], dtype=bool))
