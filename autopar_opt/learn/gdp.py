"""GDP-style graph policy trained with PPO (Zhou et al. 2019, "GDP: Generalized
Device Placement for Dataflow Graphs").

The policy, as in the paper:

* **graph embedding**: GraphSAGE (Hamilton et al. 2017) layers,
  ``h' = relu(W_self h + W_nbr mean_{v ∈ N(u)} h_v)`` over the undirected graph;
* **placement network**: a transformer over the node sequence (topological
  order) with **segment-level recurrence** (Transformer-XL, Dai et al. 2019):
  the sequence is cut into segments of ``segment`` nodes and every segment
  also attends to the (gradient-stopped) hidden states of the previous one,
  so graphs of thousands of nodes fit in memory;
* one output per node: a distribution over that node's slots (a strategy of
  the layer, or a device), scored from the node state and the slot's own
  features, so the same weights serve graphs with different slot sets; plus
  a stage-boundary score per node where the task has stages.

Training: PPO (Schulman et al. 2017) with the clipped objective, advantages
normalised within each batch of sampled placements, an entropy bonus.
Reward = ``−value / scale`` with ``value`` the problem's table price (memory
overflow penalised). :class:`GDPAgent` keeps the weights, so it can be
pre-trained on a set of graphs and then applied zero-shot or fine-tuned on a
new one (GDP Sec. 3.3). Needs PyTorch (the ``learn`` extra).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from autopar_opt.learn.base import SearcherResult, Tracker
from autopar_opt.learn.dqn import seed_everything
from autopar_opt.learn.tasks import NodeTask, boundaries_from_scores, layer_tasks


class SageLayer(nn.Module):
    """GraphSAGE mean aggregator."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.self_lin, self.nbr_lin = nn.Linear(dim, dim), nn.Linear(dim, dim)

    def forward(self, h: torch.Tensor, src: torch.Tensor, dst: torch.Tensor,
                deg: torch.Tensor) -> torch.Tensor:
        agg = torch.zeros_like(h).index_add_(0, dst, h[src]) / deg
        out = torch.relu(self.self_lin(h) + self.nbr_lin(agg))
        return out / (out.norm(dim=-1, keepdim=True) + 1e-6)


class RecurrentBlock(nn.Module):
    """Transformer layer whose queries see the segment and the previous segment's memory."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(dim, 2 * dim), nn.ReLU(), nn.Linear(2 * dim, dim))
        self.n1, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None) -> torch.Tensor:
        kv = x if memory is None else torch.cat([memory, x], dim=1)
        x = self.n1(x + self.attn(x, kv, kv, need_weights=False)[0])
        return self.n2(x + self.ff(x))


class GDPPolicy(nn.Module):
    """GraphSAGE encoder + segment-recurrent transformer + per-node slot scores."""

    def __init__(self, node_dim: int, slot_dim: int, hidden: int = 64, sage_layers: int = 2,
                 attn_layers: int = 2, heads: int = 4, segment: int = 128) -> None:
        super().__init__()
        self.segment = segment
        self.embed = nn.Linear(node_dim + 2, hidden)
        self.sage = nn.ModuleList(SageLayer(hidden) for _ in range(sage_layers))
        self.blocks = nn.ModuleList(RecurrentBlock(hidden, heads) for _ in range(attn_layers))
        self.slot_embed = nn.Sequential(nn.Linear(slot_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        self.slot_score = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        self.boundary = nn.Linear(hidden, 1)

    def forward(self, g: "GraphTensors") -> tuple[torch.Tensor, torch.Tensor]:
        """Slot logits [n, A] (masked to -1e9) and boundary logits [n]."""
        n = g.nodes.shape[0]
        pos = torch.arange(n, dtype=torch.float32).unsqueeze(1) / max(n - 1, 1)
        h = self.embed(torch.cat([g.nodes, pos, torch.sin(6.283 * pos)], dim=1))
        for layer in self.sage:
            h = h + layer(h, g.src, g.dst, g.deg)
        outs, memory = [], [None] * len(self.blocks)
        for start in range(0, n, self.segment):
            x = h[start:start + self.segment].unsqueeze(0)
            for i, block in enumerate(self.blocks):
                new = block(x, memory[i])
                memory[i] = x.detach()
                x = new
            outs.append(x.squeeze(0))
        h = torch.cat(outs, dim=0)
        s = self.slot_embed(g.slots)                              # [n, A, H]
        pair = torch.cat([h.unsqueeze(1).expand(-1, s.shape[1], -1), s], dim=-1)
        logits = self.slot_score(pair).squeeze(-1).masked_fill(~g.mask, -1e9)
        return logits, self.boundary(h).squeeze(-1)


@dataclass
class GraphTensors:
    """A task's arrays as tensors (built once per task)."""

    nodes: torch.Tensor
    src: torch.Tensor
    dst: torch.Tensor
    deg: torch.Tensor
    slots: torch.Tensor
    mask: torch.Tensor

    @classmethod
    def of(cls, task: NodeTask) -> "GraphTensors":
        e = task.edges
        src = np.concatenate([e[:, 0], e[:, 1]]) if len(e) else np.zeros(0, int)
        dst = np.concatenate([e[:, 1], e[:, 0]]) if len(e) else np.zeros(0, int)
        deg = np.maximum(np.bincount(dst, minlength=task.num_nodes), 1).astype(np.float32)
        return cls(torch.tensor(task.node_feats, dtype=torch.float32), torch.from_numpy(src),
                   torch.from_numpy(dst), torch.from_numpy(deg).unsqueeze(1),
                   torch.tensor(task.slot_feats, dtype=torch.float32),
                   torch.from_numpy(task.slot_mask))


@dataclass
class PPOConfig:
    """PPO hyper-parameters (defaults: small graphs, CPU)."""

    samples: int = 16          # placements sampled per iteration
    epochs: int = 3            # PPO epochs over each batch
    clip: float = 0.2
    lr: float = 2e-3
    entropy: float = 0.01


class GDPAgent:
    """Policy weights + optimiser; trains on tasks, samples plans for a task."""

    def __init__(self, node_dim: int, slot_dim: int, seed: int = 0, ppo: PPOConfig | None = None,
                 **policy_kw: Any) -> None:
        self.rng = seed_everything(seed)
        self.policy = GDPPolicy(node_dim, slot_dim, **policy_kw)
        self.ppo = ppo or PPOConfig()
        self.opt = torch.optim.Adam(self.policy.parameters(), lr=self.ppo.lr)
        self._tensors: dict[int, tuple[NodeTask, GraphTensors]] = {}

    def tensors(self, task: NodeTask) -> GraphTensors:
        """The task's tensors, built once; the cache holds the task itself, so an
        id is never reused by another task while its entry exists."""
        key = id(task)
        if key not in self._tensors or self._tensors[key][0] is not task:
            self._tensors[key] = (task, GraphTensors.of(task))
        return self._tensors[key][1]

    def _sample(self, task: NodeTask, count: int, greedy: bool = False):
        with torch.no_grad():
            logits, blog = self.policy(self.tensors(task))
        if greedy:
            slots = logits.argmax(dim=1).unsqueeze(0)
            bits = (blog > 0).unsqueeze(0)
        else:
            slots = torch.distributions.Categorical(logits=logits).sample((count,))
            bits = torch.distributions.Bernoulli(logits=blog).sample((count,)).bool()
        scores = blog.numpy()
        cands = []
        for s, b in zip(slots.numpy(), bits.numpy()):
            stage = boundaries_from_scores(scores, b, task.boundaries)
            cands.append(task.decode(s, stage))
        return slots, bits, cands

    def _log_prob(self, task: NodeTask, slots: torch.Tensor, bits: torch.Tensor):
        logits, blog = self.policy(self.tensors(task))
        dist = torch.distributions.Categorical(logits=logits)
        lp = dist.log_prob(slots).sum(dim=1)
        ent = dist.entropy().sum()
        if task.boundaries > 0:
            bd = torch.distributions.Bernoulli(logits=blog)
            lp = lp + bd.log_prob(bits.float()).sum(dim=1)
            ent = ent + bd.entropy().sum()
        return lp, ent / task.num_nodes

    def iteration(self, task: NodeTask, tracker: Tracker | None = None) -> list[float]:
        """Sample a batch, price it, take PPO steps; returns the batch's penalised values."""
        slots, bits, cands = self._sample(task, self.ppo.samples)
        values = []
        for cand in cands:
            priced = task.problem.price(cand)
            if tracker is not None:
                tracker.offer(cand, priced)
            values.append(priced.penalised)
        reward = -torch.tensor(values, dtype=torch.float32) / task.scale
        adv = (reward - reward.mean()) / (reward.std() + 1e-8)
        with torch.no_grad():
            old_lp, _ = self._log_prob(task, slots, bits)
        for _ in range(self.ppo.epochs):
            lp, ent = self._log_prob(task, slots, bits)
            ratio = torch.exp(lp - old_lp)
            loss = -torch.min(ratio * adv, ratio.clamp(1 - self.ppo.clip, 1 + self.ppo.clip) * adv).mean()
            loss = loss - self.ppo.entropy * ent
            self.opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(self.policy.parameters(), 1.0)
            self.opt.step()
        return values

    def train(self, tasks: list[NodeTask], iterations: int) -> None:
        """Pre-train: ``iterations`` PPO iterations on each task, round-robin."""
        for _ in range(iterations):
            for task in tasks:
                self.iteration(task)

    def best_of(self, task: NodeTask, samples: int, tracker: Tracker) -> None:
        """Zero-shot use: the greedy plan and ``samples`` sampled ones, no update."""
        for greedy, count in ((True, 1), (False, samples)):
            if count:
                for cand in self._sample(task, count, greedy)[2]:
                    tracker.offer(cand, task.problem.price(cand))


def gdp_tasks(problem: Any) -> list[NodeTask]:
    """The tasks of a problem: one per outer configuration (layer space) or one graph."""
    if getattr(problem, "kind", "") == "layer":
        return layer_tasks(problem)
    return [problem.node_task()]


def gdp_search(problem: Any, budget_s: float, seed: int = 0, max_samples: int | None = None,
               agent: GDPAgent | None = None, rounds_per_halving: int = 4,
               ppo: PPOConfig | None = None, decoder: str | None = None,
               policy: Any = None, finetune: str = "all") -> SearcherResult:
    """Train the GDP policy on ``problem`` for ``budget_s`` seconds and return its best plan.

    On a placement, ``decoder="node"`` (the default) is the per-node decoder of
    :mod:`autopar_opt.learn.gdp_place`, whose space is the exact search's; ``policy`` (a
    :class:`~autopar_opt.learn.gdp_policy.PlacementPolicy` or a policy file) starts it
    from a pre-trained policy, fine-tuning ``finetune`` (``all`` or ``superposition``).
    ``decoder="block"`` is the block decoder below: ``k − 1`` boundaries over one class
    order, whose best plan (:func:`autopar_opt.learn.block_ceiling.block_ceiling`) is
    1.15-1.63x the optimum on 4 of the 10 public instances, whatever the learning does.

    The layer space has one task per outer configuration; all share one
    policy, and successive halving (Jamieson and Talwalkar 2016) spends the
    samples: every live configuration gets ``rounds_per_halving`` PPO
    iterations, then the worse half (by best value found) is dropped, until
    one is left. ``agent`` (e.g. pre-trained) is fine-tuned in place when given.
    """
    placement = getattr(problem, "kind", "") == "placement"
    if decoder not in (None, "node", "block"):
        raise ValueError(f"decoder must be 'node' or 'block', not {decoder!r}")
    if not placement and (decoder == "node" or policy is not None):
        raise ValueError("the per-node decoder and a placement policy are for placement "
                         "problems; the layer-strategy space has its own slots")
    if placement and decoder != "block":
        from autopar_opt.learn.gdp_place import gdp_place_search

        if policy is not None and not hasattr(policy, "config"):
            from autopar_opt.learn.policy_file import load_policy

            policy = load_policy(policy)[0]
        return gdp_place_search(problem, budget_s, seed, max_samples, policy=policy,
                                finetune=finetune)
    if policy is not None:
        raise ValueError("a placement policy drives the per-node decoder; drop it with "
                         "decoder='block'")
    tasks = gdp_tasks(problem)
    if agent is None:
        agent = GDPAgent(tasks[0].node_feats.shape[1], tasks[0].slot_feats.shape[2], seed, ppo)
    else:
        agent.rng = seed_everything(seed)
    tracker = Tracker(budget_s, max_samples)
    alive = list(range(len(tasks)))
    best = {i: np.inf for i in alive}
    done_rounds = iterations = 0
    while not tracker.done():
        for i in list(alive):
            if tracker.done():
                break
            best[i] = min(best[i], min(agent.iteration(tasks[i], tracker)))
            iterations += 1
        done_rounds += 1
        if done_rounds % rounds_per_halving == 0 and len(alive) > 1:
            alive = sorted(alive, key=lambda i: best[i])[:max(1, len(alive) // 2)]
    info = {"iterations": iterations, "tasks": len(tasks),
            "final_task": tasks[alive[0]].name if alive else None}
    if placement:
        from autopar_opt.learn.block_ceiling import block_ceiling

        info["decoder"] = "block"
        try:
            info["ceiling"] = block_ceiling(problem)
        except ValueError as exc:              # cycles of classes, host-only classes, size
            info["ceiling"], info["ceiling_note"] = None, str(exc)
    return tracker.result("gdp", seed, problem, info)
