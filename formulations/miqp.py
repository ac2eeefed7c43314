"""The joint MIQP's own families (docs/DESIGN.md §3, UniAP-style), native on Gurobi and SCIP.

The MIQP shares every linear family with the MILP (:mod:`.families`: stage
assignment, strategy choice, same stage, symmetry, objective epigraph),
written as rows; its stage costs stay quadratic and exist only as Pyomo
constraints, added here on top of :func:`~.pyomo_model.pyomo_model`. They
live in constraints so that the objective is linear in the epigraph
variables (pyscipopt rejects a quadratic objective). The degree-4 term
``x[u,i]·x[v,i]·(s_u^T R s_v)`` is split into two quadratic pieces:
``rho[e] >= s_u^T R_e s_v`` (integer quadratic) and ``y[e,i]·rho[e]`` (``y``
is the exact McCormick product of the stage indicators, shared with the
MILP). All cost matrices are non-negative and every ``rho`` enters the
objective with a positive coefficient, so at an optimum ``rho`` equals the
product.
"""

from __future__ import annotations

from typing import Any

from autopar_opt.cost.tables import CostTables
from autopar_opt.formulations.lazy_pyomo import pyo
from autopar_opt.ir.hardware import GIB, MEM_EPS


def x_expr(m: Any, u: int, i: int):
    """``x[u,i] = a[u,i] - a[u,i-1]``: layer ``u`` sits in stage ``i``."""
    return m.a[u, i] - m.a[u, i - 1] if i > 0 else m.a[u, i]


def crossing_expr(m: Any, tables: CostTables, e: int, b: int):
    """``z[e,b] = a[u,b] - a[v,b]``: edge ``e`` crosses boundary ``b``."""
    u, v = tables.edges[e]
    return m.a[u, b] - m.a[v, b]


def _quad(m: Any, mat, u: int, v: int):
    return sum(float(mat[k, j]) * m.s[u, k] * m.s[v, j]
               for k in range(mat.shape[0]) for j in range(mat.shape[1]) if mat[k, j] != 0)


def _cross_matrix(tables: CostTables, e: int, tier: str):
    return tables.cross_intra[e] if tier == "intra" else tables.cross_inter[e]


def add_edge_quadratic_constraints(m: Any, tables: CostTables) -> None:
    """``edge_reshard_def[e]``: ``rho[e] >= s_u^T R_e s_v``, ``0 <= rho[e] <= max R_e``;
    ``edge_cross_def[e,t]``: ``rho_x[e,t] >= s_u^T R'_{e,t} s_v`` for the
    boundary tiers ``t`` in use (``intra``/``inter``), ``rho_x <= max R'``."""
    edges = range(len(tables.edges))
    tiers = sorted({"intra" if f else "inter" for f in tables.boundary_intra})
    # bounded by the matrix maximum: without it a solver can scale a huge rho
    # against a y that is negative within tolerance (seen with SCIP)
    for e in edges:
        m.rho[e].setub(float(tables.reshard[e].max()))
        for t in tiers:
            m.rho_x[e, t].setub(float(_cross_matrix(tables, e, t).max()))

    def reshard(m, e):
        u, v = tables.edges[e]
        body = _quad(m, tables.reshard[e], u, v)
        return m.rho[e] >= body if not isinstance(body, int) else pyo.Constraint.Skip

    def cross(m, e, t):
        u, v = tables.edges[e]
        body = _quad(m, _cross_matrix(tables, e, t), u, v)
        return m.rho_x[e, t] >= body if not isinstance(body, int) else pyo.Constraint.Skip
    m.edge_reshard_def = pyo.Constraint(list(edges), rule=reshard)
    m.edge_cross_def = pyo.Constraint([(e, t) for e in edges for t in tiers], rule=cross)


def _layer_term(m: Any, tables: CostTables, i: int, coef):
    """``sum_{u,k} C[u,k]·x[u,i]·s[u,k]`` (quadratic in ``a`` and ``s``)."""
    return sum(float(coef(u, k)) * x_expr(m, u, i) * m.s[u, k]
               for u, strats in enumerate(tables.strategies) for k in range(len(strats)))


def add_stage_cost_constraints(m: Any, tables: CostTables) -> None:
    """Per-stage times and memory, quadratic:

    ``stage_time[i]``: ``p[i] = sum_{u,k} A[u,k]·x[u,i]·s[u,k] + sum_e y[e,i]·rho[e]``;
    ``transfer_time[b]``: ``o[b] = sum_e z[e,b]·rho_x[e,tier(b)]``;
    ``stage_sync[i]``: ``g[i] = sum_{u,k} G[u,k]·x[u,i]·s[u,k]``;
    ``stage_memory[i]``: ``sum_{u,k} (W + inflight_i·H)[u,k]·x[u,i]·s[u,k] + work[i] <= capacity`` (GiB);
    ``working_set[u,i]``: ``work[i] >= sum_k X[u,k]·x[u,i]·s[u,k]`` (GiB): the stage's
    working set is the epigraph of the largest ``X`` of its layers (the MILP's
    :func:`~.milp.working_set` with the product written out).
    """
    stages, edges = range(tables.pp), range(len(tables.edges))
    A, G, W, H = tables.time, tables.sync, tables.weight_bytes, tables.act_bytes
    m.stage_time = pyo.Constraint(list(stages), rule=lambda m, i: m.p[i] == _layer_term(
        m, tables, i, lambda u, k: A[u][k]) + sum(m.y[e, i] * m.rho[e] for e in edges))

    def transfer(m, b):
        t = "intra" if tables.boundary_intra[b] else "inter"
        return m.o[b] == sum(crossing_expr(m, tables, e, b) * m.rho_x[e, t] for e in edges)
    m.transfer_time = pyo.Constraint(list(range(tables.pp - 1)), rule=transfer)
    m.stage_sync = pyo.Constraint(list(stages), rule=lambda m, i: m.g[i] == _layer_term(
        m, tables, i, lambda u, k: G[u][k]))
    cap = float(tables.capacity_bytes) / GIB + MEM_EPS   # the allowance of `fits`
    m.stage_memory = pyo.Constraint(list(stages), rule=lambda m, i: _layer_term(
        m, tables, i, lambda u, k: (W[u][k] + tables.inflight[i] * H[u][k]) / GIB) + m.work[i] <= cap)
    X = tables.working_bytes

    def working(m, u, i):
        body = sum(float(X[u][k]) / GIB * x_expr(m, u, i) * m.s[u, k]
                   for k in range(len(tables.strategies[u])) if X[u][k])
        return m.work[i] >= body if not isinstance(body, int) else pyo.Constraint.Skip
    m.working_set = pyo.Constraint([(u, i) for u in range(tables.num_layers) for i in stages],
                                   rule=working)


def add_miqp_families(m: Any, tables: CostTables) -> None:
    """All MIQP-specific (quadratic) families, in paper order."""
    add_edge_quadratic_constraints(m, tables)
    add_stage_cost_constraints(m, tables)
