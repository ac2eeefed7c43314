"""Hand-derived checks of the pure cost model (each docstring shows the maths)."""

from __future__ import annotations


import pytest

from autopar_opt.cost.collectives import allgather_time, allreduce_time, p2p_time
from autopar_opt.cost.compute import kernel_time
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.memory import activation_bytes
from autopar_opt.cost.state import weight_bytes
from autopar_opt.cost.params import CostParams
from autopar_opt.cost.reshard import missing_fraction
from autopar_opt.cost.evaluate import pipeline_latency
from autopar_opt.ir.graph import Layer
from autopar_opt.ir.hardware import LinkTier, make_cluster
from autopar_opt.model_zoo.transformer import transformer_block
from autopar_opt.ir.strategies import Layout, Strategy
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.training import Recompute, Schedule, Training

IDEAL = CostParams(gemm_efficiency={}, efficiency_default=1.0, efficiency_half_us=0.0,
                   comm_efficiency=1.0, inter_comm_efficiency=1.0,
                   elementwise_passes=0.0, optimizer_bytes_per_param=0.0,
                   memory_reserve_gib=0.0, memory_fragmentation=0.0)


def ctx(devices=1, samples=1, params=IDEAL, nodes=1, gpn=8):
    cl = make_cluster("t", nodes, gpn, "A100-80GB")
    return StageContext(cl, Training(global_batch_size=samples, seq_len=1), params, devices, samples)


def test_kernel_time_saturation():
    """eff_max=0.5, half=20 µs, a kernel of 100 µs at peak: eff = 0.5·100/120, t = 240 µs."""
    flops = 312e12 * 100e-6
    assert kernel_time(flops, 312e12, 0.5, 20.0) == pytest.approx(240e-6, rel=1e-12)


def test_ring_collectives():
    """n=4, 1 GB, 100 GB/s, α=5 µs: all-reduce 2·3·5 µs + 2·(3/4)·10 ms = 15.03 ms;
    all-gather 3·5 µs + (3/4)·10 ms = 7.515 ms; p2p 5 µs + 10 ms."""
    tier = LinkTier("x", 100.0, 5.0)
    assert allreduce_time(4, 1e9, tier) == pytest.approx(0.01503, rel=1e-12)
    assert allgather_time(4, 1e9, tier) == pytest.approx(0.007515, rel=1e-12)
    assert p2p_time(1e9, tier) == pytest.approx(0.010005, rel=1e-12)
    assert allreduce_time(1, 1e9, tier) == 0.0


@pytest.mark.parametrize("zero,expected", [(0, 8e9), (1, 3.5e9), (2, 2.75e9), (3, 2e9)])
def test_zero_sharding_bytes(zero, expected):
    """1e9 params, tp=2 → 5e8 local; Adam 2+2+12 bytes (a runtime without an fp32
    gradient buffer); dp=4. Z0: 16·5e8; Z1: (2+2+12/4)·5e8; Z2: (2+(2+12)/4)·5e8;
    Z3: 16/4·5e8."""
    layer = Layer("x", params=10**9)
    s = Strategy(dp=4, tp=2, zero=zero)
    tr = Training(8, runtime=runtime_named("pytorch-fsdp"))
    assert weight_bytes(layer, s, tr) == pytest.approx(expected)


@pytest.mark.parametrize("zero,expected", [(0, 18e9), (1, 6e9 + 12e9 / 8)])
def test_fp32_gradient_buffer_bytes(zero, expected):
    """Megatron-LM docs/source/distrib_optimizer.md: bf16 params + fp32 grads +
    fp32 Adam = 2 + 4 + 12 = 18 bytes per parameter; with the distributed
    optimizer over d = 8 ranks 6 + 12/d. 1e9 params, tp = 1."""
    layer = Layer("x", params=10**9)
    tr = Training(8, dtype="bf16", runtime=runtime_named("megatron-lm"))
    assert weight_bytes(layer, Strategy(dp=8, tp=1, zero=zero), tr) == pytest.approx(expected)


def test_transformer_block_matches_korthikanti_and_narayanan():
    """s=2048, h=6144, a=64, f=4h, no biases: forward FLOPs 24·s·h² + 4·s²·h (Narayanan
    2021); activations s·h·(34 + 5·a·s/h) bytes (Korthikanti 2022 Eq. 1); with t=8:
    Eq. 2 s·h·(10 + 24/t + 5·a·s/(h·t)); Eq. 4 (sp) s·h/t·(34 + 5as/h); selective+sp
    34·s·h/t; full+sp 2·s·h/t."""
    s, h, a, t = 2048, 6144, 64, 8
    blk = transformer_block("b", s, h, a, 4 * h, biases=False)
    assert blk.flops_fwd == pytest.approx(24 * s * h * h + 4 * s * s * h)
    assert blk.flops_bwd == pytest.approx(2 * blk.flops_fwd)
    assert blk.act_bytes == pytest.approx(s * h * (34 + 5 * a * s / h))
    assert blk.params == 12 * h * h + 4 * h
    cases = {
        (False, Recompute.none): s * h * (10 + 24 / t + 5 * a * s / (h * t)),
        (True, Recompute.none): s * h / t * (34 + 5 * a * s / h),
        (True, Recompute.selective): 34 * s * h / t,
        (True, Recompute.full): 2 * s * h / t,
    }
    for (sp, rc), expected in cases.items():
        got = activation_bytes(blk, Strategy(dp=1, tp=t, sp=sp, recompute=rc), 1)
        assert got == pytest.approx(expected, rel=1e-12), (sp, rc)


def test_compute_time_with_ideal_efficiency():
    """Ideal device (eff 1, no saturation): a layer of f FLOPs forward on a
    micro-batch of 4 samples with dp=2, tp=2 on 4 devices runs f·4/4 forward
    and 2× that backward per device: t = 3f/peak; full recompute adds f/peak."""
    f = 1e12
    layer = Layer("x", flops_fwd=f, flops_bwd=2 * f, act_bytes=10.0, input_bytes=1.0)
    c = ctx(devices=4, samples=4)
    peak = 312e12
    assert layer_cost(layer, Strategy(dp=2, tp=2), c).time_s == pytest.approx(3 * f / peak)
    full = layer_cost(layer, Strategy(dp=2, tp=2, recompute=Recompute.full), c)
    assert full.time_s == pytest.approx(4 * f / peak)
    assert full.hw_flops == pytest.approx(4 * f) and full.flops == pytest.approx(3 * f)


def test_missing_fraction_cases():
    """dp2→tp2 (replicated): each rank holds half the batch, needs all → 1/2.
    tp2→dp2: holds all, needs half → 0. tp2·sp→tp2: holds half the sequence → 1/2.
    dp4→dp2·tp2: rank 1 holds batch [1/4,1/2), needs [0,1/2) → 1/4."""
    assert missing_fraction(Layout(2, 1), Layout(1, 2)) == pytest.approx(0.5)
    assert missing_fraction(Layout(1, 2), Layout(2, 1)) == pytest.approx(0.0)
    assert missing_fraction(Layout(1, 2, 1, True), Layout(1, 2)) == pytest.approx(0.5)
    assert missing_fraction(Layout(4, 1), Layout(2, 2)) == pytest.approx(0.25)
    assert missing_fraction(Layout(2, 2), Layout(2, 2)) == 0.0


def test_pipeline_latency_formula():
    """p=[1,2], o=[0.5], g=[0.1,0.3], c=4: 1+2+0.5 + 3·max(2,0.5) + 0.3 = 9.8.
    Interleaved v=2: 4·2 + (3.5-2)/2 + 0.3 = 9.05 (Narayanan 2021 Sec. 2.2.2)."""
    assert pipeline_latency([1, 2], [0.5], [0.1, 0.3], 4) == pytest.approx(9.8)
    # interleaved, v = 2: chunk stages 0.5 and 1, the send whole (0.5), bottleneck 1:
    # 1.5 + 0.5 + (4·2 - 1)·1 + 0.3 = 9.3 (Narayanan et al. 2021, Sec. 2.2.2)
    assert pipeline_latency([1, 2], [0.5], [0.1, 0.3], 4, Schedule.interleaved, 2) == pytest.approx(9.3)
    assert pipeline_latency([1.0], [], [0.2], 3) == pytest.approx(3.2)
