"""Deep Q-learning over layer strategies and stage boundaries, or operator configurations (Auto-MAP style).

Wang et al. 2020, "Auto-MAP: A DQN Framework for Exploring Distributed
Execution Plans for DNN Workloads": a DQN walks the model's IR and picks a
parallelisation choice per operator (here: per layer, plus whether the layer
opens a new pipeline stage, after the outer configuration), with the action
space pruned of infeasible choices (:mod:`autopar_opt.learn.layer_env`); on the operator
space an action is one operator's configuration (:mod:`autopar_opt.learn.op_env`).

The Q-network scores a (state, action) pair from features of both (Q(s, a)
with action features, so the same network serves any number of strategies
and configurations). Standard DQN machinery (Mnih et al. 2015): experience
replay, a target network synchronised every ``target_every`` updates, an
epsilon-greedy policy whose epsilon falls linearly over ``eps_episodes``
episodes, Huber loss. Every finished episode is a complete plan and is priced
by the space's table price; the best one is returned priced by ``evaluate``.

Needs PyTorch (the ``learn`` extra). Reproducible: ``torch.manual_seed``, a
numpy ``Generator`` from the seed, deterministic algorithms, one thread.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from autopar_opt.learn.base import SearcherResult, Tracker
from autopar_opt.learn.layer_env import ACTION_DIM, STATE_DIM, LayerEnv, Step


def seed_everything(seed: int) -> np.random.Generator:
    """Seed torch, make it deterministic and single-threaded; numpy Generator."""
    torch.manual_seed(seed)
    # torch.use_deterministic_algorithms(True) has the same effect but first
    # imports torch._inductor (~6 s); the flag itself is all that is needed.
    torch._C._set_deterministic_algorithms(True)
    torch.set_num_threads(1)
    return np.random.default_rng(seed)


class QNet(nn.Module):
    """Q(s, a) = MLP([state features, action features])."""

    def __init__(self, hidden: int = 64, state_dim: int = STATE_DIM, action_dim: int = ACTION_DIM) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(state_dim + action_dim, hidden), nn.ReLU(),
                                  nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, state: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """``state`` [..., S], ``actions`` [..., A, F] -> Q [..., A]."""
        s = state.unsqueeze(-2).expand(*actions.shape[:-1], state.shape[-1])
        return self.body(torch.cat([s, actions], dim=-1)).squeeze(-1)


class Replay:
    """Fixed-size ring buffer of transitions with padded next-action sets."""

    def __init__(self, size: int, max_actions: int, state_dim: int = STATE_DIM,
                 action_dim: int = ACTION_DIM) -> None:
        self.size, self.n, self.pos = size, 0, 0
        self.s = np.zeros((size, state_dim), np.float32)
        self.a = np.zeros((size, action_dim), np.float32)
        self.r = np.zeros(size, np.float32)
        self.done = np.zeros(size, np.float32)
        self.ns = np.zeros((size, state_dim), np.float32)
        self.na = np.zeros((size, max_actions, action_dim), np.float32)
        self.nmask = np.zeros((size, max_actions), bool)

    def add(self, s, a, r: float, nxt: Step | None) -> None:
        i = self.pos
        self.s[i], self.a[i], self.r[i] = s, a, r
        self.done[i] = 1.0 if nxt is None or nxt.dead else 0.0
        self.nmask[i] = False
        if nxt is not None and not nxt.dead:
            m = len(nxt.meaning)
            self.ns[i], self.na[i, :m], self.nmask[i, :m] = nxt.state, nxt.actions, True
        self.pos = (i + 1) % self.size
        self.n = min(self.n + 1, self.size)

    def sample(self, rng: np.random.Generator, batch: int) -> tuple[torch.Tensor, ...]:
        idx = rng.integers(self.n, size=batch)
        return tuple(torch.from_numpy(x[idx]) for x in
                     (self.s, self.a, self.r, self.done, self.ns, self.na, self.nmask))


def _act(net: QNet, obs: Step, eps: float, rng: np.random.Generator) -> int:
    if rng.random() < eps:
        return int(rng.integers(len(obs.meaning)))
    with torch.no_grad():
        q = net(torch.from_numpy(obs.state.astype(np.float32)),
                torch.from_numpy(obs.actions.astype(np.float32)))
    return int(torch.argmax(q))


def _update(net: QNet, target: QNet, opt: torch.optim.Optimizer, replay: Replay,
            rng: np.random.Generator, batch: int) -> float:
    s, a, r, done, ns, na, nmask = replay.sample(rng, batch)
    with torch.no_grad():
        qn = target(ns, na).masked_fill(~nmask, -1e9).max(dim=1).values
        y = r + (1.0 - done) * qn
    q = net(s, a.unsqueeze(1)).squeeze(1)
    loss = nn.functional.smooth_l1_loss(q, y)
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(net.parameters(), 10.0)
    opt.step()
    return float(loss.detach())


def _episode(env: Any, net: QNet, eps: float, rng: np.random.Generator,
             replay: Replay) -> tuple[Any | None, int]:
    """Play one episode; store its transitions; return (candidate or None, steps)."""
    obs = env.reset()
    steps = 0
    while True:
        i = _act(net, obs, eps, rng)
        reward, finished = env.step(obs.meaning[i])
        steps += 1
        nxt = None if finished else env.observe()
        if nxt is not None and nxt.dead:
            reward += env.dead_end_reward()
        replay.add(obs.state, obs.actions[i], reward, nxt)
        if finished:
            return env.candidate(), steps
        if nxt.dead:
            return None, steps
        obs = nxt


def dqn_search(problem: Any, budget_s: float, seed: int = 0, max_samples: int | None = None,
               eps_episodes: int = 300, eps_end: float = 0.05, batch: int = 64,
               lr: float = 1e-3, replay_size: int = 20000, train_every: int = 4,
               target_every: int = 100, greedy_every: int = 10) -> SearcherResult:
    """Auto-MAP-style DQN on a :class:`LayerSpace`; a sample is one finished episode.

    Every ``greedy_every``-th episode is played greedily (epsilon 0), so the
    trace also holds what the current policy itself proposes.
    """
    kind = getattr(problem, "kind", "")
    if kind not in ("layer", "operator"):
        raise ValueError("the dqn searcher works on the layer-strategy space (a layer's strategy and "
                         "stage boundary) or the operator space (an operator's configuration)")
    rng = seed_everything(seed)
    if kind == "layer":
        env: Any = LayerEnv(problem)
        k_max = max(int(a.num_choices.max()) for a in problem.arrays)
        dims = (STATE_DIM, ACTION_DIM)
        max_actions = max(2 * k_max, len(problem))
    else:
        from autopar_opt.learn.op_env import OP_ACTION_DIM, OP_STATE_DIM, OpEnv
        env = OpEnv(problem)
        dims = (OP_STATE_DIM, OP_ACTION_DIM)
        max_actions = problem.max_actions()
    replay = Replay(replay_size, max_actions, *dims)
    net, target = QNet(64, *dims), QNet(64, *dims)
    target.load_state_dict(net.state_dict())
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    tracker = Tracker(budget_s, max_samples)
    episodes = updates = env_steps = 0
    losses: list[float] = []
    while not tracker.done():
        greedy = episodes % greedy_every == greedy_every - 1
        eps = 0.0 if greedy else max(eps_end, 1.0 - (1.0 - eps_end) * episodes / eps_episodes)
        cand, steps = _episode(env, net, eps, rng, replay)
        episodes += 1
        env_steps += steps
        if cand is not None:
            tracker.offer(cand, problem.price(cand))
        else:
            tracker.samples += 1
        while replay.n >= batch and updates * train_every < env_steps:
            losses.append(_update(net, target, opt, replay, rng, batch))
            updates += 1
            if updates % target_every == 0:
                target.load_state_dict(net.state_dict())
    info = {"episodes": episodes, "updates": updates,
            "final_loss": float(np.mean(losses[-50:])) if losses else None}
    return tracker.result("dqn", seed, problem, info)
