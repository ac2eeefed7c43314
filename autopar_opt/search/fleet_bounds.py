"""A load-balancing lower bound for configurations on a mixed fleet (issue 34).

The analytic bound (:func:`~autopar_opt.search.bounds.analytic_lower_bound`)
takes every layer at its fastest strategy on *any* stage: on a fleet that is
the fastest group's speed for every layer, far below what a pipeline with slow
stages can reach. This bound keeps which group each stage runs on.

Relaxation (an LP; contiguity and integrality dropped). ``z[c,i] ≥ 0`` layers
of cost class ``c`` (``n_c`` layers, interchangeable: same strategies and
costs) in stage ``i``, ``B`` the bottleneck:

    min  (c_mb − 1)·B + Σ_{c,i} a[c,i]·z[c,i]
    s.t. Σ_i z[c,i] = n_c                         every layer somewhere
         Σ_c a[c,i]·z[c,i] ≤ B                    every stage under the bottleneck
         Σ_c m[c,i]·z[c,i] ≤ capacity              every stage's stored memory
         Σ_c z[c,i] ≥ 1                           no empty stage

with ``a[c,i]`` the least time and ``m[c,i]`` the least stored memory
``W + inflight_i·H`` of the class among the strategies stage ``i`` may run
(:meth:`~autopar_opt.cost.tables.CostTables.allowed_in_stage`; both in the
tables' reference bytes). Every plan of the configuration gives a feasible
point (``z`` its layer counts, ``B`` its largest stage time) of value at most
``Σp + (c−1)·max p`` (strategies, resharding and working sets only add), and
``T ≥ Σp + (c−1)·max p + max g + T0``; with ``max g ≥ max_u min_k G`` the LP
value plus those constants is a lower bound on ``T``. HiGHS' optimum is
lowered by a relative 1e-6 (its feasibility and optimality tolerances) so that
round-off never lifts the bound above the truth; an LP HiGHS calls infeasible
proves nothing here (the caller keeps its other bound).
"""

from __future__ import annotations

import math

import numpy as np

from autopar_opt.cost.tables import CostTables
from autopar_opt.ir.hardware import GIB
from autopar_opt.solvers.dp.common import fit_limit

#: Relative allowance for the LP solver's tolerances (the bound is lowered by it).
LP_SLACK = 1e-6


def load_balance_bound(tables: CostTables) -> float:
    """The LP bound of the module doc (``-inf`` when the LP proves nothing)."""
    from scipy.optimize import linprog

    pp, c = tables.pp, tables.microbatches
    classes: dict[int, list[int]] = {}
    for u, cls in enumerate(tables.layer_class or range(tables.num_layers)):
        classes.setdefault(cls, []).append(u)
    reps = [us[0] for us in classes.values()]
    counts = np.array([len(us) for us in classes.values()], dtype=float)
    nc = len(reps)
    a = np.full((nc, pp), np.inf)
    m = np.full((nc, pp), np.inf)
    for i in range(pp):
        allowed = tables.allowed_in_stage(i)
        for j, u in enumerate(reps):
            ok = np.ones(len(tables.time[u]), bool) if allowed is None else allowed[u]
            if ok.any():
                a[j, i] = float(np.min(tables.time[u][ok]))
                mem = tables.weight_bytes[u] + tables.inflight[i] * tables.act_bytes[u]
                m[j, i] = float(np.min(mem[ok])) / GIB
    usable = np.isfinite(a) & np.isfinite(m)
    idx = {(j, i): k for k, (j, i) in enumerate(zip(*np.nonzero(usable)))}
    nv = len(idx) + 1                              # the z's, then B
    cost = np.zeros(nv)
    cost[-1] = c - 1
    a_eq = np.zeros((nc, nv))
    rows, rhs = [], []
    for (j, i), k in idx.items():
        cost[k] = a[j, i]
        a_eq[j, k] = 1.0
    for i in range(pp):
        time_row, mem_row, fill = np.zeros(nv), np.zeros(nv), np.zeros(nv)
        for j in range(nc):
            k = idx.get((j, i))
            if k is not None:
                time_row[k], mem_row[k], fill[k] = a[j, i], m[j, i], -1.0
        time_row[-1] = -1.0
        rows += [time_row, mem_row, fill]
        rhs += [0.0, fit_limit(tables) / GIB, -1.0]
    res = linprog(cost, A_ub=np.array(rows), b_ub=np.array(rhs), A_eq=a_eq, b_eq=counts,
                  bounds=[(0, None)] * nv, method="highs")
    if res.status != 0 or not math.isfinite(res.fun):
        return -math.inf
    sync = max(float(np.min(g)) for g in tables.sync if len(g))
    return res.fun * (1 - LP_SLACK) + sync + tables.params.iteration_overhead_s


def knapsack_lp_bound(tables: CostTables) -> float:
    """A stronger LP bound: the relaxation above with each stage's strategy choice
    kept (``z[c,i,k]`` layers of class ``c`` in stage ``i`` on strategy ``k``, only
    the strategies stage ``i`` may run), so that time and memory are traded per
    strategy as in the stage's knapsack, and the once-per-iteration terms as a
    variable ``Γ ≥ Σ G·z`` per stage and ``Γ ≥ max_u min_k G`` (every layer's
    stage reduces at least its least sync):

        min  (c_mb − 1)·B + Σ A·z + Γ
        s.t. Σ_{i,k} z[c,i,k] = n_c;   Σ_{c,k} A·z[·,i,·] ≤ B;   Σ_{c,k} G·z[·,i,·] ≤ Γ;
             Σ_{c,k} (W + inflight_i·H)·z[·,i,·] ≤ capacity − min X_i;   Σ_{c,k} z[·,i,·] ≥ 1

    (``min X_i`` the least working set of a strategy stage ``i`` may run: a stage
    holds at least one layer). Every plan gives a feasible point of value at most
    ``Σp + (c−1)·max p + max g``, so the optimum plus ``T0`` bounds ``T`` (lowered
    by :data:`LP_SLACK`); ``-inf`` when the LP proves nothing."""
    import scipy.sparse as sp
    from scipy.optimize import linprog

    pp, c = tables.pp, tables.microbatches
    classes: dict[int, list[int]] = {}
    for u, cls in enumerate(tables.layer_class or range(tables.num_layers)):
        classes.setdefault(cls, []).append(u)
    reps = [us[0] for us in classes.values()]
    counts = [len(us) for us in classes.values()]
    cap = fit_limit(tables) / GIB
    cols: list[tuple[int, int, float, float, float]] = []      # (class, stage, A, G, memory GiB)
    room = []
    for i in range(pp):
        allowed = tables.allowed_in_stage(i)
        xmin = math.inf
        for j, u in enumerate(reps):
            ok = np.ones(len(tables.time[u]), bool) if allowed is None else allowed[u]
            ks = np.flatnonzero(ok)
            if not len(ks):
                continue
            a, g = tables.time[u][ks], tables.sync[u][ks]
            mem = (tables.weight_bytes[u][ks] + tables.inflight[i] * tables.act_bytes[u][ks]) / GIB
            xmin = min(xmin, float(np.min(tables.working_bytes[u][ks])) / GIB)
            keep = _undominated(a, g, mem)
            cols += [(j, i, float(a[k]), float(g[k]), float(mem[k])) for k in keep]
        room.append(cap - (0.0 if math.isinf(xmin) else xmin))
    n = len(cols)
    if not n:
        return -math.inf
    nv = n + 2                                            # the z's, B, Γ
    cost = np.array([a for _, _, a, _, _ in cols] + [c - 1, 1.0])
    rows, data, idx, rhs = [], [], [], []
    r = 0
    for i in range(pp):
        mine = [k for k, col in enumerate(cols) if col[1] == i]
        for weight, extra in ((2, n), (3, n + 1)):      # time <= B, sync <= Γ
            rows += [r] * (len(mine) + 1)
            idx += mine + [extra]
            data += [cols[k][weight] for k in mine] + [-1.0]
            rhs.append(0.0)
            r += 1
        rows += [r] * len(mine)
        idx += mine
        data += [cols[k][4] for k in mine]
        rhs.append(room[i])
        r += 1
        rows += [r] * len(mine)
        idx += mine
        data += [-1.0] * len(mine)
        rhs.append(-1.0)
        r += 1
    a_ub = sp.csr_matrix((data, (rows, idx)), shape=(r, nv))
    eq_rows = [cols[k][0] for k in range(n)]
    a_eq = sp.csr_matrix(([1.0] * n, (eq_rows, list(range(n)))), shape=(len(reps), nv))
    sync_floor = max(float(np.min(g)) for g in tables.sync if len(g))   # max g >= max_u min_k G
    res = linprog(cost, A_ub=a_ub, b_ub=np.array(rhs), A_eq=a_eq, b_eq=np.array(counts, float),
                  bounds=[(0, None)] * (nv - 1) + [(sync_floor, None)], method="highs")
    if res.status != 0 or not math.isfinite(res.fun):
        return -math.inf
    return res.fun * (1 - LP_SLACK) + tables.params.iteration_overhead_s


def _undominated(a: np.ndarray, g: np.ndarray, m: np.ndarray) -> list[int]:
    """Indices of the strategies no other is at least as good as in time, sync and
    memory (a dominated column never improves the LP)."""
    keep = []
    for k in range(len(a)):
        worse = (a <= a[k]) & (g <= g[k]) & (m <= m[k]) & ((a < a[k]) | (g < g[k]) | (m < m[k]))
        if not worse.any():
            keep.append(k)
    return keep
