"""Sequential decisions over the operator space (Auto-MAP's setting), for the DQN.

An episode first takes the outer choice (Auto-MAP's replica and pipeline tasks: the
logical mesh of a stage's devices, and with pipelining the stage count, micro-batches
and split; :class:`~autopar_opt.learn.op_space.OpSearchSpace`), then walks the operators
in topological order and gives each a configuration (the partition task). Actions are
pruned before the agent sees them (Wang et al. 2020, Auto-MAP, Sec. 4):

* configurations dominated by another with the same layouts on every edge are gone
  (:func:`~autopar_opt.learn.op_space.kept_configs`);
* an operator without parameters may only take configurations whose every input
  arrives without redistribution from the producers already decided (the partitioned
  dimensions propagate consistently), when any exists; operators with parameters are
  the decision points and keep all their configurations;
* configurations that would overflow the stage's memory on their own are dropped when
  another remains.

The propagation rule may cut the optimum off (it is a heuristic of Auto-MAP's, not an
exactness-preserving reduction); the benchmark reports the DQN's ratio to the proven
optimum. Rewards follow the potential ``Φ`` = the exact latency of the partial plan
(docs/DESIGN.md §3 over the operators decided so far) in units of a reference time, as
:mod:`autopar_opt.learn.layer_env` does.
"""

from __future__ import annotations

import numpy as np

from autopar_opt.learn.layer_env import Step
from autopar_opt.learn.op_space import OpCandidate, OpSearchSpace

OP_STATE_DIM = 10
OP_ACTION_DIM = 12


class OpEnv:
    """One episode at a time over ``space`` (module docstring)."""

    def __init__(self, space: OpSearchSpace) -> None:
        self.space = space
        self.n = space.num_ops
        t0 = space.tables(0)
        self.scale = max(sum(float((a + s).min()) for a, s in zip(t0.step, t0.sync)), 1e-12)
        n_dev = space.ctx.cluster.num_devices
        self.max_pp = max(o.pp for o in space.outers)
        self.max_c = max(o.microbatches for o in space.outers)
        self.outer_feats = np.zeros((len(space), OP_ACTION_DIM))
        for i, o in enumerate(space.outers):
            self.outer_feats[i, :5] = (0.0, o.pp / self.max_pp, np.log2(o.microbatches + 1) /
                                       np.log2(self.max_c + 1), o.shape[0] / n_dev, o.shape[1] / n_dev)
        self.config: int | None = None
        self._next: Step | None = None

    def reset(self) -> Step:
        self.config, self.u, self._next = None, 0, None
        return Step(np.zeros(OP_STATE_DIM), self.outer_feats.copy(), [(i, 0) for i in range(len(self.space))])

    def _begin(self, i: int) -> None:
        t = self.space.tables(i)
        self.config, self.t = i, t
        self.kept = self.space.kept(i)
        pp = t.split.pp
        self.choice = np.zeros(self.n, dtype=np.int64)
        self.p, self.g, self.mem = np.zeros(pp), np.zeros(pp), np.zeros(pp)
        self.o = np.zeros(max(pp - 1, 0))
        self.in_edges: list[list[tuple[int, int]]] = [[] for _ in range(self.n)]
        for e, (u, v) in enumerate(t.edges):
            self.in_edges[v].append((e, u))
        self.has_params = [any(x.param for x in op.inputs) for op in t.graph.ops]
        self.parts = [np.array([c.parts() for c in cs], dtype=float) for cs in t.configs]
        self.devices = t.shape[0] * t.shape[1]
        self.phi = 0.0

    def potential(self) -> float:
        c = self.t.split.microbatches
        bott = max(self.p.max(), self.o.max() if len(self.o) else 0.0)
        return float(self.p.sum() + self.o.sum() + (c - 1) * bott + self.g.max()) / self.scale

    def _incoming(self, u: int, ks: np.ndarray) -> np.ndarray:
        total = np.zeros(len(ks))
        for e, w in self.in_edges[u]:
            total += self.t.mats[e][self.choice[w], ks]
        return total

    def observe(self) -> Step:
        """The next decision (computed by :meth:`step`, which skips forced moves)."""
        return self._next if self._next is not None else self._observe()

    def _observe(self) -> Step:
        u, t = self.u, self.t
        st = t.split.stage[u]
        ks = self.kept[u]
        comm = self._incoming(u, ks)
        mem = t.weight[u][ks] + t.inflight[st] * t.act[u][ks]
        mask = np.ones(len(ks), dtype=bool)
        consistent = comm <= 0.0
        if not self.has_params[u] and self.in_edges[u] and consistent.any():
            mask &= consistent
        fits = self.mem[st] + mem <= t.capacity_bytes * (1 + 1e-9)
        if (mask & fits).any():
            mask &= fits
        op = t.graph.ops[u]
        ref = max(float(t.step[u].min()), 1e-12)
        f = np.zeros((len(ks), OP_ACTION_DIM))
        f[:, 0] = 1.0
        f[:, 1] = t.step[u][ks] / ref
        f[:, 2] = t.sync[u][ks] / ref
        f[:, 3] = comm / ref
        f[:, 4] = mem / t.capacity_bytes
        f[:, 5] = self.parts[u][ks] / self.devices
        cfgs = [t.configs[u][k] for k in ks]
        names = op.dim_names
        for j, c in enumerate(cfgs):
            tot = c.total
            f[j, 6] = tot[names.index("b")] / self.devices if "b" in names else 0.0
            f[j, 7] = float(any(tot[names.index(d)] > 1 for d in op.reduction))
            f[j, 8] = float(bool(c.scatter))
        f[:, 9] = consistent
        f[:, 10] = float(self.has_params[u])
        f[:, 11] = self.p[st] / self.scale
        state = np.array([1.0, u / self.n, st / t.split.pp, self.p[st] / self.scale,
                          self.mem[st] / t.capacity_bytes, t.split.pp / self.max_pp,
                          np.log2(t.split.microbatches + 1) / np.log2(self.max_c + 1),
                          t.shape[0] / self.devices, t.shape[1] / self.devices, self.phi])
        return Step(state, f[mask], [(int(k), 0) for k in ks[mask]])

    def step(self, action: tuple[int, int]) -> tuple[float, bool]:
        """Apply ``action``, then every following decision that has one legal action only
        (a forced move: the agent learns nothing from it; its reward is added to this
        step's, a semi-MDP step with no discount). Returns (reward, episode finished)."""
        self._next = None
        reward, done = self._apply(action)
        while not done:
            nxt = self._observe()
            if len(nxt.meaning) != 1:
                self._next = nxt
                break
            r, done = self._apply(nxt.meaning[0])
            reward += r
        return reward, done

    def _apply(self, action: tuple[int, int]) -> tuple[float, bool]:
        if self.config is None:
            self._begin(action[0])
            return 0.0, False
        k = action[0]
        u, t = self.u, self.t
        st = t.split.stage[u]
        self.choice[u] = k
        self.p[st] += t.step[u][k]
        self.g[st] += t.sync[u][k]
        self.mem[st] += t.weight[u][k] + t.inflight[st] * t.act[u][k]
        for e, w in self.in_edges[u]:
            x = t.mats[e][self.choice[w], k]
            b = t.boundary[e]
            if b is None:
                self.p[st] += x
            else:
                self.o[b] += x
        phi = self.potential()
        reward, self.phi = self.phi - phi, phi
        self.u += 1
        return reward, self.u == self.n

    def dead_end_reward(self) -> float:
        return -(2.0 * self.phi * self.n / max(self.u, 1) + 1.0)

    def candidate(self) -> OpCandidate:
        return OpCandidate(self.config, self.choice.copy())
