"""A communication-aware lower bound on max-load: pigeonhole over minimum-cut conflicts.

The work LP of :func:`~autopar_opt.placement.heuristics.compute_lower_bound`
drops communication, and so does the LP relaxation of the MILP (it spreads
every unit evenly over the slots, where the exact cut linearisation is zero).
On graphs whose optimum is dominated by transfers (the ResNet-50 operator
graphs: work bound 53.8 against an optimum of 124.3) both stall at the work
bound. This module proves a bound that charges communication.

**Pair floor.** For units ``u ≠ v`` let ``A(u, v)`` be the units every device
holding both must hold: ``{u, v}``, and in the contiguous variant every unit
on a path between them (a contiguous part is convex in the unit DAG: no path
leaves it and comes back). For a device type ``τ``, any device of that type
holding ``u`` and ``v`` holds some ``S ⊇ A`` and has load
``t_τ(S) + [τ pays]·cut(S) ≥ ψ_τ(A)`` with

    ψ_τ(A) = min_{S ⊇ A} t_τ(S) + cut(S)      (τ pays communication)
    ψ_τ(A) = t_τ(A)                           (it does not)

and ``ψ_τ(A) = ∞`` when ``A`` does not fit ``τ``'s memory or holds a unit
that cannot run on ``τ``. ``θ(u, v) = min_τ ψ_τ(A(u, v))`` is therefore a
lower bound on the load of every device holding both ``u`` and ``v``.

**Pigeonhole.** If ``Q`` is a set of ``K + 1`` units (``K`` devices in all)
with ``θ(u, v) ≥ θ*`` for every pair of ``Q``, every placement puts two units
of ``Q`` on one device, whose load is then ``≥ θ*``: ``max-load ≥ θ*``. This
generalises the pigeonhole bound ``t_(k) + t_(k+1)`` (pairs of single units,
no communication). The bound is valid for every placement, so for both
variants; the contiguous one uses the larger convex ``A``.

**Computing ψ.** ``min_{S ⊇ A} t(S) + cut(S)`` is a minimum ``s``–``t`` cut in
Lawler's graph of the hypergraph (hyperedge ``h`` → arc ``h_in → h_out`` of
capacity ``w_h``, members → ``h_in`` and ``h_out`` → members of infinite
capacity, so a closed source side pays ``w_h`` exactly when it holds part of
``h``) plus an arc ``u → t`` of capacity ``t_τ(u)`` per unit (infinite when
``u`` cannot run on ``τ``) and infinite arcs from the source to ``A``
(Picard and Queyranne's selection construction). Scipy's max flow needs
int32 capacities: they are scaled to the query's own upper bound
``t(A) + cut(A)`` (capping an arc at that bound leaves the minimum unchanged)
and rounded **down**, so the returned value is at most the true minimum.

**Finding Q.** Bisection on ``θ*``; for each trial value a greedy pass over
a topological order keeps a unit when its ``θ`` with every kept unit reaches
the trial value. The greedy may miss a larger set (the bound is then weaker,
never invalid: every pair of a returned set was checked).
"""

from __future__ import annotations

import numpy as np

from autopar_opt.placement.condense import Condensed

_I32 = np.int64(2**31 - 1)
_SCALE_TOP = float(2**30)


class PairFloor:
    """``θ(u, v)`` of the module docstring, cached."""

    def __init__(self, cond: Condensed, contiguous: bool) -> None:
        from autopar_opt.core.ideals import topological_order

        self.cond = cond
        nu = cond.num_units
        try:
            self.order = topological_order(nu, [tuple(e) for e in cond.prec.tolist()])
        except ValueError:
            if contiguous:        # a contiguous condensation fuses its cycles: never here
                raise
            # the units of a non-contiguous search may keep a cycle; the greedy pass is
            # valid in any order (it checks every pair it keeps), only its reach is not
            self.order = np.arange(nu, dtype=np.int64)
        self.reach = self._reachability(nu) if contiguous else None
        nh = len(cond.hyper)
        sizes = np.array([h.size for h in cond.hyper], dtype=np.int64)
        members = np.concatenate(cond.hyper) if nh else np.zeros(0, np.int64)
        hid = np.repeat(np.arange(nh), sizes)
        h_in = nu + 2 * np.arange(nh)
        self.src, self.snk = nu + 2 * nh, nu + 2 * nh + 1
        self.n = nu + 2 * nh + 2
        self.rows = np.concatenate([members, h_in, h_in[hid] + 1, np.arange(nu)])
        self.cols = np.concatenate([h_in[hid], h_in + 1, members, np.full(nu, self.snk)])
        self.n_inf = members.size
        self.cache: dict[tuple[int, int], float] = {}

    def _reachability(self, nu: int) -> np.ndarray:
        reach = np.eye(nu, dtype=bool)
        succ: list[list[int]] = [[] for _ in range(nu)]
        for u, v in self.cond.prec.tolist():
            succ[u].append(v)
        for u in self.order[::-1].tolist():
            for v in succ[u]:
                reach[u] |= reach[v]
        return reach

    def hull(self, u: int, v: int) -> np.ndarray:
        """The units every device holding ``u`` and ``v`` holds (convex hull if contiguous)."""
        if self.reach is not None:
            if self.reach[v, u]:
                u, v = v, u
            if self.reach[u, v]:
                return np.flatnonzero(self.reach[u] & self.reach[:, v])
        return np.array([u, v])

    def theta(self, u: int, v: int) -> float:
        key = (min(u, v), max(u, v))
        if key not in self.cache:
            a = self.hull(u, v)
            self.cache[key] = min(self.psi(t, a) for t in self.cond.problem.device_types
                                  if t.count > 0)
        return self.cache[key]

    def psi(self, t, a: np.ndarray) -> float:
        """``ψ_τ(A)``: a lower bound on the load of a ``τ`` device holding ``A``."""
        cond = self.cond
        tt = cond.time[t.name]
        if not np.all(np.isfinite(tt[a])) or cond.size_bytes[a].sum() > t.memory_bytes * (1 + 1e-9):
            return np.inf
        own = float(tt[a].sum())
        if not t.pays_comm or not len(cond.hyper):
            return own
        inside = np.zeros(cond.num_units, bool)
        inside[a] = True
        cut_a = float(sum(w for h, w in zip(cond.hyper, cond.hyper_w)
                          if inside[h].any() and not inside[h].all()))
        top = own + cut_a                       # S = A is a candidate: the minimum is ≤ top
        if top <= 0:
            return 0.0
        scale = _SCALE_TOP / top
        fin = np.where(np.isfinite(tt), np.minimum(tt, top), np.inf)
        caps = np.concatenate([np.full(self.n_inf, np.inf), np.minimum(cond.hyper_w, top),
                               np.full(self.n_inf, np.inf), fin])
        caps = np.where(np.isfinite(caps), np.floor(caps * scale), _I32).astype(np.int64)
        return self._flow(a, caps) / scale

    def _flow(self, a: np.ndarray, caps: np.ndarray) -> float:
        import scipy.sparse as sp
        from scipy.sparse.csgraph import maximum_flow

        rows = np.concatenate([self.rows, np.full(a.size, self.src)])
        cols = np.concatenate([self.cols, a])
        caps = np.concatenate([np.minimum(caps, _I32), np.full(a.size, _I32)])
        g = sp.csr_array((caps.astype(np.int32), (rows, cols)), shape=(self.n, self.n))
        return float(maximum_flow(g, self.src, self.snk).flow_value)


def _greedy_set(pf: PairFloor, size: int, level: float) -> list[int] | None:
    """Units in topological order, each kept when its θ with every kept unit is ≥ ``level``."""
    kept: list[int] = []
    for u in pf.order.tolist():
        if all(pf.theta(q, u) >= level for q in reversed(kept)):
            kept.append(u)
            if len(kept) == size:
                return kept
    return None


def conflict_bound(cond: Condensed, *, contiguous: bool, floor: float = 0.0,
                   rel_tol: float = 1e-7, max_units: int = 1000, budget_s: float = 10.0) -> float:
    """``θ*`` of the module docstring, or ``floor`` when it cannot beat ``floor``.

    ``floor`` is a bound already known (the work LP): the bisection starts
    there, and one greedy pass that finds no set above it ends the search.
    ``max_units`` skips the search on large graphs (one max flow per pair it
    visits) and returns ``floor``; after ``budget_s`` seconds the bisection
    stops with the best level proven so far (every returned value is a level
    at which a checked set exists, so stopping early only weakens it).
    """
    import time
    stop = time.perf_counter() + budget_s
    k = cond.problem.num_devices
    nu = cond.num_units
    if nu <= k or nu > max_units or k == 0:
        return floor
    pf = PairFloor(cond, contiguous)
    lo, hi = floor, min(float(cond.time[t.name][np.isfinite(cond.time[t.name])].sum())
                      for t in cond.problem.device_types if t.count > 0)
    first = True
    while hi - lo > rel_tol * max(hi, 1e-12) and time.perf_counter() < stop:
        mid = lo * (1 + 10 * rel_tol) if first else 0.5 * (lo + hi)
        first = False
        found = _greedy_set(pf, k + 1, mid)
        if found is None:
            hi = mid
        else:                                   # the set's own weakest pair (≥ mid)
            lo = min(pf.theta(u, v) for i, u in enumerate(found) for v in found[i + 1:])
            if lo >= hi:
                break
    return lo
