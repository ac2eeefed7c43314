"""Mixture-of-Experts terms of the cost model: expert parallelism (EP).

Kept apart from :mod:`autopar_opt.cost.layer_cost` so the dense model reads
unchanged; :func:`~autopar_opt.cost.layer_cost.layer_cost` calls these for
layers with routed experts (``Layer.is_moe``). Conventions
(:mod:`autopar_opt.ir.strategies`): the ``ep`` group is ``ep`` ranks spaced
``etp`` apart inside the stage; the experts' tensor-parallel degree is
``etp`` (``Strategy.expert_tp``, ``tp`` unless set); each expert is
replicated over ``edp = tp·cp·dp/(etp·ep)`` ranks.

Sources
-------
* Expert parallelism, token dispatch and combine by all-to-all: Lepikhin et
  al. 2021 (GShard), Sec. 2.2/3.1; Fedus et al. 2022 (Switch), Sec. 2.2;
  Megatron-Core ``MoEAlltoAllTokenDispatcher`` (dispatch + combine forward,
  the same two exchanges backward).
* All-to-all cost (pairwise exchange): ``(p−1)·α + (p−1)/p · m/β`` (Thakur,
  Rabenseifner & Gropp 2005, Sec. 4.4). Across nodes the off-node share of
  every rank's data crosses its NIC while the on-node share uses NVLink at
  the same time; the slower part binds (the split DeepSeek-V3 reports for its
  cross-node dispatch, arXiv 2412.19437, Sec. 3.2.2).
* Sharding: expert weights, gradients and optimizer state split over ``ep``
  (and ``tp``), ZeRO/distributed-optimizer sharding of expert state over the
  expert-data-parallel group ``edp`` (Megatron-Core distributed optimizer
  with ``expert_data_parallel_group``; Rajbhandari et al. 2020, Sec. 5).
* Load imbalance: the busiest rank's routed work is ``Layer.expert_load``
  times the average (1.0 = balanced; a padded capacity factor fixes it,
  Fedus et al. 2022, Sec. 2.1); synchronous EP waits for the busiest rank.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autopar_opt.ir.graph import Layer
from autopar_opt.ir.hardware import LinkTier
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Recompute

if TYPE_CHECKING:
    from autopar_opt.cost.context import StageContext


def busiest_flops(layer: Layer) -> tuple[float, float]:
    """Forward and backward FLOPs per sample of the busiest expert-parallel rank.

    The routed experts' part (``expert_flops_fwd``, backward 2x) is scaled by
    the load factor; everything else is as the layer states.
    """
    extra = layer.expert_flops_fwd * (layer.expert_load - 1.0) if layer.is_moe else 0.0
    return layer.flops_fwd + extra, layer.flops_bwd + 2.0 * extra


def busiest_act_bytes(layer: Layer) -> float:
    """Activation bytes per sample of the busiest rank (routed part scaled by the load)."""
    if not layer.is_moe:
        return layer.act_bytes
    return layer.act_bytes + layer.expert_act_bytes * (layer.expert_load - 1.0)


def alltoall_tiers_time(ctx: "StageContext", group: int, stride: int, nbytes: float) -> float:
    """One all-to-all of ``nbytes`` per rank over ``group`` ranks spaced ``stride`` apart.

    Inside a node: ``(p−1)·α + (p−1)/p · m / β_intra``. Across nodes with
    ``k`` members per node: ``(p−1)·α_inter + max((k−1)/p · m / β_intra,
    (p−k)/p · m / β_inter)`` (see the module docstring); ``β_inter`` is one GPU's
    share of its node's NICs (every rank sends at once:
    :attr:`~autopar_opt.ir.hardware.Cluster.inter_node_per_gpu`).
    """
    if group <= 1 or nbytes <= 0:
        return 0.0
    cl = ctx.cluster
    eff, eff_inter = ctx.params.comm_efficiency, ctx.params.inter_comm_efficiency
    tier = ctx.tier(group * stride)
    if tier is cl.intra_node:
        return _pairwise(group, group, nbytes, tier, eff)
    per_node = max(1, min(group, cl.gpus_per_node // max(stride, 1)))
    intra = (per_node - 1) / group * nbytes / (cl.intra_node.bytes_per_s * eff)
    inter = (group - per_node) / group * nbytes / (cl.inter_node_per_gpu.bytes_per_s * eff_inter)
    return (group - 1) * cl.inter_node.latency_s + max(intra, inter)


def _pairwise(group: int, peers: int, nbytes: float, tier: LinkTier, eff: float) -> float:
    return (peers - 1) * tier.latency_s + (group - 1) / group * nbytes / (tier.bytes_per_s * eff)


def alltoall_comm_time(layer: Layer, s: Strategy, ctx: "StageContext") -> float:
    """Token dispatch + combine of one micro-batch, forward and backward.

    Each rank sends its ``b/(dp·cp)`` samples' routed token copies
    (``a2a_bytes`` per sample, scaled by the load factor), split over the
    tensor-parallel ranks (sequence-parallel tokens; the tp all-gather is in
    ``tp_comm_bytes``). Four all-to-alls per micro-batch (dispatch and
    combine, forward and backward); full recomputation repeats the forward two.
    No exchange when ``ep = 1`` (every rank holds every expert).
    """
    if not layer.is_moe or s.ep <= 1:
        return 0.0
    share = ctx.microbatch_samples / (s.dp * s.cp)
    nbytes = layer.a2a_bytes * share * layer.expert_load / s.tp
    passes = 6 if s.recompute is Recompute.full else 4
    return passes * alltoall_tiers_time(ctx, s.ep, s.expert_tp, nbytes)


def split_params(layer: Layer, s: Strategy) -> tuple[float, float]:
    """Parameters per device: (dense part over ``tp``, routed experts over ``etp·ep``)."""
    expert = layer.expert_params if layer.is_moe else 0
    return (layer.params - expert) / s.tp, expert / (s.expert_tp * s.ep)


def expert_stride(s: Strategy) -> int:
    """Rank stride of the expert-data-parallel group: ``etp·ep`` (expert ranks are
    ordered etp, then ep, then edp; Megatron-Core's expert rank generator)."""
    return s.expert_tp * s.ep
