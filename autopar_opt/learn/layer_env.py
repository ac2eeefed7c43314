"""Sequential decision view of a :class:`LayerSpace` (Auto-MAP's setting).

An episode first picks the outer configuration, then walks the layers in
topological order; at layer ``u`` an action is ``(strategy k, boundary b)``
with ``b = 1`` meaning "layer u opens the next stage". Actions are pruned
before the agent sees them (Wang et al. 2020, Auto-MAP Sec. 4, "task-specific
pruning"): boundaries that would leave a stage empty or too few layers for
the remaining stages, and strategies whose memory would overflow the stage;
dominated strategies (same layout, no better in time, sync, weights and
activations) are already gone from the cost tables.

Rewards follow the potential ``Φ`` = exact iteration latency of the partial
plan (docs/DESIGN.md §3 over the layers placed so far, in units of the space's
reference time): each step pays ``Φ(s) − Φ(s')``, so an episode's return is
``−T/ref`` of the finished plan (a potential-based shaping, Ng et al. 1999,
which leaves the optimal policy unchanged) and the agent gets a signal at
every layer instead of only at the end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autopar_opt.learn.space import Candidate, LayerSpace

STATE_DIM = 10
ACTION_DIM = 13


@dataclass
class Step:
    """Observation: state features, legal actions' features and their meaning."""

    state: np.ndarray            # [STATE_DIM]
    actions: np.ndarray          # [A, ACTION_DIM]
    meaning: list[tuple[int, int]]   # (config) or (k, b) per action row

    @property
    def dead(self) -> bool:
        return len(self.meaning) == 0


class LayerEnv:
    """One episode at a time over ``space``; see the module docstring."""

    def __init__(self, space: LayerSpace) -> None:
        self.space = space
        self.n = space.num_layers
        self.scale = space.reference_s
        self.max_pp = max(a.tables.pp for a in space.arrays)
        self.max_c = max(a.tables.microbatches for a in space.arrays)
        self.in_edges: list[list[tuple[int, int]]] = [[] for _ in range(self.n)]
        for e, (u, v) in enumerate(space.arrays[0].tables.edges):
            self.in_edges[v].append((e, u))
        self.config_feats = np.zeros((len(space), ACTION_DIM))
        for i, a in enumerate(space.arrays):
            t = a.tables
            self.config_feats[i, :5] = (0.0, t.pp / self.max_pp, np.log2(t.microbatches + 1)
                                        / np.log2(self.max_c + 1), a.bound / self.scale,
                                        float(t.schedule.value == "gpipe"))
        self.config: int | None = None

    # ------------------------------------------------------------ episode
    def reset(self) -> Step:
        """Start an episode: the first decision is the configuration."""
        self.config, self.u = None, 0
        state = np.zeros(STATE_DIM)
        return Step(state, self.config_feats.copy(), [(i, 0) for i in range(len(self.space))])

    def _begin(self, config: int) -> None:
        a = self.space.arrays[config]
        self.config, self.a, self.t = config, a, a.tables
        pp = a.tables.pp
        self.stage = np.zeros(self.n, dtype=int)
        self.choice = np.zeros(self.n, dtype=int)
        self.p, self.g, self.o = np.zeros(pp), np.zeros(pp), np.zeros(max(pp - 1, 0))
        self.w, self.h, self.x = np.zeros(pp), np.zeros(pp), np.zeros(pp)
        self.cur = 0
        self.layer_scale = max(float(np.nanmin(np.where(np.isinf(a.time), np.nan, a.time), axis=1).mean()),
                               1e-12)
        self.phi = 0.0

    def potential(self) -> float:
        """Exact latency of the partial plan, in units of the reference time."""
        c = self.t.microbatches
        bott = max(self.p.max(), self.o.max() if len(self.o) else 0.0)
        return float(self.p.sum() + self.o.sum() + (c - 1) * bott + self.g.max()) / self.scale

    def observe(self) -> Step:
        """Features of the current layer decision and its legal actions."""
        u, a, t = self.u, self.a, self.t
        pp, cap = t.pp, t.capacity_bytes
        k = np.arange(a.num_choices[u])
        rem_stages = pp - 1 - self.cur
        opts = []
        if self.n - u - 1 >= rem_stages:
            opts.append(0)
        if u > 0 and rem_stages >= 1:
            opts.append(1)
        feats, meaning = [], []
        strategies = t.strategies[u]
        prev = strategies[0].layout if u == 0 else t.strategies[u - 1][self.choice[u - 1]].layout
        for b in opts:
            s = self.cur + b
            mem = (0.0 if b else self.w[s] + t.inflight[s] * self.h[s]) \
                + a.weight[u, k] + t.inflight[s] * a.act[u, k] \
                + np.maximum(0.0 if b else self.x[s], a.work[u, k])   # largest working set
            ok = mem <= cap * (1 + 1e-9)
            comm = self._edge_cost(u, s, k)
            f = np.zeros((len(k), ACTION_DIM))
            f[:, 0] = 1.0
            f[:, 1] = b
            f[:, 2] = a.time[u, k] / self.layer_scale
            f[:, 3] = a.sync[u, k] / self.layer_scale
            f[:, 4] = comm / self.layer_scale
            f[:, 5] = mem / cap
            f[:, 6] = (a.weight[u, k] + t.inflight[s] * a.act[u, k]) / cap
            f[:, 7] = [st.tp / t.devices_per_stage for st in strategies]
            f[:, 8] = [st.zero / 3 for st in strategies]
            f[:, 9] = [float(st.recompute.value != "none") for st in strategies]
            f[:, 10] = [float(st.layout == prev) for st in strategies]
            f[:, 11] = [float(st.sp) for st in strategies]
            f[:, 12] = (self.p[s] if not b else 0.0) / self.layer_scale / max(self.n / pp, 1)
            feats.append(f[ok])
            meaning += [(int(kk), b) for kk in k[ok]]
        state = np.array([1.0, u / self.n, self.cur / pp, rem_stages / pp, (self.n - u) / self.n,
                          (self.w[self.cur] + t.inflight[self.cur] * self.h[self.cur]) / cap,
                          self.phi, pp / self.max_pp,
                          np.log2(t.microbatches + 1) / np.log2(self.max_c + 1),
                          self.p[self.cur] / self.scale])
        actions = np.concatenate(feats) if feats else np.zeros((0, ACTION_DIM))
        return Step(state, actions, meaning)

    def _edge_cost(self, u: int, s: int, k: np.ndarray) -> np.ndarray:
        """Resharding / transfer time of every in-edge of ``u`` for strategies ``k``."""
        a, total = self.a, np.zeros(len(k))
        for e, v in self.in_edges[u]:
            kv, sv = self.choice[v], self.stage[v]
            if sv == s:
                total += a.reshard[e, kv, k]
            else:
                for b in range(sv, s):
                    mat = a.cross_intra if a.boundary_intra[b] else a.cross_inter
                    total += mat[e, kv, k]
        return total

    def step(self, action: tuple[int, int]) -> tuple[float, bool]:
        """Apply ``action``; returns (reward, episode finished)."""
        if self.config is None:
            self._begin(action[0])
            return 0.0, False
        k, b = action
        u, a = self.u, self.a
        self.cur += b
        s = self.cur
        self.stage[u], self.choice[u] = s, k
        self.p[s] += a.time[u, k]
        self.g[s] += a.sync[u, k]
        self.w[s] += a.weight[u, k]
        self.h[s] += a.act[u, k]
        self.x[s] = max(self.x[s], a.work[u, k])
        for e, v in self.in_edges[u]:
            kv, sv = self.choice[v], self.stage[v]
            if sv == s:
                self.p[s] += a.reshard[e, kv, k]
            else:
                for bb in range(sv, s):
                    mat = a.cross_intra if a.boundary_intra[bb] else a.cross_inter
                    self.o[bb] += mat[e, kv, k]
        phi = self.potential()
        reward, self.phi = self.phi - phi, phi
        self.u += 1
        return reward, self.u == self.n

    def dead_end_reward(self) -> float:
        """No legal action left: the partial cost extrapolated to all layers, doubled."""
        return -(2.0 * self.phi * self.n / max(self.u, 1) + 1.0)

    def candidate(self) -> Candidate:
        return Candidate(self.config, self.stage.copy(), self.choice.copy())
