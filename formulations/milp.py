"""The exact MILP linearisation of the joint MIQP (docs/DESIGN.md §3), for HiGHS.

Products are linearised exactly:

- layer costs: ``w[u,i,k] = x[u,i]·s[u,k]`` by transportation constraints
  (``sum_k w[u,i,k] = x[u,i]``, ``sum_i w[u,i,k] = s[u,k]``, ``w >= 0``): at
  binary ``x``/``s`` the only solution is the product, and the relaxation is
  tighter than big-M (Alpa's edge-variable construction applied to the
  layer/stage product);
- resharding ``s_u^T R s_v``: Alpa-style edge variables over LAYOUT pairs
  ``el[e,l,l']`` (``sum_l' el = sum_{k: layout k = l} s[u,k]``, and the
  transpose). Resharding depends only on layouts (``Strategy.layout``), so
  this is exact and much smaller than strategy pairs;
- attribution of an edge cost to a stage / boundary: bounded big-M,
  ``r[e,i] >= rho_e - M_e·(1 - y[e,i])`` with the tightest valid
  ``M_e = max R_e`` (``r >= 0`` is then free when ``y = 0``); costs are
  non-negative and only lower-bounded, and every ``r`` enters the objective
  with a positive coefficient, so at an optimum ``r`` equals the product.
"""

from __future__ import annotations

import numpy as np
from autopar_opt.formulations.lazy_pyomo import pyo

from autopar_opt.cost.tables import CostTables
from autopar_opt.formulations.families import crossing_expr, x_expr
from autopar_opt.hardware import GIB


def layout_groups(tables: CostTables, u: int) -> tuple[list, list[list[int]]]:
    """Distinct layouts of layer ``u`` (first-seen order) and the strategy
    indices of each."""
    layouts: list = []
    groups: list[list[int]] = []
    for k, s in enumerate(tables.strategies[u]):
        if s.layout not in layouts:
            layouts.append(s.layout)
            groups.append([])
        groups[layouts.index(s.layout)].append(k)
    return layouts, groups


def layout_matrix(mat: np.ndarray, gu: list[list[int]], gv: list[list[int]]) -> np.ndarray:
    """Collapse a strategy-pair matrix to layout pairs (exact: it depends on
    layouts only; checked here so that a cost-model change cannot silently
    break the reduction)."""
    out = mat[np.ix_([g[0] for g in gu], [g[0] for g in gv])]
    for a, ga in enumerate(gu):
        for b, gb in enumerate(gv):
            block = mat[np.ix_(ga, gb)]
            if not np.allclose(block, out[a, b], rtol=1e-12, atol=0.0):
                raise ValueError("resharding cost differs between strategies of one layout")
    return out


def add_layer_stage_product_constraints(m: pyo.ConcreteModel, tables: CostTables) -> None:
    """``w[u,i,k] = x[u,i]·s[u,k]`` (transportation form, see module doc):
    ``layer_stage_row[u,i]``: ``sum_k w = x[u,i]``;
    ``layer_stage_col[u,k]``: ``sum_i w = s[u,k]``."""
    m.UIK = pyo.Set(dimen=3, initialize=[(u, i, k) for (u, k) in m.UK for i in m.S])
    m.w = pyo.Var(m.UIK, domain=pyo.NonNegativeReals)
    nk = [len(s) for s in tables.strategies]
    m.layer_stage_row = pyo.Constraint(
        m.L, m.S, rule=lambda m, u, i: sum(m.w[u, i, k] for k in range(nk[u])) == x_expr(m, u, i))
    m.layer_stage_col = pyo.Constraint(
        m.UK, rule=lambda m, u, k: sum(m.w[u, i, k] for i in m.S) == m.s[u, k])


def add_edge_layout_constraints(m: pyo.ConcreteModel, tables: CostTables) -> None:
    """``el[e,l,l'] = sigma_u[l]·sigma_v[l']`` with ``sigma_u[l] = sum_{k in l} s[u,k]``:
    ``edge_layout_src[e,l]``: ``sum_l' el = sigma_u[l]``;
    ``edge_layout_dst[e,l']``: ``sum_l el = sigma_v[l']``.
    Also stores, per edge, the layout-pair cost matrices used by the cost families."""
    groups = [layout_groups(tables, u)[1] for u in range(tables.num_layers)]
    idx, src, dst = [], [], []
    m.edge_cost = {}
    for e, (u, v) in enumerate(tables.edges):
        gu, gv = groups[u], groups[v]
        idx += [(e, a, b) for a in range(len(gu)) for b in range(len(gv))]
        src += [(e, a) for a in range(len(gu))]
        dst += [(e, b) for b in range(len(gv))]
        m.edge_cost[e] = {
            "in": layout_matrix(tables.reshard[e], gu, gv),
            "intra": layout_matrix(tables.cross_intra[e], gu, gv),
            "inter": layout_matrix(tables.cross_inter[e], gu, gv)}
    m.EL = pyo.Set(dimen=3, initialize=idx)
    m.el = pyo.Var(m.EL, domain=pyo.NonNegativeReals)
    m.edge_layout_src = pyo.Constraint(pyo.Set(dimen=2, initialize=src), rule=lambda m, e, a: (
        sum(m.el[e, a, b] for b in range(len(groups[m.edge_list[e][1]])))
        == sum(m.s[m.edge_list[e][0], k] for k in groups[m.edge_list[e][0]][a])))
    m.edge_layout_dst = pyo.Constraint(pyo.Set(dimen=2, initialize=dst), rule=lambda m, e, b: (
        sum(m.el[e, a, b] for a in range(len(groups[m.edge_list[e][0]])))
        == sum(m.s[m.edge_list[e][1], k] for k in groups[m.edge_list[e][1]][b])))


def _edge_cost_expr(m: pyo.ConcreteModel, e: int, kind: str):
    mat = m.edge_cost[e][kind]
    return sum(float(mat[a, b]) * m.el[e, a, b]
               for a in range(mat.shape[0]) for b in range(mat.shape[1]) if mat[a, b] != 0)


def add_edge_attribution_constraints(m: pyo.ConcreteModel, tables: CostTables) -> None:
    """Big-M attribution of edge costs (tightest valid M = max of the matrix):

    ``reshard_attr[e,i]``: ``r[e,i] >= rho_e - max(R_e)·(1 - y[e,i])``;
    ``cross_attr[e,b]``: ``q[e,b] >= rho'_{e,tier(b)} - max(R'_{e,tier(b)})·(1 - z[e,b])``
    where ``z[e,b] = a[u,b] - a[v,b]`` (relayed over every boundary crossed).
    """
    m.r = pyo.Var(m.E, m.S, domain=pyo.NonNegativeReals)
    m.q = pyo.Var(m.E, m.B, domain=pyo.NonNegativeReals)

    def reshard(m, e, i):
        big = float(m.edge_cost[e]["in"].max())
        if big <= 0:
            return pyo.Constraint.Skip
        return m.r[e, i] >= _edge_cost_expr(m, e, "in") - big * (1 - m.y[e, i])

    def cross(m, e, b):
        kind = "intra" if tables.boundary_intra[b] else "inter"
        big = float(m.edge_cost[e][kind].max())
        if big <= 0:
            return pyo.Constraint.Skip
        return m.q[e, b] >= _edge_cost_expr(m, e, kind) - big * (1 - crossing_expr(m, e, b))
    m.reshard_attr = pyo.Constraint(m.E, m.S, rule=reshard)
    m.cross_attr = pyo.Constraint(m.E, m.B, rule=cross)


def add_stage_cost_constraints(m: pyo.ConcreteModel, tables: CostTables) -> None:
    """Per-stage times and memory, linear in ``w``, ``r``, ``q``:

    ``stage_time[i]``: ``p[i] = sum_{u,k} A[u,k]·w[u,i,k] + sum_e r[e,i]``;
    ``transfer_time[b]``: ``o[b] = sum_e q[e,b]``;
    ``stage_sync[i]``: ``g[i] = sum_{u,k} G[u,k]·w[u,i,k]``;
    ``stage_memory[i]``: ``sum_{u,k} (W[u,k] + inflight_i·H[u,k])·w[u,i,k] <= capacity``
    (written in GiB for numerics).
    """
    m.p = pyo.Var(m.S, domain=pyo.NonNegativeReals)
    m.o = pyo.Var(m.B, domain=pyo.NonNegativeReals)
    m.g = pyo.Var(m.S, domain=pyo.NonNegativeReals)
    A, G, W, H = tables.time, tables.sync, tables.weight_bytes, tables.act_bytes
    m.stage_time = pyo.Constraint(m.S, rule=lambda m, i: m.p[i] == sum(
        float(A[u][k]) * m.w[u, i, k] for (u, k) in m.UK) + sum(m.r[e, i] for e in m.E))
    m.transfer_time = pyo.Constraint(m.B, rule=lambda m, b: m.o[b] == sum(m.q[e, b] for e in m.E))
    m.stage_sync = pyo.Constraint(m.S, rule=lambda m, i: m.g[i] == sum(
        float(G[u][k]) * m.w[u, i, k] for (u, k) in m.UK))
    cap = float(tables.capacity_bytes) / GIB   # rows in GiB: coefficients near 1
    m.stage_memory = pyo.Constraint(m.S, rule=lambda m, i: sum(
        float(W[u][k] + tables.inflight[i] * H[u][k]) / GIB * m.w[u, i, k] for (u, k) in m.UK) <= cap)


def add_milp_families(m: pyo.ConcreteModel, tables: CostTables) -> None:
    """All MILP-specific families, in paper order."""
    add_layer_stage_product_constraints(m, tables)
    add_edge_layout_constraints(m, tables)
    add_edge_attribution_constraints(m, tables)
    add_stage_cost_constraints(m, tables)
