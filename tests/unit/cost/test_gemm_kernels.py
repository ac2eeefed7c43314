"""GEMMs priced per kernel (``compute.GEMM_KERNELS``): ``τ_half`` is the
work at which ONE GEMM kernel's efficiency halves (measured one GEMM at a time,
``benchmarks/kernels``), so a transformer block, which runs 4 GEMM kernels
forward (fused QKV, projection, MLP up, MLP down: Shoeybi et al. 2019 Sec. 3)
and 8 backward (input and weight gradient of each: Narayanan et al. 2021 Sec.
5.1), pays it 4 and 8 times. Before, the block paid it once per pass, and the
calibration pushed ``efficiency_half_us`` to its 60 µs bound (135 µs lifted =
(4 + 8)/2 x 22.5: benchmarks/calibration/HALFUS.md).

Oracle: ``kernel_time`` by hand, ``t = (τ + n·τ_half) / eff``, ``τ = f / peak``.
"""

from __future__ import annotations

import pytest

from autopar_opt.cost.compute import GEMM_KERNELS, compute_time, gemm_kernels
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.params import default_params
from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Recompute, Training
from support import paths

F = 4e11                  # forward FLOPs per sample
CORE = 0.1 * F            # attention core (priced by _attn_time, not a GEMM)


def _ctx():
    cl = make_cluster("c", 1, 8, "A100-80GB")
    p = default_params()
    return cl, p, StageContext(cl, Training(1, 1, "bf16"), p, 1, 1)


def _hand(f: float, kernels: int, cl, p) -> float:
    peak = cl.device.peak_flops("bf16")
    return (f / peak + kernels * p.efficiency_half_us * 1e-6) / p.efficiency_for(cl.device.name)


@pytest.mark.parametrize("recompute,extra", [(Recompute.none, 0), (Recompute.full, 1)])
def test_block_pays_the_per_kernel_latency_four_times_forward_eight_backward(recompute, extra):
    cl, p, ctx = _ctx()
    block = Layer("b", kind=LayerKind.transformer_block, flops_fwd=F, flops_bwd=2 * F,
                  flops_recompute_selective=CORE)
    got = compute_time(block, Strategy(dp=1, tp=1, recompute=recompute), ctx).gemm_s
    hand = _hand(F - CORE, 4, cl, p) + _hand(2 * F - 2 * CORE, 8, cl, p) \
        + extra * _hand(F - CORE, 4, cl, p)     # full recomputation re-runs the 4 forward GEMMs
    assert got == pytest.approx(hand, rel=1e-12)
    once = _hand(F - CORE, 1, cl, p) + _hand(2 * F - 2 * CORE, 1, cl, p) \
        + extra * _hand(F - CORE, 1, cl, p)
    assert got > once      # the old once-per-pass pricing is strictly cheaper


def test_a_single_gemm_layer_is_the_isolated_measurement():
    """A linear/output layer is one GEMM forward, two backward: its forward time is
    exactly ``kernel_time`` with one ``τ_half``, the quantity benchmarks/kernels measures."""
    cl, p, ctx = _ctx()
    head = Layer("h", kind=LayerKind.lm_head, flops_fwd=F, flops_bwd=2 * F)
    c = compute_time(head, Strategy(dp=1, tp=1), ctx)
    assert c.gemm_s == pytest.approx(_hand(F, 1, cl, p) + _hand(2 * F, 2, cl, p), rel=1e-12)
    assert gemm_kernels(head) == 1


def test_kernel_counts():
    assert GEMM_KERNELS[LayerKind.transformer_block] == 4 == GEMM_KERNELS[LayerKind.moe_block]
    assert GEMM_KERNELS[LayerKind.attention] + GEMM_KERNELS[LayerKind.mlp] == 4
    assert gemm_kernels(Layer("c", kind=LayerKind.conv, flops_fwd=1.0, flops_bwd=2.0)) == 1


def test_builders_count_the_kernels_their_blocks_launch():
    """Cross-attention adds Q, fused KV and output projections (4 + 3); MLA runs
    query down/up, KV down/up and the output projection (5) before its MLP's 2;
    an MoE block adds the router and, with shared experts, their up and down.
    Found by review: a T5 decoder block was priced with 4 kernels, not 7."""
    from autopar_opt.model_zoo.blocks import AttentionDims, MlpDims, MoeDims, decoder_block
    from autopar_opt.model_zoo.transformer import transformer_block

    plain = transformer_block("b", 128, 512, 8, 2048)
    cross = transformer_block("d", 128, 512, 8, 2048, cross_attention_len=64)
    assert gemm_kernels(plain) == 4 and gemm_kernels(cross) == 7
    gqa = AttentionDims(hidden=512, heads=8, kv_heads=2, head_dim=64)
    mla = AttentionDims(hidden=512, heads=8, kv_heads=8, head_dim=64, q_lora_rank=128,
                        kv_lora_rank=64, qk_nope_dim=32, qk_rope_dim=16, v_head_dim=32)
    dense = MlpDims(ffn=2048, gated=True)
    assert gemm_kernels(decoder_block("g", 128, gqa, mlp=dense)) == 4
    assert gemm_kernels(decoder_block("m", 128, mla, mlp=dense)) == 7
    routed = MoeDims(num_experts=8, top_k=2, expert_ffn=1024)
    shared = MoeDims(num_experts=8, top_k=2, expert_ffn=1024, shared_ffn=1024)
    assert gemm_kernels(decoder_block("e", 128, gqa, moe=routed)) == 5
    assert gemm_kernels(decoder_block("s", 128, mla, moe=shared)) == 5 + 1 + 2 + 2


# --------------------------------------------------- fused vs separate projections
def _rt(name: str):
    from autopar_opt.ir.runtime import RUNTIMES
    return RUNTIMES[name]


def test_a_llama_block_launches_seven_kernels_without_fused_projections():
    """Megatron-Core fuses QKV (``linear_qkv``) and SwiGLU's gate and up
    (``linear_fc1``): 4 forward + 8 backward GEMM kernels per block. Hugging Face
    Llama (q/k/v/o_proj, gate/up/down_proj) and torchtitan (wq/wk/wv/wo, w1/w2/w3)
    launch 7 forward + 14 backward. Oracle: ``t = (τ + n·τ_half) / eff`` by hand
    with n = 7 and 14 against 4 and 8 (the GQA block's FLOPs are the same)."""
    from autopar_opt.model_zoo.transformer import transformer_block
    cl = make_cluster("c", 1, 8, "H100-SXM-80GB")
    p = default_params()
    block = transformer_block("b", 1024, 2048, 16, 5632, kv_heads=4, gated_mlp=True,
                              flash_attention=True)
    core = block.flops_recompute_selective
    f = block.flops_fwd
    s = Strategy(dp=1, tp=1)
    peak = cl.device.peak_flops("bf16")
    eff = p.efficiency_for(cl.device.name)

    def hand(flops, n):
        return (flops / peak + n * p.efficiency_half_us * 1e-6) / eff

    for runtime, (kf, kb) in (("megatron-core", (4, 8)), ("torchtitan", (7, 14))):
        ctx = StageContext(cl, Training(1, 1024, "bf16", runtime=_rt(runtime)), p, 1, 2)
        assert gemm_kernels(block, ctx.training.runtime) == kf
        got = compute_time(block, s, ctx).gemm_s
        assert got == pytest.approx(hand(2 * (f - core), kf) + hand(2 * (2 * f - 2 * core), kb),
                                    rel=1e-12), runtime
    fused = StageContext(cl, Training(1, 1024, "bf16", runtime=_rt("megatron-core")), p, 1, 2)
    split = StageContext(cl, Training(1, 1024, "bf16", runtime=_rt("torchtitan")), p, 1, 2)
    # exactly 3 + 6 more kernel latencies, nothing else moves
    extra = compute_time(block, s, split).total_s - compute_time(block, s, fused).total_s
    assert extra == pytest.approx(9 * p.efficiency_half_us * 1e-6 / eff, rel=1e-9)


def test_unfused_counts_follow_each_architecture():
    """BERT's query/key/value: 6; T5's decoder with cross-attention (q, k, v, o
    twice, wi, wo): 10; HF GPT-2 fuses c_attn on every stack: 4; GPT-NeoX's
    query_key_value likewise; MoE blocks split their attention and shared
    experts' gate and up; MLA is five projections either way."""
    from autopar_opt.model_zoo.blocks import AttentionDims, MlpDims, MoeDims, decoder_block
    from autopar_opt.model_zoo.transformer import transformer_block
    split = _rt("torchtitan")
    assert not split.fused_projections and _rt("megatron-core").fused_projections
    assert gemm_kernels(transformer_block("e", 128, 512, 8, 2048), split) == 6
    assert gemm_kernels(transformer_block("d", 128, 512, 8, 2048, cross_attention_len=64),
                        split) == 10
    assert gemm_kernels(transformer_block("g", 128, 512, 8, 2048, model_fuses_qkv=True),
                        split) == 4
    gqa = AttentionDims(hidden=512, heads=8, kv_heads=2, head_dim=64)
    neox = AttentionDims(hidden=512, heads=8, kv_heads=8, head_dim=64, model_fuses_qkv=True)
    mla = AttentionDims(hidden=512, heads=8, kv_heads=8, head_dim=64, q_lora_rank=128,
                        kv_lora_rank=64, qk_nope_dim=32, qk_rope_dim=16, v_head_dim=32)
    dense, plain = MlpDims(ffn=2048, gated=True), MlpDims(ffn=2048, gated=False)
    assert gemm_kernels(decoder_block("l", 128, gqa, mlp=dense), split) == 7
    assert gemm_kernels(decoder_block("n", 128, neox, mlp=plain), split) == 4
    assert gemm_kernels(decoder_block("m", 128, mla, mlp=dense), split) == 5 + 3
    routed = MoeDims(num_experts=8, top_k=2, expert_ffn=1024)
    shared = MoeDims(num_experts=8, top_k=2, expert_ffn=1024, shared_ffn=1024)
    assert gemm_kernels(decoder_block("x", 128, gqa, moe=routed), split) == 4 + 1 + 2
    assert gemm_kernels(decoder_block("q", 128, gqa, moe=shared), split) == 4 + 1 + 3 + 2
    assert gemm_kernels(decoder_block("s", 128, mla, moe=shared), split) == 5 + 1 + 3 + 2


def test_hf_imports_and_stacks_set_the_capability():
    """The HF importer marks GPT-2 (c_attn) fused and Llama split; the HF
    Trainer/accelerate stacks (DDP, FSDP, DeepSpeed) and torchtitan turn the
    capability off, Megatron stacks keep it on."""
    from autopar_opt.calibration.reading import RawRecord, stacks
    from autopar_opt.model_zoo.hf_config import build_hf_graph, load_hf_config
    hf = paths.REPO / "model_zoo" / "hf"
    split = _rt("torchtitan")
    gpt2 = build_hf_graph(load_hf_config(hf / "gpt2-xl.json")[0], 1024)
    llama = build_hf_graph(load_hf_config(hf / "llama-3.1-8b.json")[0], 1024)
    blocks = [g.layers[1] for g in (gpt2, llama)]
    assert [gemm_kernels(b) for b in blocks] == [4, 4]
    assert [gemm_kernels(b, split) for b in blocks] == [4, 7]
    notes: list[str] = []
    for rec in (None, {"parallelism": {"fsdp": "full_shard"}}, {"parallelism": {"zero_stage": 2}}):
        raw = None if rec is None else RawRecord.read(rec)
        assert not stacks.huggingface("hf trainer", raw, notes).fused_projections
    assert not stacks.torchtitan("torchtitan", notes).fused_projections
    assert stacks.megatron_core("megatron-core", notes).fused_projections
    assert stacks.nemo("nemo 24.05", notes).fused_projections


def test_solvers_and_evaluate_agree_with_separate_projections():
    """The kernel count feeds the layer-time tables: on a torchtitan runtime a tiny
    Llama (gated MLP, GQA) is solved by brute force (cost functions, no tables) =
    DP = MILP = MIQP (when installed) = block MILP, and evaluate reproduces each
    objective; the optimum is slower than the same runtime's with fused projections."""
    from support.bruteforce import brute_force
    from support.solver_agreement import assert_all_reach, solve_every_way
    from autopar_opt.cost.tables import build_cost_tables
    from autopar_opt.model_zoo.transformer import decoder_lm
    from autopar_opt.model_zoo.synthetic import small_cluster
    from autopar_opt.ir.training import Schedule, SearchSpace
    space = SearchSpace(zero_levels=(0,), recompute=(Recompute.none, Recompute.full),
                        sequence_parallel=(False,), tp_degrees=(1, 2))
    graph = decoder_lm("tiny", 2, 256, 256, 4, 704, 1000, kv_heads=2, gated_mlp=True,
                       flash_attention=True)
    cluster = small_cluster(1, 4)
    from autopar_opt.ir.runtime import runtime_named
    best = {}
    for fused in (False, True):        # torchtitan as shipped, and the same with fused projections
        rt = runtime_named("torchtitan", fused_projections=fused)
        training = Training(global_batch_size=8, seq_len=256, runtime=rt)
        for pp in (1, 2):
            ref = brute_force(graph, cluster, training, space, pp, 2)
            assert ref is not None
            best[fused, pp] = ref[0]
            if not fused:
                tables = build_cost_tables(graph, cluster, training, space, default_params(), pp,
                                           2, Schedule.one_f_one_b)
                assert_all_reach(solve_every_way(tables, pp), ref[0], tables, graph, cluster,
                                 training)
    assert all(best[False, pp] > best[True, pp] for pp in (1, 2))
