"""GDP on operator-graph placement: the per-node decoder trained with PPO, pre-training on
many graphs, zero-shot use and fine-tuning (Zhou et al. 2019, §3.3).

* :class:`PlaceTask` — one graph: its :class:`~autopar_opt.learn.place_graph.UnitGraph`,
  features and tensors, built once.
* :class:`PlaceAgent` — a :class:`~autopar_opt.learn.gdp_policy.PlacementPolicy` and its
  optimiser. :meth:`PlaceAgent.iteration` samples placements of a **batch of graphs**,
  prices them (:func:`autopar_opt.learn.node_decoder.price`), normalises the advantages
  per graph and takes PPO steps (Schulman et al. 2017, clipped objective, entropy bonus)
  on the mean loss over the batch. The log-probability of a sample is exact: the
  per-step masks (and state terms) are kept.
* :func:`pretrain` — batch training round-robin over a list of graphs.
* :func:`gdp_place_search` — the ``gdp`` searcher on a placement: zero-shot plans of the
  (optionally pre-trained) policy first (greedy + samples), then PPO on this graph
  (fine-tuning ``all`` weights or only the ``superposition`` part) until the budget.

Reward: ``−penalised / fair`` with ``fair`` = total accelerator time / accelerators, and
``penalised`` = max-load × (1 + 4·memory overflow) (×2 for a sample that met a dead end).
Logits are multiplied by ``1 + log10(max(m, 100)/100)`` for a graph of ``m`` units (a
fixed sharpness: with tens of thousands of units, independent draws at temperature 1
stray from the policy's mode so often that most samples break contiguity or memory).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from autopar_opt.learn.base import SearcherResult, Tracker, clock
from autopar_opt.learn.gdp_policy import GraphInput, PlacementPolicy, PolicyConfig
from autopar_opt.learn.node_decoder import Decoded, decode, price
from autopar_opt.learn.place_features import place_features
from autopar_opt.learn.place_graph import UnitGraph, unit_graph
from autopar_opt.learn.space import Priced

#: Memory overflow multiplier and dead-end factor of the penalised value (searchers
#: compare samples by it; it is never reported).
OVERFLOW_PENALTY = 4.0
DEAD_END_FACTOR = 2.0
#: Above this many units an iteration samples 8 placements and takes 2 PPO epochs (not 16
#: and 3): at 26,000 units (GNMT) one iteration is tens of seconds on a loaded 2-core machine.
LARGE_UNITS = 5000


@dataclass
class PlacePPO:
    """PPO hyper-parameters for placement."""

    samples: int = 16
    epochs: int = 3
    clip: float = 0.2
    lr: float = 1e-3
    entropy: float = 0.01
    graphs_per_batch: int = 3


class PlaceTask:
    """One placement graph, prepared once for the policy (see the module docstring)."""

    def __init__(self, problem: Any, contiguous: bool = True) -> None:
        self.problem, self.contiguous = problem, contiguous
        self.name = problem.name
        self.graph: UnitGraph = unit_graph(problem, contiguous)
        feats = place_features(self.graph)
        self.fair = feats.fair
        self.inputs = GraphInput.of(feats)
        m = self.graph.num_units
        self.sharpness = 1.0 + float(np.log10(max(m, 100) / 100))

    def penalised(self, value: np.ndarray, ratio: np.ndarray, dead: np.ndarray) -> np.ndarray:
        pen = value * (1 + OVERFLOW_PENALTY * np.maximum(ratio - 1.0, 0.0))
        return np.where(dead, pen * DEAD_END_FACTOR, pen)


@dataclass
class NodeCandidate:
    """A per-node placement: the device of every position of ``σ`` (for the Tracker)."""

    dev: np.ndarray

    def copy(self) -> "NodeCandidate":
        return NodeCandidate(self.dev.copy())


class NodeSpace:
    """The searcher's view of a task: ``price`` (table) and ``plan_value`` (evaluator)."""

    kind = "placement"

    def __init__(self, task: PlaceTask) -> None:
        self.task = task

    def plan_value(self, cand: NodeCandidate) -> tuple[dict, float, bool, dict]:
        from autopar_opt.placement.evaluate import evaluate_placement

        assign = self.task.graph.node_assignment(cand.dev)
        m = evaluate_placement(self.task.problem, assign, objective="max-load",
                               contiguous=self.task.contiguous)
        plan = {"assignment": assign.tolist(), "devices": self.task.problem.device_labels()}
        return plan, m.value, m.feasible, m.to_dict()


@dataclass
class Batch:
    """Samples of one task in an iteration."""

    task: PlaceTask
    decoded: Decoded
    values: np.ndarray
    advantage: torch.Tensor
    old_log_prob: torch.Tensor = field(default_factory=lambda: torch.zeros(0))


class PlaceAgent:
    """Policy weights + optimiser (see the module docstring)."""

    def __init__(self, policy: PlacementPolicy | None = None, seed: int = 0,
                 ppo: PlacePPO | None = None, finetune: str = "all",
                 temperature: float = 1.0) -> None:
        from autopar_opt.learn.dqn import seed_everything

        if finetune not in ("all", "superposition"):
            raise ValueError(f"finetune must be 'all' or 'superposition', not {finetune!r}")
        self.rng = seed_everything(seed)
        self.policy = policy or PlacementPolicy(PolicyConfig())
        self.policy.train()
        self.ppo = ppo or PlacePPO()
        params = (self.policy.conditioning_parameters() if finetune == "superposition"
                  else list(self.policy.parameters()))
        self.opt = torch.optim.Adam(params, lr=self.ppo.lr)
        self.temperature = temperature   # logits are divided by it (exploration when > 1)
        self.iterations = 0
        self.decoded = 0          # placements sampled (greedy ones included)
        self.dead_ends = 0        # of which met a dead end (module docstring of node_decoder)

    # ------------------------------------------------------------------ sampling
    def _state_weights(self, task: PlaceTask) -> np.ndarray | None:
        if not self.policy.config.state_terms:
            return None
        return self.policy.state_weights.detach().numpy().astype(float) * self._scale(task)

    def _scale(self, task: PlaceTask) -> float:
        return task.sharpness / self.temperature

    def sample(self, task: PlaceTask, count: int, greedy: bool = False
               ) -> tuple[Decoded, np.ndarray, np.ndarray]:
        """``count`` placements (greedy: the mode, ``count`` copies); (decoded, max-load,
        memory ratio)."""
        with torch.no_grad():
            logits = self.policy(task.inputs).numpy().astype(float) * self._scale(task)
        scores = np.broadcast_to(logits, (count, *logits.shape))
        dec = decode(task.graph, scores, self.rng, greedy=greedy,
                     state_weights=self._state_weights(task), fair=task.fair)
        value, ratio = price(task.graph, dec.dev)
        return dec, value, ratio

    def log_prob(self, task: PlaceTask, dec: Decoded) -> tuple[torch.Tensor, torch.Tensor]:
        """Exact log-probability of each sample and the mean per-unit entropy."""
        scale = self._scale(task)
        z = (self.policy(task.inputs) * scale).unsqueeze(0)
        if dec.state is not None:
            z = z + torch.from_numpy(dec.state) @ (self.policy.state_weights * scale)
        masks = torch.from_numpy(dec.masks)
        logp = torch.log_softmax(z.masked_fill(~masks, -1e9), dim=-1)
        dev = torch.from_numpy(dec.dev).unsqueeze(2)
        lp = logp.gather(2, dev).squeeze(2).sum(dim=1)
        ent = -(logp.exp() * logp.masked_fill(~masks, 0.0)).sum(dim=2).mean()
        return lp, ent

    def offer(self, tracker: Tracker | None, task: PlaceTask, dec: Decoded,
              value: np.ndarray, ratio: np.ndarray) -> None:
        self.decoded += len(value)
        self.dead_ends += int(dec.dead.sum())
        if tracker is None:
            return
        for b in range(len(value)):
            feasible = bool(not dec.dead[b] and ratio[b] <= 1 + 1e-9 and np.isfinite(value[b]))
            tracker.offer(NodeCandidate(dec.dev[b]), Priced(float(value[b]), float(ratio[b]),
                                                              feasible))

    # ------------------------------------------------------------------ training
    def iteration(self, tasks: list[PlaceTask], tracker: Tracker | None = None) -> list[np.ndarray]:
        """Sample every task, take PPO steps on the batch; returns the sampled max-loads."""
        batches = []
        for task in tasks:
            dec, value, ratio = self.sample(task, self.ppo.samples)
            self.offer(tracker, task, dec, value, ratio)
            reward = -task.penalised(value, ratio, dec.dead) / task.fair
            reward = np.where(np.isfinite(reward), reward, -1e6)
            adv = torch.tensor((reward - reward.mean()) / (reward.std() + 1e-8),
                               dtype=torch.float32)
            batches.append(Batch(task, dec, value, adv))
        if tracker is not None and tracker.done():
            return [b.values for b in batches]
        with torch.no_grad():
            for b in batches:
                b.old_log_prob = self.log_prob(b.task, b.decoded)[0]
        for _ in range(self.ppo.epochs):
            self.opt.zero_grad()
            for b in batches:
                lp, ent = self.log_prob(b.task, b.decoded)
                ratio = torch.exp(lp - b.old_log_prob)
                clipped = ratio.clamp(1 - self.ppo.clip, 1 + self.ppo.clip)
                loss = -torch.min(ratio * b.advantage, clipped * b.advantage).mean()
                ((loss - self.ppo.entropy * ent) / len(batches)).backward()
            nn.utils.clip_grad_norm_(self.policy.parameters(), 1.0)
            self.opt.step()
        self.iterations += 1
        return [b.values for b in batches]

    def zero_shot(self, task: PlaceTask, samples: int, tracker: Tracker) -> None:
        """No update: the greedy placement, then ``samples`` sampled ones (in batches)."""
        self.offer(tracker, task, *self.sample(task, 1, greedy=True))
        left = samples
        while left > 0 and not tracker.done():
            count = min(left, self.ppo.samples)
            self.offer(tracker, task, *self.sample(task, count))
            left -= count


def pretrain(problems: list[Any], *, budget_s: float | None = None, iterations: int | None = None,
             seed: int = 0, config: PolicyConfig | None = None, ppo: PlacePPO | None = None,
             contiguous: bool = True, log: Any = None,
             stop: Any = None) -> tuple[PlaceAgent, dict]:
    """Batch-train one policy over ``problems`` (GDP §3.3) for ``budget_s`` seconds or
    ``iterations`` updates (whichever ends first; at least one of them); returns the
    agent and a summary (graphs, iterations, seconds). ``stop``: a callable polled before
    each update (a stop signal: the command writes the policy trained so far)."""
    if budget_s is None and iterations is None:
        raise ValueError("pretrain needs budget_s or iterations")
    start = clock()
    agent = PlaceAgent(PlacementPolicy(config), seed, ppo)
    tasks = [PlaceTask(p, contiguous) for p in problems]
    rng = np.random.default_rng(seed)
    per = min(agent.ppo.graphs_per_batch, len(tasks))
    done = 0
    while (iterations is None or done < iterations) and \
            (budget_s is None or clock() - start < budget_s) and not (stop and stop()):
        pick = rng.choice(len(tasks), size=per, replace=False)
        agent.iteration([tasks[i] for i in pick])
        done += 1
        if log is not None and done % 10 == 0:
            log(f"pretrain: {done} iterations, {clock() - start:.0f} s")
    summary = {"trained_on": [t.name for t in tasks], "iterations": done,
               "wall_s": round(clock() - start, 3), "seed": seed,
               "units": [t.graph.num_units for t in tasks]}
    return agent, summary


def gdp_place_search(space: Any, budget_s: float, seed: int = 0,
                     max_samples: int | None = None, policy: PlacementPolicy | None = None,
                     finetune: str = "all", zero_shot_samples: int = 64,
                     greedy_every: int = 5, ppo: PlacePPO | None = None,
                     temperature: float = 1.0) -> SearcherResult:
    """The ``gdp`` searcher with the per-node decoder on a placement ``space`` (a
    :class:`~autopar_opt.learn.placement_space.PlacementSpace`: its problem and
    contiguity are used). A pre-trained ``policy`` is copied, used zero-shot, then
    fine-tuned; without one, a fresh policy is trained from scratch."""
    import copy

    tracker = Tracker(budget_s, max_samples)
    task = PlaceTask(space.problem, space.contiguous)
    if ppo is None and task.graph.num_units > LARGE_UNITS:
        ppo = PlacePPO(samples=8, epochs=2)
    pretrained = policy is not None
    net = copy.deepcopy(policy) if pretrained else None
    agent = PlaceAgent(net, seed, ppo, finetune=finetune if pretrained else "all",
                       temperature=temperature)
    zero_best = None
    if pretrained:
        agent.zero_shot(task, zero_shot_samples, tracker)
        zero_best = tracker.best_value if tracker.best is not None else None
    else:
        agent.offer(tracker, task, *agent.sample(task, 1, greedy=True))
    while not tracker.done():
        agent.iteration([task], tracker)
        if greedy_every and agent.iterations % greedy_every == 0 and not tracker.done():
            agent.offer(tracker, task, *agent.sample(task, 1, greedy=True))
    info = {"decoder": "node", "ceiling": "optimum", "iterations": agent.iterations,
            "units": task.graph.num_units,
            "pretrained": pretrained, "finetune": finetune if pretrained else None,
            "zero_shot_value": zero_best, "decoded": agent.decoded, "dead_ends": agent.dead_ends}
    return tracker.result("gdp", seed, NodeSpace(task), info)
