"""The stage-knapsack LP bound of one configuration (contiguity and integrality relaxed).

The analytic bound (:func:`~autopar_opt.search.bounds.analytic_lower_bound`) averages:
every stage is as fast as the mean (``max_i p_i ≥ P/pp``) and, memory-aware, the stages
share one memory budget held at the least in-flight count. Where the stage holding the
most in-flight activations (stage 0 of 1F1B holds ``pp`` micro-batches, the last one 1)
has to give up speed to fit, that stage is the bottleneck, and only a bound that keeps
the stages apart sees it. :func:`knapsack_lp_bound` keeps them apart: an LP over how
many layers of each class sit in each stage on each strategy, with every stage's own
memory row and time under the bottleneck. Qwen3-235B-A22B on 256 H100, pp = 8, c = 64:
6.48 s from the analytic bound, 6.78 s here (its MILP proves >= 6.79 s after 83 s).

First written for mixed fleets (:mod:`autopar_opt.search.fleet`), where each stage's
allowed strategies differ; the search raises every configuration's bound with it before
solving it (:meth:`autopar_opt.search.engine.Search.tighten`).
"""

from __future__ import annotations

import math

import numpy as np

from autopar_opt.cost.tables import CostTables
from autopar_opt.ir.hardware import GIB
from autopar_opt.solvers.dp.common import fit_limit

#: Relative allowance for the LP solver's tolerances (the bound is lowered by it).
LP_SLACK = 1e-6
#: Largest LP built (strategy columns before dominance, all stages): beyond it the
#: bound is skipped (``-inf``), so a graph of many distinct layers never spends more
#: on the bound than the solve it would save.
MAX_COLUMNS = 200_000


def _columns_estimate(tables: CostTables) -> int:
    seen: dict[int, int] = {}
    for u, cls in enumerate(tables.layer_class or range(tables.num_layers)):
        seen.setdefault(cls, len(tables.time[u]))
    return tables.pp * sum(seen.values())


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
    holds at least one layer). ``c_mb`` is the tables' rounds: ``v·c`` chunk
    micro-batches of the stored ``1/v`` times under the interleaved schedule
    (:attr:`~autopar_opt.cost.tables.CostTables.rounds`). Every plan gives a feasible point of value at most
    ``Σp + (c−1)·max p + max g``, so the optimum plus ``T0`` bounds ``T`` (lowered
    by :data:`LP_SLACK`); ``-inf`` when the LP proves nothing."""
    pp, c = tables.pp, tables.rounds
    if _columns_estimate(tables) > MAX_COLUMNS:
        return -math.inf
    import scipy.sparse as sp
    from scipy.optimize import linprog

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
    # a Python float: scipy's objective is numpy.float64, and what it touches (a bound,
    # the certificate's comparisons) is written to JSON
    return float(res.fun) * (1 - LP_SLACK) + tables.params.iteration_overhead_s


def _undominated(a: np.ndarray, g: np.ndarray, m: np.ndarray) -> list[int]:
    """Indices of the strategies no other is at least as good as in time, sync and
    memory (a dominated column never improves the LP)."""
    keep = []
    for k in range(len(a)):
        worse = (a <= a[k]) & (g <= g[k]) & (m <= m[k]) & ((a < a[k]) | (g < g[k]) | (m < m[k]))
        if not worse.any():
            keep.append(k)
    return keep
