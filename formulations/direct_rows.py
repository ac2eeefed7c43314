"""The STRUCTURE step of the direct MILP matrix (see :mod:`.direct`).

Columns in the order ``p, o, bottleneck, sync_max, a, s, y, w, el, r, q, g``
(:class:`ColumnLayout`), Pyomo's spellings; one function per constraint
family of ``formulations/families.py`` and ``formulations/milp.py``, with the
same row names, writing COO blocks (:class:`_Rows`). ``a[u,P-1] = 1`` is
folded into the row bounds, as Pyomo's compiler folds the fixed variable.
Cost-dependent entries are left at zero and their positions recorded in
``MatrixStructure.slots`` for the coefficient step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

INF = np.inf


@dataclass(frozen=True)
class StructureKey:
    """Everything the structure depends on (hashable: the cache key)."""

    n: int
    pp: int
    edges: tuple[tuple[int, int], ...]
    gid: tuple[tuple[int, ...], ...]          # layout group of each strategy, per layer
    skip_reshard: tuple[bool, ...]            # per edge: all-zero R, no big-M rows
    skip_cross: tuple[tuple[bool, ...], ...]  # per edge and boundary
    sym_cuts: tuple[tuple[int, int, tuple[int, ...]], ...]


@dataclass(frozen=True)
class ColumnLayout:
    """Column offsets: p, o, bottleneck, sync_max, a, s, y, w, el, r, q, g."""

    n: int
    pp: int
    koff: np.ndarray       # first flat strategy index of each layer (len n+1)
    nl: np.ndarray         # number of layouts per layer
    eloff: np.ndarray      # first el column (relative) of each edge (len E+1)
    num_edges: int

    @property
    def p0(self) -> int:
        return 0

    @property
    def o0(self) -> int:
        return self.pp

    @property
    def bottleneck(self) -> int:
        return 2 * self.pp - 1

    @property
    def sync_max(self) -> int:
        return 2 * self.pp

    def a(self, u, i):
        return 2 * self.pp + 1 + u * (self.pp - 1) + i

    def s(self, u, k):
        return self.a(self.n, 0) + self.koff[u] + k

    def y(self, e, i):
        return self.s(self.n, 0) + e * self.pp + i

    def w(self, j, i):
        """``w[u,i,k]`` with ``j = koff[u] + k`` (the flat strategy index)."""
        return self.y(self.num_edges, 0) + j * self.pp + i

    def el(self, e, a, b, nlv):
        return self.w(int(self.koff[-1]), 0) + self.eloff[e] + a * nlv + b

    def r(self, e, i):
        return self.w(int(self.koff[-1]), 0) + int(self.eloff[-1]) + e * self.pp + i

    def q(self, e, b):
        return self.r(self.num_edges, 0) + e * (self.pp - 1) + b

    def g(self, i):
        return self.q(self.num_edges, 0) + i

    @property
    def num_cols(self) -> int:
        return self.g(self.pp)

    def names(self, edges) -> list[str]:
        """Column names in column order (Pyomo's ``var.name`` spelling)."""
        n, pp = self.n, self.pp
        nk = np.diff(self.koff)
        out = [f"p[{i}]" for i in range(pp)] + [f"o[{b}]" for b in range(pp - 1)]
        out += ["bottleneck", "sync_max"]
        out += [f"a[{u},{i}]" for u in range(n) for i in range(pp - 1)]
        out += [f"s[{u},{k}]" for u in range(n) for k in range(nk[u])]
        out += [f"y[{e},{i}]" for e in range(self.num_edges) for i in range(pp)]
        out += [f"w[{u},{i},{k}]" for u in range(n) for k in range(nk[u]) for i in range(pp)]
        out += [f"el[{e},{a},{b}]" for e, (u, v) in enumerate(edges)
                for a in range(self.nl[u]) for b in range(self.nl[v])]
        out += [f"r[{e},{i}]" for e in range(self.num_edges) for i in range(pp)]
        out += [f"q[{e},{b}]" for e in range(self.num_edges) for b in range(pp - 1)]
        return out + [f"g[{i}]" for i in range(pp)]


class _Rows:
    """Rows accumulated block by block in COO form, with bounds and names."""

    def __init__(self) -> None:
        self.rows: list[np.ndarray] = []
        self.cols: list[np.ndarray] = []
        self.vals: list[np.ndarray] = []
        self.lo: list[np.ndarray] = []
        self.hi: list[np.ndarray] = []
        self.names: list[str] = []
        self.num_rows = 0
        self.nnz = 0

    def add(self, rows, cols, vals, lo, hi, names: list[str]) -> tuple[slice, slice]:
        """Append ``len(names)`` rows; ``rows`` are local (0-based) row indices
        of the entries. Returns the row slice and the entry slice."""
        m = len(names)
        cols = np.asarray(cols, dtype=np.int64).ravel()
        self.rows.append(np.asarray(rows, dtype=np.int64).ravel() + self.num_rows)
        self.cols.append(cols)
        self.vals.append(np.broadcast_to(np.asarray(vals, dtype=float), cols.shape).copy())
        self.lo.append(np.broadcast_to(np.asarray(lo, dtype=float), (m,)).copy())
        self.hi.append(np.broadcast_to(np.asarray(hi, dtype=float), (m,)).copy())
        self.names += names
        out = slice(self.num_rows, self.num_rows + m), slice(self.nnz, self.nnz + len(cols))
        self.num_rows += m
        self.nnz += len(cols)
        return out

    def stack(self) -> tuple[np.ndarray, ...]:
        cat = lambda parts, dt: np.concatenate(parts).astype(dt) if parts else np.zeros(0, dt)
        return (cat(self.rows, np.int64), cat(self.cols, np.int64), cat(self.vals, float),
                cat(self.lo, float), cat(self.hi, float))


def _grid(*sizes: int) -> list[np.ndarray]:
    """Flattened index grids, last index fastest."""
    return [g.ravel() for g in np.meshgrid(*[np.arange(s) for s in sizes], indexing="ij")]


def _stage_rows(R: _Rows, C: ColumnLayout) -> None:
    """stage_monotone, order_monotone, stage_nonempty (``a[u,P-1] = 1`` folded)."""
    n, pp = C.n, C.pp
    if pp > 2:
        u, i = _grid(n, pp - 2)
        R.add(np.repeat(np.arange(len(u)), 2), np.column_stack([C.a(u, i), C.a(u, i + 1)]),
              np.tile([1.0, -1.0], len(u)), -INF, 0.0,
              [f"stage_monotone[{a},{b}]" for a, b in zip(u, i)])
    if pp > 1 and n > 1:
        u, i = _grid(n - 1, pp - 1)
        R.add(np.repeat(np.arange(len(u)), 2), np.column_stack([C.a(u + 1, i), C.a(u, i)]),
              np.tile([1.0, -1.0], len(u)), -INF, 0.0,
              [f"order_monotone[{a},{b}]" for a, b in zip(u, i)])
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
        R.add(np.concatenate(rows), np.concatenate(cols), np.concatenate(vals), lo, INF,
              [f"stage_nonempty[{i}]" for i in range(pp)])


def _strategy_rows(R: _Rows, C: ColumnLayout, inp: StructureKey) -> None:
    """strategy_onehot and the symmetry cuts (``symmetry_order``)."""
    nk = np.diff(C.koff)
    j = np.arange(int(C.koff[-1]))
    R.add(np.repeat(np.arange(C.n), nk), C.s(0, j), 1.0, 1.0, 1.0,
          [f"strategy_onehot[{u}]" for u in range(C.n)])
    if not inp.sym_cuts:
        return
    rows, cols = [], []
    for r, (e, k, ks) in enumerate(inp.sym_cuts):
        u, v = inp.edges[e]
        c = [C.s(u, k)] + [C.s(v, j) for j in ks] + [C.y(e, i) for i in range(C.pp)]
        cols.append(np.asarray(c))
        rows.append(np.full(len(c), r))
    R.add(np.concatenate(rows), np.concatenate(cols), 1.0, -INF, 2.0,
          [f"symmetry_order[{e},{k}]" for e, k, _ in inp.sym_cuts])


def _same_stage_rows(R: _Rows, C: ColumnLayout, inp: StructureKey) -> None:
    """same_stage_lo / _hi_v / _hi_u (McCormick for ``y[e,i]``)."""
    pp, E = C.pp, len(inp.edges)
    if E == 0:
        return
    eu = np.array([u for u, _ in inp.edges])
    ev = np.array([v for _, v in inp.edges])
    e, i = _grid(E, pp)
    # y[e,i] - a[v,i] + a[u,i-1] >= 0; a[v,P-1] = 1 moves to the bound, a[u,-1] = 0
    has_v, has_u = i < pp - 1, i > 0
    rows = np.concatenate([np.arange(len(e)), np.flatnonzero(has_v), np.flatnonzero(has_u)])
    cols = np.concatenate([C.y(e, i), C.a(ev[e[has_v]], i[has_v]), C.a(eu[e[has_u]], i[has_u] - 1)])
    vals = np.concatenate([np.ones(len(e)), -np.ones(has_v.sum()), np.ones(has_u.sum())])
    R.add(rows, cols, vals, np.where(has_v, 0.0, 1.0), INF,
          [f"same_stage_lo[{a},{b}]" for a, b in zip(e, i)])
    e1, i1 = e[has_v], i[has_v]
    R.add(np.repeat(np.arange(len(e1)), 2), np.column_stack([C.y(e1, i1), C.a(ev[e1], i1)]),
          np.tile([1.0, -1.0], len(e1)), -INF, 0.0,
          [f"same_stage_hi_v[{a},{b}]" for a, b in zip(e1, i1)])
    e2, i2 = e[has_u], i[has_u]
    R.add(np.repeat(np.arange(len(e2)), 2), np.column_stack([C.y(e2, i2), C.a(eu[e2], i2 - 1)]),
          1.0, -INF, 1.0, [f"same_stage_hi_u[{a},{b}]" for a, b in zip(e2, i2)])


def _layer_stage_rows(R: _Rows, C: ColumnLayout) -> None:
    """layer_stage_row (``sum_k w = x[u,i]``) and layer_stage_col (``sum_i w = s``)."""
    n, pp, K = C.n, C.pp, int(C.koff[-1])
    nk = np.diff(C.koff)
    j, i = _grid(K, pp)
    layer = np.repeat(np.arange(n), nk)[j]
    row_of = layer * pp + i                       # row (u, i)
    u, i2 = _grid(n, pp)
    has_a, has_prev = i2 < pp - 1, i2 > 0
    rows = np.concatenate([row_of, np.flatnonzero(has_a), np.flatnonzero(has_prev)])
    cols = np.concatenate([C.w(j, i), C.a(u[has_a], i2[has_a]), C.a(u[has_prev], i2[has_prev] - 1)])
    vals = np.concatenate([np.ones(K * pp), -np.ones(has_a.sum()), np.ones(has_prev.sum())])
    rhs = np.where(has_a, 0.0, 1.0)               # x[u,P-1] = 1 - a[u,P-2]
    R.add(rows, cols, vals, rhs, rhs, [f"layer_stage_row[{a},{b}]" for a, b in zip(u, i2)])
    jj = np.arange(K)
    R.add(np.concatenate([j, jj]), np.concatenate([C.w(j, i), C.s(0, jj)]),
          np.concatenate([np.ones(K * pp), -np.ones(K)]), 0.0, 0.0,
          [f"layer_stage_col[{a},{k}]" for a in range(n) for k in range(nk[a])])


def _edge_layout_rows(R: _Rows, C: ColumnLayout, inp: StructureKey) -> None:
    """edge_layout_src / edge_layout_dst (``el`` = product of layout indicators)."""
    for side, name in ((0, "edge_layout_src"), (1, "edge_layout_dst")):
        rows, cols, vals, names, r0 = [], [], [], [], 0
        for e, (u, v) in enumerate(inp.edges):
            nu, nv = int(C.nl[u]), int(C.nl[v])
            a, b = _grid(nu, nv)
            own = (a, u) if side == 0 else (b, v)
            rows.append(r0 + own[0])
            cols.append(C.el(e, a, b, nv))
            vals.append(np.ones(len(a)))
            g = np.asarray(inp.gid[own[1]])
            rows.append(r0 + g)
            cols.append(C.s(own[1], np.arange(len(g))))
            vals.append(-np.ones(len(g)))
            count = nu if side == 0 else nv
            names += [f"{name}[{e},{x}]" for x in range(count)]
            r0 += count
        if names:
            R.add(np.concatenate(rows), np.concatenate(cols), np.concatenate(vals), 0.0, 0.0, names)


def _attribution_rows(R: _Rows, C: ColumnLayout, inp: StructureKey) -> dict[str, tuple[slice, slice]]:
    """reshard_attr / cross_attr (big-M; coefficients filled per configuration).

    Entry order per row: ``r`` (or ``q``), the ``el`` block, then ``y`` (or
    ``a[u,b]``, ``a[v,b]``): :func:`_fill` relies on it."""
    pp, out = C.pp, {}
    rows, cols, names, r0 = [], [], [], 0
    for e, (u, v) in enumerate(inp.edges):
        if inp.skip_reshard[e]:
            continue
        nv = int(C.nl[v])
        a, b = _grid(int(C.nl[u]), nv)
        for i in range(pp):
            c = np.concatenate([[C.r(e, i)], C.el(e, a, b, nv), [C.y(e, i)]])
            cols.append(c)
            rows.append(np.full(len(c), r0))
            names.append(f"reshard_attr[{e},{i}]")
            r0 += 1
    if names:
        out["reshard"] = R.add(np.concatenate(rows), np.concatenate(cols), 0.0, 0.0, INF, names)
    rows, cols, names, r0 = [], [], [], 0
    for e, (u, v) in enumerate(inp.edges):
        nv = int(C.nl[v])
        a, b = _grid(int(C.nl[u]), nv)
        for bd in range(pp - 1):
            if inp.skip_cross[e][bd]:
                continue
            c = np.concatenate([[C.q(e, bd)], C.el(e, a, b, nv), [C.a(u, bd), C.a(v, bd)]])
            cols.append(c)
            rows.append(np.full(len(c), r0))
            names.append(f"cross_attr[{e},{bd}]")
            r0 += 1
    if names:
        out["cross"] = R.add(np.concatenate(rows), np.concatenate(cols), 0.0, 0.0, INF, names)
    return out


def _cost_rows(R: _Rows, C: ColumnLayout, num_edges: int) -> dict[str, tuple[slice, slice]]:
    """stage_time, transfer_time, stage_sync, stage_memory and the epigraph
    rows of the objective. The ``w`` entries of time, sync and memory come
    first in their blocks, ``(j, i)`` with ``i`` fastest: :func:`_fill` fills them."""
    pp, K, E = C.pp, int(C.koff[-1]), num_edges
    j, i = _grid(K, pp)
    e, ie = _grid(E, pp)
    out = {}
    out["time"] = R.add(np.concatenate([i, np.arange(pp), ie]),
                        np.concatenate([C.w(j, i), np.arange(pp) + C.p0, C.r(e, ie)]),
                        np.concatenate([np.zeros(K * pp), np.ones(pp), -np.ones(E * pp)]),
                        0.0, 0.0, [f"stage_time[{x}]" for x in range(pp)])
    if pp > 1:
        e, b = _grid(E, pp - 1)
        R.add(np.concatenate([np.arange(pp - 1), b]),
              np.concatenate([np.arange(pp - 1) + C.o0, C.q(e, b)]),
              np.concatenate([np.ones(pp - 1), -np.ones(len(e))]), 0.0, 0.0,
              [f"transfer_time[{x}]" for x in range(pp - 1)])
    out["sync"] = R.add(np.concatenate([i, np.arange(pp)]),
                        np.concatenate([C.w(j, i), C.g(np.arange(pp))]),
                        np.concatenate([np.zeros(K * pp), np.ones(pp)]), 0.0, 0.0,
                        [f"stage_sync[{x}]" for x in range(pp)])
    out["memory"] = R.add(i, C.w(j, i), 0.0, -INF, 0.0, [f"stage_memory[{x}]" for x in range(pp)])
    for name, n_, col in (("bottleneck_ge_stage", pp, C.p0), ("bottleneck_ge_transfer", pp - 1, C.o0),
                          ("sync_max_ge_stage", pp, C.g(0))):
        if n_ == 0:
            continue
        top = C.sync_max if name.startswith("sync") else C.bottleneck
        R.add(np.repeat(np.arange(n_), 2), np.column_stack([np.full(n_, top), np.arange(n_) + col]),
              np.tile([1.0, -1.0], n_), 0.0, INF, [f"{name}[{x}]" for x in range(n_)])
    return out


@dataclass
class MatrixStructure:
    """Everything of the MILP matrix that does not depend on costs (see module doc)."""

    key: StructureKey
    cols: ColumnLayout
    columns: list[str]
    row_names: list[str]
    template: np.ndarray         # COO values; cost slots are filled per configuration
    row_lo: np.ndarray
    row_hi: np.ndarray
    order: np.ndarray            # COO -> CSR permutation
    csr_rows: np.ndarray         # row of every CSR entry
    csr_cols: np.ndarray
    slots: dict[str, tuple[slice, slice]]
    integrality: np.ndarray
    col_lo: np.ndarray
    col_hi: np.ndarray
    build_s: float = 0.0

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.row_names), len(self.columns)


def build_structure(inp: StructureKey) -> MatrixStructure:
    """The structure step (no cost is read)."""
    start = time.perf_counter()
    nk = np.array([len(g) for g in inp.gid], dtype=np.int64)
    nl = np.array([max(g) + 1 if g else 0 for g in inp.gid], dtype=np.int64)
    el_sizes = [int(nl[u] * nl[v]) for u, v in inp.edges]
    C = ColumnLayout(n=inp.n, pp=inp.pp, koff=np.concatenate([[0], np.cumsum(nk)]), nl=nl,
                     eloff=np.concatenate([[0], np.cumsum(el_sizes, dtype=np.int64)]),
                     num_edges=len(inp.edges))
    R = _Rows()
    _stage_rows(R, C)
    _strategy_rows(R, C, inp)
    _same_stage_rows(R, C, inp)
    _layer_stage_rows(R, C)
    _edge_layout_rows(R, C, inp)
    slots = _attribution_rows(R, C, inp)
    slots.update(_cost_rows(R, C, len(inp.edges)))
    rows, cols, vals, lo, hi = R.stack()
    order = np.lexsort((cols, rows))
    rs, cs = rows[order], cols[order]
    if np.any((rs[1:] == rs[:-1]) & (cs[1:] == cs[:-1])):
        raise RuntimeError("direct MILP structure has a repeated (row, column) entry")
    ncols = C.num_cols
    integ = np.zeros(ncols, dtype=bool)
    integ[C.a(0, 0):C.y(0, 0)] = True               # a and s are binary
    col_hi = np.full(ncols, INF)
    col_hi[C.a(0, 0):C.w(0, 0)] = 1.0               # a, s binary; y in [0, 1]
    return MatrixStructure(key=inp, cols=C, columns=C.names(inp.edges), row_names=R.names,
                           template=vals, row_lo=lo, row_hi=hi, order=order, csr_rows=rs,
                           csr_cols=cs, slots=slots, integrality=integ, col_lo=np.zeros(ncols),
                           col_hi=col_hi, build_s=time.perf_counter() - start)


