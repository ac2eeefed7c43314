"""Megatron's asynchronous input-gradient collective (QA round 12; runtime ``async_dgrad``).

Megatron-Core's ``LinearWithGradAccumulationAndAsyncCommunication.backward`` launches the
input-gradient all-reduce of a column-parallel GEMM (Shoeybi et al. 2019's ``f``; a
reduce-scatter under sequence parallelism) with ``async_op=True`` before the weight-gradient
GEMM and waits after it, so each of the block's two column-parallel GEMMs (QKV, MLP up)
hides its backward collective behind its own weight-gradient GEMM (the forward GEMM's FLOPs,
Narayanan et al. 2021 Sec. 5.1). Oracle, by hand from the model's own collective time:
one collective unit ``c`` = raw / 2 passes / 4 pairs; hidden = min(u, g_qkv) + min(u, g_fc1)
with u = 2c (an all-reduce) or c (a reduce-scatter); the hidden NCCL time slows the GEMMs by
``comm_interference`` x itself, as every hidden NCCL collective does."""

from __future__ import annotations

import pytest

from autopar_opt.cost.comm import sp_regather_time, tp_comm_time
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.runtime import RUNTIMES
from autopar_opt.ir.strategies import Strategy
from support.cost_ideal import h100_node_ctx

K = 0.2
F = 1e12


def _ctx(runtime: str, **caps) -> StageContext:
    return h100_node_ctx(runtime, K, **caps)


def _block(tp_bytes: float) -> Layer:
    # shares 1:1:2:2 (QKV, projection, MLP up, MLP down) of the forward GEMM FLOPs
    return Layer("b", kind=LayerKind.transformer_block, flops_fwd=F, flops_bwd=2 * F,
                 params=10**9, tp_comm_bytes=tp_bytes, max_tp=8,
                 tp_gemm_shares=(1.0, 1.0, 2.0, 2.0))


@pytest.mark.parametrize("sp", [False, True])
@pytest.mark.parametrize("tp_bytes", [4e8, 4e9])      # the collective shorter / longer than g
def test_megatron_core_hides_the_backward_column_parallel_collectives(sp, tp_bytes):
    layer = _block(tp_bytes)
    s = Strategy(dp=1, tp=8, sp=sp)
    ctx = _ctx("megatron-core", tp_comm_overlap=False)
    raw = tp_comm_time(layer, s, ctx)
    c = raw / 2 / 4
    gemm = F * 8 / 8 / 989e12                   # the stage's 8 samples over tp 8, dense bf16
    g_qkv, g_fc1 = gemm / 6, gemm * 2 / 6
    unit = c if sp else 2 * c
    hidden = min(unit, g_qkv) + min(unit, g_fc1)
    # under SP the backward re-gathers of the sharded QKV/fc1 inputs ride behind the
    # input-gradient GEMMs (tests/unit/cost/test_sp_regather.py): exposed beyond them, the
    # rest slowing them as hidden NCCL traffic
    r = sp_regather_time(layer, s, ctx) / 2
    assert (r > 0) == sp
    r_exp = max(0.0, r - g_qkv) + max(0.0, r - g_fc1)
    regather = r_exp + K * (2 * r - r_exp)
    got = layer_cost(layer, s, ctx).tp_exposed_s
    assert got == pytest.approx(raw - hidden + K * hidden + regather, rel=1e-9)
    # the stack without it (Megatron-LM 2020-22) keeps every collective exposed
    lm = layer_cost(layer, s, _ctx("megatron-lm")).tp_exposed_s
    assert lm == pytest.approx(raw + regather, rel=1e-12)
    # stated off, it is off
    off = _ctx("megatron-core", tp_comm_overlap=False, async_dgrad=False)
    assert layer_cost(layer, s, off).tp_exposed_s == pytest.approx(raw + regather, rel=1e-12)


def test_which_stacks_run_it():
    on = {name for name, rt in RUNTIMES.items() if rt.async_dgrad}
    assert on == {"megatron-core", "megatron-bridge"}


def test_the_output_layer_hides_its_backward_all_reduce_the_embedding_nothing():
    """Vocabulary-parallel layers (QA round 12 halved their TP traffic to once each way): the
    output layer is a ColumnParallelLinear, its backward input-gradient all-reduce hides
    behind its weight-gradient GEMM; the embedding's forward all-reduce has no window."""
    from autopar_opt.cost import compute
    from autopar_opt.model_zoo.transformer import embedding, lm_head

    ctx = _ctx("megatron-core", tp_comm_overlap=False)
    s = Strategy(dp=1, tp=8)
    head = lm_head("head", 2048, 4096, 32000, tied=False)
    raw = tp_comm_time(head, s, ctx)                      # the backward all-reduce alone
    g = compute.compute_time(head, s, ctx).gemm_fwd_s
    hidden = min(raw, g)
    assert hidden > 0
    assert layer_cost(head, s, ctx).tp_exposed_s == pytest.approx(raw - hidden + K * hidden,
                                                                  rel=1e-9)
    emb = embedding("embed", 2048, 4096, 32000)
    assert layer_cost(emb, s, ctx).tp_exposed_s == pytest.approx(tp_comm_time(emb, s, ctx),
                                                                 rel=1e-12)
