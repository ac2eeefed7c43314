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
from autopar_opt.search.stage_lp import LP_SLACK


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
    return float(res.fun) * (1 - LP_SLACK) + sync + tables.params.iteration_overhead_s
