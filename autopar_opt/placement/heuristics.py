"""Baselines and bounds that scale to 50,000-node graphs.

- :func:`single_device` — everything on the best single device (a baseline
  and, for max-load, an upper bound).
- :func:`topo_split` — a contiguous split along one topological order: binary
  search on the max-load ``L``; for each ``L`` a greedy sweep closes a part at
  the last position where its load (time + exact cut weight, maintained
  incrementally per hyperedge) was ``≤ L`` before its time alone exceeds
  ``L``. Always a valid contiguous placement (intervals of a topological order
  form a chain of ideals), not necessarily optimal: an upper bound.
- :func:`compute_lower_bound` — a valid lower bound on max-load for every
  variant (contiguous or not): the LP ``min L`` over fractional assignments of
  units to device types with ``Σ_u t_τ(u)·f[u,τ] ≤ count_τ·L`` (communication
  dropped, work divisible), raised to the largest ``min_τ t_τ(u)`` of a unit
  that must sit whole on one device and to the pigeonhole bound
  ``t_(k) + t_(k+1)`` (:func:`pigeonhole_bound`).
- :func:`critical_path_bound` — a valid lower bound on latency: the longest
  path with every node at its fastest type and free transfers.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from autopar_opt.core.ideals import topological_order
from autopar_opt.placement.condense import Condensed


def single_device(cond: Condensed) -> tuple[float, np.ndarray | None]:
    """Best max-load with every unit on one device (``inf``, None when none can hold all)."""
    best, dev = np.inf, None
    first = 0
    for t in cond.problem.device_types:
        if t.count > 0 and cond.size_bytes.sum() <= t.memory_bytes * (1 + 1e-9):
            val = float(cond.time[t.name].sum())
            if val < best:
                best, dev = val, first
        first += t.count
    if dev is None:
        return np.inf, None
    return best, np.full(cond.num_units, dev, dtype=np.int64)


def _unit_hyperedges(cond: Condensed) -> tuple[list[int], list[int]]:
    """Per unit, the hyperedges holding it, as flat lists (offsets, hyperedge ids)."""
    owner = np.repeat(np.arange(cond.num_hyper), cond.hyper_size)
    order = np.argsort(cond.hyper_flat, kind="stable")
    ptr = np.r_[0, np.cumsum(np.bincount(cond.hyper_flat, minlength=cond.num_units))]
    return ptr.tolist(), owner[order].tolist()


#: Units a sweep handles between two deadline checks.
_CHECK_EVERY = 1 << 15


def _sweep(order: list[int], t: list[float], size: list[float], ptr: list[int], hyp: list[int],
           hsize: list[int], w: list[float], limit: float, mem: float, parts_max: int,
           check: Callable[[], None]) -> list[int] | None:
    """Greedy part ends for threshold ``limit`` (positions in ``order``); None if > parts_max."""
    n = len(order)
    ends: list[int] = []
    i = 0
    seen = 0
    while i < n:
        cnt: dict[int, int] = {}
        comp = cut = memory = 0.0
        last_ok = -1
        j = i
        while j < n:
            u = order[j]
            comp += t[u]
            memory += size[u]
            if comp > limit or memory > mem:
                break
            for k in hyp[ptr[u]:ptr[u + 1]]:
                c = cnt.get(k, 0) + 1
                cnt[k] = c
                if c == 1:
                    cut += w[k]
                if c == hsize[k]:
                    cut -= w[k]
            if comp + cut <= limit * (1 + 1e-12):
                last_ok = j
            j += 1
        seen += j - i + 1
        if seen >= _CHECK_EVERY:
            check()
            seen = 0
        if last_ok < 0:
            return None
        ends.append(last_ok + 1)
        i = last_ok + 1
        if len(ends) > parts_max:
            return None
    return ends


def topo_split(cond: Condensed, type_index: int = 0, iters: int = 40,
               check: Callable[[], None] | None = None,
               lower: float = 0.0) -> tuple[float, np.ndarray | None]:
    """Contiguous split on the devices of one comm-paying type (module docstring).

    ``check`` is a deadline check that raises :class:`PhaseDeadline`: the bisection
    then stops and the best split found so far is returned (None when none yet).
    ``lower`` (a proven lower bound on max-load) starts the bisection there."""
    from autopar_opt.core.deadline import PhaseDeadline

    check = check or (lambda: None)
    types = cond.problem.device_types
    dt = types[type_index]
    t = cond.time[dt.name]
    if not np.all(np.isfinite(t)) or dt.count == 0:
        return np.inf, None
    order = topological_order(cond.num_units, cond.prec).tolist()
    ptr, hyp = _unit_hyperedges(cond)
    hsize = cond.hyper_size.tolist()
    w = cond.hyper_w if dt.pays_comm else np.zeros(cond.num_hyper)
    lo, hi = max(float(t.max()), lower), float(t.sum() + w.sum())
    lo = min(lo, hi)
    args = (t.tolist(), cond.size_bytes.tolist(), ptr, hyp, hsize, w.tolist())
    best = None
    try:
        for _ in range(iters):
            check()
            mid = 0.5 * (lo + hi)
            ends = _sweep(order, *args, mid, dt.memory_bytes, dt.count, check)
            if ends is not None and len(ends) <= dt.count:
                hi, best = mid, ends
            else:
                lo = mid
            if hi - lo <= 1e-9 * hi:
                break
    except PhaseDeadline:
        pass
    if best is None:
        return np.inf, None
    first = sum(x.count for x in types[:type_index])
    unit_dev = np.empty(cond.num_units, dtype=np.int64)
    start = 0
    for p, end in enumerate(best):
        unit_dev[order[start:end]] = first + p
        start = end
    return np.nan, unit_dev          # the caller evaluates the placement exactly


def pigeonhole_bound(tmin: np.ndarray, devices: int) -> float:
    """``t_(k) + t_(k+1)`` of the unit times sorted in decreasing order (``k`` devices).

    Of the ``k + 1`` units with the largest fastest-type time two share a device,
    whose load is at least the sum of their times (communication only adds): the
    classic makespan bound for ``P||C_max`` (Graham 1969), valid for every
    variant. 0 when there are at most ``k`` units."""
    if devices < 1 or tmin.size <= devices:
        return 0.0
    top = -np.partition(-tmin, devices)[:devices + 1]
    top.sort()
    return float(top[0] + top[1])


def compute_lower_bound(cond: Condensed, deadline: float | None = None) -> float:
    """The LP bound of the module docstring (valid for every variant).

    One or two device types (every shared instance: accelerators + host) are solved
    in closed form (:func:`two_type_lp`, no LP solver to load); more go to HiGHS, within
    what is left until ``deadline`` (a ``time.perf_counter()`` value; an LP cut short
    gives the per-unit bounds alone)."""
    types = [t for t in cond.problem.device_types if t.count > 0]
    times = np.array([cond.time[t.name] for t in types])         # (T, U)
    unit_lb = max(float(np.max(np.min(times, axis=0))) if cond.num_units else 0.0,
                  pigeonhole_bound(np.min(times, axis=0), sum(t.count for t in types)))
    if len(types) == 1:
        return max(unit_lb, float(times[0].sum()) / types[0].count)
    if len(types) == 2:
        lp = two_type_lp(times[0], times[1], types[0].count, types[1].count)
        # float sums: a relative 1e-12 margin keeps the closed form a bound
        return max(unit_lb, lp * (1 - 1e-12))
    left = None if deadline is None else deadline - time.perf_counter()
    if left is not None and left <= 0:
        return unit_lb
    return max(unit_lb, lp_bound(times, [t.count for t in types], left))


def two_type_lp(ta: np.ndarray, tb: np.ndarray, a: int, b: int) -> float:
    """``min L`` s.t. ``Σ_u ta_u f_u ≤ a·L``, ``Σ_u tb_u (1 − f_u) ≤ b·L``, ``0 ≤ f ≤ 1``.

    The LP of :func:`compute_lower_bound` for two device types (``inf``: the unit
    cannot run there). The lower-left frontier of the reachable ``(W_a, W_b)`` is
    the fractional-knapsack path that moves units from ``b`` to ``a`` in increasing
    ``ta/tb`` (an exchange argument), along which ``W_a/a`` rises and ``W_b/b``
    falls; the optimum is where they cross (or an end of the path). ``inf`` when
    some unit runs on neither type."""
    only_a, only_b = np.isinf(tb) & np.isfinite(ta), np.isinf(ta) & np.isfinite(tb)
    if np.any(np.isinf(ta) & np.isinf(tb)):
        return float("inf")
    free = ~(only_a | only_b)
    x, y = ta[free], tb[free]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(x == 0, 0.0, x / y)              # y == 0 < x: ratio inf (last)
    order = np.argsort(ratio, kind="stable")
    x, y = x[order], y[order]
    wa = float(ta[only_a].sum()) + np.r_[0.0, np.cumsum(x)]          # after k moves
    wb = float(tb[only_b].sum()) + float(y.sum()) - np.r_[0.0, np.cumsum(y)]
    g = wa / a - wb / b                                               # non-decreasing
    if g[0] >= 0:
        return float(wa[0] / a)
    if g[-1] <= 0:
        return float(wb[-1] / b)
    k = int(np.searchsorted(g, 0.0, side="left")) - 1                 # g[k] < 0 <= g[k+1]
    theta = (wb[k] / b - wa[k] / a) / (x[k] / a + y[k] / b)
    return float((wa[k] + theta * x[k]) / a)


def lp_bound(times: np.ndarray, counts: list[int], time_limit_s: float | None = None) -> float:
    """The LP of :func:`compute_lower_bound` (any number of device types) within
    ``time_limit_s``, solved through :func:`autopar_opt.solvers.matrix.solve_matrix`
    by the first installed backend that takes a matrix (chosen by its declared
    features, issue 30); 0 when no backend reports an optimum (0 is always a bound)."""
    import scipy.sparse as sp

    from autopar_opt.core.matrix import MatrixForm
    from autopar_opt.core.result import Termination
    from autopar_opt.solvers.base import SolverUnavailable
    from autopar_opt.solvers.matrix import matrix_backend, solve_matrix

    nt, nu = times.shape
    ok = np.isfinite(times)
    # columns: f[τ,u] (only finite), then L; rows: one assignment row per unit, one
    # capacity row per type. Column (τ,u) has 1 in row u and t in row nu+τ, column L
    # has -count_τ in rows nu+τ
    cols = np.flatnonzero(ok.ravel())
    ncol = cols.size + 1
    tau, unit = np.divmod(cols, nu)
    indptr = np.r_[np.arange(0, 2 * cols.size + 1, 2), 2 * cols.size + nt]
    indices = np.r_[np.stack([unit, nu + tau], axis=1).ravel(), nu + np.arange(nt)]
    data = np.r_[np.stack([np.ones(cols.size), times.ravel()[cols]], axis=1).ravel(),
                 -np.array(counts, dtype=float)]
    a = sp.csc_array((data, indices, indptr), shape=(nu + nt, ncol)).tocsr()
    form = MatrixForm(c=np.r_[np.zeros(cols.size), 1.0], A=a,
                      row_lo=np.r_[np.ones(nu), np.full(nt, -np.inf)],
                      row_hi=np.r_[np.ones(nu), np.zeros(nt)],
                      col_lo=np.zeros(ncol), col_hi=np.r_[np.ones(cols.size), np.inf],
                      integrality=np.zeros(ncol, dtype=bool), offset=0.0,
                      columns=[f"f{j}" for j in range(cols.size)] + ["L"])
    try:
        res, _ = solve_matrix(form, matrix_backend(None), rel_gap=0.0,
                              time_limit_s=None if time_limit_s is None
                              else max(float(time_limit_s), 0.01))
    except SolverUnavailable:
        return 0.0
    if res.termination is not Termination.optimal or res.primal is None:
        return 0.0
    # the LP optimum is exact up to the backend's tolerances: a relative safety margin
    return float(res.primal) * (1 - 1e-7)


def critical_path_bound(problem, check: Callable[[], None] | None = None) -> float:
    """Longest path of the graph with node weights ``min_τ t_τ(v)`` (no transfers);
    ``check`` (a deadline check that raises) is called every 2^16 nodes."""
    t = np.min(np.array([problem.time[dt.name] for dt in problem.device_types if dt.count > 0]),
               axis=0).tolist()
    preds: list[list[int]] = [[] for _ in range(problem.num_nodes)]
    for u, v in problem.edges.tolist():
        preds[v].append(u)
    fin = [0.0] * problem.num_nodes
    for i, v in enumerate(topological_order(problem.num_nodes, problem.edges).tolist()):
        if check is not None and not i & 0xFFFF:
            check()
        fin[v] = max((fin[u] for u in preds[v]), default=0.0) + t[v]
    return float(max(fin)) if problem.num_nodes else 0.0
