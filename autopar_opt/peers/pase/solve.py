"""PaSE's problem solved exactly, two independent ways, on the tables as given.

- ``dp``: min-sum variable elimination over dense numpy tables in a
  min-weight/min-fill order (:mod:`autopar_opt.solvers.dp.elimination`), the exact
  method of PaSE's Sec. IV with a better ordering than its greedy GENERATESEQ; where
  that order is wide, the exact domain reduction of
  :mod:`autopar_opt.solvers.dp.min_sum_reduction` runs first (PaSE's Transformer on
  64 devices: 52,613 configurations reduced to one per vertex in about 0.3 s, where the
  elimination of the whole tables takes about 3 s);
- MILP (HiGHS, Gurobi, SCIP): the local-marginal linearisation of the
  pairwise objective (Alpa's edge variables ``e = s_u s_vᵀ``, Zheng et al.,
  OSDI 2022, Sec. 4.2), ``Σ_k s_vk = 1``, ``Σ_h e_gh = Σ_{i∈g} s_ui``,
  ``Σ_g e_gh = Σ_{j∈h} s_vj``, exact for binary ``s``. Rows (columns) of an
  edge matrix that are equal are merged into one group first: the edge
  variable of a group pair stands for the sum of its members, so the program
  stays exact and shrinks (PaSE's matrices repeat rows for configurations
  with the same output layout).

Both return a :class:`PeerOutcome`; the objective is re-priced by
:func:`pase_objective` from the tables, never taken from the solver.
"""

from __future__ import annotations

import math
import time

import numpy as np

from autopar_opt.solvers.dp.elimination import (EliminationTimeout, EliminationTooWide, greedy_order,
                                                solve_min_sum)
from autopar_opt.solvers.matrix import matrix_backend, solve_matrix
from autopar_opt.peers.outcome import PeerOutcome
from autopar_opt.peers.pase.format import PaseInstance, pase_objective
from autopar_opt.core.matrix import MatrixForm
from autopar_opt.core.matrix_builder import MatrixBuilder
from autopar_opt.core.memory_budget import ModelSize
from autopar_opt.core.result import Termination


#: Tables whose elimination order has a step wider than this are first reduced exactly
#: (:func:`_reduce`); below it the reduction costs more than it saves (the threshold of
#: the same reduction in :mod:`autopar_opt.opspace.solve`).
REDUCE_WIDEST = 2_000_000


def _reduce(inst: PaseInstance) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], str]:
    """The exact domain reduction of :mod:`autopar_opt.solvers.dp.min_sum_reduction` (tree
    min-marginals against its own plan, dominance): the kept configurations per vertex
    (an optimal plan lies among them) and the tables restricted to them. The marginals'
    bound needs every edge cost >= 0: a matrix with a negative entry is shifted by its
    minimum for the reduction, which moves every plan's cost by the same constant."""
    from autopar_opt.solvers.dp.min_sum_reduction import reduce_domains

    shifted = [m if m.size == 0 or m.min() >= 0 else m - m.min() for m in inst.edge_cost]
    red = reduce_domains(inst.vertex_cost, inst.edges, shifted)
    keep = red.keep
    unary = [u[k] for u, k in zip(inst.vertex_cost, keep)]
    tables = [m[np.ix_(keep[a], keep[b])] for (a, b), m in zip(inst.edges, inst.edge_cost)]
    note = (f"; exact domain reduction first: {sum(map(len, keep)):,} of {sum(inst.sizes):,} "
            "configurations kept (tree min-marginals against its own plan, dominance)")
    return keep, unary, tables, note


def solve_pase_dp(inst: PaseInstance, time_limit_s: float | None = None) -> PeerOutcome:
    """Exact optimum by variable elimination (lower bound = optimum), after the exact
    domain reduction where the elimination would be wide (:data:`REDUCE_WIDEST`)."""
    start = time.monotonic()
    deadline = None if time_limit_s is None else start + time_limit_s
    keep, unary, tables, note = None, inst.vertex_cost, inst.edge_cost, ""
    stats: dict = {}
    if greedy_order(inst.sizes, inst.edges)[1] > REDUCE_WIDEST:
        keep, unary, tables, note = _reduce(inst)
        stats = {"configs_before_reduction": sum(inst.sizes),
                 "configs_after_reduction": sum(map(len, keep))}
    try:
        res = solve_min_sum(unary, inst.edges, tables, deadline)
    except EliminationTimeout:
        return PeerOutcome(Termination.time_limit_no_solution, None, None, -math.inf,
                           time.monotonic() - start, "dp", "time limit reached during elimination")
    except EliminationTooWide as exc:
        return PeerOutcome(Termination.error, None, None, -math.inf, time.monotonic() - start, "dp",
                           f"{exc}; use --solver highs")
    choice = res.choice if keep is None else [int(k[c]) for k, c in zip(keep, res.choice)]
    value = pase_objective(inst, choice)
    bound = value if abs(value - res.value) <= 1e-9 * abs(value) else min(value, res.value)
    return PeerOutcome(Termination.optimal, choice, value, bound,
                       time.monotonic() - start, "dp",
                       f"variable elimination, widest table {res.widest_entries:,} entries{note}",
                       {"widest_table_entries": res.widest_entries, **stats})


def _groups(mat: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Group ids of equal rows (axis 0) or columns (axis 1) and one representative each."""
    _, first, inverse = np.unique(mat if axis == 0 else mat.T, axis=0, return_index=True,
                                  return_inverse=True)
    return inverse.ravel(), first


def _edge_groups(inst: PaseInstance) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per edge: row groups, column groups and the reduced matrix (one entry per group pair)."""
    out = []
    for mat in inst.edge_cost:
        rg, rfirst = _groups(mat, 0)
        cg, cfirst = _groups(mat, 1)
        out.append((rg, cg, mat[np.ix_(rfirst, cfirst)]))
    return out


def pase_milp_size(inst: PaseInstance, groups=None) -> ModelSize:
    """Rows, columns and non-zeros of :func:`build_pase_matrix`'s matrix, before building it."""
    groups = _edge_groups(inst) if groups is None else groups
    sizes = inst.sizes
    cols, rows, nnz = sum(sizes), inst.n, sum(sizes)
    for (u, v), (rg, cg, red) in zip(inst.edges, groups):
        ng, nh = red.shape
        cols += ng * nh
        rows += ng + nh
        nnz += 2 * ng * nh + sizes[u] + sizes[v]
    return ModelSize(rows=rows, cols=cols, nonzeros=nnz)


def build_pase_matrix(inst: PaseInstance, scale: float, groups=None) -> tuple[MatrixForm, np.ndarray]:
    """The MILP as a matrix (objective divided by ``scale``); returns it and the ``s`` column
    offsets. Assembled in numpy blocks, one per edge."""
    groups = _edge_groups(inst) if groups is None else groups
    sizes = inst.sizes
    offs = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    bld = MatrixBuilder()
    s = bld.add_vars("s", (int(offs[-1]),), 0.0, 1.0, integer=True)
    cost = np.concatenate(inst.vertex_cost) / scale
    owner = np.repeat(np.arange(inst.n), sizes)
    bld.add_rows(owner, s, np.ones(len(s)), np.ones(inst.n), np.ones(inst.n))        # Σ_k s_vk = 1
    costs = [cost]
    for (u, v), (rg, cg, red) in zip(inst.edges, groups):
        ng, nh = red.shape
        e = bld.add_vars("e", (ng, nh), 0.0, 1.0)
        costs.append(red.ravel() / scale)
        # Σ_h e_gh − Σ_{i∈g} s_ui = 0 (rows g), then Σ_g e_gh − Σ_{j∈h} s_vj = 0 (rows ng + h)
        row = np.concatenate([np.repeat(np.arange(ng), nh), rg, ng + np.tile(np.arange(nh), ng),
                              ng + cg])
        col = np.concatenate([e.ravel(), s[offs[u]:offs[u + 1]], e.ravel(), s[offs[v]:offs[v + 1]]])
        val = np.concatenate([np.ones(ng * nh), -np.ones(sizes[u]), np.ones(ng * nh),
                              -np.ones(sizes[v])])
        bld.add_rows(row, col, val, np.zeros(ng + nh), np.zeros(ng + nh))
    form = bld.build()
    form.c = np.concatenate(costs)
    return form, offs


def solve_pase_mip(inst: PaseInstance, solver: str = "auto", time_limit_s: float | None = None,
                   rel_gap: float = 1e-9, cutoff: float | None = None) -> PeerOutcome:
    """Solve the MILP with ``solver``; the plan is decoded from ``s`` and re-priced."""
    start = time.monotonic()
    scale = max(1.0, max(float(np.abs(c).max()) for c in inst.vertex_cost + inst.edge_cost))
    form, offs = build_pase_matrix(inst, scale)
    limit = None if time_limit_s is None else max(time_limit_s - (time.monotonic() - start), 0.01)
    backend = matrix_backend(solver)
    res, x = solve_matrix(form, backend, time_limit_s=limit, rel_gap=rel_gap,
                          cutoff=None if cutoff is None else cutoff / scale)
    bound = res.lower_bound * scale if math.isfinite(res.lower_bound) else res.lower_bound
    choice = value = None
    if x is not None:
        choice = [int(np.argmax(x[offs[v]:offs[v + 1]])) for v in range(inst.n)]
        value = pase_objective(inst, choice)
        bound = min(bound, value)
    return PeerOutcome(res.termination, choice, value, bound, time.monotonic() - start, backend.name,
                       res.message or f"MILP: {form.num_cols} columns, {form.num_rows} rows",
                       {"columns": form.num_cols, "rows": form.num_rows}, res.solver_version)
