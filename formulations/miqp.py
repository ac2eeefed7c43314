"""The joint MIQP (docs/DESIGN.md §3, UniAP-style), native on Gurobi and SCIP.

The stage/strategy products stay quadratic; they live in constraints so that
the objective is linear in the epigraph variables (pyscipopt rejects a
quadratic objective). The degree-4 term ``x[u,i]·x[v,i]·(s_u^T R s_v)`` is
split into two quadratic pieces: ``rho[e] >= s_u^T R_e s_v`` (integer
quadratic) and ``y[e,i]·rho[e]`` (``y`` is the exact McCormick product of
the stage indicators, shared with the MILP). All cost matrices are
non-negative and every ``rho`` enters the objective with a positive
coefficient, so at an optimum ``rho`` equals the product.
"""

from __future__ import annotations

from autopar_opt.formulations.lazy_pyomo import pyo

from autopar_opt.cost.tables import CostTables
from autopar_opt.formulations.families import crossing_expr, x_expr
from autopar_opt.hardware import GIB


def _quad(m: pyo.ConcreteModel, mat, u: int, v: int):
    return sum(float(mat[k, j]) * m.s[u, k] * m.s[v, j]
               for k in range(mat.shape[0]) for j in range(mat.shape[1]) if mat[k, j] != 0)


def add_edge_quadratic_constraints(m: pyo.ConcreteModel, tables: CostTables) -> None:
    """``edge_reshard_def[e]``: ``rho[e] >= s_u^T R_e s_v``, ``0 <= rho[e] <= max R_e``;
    ``edge_cross_def[e,t]``: ``rho_x[e,t] >= s_u^T R'_{e,t} s_v`` for the
    boundary tiers ``t`` in use (``intra``/``inter``)."""
    tiers = sorted({"intra" if f else "inter" for f in tables.boundary_intra})
    m.T = pyo.Set(initialize=tiers)
    # bounded by the matrix maximum: without it a solver can scale a huge rho
    # against a y that is negative within tolerance (seen with SCIP)
    m.rho = pyo.Var(m.E, domain=pyo.NonNegativeReals,
                    bounds=lambda m, e: (0.0, float(tables.reshard[e].max())))
    m.rho_x = pyo.Var(m.E, m.T, domain=pyo.NonNegativeReals, bounds=lambda m, e, t: (0.0, float(
        (tables.cross_intra[e] if t == "intra" else tables.cross_inter[e]).max())))

    def reshard(m, e):
        u, v = m.edge_list[e]
        body = _quad(m, tables.reshard[e], u, v)
        return m.rho[e] >= body if not isinstance(body, int) else pyo.Constraint.Skip

    def cross(m, e, t):
        u, v = m.edge_list[e]
        mat = tables.cross_intra[e] if t == "intra" else tables.cross_inter[e]
        body = _quad(m, mat, u, v)
        return m.rho_x[e, t] >= body if not isinstance(body, int) else pyo.Constraint.Skip
    m.edge_reshard_def = pyo.Constraint(m.E, rule=reshard)
    m.edge_cross_def = pyo.Constraint(m.E, m.T, rule=cross)


def _layer_term(m: pyo.ConcreteModel, arrays, i: int, scale=None):
    """``sum_{u,k} C[u,k]·x[u,i]·s[u,k]`` (quadratic in ``a`` and ``s``)."""
    return sum(float(arrays[u][k] if scale is None else scale(u, k)) * x_expr(m, u, i) * m.s[u, k]
               for (u, k) in m.UK)


def add_stage_cost_constraints(m: pyo.ConcreteModel, tables: CostTables) -> None:
    """Per-stage times and memory, quadratic (docs/DESIGN.md §3):

    ``stage_time[i]``: ``p[i] = sum_{u,k} A[u,k]·x[u,i]·s[u,k] + sum_e y[e,i]·rho[e]``;
    ``transfer_time[b]``: ``o[b] = sum_e z[e,b]·rho_x[e,tier(b)]``;
    ``stage_sync[i]``: ``g[i] = sum_{u,k} G[u,k]·x[u,i]·s[u,k]``;
    ``stage_memory[i]``: ``sum_{u,k} (W + inflight_i·H)[u,k]·x[u,i]·s[u,k] <= capacity`` (GiB).
    """
    m.p = pyo.Var(m.S, domain=pyo.NonNegativeReals)
    m.o = pyo.Var(m.B, domain=pyo.NonNegativeReals)
    m.g = pyo.Var(m.S, domain=pyo.NonNegativeReals)
    m.stage_time = pyo.Constraint(m.S, rule=lambda m, i: m.p[i] == _layer_term(m, tables.time, i)
                                  + sum(m.y[e, i] * m.rho[e] for e in m.E))

    def transfer(m, b):
        t = "intra" if tables.boundary_intra[b] else "inter"
        return m.o[b] == sum(crossing_expr(m, e, b) * m.rho_x[e, t] for e in m.E)
    m.transfer_time = pyo.Constraint(m.B, rule=transfer)
    m.stage_sync = pyo.Constraint(m.S, rule=lambda m, i: m.g[i] == _layer_term(m, tables.sync, i))
    W, H = tables.weight_bytes, tables.act_bytes
    cap = float(tables.capacity_bytes) / GIB
    m.stage_memory = pyo.Constraint(m.S, rule=lambda m, i: _layer_term(
        m, None, i, scale=lambda u, k: (W[u][k] + tables.inflight[i] * H[u][k]) / GIB) <= cap)


def add_miqp_families(m: pyo.ConcreteModel, tables: CostTables) -> None:
    """All MIQP-specific families, in paper order."""
    add_edge_quadratic_constraints(m, tables)
    add_stage_cost_constraints(m, tables)
