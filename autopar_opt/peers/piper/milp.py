"""Piper's problem as a MILP (an independent exact method; the portfolio's fallback
after the DP).

Stage slots ``i = 0..m-1`` (``m ≤ min(nodes, Σd)``), one configuration
``c = (t, d, y)`` per used slot (``z_ic``), node placement ``x_vi``, the TMPC
choice ``r_io`` for every option ``o = (v, t, τ)`` with ``Σ_{o∋v} r_io = x_vi``
and ``r_io ≤ w_it``, and cut-edge indicators ``b ≥ r_io − x_ui``
(McCormick, exact for binaries). Rules of the peers' README ("What a plan
is", "Objective"):

- ``Σ_i i·x_ui ≤ Σ_i i·x_vi`` for every edge (stages in order), used slots
  first and non-empty;
- ``σ_i = σ_{i+1} + Σ_c d_c z_ic`` and, when ``z_ic = 1``,
  ``(y−1)·d + 1 ≤ σ_i ≤ y·d`` (so ``y = ceil(σ_i/d)``);
- ``Σ t·d·z ≤ k``, ``Σ d·z ≤ N``; memory ``Σ r(a·y + b) ≤ M`` when the slot's
  ``(t, y)`` is chosen;
- ``T ≥ (Σ r(p + 4(d−1)w/(N·B)) + Σ b·2(c + sync)/B) / d`` when the slot's
  ``(t, d)`` is chosen; minimise ``T``.

Aggregation columns keep the matrix small without changing the program:
``u_i = Σ_c z_ic`` (slot used), ``w_it``, ``zd_i,td`` and ``zy_i,ty`` (the
sums of ``z_ic`` over the configurations with that ``t``, ``(t, d)`` or
``(t, y)``) are each fixed by one equality row, so a row that needs "the
slot's ``t``" has two non-zeros instead of one per configuration, and the
time rows (which do not depend on ``y``) and memory rows (which do not
depend on ``d``) are written once per ``(t, d)`` and ``(t, y)``. Big-M
constants are the largest value each side can take.

:func:`piper_milp_size` counts the rows, columns and non-zeros in closed
form before anything is built (the memory budget, issue 35); the matrix is
assembled in numpy blocks (:class:`~autopar_opt.core.matrix_builder.MatrixBuilder`).
Built on the reduced instance (:func:`~autopar_opt.peers.piper.model.reduce_instance`),
solved by any MIP backend, decoded, and re-priced by the independent evaluator.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from autopar_opt.core.matrix import MatrixForm
from autopar_opt.core.matrix_builder import MatrixBuilder
from autopar_opt.core.memory_budget import ModelSize
from autopar_opt.core.result import Termination
from autopar_opt.peers.outcome import PeerOutcome
from autopar_opt.peers.piper.dp import divisors
from autopar_opt.peers.piper.evaluate import evaluate_piper
from autopar_opt.peers.piper.format import PiperInstance
from autopar_opt.peers.piper.model import MEM_RTOL, PiperPlan, PiperStage, Prepared, reduce_instance
from autopar_opt.peers.piper.restore import restore_plan


@dataclass
class _Shape:
    """Index sets of the MILP, computed from the instance before any build."""

    m: int
    smax: int
    degrees: list[int]
    conf_t: np.ndarray          # per configuration c: t, d, y, its (t, d) and (t, y) index
    conf_d: np.ndarray
    conf_y: np.ndarray
    conf_td: np.ndarray
    conf_ty: np.ndarray
    td: list[tuple[int, int]]
    ty: list[tuple[int, int]]
    opt_v: np.ndarray           # per option o = (v, t, τ)
    opt_t: np.ndarray
    opt_k: np.ndarray
    opt_p: np.ndarray
    opt_w: np.ndarray
    opt_a: np.ndarray
    opt_b: np.ndarray
    cut_end: np.ndarray         # per cut item: the option at the end that pays, the other node
    cut_other: np.ndarray
    cut_coef: np.ndarray        # 2 (c + sync) bytes

    @property
    def C(self) -> int:
        return len(self.conf_t)


def _shape(prep: Prepared) -> _Shape:
    inst, n = prep.inst, prep.n
    degrees = sorted(prep.opts)
    smax = min(inst.microbatches, inst.devices // min(degrees))
    m = max(1, min(n, smax))
    conf = []
    for t in degrees:
        for d in divisors(inst.microbatches, min(smax, inst.devices // t)):
            conf += [(t, d, y) for y in range(1, -(-smax // d) + 1)]
    conf_arr = np.array(conf, dtype=np.int64).reshape(-1, 3)
    td = sorted({(t, d) for t, d, _ in conf})
    ty = sorted({(t, y) for t, _, y in conf})
    td_index, ty_index = {k: i for i, k in enumerate(td)}, {k: i for i, k in enumerate(ty)}
    opts, index = [], {}
    for t in degrees:
        for v, o in enumerate(prep.opts[t]):
            if o is None:
                continue
            for k in range(len(o.p)):
                index[v, t, k] = len(opts)
                opts.append((v, t, k, o.p[k], o.w[k], o.a[k], o.b[k]))
    cut = []
    for e, (u, v, c) in enumerate(prep.edges):
        for t in degrees:
            row = prep.opts[t]
            for end, other, o, side in ((v, u, row[v], "fw"), (u, v, row[u], "bw")):
                if o is None:
                    continue
                pos = prep.ins[end].index(e) if side == "fw" else prep.outs[end].index(e)
                sync = o.fw[:, pos] if side == "fw" else o.bw[:, pos]
                cut += [(index[end, t, k], other, 2.0 * (c + float(sync[k]))) for k in range(len(o.p))]
    oa = np.array(opts, dtype=float).reshape(-1, 7)
    ca = np.array(cut, dtype=float).reshape(-1, 3)
    return _Shape(m, smax, degrees, conf_arr[:, 0], conf_arr[:, 1], conf_arr[:, 2],
                  np.array([td_index[t, d] for t, d, _ in conf], dtype=np.int64),
                  np.array([ty_index[t, y] for t, _, y in conf], dtype=np.int64), td, ty,
                  oa[:, 0].astype(np.int64), oa[:, 1].astype(np.int64), oa[:, 2].astype(np.int64),
                  oa[:, 3], oa[:, 4], oa[:, 5], oa[:, 6],
                  ca[:, 0].astype(np.int64), ca[:, 1].astype(np.int64), ca[:, 2])


def _memory_big(sh: _Shape) -> np.ndarray:
    """Per ``(t, y)``: the largest memory of a slot, ``Σ_{o with t} a_o·y + b_o``."""
    out = np.zeros(len(sh.ty))
    for j, (t, y) in enumerate(sh.ty):
        sel = sh.opt_t == t
        out[j] = float((sh.opt_a[sel] * y + sh.opt_b[sel]).sum())
    return out


def piper_milp_size(prep: Prepared) -> ModelSize:
    """Rows, columns and non-zeros of :func:`build_piper_milp`'s matrix, counted
    from the index sets without building it."""
    sh = _shape(prep)
    n, m, C, O, CI = prep.n, sh.m, sh.C, len(sh.opt_v), len(sh.cut_end)
    nT, nTD, nTY, E = len(sh.degrees), len(sh.td), len(sh.ty), len(prep.edges)
    M = prep.inst.memory_bytes * (1 + MEM_RTOL)
    mem_rows = int((_memory_big(sh) > M).sum())
    per_t = {t: int((sh.opt_t == t).sum()) for t in sh.degrees}
    cut_t = {t: int((sh.opt_t[sh.cut_end] == t).sum()) for t in sh.degrees}
    cols = 1 + m + m * C + m + m * nT + m * nTD + m * nTY + n * m + m * O + m * CI
    rows = (m + (m - 1) + m + n * m + n + n * m + m * nT + m * O + E + 2 + m * CI + m
            + 2 * m * C + m * nTD + m * nTD + m * nTY + m * mem_rows)
    big_m = _memory_big(sh)
    nnz = (m * (C + 1) + 2 * (m - 1) + m * (n + 1) + 2 * n * m + n * m        # u, order, x rows
           + m * (O + n) + m * (C + nT) + 2 * m * O + 2 * m * E + 2 * m * C    # r = x, w, r <= w, ...
           + 3 * m * CI + (m + (m - 1) + m * C) + 4 * m * C                    # cuts, sigma, y rows
           + m * (C + nTD) + m * sum(2 + per_t[t] + cut_t[t] for t, _ in sh.td)  # zd, time rows
           + m * (C + nTY) + m * sum(1 + per_t[t] for j, (t, _) in enumerate(sh.ty)
                                     if big_m[j] > M))                          # zy, memory rows
    return ModelSize(rows=rows, cols=cols, nonzeros=nnz)


def build_piper_milp(prep: Prepared) -> tuple[MatrixForm, "_Index"]:
    """The MILP (see module docstring) and the column indices needed to decode it."""
    inst, n = prep.inst, prep.n
    sh = _shape(prep)
    m, C = sh.m, sh.C
    O, CI = len(sh.opt_v), len(sh.cut_end)
    B, N, M = inst.bandwidth, inst.microbatches, inst.memory_bytes * (1 + MEM_RTOL)
    t_pos = {t: i for i, t in enumerate(sh.degrees)}
    opt_tpos = np.array([t_pos[t] for t in sh.opt_t], dtype=np.int64)
    bld = MatrixBuilder()
    T = bld.add_vars("T", (1,), 0.0, math.inf)[0]
    bld.set_cost(T, 1.0)
    sigma = bld.add_vars("sigma", (m,), 0.0, float(sh.smax))
    z = bld.add_vars("z", (m, C), 0.0, 1.0, integer=True)
    u = bld.add_vars("u", (m,), 0.0, 1.0)
    w = bld.add_vars("w", (m, len(sh.degrees)), 0.0, 1.0)
    zd = bld.add_vars("zd", (m, len(sh.td)), 0.0, 1.0)
    zy = bld.add_vars("zy", (m, len(sh.ty)), 0.0, 1.0)
    x = bld.add_vars("x", (n, m), 0.0, 1.0, integer=True)
    r = bld.add_vars("r", (m, O), 0.0, 1.0, integer=True)
    b = bld.add_vars("b", (m, CI), 0.0, 1.0)
    slots = np.arange(m)
    ones = np.ones

    def sum_rows(groups: np.ndarray, members: np.ndarray, total: np.ndarray, coef=None) -> None:
        """Rows ``Σ_{j in group g} coef·members[:, j] − total[:, g] = 0``, every slot."""
        ng = total.shape[1]
        row = (slots[:, None] * ng + groups[None, :]).ravel()
        bld.add_rows(np.concatenate([row, np.arange(m * ng)]),
                     np.concatenate([members.ravel(), total.ravel()]),
                     np.concatenate([np.tile(ones(len(groups)) if coef is None else coef, m),
                                     -ones(m * ng)]), np.zeros(m * ng), np.zeros(m * ng))

    sum_rows(np.zeros(C, dtype=np.int64), z, u[:, None])                       # u_i = Σ_c z
    if m > 1:
        bld.pairwise_le(u[1:], u[:-1])                                         # used slots first
    bld.add_rows(np.concatenate([np.repeat(slots, n), slots]),                 # Σ_v x ≥ u
                 np.concatenate([x.T.ravel(), u]), np.concatenate([ones(n * m), -ones(m)]),
                 np.zeros(m), np.full(m, np.inf))
    bld.pairwise_le(x, np.broadcast_to(u[None, :], (n, m)))                    # x ≤ u
    bld.add_rows(np.repeat(np.arange(n), m), x.ravel(), ones(n * m), ones(n), ones(n))
    bld.add_rows(np.concatenate([(slots[:, None] * n + sh.opt_v[None, :]).ravel(),   # Σ_{o∋v} r = x
                                 np.arange(m * n)]),
                 np.concatenate([r.ravel(), x.T.ravel()]),
                 np.concatenate([ones(m * O), -ones(m * n)]), np.zeros(m * n), np.zeros(m * n))
    conf_tpos = np.array([t_pos[t] for t in sh.conf_t], dtype=np.int64)
    sum_rows(conf_tpos, z, w)                                                  # w_it
    bld.pairwise_le(r, w[:, opt_tpos])                                         # r ≤ w
    level = np.arange(m, dtype=float)
    for eu, ev, _ in prep.edges:                                               # stage order
        bld.add_rows(np.zeros(2 * m, dtype=np.int64), np.concatenate([x[eu], x[ev]]),
                     np.concatenate([level, -level]), [-np.inf], [0.0])
    bld.add_rows(np.zeros(m * C, dtype=np.int64), z.ravel(),
                 np.tile((sh.conf_t * sh.conf_d).astype(float), m), [-np.inf], [float(inst.devices)])
    bld.add_rows(np.zeros(m * C, dtype=np.int64), z.ravel(), np.tile(sh.conf_d.astype(float), m),
                 [-np.inf], [float(N)])
    k_rows = m * CI                                                            # b ≥ r_end − x_other
    rr = np.repeat(np.arange(k_rows), 3)
    cc = np.stack([b.ravel(), r[:, sh.cut_end].ravel(), x[sh.cut_other, :].T.ravel()], axis=1).ravel()
    bld.add_rows(rr, cc, np.tile([1.0, -1.0, 1.0], k_rows), np.zeros(k_rows), np.full(k_rows, np.inf))
    nxt = np.append(sigma[1:], -1)                                             # σ_i − σ_{i+1} − Σ d z = 0
    row = np.concatenate([slots, slots[:-1], np.repeat(slots, C)])
    col = np.concatenate([sigma, nxt[:-1], z.ravel()])
    val = np.concatenate([ones(m), -ones(m - 1), -np.tile(sh.conf_d.astype(float), m)])
    bld.add_rows(row, col, val, np.zeros(m), np.zeros(m))
    sig = np.repeat(sigma, C)                                                  # y from σ when z = 1
    yd = np.tile((sh.conf_y * sh.conf_d).astype(float), m)
    low = np.tile(((sh.conf_y - 1) * sh.conf_d + 1).astype(float), m)
    rows = np.repeat(np.arange(m * C), 2)
    bld.add_rows(rows, np.stack([sig, z.ravel()], axis=1).ravel(),
                 np.stack([ones(m * C), np.full(m * C, float(sh.smax))], axis=1).ravel(),
                 np.full(m * C, -np.inf), yd + sh.smax)
    bld.add_rows(rows, np.stack([sig, z.ravel()], axis=1).ravel(),
                 np.stack([ones(m * C), -low], axis=1).ravel(), np.zeros(m * C), np.full(m * C, np.inf))
    sum_rows(sh.conf_td, z, zd)                                                # zd_i,td
    for j, (t, d) in enumerate(sh.td):                                         # time rows per (t, d)
        sel = np.flatnonzero(sh.opt_t == t)
        csel = np.flatnonzero(sh.opt_t[sh.cut_end] == t)
        kappa = 4.0 * (d - 1) / (N * B)
        a_opt = (sh.opt_p[sel] + kappa * sh.opt_w[sel]) / d
        a_cut = sh.cut_coef[csel] / B / d
        big = float(a_opt.sum() + a_cut.sum())
        width = 2 + len(sel) + len(csel)
        row = np.repeat(slots, width)
        col = np.concatenate([np.full((m, 1), T), r[:, sel], b[:, csel], zd[:, [j]]], axis=1).ravel()
        val = np.tile(np.concatenate([[1.0], -a_opt, -a_cut, [-big]]), m)
        bld.add_rows(row, col, val, np.full(m, -big), np.full(m, np.inf))
    sum_rows(sh.conf_ty, z, zy)                                                # zy_i,ty
    big_m = _memory_big(sh)
    for j, (t, y) in enumerate(sh.ty):                                         # memory rows per (t, y)
        if big_m[j] <= M:
            continue
        sel = np.flatnonzero(sh.opt_t == t)
        row = np.repeat(slots, len(sel) + 1)
        col = np.concatenate([r[:, sel], zy[:, [j]]], axis=1).ravel()
        val = np.tile(np.concatenate([sh.opt_a[sel] * y + sh.opt_b[sel], [big_m[j] - M]]), m)
        bld.add_rows(row, col, val, np.full(m, -np.inf), np.full(m, big_m[j]))
    return bld.build(), _Index(sh, z, x, r)


@dataclass
class _Index:
    """Column indices of the decoded variables."""

    shape: _Shape
    z: np.ndarray
    x: np.ndarray
    r: np.ndarray


def solve_piper_mip(inst: PiperInstance, solver: str = "auto", time_limit_s: float | None = None,
                    rel_gap: float = 1e-9, cutoff: float | None = None) -> PeerOutcome:
    """Solve the MILP; the plan is decoded, restored and re-priced by the evaluator.
    ``cutoff``: the value of a plan found elsewhere (the portfolio's incumbent)."""
    from autopar_opt.solvers.matrix import matrix_backend, solve_matrix

    start = time.monotonic()
    prep = reduce_instance(inst)
    backend = matrix_backend(solver)
    form, idx = build_piper_milp(prep)
    limit = None if time_limit_s is None else max(time_limit_s - (time.monotonic() - start), 0.01)
    res, sol = solve_matrix(form, backend, time_limit_s=limit, rel_gap=rel_gap, cutoff=cutoff)
    sh = idx.shape
    stats = {"columns": form.num_cols, "rows": form.num_rows, "nonzeros": int(form.A.nnz),
             "slots": sh.m}
    if sol is None:
        return PeerOutcome(res.termination, None, None, res.lower_bound, time.monotonic() - start,
                           backend.name, res.message or "no plan", stats, res.solver_version)
    stages = []
    for i in range(sh.m):
        cfs = np.flatnonzero(sol[idx.z[i]] > 0.5)
        if not cfs.size:
            continue
        t, d = int(sh.conf_t[cfs[0]]), int(sh.conf_d[cfs[0]])
        nodes = [v for v in range(prep.n) if sol[idx.x[v, i]] > 0.5]
        tm = []
        for v in nodes:
            own = np.flatnonzero((sh.opt_v == v) & (sh.opt_t == t))
            tm.append(int(sh.opt_k[own[np.argmax(sol[idx.r[i, own]])]]))
        stages.append(PiperStage(nodes, d, t, tm))
    plan = restore_plan(prep, PiperPlan(stages))
    metrics = evaluate_piper(inst, plan)
    bound = min(res.lower_bound, metrics.tps)
    return PeerOutcome(res.termination if metrics.feasible else Termination.error, plan, metrics.tps,
                       bound, time.monotonic() - start, backend.name,
                       res.message or f"MILP: {form.num_cols} columns, {form.num_rows} rows", stats,
                       res.solver_version)
