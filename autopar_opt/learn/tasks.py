"""Graph tasks for the GDP policy: one node per layer (or operator), one slot per choice.

A :class:`NodeTask` is what the graph policy sees: node features, the edges,
for every node the features of each slot it may take (a strategy of a layer
for the layer-strategy space, a device for placement) with a mask, and the
number of stage boundaries to place (``pp − 1`` for a layer configuration,
0 for placement). ``decode`` turns sampled slots (and boundary scores) into
a candidate of the problem, ``problem.price`` gives its value.

Feature sizes are fixed per problem kind, so one policy can be pre-trained
on several graphs of a kind and applied to a new one (Zhou et al. 2019, GDP,
Sec. 3.3 "generalisation").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from autopar_opt.learn.space import Candidate, LayerSpace

LAYER_NODE_DIM = 8
LAYER_SLOT_DIM = 11


@dataclass
class NodeTask:
    """One graph instance for the policy (see the module docstring)."""

    name: str
    problem: Any
    node_feats: np.ndarray        # [n, Fn]
    edges: np.ndarray             # [E, 2] node indices, u before v
    slot_feats: np.ndarray        # [n, A, Fs]
    slot_mask: np.ndarray         # [n, A] bool
    boundaries: int
    decode: Callable[[np.ndarray, np.ndarray], Any]
    #: a scale for rewards: values are divided by it (a lower bound or a typical value)
    scale: float

    @property
    def num_nodes(self) -> int:
        return len(self.node_feats)


def boundaries_from_scores(scores: np.ndarray, bits: np.ndarray, count: int) -> np.ndarray:
    """Stage index per node from sampled boundary bits, repaired to ``count`` boundaries.

    Node ``u > 0`` with bit 1 opens a new stage. Too many: keep the ``count``
    with the highest score; too few: add the highest-scoring unchosen nodes.
    The repair is deterministic, so the policy is still judged on its own
    sample."""
    n = len(scores)
    stage = np.zeros(n, dtype=int)
    if count <= 0:
        return stage
    order = np.argsort(-scores[1:], kind="stable") + 1
    chosen = [u for u in order if bits[u]][:count]
    if len(chosen) < count:
        chosen += [u for u in order if not bits[u]][:count - len(chosen)]
    for u in chosen:
        stage[u:] += 1
    return stage


def _layer_node_feats(space: LayerSpace) -> np.ndarray:
    graph = space.graph
    n = len(graph.layers)
    indeg, outdeg = np.zeros(n), np.zeros(n)
    for u, v in graph.edge_indices():
        outdeg[u] += 1
        indeg[v] += 1
    rows = []
    for u, layer in enumerate(graph.layers):
        rows.append([np.log1p(layer.flops_fwd) / 30, np.log1p(layer.params) / 25,
                     np.log1p(layer.act_bytes) / 25, np.log1p(layer.output_bytes) / 25,
                     np.log2(max(layer.max_tp, 1)) / 4, u / max(n - 1, 1), indeg[u] / 4, outdeg[u] / 4])
    return np.array(rows)


def layer_tasks(space: LayerSpace) -> list[NodeTask]:
    """One task per outer configuration of ``space`` (slots = that configuration's strategies)."""
    nodes = _layer_node_feats(space)
    edges = np.array(space.graph.edge_indices(), dtype=int).reshape(-1, 2)
    max_pp = max(a.tables.pp for a in space.arrays)
    max_c = max(a.tables.microbatches for a in space.arrays)
    tasks = []
    for ci, a in enumerate(space.arrays):
        t = a.tables
        n, k = a.time.shape
        finite = np.where(np.isinf(a.time), np.nan, a.time)
        lt = max(float(np.nanmin(finite, axis=1).mean()), 1e-12)
        cap, m = t.capacity_bytes, float(max(t.inflight))
        f = np.zeros((n, k, LAYER_SLOT_DIM))
        mask = np.arange(k)[None, :] < a.num_choices[:, None]
        f[..., 0] = np.nan_to_num(finite / lt, nan=0.0)
        f[..., 1] = a.sync / lt
        f[..., 2] = a.weight / cap
        f[..., 3] = m * a.act / cap
        for u, strats in enumerate(t.strategies):
            for j, s in enumerate(strats):
                f[u, j, 4:8] = (s.tp / t.devices_per_stage, s.zero / 3,
                                float(s.recompute.value != "none"), float(s.sp))
        f[..., 8] = t.pp / max_pp
        f[..., 9] = np.log2(t.microbatches + 1) / np.log2(max_c + 1)
        f[..., 10] = a.bound / space.reference_s

        def decode(slots: np.ndarray, stage: np.ndarray, ci: int = ci) -> Candidate:
            return Candidate(ci, stage.astype(int), slots.astype(int))

        tasks.append(NodeTask(f"{space.graph.name}:{space.configs[ci].label()}", space, nodes,
                              edges, f, mask, t.pp - 1, decode, a.bound))
    return tasks
