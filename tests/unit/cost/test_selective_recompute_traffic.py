"""Selective recomputation re-runs the softmax and dropout of an unfused core (QA round 12).

Oracles: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models", Sec. 5: selective recomputation re-runs "the QKᵀ matrix multiply,
softmax, softmax dropout, and attention over V"; the cost model prices the two GEMMs
at the GEMM efficiency (:func:`~autopar_opt.cost.compute.kernel_time`) and the
element-wise kernels over the ``5·a·s²`` scores as one of ``elementwise_passes``' three
passes at HBM bandwidth, as it prices their first run. By hand for Korthikanti's 22B
layer (Table 4: s = 2048, h = 6144, a = 64, b = 4, t = 8, unfused 2022 Megatron-LM) on an
A100. Before the fix the backward re-ran the GEMMs only: the modelled selective overhead
of that layer's compute was 1.5%; Table 4 measures 19.6 -> 20.9 ms (+6.6%)."""

import pytest

from autopar_opt.cost.compute import compute_time, kernel_time
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.params import default_params
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Recompute, Training
from autopar_opt.model_zoo.transformer import transformer_block

S, H, A, B, T = 2048, 6144, 64, 4, 8


def _ctx(runtime: str) -> StageContext:
    cl = make_cluster("c", 1, 8, "A100-80GB")
    return StageContext(cl, Training(global_batch_size=B, seq_len=S, runtime=runtime_named(runtime)),
                        default_params(), 8, B)


def test_the_recomputed_core_by_hand():
    layer = transformer_block("b", S, H, A, 4 * H)             # scores stored (unfused)
    ctx = _ctx("megatron-lm")
    assert not ctx.training.runtime.flash_attention
    none = compute_time(layer, Strategy(dp=1, tp=T), ctx)
    sel = compute_time(layer, Strategy(dp=1, tp=T, recompute=Recompute.selective), ctx)
    p, dev = ctx.params, ctx.cluster.device
    core = 4 * S * S * H * B / T                               # QKᵀ and ·V, forward, per GPU
    gemms = kernel_time(core, ctx.half_peak_flops, p.efficiency_for(dev.name), p.efficiency_half_us)
    scores = 5 * A * S * S * B / T                             # bytes: softmax, mask, dropout output
    elementwise = p.elementwise_passes / 3 * scores / (dev.hbm_gb_per_s * 1e9)
    assert sel.fwd_s == pytest.approx(none.fwd_s)
    assert sel.bwd_s - none.bwd_s == pytest.approx(gemms + elementwise, rel=1e-9)
    assert elementwise > gemms          # the memory-bound part is the larger one here


def test_nothing_to_re_run_outside_a_fused_kernel():
    """Under FlashAttention the recomputation is the kernel (priced with the core)."""
    layer = transformer_block("b", S, H, A, 4 * H, flash_attention=True)
    ctx = _ctx("megatron-core")
    none = compute_time(layer, Strategy(dp=1, tp=T), ctx)
    sel = compute_time(layer, Strategy(dp=1, tp=T, recompute=Recompute.selective), ctx)
    assert sel.bwd_s > none.bwd_s       # the fused core's forward again, nothing element-wise
    assert sel.gemm_s == pytest.approx(none.gemm_s)
