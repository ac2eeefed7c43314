"""Proven lower bounds on the cost of completing a partial chain plan.

Used by the label DP (:mod:`autopar_opt.dp.chain`) to drop labels that cannot
lead to a plan below a threshold. A label at state ``(u, i, k)`` (layer ``u``
processed, in stage ``i`` with strategy ``k``, current stage memory ``mem``)
still has to place layers ``u+1 .. n-1`` into stages ``i .. P-1`` (each stage
non-empty, ending in stage ``P-1``).

Backward shortest path (exact for the additive part, memory relaxed). With a
multiplier ``λ ≥ 0`` and stage-dependent layer memory ``m_j[v,k]``:

    H_λ[u,i,k] = min over completions of  Σ_v (A[v,k_v] + λ·m_{stage(v)}[v,k_v])
                                          + Σ in-stage reshard R + Σ boundary transfer R'

computed by the recursion ``H[u,i,k] = min_k' (A'[u+1,k'] + R[k,k'] + H[u+1,i,k'],
A'[u+1,k'] + R'_i[k,k'] + H[u+1,i+1,k'])`` in O(n·P·K²). Every stage's memory is at most the
capacity ``C`` (the memory constraint of DESIGN.md §3), so the λ-terms of the
remaining layers sum to at most ``λ·((C − mem) + C·(P−1−i))``; hence for every
feasible completion

    remaining Σ(p + o)  ≥  H_λ[u,i,k] − λ·((C − mem) + C·(P−1−i))

(Lagrangian relaxation of the memory constraints; valid for any ``λ ≥ 0``, the
bound takes the best of a few). ``Hp`` is the same without transfers (bounds
the remaining Σp alone), used for the bottleneck term: the stages ``i..P-1``
share ``pc + remaining Σp``, so ``max p ≥ (pc + remaining Σp)/(P − i)``;
likewise ``max g ≥ (gc + Σ_{v>u} min_k G[v,k])/(P − i)`` (``rest_sync``).
"""

from __future__ import annotations

import numpy as np

from autopar_opt.cost.tables import CostTables


class CompletionBounds:
    """``H_λ`` and ``Hp_λ`` tables for a few multipliers (module docstring)."""

    def __init__(self, tables: CostTables, mem: list[list[np.ndarray]], cap: float,
                 edge_of: dict[tuple[int, int], int], allowed: list[np.ndarray]) -> None:
        self.n, self.pp, self.cap = tables.num_layers, tables.pp, cap
        self.lambdas = _multipliers(tables, mem, cap, allowed)
        per_lam = [_backward(tables, mem, lam, edge_of, allowed) for lam in self.lambdas]
        # H[u][i]: (λ, k) array of H_λ[u,i,k]; Hp likewise
        self.H = [[np.stack([h[u][i] for h, _ in per_lam]) for i in range(self.pp)]
                  for u in range(self.n)]
        self.Hp = [[np.stack([hp[u][i] for _, hp in per_lam]) for i in range(self.pp)]
                   for u in range(self.n)]
        self._lam = np.array(self.lambdas)[:, None]
        mins = [float(tables.sync[v][allowed[v]].min()) for v in range(self.n)]
        #: rest_sync[u] = Σ_{v>u} min_k G[v,k]: the stages i..P-1 share gc + this much sync
        self.rest_sync = np.r_[np.cumsum(mins[::-1])[::-1][1:], 0.0]

    def remaining(self, u: int, i: int, k: np.ndarray, mem: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Lower bounds on the remaining Σ(p+o) and Σp of labels at states
        ``(u, i, k[j])`` with current-stage memory ``mem[j]`` (vectors)."""
        pen = self._lam * ((self.cap - mem)[None, :] + self.cap * (self.pp - 1 - i))
        hs = (self.H[u][i][:, k] - pen).max(axis=0)
        hp = (self.Hp[u][i][:, k] - pen).max(axis=0)
        return np.maximum(hs, 0.0), np.maximum(hp, 0.0)


def _multipliers(tables: CostTables, mem, cap: float, allowed) -> list[float]:
    """``λ = 0`` plus a geometric fan around the time/memory exchange rate of the model."""
    t = sum(float(tables.time[u][allowed[u]].min()) for u in range(tables.num_layers))
    m = sum(float(mem[-1][u][allowed[u]].min()) for u in range(tables.num_layers))
    if t <= 0 or m <= 0 or cap <= 0:
        return [0.0]
    base = t / max(m, cap)
    return [0.0] + [base * f for f in (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)]


def _backward(tables: CostTables, mem, lam: float, edge_of, allowed):
    n, pp = tables.num_layers, tables.pp
    inf = np.inf
    h = [[None] * pp for _ in range(n)]
    hp = [[None] * pp for _ in range(n)]
    for i in range(pp):
        size = len(tables.time[n - 1])
        h[n - 1][i] = np.zeros(size) if i == pp - 1 else np.full(size, inf)
        hp[n - 1][i] = h[n - 1][i].copy()
    for u in range(n - 2, -1, -1):
        v = u + 1
        e = edge_of.get((u, v))
        ku, kv = len(tables.time[u]), len(tables.time[v])
        mask = np.full(kv, inf)
        mask[allowed[v]] = 0.0
        for i in range(pp):
            stay_cost = tables.time[v] + lam * mem[i][v] + mask
            r = tables.reshard[e] if e is not None else np.zeros((ku, kv))
            best = (r + (stay_cost + h[v][i])[None, :]).min(axis=1)
            best_p = (r + (stay_cost + hp[v][i])[None, :]).min(axis=1)
            if i + 1 < pp:
                move_cost = tables.time[v] + lam * mem[i + 1][v] + mask
                x = tables.cross(e, i) if e is not None else np.zeros((ku, kv))
                best = np.minimum(best, (x + (move_cost + h[v][i + 1])[None, :]).min(axis=1))
                best_p = np.minimum(best_p, (move_cost + hp[v][i + 1]).min())
            h[u][i] = best
            hp[u][i] = best_p
    return h, hp
