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


def equal_groups(mat: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Group id of every row (``axis`` 0) or column (1) of ``mat`` (equal ones share an id)
    and the first member of every group."""
    _, first, inverse = np.unique(mat if axis == 0 else mat.T, axis=0, return_index=True,
                                  return_inverse=True)
    return inverse.ravel(), first


class _Rows:
    """Sparse rows accumulated as triplets."""

    def __init__(self) -> None:
        self.r: list[int] = []
        self.c: list[int] = []
        self.v: list[float] = []
        self.lo: list[float] = []
        self.hi: list[float] = []
        self.names: list[str] = []

    def add(self, cols, vals, lo: float, hi: float, name: str) -> None:
        k = len(self.lo)
        cols = list(cols)
        self.r += [k] * len(cols)
        self.c += cols
        self.v += list(vals)
        self.lo.append(lo)
        self.hi.append(hi)
        self.names.append(name)

    def __len__(self) -> int:
        return len(self.lo)


def add_choice_rows(rows: _Rows, offs: np.ndarray) -> None:
    """(a) one configuration per operator."""
    for v in range(len(offs) - 1):
        rows.add(range(offs[v], offs[v + 1]), [1.0] * int(offs[v + 1] - offs[v]), 1.0, 1.0, f"one[{v}]")


def add_edge_columns(rows: _Rows, offs: np.ndarray, edges: list[tuple[int, int]],
                     mats: list[np.ndarray], first_col: int, scale: float) -> tuple[list[float], list]:
    """(b)-(c): the grouped edge variables; returns their costs and, per edge, the group
    ids and column block (for decoding and warm starts)."""
    cost: list[float] = []
    layout = []
    col = first_col
    for e, ((u, v), mat) in enumerate(zip(edges, mats)):
        rg, rfirst = equal_groups(mat, 0)
        cg, cfirst = equal_groups(mat, 1)
        red = mat[np.ix_(rfirst, cfirst)]
        ng, nh = red.shape
        ecol = col + np.arange(ng * nh).reshape(ng, nh)
        cost += list(red.ravel() / scale)
        for g in range(ng):
            members = np.flatnonzero(rg == g)
            rows.add(list(ecol[g]) + list(offs[u] + members), [1.0] * nh + [-1.0] * len(members),
                     0.0, 0.0, f"out[{e},{g}]")
        for h in range(nh):
            members = np.flatnonzero(cg == h)
            rows.add(list(ecol[:, h]) + list(offs[v] + members), [1.0] * ng + [-1.0] * len(members),
                     0.0, 0.0, f"in[{e},{h}]")
        layout.append((rg, cg, ecol))
        col += ng * nh
    return cost, layout


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
    ncol = int(offs[-1]) + len(ecost)
    col_hi = [1.0] * ncol
    ny = 0
    if ties:
        ny = add_tie_rows(rows, offs, ties, ncol, col_hi)
        col_hi += [1.0] * ny
        ecost = list(ecost) + [0.0] * ny
        ncol += ny
    if capacity is not None and np.isfinite(capacity):
        mem = np.concatenate(memory) if memory else np.zeros(0)
        rows.add(range(int(offs[-1])), mem / capacity, -np.inf, 1.0, "memory")
    c = np.concatenate([np.concatenate(time) / scale if time else np.zeros(0), np.asarray(ecost)])
    A = sp.csr_array((rows.v, (rows.r, rows.c)), shape=(len(rows), ncol))
    integ = np.zeros(ncol, dtype=bool)
    integ[: offs[-1]] = True
    if ny:
        integ[ncol - ny:] = True
    form = MatrixForm(c=c, A=A, row_lo=np.asarray(rows.lo), row_hi=np.asarray(rows.hi),
                      col_lo=np.zeros(ncol), col_hi=np.asarray(col_hi), integrality=integ, offset=0.0,
                      columns=[f"s{j}" for j in range(int(offs[-1]))] +
                      [f"e{j}" for j in range(len(ecost) - ny)] + [f"y{j}" for j in range(ny)],
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
