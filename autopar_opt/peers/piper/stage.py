"""Costs of candidate stages of Piper's problem, many stages at once (numpy).

For stages ``S_r`` (rows of a boolean membership matrix) at one tensor degree
``t``, :class:`StageBatch` holds every node's ``base_v(τ) = p + X_v(τ)/B``
(:mod:`autopar_opt.peers.piper.model`) and answers ``TPS(S_r, t, d, y)``:

- ``y <= y_fast[r]``: every node's fastest TMPC fits, ``TPS = lo(d)`` exactly
  (the least cost ignoring memory);
- ``y > y_low[r]``: even the least-memory choice exceeds ``M`` — infeasible;
- in between (the *band*) ``lo(d)`` is only a lower bound and the exact value
  is one knapsack (:func:`~autopar_opt.peers.piper.model.solve_mckp`), run
  only where the DP needs it and cached. When every node's TMPCs have the
  same ``parameterSize`` (every shipped file) the choice does not depend on
  ``d``, so one knapsack serves every ``d``.
"""

from __future__ import annotations

import math

import numpy as np

from autopar_opt.peers.piper.model import MEM_RTOL, Prepared, solve_mckp


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
        self.uniform_w = self.W[:, 0] == self.W[:, 1]


class StageBatch:
    """Stages ``member[r]`` at degree ``t`` (see module docstring)."""

    def __init__(self, prep: Prepared, arrays: DegreeArrays, member: np.ndarray, y_max: int,
                 cache: dict | None = None, light: bool = False) -> None:
        inst = prep.inst
        self.ar, self.member = arrays, member
        self.ok = ~np.any(member & ~arrays.avail, axis=1)
        m = member.astype(float)
        self.cap = inst.memory_bytes * (1 + MEM_RTOL)
        self.y_low = self._y_low(m, y_max)
        if light:           # feasibility only: which rows fit at which y
            return
        cut_in = (m[:, arrays.dst] * (1.0 - m[:, arrays.src])) if arrays.src.size else np.zeros((len(m), 0))
        cut_out = (m[:, arrays.src] * (1.0 - m[:, arrays.dst])) if arrays.src.size else cut_in
        x = np.stack([_per_node(cut_in * arrays.in_w[:, k], arrays.dst, len(arrays.avail))
                      + _per_node(cut_out * arrays.out_w[:, k], arrays.src, len(arrays.avail))
                      for k in range(2)], axis=-1)
        self.base = (arrays.P[None] + x / inst.bandwidth) * m[..., None]
        self.Wm, self.Am, self.Bmm = _Masked(arrays.W, m), _Masked(arrays.A, m), _Masked(arrays.Bm, m)
        self.kappa_unit = 4.0 / (inst.microbatches * inst.bandwidth)
        self.uniform = ~np.any(member & ~arrays.uniform_w, axis=1)
        fast = np.argmin(self.base, axis=-1)
        cols = np.arange(member.shape[1])[None]
        af = (m * arrays.A[cols, fast]).sum(axis=1)
        bf = (m * arrays.Bm[cols, fast]).sum(axis=1)
        self.y_fast = np.where(self.uniform, _max_y(af, bf, self.cap, y_max), 0)
        self._lo_base = self.base.min(axis=-1).sum(axis=1)      # uniform rows: lo(d) in O(r)
        self._lo_w = m @ arrays.W[:, 0]
        # knapsack results keyed by (stage node set, t, d or 0): shared across batches
        self._cache: dict[tuple[bytes, int, int], list[tuple[int, int, tuple[float, list[int]]]]] = (
            {} if cache is None else cache)

    def _y_low(self, m: np.ndarray, y_max: int) -> np.ndarray:
        """Largest ``y <= y_max`` at which the least-memory choice fits (0: none).

        The least memory ``need(y) = Σ_v min_τ (a y + b)`` grows with ``y``
        (``a ≥ 0``), so the largest fitting ``y`` of every row is found by one
        vectorised bisection (``log2 y_max`` evaluations of ``need``).
        """
        ar = self.ar
        a0, a1, b0, b1 = ar.A[:, 0], ar.A[:, 1], ar.Bm[:, 0], ar.Bm[:, 1]

        def fits(y: np.ndarray) -> np.ndarray:
            yy = y[:, None].astype(float)
            return (m * np.minimum(a0 * yy + b0, a1 * yy + b1)).sum(axis=1) <= self.cap

        lo = np.zeros(len(m), dtype=np.int64)            # fits (y = 0 means "none")
        hi = np.full(len(m), y_max, dtype=np.int64)
        top = fits(hi)
        lo[top] = y_max
        open_ = ~top & fits(np.ones(len(m), dtype=np.int64))
        lo[open_] = 1
        hi[~open_] = lo[~open_]
        while True:
            act = np.flatnonzero(hi - lo > 1)
            if not act.size:
                return lo
            mid = (lo[act] + hi[act]) // 2
            sub = m[act]
            yy = mid[:, None].astype(float)
            ok = (sub * np.minimum(a0 * yy + b0, a1 * yy + b1)).sum(axis=1) <= self.cap
            lo[act[ok]] = mid[ok]
            hi[act[~ok]] = mid[~ok]

    def lo(self, d: int) -> np.ndarray:
        """Least ``TPS`` of every row at data degree ``d`` ignoring memory."""
        kappa = self.kappa_unit * (d - 1)
        out = (self._lo_base + kappa * self._lo_w) / d
        if not self.uniform.all():
            odd = ~self.uniform
            cost = self.base[odd] + kappa * self.Wm[odd]
            out[odd] = cost.min(axis=-1).sum(axis=1) / d
        return out

    def relaxed(self, r: np.ndarray, d: np.ndarray | int, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """LP bound and greedy value of the stage knapsack of rows ``r`` at ``(d, y)``.

        Every node starts at its least-memory TMPC; switching to its cheaper
        one saves ``s_v`` for ``w_v`` more bytes. Taking the switches in
        decreasing ``s_v/w_v`` while they fit and a fraction of the first that
        does not is the LP optimum of the 0/1 knapsack (Dantzig 1957), so
        ``(Σ light − LP saving)/d`` is a lower bound on the exact ``TPS``;
        stopping before the fraction is a feasible choice, so the greedy value
        is an upper bound that some TMPC choice attains. Rows with ``y``
        above ``y_low`` must not be passed.
        """
        d = np.broadcast_to(np.asarray(d), r.shape)
        kappa = self.kappa_unit * (d - 1)
        if self.uniform[r].all():
            # the saving does not depend on d: one relaxation per distinct (row, y)
            key = r * (int(y.max()) + 1) + y
            _, first, inv = np.unique(key, return_index=True, return_inverse=True)
            lp0, gr0 = self._relaxed(r[first], 0.0, y[first])
            extra = kappa * self._lo_w[r]
            return (lp0[inv] + extra) / d, (gr0[inv] + extra) / d
        lp, greedy = np.empty(len(r)), np.empty(len(r))
        for dd in np.unique(d):
            at = d == dd
            a, g = self._relaxed(r[at], self.kappa_unit * (dd - 1), y[at])
            lp[at], greedy[at] = a / dd, g / dd
        return lp, greedy

    def _relaxed(self, r: np.ndarray, kappa: float, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`relaxed` times ``d`` at the given ``kappa``."""
        lp, greedy = np.empty(len(r)), np.empty(len(r))
        for lo in range(0, len(r), 2048):
            rr, yy = r[lo:lo + 2048], y[lo:lo + 2048, None]
            c = self.base[rr] + kappa * self.Wm[rr]
            m0 = self.Am[rr, :, 0] * yy + self.Bmm[rr, :, 0]
            m1 = self.Am[rr, :, 1] * yy + self.Bmm[rr, :, 1]
            c0, c1 = c[:, :, 0], c[:, :, 1]
            light1 = (m1 < m0) | ((m1 == m0) & (c1 < c0))
            cheap1 = (c1 < c0) | ((c1 == c0) & (m1 < m0))
            cl, ml = np.where(light1, c1, c0), np.where(light1, m1, m0)
            sv = cl - np.where(cheap1, c1, c0)
            w = np.where(cheap1, m1, m0) - ml
            item = (light1 != cheap1) & (sv > 0) & (w > 0)
            sv, w = np.where(item, sv, 0.0), np.where(item, w, 0.0)
            room = self.cap - ml.sum(axis=1)
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(item, sv / np.where(item, w, 1.0), -1.0)
            order = np.argsort(-ratio, axis=1, kind="stable")
            ws, ss = np.take_along_axis(w, order, 1), np.take_along_axis(sv, order, 1)
            cw, cs = np.cumsum(ws, axis=1), np.cumsum(ss, axis=1)
            nfit = (cw <= room[:, None]).sum(axis=1)        # ws >= 0: a prefix fits
            rows = np.arange(len(rr))
            taken = np.where(nfit > 0, cs[rows, np.maximum(nfit - 1, 0)], 0.0)
            used = np.where(nfit > 0, cw[rows, np.maximum(nfit - 1, 0)], 0.0)
            nxt = np.minimum(nfit, ws.shape[1] - 1)
            partial = (nfit < ws.shape[1]) & (ws[rows, nxt] > 0)
            frac = np.where(partial, (room - used) / np.where(partial, ws[rows, nxt], 1.0), 0.0)
            total = cl.sum(axis=1)
            lp[lo:lo + 2048] = total - taken - np.clip(frac, 0, 1) * ss[rows, nxt]
            greedy[lo:lo + 2048] = total - taken
        return lp, greedy

    def exact(self, r: int, d: int, y: int) -> tuple[float, list[int]] | None:
        """Exact ``(TPS, TMPC index per stage node)`` of row ``r``; None when nothing fits."""
        if y > self.y_low[r] or not self.ok[r]:
            return None
        key = (self.member[r].tobytes(), id(self.ar), 0 if self.uniform[r] else d)
        nodes = np.flatnonzero(self.member[r])
        kappa = self.kappa_unit * (d - 1)
        got = None
        for y_from, y_to, res in self._cache.get(key, ()):     # optimal at y_from, still fits at y
            if y_from <= y <= y_to:
                got = res
                break
        if got is None:
            ncol = self.ar.ntmpc[nodes]
            cost = self.base[r, nodes] + kappa * self.Wm[r, nodes]
            mem = self.Am[r, nodes] * y + self.Bmm[r, nodes]
            if (ncol == 2).all():
                costs, mems = list(cost), list(mem)
            else:
                costs = [c[:k] for c, k in zip(cost, ncol)]
                mems = [m[:k] for m, k in zip(mem, ncol)]
            got = solve_mckp(costs, mems, self.cap)
            if got is None:
                return None
            pick = np.array(got[1])
            a = math.fsum(self.Am[r, nodes, pick].tolist())
            b = math.fsum(self.Bmm[r, nodes, pick].tolist())
            y_to = int(_max_y(np.array([a]), np.array([b]), self.cap, 1 << 30)[0])
            self._cache.setdefault(key, []).append((y, y_to, got))
        choice = got[1]
        wr = self.Wm[r]
        total = math.fsum(float(self.base[r, v, k] + kappa * wr[v, k]) for v, k in zip(nodes, choice))
        return total / d, choice


def _per_node(per_edge: np.ndarray, node: np.ndarray, n: int) -> np.ndarray:
    """``out[r, v] = Σ_{e: node[e] = v} per_edge[r, e]`` (an incidence product in numpy:
    no BLAS threads on a shared machine, no scipy import on the DP path)."""
    out = np.zeros((n, per_edge.shape[0]))
    np.add.at(out, node, per_edge.T)
    return out.T


class _Masked:
    """``arr[None] * member[..., None]`` indexed lazily (rows first), never materialised whole."""

    def __init__(self, arr: np.ndarray, m: np.ndarray) -> None:
        self.arr, self.m = arr, m

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        sub = self.m[key[0]]
        vals = self.arr * sub[..., None]
        return vals[(slice(None),) * (sub.ndim - 1) + key[1:]]


def _max_y(a: np.ndarray, b: np.ndarray, cap: float, y_max: int) -> np.ndarray:
    """Largest integer ``0 <= y <= y_max`` with ``a·y + b <= cap`` (elementwise)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(a > 0, np.floor((cap - b) / np.where(a > 0, a, 1.0)), y_max)
    y = np.where(b > cap, 0, y)
    return np.clip(y, 0, y_max).astype(np.int64)
