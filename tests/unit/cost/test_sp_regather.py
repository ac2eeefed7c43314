"""Sequence parallelism's backward re-gather of the column-parallel inputs (runtime
``sp_input_regather``; QA round 12 finding 6).

Korthikanti et al. 2022, Sec. 4.2.2, and Megatron-Core's
``LinearWithGradAccumulationAndAsyncCommunication.backward``: under sequence parallelism
the QKV and first MLP GEMMs save only their sequence-sharded input and all-gather it again
in the backward pass for the weight gradient, launched with ``async_op=True`` before the
input-gradient GEMM and waited for after it. Oracle, by hand from the model's own
collective time: the re-gather moves what the forward pass's gathers move (one all-gather
per sub-block), each half hides behind its own input-gradient GEMM (the forward GEMM's
FLOPs), ``max(0, r - g)`` exposed and the hidden rest slowing the GEMM by
``comm_interference`` as any hidden NCCL traffic does; under Transformer Engine's user
buffers (its ``qkv_dgrad``/``fc1_dgrad`` bulk overlap) the communication kernels hold
16 SMs instead. PyTorch DTensor stacks keep the gathered tensor (what the matmul saves)
and gather nothing in the backward: whole inputs in memory instead."""

from __future__ import annotations

import pytest

from autopar_opt.cost.comm import collective, sp_regather_time
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.memory import activation_bytes
from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.runtime import RUNTIMES, runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Recompute, Training
from support.cost_ideal import h100_node_ctx
from model_zoo.transformer import transformer_block

K = 0.2
F = 1e12
PEAK = 989e12          # H100 SXM dense bf16: efficiency 1 in PARAMS


def _ctx(runtime: str, **caps) -> StageContext:
    return h100_node_ctx(runtime, K, **caps)


def _block(tp_bytes: float, kind: LayerKind = LayerKind.transformer_block) -> Layer:
    # shares 1:1:2:2 (QKV, projection, MLP up, MLP down) of the forward GEMM FLOPs
    experts = 8 if kind is LayerKind.moe_block else 0
    return Layer("b", kind=kind, flops_fwd=F, flops_bwd=2 * F, params=10**9,
                 tp_comm_bytes=tp_bytes, max_tp=8, tp_gemm_shares=(1.0, 1.0, 2.0, 2.0),
                 num_experts=experts)


def test_which_stacks_regather():
    on = {name for name, rt in RUNTIMES.items() if rt.sp_input_regather}
    assert on == {"megatron-lm", "megatron-core", "megatron-bridge", "deepspeed"}


def test_the_volume_is_one_forward_pass_of_gathers():
    ctx, s = _ctx("megatron-core"), Strategy(dp=1, tp=8, sp=True)
    nbytes = 4e8 * 8            # tp_comm_bytes per sample x the 8-sample micro-batch
    assert sp_regather_time(_block(4e8), s, ctx) == pytest.approx(
        collective(ctx, "all_gather", 8, 1, nbytes, 2), rel=1e-12)
    # a Mixture-of-Experts block re-gathers its attention input only (the experts save the
    # dispatcher's gathered tokens): half the volume in one message
    moe = _block(4e8, LayerKind.moe_block)
    assert sp_regather_time(moe, s, ctx) == pytest.approx(
        collective(ctx, "all_gather", 8, 1, nbytes / 2, 1), rel=1e-12)
    # recomputation changes nothing (the recomputed forward saves the shard again)
    full = Strategy(dp=1, tp=8, sp=True, recompute=Recompute.full)
    assert sp_regather_time(_block(4e8), full, ctx) == sp_regather_time(_block(4e8), s, ctx)
    # none without sequence parallelism, on a DTensor stack, or for a vocabulary layer
    assert sp_regather_time(_block(4e8), Strategy(dp=1, tp=8), ctx) == 0.0
    assert sp_regather_time(_block(4e8), s, _ctx("torchtitan")) == 0.0
    assert sp_regather_time(_block(4e8, LayerKind.lm_head), s, ctx) == 0.0


@pytest.mark.parametrize("tp_bytes", [4e6, 4e9])      # the gather shorter / longer than g
def test_each_half_hides_behind_its_input_gradient_gemm(tp_bytes):
    layer, s = _block(tp_bytes), Strategy(dp=1, tp=8, sp=True)
    gemm = F * 8 / 8 / PEAK                   # the stage's 8 samples over tp 8
    g_qkv, g_fc1 = gemm / 6, gemm * 2 / 6
    # NCCL kernels (no user buffers): exposed beyond each GEMM, the rest slows it by K
    on = _ctx("megatron-core", tp_comm_overlap=False)
    off = _ctx("megatron-core", tp_comm_overlap=False, sp_input_regather=False)
    r = sp_regather_time(layer, s, on) / 2
    exposed = max(0.0, r - g_qkv) + max(0.0, r - g_fc1)
    assert (exposed > 0) == (tp_bytes > 1e8)
    delta = layer_cost(layer, s, on).tp_exposed_s - layer_cost(layer, s, off).tp_exposed_s
    assert delta == pytest.approx(exposed + K * (2 * r - exposed), rel=1e-9)
    # Transformer Engine user buffers: the bulk dgrad overlap holds 16 of the 132 SMs
    on, off = _ctx("megatron-core"), _ctx("megatron-core", sp_input_regather=False)
    margin = 16 / (132 - 16) * (g_qkv + g_fc1)
    delta = layer_cost(layer, s, on).tp_exposed_s - layer_cost(layer, s, off).tp_exposed_s
    assert delta == pytest.approx(exposed + margin, rel=1e-9)


def test_a_moe_block_hides_it_behind_the_qkv_input_gradient_gemm_alone():
    layer, s = _block(4e10, LayerKind.moe_block), Strategy(dp=1, tp=8, sp=True)
    on = _ctx("megatron-core", tp_comm_overlap=False)
    off = _ctx("megatron-core", tp_comm_overlap=False, sp_input_regather=False)
    g_qkv = F / PEAK / 6
    r = sp_regather_time(layer, s, on)
    exposed = max(0.0, r - g_qkv)
    delta = layer_cost(layer, s, on).tp_exposed_s - layer_cost(layer, s, off).tp_exposed_s
    assert delta == pytest.approx(exposed + K * (r - exposed), rel=1e-9)


@pytest.mark.parametrize("per_projection, copies", [(False, 1.0), (True, 2.5)])
def test_dtensor_keeps_the_gathered_inputs_whole(per_projection, copies):
    """A Llama-like block (gated MLP, no dropout): its kept norm outputs feeding QKV and
    the MLP up GEMM are 2 x 2·s·h bytes (Korthikanti et al. 2022's count, split by t under
    SP). A DTensor stack keeps the gathered tensor each column-parallel matmul saves:
    whole, and one per input redistribution when every projection redistributes its own
    input (q, k, v, gate, up: 5 for the 2 sub-blocks, 2.5 copies)."""
    seq, h = 1024, 512
    block = transformer_block("b", seq, h, 8, 4 * h, kv_heads=2, gated_mlp=True,
                              flash_attention=True, dropout=False, biases=False)
    gin = 2 * (2 * seq * h)
    assert block.act_gemm_input_replicated_bytes == gin
    tp, mb = 4, 2
    s = Strategy(dp=1, tp=tp, sp=True)
    caps = dict(fused_projections=not per_projection, tp_input_per_projection=per_projection)
    dtensor = Training(8, mb, "bf16", runtime=runtime_named("pytorch-fsdp", **caps))
    megatron = Training(8, mb, "bf16", runtime=runtime_named("pytorch-fsdp", sp_input_regather=True,
                                                             **caps))
    kept = activation_bytes(block, s, mb, training=dtensor)
    sharded = activation_bytes(block, s, mb, training=megatron)
    assert kept - sharded == pytest.approx(gin * (copies - 1 / tp) * mb, rel=1e-12)
    # what the element-wise kernels read and write is not the NCCL-written copy
    assert activation_bytes(block, s, mb, training=dtensor, fp8_casts=False) == pytest.approx(
        activation_bytes(block, s, mb, training=megatron, fp8_casts=False), rel=1e-12)
    # without sequence parallelism the input is whole on both stacks already
    s1 = Strategy(dp=1, tp=tp)
    assert activation_bytes(block, s1, mb, training=dtensor) == pytest.approx(
        activation_bytes(block, s1, mb, training=megatron), rel=1e-12)
