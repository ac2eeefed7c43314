"""MoE experts launched one GEMM per expert (runtime ``moe_grouped_gemm`` off, or
``moe_expert_kernels`` ``per_expert``), and the DeepEP dispatcher.

Oracles: Megatron-Core's ``SequentialMLP`` loops over its local experts, an up and a
down projection each, and Transformer Engine's ``GroupedLinear`` runs one cuBLAS GEMM
per expert (``multi_stream_cublas_gemm``), where the legacy ``GroupedMLP`` runs two
grouped GEMMs: ``2·(E/ep - 1)`` more forward kernels, twice as many backward, each
adding one ``τ_half`` of work at the large-GEMM efficiency (``_gemm_time``: ``t = (τ +
k·τ_half) / eff_max``), by hand; DeepEP's network bytes by hand from the routing
probabilities; the reading of a record's text by hand."""

import math

import pytest

from autopar_opt.calibration.reading.moe import moe_stack
from autopar_opt.cost import compute, moe
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


def _ctx(grouped: bool, kernels: str = "grouped") -> StageContext:
    cl = make_cluster("c", 1, 8, "A800-SXM4-80GB")
    tr = Training(global_batch_size=64, seq_len=8192,
                  runtime=runtime_named("megatron-core", moe_grouped_gemm=grouped,
                                        moe_expert_kernels=kernels))
    return StageContext(cl, tr, default_params(), 8, 1)


def test_sequential_experts_add_two_kernels_per_extra_local_expert():
    blk = _moe_block()
    seq, grp = _ctx(False), _ctx(True)
    assert compute.per_expert_kernels(blk, Strategy(dp=8, tp=1), seq.training.runtime) == 14
    assert compute.per_expert_kernels(blk, Strategy(dp=8, tp=1, ep=4), seq.training.runtime) == 2
    assert compute.per_expert_kernels(blk, Strategy(dp=8, tp=1, ep=8), seq.training.runtime) == 0
    assert compute.per_expert_kernels(blk, Strategy(dp=8, tp=1), grp.training.runtime) == 0
    # TE's grouped GEMM (the shipped megatron-core runtime): one GEMM per expert as well
    te = runtime_named("megatron-core")
    assert te.moe_grouped_gemm and te.moe_expert_kernels == "per_expert"
    assert compute.per_expert_kernels(blk, Strategy(dp=8, tp=1), te) == 14
    dense = decoder_block("d", 8192, ATTN, mlp=MlpDims(ffn=5504))
    assert compute.per_expert_kernels(dense, Strategy(dp=8, tp=1), seq.training.runtime) == 0
    p = default_params()
    half = p.efficiency_half_us * 1e-6 / p.efficiency_for("A800-SXM4-80GB")
    for s, extra in ((Strategy(dp=8, tp=1), 14), (Strategy(dp=8, tp=1, ep=4), 2)):
        a, b = compute.compute_time(blk, s, seq), compute.compute_time(blk, s, grp)
        assert a.fwd_s - b.fwd_s == pytest.approx(extra * half, rel=1e-9)
        assert a.bwd_s - b.bwd_s == pytest.approx(2 * extra * half, rel=1e-9)


def test_a_record_s_text_decides_grouped_gemm():
    rt = runtime_named("megatron-core")
    notes: list[str] = []
    off = moe_stack("Megatron-LM: --use-mcore-models; no overlap flags, no grouped GEMM", rt, notes)
    assert off.moe_grouped_gemm is False and any("SequentialMLP" in n for n in notes)
    notes.clear()
    on = moe_stack("Megatron-Core: --moe-grouped-gemm, --sequence-parallel", rt, notes)
    kernels = [n for n in notes if "dispatcher" not in n]      # the dispatcher is said apart
    assert on.moe_grouped_gemm is True and len(kernels) == 1 and "one cuBLAS GEMM per" in kernels[0]
    unstated = moe_stack("Megatron-Core r0.9", rt, notes)
    assert unstated.moe_grouped_gemm is True and any("not stated: taken" in n for n in notes)


def test_legacy_megatron_core_and_deepep_are_read_from_the_text():
    rt = runtime_named("megatron-core")
    notes: list[str] = []
    old = moe_stack("Megatron-LM with Megatron-Core core_v0.6.0: --moe-grouped-gemm", rt, notes)
    assert old.moe_expert_kernels == "grouped" and any("legacy GroupedMLP" in n for n in notes)
    new = moe_stack("Megatron-Core (main 1e057005): --moe-grouped-gemm, "
                       "--moe-token-dispatcher-type flex (DeepEP)", rt, notes)
    assert new.moe_expert_kernels == "per_expert" and new.moe_dispatcher == "deepep"
    assert moe_stack("Megatron-Core 0.12: --moe-grouped-gemm", rt, []).moe_expert_kernels \
        == "per_expert"                       # 0.12 is not 0.1


def test_deepep_sends_a_token_once_per_remote_node():
    """128 experts on 4 nodes (32 each), top-8: P(a node holds none of a token's 8) =
    C(96, 8) / C(128, 8); remote nodes reached 3·(1 - P0) against 8·3/4 = 6 remote
    copies of a plain all-to-all."""
    p0 = math.comb(96, 8) / math.comb(128, 8)
    assert moe.deepep_node_factor(128, 8, 4) == pytest.approx(3 * (1 - p0) / 6)
    assert 0.45 < moe.deepep_node_factor(128, 8, 4) < 0.46
    assert moe.deepep_node_factor(128, 8, 1) == 1.0          # one node: NVLink only
    assert moe.deepep_node_factor(8, 1, 2) == pytest.approx(1.0)   # top-1: nothing shared
    # priced: the network term of the all-to-all scales by the factor, NVLink carries
    # every copy (4 nodes of 8 GPUs, ep 32)
    cl = make_cluster("c", 4, 8, "H100-SXM-80GB")
    tr = Training(global_batch_size=64, seq_len=4096, runtime=runtime_named("megatron-core"))
    ctx = StageContext(cl, tr, default_params(), 32, 1)
    m, f = 1e9, moe.deepep_node_factor(128, 8, 4)
    plain = moe.alltoall_tiers_time(ctx, 32, 1, m)
    deep = moe.alltoall_tiers_time(ctx, 32, 1, m, f)
    lat = 31 * cl.inter_node.latency_s
    p = default_params()
    net = 24 / 32 * m / (cl.inter_node_per_gpu.bytes_per_s * p.inter_comm_efficiency)
    assert plain - lat == pytest.approx(net)
    assert deep - lat == pytest.approx(max(f * net, 31 / 32 * m / (cl.intra_node.bytes_per_s
                                                                   * p.comm_efficiency)))


def test_torchtitan_runs_its_experts_as_one_grouped_kernel():
    """torchtitan 0.3's GroupedExperts calls torch._grouped_mm once per projection for every
    local expert (models/common/moe.py): no per-expert kernel, unlike TE's GroupedLinear."""
    blk = _moe_block()
    titan = runtime_named("torchtitan")
    assert titan.moe_grouped_gemm and titan.moe_expert_kernels == "grouped"
    assert compute.per_expert_kernels(blk, Strategy(dp=8, tp=1), titan) == 0
    assert compute.per_expert_kernels(blk, Strategy(dp=8, tp=1),
                                      runtime_named("torchtitan", moe_expert_kernels="per_expert")) == 14


def test_torchtitan_plans_state_the_flexattention_assumption():
    from autopar_opt.cost.assumptions import TORCHTITAN_FLEX, cost_assumptions
    from autopar_opt.model_zoo.registry import build_model, get_cluster

    graph, cluster = build_model("debug-moe"), get_cluster("debug-2x4")
    titan = Training(global_batch_size=8, seq_len=1024, runtime=runtime_named("torchtitan"))
    mcore = Training(global_batch_size=8, seq_len=1024, runtime=runtime_named("megatron-core"))
    assert TORCHTITAN_FLEX in cost_assumptions(graph, cluster, titan)
    assert TORCHTITAN_FLEX not in cost_assumptions(graph, cluster, mcore)
    assert "FlexAttention" in TORCHTITAN_FLEX
