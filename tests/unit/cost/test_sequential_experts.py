"""MoE experts run one after the other (runtime ``moe_grouped_gemm`` off).

Oracles: Megatron-Core's ``SequentialMLP`` loops over its local experts, an up and a
down projection each, where ``GroupedMLP`` runs two grouped GEMMs: ``2·(E/ep - 1)``
more forward kernels, twice as many backward, each adding one ``τ_half`` of work
at the large-GEMM efficiency (``_gemm_time``: ``t = (τ + k·τ_half) / eff_max``), by
hand; the reading of a record's text by hand."""

import pytest

from autopar_opt.calibration.reading.moe import grouped_gemm
from autopar_opt.cost import compute
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.params import default_params
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Training
from autopar_opt.model_zoo.blocks import AttentionDims, MlpDims, MoeDims, decoder_block

ATTN = AttentionDims(hidden=2048, heads=16, kv_heads=16, head_dim=128)


def _moe_block():
    return decoder_block("m", 8192, ATTN, moe=MoeDims(num_experts=8, top_k=2, expert_ffn=5504),
                         dropout=False)


def _ctx(grouped: bool) -> StageContext:
    cl = make_cluster("c", 1, 8, "A800-SXM4-80GB")
    tr = Training(global_batch_size=64, seq_len=8192,
                  runtime=runtime_named("megatron-core", moe_grouped_gemm=grouped))
    return StageContext(cl, tr, default_params(), 8, 1)


def test_sequential_experts_add_two_kernels_per_extra_local_expert():
    blk = _moe_block()
    seq, grp = _ctx(False), _ctx(True)
    assert compute.sequential_expert_kernels(blk, Strategy(dp=8, tp=1), seq.training.runtime) == 14
    assert compute.sequential_expert_kernels(blk, Strategy(dp=8, tp=1, ep=4), seq.training.runtime) == 2
    assert compute.sequential_expert_kernels(blk, Strategy(dp=8, tp=1, ep=8), seq.training.runtime) == 0
    assert compute.sequential_expert_kernels(blk, Strategy(dp=8, tp=1), grp.training.runtime) == 0
    dense = decoder_block("d", 8192, ATTN, mlp=MlpDims(ffn=5504))
    assert compute.sequential_expert_kernels(dense, Strategy(dp=8, tp=1), seq.training.runtime) == 0
    p = default_params()
    half = p.efficiency_half_us * 1e-6 / p.efficiency_for("A800-SXM4-80GB")
    for s, extra in ((Strategy(dp=8, tp=1), 14), (Strategy(dp=8, tp=1, ep=4), 2)):
        a, b = compute.compute_time(blk, s, seq), compute.compute_time(blk, s, grp)
        assert a.fwd_s - b.fwd_s == pytest.approx(extra * half, rel=1e-9)
        assert a.bwd_s - b.bwd_s == pytest.approx(2 * extra * half, rel=1e-9)


def test_a_record_s_text_decides_grouped_gemm():
    rt = runtime_named("megatron-core")
    notes: list[str] = []
    off = grouped_gemm("Megatron-LM: --use-mcore-models; no overlap flags, no grouped GEMM", rt, notes)
    assert off.moe_grouped_gemm is False and "SequentialMLP" in notes[-1]
    notes.clear()
    on = grouped_gemm("Megatron-Core: --moe-grouped-gemm, --sequence-parallel", rt, notes)
    assert on.moe_grouped_gemm is True and notes == []
    unstated = grouped_gemm("Megatron-Core r0.9", rt, notes)
    assert unstated.moe_grouped_gemm is True and "not stated: taken" in notes[-1]
