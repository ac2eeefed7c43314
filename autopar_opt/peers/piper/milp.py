"""Piper's problem as a MILP (an independent exact method; meant for small device counts).

Stage slots ``i = 0..m-1`` (``m ≤ min(nodes, Σd)``), one configuration
``c = (t, d, y)`` per used slot (``z_ic``), node placement ``x_vi``, the TMPC
choice ``r_vitτ ≤ Σ_{c∋t} z_ic`` with ``Σ_tτ r_vitτ = x_vi``, and cut-edge
indicators ``b ≥ r_v·· − x_u·`` (McCormick, exact for binaries). Rules of the
peers' README ("What a plan is", "Objective"):

- ``Σ_i i·x_ui ≤ Σ_i i·x_vi`` for every edge (stages in order), used slots
  first and non-empty;
- ``σ_i = Σ_{j≥i} Σ_c d_c z_jc`` and, when ``z_ic = 1``,
  ``(y−1)·d + 1 ≤ σ_i ≤ y·d`` (so ``y = ceil(σ_i/d)``);
- ``Σ t·d·z ≤ k``, ``Σ d·z ≤ N``; memory ``Σ r(a·y + b) ≤ M`` when ``z_ic = 1``;
- ``T ≥ (Σ r(p + 4(d−1)w/(N·B)) + Σ b·2(c + sync)/B) / d`` when ``z_ic = 1``;
  minimise ``T``.

Big-M constants are the largest value each side can take. Built on the
reduced instance (:func:`~autopar_opt.peers.piper.model.reduce_instance`),
solved by any MIP backend, decoded, and re-priced by the independent evaluator.
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp

from autopar_opt.solvers.matrix import matrix_backend, solve_matrix
from autopar_opt.peers.outcome import PeerOutcome
from autopar_opt.peers.piper.dp import divisors
from autopar_opt.peers.piper.evaluate import evaluate_piper
from autopar_opt.peers.piper.format import PiperInstance
from autopar_opt.peers.piper.model import MEM_RTOL, PiperPlan, PiperStage, Prepared, reduce_instance
from autopar_opt.peers.piper.restore import restore_plan
from autopar_opt.core.matrix import MatrixForm
from autopar_opt.core.result import Termination


class _Builder:
    """Columns and rows of a MILP in coordinate form."""

    def __init__(self) -> None:
        self.lo, self.hi, self.integ, self.cost = [], [], [], []
        self.rows, self.cols, self.vals, self.rlo, self.rhi = [], [], [], [], []

    def var(self, lo: float = 0.0, hi: float = 1.0, integer: bool = True, cost: float = 0.0) -> int:
        self.lo.append(lo)
        self.hi.append(hi)
        self.integ.append(integer)
        self.cost.append(cost)
        return len(self.lo) - 1

    def row(self, terms: dict[int, float], lo: float = -math.inf, hi: float = math.inf) -> None:
        r = len(self.rlo)
        for j, a in terms.items():
            self.rows.append(r)
            self.cols.append(j)
            self.vals.append(a)
        self.rlo.append(lo)
        self.rhi.append(hi)

    def form(self) -> MatrixForm:
        n = len(self.lo)
        A = sp.csr_array((self.vals, (self.rows, self.cols)), shape=(len(self.rlo), n))
        return MatrixForm(c=np.array(self.cost), A=A, row_lo=np.array(self.rlo), row_hi=np.array(self.rhi),
                          col_lo=np.array(self.lo), col_hi=np.array(self.hi),
                          integrality=np.array(self.integ, dtype=bool), offset=0.0,
                          columns=[f"x{j}" for j in range(n)])


def _configs(prep: Prepared, smax: int) -> list[tuple[int, int, int]]:
    inst, out = prep.inst, []
    for t in sorted(prep.opts):
        for d in divisors(inst.microbatches, min(smax, inst.devices // t)):
            out += [(t, d, y) for y in range(1, -(-smax // d) + 1)]
    return out


def build_piper_milp(prep: Prepared):
    """The MILP (see module docstring) and the index maps needed to decode it."""
    inst, n = prep.inst, prep.n
    smax = min(inst.microbatches, inst.devices // min(prep.opts))
    m = max(1, min(n, smax))
    confs = _configs(prep, smax)
    B, N, M = inst.bandwidth, inst.microbatches, inst.memory_bytes * (1 + MEM_RTOL)
    bld = _Builder()
    T = bld.var(0.0, math.inf, integer=False, cost=1.0)
    z = {(i, c): bld.var() for i in range(m) for c in range(len(confs))}
    x = {(v, i): bld.var() for v in range(n) for i in range(m)}
    r = {(v, i, t, k): bld.var() for v in range(n) for i in range(m) for t, row in prep.opts.items()
         if row[v] is not None for k in range(len(row[v].p))}
    used = [{z[i, c]: 1.0 for c in range(len(confs))} for i in range(m)]
    for i in range(m):
        bld.row(used[i], hi=1.0)
        if i + 1 < m:
            bld.row({**used[i], **{j: -1.0 for j in used[i + 1]}}, lo=0.0)
        bld.row({**{x[v, i]: 1.0 for v in range(n)}, **{j: -1.0 for j in used[i]}}, lo=0.0)
        for v in range(n):
            bld.row({x[v, i]: 1.0, **{j: -1.0 for j in used[i]}}, hi=0.0)
    for v in range(n):
        bld.row({x[v, i]: 1.0 for i in range(m)}, lo=1.0, hi=1.0)
        for i in range(m):
            bld.row({**{r[key]: 1.0 for key in r if key[:2] == (v, i)}, x[v, i]: -1.0}, lo=0.0, hi=0.0)
            for t in prep.opts:
                with_t = {z[i, c]: -1.0 for c, cf in enumerate(confs) if cf[0] == t}
                for key in r:
                    if key[:3] == (v, i, t):
                        bld.row({r[key]: 1.0, **with_t}, hi=0.0)
    for u, v, _ in prep.edges:
        bld.row({**{x[u, i]: float(i) for i in range(m)}, **{x[v, i]: -float(i) for i in range(m)}}, hi=0.0)
    bld.row({z[i, c]: float(cf[0] * cf[1]) for i in range(m) for c, cf in enumerate(confs)}, hi=inst.devices)
    bld.row({z[i, c]: float(cf[1]) for i in range(m) for c, cf in enumerate(confs)}, hi=N)
    cut = _cut_terms(prep, bld, x, r, m)
    for i in range(m):
        sigma = {z[j, c]: float(cf[1]) for j in range(i, m) for c, cf in enumerate(confs)}
        for c, (t, d, y) in enumerate(confs):
            zc = z[i, c]
            bld.row({**sigma, zc: sigma.get(zc, 0.0) + smax}, hi=y * d + smax)          # σ ≤ y·d
            bld.row({**sigma, zc: sigma.get(zc, 0.0) - ((y - 1) * d + 1)}, lo=0.0)       # σ ≥ (y−1)d+1
            _stage_rows(prep, bld, T, zc, r, cut, i, t, d, y, M, B, N)
    return bld.form(), (m, confs, z, x, r)


def _cut_terms(prep: Prepared, bld: _Builder, x, r, m):
    """Cut indicators per (slot, edge, end, t, TMPC) with their cost coefficient in bytes."""
    out: dict[tuple[int, int], list[tuple[int, float]]] = {}
    for e, (u, v, c) in enumerate(prep.edges):
        for i in range(m):
            for t, row in prep.opts.items():
                for end, other, o, j in ((v, u, row[v], "fw"), (u, v, row[u], "bw")):
                    if o is None:
                        continue
                    pos = (prep.ins[end].index(e) if j == "fw" else prep.outs[end].index(e))
                    sync = o.fw[:, pos] if j == "fw" else o.bw[:, pos]
                    for k in range(len(o.p)):
                        b = bld.var(integer=False)
                        bld.row({b: 1.0, r[end, i, t, k]: -1.0, x[other, i]: 1.0}, lo=0.0)
                        out.setdefault((i, t), []).append((b, 2.0 * (c + float(sync[k]))))
    return out


def _stage_rows(prep, bld, T, zc, r, cut, i, t, d, y, M, B, N) -> None:
    kappa = 4.0 * (d - 1) / (N * B)
    time_terms: dict[int, float] = {}
    mem_terms: dict[int, float] = {}
    big_t = big_m = 0.0
    for (v, ii, tt, k), col in r.items():
        if ii != i or tt != t:
            continue
        o = prep.opts[t][v]
        time_terms[col] = (float(o.p[k]) + kappa * float(o.w[k])) / d
        mem_terms[col] = float(o.a[k]) * y + float(o.b[k])
    for col, coef in cut.get((i, t), []):
        time_terms[col] = time_terms.get(col, 0.0) + coef / B / d
    big_t = sum(time_terms.values())
    big_m = sum(mem_terms.values())
    bld.row({T: 1.0, **{c: -a for c, a in time_terms.items()}, zc: -big_t}, lo=-big_t)
    if big_m > M:
        bld.row({**mem_terms, zc: big_m - M}, hi=big_m)


def solve_piper_mip(inst: PiperInstance, solver: str = "highs", time_limit_s: float | None = None,
                    rel_gap: float = 1e-9) -> PeerOutcome:
    """Solve the MILP; the plan is decoded, restored and re-priced by the evaluator."""
    start = time.monotonic()
    prep = reduce_instance(inst)
    form, (m, confs, z, x, r) = build_piper_milp(prep)
    res, sol = solve_matrix(form, matrix_backend(solver), time_limit_s=time_limit_s, rel_gap=rel_gap)
    stats = {"columns": form.num_cols, "rows": form.num_rows, "slots": m}
    if sol is None:
        return PeerOutcome(res.termination, None, None, res.lower_bound, time.monotonic() - start, solver,
                           res.message or "no plan", stats, res.solver_version)
    stages = []
    for i in range(m):
        cfs = [c for c in range(len(confs)) if sol[z[i, c]] > 0.5]
        if not cfs:
            continue
        t, d, _y = confs[cfs[0]]
        nodes = [v for v in range(prep.n) if sol[x[v, i]] > 0.5]
        tm = [max(range(len(prep.opts[t][v].p)), key=lambda k: sol[r[v, i, t, k]]) for v in nodes]
        stages.append(PiperStage(nodes, d, t, tm))
    plan = restore_plan(prep, PiperPlan(stages))
    metrics = evaluate_piper(inst, plan)
    bound = min(res.lower_bound, metrics.tps)
    return PeerOutcome(res.termination if metrics.feasible else Termination.error, plan, metrics.tps,
                       bound, time.monotonic() - start, solver,
                       res.message or f"MILP: {form.num_cols} columns, {form.num_rows} rows", stats,
                       res.solver_version)
