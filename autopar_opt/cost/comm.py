"""Communication of one layer under one strategy, and how much of it is exposed.

Overlap is physics, not a fraction: every collective is either exposed or hidden
behind a named compute window, ``exposed = max(0, comm - window)``
(:func:`exposed`); which windows exist is the runtime's capability
(:mod:`autopar_opt.ir.runtime`). Tensor-parallel and context-parallel collectives
per micro-batch, ZeRO-3/FSDP gathers and reduce-scatters, the once-per-iteration
gradient synchronisation with the optimizer step (:func:`gradient_sync`), and the
tied-parameter synchronisation between the first and last stage. The α-β times of
the collectives themselves are in :mod:`autopar_opt.cost.collectives`."""

from __future__ import annotations

from autopar_opt.cost import moe
from autopar_opt.cost.collectives import allgather_time, allreduce_time
from autopar_opt.cost.context import Compute, StageContext
from autopar_opt.cost.state import reduced_grad_bytes, state_bytes
from autopar_opt.ir.graph import Layer
from autopar_opt.ir.hardware import LinkTier
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Recompute, Training, param_state_bytes


def exposed(comm: float, window: float) -> float:
    """Communication left on the critical path when it overlaps ``window``:
    ``max(0, comm - window)`` (the comm runs on its own stream/channels
    concurrently with the window's kernels)."""
    return max(0.0, comm - window)


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


def ring_link(ctx: StageContext, group: int, stride: int) -> tuple[LinkTier, float]:
    tier = group_tier(ctx, group, stride)
    return tier, ctx.link_efficiency(tier)


def tp_comm_time(layer: Layer, s: Strategy, ctx: StageContext) -> float:
    """Tensor-parallel collectives of one micro-batch (before overlap).

    Megatron: two all-reduces forward and two backward per block of
    ``2·b·s·h`` bytes (Shoeybi et al. 2019, Fig. 4); with sequence parallelism
    they become reduce-scatter + all-gather of the same total volume
    (Korthikanti et al. 2022, Sec. 4.2.2). Full recomputation repeats the
    forward ones.
    """
    if layer.tp_comm_bytes <= 0:
        return 0.0
    nbytes = layer.tp_comm_bytes * ctx.microbatch_samples / (s.dp * s.cp)
    passes = 3 if s.recompute is Recompute.full else 2
    if layer.is_moe and s.etp:
        # expert TP apart from TP: the block's attention half stays on the tp group, its
        # MoE half (the experts' gather/scatter of sequence-parallel tokens) runs over the
        # etp group, none at etp = 1 (Megatron-Core MoEAlltoAllTokenDispatcher: the tokens
        # are gathered over the expert-TP group only). The zoo's blocks split tp_comm_bytes
        # evenly between the two (model_zoo/blocks.py: 2·s·h each).
        half = nbytes / 2
        out = 0.0
        for group, share in ((s.tp, half), (s.expert_tp, half)):
            if group > 1:
                tier, eff = ring_link(ctx, group, 1)
                out += allreduce_time(group, share, tier, eff)
        return passes * out
    if s.tp <= 1:
        return 0.0
    tier, eff = ring_link(ctx, s.tp, 1)
    return passes * allreduce_time(s.tp, nbytes, tier, eff)


def cp_comm_time(layer: Layer, s: Strategy, ctx: StageContext) -> float:
    """Context parallelism: all-gather K/V forward, all-gather + reduce-scatter of
    their gradients backward (ring attention; Liu et al. 2023; Megatron CP)."""
    if s.cp <= 1 or layer.cp_comm_bytes <= 0:
        return 0.0
    nbytes = layer.cp_comm_bytes / s.tp * ctx.microbatch_samples / s.dp
    tier, eff = ring_link(ctx, s.cp, s.tp)
    return 3 * allgather_time(s.cp, nbytes, tier, eff)


def zero3_bytes(training: Training) -> tuple[float, float]:
    """Bytes per parameter ZeRO-3/FSDP moves unsharded: (gathered weight, reduced
    gradient). The weight in its state dtype (16-bit; fp32 under PyTorch AMP,
    :func:`~autopar_opt.ir.training.param_state_bytes`); the gradient in the same
    dtype, or 4 bytes with ``fp32_grad_reduce`` (FSDP ``reduce_dtype=float32``)."""
    w_bytes = param_state_bytes(training)[0]
    return w_bytes, (max(w_bytes, 4.0) if training.runtime.fp32_grad_reduce else w_bytes)


def zero3_comm(layer: Layer, s: Strategy, ctx: StageContext, comp: Compute
                ) -> tuple[float, float]:
    """ZeRO-3/FSDP per micro-batch: all-gather parameters for forward and for
    backward, reduce-scatter gradients (Rajbhandari et al. 2020, Sec. 7.2.2:
    3x the parameter volume). The reduce-scatter moves the gradient dtype:
    the weight bytes, or 4 with ``fp32_grad_reduce`` (FSDP
    ``reduce_dtype=float32``), priced as a ring all-gather of that many
    bytes (a ring reduce-scatter moves the same volume, Thakur et al. 2005).
    With prefetch the forward gather hides behind the forward
    compute of the neighbouring layer and the backward gather +
    reduce-scatter behind its backward (Zhao et al. 2023, Sec. 3.3); the
    neighbour is priced as this layer (a stack of equal layers). Returns
    (all gather/scatter time, exposed part)."""
    if s.zero < 3 or s.dp <= 1 or layer.params <= 0:
        return 0.0, 0.0
    w_bytes, g_bytes = zero3_bytes(ctx.training)
    dense, expert = moe.split_params(layer, s)   # MoE: experts gather over edp only
    tier, eff = ring_link(ctx, s.dp * s.cp, s.tp)
    etier, eeff = ring_link(ctx, s.edp, moe.expert_stride(s)) if expert else (tier, eff)

    def ring(nbytes_per_param: float) -> float:
        t = allgather_time(s.dp * s.cp, dense * nbytes_per_param, tier, eff)
        return t + (allgather_time(s.edp, expert * nbytes_per_param, etier, eeff) if expert else 0.0)

    gather, rs = ring(w_bytes), ring(g_bytes)
    if not ctx.training.runtime.fsdp_prefetch:
        return 2 * gather + rs, 2 * gather + rs
    return 2 * gather + rs, exposed(gather, comp.fwd_s) + exposed(gather + rs, comp.bwd_s)


def gradient_sync(layer: Layer, s: Strategy, ctx: StageContext, comp: Compute
          ) -> tuple[float, float, float]:
    """(exposed gradient reduction, its hidden part, optimizer step), once per iteration.

    Gradient reduction over the dp×cp group: a ring all-reduce, or with
    ZeRO-1/2 a reduce-scatter + all-gather of the same total volume (ZeRO-3
    reduced per micro-batch already). With ``grad_reduce_overlap`` the
    reduction of a layer's gradient bucket runs while the last micro-batch's
    backward continues: window = the layer's backward (one bucket per layer;
    PyTorch DDP, Li et al. 2020, Sec. 3.2.3; Megatron-Core
    ``--overlap-grad-reduce``); the all-gather of updated parameters hides
    behind the next forward with ``param_gather_overlap``. The step itself is
    HBM-bound: ``shard · bytes_per_param / HBM bandwidth``.
    """
    if layer.params <= 0:
        return 0.0, 0.0, 0.0
    p, rt = ctx.params, ctx.training.runtime
    w_bytes = state_bytes(ctx.training, s.zero)[0]
    g_bytes = reduced_grad_bytes(ctx.training, s.zero)
    dense, expert = moe.split_params(layer, s)   # MoE: expert grads reduce over edp
    comm = raw = shard = 0.0
    bwd_window = comp.bwd_s if rt.grad_reduce_overlap else 0.0
    fwd_window = comp.fwd_s if rt.param_gather_overlap else 0.0
    for local, group, stride in ((dense, s.dp * s.cp, s.tp), (expert, s.edp, moe.expert_stride(s))):
        if local <= 0:
            continue
        if s.zero < 3 and group > 1:
            tier, eff = ring_link(ctx, group, stride)
            if s.zero == 0:
                ar = allreduce_time(group, local * g_bytes, tier, eff)
                raw += ar
                comm += exposed(ar, bwd_window)
            else:
                rs = allgather_time(group, local * g_bytes, tier, eff)
                ag = allgather_time(group, local * w_bytes, tier, eff)
                raw += rs + ag
                comm += exposed(rs, bwd_window) + exposed(ag, fwd_window)
        shard += local / s.zero_divisors(group)[2]
    step = shard * p.optimizer_bytes_per_param / (ctx.cluster.device.hbm_gb_per_s * 1e9)
    if not rt.fused_optimizer:
        step *= p.unfused_optimizer_factor
    return comm, raw - comm, step


def tie_sync_time(layer: Layer, s: Strategy, ctx: StageContext) -> float:
    """The tied-gradient all-reduce between the first and the last pipeline
    stage, once per iteration, exposed (0 without a tie or with one stage).

    After the backward pass and the data-parallel reduction, the two copies
    of the word-embedding gradient are all-reduced over a 2-rank group, one
    per tensor-parallel rank (Megatron-Core ``finalize_model_grads``:
    ``_allreduce_word_embedding_grads`` all-reduces ``main_grad`` over the
    embedding group of the first and last stage; DeepSpeed
    ``PipelineModule.allreduce_tied_weight_gradients``, called by
    ``PipelineEngine._exec_reduce_tied_grads``). Nothing overlaps it: the
    optimizer step waits for it. Bytes: the layer's own tensor-parallel shard
    of the tied parameters in the gradient-reduction dtype
    (:func:`~autopar_opt.cost.state.reduced_grad_bytes`); the ring all-reduce
    of ``allreduce_time`` with 2 ranks over ``ctx.tie_tier``. Both ends of the
    tie pay it (the copy holder on the last stage, the owner on the first):
    the collective completes for both once the later of the two arrives, which
    is what adding it to each stage's once-per-iteration term gives under the
    ``max_i g_i`` of docs/DESIGN.md §3.
    """
    tier = ctx.tie_tier
    if tier is None or layer.tied_params <= 0:
        return 0.0
    nbytes = layer.tied_params / s.tp * reduced_grad_bytes(ctx.training, s.zero)
    return allreduce_time(2, nbytes, tier, ctx.link_efficiency(tier))
