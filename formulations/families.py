"""Constraint families shared by the MILP and the MIQP (docs/DESIGN.md §3).

Notation (per outer configuration ``(pp, c, schedule)``): layers ``u`` in
topological order, stages ``i = 0..P-1``, boundaries ``b = 0..P-2`` (between
stage ``b`` and ``b+1``), edges ``e = (u, v)`` with ``u < v``, strategies ``k``
of layer ``u`` (``tables.strategies[u]``).

Stage assignment uses the cumulative form ``a[u,i] = [stage(u) <= i]``
(``a[u,P-1]`` is fixed to 1), so ``x[u,i] = a[u,i] - a[u,i-1]`` and the
crossing indicator of edge ``e`` at boundary ``b`` is ``a[u,b] - a[v,b]``.
Every component name below is stable: the outer search, warm starts and the
exported MPS/LP files rely on them.
"""

from __future__ import annotations

from autopar_opt.formulations.lazy_pyomo import pyo

from autopar_opt.cost.tables import CostTables, symmetric_edges


def x_expr(m: pyo.ConcreteModel, u: int, i: int):
    """``x[u,i] = a[u,i] - a[u,i-1]``: layer ``u`` sits in stage ``i``."""
    return m.a[u, i] - m.a[u, i - 1] if i > 0 else m.a[u, i]


def crossing_expr(m: pyo.ConcreteModel, e: int, b: int):
    """``z[e,b] = a[u,b] - a[v,b]``: edge ``e`` crosses boundary ``b``.

    Exact because ``a`` is monotone along the order (``a[v,b] <= a[u,b]``):
    it is 1 iff ``stage(u) <= b < stage(v)``, the relay semantics of
    :func:`autopar_opt.evaluate.evaluate`.
    """
    u, v = m.edge_list[e]
    return m.a[u, b] - m.a[v, b]


def add_index_sets(m: pyo.ConcreteModel, tables: CostTables) -> None:
    """Index sets ``L`` (layers), ``S`` (stages), ``B`` (boundaries), ``E``
    (edges), ``UK`` (layer, strategy) pairs; plus plain-python lookups."""
    n, pp = tables.num_layers, tables.pp
    m.L = pyo.RangeSet(0, n - 1)
    m.S = pyo.RangeSet(0, pp - 1)
    m.B = pyo.Set(initialize=list(range(pp - 1)))
    m.E = pyo.Set(initialize=list(range(len(tables.edges))))
    m.UK = pyo.Set(dimen=2, initialize=[(u, k) for u in range(n)
                                        for k in range(len(tables.strategies[u]))])
    m.edge_list = list(tables.edges)


def add_stage_assignment_constraints(m: pyo.ConcreteModel, tables: CostTables) -> None:
    """Contiguous, non-empty stages in topological order (docs/DESIGN.md §3).

    - ``a[u,i] in {0,1}``, ``a[u,P-1] = 1`` (fixed);
    - ``stage_monotone[u,i]``: ``a[u,i] <= a[u,i+1]`` (cumulative);
    - ``order_monotone[u,i]``: ``a[u+1,i] <= a[u,i]`` (a later layer never sits
      in an earlier stage: contiguity, and every edge goes forward);
    - ``stage_nonempty[i]``: ``sum_u x[u,i] >= 1``.
    """
    n, pp = tables.num_layers, tables.pp
    m.a = pyo.Var(m.L, m.S, domain=pyo.Binary)
    for u in range(n):
        m.a[u, pp - 1].fix(1)
    m.stage_monotone = pyo.Constraint(
        m.L, m.B, rule=lambda m, u, i: m.a[u, i] <= m.a[u, i + 1] if i + 1 < pp - 1 else pyo.Constraint.Skip)
    m.order_monotone = pyo.Constraint(
        m.L, m.B, rule=lambda m, u, i: m.a[u + 1, i] <= m.a[u, i] if u + 1 < n else pyo.Constraint.Skip)
    m.stage_nonempty = pyo.Constraint(
        m.S, rule=lambda m, i: sum(x_expr(m, u, i) for u in m.L) >= 1 if pp > 1 else pyo.Constraint.Skip)


def add_strategy_choice_constraints(m: pyo.ConcreteModel, tables: CostTables) -> None:
    """``s[u,k] in {0,1}`` with ``strategy_onehot[u]``: ``sum_k s[u,k] = 1``."""
    m.s = pyo.Var(m.UK, domain=pyo.Binary)
    m.strategy_onehot = pyo.Constraint(
        m.L, rule=lambda m, u: sum(m.s[u, k] for k in range(len(tables.strategies[u]))) == 1)


def add_same_stage_constraints(m: pyo.ConcreteModel, tables: CostTables) -> None:
    """``y[e,i] = x[u,i]·x[v,i]``: both ends of edge ``e`` in stage ``i``.

    With ``u`` before ``v`` and contiguity this is ``a[v,i]·(1 - a[u,i-1])``,
    linearised exactly for binaries by McCormick:
    ``y >= a[v,i] - a[u,i-1]``, ``y <= a[v,i]``, ``y <= 1 - a[u,i-1]``
    (``a[u,-1] = 0``). ``y`` is continuous in [0,1]; integral at every
    binary ``a``.
    """
    m.y = pyo.Var(m.E, m.S, bounds=(0, 1))

    def prev(u: int, i: int):
        return m.a[u, i - 1] if i > 0 else 0

    def lo(m, e, i):
        u, v = m.edge_list[e]
        return m.y[e, i] >= m.a[v, i] - prev(u, i)

    def hi_v(m, e, i):
        return m.y[e, i] <= m.a[m.edge_list[e][1], i]

    def hi_u(m, e, i):
        u = m.edge_list[e][0]
        return m.y[e, i] <= 1 - prev(u, i)
    m.same_stage_lo = pyo.Constraint(m.E, m.S, rule=lo)
    m.same_stage_hi_v = pyo.Constraint(
        m.E, m.S, rule=lambda m, e, i: hi_v(m, e, i) if i < tables.pp - 1 else pyo.Constraint.Skip)
    m.same_stage_hi_u = pyo.Constraint(
        m.E, m.S, rule=lambda m, e, i: hi_u(m, e, i) if i > 0 else pyo.Constraint.Skip)


def add_objective(m: pyo.ConcreteModel, tables: CostTables) -> None:
    """Pipeline latency with epigraph variables (docs/DESIGN.md §3):

    ``min T = sum_i p[i] + sum_b o[b] + (c-1)·bottleneck + sync_max + T0``
    with ``bottleneck >= p[i]``, ``bottleneck >= o[b]``, ``sync_max >= g[i]``
    (``T0`` = ``params.iteration_overhead_s``, a constant kept in the
    objective so that the solver's value equals ``evaluate`` directly).
    Requires ``m.p``, ``m.o``, ``m.g`` from the form-specific families.
    """
    m.bottleneck = pyo.Var(domain=pyo.NonNegativeReals)
    m.sync_max = pyo.Var(domain=pyo.NonNegativeReals)
    m.bottleneck_ge_stage = pyo.Constraint(m.S, rule=lambda m, i: m.bottleneck >= m.p[i])
    m.bottleneck_ge_transfer = pyo.Constraint(m.B, rule=lambda m, b: m.bottleneck >= m.o[b])
    m.sync_max_ge_stage = pyo.Constraint(m.S, rule=lambda m, i: m.sync_max >= m.g[i])
    c = tables.microbatches
    m.objective_constant = float(tables.params.iteration_overhead_s)
    m.obj = pyo.Objective(
        expr=sum(m.p[i] for i in m.S) + sum(m.o[b] for b in m.B)
        + (c - 1) * m.bottleneck + m.sync_max + m.objective_constant,
        sense=pyo.minimize)


def symmetry_cuts(tables: CostTables) -> list[tuple[int, int, list[int]]]:
    """``(e, k, K_<(k))`` for every symmetry cut: ``K_<(k)`` are the strategies
    ``k' < k`` of the same layout as ``k`` (cuts with an empty set are
    redundant and left out)."""
    earlier: dict[int, list[list[int]]] = {}
    cuts = []
    for e in symmetric_edges(tables):
        strats = tables.strategies[tables.edges[e][0]]
        if id(strats) not in earlier:
            lay = [s.layout for s in strats]
            earlier[id(strats)] = [[j for j in range(k) if lay[j] == lay[k]] for k in range(len(lay))]
        cuts += [(e, k, ks) for k, ks in enumerate(earlier[id(strats)]) if ks]
    return cuts


def add_symmetry_constraints(m: pyo.ConcreteModel, tables: CostTables) -> None:
    """Exact symmetry breaking between identical neighbouring layers.

    For every edge ``e = (u, v = u+1)`` of :func:`symmetric_edges` and every
    strategy ``k`` of ``u`` (``symmetry_order[e,k]``)::

        s[u,k] + sum_{k' < k, layout(k') = layout(k)} s[v,k'] <= 2 - sum_i y[e,i]

    i.e. when ``u`` and ``v`` share a stage (``sum_i y[e,i] = 1``) and a
    layout, ``v``'s strategy index is not below ``u``'s; otherwise the
    right-hand side is 2 and the row is redundant.

    Exactness (every optimum survives up to an equal-cost permutation): take
    any feasible assignment and, inside each maximal run of consecutive
    layers ``w, w+1, ...`` joined by symmetric edges, placed in one stage and
    sharing one layout, sort the strategy indices ascending. (i) The layers of
    a run have identical strategy lists and identical time, sync, weight and
    activation arrays (checked by :func:`symmetric_edges`), and the run stays
    inside its stage, so the multiset of per-layer costs of every stage is
    unchanged: ``p_i``'s layer part, ``g_i`` and the memory of stage ``i`` are
    equal. (ii) Resharding and cross-stage costs of ANY edge (chain edges and,
    in a DAG, skip edges touching the run) depend only on the layouts of its
    two ends (``Strategy.layout``; the cost tables are built from layouts and
    :func:`~autopar_opt.formulations.milp.layout_matrix` re-checks it), and
    the layout at every position is unchanged, as are the stages; so every
    in-stage and cross-stage term is equal. Hence the sorted assignment has
    the same objective and memory, and it satisfies every cut: for a
    symmetric edge inside one stage with one layout both ends lie in the
    same run (maximality), so ``k_u <= k_v``; for all other symmetric edges
    the right-hand side is 2. :func:`sort_symmetric_runs` is this map (used
    to make warm starts satisfy the cuts).
    """
    cuts = symmetry_cuts(tables)
    earlier = {(e, k): ks for e, k, ks in cuts}
    m.SYM = pyo.Set(dimen=2, initialize=[(e, k) for e, k, _ in cuts])

    def order(m, e, k):
        u, v = m.edge_list[e]
        return (m.s[u, k] + sum(m.s[v, j] for j in earlier[e, k])
                + sum(m.y[e, i] for i in m.S) <= 2)
    m.symmetry_order = pyo.Constraint(m.SYM, rule=order)


def sort_symmetric_runs(tables: CostTables, stage: list[int], ks: list[int]) -> list[int]:
    """The equal-cost representative of an assignment that satisfies the
    symmetry cuts: strategy indices sorted inside each maximal same-stage,
    same-layout run of symmetric edges (proof in :func:`add_symmetry_constraints`)."""
    out = list(ks)
    linked = {tables.edges[e][0] for e in symmetric_edges(tables)}

    def layout(u: int):
        return tables.strategies[u][out[u]].layout
    u, n = 0, tables.num_layers
    while u < n:
        w = u
        while w in linked and stage[w + 1] == stage[w] and layout(w + 1) == layout(w):
            w += 1
        if w > u:
            out[u:w + 1] = sorted(out[u:w + 1])
        u = w + 1
    return out


def add_stage_device_constraints(m: pyo.ConcreteModel, tables: CostTables) -> None:
    """Free stage sizes: a strategy runs only in a stage of its own device count.

    ``stage_devices[u,i,k]``: ``x[u,i] + s[u,k] <= 1`` for every strategy ``k``
    of layer ``u`` whose ``dp·tp·cp`` differs from stage ``i``'s devices
    (:meth:`~autopar_opt.cost.tables.CostTables.allowed_in_stage`). Exact at
    binary ``x``/``s``; absent with congruent stages.
    """
    masks = [tables.allowed_in_stage(i) for i in range(tables.pp)]
    if masks[0] is None:
        return
    bad = [(u, i, k) for i, mask in enumerate(masks) for u, ok in enumerate(mask)
           for k in map(int, (~ok).nonzero()[0])]
    m.stage_devices = pyo.Constraint(pyo.Set(dimen=3, initialize=bad),
                                     rule=lambda m, u, i, k: x_expr(m, u, i) + m.s[u, k] <= 1)

