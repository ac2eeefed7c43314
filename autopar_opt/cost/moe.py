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
* DeepEP (runtime ``moe_dispatcher`` ``deepep``): a token crosses the network
  once per target node, to the GPU of the same in-node index, which forwards
  it over NVLink to that node's target experts (DeepSeek-V3, arXiv 2412.19437,
  Sec. 3.2.2; the combine reverses it): the network carries the distinct
  remote nodes of a token's ``k`` experts instead of its remote copies
  (:func:`deepep_node_factor`), NVLink every copy.
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


def deepep_node_factor(experts: int, top_k: int, nodes: int) -> float:
    """Network bytes of DeepEP's dispatch over a plain all-to-all's, for ``experts``
    spread evenly over the ``nodes`` nodes of the expert-parallel group and each
    token's ``top_k`` distinct experts drawn uniformly (balanced routing).

    A plain all-to-all sends a token's remote copies, ``k·(N−1)/N`` on average;
    DeepEP sends it once per remote node holding one of its experts:
    ``(N−1)·(1 − P0)`` with ``P0 = C(E − E/N, k) / C(E, k)`` the chance that a
    given node holds none of them. 1 within one node. Example: 128 experts, top-8,
    4 nodes: 2.72 remote nodes against 6 remote copies, 0.45."""
    if nodes <= 1 or top_k <= 0 or experts <= 0:
        return 1.0
    k = min(top_k, experts)
    per = experts / nodes
    p0 = 1.0
    for i in range(k):
        p0 *= max(experts - per - i, 0.0) / (experts - i)
    return min(1.0, (nodes - 1) * (1.0 - p0) / (k * (nodes - 1) / nodes))


def alltoall_tiers_time(ctx: "StageContext", group: int, stride: int, nbytes: float,
                        net_factor: float = 1.0) -> float:
    """One all-to-all of ``nbytes`` per rank over ``group`` ranks spaced ``stride`` apart.

    Inside a node: ``(p−1)·α + (p−1)/p · m / β_intra``. Across nodes with
    ``k`` members per node: ``(p−1)·α_inter + max((k−1)/p · m / β_intra,
    (p−k)/p · m / β_inter)`` (see the module docstring); ``β_inter`` is one GPU's
    share of its node's NICs (every rank sends at once:
    :attr:`~autopar_opt.ir.hardware.Cluster.inter_node_per_gpu`). ``net_factor``
    below 1 (DeepEP, :func:`deepep_node_factor`) scales the network share and
    sends every copy over NVLink too: ``max((p−1)/p · m / β_intra, f·(p−k)/p · m /
    β_inter)``. On a point-to-point NVLink board ``β_intra`` is the share of a GPU's
    links that reach the node's other members
    (:meth:`~autopar_opt.ir.hardware.Cluster.intra_share`).
    """
    if group <= 1 or nbytes <= 0:
        return 0.0
    cl = ctx.cluster
    eff, eff_inter = ctx.params.comm_efficiency, ctx.params.inter_comm_efficiency
    tier = ctx.tier(group * stride)
    if tier is cl.intra_node:
        return _pairwise(group, group, nbytes, tier, eff * cl.intra_share(group))
    per_node = max(1, min(group, cl.gpus_per_node // max(stride, 1)))
    nvlink_peers = group - 1 if net_factor < 1.0 else per_node - 1
    intra = nvlink_peers / group * nbytes \
        / (cl.intra_node.bytes_per_s * eff * cl.intra_share(per_node))
    inter = net_factor * (group - per_node) / group * nbytes \
        / (cl.inter_node_per_gpu.bytes_per_s * eff_inter)
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
    No exchange when ``ep = 1`` (every rank holds every expert). Under DeepEP
    (runtime ``moe_dispatcher`` ``deepep``) the network carries
    :func:`deepep_node_factor` of the remote copies.
    """
    if not layer.is_moe or s.ep <= 1:
        return 0.0
    share = ctx.microbatch_samples / (s.dp * s.cp)
    nbytes = layer.a2a_bytes * share * layer.expert_load / s.tp
    passes = 6 if s.recompute is Recompute.full else 4
    factor = 1.0
    if ctx.training.runtime.moe_dispatcher == "deepep":
        per_node = max(1, min(s.ep, ctx.cluster.gpus_per_node // max(s.expert_tp, 1)))
        factor = deepep_node_factor(layer.num_experts, layer.top_k, -(-s.ep // per_node))
    return passes * alltoall_tiers_time(ctx, s.ep, s.expert_tp, nbytes, factor)


def split_params(layer: Layer, s: Strategy) -> tuple[float, float]:
    """Parameters per device: (dense part over ``tp``, routed experts over ``etp·ep``)."""
    expert = layer.expert_params if layer.is_moe else 0
    return (layer.params - expert) / s.tp, expert / (s.expert_tp * s.ep)


def expert_stride(s: Strategy) -> int:
    """Rank stride of the expert-data-parallel group: ``etp·ep`` (expert ranks are
    ordered etp, then ep, then edp; Megatron-Core's expert rank generator)."""
    return s.expert_tp * s.ep
