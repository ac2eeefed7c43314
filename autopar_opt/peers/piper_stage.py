"""Costs of candidate stages of Piper's problem, many stages at once (numpy).

For stages ``S_r`` (rows of a boolean membership matrix) at one tensor degree
``t``, :class:`StageBatch` holds every node's ``base_v(τ) = p + X_v(τ)/B``
(:mod:`autopar_opt.peers.piper_model`) and answers ``TPS(S_r, t, d, y)``:

- ``y <= y_fast[r]``: every node's fastest TMPC fits, ``TPS = lo(d)`` exactly
  (the least cost ignoring memory);
- ``y > y_low[r]``: even the least-memory choice exceeds ``M`` — infeasible;
- in between (the *band*) ``lo(d)`` is only a lower bound and the exact value
  is one knapsack (:func:`~autopar_opt.peers.piper_model.solve_mckp`), run
  only where the DP needs it and cached. When every node's TMPCs have the
  same ``parameterSize`` (every shipped file) the choice does not depend on
  ``d``, so one knapsack serves every ``d``.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from autopar_opt.peers.piper_model import MEM_RTOL, Prepared, solve_mckp


class DegreeArrays:
    """Per-degree arrays: TMPC data padded to two options per node (a lone TMPC is repeated)."""

    def __init__(self, prep: Prepared, t: int) -> None:
        n, E = prep.n, len(prep.edges)
        self.avail = np.array([o is not None for o in prep.opts[t]], dtype=bool)
        self.P, self.W, self.A, self.Bm = (np.zeros((n, 2)) for _ in range(4))
        self.FW, self.BW = np.zeros((E, 2)), np.zeros((E, 2))
        for v, o in enumerate(prep.opts[t]):
            if o is None:
                continue
            pick = [0, min(1, len(o.p) - 1)]
            self.P[v], self.W[v], self.A[v], self.Bm[v] = o.p[pick], o.w[pick], o.a[pick], o.b[pick]
            for j, e in enumerate(prep.ins[v]):
                self.FW[e] = o.fw[pick, j]
            for j, e in enumerate(prep.outs[v]):
                self.BW[e] = o.bw[pick, j]
        self.ntmpc = np.array([0 if o is None else len(o.p) for o in prep.opts[t]])
        self.src = np.array([u for u, _, _ in prep.edges], dtype=np.int64)
        self.dst = np.array([v for _, v, _ in prep.edges], dtype=np.int64)
        c = np.array([c for _, _, c in prep.edges])
        self.in_w = 2.0 * (c[:, None] + self.FW)       # charged at the head when the edge is cut
        self.out_w = 2.0 * (c[:, None] + self.BW)      # charged at the tail
        # one-hot incidence as sparse matrices: no BLAS threads on a shared machine
        self.dinc_t = sp.csr_array((np.ones(E), (self.dst, np.arange(E))), shape=(n, E))
        self.sinc_t = sp.csr_array((np.ones(E), (self.src, np.arange(E))), shape=(n, E))
        self.uniform_w = self.W[:, 0] == self.W[:, 1]


class StageBatch:
    """Stages ``member[r]`` at degree ``t`` (see module docstring)."""

    def __init__(self, prep: Prepared, arrays: DegreeArrays, member: np.ndarray, y_max: int) -> None:
        inst = prep.inst
        self.ar, self.member = arrays, member
        self.ok = ~np.any(member & ~arrays.avail, axis=1)
        m = member.astype(float)
        cut_in = (m[:, arrays.dst] * (1.0 - m[:, arrays.src])) if arrays.src.size else np.zeros((len(m), 0))
        cut_out = (m[:, arrays.src] * (1.0 - m[:, arrays.dst])) if arrays.src.size else cut_in
        x = np.stack([(arrays.dinc_t @ (cut_in * arrays.in_w[:, k]).T
                       + arrays.sinc_t @ (cut_out * arrays.out_w[:, k]).T).T for k in range(2)], axis=-1)
        self.base = (arrays.P[None] + x / inst.bandwidth) * m[..., None]
        self.Wm = arrays.W[None] * m[..., None]
        self.Am, self.Bmm = arrays.A[None] * m[..., None], arrays.Bm[None] * m[..., None]
        self.cap = inst.memory_bytes * (1 + MEM_RTOL)
        self.kappa_unit = 4.0 / (inst.microbatches * inst.bandwidth)
        self.uniform = ~np.any(member & ~arrays.uniform_w, axis=1)
        fast = np.argmin(self.base, axis=-1)
        rows = np.arange(len(m))[:, None]
        cols = np.arange(member.shape[1])[None]
        af = self.Am[rows, cols, fast].sum(axis=1)
        bf = self.Bmm[rows, cols, fast].sum(axis=1)
        self.y_fast = np.where(self.uniform, _max_y(af, bf, self.cap, y_max), 0)
        self.y_low = self._y_low(y_max)
        self._lo_base = self.base.min(axis=-1).sum(axis=1)      # uniform rows: lo(d) in O(r)
        self._lo_w = self.Wm[:, :, 0].sum(axis=1)
        self._cache: dict[tuple[int, int], list[tuple[int, int, tuple[float, list[int]]]]] = {}

    def _y_low(self, y_max: int) -> np.ndarray:
        """Largest ``y <= y_max`` at which the least-memory choice fits (0: none), by bisection."""
        lo = np.zeros(len(self.member), dtype=np.int64)
        hi = np.full(len(self.member), y_max, dtype=np.int64)
        while True:
            active = lo < hi
            if not active.any():
                return lo
            mid = (lo + hi + 1) // 2
            need = np.minimum(self.Am[:, :, 0] * mid[:, None] + self.Bmm[:, :, 0],
                              self.Am[:, :, 1] * mid[:, None] + self.Bmm[:, :, 1]).sum(axis=1)
            fits = need <= self.cap
            lo = np.where(active & fits, mid, lo)
            hi = np.where(active & ~fits, mid - 1, hi)

    def lo(self, d: int) -> np.ndarray:
        """Least ``TPS`` of every row at data degree ``d`` ignoring memory."""
        kappa = self.kappa_unit * (d - 1)
        out = (self._lo_base + kappa * self._lo_w) / d
        if not self.uniform.all():
            odd = ~self.uniform
            cost = self.base[odd] + kappa * self.Wm[odd]
            out[odd] = cost.min(axis=-1).sum(axis=1) / d
        return out

    def light(self, r: np.ndarray, d: int, y: np.ndarray) -> np.ndarray:
        """``TPS`` of the least-memory choice at ``y`` for rows ``r`` (feasible for ``y <= y_low``).

        An upper bound on the exact value that is itself the value of a
        feasible TMPC choice (used to find an incumbent before the exact pass).
        """
        out = np.empty(len(r))
        kappa = self.kappa_unit * (d - 1)
        for lo in range(0, len(r), 4096):
            rr, yy = r[lo:lo + 4096], y[lo:lo + 4096, None]
            m0 = self.Am[rr, :, 0] * yy + self.Bmm[rr, :, 0]
            m1 = self.Am[rr, :, 1] * yy + self.Bmm[rr, :, 1]
            c = self.base[rr] + kappa * self.Wm[rr]
            pick1 = (m1 < m0) | ((m1 == m0) & (c[:, :, 1] < c[:, :, 0]))
            out[lo:lo + 4096] = np.where(pick1, c[:, :, 1], c[:, :, 0]).sum(axis=1) / d
        return out

    def exact(self, r: int, d: int, y: int) -> tuple[float, list[int]] | None:
        """Exact ``(TPS, TMPC index per stage node)`` of row ``r``; None when nothing fits."""
        if y > self.y_low[r] or not self.ok[r]:
            return None
        key = (r, 0 if self.uniform[r] else d)
        nodes = np.flatnonzero(self.member[r])
        kappa = self.kappa_unit * (d - 1)
        got = None
        for y_from, y_to, res in self._cache.get(key, ()):     # optimal at y_from, still fits at y
            if y_from <= y <= y_to:
                got = res
                break
        if got is None:
            ncol = self.ar.ntmpc[nodes]
            costs = [(self.base[r, v, :k] + kappa * self.Wm[r, v, :k]) for v, k in zip(nodes, ncol)]
            mems = [self.Am[r, v, :k] * y + self.Bmm[r, v, :k] for v, k in zip(nodes, ncol)]
            got = solve_mckp(costs, mems, self.cap)
            if got is None:
                return None
            a = math.fsum(float(self.Am[r, v, k]) for v, k in zip(nodes, got[1]))
            b = math.fsum(float(self.Bmm[r, v, k]) for v, k in zip(nodes, got[1]))
            y_to = int(_max_y(np.array([a]), np.array([b]), self.cap, 1 << 30)[0])
            self._cache.setdefault(key, []).append((y, y_to, got))
        choice = got[1]
        total = math.fsum(float(self.base[r, v, k] + kappa * self.Wm[r, v, k]) for v, k in zip(nodes, choice))
        return total / d, choice


def _max_y(a: np.ndarray, b: np.ndarray, cap: float, y_max: int) -> np.ndarray:
    """Largest integer ``0 <= y <= y_max`` with ``a·y + b <= cap`` (elementwise)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(a > 0, np.floor((cap - b) / np.where(a > 0, a, 1.0)), y_max)
    y = np.where(b > cap, 0, y)
    return np.clip(y, 0, y_max).astype(np.int64)
