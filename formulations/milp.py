"""The MILP's own families: the exact linearisation of the joint MIQP (docs/DESIGN.md §3).

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

from autopar_opt.formulations.layout import INF, ColumnLayout, StructureKey
from autopar_opt.formulations.rows import Fill, Rows, family, grid
from autopar_opt.ir.hardware import GIB, MEM_EPS

MILP = ("milp",)


@family(order=50, forms=MILP)
def layer_stage_product(R: Rows, C: ColumnLayout, key: StructureKey) -> None:
    """``w[u,i,k] = x[u,i]·s[u,k]`` (transportation form, see module doc):
    ``layer_stage_row[u,i]``: ``sum_k w[u,i,k] = x[u,i]`` (``x[u,P-1] = 1 - a[u,P-2]``);
    ``layer_stage_col[u,k]``: ``sum_i w[u,i,k] = s[u,k]``."""
    n, pp, K = C.n, C.pp, int(C.koff[-1])
    nk = np.diff(C.koff)
    j, i = grid(K, pp)
    row_of = np.repeat(np.arange(n), nk)[j] * pp + i     # row (u, i)
    u, i2 = grid(n, pp)
    has_a, has_prev = i2 < pp - 1, i2 > 0
    rows = np.concatenate([row_of, np.flatnonzero(has_a), np.flatnonzero(has_prev)])
    cols = np.concatenate([C.w(j, i), C.a(u[has_a], i2[has_a]), C.a(u[has_prev], i2[has_prev] - 1)])
    vals = np.concatenate([np.ones(K * pp), -np.ones(has_a.sum()), np.ones(has_prev.sum())])
    rhs = np.where(has_a, 0.0, 1.0)
    R.add("layer_stage_row", zip(u.tolist(), i2.tolist()), rows, cols, vals, rhs, rhs)
    jj = np.arange(K)
    R.add("layer_stage_col", ((a, k) for a in range(n) for k in range(nk[a])),
          np.concatenate([j, jj]), np.concatenate([C.w(j, i), C.s(0, jj)]),
          np.concatenate([np.ones(K * pp), -np.ones(K)]), 0.0, 0.0)


@family(order=60, forms=MILP)
def edge_layout(R: Rows, C: ColumnLayout, key: StructureKey) -> None:
    """``el[e,l,l'] = sigma_u[l]·sigma_v[l']`` with ``sigma_u[l] = sum_{k in l} s[u,k]``:
    ``edge_layout_src[e,l]``: ``sum_l' el[e,l,l'] = sigma_u[l]``;
    ``edge_layout_dst[e,l']``: ``sum_l el[e,l,l'] = sigma_v[l']``."""
    for side, name in ((0, "edge_layout_src"), (1, "edge_layout_dst")):
        rows, cols, vals, index, r0 = [], [], [], [], 0
        for e, (u, v) in enumerate(key.edges):
            nu, nv = int(C.nl[u]), int(C.nl[v])
            a, b = grid(nu, nv)
            own = (a, u) if side == 0 else (b, v)
            rows.append(r0 + own[0])
            cols.append(C.el(e, a, b, nv))
            vals.append(np.ones(len(a)))
            g = np.asarray(key.gid[own[1]])
            rows.append(r0 + g)
            cols.append(C.s(own[1], np.arange(len(g))))
            vals.append(-np.ones(len(g)))
            count = nu if side == 0 else nv
            index += [(e, x) for x in range(count)]
            r0 += count
        if index:
            R.add(name, index, np.concatenate(rows), np.concatenate(cols), np.concatenate(vals),
                  0.0, 0.0)


def _attribution_fill(F: Fill) -> None:
    """``r - R·el - M·y >= -M`` and ``q - R'·el - M·(a_u - a_v) >= -M`` with
    ``M`` the matrix maximum (the entry order of :func:`edge_attribution`)."""
    key, pp = F.key, F.C.pp
    if F.has("reshard"):
        blocks, bigs = [], []
        for e in range(len(key.edges)):
            if not key.skip_reshard[e]:
                mat = F.mats[e]["in"]
                big = float(mat.max())
                blocks.append(np.tile(np.concatenate([[1.0], -mat.ravel(), [-big]]), pp))
                bigs.append(np.full(pp, -big))
        F.data[F.entries("reshard")], F.lo[F.rows("reshard")] = np.concatenate(blocks), np.concatenate(bigs)
    if F.has("cross"):
        blocks, bigs = [], []
        for e in range(len(key.edges)):
            for b in range(pp - 1):
                if not key.skip_cross[e][b]:
                    mat = F.mats[e][key.tiers[b]]
                    big = float(mat.max())
                    blocks.append(np.concatenate([[1.0], -mat.ravel(), [-big, big]]))
                    bigs.append(-big)
        F.data[F.entries("cross")], F.lo[F.rows("cross")] = np.concatenate(blocks), np.asarray(bigs)


@family(order=70, forms=MILP, fill=_attribution_fill)
def edge_attribution(R: Rows, C: ColumnLayout, key: StructureKey) -> None:
    """Big-M attribution of edge costs (tightest valid M = max of the matrix):

    ``reshard_attr[e,i]``: ``r[e,i] >= sum_{l,l'} R_e[l,l']·el[e,l,l'] - max(R_e)·(1 - y[e,i])``;
    ``cross_attr[e,b]``: ``q[e,b] >= sum R'_{e,tier(b)}·el[e] - max(R'_{e,tier(b)})·(1 - z[e,b])``
    with ``z[e,b] = a[u,b] - a[v,b]`` (relayed over every boundary crossed). An
    edge whose matrix is all zero has no row. Entry order per row: ``r`` (or
    ``q``), the ``el`` block, then ``y`` (or ``a[u,b]``, ``a[v,b]``).
    """
    pp = C.pp
    rows, cols, index, r0 = [], [], [], 0
    for e, (u, v) in enumerate(key.edges):
        if key.skip_reshard[e]:
            continue
        nv = int(C.nl[v])
        a, b = grid(int(C.nl[u]), nv)
        for i in range(pp):
            c = np.concatenate([[C.r(e, i)], C.el(e, a, b, nv), [C.y(e, i)]])
            cols.append(c)
            rows.append(np.full(len(c), r0))
            index.append((e, i))
            r0 += 1
    if index:
        R.add("reshard_attr", index, np.concatenate(rows), np.concatenate(cols), 0.0, 0.0, INF,
              slot="reshard")
    rows, cols, index, r0 = [], [], [], 0
    for e, (u, v) in enumerate(key.edges):
        nv = int(C.nl[v])
        a, b = grid(int(C.nl[u]), nv)
        for bd in range(pp - 1):
            if key.skip_cross[e][bd]:
                continue
            c = np.concatenate([[C.q(e, bd)], C.el(e, a, b, nv), [C.a(u, bd), C.a(v, bd)]])
            cols.append(c)
            rows.append(np.full(len(c), r0))
            index.append((e, bd))
            r0 += 1
    if index:
        R.add("cross_attr", index, np.concatenate(rows), np.concatenate(cols), 0.0, 0.0, INF,
              slot="cross")


def _stage_cost_fill(F: Fill) -> None:
    """``-A``, ``-G`` and ``(W + inflight_i·H)/GiB`` on the ``w`` entries (``1`` on
    the ``work`` entries of the memory rows); the capacity (GiB) as the memory
    rows' upper bound."""
    t, pp = F.tables, F.C.pp
    K = int(F.C.koff[-1])
    for slot, arrs in (("time", t.time), ("sync", t.sync)):
        start = F.entries(slot).start
        F.data[start:start + K * pp] = -np.repeat(np.concatenate(arrs), pp)
    W, H = np.concatenate(t.weight_bytes), np.concatenate(t.act_bytes)
    inflight = np.asarray(t.inflight, dtype=float)
    F.data[F.entries("memory")] = np.concatenate([
        ((W[:, None] + inflight[None, :] * H[:, None]) / GIB).ravel(), np.ones(pp)])
    F.hi[F.rows("memory")] = float(t.capacity_bytes) / GIB + MEM_EPS   # the allowance of `fits`


@family(order=80, forms=MILP, fill=_stage_cost_fill)
def stage_costs(R: Rows, C: ColumnLayout, key: StructureKey) -> None:
    """Per-stage times and memory, linear in ``w``, ``r``, ``q``:

    ``stage_time[i]``: ``p[i] = sum_{u,k} A[u,k]·w[u,i,k] + sum_e r[e,i]``;
    ``transfer_time[b]``: ``o[b] = sum_e q[e,b]``;
    ``stage_sync[i]``: ``g[i] = sum_{u,k} G[u,k]·w[u,i,k]``;
    ``stage_memory[i]``: ``sum_{u,k} (W[u,k] + inflight_i·H[u,k])·w[u,i,k] + work[i] <= capacity``
    (written in GiB for numerics; ``work[i]`` the stage's working set, :func:`working_set`). The ``w`` entries come first in the time,
    sync and memory blocks, ``(j, i)`` with ``i`` fastest.
    """
    pp, K, E = C.pp, int(C.koff[-1]), len(key.edges)
    j, i = grid(K, pp)
    e, ie = grid(E, pp)
    stages = [(x,) for x in range(pp)]
    R.add("stage_time", stages, np.concatenate([i, np.arange(pp), ie]),
          np.concatenate([C.w(j, i), C.p(np.arange(pp)), C.r(e, ie)]),
          np.concatenate([np.zeros(K * pp), np.ones(pp), -np.ones(E * pp)]), 0.0, 0.0, slot="time")
    if pp > 1:
        e, b = grid(E, pp - 1)
        R.add("transfer_time", ((x,) for x in range(pp - 1)), np.concatenate([np.arange(pp - 1), b]),
              np.concatenate([C.o(np.arange(pp - 1)), C.q(e, b)]),
              np.concatenate([np.ones(pp - 1), -np.ones(len(e))]), 0.0, 0.0)
    R.add("stage_sync", stages, np.concatenate([i, np.arange(pp)]),
          np.concatenate([C.w(j, i), C.g(np.arange(pp))]),
          np.concatenate([np.zeros(K * pp), np.ones(pp)]), 0.0, 0.0, slot="sync")
    R.add("stage_memory", stages, np.concatenate([i, np.arange(pp)]),
          np.concatenate([C.w(j, i), C.work(np.arange(pp))]), 0.0, -INF, 0.0, slot="memory")


def _working_set_fill(F: Fill) -> None:
    """``-X/GiB`` on the ``w`` entries of the working-set rows."""
    t, pp = F.tables, F.C.pp
    nk = np.diff(F.C.koff)
    X = np.concatenate(t.working_bytes) / GIB
    # rows (u, i) in order, each: work[i], then w[u,i,k] for k of u
    parts = []
    for u in range(F.C.n):
        x = X[F.C.koff[u]:F.C.koff[u + 1]]
        parts.append(np.tile(np.concatenate([[1.0], -x]), pp) if nk[u] else np.ones(pp))
    F.data[F.entries("working")] = np.concatenate(parts)


@family(order=85, forms=MILP, fill=_working_set_fill)
def working_set(R: Rows, C: ColumnLayout, key: StructureKey) -> None:
    """The stage working set as an epigraph of a maximum (one layer is in flight at
    a time, :func:`~autopar_opt.cost.tables.stage_memory`):

    ``working_set[u,i]``: ``work[i] >= sum_k X[u,k]·w[u,i,k]`` (GiB). At binary
    ``w`` the right side is the working set of layer ``u`` if it sits in stage
    ``i``, else 0, so ``work[i] >= max_u X`` over the stage's layers; ``work``
    enters only the memory row with a positive coefficient, so a plan fits iff
    some ``work`` does, i.e. iff ``stored + max X <= capacity``. Entry order per
    row: ``work[i]``, then ``w[u,i,k]`` for every ``k``."""
    n, pp = C.n, C.pp
    rows, cols, index = [], [], []
    r = 0
    for u in range(n):
        ks = np.arange(C.koff[u], C.koff[u + 1])
        for i in range(pp):
            cols.append(np.concatenate([[C.work(i)], C.w(ks, i)]))
            rows.append(np.full(len(ks) + 1, r))
            index.append((u, i))
            r += 1
    R.add("working_set", index, np.concatenate(rows), np.concatenate(cols), 0.0, 0.0, INF,
          slot="working")
