"""Per-layer, per-strategy costs: the pure heart of the cost model.

Everything is for one device of a pipeline stage and one micro-batch of
``microbatch_samples`` samples (split over the layer's data-parallel degree),
except :attr:`LayerCost.sync_s`, which is paid once per iteration.
"""

from __future__ import annotations

from dataclasses import dataclass

from autopar_opt.cost import moe
from autopar_opt.cost.comm import allgather_time, allreduce_time
from autopar_opt.cost.params import CostParams
from autopar_opt.graph import Layer
from autopar_opt.hardware import Cluster, LinkTier
from autopar_opt.strategies import Strategy
from autopar_opt.training import DTYPE_BYTES, OPTIMIZER_BYTES, Recompute, Training


@dataclass(frozen=True)
class StageContext:
    """Where a layer runs: a stage of ``devices`` ranks starting at ``first_rank``."""

    cluster: Cluster
    training: Training
    params: CostParams
    devices: int
    microbatch_samples: int
    first_rank: int = 0

    def tier(self, group_span: int) -> LinkTier:
        """Tier binding a group covering ``group_span`` consecutive ranks of the stage."""
        last = self.first_rank + max(group_span, 1) - 1
        return self.cluster.tier_for_span(self.first_rank, last)

    @property
    def stage_tier(self) -> LinkTier:
        return self.tier(self.devices)

    @property
    def peak_flops(self) -> float:
        return self.cluster.device.peak_flops(self.training.dtype)

    @property
    def capacity_bytes(self) -> float:
        """Usable memory per device: HBM minus the stated reserve."""
        return (self.cluster.device.hbm_gib - self.training.memory_reserve_gib) * 1024**3


@dataclass(frozen=True)
class LayerCost:
    """Cost of one layer under one strategy on one device.

    time_s : forward + backward (+ recomputation) time of one micro-batch,
        including the strategy's own per-micro-batch communication.
    compute_s, comm_s : the two parts of ``time_s`` (``comm_s`` is the exposed
        communication only).
    sync_s : once-per-iteration time (gradient reduction, optimizer step).
    weight_bytes : weights + gradients + optimizer state after sharding.
    act_bytes : activations kept for backward, per in-flight micro-batch.
    flops : model FLOPs of one micro-batch on this device (no recomputation).
    hw_flops : FLOPs actually executed (with recomputation).
    """

    time_s: float
    compute_s: float
    comm_s: float
    sync_s: float
    weight_bytes: float
    act_bytes: float
    flops: float
    hw_flops: float


def group_tier(ctx: StageContext, group: int, stride: int) -> LinkTier:
    """Link tier seen by a ring collective over ``group`` ranks spaced ``stride`` apart.

    Inside a node: the intra-node tier. Across nodes, NCCL runs one ring per
    NIC ("channels", Jeaugey, NCCL 2.0, GTC 2017; rail-optimised DGX SuperPOD
    topology, NVIDIA DGX A100 SuperPOD reference architecture 2020), so ``k``
    group members per node drive ``k`` NICs in parallel and each inter-node
    hop carries ``1/k`` of the ring's data: the per-rank ring bandwidth is
    ``min(intra, k · inter)``, the figure nccl-tests report as bus bandwidth
    (hierarchical all-reduce: Jia et al. 2018, Sec. 3.3). One member per node
    (e.g. the data-parallel ring of a tp=8 model) sees the plain NIC.
    """
    tier = ctx.tier(group * stride)
    cl = ctx.cluster
    if tier is cl.intra_node or group <= 1:
        return tier
    per_node = min(group, max(1, cl.gpus_per_node // max(stride, 1)))
    if per_node <= 1:
        return tier
    bw = min(cl.intra_node.bandwidth_gb_per_s, per_node * tier.bandwidth_gb_per_s)
    return LinkTier(f"{tier.name}x{per_node}", bw, tier.latency_us)


def kernel_time(flops: float, ctx: StageContext) -> float:
    """Time of ``flops`` FLOPs on one device.

    ``t = f / (peak · eff(τ))`` with ``eff(τ) = eff_max · τ / (τ + τ_half)`` and
    ``τ = f / peak`` (time at peak): large GEMMs reach ``eff_max``, small ones
    are latency bound (roofline saturation; Williams et al. 2009; the
    GEMM-size dependence of achieved TFLOP/s in Narayanan et al. 2021 Fig. 13).
    """
    if flops <= 0:
        return 0.0
    p = ctx.params
    tau = flops / ctx.peak_flops
    half = p.efficiency_half_us * 1e-6
    eff = p.efficiency_for(ctx.cluster.device.name) * tau / (tau + half)
    return tau / eff


def _compute_time(layer: Layer, s: Strategy, ctx: StageContext) -> tuple[float, float, float]:
    """(time, model FLOPs, hardware FLOPs) of one micro-batch on one device."""
    share = ctx.microbatch_samples / (s.dp * s.cp)   # samples (x sequence share) per device
    measured = layer.measured_for(s.tp) if layer.measured else None
    if measured is not None:
        fwd = measured.fwd_ms_per_sample * 1e-3 * share
        bwd = measured.bwd_ms_per_sample * 1e-3 * share
        extra = fwd if s.recompute is Recompute.full else 0.0
        flops = (layer.flops_fwd + layer.flops_bwd) * share / s.tp
        return fwd + bwd + extra, flops, flops
    per_dev = share / s.tp
    fwd, bwd = moe.busiest_flops(layer)      # = flops_fwd/bwd for dense layers
    f_fwd = fwd * per_dev
    f_bwd = bwd * per_dev
    core = min(layer.flops_recompute_selective * per_dev, f_fwd)   # attention core, forward
    if s.recompute is Recompute.full:
        f_re, core_re = f_fwd, core
    elif s.recompute is Recompute.selective:
        f_re, core_re = core, core
    else:
        f_re, core_re = 0.0, 0.0
    t = (_split_time(f_fwd, core, ctx) + _split_time(f_bwd, 2 * core, ctx)
         + _split_time(f_re, core_re, ctx))
    model = (layer.flops_fwd + layer.flops_bwd) * per_dev
    return t, model, model + f_re


def _split_time(flops: float, core: float, ctx: StageContext) -> float:
    """Time of ``flops`` of which ``core`` are attention-core FLOPs, priced at
    ``attention_efficiency`` times the GEMM efficiency (see CostParams)."""
    core = min(max(core, 0.0), flops)
    t = kernel_time(flops - core, ctx)
    if core > 0:
        t += kernel_time(core, ctx) / ctx.params.attention_efficiency
    return t


def _tp_comm_time(layer: Layer, s: Strategy, ctx: StageContext) -> float:
    """Tensor-parallel all-reduces of one micro-batch.

    Megatron: two all-reduces forward and two backward per block of
    ``2·b·s·h`` bytes (Shoeybi et al. 2019, Fig. 4); with sequence parallelism
    they become reduce-scatter + all-gather of the same total volume
    (Korthikanti et al. 2022, Sec. 4.2.2). Full recomputation repeats the
    forward ones.
    """
    if s.tp <= 1 or layer.tp_comm_bytes <= 0:
        return 0.0
    nbytes = layer.tp_comm_bytes * ctx.microbatch_samples / (s.dp * s.cp)
    passes = 3 if s.recompute is Recompute.full else 2
    return passes * allreduce_time(s.tp, nbytes, group_tier(ctx, s.tp, 1), ctx.params.comm_efficiency)


def _cp_comm_time(layer: Layer, s: Strategy, ctx: StageContext) -> float:
    """Context parallelism: all-gather K/V forward, all-gather + reduce-scatter of
    their gradients backward (ring attention; Liu et al. 2023; Megatron CP)."""
    if s.cp <= 1 or layer.cp_comm_bytes <= 0:
        return 0.0
    nbytes = layer.cp_comm_bytes / s.tp * ctx.microbatch_samples / s.dp
    return 3 * allgather_time(s.cp, nbytes, group_tier(ctx, s.cp, s.tp), ctx.params.comm_efficiency)


def _zero3_gather_time(layer: Layer, s: Strategy, ctx: StageContext) -> float:
    """ZeRO-3/FSDP per micro-batch: all-gather parameters for forward and for
    backward, reduce-scatter gradients (Rajbhandari et al. 2020, Sec. 7.2.2:
    3x the parameter volume)."""
    if s.zero < 3 or s.dp <= 1 or layer.params <= 0:
        return 0.0
    w_bytes = OPTIMIZER_BYTES[ctx.training.optimizer][0]
    dense, expert = moe.split_params(layer, s)   # MoE: experts gather over edp only
    eff = ctx.params.comm_efficiency
    t = allgather_time(s.dp * s.cp, dense * w_bytes, group_tier(ctx, s.dp * s.cp, s.tp), eff)
    if expert:
        t += allgather_time(s.edp, expert * w_bytes, group_tier(ctx, s.edp, s.tp * s.ep), eff)
    return 3 * t


def _sync_time(layer: Layer, s: Strategy, ctx: StageContext) -> float:
    """Once per iteration: gradient all-reduce over the dp×cp group (ZeRO-1/2 do
    reduce-scatter + all-gather, the same ring volume; ZeRO-3 reduced already)
    plus the optimizer step, bound by HBM bandwidth."""
    if layer.params <= 0:
        return 0.0
    p = ctx.params
    w_bytes, g_bytes, _ = OPTIMIZER_BYTES[ctx.training.optimizer]
    dense, expert = moe.split_params(layer, s)   # MoE: expert grads reduce over edp
    comm = shard = 0.0
    for local, group, stride in ((dense, s.dp * s.cp, s.tp), (expert, s.edp, s.tp * s.ep)):
        if local <= 0:
            continue
        if s.zero < 3 and group > 1:
            comm += allreduce_time(group, local * g_bytes, group_tier(ctx, group, stride),
                                   p.comm_efficiency) * (1.0 - p.dp_overlap)
        shard += local / group if s.zero >= 1 else local
    step = shard * p.optimizer_bytes_per_param / (ctx.cluster.device.hbm_gb_per_s * 1e9)
    return comm + step


def weight_bytes(layer: Layer, s: Strategy, training: Training) -> float:
    """Weights + gradients + optimizer state per device after sharding.

    ZeRO-1 shards optimizer state, ZeRO-2 also gradients, ZeRO-3 also weights,
    over the data-parallel group (Rajbhandari et al. 2020, Sec. 5, Fig. 1).
    MoE layers: :func:`autopar_opt.cost.moe.sharded_state_bytes`.
    """
    if layer.is_moe:
        return moe.sharded_state_bytes(layer, s, OPTIMIZER_BYTES[training.optimizer])
    w, g, o = OPTIMIZER_BYTES[training.optimizer]
    group = s.dp * s.cp
    local = layer.params / s.tp
    if s.zero >= 1:
        o /= group
    if s.zero >= 2:
        g /= group
    if s.zero >= 3:
        w /= group
    return local * (w + g + o)


def activation_bytes(layer: Layer, s: Strategy, microbatch_samples: int) -> float:
    """Activations kept for backward on one device for one micro-batch.

    Korthikanti et al. 2022: Eq. 2 (tensor parallel: the replicated part stays
    whole), Eq. 4 (sequence parallel: everything split by t), Sec. 5 (selective
    recomputation drops the attention-core term), Sec. 4.1 (full
    recomputation keeps only the layer input, split by t under sequence
    parallelism). Context parallelism splits the sequence by ``cp``.
    """
    share = microbatch_samples / (s.dp * s.cp)
    measured = layer.measured_for(s.tp) if layer.measured else None
    if measured is not None and measured.act_bytes_per_sample is not None \
            and s.recompute is Recompute.none:
        return measured.act_bytes_per_sample * share
    if s.recompute is Recompute.full:
        per = layer.input_bytes / (s.tp if s.sp else 1)
        return per * share
    act = moe.busiest_act_bytes(layer)        # = act_bytes for dense layers
    if s.recompute is Recompute.selective:
        act -= layer.act_attn_bytes
    repl = min(layer.act_replicated_bytes, act)
    split = act - repl
    per = split / s.tp + repl / (s.tp if s.sp else 1)
    return per * share


def layer_cost(layer: Layer, s: Strategy, ctx: StageContext) -> LayerCost:
    """All costs of ``layer`` under ``s`` in stage context ``ctx``."""
    compute, flops, hw_flops = _compute_time(layer, s, ctx)
    compute += ctx.params.layer_overhead_us * 1e-6
    tp = _tp_comm_time(layer, s, ctx)
    cp = _cp_comm_time(layer, s, ctx)
    z3 = _zero3_gather_time(layer, s, ctx)
    exposed_z3 = max(0.0, z3 - ctx.params.zero3_overlap * compute)
    comm = tp + cp + exposed_z3 + moe.alltoall_comm_time(layer, s, ctx)
    return LayerCost(
        time_s=compute + comm,
        compute_s=compute,
        comm_s=comm,
        sync_s=_sync_time(layer, s, ctx),
        weight_bytes=weight_bytes(layer, s, ctx.training),
        act_bytes=activation_bytes(layer, s, ctx.microbatch_samples),
        flops=flops,
        hw_flops=hw_flops,
    )
