"""Per-layer, per-strategy costs: the pure heart of the cost model (v2).

:func:`layer_cost` assembles one (layer, strategy) price from the four parts of
the model: where the layer runs (:mod:`~autopar_opt.cost.context`), its compute
(:mod:`~autopar_opt.cost.compute`), its communication and what of it is exposed
(:mod:`~autopar_opt.cost.comm`), and its memory (:mod:`~autopar_opt.cost.memory`,
with the weights and optimizer state of :mod:`~autopar_opt.cost.state`).

Everything is for one device of a pipeline stage and one micro-batch of
``microbatch_samples`` samples (split over the layer's data-parallel degree),
except :attr:`LayerCost.sync_s`, which is paid once per iteration.

Overlap is physics, not a fraction: every communication is either exposed or
hidden behind a named compute window, ``exposed = max(0, comm - window)``
(:func:`~autopar_opt.cost.comm.exposed`). Which windows exist is the runtime's capability
(:mod:`autopar_opt.ir.runtime`):

* data-parallel reduce-scatter/all-reduce: behind the backward pass of the
  last micro-batch (gradient buckets; one bucket per layer), only with
  ``grad_reduce_overlap``; the distributed optimizer's parameter all-gather
  behind the next forward with ``param_gather_overlap``;
* ZeRO-3/FSDP gathers: behind the neighbouring layer's compute (prefetch)
  with ``fsdp_prefetch``, else exposed;
* tensor-parallel collectives: exposed unless ``tp_comm_overlap`` (then
  behind the layer's GEMMs);
* context-parallel K/V exchange: behind the attention core (ring attention);
* pipeline sends: exposed (:mod:`autopar_opt.cost.reshard`).

Every window is the layer's own compute under its own strategy, so each term
is a number per (layer, strategy): the MILP/MIQP and the DPs read it from the
cost tables unchanged and ``evaluate(plan)`` equals their objective exactly.
"""

from __future__ import annotations

from autopar_opt.cost import fsdp_copies, moe, offload, tp_replicated
from autopar_opt.cost import overlap
from autopar_opt.cost.comm import (accumulates_unsharded, cp_comm, gradient_sync, logits_gather_time,
                                   reshards_after_forward, sp_regather_time, tie_sync_time,
                                   tp_comm_time, zero2_microbatch_comm, zero3_bytes, zero3_comm,
                                   zero3_sync)
from autopar_opt.cost.compute import autocast_weight_time, compute_time, grad_accumulate_time
from autopar_opt.cost.context import Compute, LayerCost, StageContext
from autopar_opt.cost.memory import activation_bytes, working_set_bytes
from autopar_opt.cost.state import (autocast_saved_cast_bytes, held_layer, weight_bytes,
                                    weight_parts)
from autopar_opt.ir.graph import Layer
from autopar_opt.ir.strategies import Strategy


def unsharded_held_parts(layer: Layer, s: Strategy, ctx: StageContext
                         ) -> tuple[float, float, float]:
    """(weights stored once per stage, gradients stored once per stage, bytes
    stored per in-flight micro-batch) of a
    ZeRO-3/FSDP layer that does not reshard after its forward pass
    (:func:`~autopar_opt.cost.comm.reshards_after_forward` False): its gathered
    parameters stay on the device from the forward to the backward pass of
    each micro-batch (FSDP2 ``reshard_after_forward=False``: "the parameters are
    not resharded after forward ... the backward does not all-gather",
    ``torch.distributed.fsdp.fully_shard`` docstring), so with one pipeline
    stage they are held per micro-batch in flight; under pipelining they stay
    unsharded for the whole iteration together with the unsharded gradients
    accumulated over the micro-batches (:func:`~autopar_opt.cost.comm.zero3_sync`),
    held once. (0, 0) for a layer that reshards (its transient gather is in the
    working set, :func:`~autopar_opt.cost.memory.working_set_bytes`).

    A runtime that turns gradient sync off until the last micro-batch
    (:func:`~autopar_opt.cost.comm.accumulates_unsharded`) holds every layer's
    unsharded gradient in the reduce dtype from its first micro-batch's backward
    to the last one's reduce-scatter, once per stage, in place of the sharded
    gradient :func:`~autopar_opt.cost.state.weight_parts` counts (the sharded
    gradient is set to None by ``zero_grad`` and written only as the last
    backward reduce-scatters, layer by layer, each freeing its unsharded one:
    the peak holds the unsharded gradients alone)."""
    if s.zero < 3 or s.dp * s.cp <= 1 or layer.params <= 0:
        return 0.0, 0.0, 0.0
    w_bytes, g_bytes = zero3_bytes(ctx.training)
    dense, expert = moe.split_params(layer, s)
    gathered = dense + (expert if s.shard_group(s.edp) > 1 else 0.0)
    if accumulates_unsharded(s, ctx):
        sharded = weight_parts(layer, s, ctx.training)[1]     # ``layer`` is held_layer's
        held = (dense + expert) * g_bytes - sharded
        kept = 0.0 if reshards_after_forward(ctx) else gathered * w_bytes
        return 0.0, max(held, 0.0), kept
    if reshards_after_forward(ctx):
        return 0.0, 0.0, 0.0
    if ctx.pipelined:
        return gathered * w_bytes, gathered * g_bytes, 0.0
    return 0.0, 0.0, gathered * w_bytes


def unsharded_held_bytes(layer: Layer, s: Strategy, ctx: StageContext) -> tuple[float, float]:
    """(stored once per stage, stored per in-flight micro-batch) bytes of
    :func:`unsharded_held_parts`."""
    w, g, per = unsharded_held_parts(layer, s, ctx)
    return w + g, per


def layer_cost(layer: Layer, s: Strategy, ctx: StageContext) -> LayerCost:
    """All costs of ``layer`` under ``s`` in stage context ``ctx``.

    Hidden communication is not free: NCCL kernels occupy SMs and HBM
    bandwidth while they overlap compute, which slows the compute by
    ``comm_interference`` x the hidden time (NCCL runs one CTA per channel on
    its own SMs; Jeaugey, NCCL 2.0, GTC 2017; the slowdown of overlapped
    GEMMs is measured in Rashidi et al. 2021 and Wang et al. 2022; the value,
    18.9%, is Lee et al. 2025's average, :attr:`CostParams.comm_interference`).
    It applies to the NCCL collectives hidden here (ZeRO-3/FSDP gathers and
    reduce-scatters, context-parallel sends, the data-parallel reduction in
    ``sync_s``, Megatron's asynchronous input-gradient TP collectives behind the
    weight-gradient GEMMs and its sequence-parallel input re-gathers behind the
    input-gradient GEMMs), not to tensor-parallel overlap, whose mechanism prices its
    own SM share (Transformer Engine's SM margin) or runs on copy engines
    (async TP, :mod:`autopar_opt.cost.overlap`), nor to offload copies (copy
    engines). MoE
    token all-to-alls (:func:`autopar_opt.cost.moe.alltoall_comm_time`) are
    exposed: they sit between the router and the experts. With ``pp > 1``
    (``ctx.tie_tier``) an output layer tied to the input embedding keeps its
    own copy (:func:`~autopar_opt.cost.state.held_layer`: memory, ZeRO
    traffic, gradient reduction and optimizer step of the copy), and both
    ends of the tie pay the tied-gradient all-reduce (:func:`tie_sync_time`).
    DeepSpeed's ``BF16_Optimizer`` adds each micro-batch's 16-bit gradients
    into its fp32 accumulator (:func:`grad_accumulate_time`), and PyTorch AMP
    casts the fp32 weights and accumulates fp32 gradients every micro-batch
    (:func:`autocast_weight_time`), and FSDP2 copies each gathered unit and each
    gradient between its flat buffers and the parameters' own tensors
    (:func:`autopar_opt.cost.fsdp_copies.copy_time`), all part of ``compute_s``.
    """
    useful = tp_replicated.useful_share(layer, s, ctx)
    layer = tp_replicated.view(layer, s, ctx)
    comp = compute_time(layer, s, ctx)
    declared, tie_active = layer, ctx.tie_tier is not None
    layer = held_layer(layer, tie_active)
    k = ctx.params.comm_interference
    tp_raw = tp_comm_time(layer, s, ctx)
    tp_exp = overlap.tp_exposed(layer, s, ctx, comp, tp_raw)
    rg_raw = sp_regather_time(layer, s, ctx)
    rg_exp, rg_hidden = overlap.regather_cost(layer, s, ctx, comp, rg_raw)
    logits = logits_gather_time(layer, s, ctx)
    tp_nccl = overlap.tp_nccl_hidden(s, ctx, tp_raw, tp_exp)
    tp = tp_exp + rg_exp + logits + k * (tp_nccl + rg_hidden)
    cp_raw, cp_exp, cp_merge = cp_comm(layer, s, ctx, comp)
    cp = cp_exp + cp_merge
    z3_raw, z3 = zero3_comm(layer, s, ctx, comp)
    z2_raw, z2 = zero2_microbatch_comm(layer, s, ctx, comp)
    z3_raw, z3 = z3_raw + z2_raw, z3 + z2          # per micro-batch ZeRO traffic, one breakdown term
    ep = moe.alltoall_comm_time(layer, s, ctx)
    dp, dp_hidden, step = gradient_sync(layer, s, ctx, comp)
    z3_once, z3_once_hidden = zero3_sync(layer, s, ctx, comp)
    dp += tie_sync_time(layer, s, ctx) + z3_once
    dp_hidden += z3_once_hidden
    accum = grad_accumulate_time(layer, s, ctx) + autocast_weight_time(declared, layer, s, ctx) \
        + fsdp_copies.copy_time(layer, s, ctx)
    act = activation_bytes(layer, s, ctx.microbatch_samples, training=ctx.training)
    casts = autocast_saved_cast_bytes(declared, s, ctx.training)
    f_off = offload.offloaded_fraction(layer, ctx.training)
    off_raw, off = offload.transfer_time(f_off * act, ctx.cluster.device, comp.fwd_s, comp.bwd_s)
    held = unsharded_held_bytes(layer, s, ctx)
    # NCCL kernels on SMs (docstring), each charged to the traffic that hides: the
    # context-parallel sends' share in the CP term, the ZeRO gathers' in the ZeRO term
    cp_slow, z3_slow = k * (cp_raw - cp_exp), k * (z3_raw - z3)
    comm = tp + cp + z3 + ep + off + cp_slow + z3_slow
    return LayerCost(
        time_s=comp.total_s + accum + comm,
        compute_s=comp.total_s + accum,
        comm_s=comm,
        sync_s=dp + k * dp_hidden + step,
        weight_bytes=weight_bytes(declared, s, ctx.training, tie_active) + held[0],
        act_bytes=act * (1.0 - f_off) + casts + held[1],
        flops=comp.flops * useful,
        hw_flops=comp.hw_flops,
        tp_exposed_s=tp, cp_exposed_s=cp + cp_slow, zero_exposed_s=z3 + z3_slow, ep_exposed_s=ep,
        dp_exposed_s=dp + k * dp_hidden, optimizer_s=step, offload_exposed_s=off,
        working_bytes=working_set_bytes(declared, s, ctx.microbatch_samples, ctx.training,
                                        tie_active),
        **_tp_split(layer, s, ctx, comp, (tp_raw, tp_exp, rg_raw, rg_exp, logits),
                    k * (tp_nccl + rg_hidden)),
        cp_total_s=cp_raw + cp_merge, cp_hidden_s=cp_raw - cp_exp, cp_interference_s=cp_slow,
        zero_total_s=z3_raw, zero_hidden_s=z3_raw - z3, zero_interference_s=z3_slow,
        ep_total_s=ep, offload_total_s=off_raw, offload_hidden_s=off_raw - off,
        dp_total_s=dp + dp_hidden, dp_hidden_s=dp_hidden, dp_interference_s=k * dp_hidden,
    )


def _tp_split(layer: Layer, s: Strategy, ctx: StageContext, comp: Compute, times: tuple,
              nccl_slow: float) -> dict[str, float]:
    """The TP figures of :class:`LayerCost` (:mod:`autopar_opt.cost.comm_split`) from the
    times ``layer_cost`` priced, ``(collectives, their exposed part, SP re-gathers, their
    exposed part, logits gather)``: the whole is all three; the hidden part what the overlap
    left unexposed of the first two, without the SM margin Transformer Engine's user buffers
    add to the exposed parts (:func:`~autopar_opt.cost.overlap.tp_sm_margin`,
    :func:`~autopar_opt.cost.overlap.regather_parts`: a compute slowdown, not traffic), which
    is interference with ``nccl_slow`` (``comm_interference`` x the hidden NCCL traffic)."""
    tp_raw, tp_exp, rg_raw, rg_exp, logits = times
    tp_margin = overlap.tp_sm_margin(layer, s, ctx, comp, tp_raw)
    rg_margin = overlap.regather_parts(layer, s, ctx, comp, rg_raw)[1] or 0.0
    hidden = (tp_raw - (tp_exp - tp_margin)) + (rg_raw - (rg_exp - rg_margin))
    return {"tp_total_s": tp_raw + rg_raw + logits, "tp_hidden_s": hidden,
            "tp_interference_s": nccl_slow + tp_margin + rg_margin}
