"""GDP's placement policy network (Zhou et al. 2019, "GDP: Generalized Device Placement
for Dataflow Graphs", §3), for the per-node decoder.

* **Graph embedding**: GraphSAGE mean aggregators (Hamilton et al. 2017) over the unit
  graph (precedence and data edges, undirected), residual.
* **Placer**: a transformer over the units in ``σ`` order with Transformer-XL's
  segment-level recurrence (Dai et al. 2019): the sequence is cut into segments of
  ``segment`` units and each segment also attends to the previous segment's
  (gradient-stopped) states at the same layer. Because the memory of a segment is the
  previous segment's input to the layer, all segments of a layer run as one batch, so
  time and memory are linear in the number of units.
* **Superposition** (GDP §3.3, after Cheung et al. 2019): a conditioning network ``c``
  of the graph summary ``x0`` (mean embedding and mean raw features) gates every placer
  layer, ``x_{l+1} = g_l(c_l(x0) ⊙ x_l)`` with ``c_l = 1 + tanh(·)``, so one set of
  weights serves many graphs and fine-tuning can adapt ``c`` to one graph.
* **Head**: one logit per (unit, device) from ``[h_u, e_d, pair_ud]`` (an MLP whose first
  layer is split per input, so the cost is ``O(m·D·H)``), plus a **prior** with two
  learned scales: ``−2·|pair_0|`` (distance from a compute-balanced split along ``σ``;
  scale 3 at first) and ``−pair_1`` (log slowdown on that device; scale 0.5 at first: a
  slow host is still worth filling under max-load while it stays below the others, which
  the state term ``s3`` watches; at 3 the policy never tried the host, and on bert_l-6
  the optimum puts 18 units there). The MLP's last layer starts at a tenth of its
  default scale, so an untrained policy is a balanced split.
* **State weights** ``W`` (3 numbers, see :func:`autopar_opt.learn.node_decoder.state_terms`),
  used by the decoder when ``state_terms`` is on (our addition to the paper's placer).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from autopar_opt.learn.gdp import SageLayer
from autopar_opt.learn.place_features import DEVICE_DIM, NODE_DIM, PAIR_DIM, PlaceFeatures


@dataclass(frozen=True)
class PolicyConfig:
    """Shape of the network (saved with the weights)."""

    hidden: int = 64
    sage_layers: int = 2
    attn_layers: int = 2
    heads: int = 4
    segment: int = 128
    superposition: bool = True
    state_terms: bool = True

    def to_dict(self) -> dict:
        return asdict(self)


class SegmentBlock(nn.Module):
    """Transformer layer over a batch of segments, each attending to [previous segment, itself]."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(dim, 2 * dim), nn.ReLU(), nn.Linear(2 * dim, dim))
        self.n1, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        """``x``: (S, L, H) segments; ``pad``: (S, 2L) keys to ignore."""
        memory = torch.cat([x.new_zeros(1, *x.shape[1:]), x[:-1]]).detach()
        kv = torch.cat([memory, x], dim=1)
        x = self.n1(x + self.attn(x, kv, kv, key_padding_mask=pad, need_weights=False)[0])
        return self.n2(x + self.ff(x))


@dataclass
class GraphInput:
    """A graph's features as tensors (built once per graph)."""

    node: torch.Tensor
    device: torch.Tensor
    pair: torch.Tensor
    src: torch.Tensor
    dst: torch.Tensor
    deg: torch.Tensor

    @classmethod
    def of(cls, f: PlaceFeatures) -> "GraphInput":
        import numpy as np

        m = len(f.node)
        src = np.concatenate([f.edges[:, 0], f.edges[:, 1]])
        dst = np.concatenate([f.edges[:, 1], f.edges[:, 0]])
        deg = np.maximum(np.bincount(dst, minlength=m), 1).astype(np.float32)
        return cls(torch.from_numpy(f.node), torch.from_numpy(f.device),
                   torch.from_numpy(f.pair), torch.from_numpy(src), torch.from_numpy(dst),
                   torch.from_numpy(deg).unsqueeze(1))


class PlacementPolicy(nn.Module):
    """The network of the module docstring: ``forward(graph) -> (m, D)`` logits."""

    def __init__(self, config: PolicyConfig | None = None) -> None:
        super().__init__()
        c = self.config = config or PolicyConfig()
        h = c.hidden
        self.embed = nn.Linear(NODE_DIM, h)
        self.sage = nn.ModuleList(SageLayer(h) for _ in range(c.sage_layers))
        self.blocks = nn.ModuleList(SegmentBlock(h, c.heads) for _ in range(c.attn_layers))
        self.condition = nn.Sequential(nn.Linear(h + NODE_DIM, h), nn.ReLU(),
                                       nn.Linear(h, h * (c.attn_layers + 1)))
        self.device_embed = nn.Sequential(nn.Linear(DEVICE_DIM, h), nn.ReLU(), nn.Linear(h, h))
        self.head_node = nn.Linear(h, h)
        self.head_device = nn.Linear(h, h, bias=False)
        self.head_pair = nn.Linear(PAIR_DIM, h, bias=False)
        self.head_out = nn.Linear(h, 1)
        self.prior = nn.Parameter(torch.tensor([3.0, 0.5]))
        self.state_weights = nn.Parameter(torch.tensor([-2.0, 0.0, -6.0]))
        with torch.no_grad():
            self.head_out.weight.mul_(0.1)
            self.head_out.bias.zero_()

    def gates(self, x0: torch.Tensor, h: torch.Tensor) -> torch.Tensor | None:
        """Superposition gates ``(layers + 1, H)`` from the graph summary, or None when off."""
        if not self.config.superposition:
            return None
        summary = torch.cat([h.mean(0), x0.mean(0)])
        return (1 + torch.tanh(self.condition(summary))).view(-1, self.config.hidden)

    def forward(self, g: GraphInput) -> torch.Tensor:
        c = self.config
        h = self.embed(g.node)
        for layer in self.sage:
            h = h + layer(h, g.src, g.dst, g.deg)
        gates = self.gates(g.node, h)
        m, L = h.shape[0], c.segment
        S = -(-m // L)
        pad_rows = S * L - m
        x = torch.cat([h, h.new_zeros(pad_rows, h.shape[1])]) if pad_rows else h
        x = x.view(S, L, -1)
        pad = torch.zeros(S, 2 * L, dtype=torch.bool)
        pad[0, :L] = True                                   # the first segment has no memory
        if pad_rows:
            pad[-1, 2 * L - pad_rows:] = True
        for i, block in enumerate(self.blocks):
            if gates is not None:
                x = x * gates[i]
            x = block(x, pad)
        h = x.reshape(S * L, -1)[:m]
        if gates is not None:
            h = h * gates[-1]
        z = (self.head_node(h).unsqueeze(1) + self.head_device(self.device_embed(g.device))
             + self.head_pair(g.pair))
        prior = -2 * self.prior[0] * g.pair[..., 0].abs() - self.prior[1] * g.pair[..., 1]
        return self.head_out(torch.relu(z)).squeeze(-1) + prior

    def conditioning_parameters(self) -> list[nn.Parameter]:
        """What ``finetune="superposition"`` trains: the conditioning net, the head, the
        prior and the state weights (the embedding and the placer stay frozen)."""
        mods = [self.condition, self.head_node, self.head_device, self.head_pair, self.head_out]
        return [p for mod in mods for p in mod.parameters()] + [self.prior, self.state_weights]
