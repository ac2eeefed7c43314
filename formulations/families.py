"""Constraint families shared by the MILP and the MIQP (docs/DESIGN.md §3).

Each family is written once, as rows (:mod:`.rows`); the notation is that of
:mod:`.layout`. Stage assignment uses the cumulative form
``a[u,i] = [stage(u) <= i]`` (``a[u,P-1] = 1``, folded into the row bounds),
so ``x[u,i] = a[u,i] - a[u,i-1]`` and the crossing indicator of edge ``e``
at boundary ``b`` is ``z[e,b] = a[u,b] - a[v,b]``: exact because ``a`` is
monotone along the order (``a[v,b] <= a[u,b]``), it is 1 iff
``stage(u) <= b < stage(v)``, the relay semantics of
:func:`autopar_opt.cost.evaluate.evaluate`.
"""

from __future__ import annotations

import numpy as np

from autopar_opt.cost.tables import CostTables, symmetric_edges
from autopar_opt.formulations.layout import INF, ColumnLayout, StructureKey
from autopar_opt.formulations.rows import Fill, Rows, family, grid


@family(order=10)
def stage_assignment(R: Rows, C: ColumnLayout, key: StructureKey) -> None:
    """Contiguous, non-empty stages in topological order.

    - ``a[u,i] in {0,1}``, ``a[u,P-1] = 1`` (folded);
    - ``stage_monotone[u,i]``: ``a[u,i] <= a[u,i+1]`` (cumulative);
    - ``order_monotone[u,i]``: ``a[u+1,i] <= a[u,i]`` (a later layer never sits
      in an earlier stage: contiguity, and every edge goes forward);
    - ``stage_nonempty[i]``: ``sum_u x[u,i] >= 1``.
    """
    n, pp = C.n, C.pp
    if pp > 2:
        u, i = grid(n, pp - 2)
        R.add("stage_monotone", zip(u.tolist(), i.tolist()), np.repeat(np.arange(len(u)), 2),
              np.column_stack([C.a(u, i), C.a(u, i + 1)]), np.tile([1.0, -1.0], len(u)), -INF, 0.0)
    if pp > 1 and n > 1:
        u, i = grid(n - 1, pp - 1)
        R.add("order_monotone", zip(u.tolist(), i.tolist()), np.repeat(np.arange(len(u)), 2),
              np.column_stack([C.a(u + 1, i), C.a(u, i)]), np.tile([1.0, -1.0], len(u)), -INF, 0.0)
    if pp > 1:
        rows, cols, vals, lo = [], [], [], np.ones(pp)
        us = np.arange(n)
        for i in range(pp):
            if i < pp - 1:
                rows.append(np.full(n, i))
                cols.append(C.a(us, i))
                vals.append(np.ones(n))
            if i > 0:
                rows.append(np.full(n, i))
                cols.append(C.a(us, i - 1))
                vals.append(-np.ones(n))
        lo[pp - 1] = 1.0 - n
        R.add("stage_nonempty", ((i,) for i in range(pp)), np.concatenate(rows),
              np.concatenate(cols), np.concatenate(vals), lo, INF)


@family(order=20)
def strategy_choice(R: Rows, C: ColumnLayout, key: StructureKey) -> None:
    """``s[u,k] in {0,1}`` with ``strategy_onehot[u]``: ``sum_k s[u,k] = 1``."""
    nk = np.diff(C.koff)
    j = np.arange(int(C.koff[-1]))
    R.add("strategy_onehot", ((u,) for u in range(C.n)), np.repeat(np.arange(C.n), nk),
          C.s(0, j), 1.0, 1.0, 1.0)


@family(order=25)
def stage_devices(R: Rows, C: ColumnLayout, key: StructureKey) -> None:
    """Free stage sizes: a strategy runs only in a stage of its own device count.

    ``stage_devices[u,i,k]``: ``x[u,i] + s[u,k] <= 1`` for every strategy ``k``
    of layer ``u`` whose ``dp·tp·cp`` differs from stage ``i``'s devices
    (``key.forbid``, from :meth:`~autopar_opt.cost.tables.CostTables.allowed_in_stage`;
    empty with congruent stages). With ``x[u,i] = a[u,i] - a[u,i-1]`` and
    ``a[u,P-1] = 1`` folded into the bound. Exact at binary ``a``/``s``: it
    forbids exactly the assignments that put a strategy in a stage of another size.
    """
    if not key.forbid:
        return
    rows, cols, vals, hi = [], [], [], []
    for r, (u, i, k) in enumerate(key.forbid):
        c, v, bound = [C.s(u, k)], [1.0], 1.0
        if i < C.pp - 1:
            c.append(C.a(u, i))
            v.append(1.0)
        else:
            bound -= 1.0                      # a[u,P-1] = 1
        if i > 0:
            c.append(C.a(u, i - 1))
            v.append(-1.0)
        cols += c
        vals += v
        rows += [r] * len(c)
        hi.append(bound)
    R.add("stage_devices", key.forbid, rows, cols, vals, -INF, np.asarray(hi))


@family(order=27)
def uniform_choice(R: Rows, C: ColumnLayout, key: StructureKey) -> None:
    """A target's uniformity rule (:mod:`autopar_opt.ir.target`): one value per
    uniform dimension (tp, cp, sp, ZeRO, ep, etp, recomputation) for the model.

    ``uni[d,v] in {0,1}``: the model takes value ``v`` in dimension ``d``;
    ``uniform_onehot[d]``: ``sum_v uni[d,v] = 1``; ``uniform_match[u,d,v]``:
    ``sum_{k: key[u,k,d] = v} s[u,k] <= uni[d,v]`` (a strategy whose key says
    "any" in ``d`` is in no such row). Exact at binary ``s``: a layer's strategy
    of value ``v`` forces ``uni[d,v] = 1``, the one-hot row forbids a second
    value, and every runnable assignment sets ``uni`` to its values
    (``key.uniform`` empty: the free space, no rows).
    """
    if not key.uniform:
        return
    dims = sorted({d for d, _ in C.uni_index})
    rows_1, cols_1 = [], []
    for r, d in enumerate(dims):
        cols = [C.uni(p) for p in C.uni_index if p[0] == d]
        rows_1 += [r] * len(cols)
        cols_1 += cols
    R.add("uniform_onehot", [(d,) for d in dims], rows_1, cols_1, 1.0, 1.0, 1.0)
    index, rows, cols = [], [], []
    for u, keys in enumerate(key.uniform):
        arr = np.asarray(keys, dtype=np.int64).reshape(len(keys), -1)
        for d in range(arr.shape[1]):
            for v in sorted({int(x) for x in arr[:, d] if x >= 0}):
                ks = np.flatnonzero(arr[:, d] == v)
                r = len(index)
                index.append((u, d, v))
                rows += [r] * (len(ks) + 1)
                cols += C.s(u, ks).tolist() + [C.uni((d, v))]
    if index:
        vals = np.ones(len(cols))
        ends = np.cumsum(np.bincount(np.asarray(rows), minlength=len(index))) - 1
        vals[ends] = -1.0          # the uni column is each row's last entry
        R.add("uniform_match", index, rows, cols, vals, -INF, 0.0)


@family(order=28)
def fixed_split(R: Rows, C: ColumnLayout, key: StructureKey) -> None:
    """A target that splits the stages itself (DeepSpeed's uniform partition):
    ``fixed_stage[u,i]``: ``a[u,i] = [fixed(u) <= i]`` for ``i < P-1``."""
    if not key.fixed or C.pp < 2:
        return
    u, i = grid(C.n, C.pp - 1)
    val = (np.asarray(key.fixed)[u] <= i).astype(float)
    R.add("fixed_stage", zip(u.tolist(), i.tolist()), np.arange(len(u)), C.a(u, i), 1.0, val, val)


@family(order=30)
def symmetry_order(R: Rows, C: ColumnLayout, key: StructureKey) -> None:
    """Exact symmetry breaking between identical neighbouring layers (optional:
    ``key.sym_cuts`` is empty when off).

    For every edge ``e = (u, v = u+1)`` of :func:`symmetric_edges` and every
    strategy ``k`` of ``u`` (``symmetry_order[e,k]``)::

        s[u,k] + sum_{k' < k, layout(k') = layout(k)} s[v,k'] + sum_i y[e,i] <= 2

    i.e. when ``u`` and ``v`` share a stage (``sum_i y[e,i] = 1``) and a
    layout, ``v``'s strategy index is not below ``u``'s; otherwise the
    row is redundant.

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
    :func:`~autopar_opt.formulations.direct.collapse` re-checks it), and
    the layout at every position is unchanged, as are the stages; so every
    in-stage and cross-stage term is equal. Hence the sorted assignment has
    the same objective and memory, and it satisfies every cut: for a
    symmetric edge inside one stage with one layout both ends lie in the
    same run (maximality), so ``k_u <= k_v``; for all other symmetric edges
    the right-hand side is 2. :func:`sort_symmetric_runs` is this map (used
    to make warm starts satisfy the cuts).
    """
    if not key.sym_cuts:
        return
    rows, cols = [], []
    for r, (e, k, ks) in enumerate(key.sym_cuts):
        u, v = key.edges[e]
        c = [C.s(u, k)] + [C.s(v, j) for j in ks] + [C.y(e, i) for i in range(C.pp)]
        cols.append(np.asarray(c))
        rows.append(np.full(len(c), r))
    R.add("symmetry_order", ((e, k) for e, k, _ in key.sym_cuts), np.concatenate(rows),
          np.concatenate(cols), 1.0, -INF, 2.0)


@family(order=40)
def same_stage(R: Rows, C: ColumnLayout, key: StructureKey) -> None:
    """``y[e,i] = x[u,i]·x[v,i]``: both ends of edge ``e`` in stage ``i``.

    With ``u`` before ``v`` and contiguity this is ``a[v,i]·(1 - a[u,i-1])``,
    linearised exactly for binaries by McCormick (``a[u,-1] = 0``,
    ``a[v,P-1] = 1``): ``same_stage_lo[e,i]``: ``y >= a[v,i] - a[u,i-1]``;
    ``same_stage_hi_v[e,i]``: ``y <= a[v,i]`` (``i < P-1``);
    ``same_stage_hi_u[e,i]``: ``y <= 1 - a[u,i-1]`` (``i > 0``). ``y`` is
    continuous in [0,1]; integral at every binary ``a``.
    """
    pp, E = C.pp, len(key.edges)
    if E == 0:
        return
    eu = np.array([u for u, _ in key.edges])
    ev = np.array([v for _, v in key.edges])
    e, i = grid(E, pp)
    has_v, has_u = i < pp - 1, i > 0
    rows = np.concatenate([np.arange(len(e)), np.flatnonzero(has_v), np.flatnonzero(has_u)])
    cols = np.concatenate([C.y(e, i), C.a(ev[e[has_v]], i[has_v]), C.a(eu[e[has_u]], i[has_u] - 1)])
    vals = np.concatenate([np.ones(len(e)), -np.ones(has_v.sum()), np.ones(has_u.sum())])
    R.add("same_stage_lo", zip(e.tolist(), i.tolist()), rows, cols, vals, np.where(has_v, 0.0, 1.0), INF)
    e1, i1 = e[has_v], i[has_v]
    R.add("same_stage_hi_v", zip(e1.tolist(), i1.tolist()), np.repeat(np.arange(len(e1)), 2),
          np.column_stack([C.y(e1, i1), C.a(ev[e1], i1)]), np.tile([1.0, -1.0], len(e1)), -INF, 0.0)
    e2, i2 = e[has_u], i[has_u]
    R.add("same_stage_hi_u", zip(e2.tolist(), i2.tolist()), np.repeat(np.arange(len(e2)), 2),
          np.column_stack([C.y(e2, i2), C.a(eu[e2], i2 - 1)]), 1.0, -INF, 1.0)


def _objective_fill(F: Fill) -> None:
    """``c``: 1 on every ``p`` and ``o``, ``rounds - 1`` (``c - 1``; CostTables.rounds) on ``bottleneck``, 1 on
    ``sync_max``; the constant ``T0`` as the offset."""
    C = F.C
    F.c[C.block("p")] = 1.0
    F.c[C.block("o")] = 1.0
    F.c[C.bottleneck] = F.tables.rounds - 1
    F.c[C.sync_max] = 1.0
    F.offset = float(F.tables.params.iteration_overhead_s)


@family(order=90, fill=_objective_fill)
def objective(R: Rows, C: ColumnLayout, key: StructureKey) -> None:
    """Pipeline latency with epigraph variables:

    ``min T = sum_i p[i] + sum_b o[b] + (c-1)·bottleneck + sync_max + T0``
    with ``bottleneck_ge_stage[i]``: ``bottleneck >= p[i]``,
    ``bottleneck_ge_transfer[b]``: ``bottleneck >= o[b]``,
    ``sync_max_ge_stage[i]``: ``sync_max >= g[i]`` (``T0`` =
    ``params.iteration_overhead_s``, a constant kept in the objective so that
    the solver's value equals ``evaluate`` directly). ``p``, ``o``, ``g`` are
    defined by the form's stage-cost family.
    """
    pp = C.pp
    for name, count, col, top in (("bottleneck_ge_stage", pp, C.p(0), C.bottleneck),
                                  ("bottleneck_ge_transfer", pp - 1, C.o(0), C.bottleneck),
                                  ("sync_max_ge_stage", pp, C.g(0), C.sync_max)):
        if count == 0:
            continue
        R.add(name, ((x,) for x in range(count)), np.repeat(np.arange(count), 2),
              np.column_stack([np.full(count, top), np.arange(count) + col]),
              np.tile([1.0, -1.0], count), 0.0, INF)


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


def sort_symmetric_runs(tables: CostTables, stage: list[int], ks: list[int]) -> list[int]:
    """The equal-cost representative of an assignment that satisfies the
    symmetry cuts: strategy indices sorted inside each maximal same-stage,
    same-layout run of symmetric edges (proof in :func:`symmetry_order`)."""
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
