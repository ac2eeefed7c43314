"""Pipeline stages over an operator graph, each with the operator space inside (UniAP's
joint inter/intra objective for operator graphs), for a fixed split: a MILP.

Operators are split into ``pp`` contiguous stages; operator ``v`` of stage ``σ(v)`` takes a
configuration ``s[v,k]`` on its stage's mesh. With the micro-batch costs of the tables
(``A`` = one forward + backward of a micro-batch, ``G`` = once per iteration, ``R`` in a
stage, ``X`` across a stage boundary) and docs/DESIGN.md §3's 1F1B/GPipe latency:

* ``p_i = Σ_{σ(v)=i} A[v]·s[v] + Σ_{(u,v): σ(u)=σ(v)=i} R·e``          stage time per micro-batch
* ``o_b = Σ_{(u,v): σ(v)=b+1... crossing, charged to the boundary before v} X·e``   transfer
* ``g_i = Σ_{σ(v)=i} G[v]·s[v]``                                       gradient sync + step
* ``T = Σ_i p_i + Σ_b o_b + (c-1)·z + y``, ``z ≥ p_i``, ``z ≥ o_b``, ``y ≥ g_i``  (epigraphs)
* memory of stage ``i``: ``Σ_{σ(v)=i} (W[v] + inflight_i·H[v])·s[v] ≤ capacity``.

The edge variables and their marginal rows are those of :mod:`autopar_opt.formulations.opspace`
(exact for binary ``s``), so the program is exact; the max terms are exact epigraphs
(minimisation pushes ``z``, ``y`` down to the maxima).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from autopar_opt.core.matrix import MatrixForm
from autopar_opt.core.memory_budget import ModelSize
from autopar_opt.formulations.opspace import _Rows, add_choice_rows, equal_groups


def pipeline_matrix_size(sizes: list[int], stage: list[int], edges: list[tuple[int, int]],
                         mats: list[np.ndarray], boundary: list[int | None], pp: int,
                         capacity: float | None) -> ModelSize:
    """Rows, columns and non-zeros of :func:`build_pipeline_matrix` with the same arguments,
    counted without building it (the memory budget): the choice rows, per edge the grouped
    marginal rows (``ng + nh`` rows, ``2·ng·nh + |u| + |v|`` entries) and its ``ng·nh``
    terms in one bottleneck or transfer row, the ``z``/``y`` epigraph rows with every
    configuration once in a stage's time row and once in its sync row, the memory rows."""
    ns = sum(sizes)
    rows, cols, nnz = len(sizes), ns, ns
    for (u, v), mat in zip(edges, mats):
        ng, nh = len(np.unique(mat, axis=0)), len(np.unique(mat, axis=1).T)
        rows += ng + nh
        cols += ng * nh
        nnz += 3 * ng * nh + sizes[u] + sizes[v]
    rows += pp + max(pp - 1, 0) + pp
    nnz += pp + max(pp - 1, 0) + ns + pp + ns
    if capacity is not None and np.isfinite(capacity):
        rows += pp
        nnz += ns
    return ModelSize(rows, cols + 2, nnz)


def build_pipeline_matrix(step: list[np.ndarray], sync: list[np.ndarray], weight: list[np.ndarray],
                          act: list[np.ndarray], stage: list[int], edges: list[tuple[int, int]],
                          mats: list[np.ndarray], boundary: list[int | None], pp: int, microbatches: int,
                          inflight: list[int], capacity: float | None
                          ) -> tuple[MatrixForm, np.ndarray, list, float]:
    """The MILP of the module docstring. ``boundary[e]``: None for an edge inside a stage,
    else the boundary (0..pp-2) its transfer is charged to. Returns the form, the ``s``
    offsets, the edge layout and the objective scale."""
    sizes = [len(a) for a in step]
    offs = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    scale = max([1e-12] + [float(np.abs(a).max()) for a in step + sync if len(a)] +
                [float(np.abs(m).max()) for m in mats if m.size])
    rows = _Rows()
    add_choice_rows(rows, offs)
    col = int(offs[-1])
    # term rows: coefficients of p_i, o_b, g_i accumulated as (column, value) lists
    p_terms: list[list[tuple[int, float]]] = [[] for _ in range(pp)]
    o_terms: list[list[tuple[int, float]]] = [[] for _ in range(max(pp - 1, 0))]
    g_terms: list[list[tuple[int, float]]] = [[] for _ in range(pp)]
    for v, (a, g) in enumerate(zip(step, sync)):
        for k in range(sizes[v]):
            p_terms[stage[v]].append((int(offs[v] + k), float(a[k]) / scale))
            g_terms[stage[v]].append((int(offs[v] + k), float(g[k]) / scale))
    layout = []
    for e, ((u, v), mat) in enumerate(zip(edges, mats)):
        rg, rfirst = equal_groups(mat, 0)
        cg, cfirst = equal_groups(mat, 1)
        red = mat[np.ix_(rfirst, cfirst)]
        ng, nh = red.shape
        ecol = col + np.arange(ng * nh).reshape(ng, nh)
        target = p_terms[stage[u]] if boundary[e] is None else o_terms[boundary[e]]
        target += [(int(c), float(x) / scale) for c, x in zip(ecol.ravel(), red.ravel())]
        for g in range(ng):
            members = np.flatnonzero(rg == g)
            rows.add(list(ecol[g]) + list(offs[u] + members), [1.0] * nh + [-1.0] * len(members), 0, 0,
                     f"out[{e},{g}]")
        for h in range(nh):
            members = np.flatnonzero(cg == h)
            rows.add(list(ecol[:, h]) + list(offs[v] + members), [1.0] * ng + [-1.0] * len(members), 0, 0,
                     f"in[{e},{h}]")
        layout.append((rg, cg, ecol))
        col += ng * nh
    z, y = col, col + 1
    ncol = col + 2
    c = np.zeros(ncol)
    for terms in p_terms + o_terms:
        for j, x in terms:
            c[j] += x
    c[z] = microbatches - 1
    c[y] = 1.0
    for i, terms in enumerate(p_terms):          # z >= p_i
        rows.add([z] + [j for j, _ in terms], [1.0] + [-x for _, x in terms], 0.0, np.inf, f"bottleneck[{i}]")
    for b, terms in enumerate(o_terms):          # z >= o_b
        rows.add([z] + [j for j, _ in terms], [1.0] + [-x for _, x in terms], 0.0, np.inf, f"transfer[{b}]")
    for i, terms in enumerate(g_terms):          # y >= g_i
        rows.add([y] + [j for j, _ in terms], [1.0] + [-x for _, x in terms], 0.0, np.inf, f"sync[{i}]")
    if capacity is not None and np.isfinite(capacity):
        for i in range(pp):
            cols, vals = [], []
            for v in range(len(step)):
                if stage[v] == i:
                    cols += list(range(int(offs[v]), int(offs[v + 1])))
                    vals += list((weight[v] + inflight[i] * act[v]) / capacity)
            rows.add(cols, vals, -np.inf, 1.0, f"memory[{i}]")
    A = sp.csr_array((rows.v, (rows.r, rows.c)), shape=(len(rows), ncol))
    integ = np.zeros(ncol, dtype=bool)
    integ[: offs[-1]] = True
    hi = np.ones(ncol)
    hi[z] = hi[y] = np.inf
    form = MatrixForm(c=c, A=A, row_lo=np.asarray(rows.lo, dtype=float), row_hi=np.asarray(rows.hi, dtype=float),
                      col_lo=np.zeros(ncol), col_hi=hi, integrality=integ, offset=0.0,
                      columns=[f"s{j}" for j in range(int(offs[-1]))] +
                      [f"e{j}" for j in range(col - int(offs[-1]))] + ["z", "y"], row_names=rows.names)
    return form, offs, layout, scale
