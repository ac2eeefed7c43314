"""Operator-level sharding as a MILP with Alpa's edge variables (matrix form, HiGHS fast path).

Variables: ``s[v,k] ∈ {0,1}`` (operator ``v`` takes configuration ``k``) and, per edge
``(u,v)``, ``e[u,v,g,h] ∈ [0,1]`` for the pairs of *groups* of equal rows ``g`` of
``u`` and equal columns ``h`` of ``v`` of the redistribution matrix ``R_uv``
(configurations with the same output/input layout share a row/column). Zheng et al.,
"Alpa", OSDI 2022, Sec. 4.2, eq. (1)-(3), with the groups merged as in
:func:`autopar_opt.peers.pase.solve.build_pase_matrix`:

* (a) ``Σ_k s[v,k] = 1``                                          (one configuration)
* (b) ``Σ_h e[u,v,g,h] = Σ_{k∈g} s[u,k]``                          (edge marginals)
* (c) ``Σ_g e[u,v,g,h] = Σ_{k∈h} s[v,k]``
* (d) ``Σ_v Σ_k W[v,k]·s[v,k] ≤ capacity``                          (memory per device)
* (t) optional ties (the operator space restricted to per-layer templates): binary
  ``y[L,t]`` per layer and template, ``s[v,k] = Σ_{t: img_t(v) = k} y[L,t]`` for every
  member ``v`` of ``L`` (so ``Σ_t y[L,t] = 1``), and ``s[v,k] = 0`` for a configuration no
  template gives ``v``.

objective ``Σ A[v,k]·s[v,k] + Σ R[g,h]·e[u,v,g,h]`` (divided by ``scale``). For binary
``s``, (b)-(c) force ``e`` to the product ``s_u s_vᵀ`` summed over the groups (local
marginal polytope of a pair: exact), so the optimum is the operator-space optimum.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from autopar_opt.core.matrix import MatrixForm
from autopar_opt.core.memory_budget import ModelSize


def equal_groups(mat: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Group id of every row (``axis`` 0) or column (1) of ``mat`` (equal ones share an id)
    and the first member of every group."""
    _, first, inverse = np.unique(mat if axis == 0 else mat.T, axis=0, return_index=True,
                                  return_inverse=True)
    return inverse.ravel(), first


class _Rows:
    """Sparse rows accumulated as numpy blocks of triplets (never grown entry by entry
    in Python lists: the memory budget prices the matrix path, issue 35)."""

    def __init__(self) -> None:
        self._r: list[np.ndarray] = []
        self._c: list[np.ndarray] = []
        self._v: list[np.ndarray] = []
        self._lo: list[np.ndarray] = []
        self._hi: list[np.ndarray] = []
        self.names: list[str] = []
        self._n = 0

    def add(self, cols, vals, lo: float, hi: float, name: str) -> None:
        """One row ``lo <= Σ vals·x[cols] <= hi``."""
        cols = np.asarray(list(cols) if not isinstance(cols, np.ndarray) else cols, dtype=np.int64)
        self.add_block(np.zeros(cols.size, np.int64), cols, vals, [lo], [hi], [name])

    def add_block(self, rows, cols, vals, lo, hi, names: list[str]) -> None:
        """Rows ``lo[i] <= Σ vals·x[cols] <= hi[i]``; ``rows`` indexes them from 0."""
        cols = np.asarray(cols, dtype=np.int64).ravel()
        self._r.append(np.asarray(rows, dtype=np.int64).ravel() + self._n)
        self._c.append(cols)
        self._v.append(np.broadcast_to(np.asarray(vals, dtype=float), cols.shape).ravel())
        self._lo.append(np.asarray(lo, dtype=float).ravel())
        self._hi.append(np.asarray(hi, dtype=float).ravel())
        self.names += names
        self._n += len(names)

    @staticmethod
    def _cat(parts: list[np.ndarray], dtype) -> np.ndarray:
        return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)

    @property
    def r(self) -> np.ndarray:
        return self._cat(self._r, np.int64)

    @property
    def c(self) -> np.ndarray:
        return self._cat(self._c, np.int64)

    @property
    def v(self) -> np.ndarray:
        return self._cat(self._v, float)

    @property
    def lo(self) -> np.ndarray:
        return self._cat(self._lo, float)

    @property
    def hi(self) -> np.ndarray:
        return self._cat(self._hi, float)

    def __len__(self) -> int:
        return self._n


def add_choice_rows(rows: _Rows, offs: np.ndarray) -> None:
    """(a) one configuration per operator."""
    n = len(offs) - 1
    sizes = np.diff(offs)
    rows.add_block(np.repeat(np.arange(n), sizes), np.arange(int(offs[-1])), 1.0, np.ones(n),
                   np.ones(n), [f"one[{v}]" for v in range(n)])


def _edge_groups(mat: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row groups, column groups and the grouped matrix of one redistribution matrix."""
    rg, rfirst = equal_groups(mat, 0)
    cg, cfirst = equal_groups(mat, 1)
    return rg, cg, mat[np.ix_(rfirst, cfirst)]


def add_edge_columns(rows: _Rows, offs: np.ndarray, edges: list[tuple[int, int]],
                     mats: list[np.ndarray], first_col: int, scale: float) -> tuple[list[np.ndarray], list]:
    """(b)-(c): the grouped edge variables; returns their costs (one array per edge) and,
    per edge, the group ids and column block (for decoding and warm starts)."""
    cost: list[np.ndarray] = []
    layout = []
    col = first_col
    for e, ((u, v), mat) in enumerate(zip(edges, mats)):
        rg, cg, red = _edge_groups(mat)
        ng, nh = red.shape
        ecol = col + np.arange(ng * nh).reshape(ng, nh)
        cost.append(red.ravel() / scale)
        su, sv = int(offs[u + 1] - offs[u]), int(offs[v + 1] - offs[v])
        # out[e,g]: Σ_h e[g,h] - Σ_{k in g} s[u,k] = 0
        rows.add_block(np.concatenate([np.repeat(np.arange(ng), nh), rg]),
                       np.concatenate([ecol.ravel(), offs[u] + np.arange(su)]),
                       np.concatenate([np.ones(ng * nh), -np.ones(su)]), np.zeros(ng), np.zeros(ng),
                       [f"out[{e},{g}]" for g in range(ng)])
        # in[e,h]: Σ_g e[g,h] - Σ_{k in h} s[v,k] = 0
        rows.add_block(np.concatenate([np.tile(np.arange(nh), ng), cg]),
                       np.concatenate([ecol.ravel(), offs[v] + np.arange(sv)]),
                       np.concatenate([np.ones(ng * nh), -np.ones(sv)]), np.zeros(nh), np.zeros(nh),
                       [f"in[{e},{h}]" for h in range(nh)])
        layout.append((rg, cg, ecol))
        col += ng * nh
    return cost, layout


def matrix_size(time: list[np.ndarray], edges: list[tuple[int, int]], mats: list[np.ndarray],
                capacity: float | None, ties: list | None = None) -> ModelSize:
    """Rows, columns and non-zeros of :func:`build_matrix` with the same arguments,
    counted without building it (the memory budget): per edge ``ng·nh`` columns,
    ``ng + nh`` rows and ``2·ng·nh + |u| + |v|`` entries, from the equal-row and
    equal-column groups alone."""
    sizes = [len(t) for t in time]
    ns = sum(sizes)
    rows, cols, nnz = len(sizes), ns, ns
    for (u, v), mat in zip(edges, mats):
        ng = len(np.unique(mat, axis=0))
        nh = len(np.unique(mat, axis=1).T)
        rows += ng + nh
        cols += ng * nh
        nnz += 2 * ng * nh + sizes[u] + sizes[v]
    for members, images in ties or ():
        cols += len(images)
        for j, v in enumerate(members):
            used = {img[j] for img in images}
            rows += sum(1 for k in range(sizes[v]) if k in used)
            nnz += sum(1 for k in range(sizes[v]) if k in used) + len(images)
    if capacity is not None and np.isfinite(capacity):
        rows += 1
        nnz += ns
    return ModelSize(rows, cols, nnz)


def add_tie_rows(rows: _Rows, offs: np.ndarray, ties: list, first_col: int,
                 col_hi: list[float]) -> int:
    """(t): the template columns and rows; returns the number of ``y`` columns added and
    sets the upper bound 0 of every ``s`` no template gives (in ``col_hi``)."""
    col = first_col
    for li, (members, images) in enumerate(ties):
        ycol = col + np.arange(len(images))
        for j, v in enumerate(members):
            used: dict[int, list[int]] = {}
            for t, img in enumerate(images):
                used.setdefault(img[j], []).append(int(ycol[t]))
            for k in range(int(offs[v + 1] - offs[v])):
                if k not in used:
                    col_hi[int(offs[v] + k)] = 0.0
                    continue
                rows.add([int(offs[v] + k)] + used[k], [1.0] + [-1.0] * len(used[k]), 0.0, 0.0,
                         f"tie[{li},{v},{k}]")
        col += len(images)
    return col - first_col


def build_matrix(time: list[np.ndarray], memory: list[np.ndarray], edges: list[tuple[int, int]],
                 mats: list[np.ndarray], capacity: float | None,
                 scale: float | None = None, ties: list | None = None) -> tuple[MatrixForm, np.ndarray, list]:
    """The MILP of the module docstring; returns the form, the ``s`` column offsets and
    the edge layout. ``capacity`` None: no memory row; ``ties``: ``[(members, images)]``
    per layer (:func:`autopar_opt.opspace.templates.tie_rows`)."""
    sizes = [len(t) for t in time]
    offs = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    if scale is None:
        scale = max([1e-12] + [float(np.abs(t).max()) for t in time if len(t)] +
                    [float(np.abs(m).max()) for m in mats if m.size])
    rows = _Rows()
    add_choice_rows(rows, offs)
    ecost, layout = add_edge_columns(rows, offs, edges, mats, int(offs[-1]), scale)
    ne = sum(len(x) for x in ecost)
    ncol = int(offs[-1]) + ne
    col_hi = [1.0] * ncol
    ny = 0
    if ties:
        ny = add_tie_rows(rows, offs, ties, ncol, col_hi)
        col_hi += [1.0] * ny
        ecost = list(ecost) + [np.zeros(ny)]
        ncol += ny
    if capacity is not None and np.isfinite(capacity):
        mem = np.concatenate(memory) if memory else np.zeros(0)
        rows.add(range(int(offs[-1])), mem / capacity, -np.inf, 1.0, "memory")
    c = np.concatenate([np.concatenate(time) / scale if time else np.zeros(0), *ecost])
    A = sp.csr_array((rows.v, (rows.r, rows.c)), shape=(len(rows), ncol))
    integ = np.zeros(ncol, dtype=bool)
    integ[: offs[-1]] = True
    if ny:
        integ[ncol - ny:] = True
    form = MatrixForm(c=c, A=A, row_lo=np.asarray(rows.lo), row_hi=np.asarray(rows.hi),
                      col_lo=np.zeros(ncol), col_hi=np.asarray(col_hi), integrality=integ, offset=0.0,
                      columns=[f"s{j}" for j in range(int(offs[-1]))] +
                      [f"e{j}" for j in range(ne)] + [f"y{j}" for j in range(ny)],
                      row_names=rows.names)
    form.scale = scale  # type: ignore[attr-defined]
    return form, offs, layout


def start_vector(form: MatrixForm, offs: np.ndarray, layout: list, edges: list[tuple[int, int]],
                 choice: list[int]) -> np.ndarray:
    """The column vector of a plan (a MIP start)."""
    x = np.zeros(form.num_cols)
    for v, k in enumerate(choice):
        x[offs[v] + k] = 1.0
    for (u, v), (rg, cg, ecol) in zip(edges, layout):
        x[ecol[rg[choice[u]], cg[choice[v]]]] = 1.0
    return x


def decode(x: np.ndarray, offs: np.ndarray) -> list[int]:
    """One configuration per operator from a solution vector."""
    return [int(np.argmax(x[offs[v]:offs[v + 1]])) for v in range(len(offs) - 1)]
