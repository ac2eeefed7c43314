"""Mixture-of-Experts records in the calibration path (issue 10: unseen families).

The synthetic record is Mixtral 8x7B (Jiang et al. 2024, arXiv 2401.04088,
Table 1: 32 layers, h = 4096, 32 heads, 8 KV heads, expert width 14336,
8 experts, top-2, vocabulary 32000; untied output layer, RMSNorm, no
biases) on 64 H100s. Its measured value (3000 tokens/s/GPU) is invented: the
tests check the model's terms by hand, not a prediction.
"""

from __future__ import annotations

import copy

import pytest

from autopar_opt.calibration.build import build_run
from autopar_opt.calibration.reading import read_record
from autopar_opt.calibration.calibrate import calibrate_file
from autopar_opt.calibration.flops import Dims
from autopar_opt.calibration.moe_build import megatron_moe_flops
from autopar_opt.calibration.reading.moe import attention_dims, names_moe, read_moe
from autopar_opt.calibration.reading import RawRecord, Unmodelable, load_run_file
from autopar_opt.cost.compute import compute_time
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.memory import activation_bytes
from autopar_opt.cost.state import state_bytes, weight_bytes
from autopar_opt.cost.params import default_params
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.ir.hardware import DEVICE_CATALOG

from support.runs import PUBLISHED_RUNS as RUNS, write_runs as _write

S, H, A, KV, F, E, K, V, L = 4096, 4096, 32, 8, 14336, 8, 2, 32000, 32


def mixtral(tp=2, pp=4, dp=8, ep=8, **model) -> dict:
    """Synthetic Mixtral-8x7B record, 64 H100s (8 per node), Megatron-Core, bf16."""
    m = {"name": "Mixtral 8x7B", "arch": "sparse MoE decoder (GQA 8, SwiGLU experts, RoPE, "
         "RMSNorm, no bias, no dropout)", "num_layers": L, "hidden_size": H,
         "num_attention_heads": A, "num_kv_heads": KV, "ffn_hidden_size": F, "vocab_size": V,
         "seq_len": S, "param_count_b": 46.7, "num_experts": E, "moe_router_topk": K}
    m.update(model)
    return {"id": "synthetic_mixtral_8x7b", "record_type": "end_to_end_training_throughput",
            "model": {k: v for k, v in m.items() if v is not None},
            "hardware": {"gpu_type": "H100-SXM5", "gpu_memory_gb": 80, "num_gpus": 64,
                         "gpus_per_node": 8, "inter_node_gbps_per_gpu": 400},
            "parallelism": {"tp": tp, "pp": pp, "dp": dp, "cp": 1, "sequence_parallel": tp > 1,
                            "vp_chunks": 1, "ep": ep, "zero_stage": None, "fsdp": "none"},
            "training": {"precision": "bf16", "micro_batch_size": 1, "global_batch_size": 256,
                         "recompute": "none", "framework": "Megatron-Core"},
            "measured": {"tokens_per_sec_per_gpu": 3000},
            "flops_counting": "Megatron-Core num_floating_point_operations"}


def _block(run):
    return next(layer for layer in run.graph.layers if layer.is_moe)


def test_mixtral_parameters_and_flops_by_hand():
    """Parameters per MoE block: attention ``h·(q + 2·g·d) + q·h`` with
    q = 32·128 = 4096, g·d = 8·128 = 1024: 4096·6144 + 4096² = 41,943,040;
    router ``h·E`` = 32,768; two RMSNorms 8,192; experts ``E·3·h·f`` =
    8·3·4096·14336 = 1,409,286,144; block 1,451,270,144. Model: 32 blocks +
    embedding ``V·h`` = 131,072,000 + untied output ``V·h`` + final norm
    4,096 = 46,702,792,704 (Mixtral reports 46.7 B; 12.9 B active).

    Forward FLOPs per token of a block: ``2·(attention matrices)`` +
    causal core ``2·s·a·2d·½`` + router ``2·h·E`` + top-2 experts
    ``2·k·3·h·f``. Megatron-Core's count (NVIDIA/Megatron-LM
    ``training.py::num_floating_point_operations``) is 3x that without the
    router, plus ``6·h·V`` logits: per token
    6·4096·3·28672·32 = 67,645,734,912 (MLP) + 32·6·(4096·6144 + 2·4096²)
    = 11,274,289,152 (attention, s = 4096) + 786,432,000 = 79,706,456,064.
    """
    run = build_run(read_record(mixtral()))
    block = 41_943_040 + 32_768 + 8_192 + 1_409_286_144
    assert _block(run).params == block
    assert _block(run).expert_params == 1_409_286_144
    assert run.graph.total_params() == 32 * block + 2 * 131_072_000 + 4_096 == 46_702_792_704
    assert run.graph.active_params() == pytest.approx(46_702_792_704 - 32 * 6 * 3 * H * F)
    per_token = 67_645_734_912 + 11_274_289_152 + 786_432_000
    assert per_token == 79_706_456_064
    spec = read_moe(RawRecord.read(mixtral()), L, [])
    attn = attention_dims(RawRecord.read(mixtral()).model, spec, H, A, KV, False)
    flops = megatron_moe_flops(Dims(1, S, L, H, V, 0.0), attn, spec, True, causal=True)
    assert flops == S * per_token
    router = 3 * 2 * S * H * E * L
    assert run.graph.flops_per_sample() == pytest.approx(S * per_token + router, rel=1e-12)


def test_mixtral_memory_terms_by_hand():
    """bf16 Megatron-Core: 2 + 4 (fp32 grad buffer) + 12 bytes per parameter,
    optimizer state sharded by the distributed optimizer over ``dp = 8`` for
    the dense part and over ``edp = dp/ep = 1`` for the experts.
    tp = 2, ep = 8: dense 41,984,000/2 x (2 + 4 + 12/8) = 157,440,000 B;
    experts 1,409,286,144/(2·8) x 18 = 1,585,446,912 B. ep = 1: experts
    1,409,286,144/2 x 7.5 = 5,284,823,040 B.

    Activations per sample (flash attention, no dropout, fused SwiGLU,
    2-byte values): attention ``2sh + 2s·q + 2s·2gd + 2s·q`` = 7sh, norms
    4sh, MoE input 2sh, fp32 router logits 4·s·E, per routed copy
    ``4h + 6f``: s·(13·4096 + 32 + 2·(16384 + 86016)) = 4096·258,080 B,
    all split by tp = 2 under sequence parallelism.
    """
    for ep, expect in ((8, 157_440_000 + 1_585_446_912), (1, 157_440_000 + 5_284_823_040)):
        run = build_run(read_record(mixtral(ep=ep)))
        st = run.plan.stages[1].strategies[0]
        assert state_bytes(run.training, st.zero) == (2, 4, 12)
        assert (st.ep, st.zero, st.tp, st.dp) == (ep, 1, 2, 8)
        assert weight_bytes(_block(run), st, run.training) == pytest.approx(expect, rel=1e-12)
        act = activation_bytes(_block(run), st, 8, training=run.training)
        assert act == pytest.approx(4096 * 258_080 / 2, rel=1e-12)
    dense_ep = [s.ep for st in build_run(read_record(mixtral())).plan.stages for s in st.strategies]
    assert dense_ep[0] == dense_ep[-1] == 1 and set(dense_ep[1:-1]) == {8}   # embed/head ep 1


def test_expert_parallelism_adds_the_all_to_all_of_cost_moe():
    """cost/moe.py: four all-to-alls (dispatch + combine, forward + backward)
    of ``m = 2·s·k·h`` bytes per sample (one micro-batch sample per rank, / tp).
    ep = 8, tp = 1 (8 consecutive ranks, one node):
    ``4·(7·α + 7/8·m/(β·eff))``; ep = 8, tp = 2 (16 ranks, two nodes, 4 per
    node): ``4·(7·α_inter + max(3/8·m'/(β·eff), 4/8·m'/(β_inter·eff_inter)))``
    with m' = m/2; ep = 1: none."""
    p = default_params()
    m = 2 * S * K * H
    run = build_run(read_record(mixtral(tp=1, dp=16, ep=8)))
    block, st = _block(run), run.plan.stages[1].strategies[0]
    ctx = StageContext(run.cluster, run.training, p, st.devices, st.dp)
    intra = run.cluster.intra_node
    hand = 4 * (7 * intra.latency_s + 7 / 8 * m / (intra.bytes_per_s * p.comm_efficiency))
    assert layer_cost(block, st, ctx).ep_exposed_s == pytest.approx(hand, rel=1e-12)

    run = build_run(read_record(mixtral(tp=2, dp=8, ep=8)))
    block, st = _block(run), run.plan.stages[1].strategies[0]
    ctx = StageContext(run.cluster, run.training, p, st.devices, st.dp)
    inter = run.cluster.inter_node
    half = m / 2
    hand = 4 * (7 * inter.latency_s + max(3 / 8 * half / (intra.bytes_per_s * p.comm_efficiency),
                                          4 / 8 * half / (inter.bytes_per_s
                                                          * p.inter_comm_efficiency)))
    assert layer_cost(block, st, ctx).ep_exposed_s == pytest.approx(hand, rel=1e-12)
    one = build_run(read_record(mixtral(tp=2, dp=8, ep=1)))
    st1 = one.plan.stages[1].strategies[0]
    assert layer_cost(_block(one), st1, ctx).ep_exposed_s == 0.0
    m8 = evaluate(run.plan, run.graph, run.cluster, run.training, p)
    m1 = evaluate(one.plan, one.graph, one.cluster, one.training, p)
    assert sum(s.ep_s for s in m8.stages) > 0 == sum(s.ep_s for s in m1.stages)
    assert max(m8.peak_memory_gib) < max(m1.peak_memory_gib)     # experts sharded over ep


def test_fp8_moe_block_runs_gemms_at_the_fp8_peak_and_keeps_fp8_weight_copies():
    """FP8 (Transformer Engine ``TEGroupedLinear`` experts): every GEMM of the
    MoE block at the FP8 peak, ``t = (f/peak + τ_half)/eff_fp8`` per kernel
    (:func:`kernel_time`), forward ``f_fwd − core`` and backward
    ``2·(f_fwd − core)`` on ``1/tp`` of one sample; weights carry the FP8
    copy + transpose (+2 bytes): dense 20,992,000 x (4 + 4 + 12/8) +
    experts 88,080,384 x (4 + 4 + 12) = 199,424,000 + 1,761,607,680 B."""
    rec = mixtral()
    rec["training"]["precision"] = "fp8 (delayed scaling)"
    run = build_run(read_record(rec))
    assert run.training.dtype == "fp8" and not run.training.runtime.fp8_primary_weights
    block, st = _block(run), run.plan.stages[1].strategies[0]
    assert weight_bytes(block, st, run.training) == pytest.approx(199_424_000 + 1_761_607_680,
                                                                  rel=1e-12)
    p = default_params()
    ctx = StageContext(run.cluster, run.training, p, st.devices, st.dp)
    dev = run.cluster.device
    peak, eff, half = dev.peak_flops("fp8"), p.efficiency_for(dev.name, fp8=True), \
        p.efficiency_half_us * 1e-6
    f, core = block.flops_fwd / 2, block.flops_recompute_selective / 2
    # 5 GEMM kernels forward (QKV, projection, router, grouped expert up and down), 10
    # backward, each paying the per-kernel half-efficiency work (Layer.gemm_kernels)
    assert block.gemm_kernels == 5
    hand = ((f - core) / peak + 5 * half) / eff + ((2 * f - 2 * core) / peak + 10 * half) / eff
    assert compute_time(block, st, ctx).gemm_s == pytest.approx(hand, rel=1e-12)


def test_spellings_of_other_configs_give_the_same_model():
    """Hugging Face (num_local_experts, num_experts_per_tok,
    moe_intermediate_size) and Megatron-Core (num_moe_experts, top_k)
    spellings read to the same graph."""
    base = build_run(read_record(mixtral())).graph
    hf = mixtral(num_experts=None, moe_router_topk=None, num_local_experts=E,
                 num_experts_per_tok=K, moe_intermediate_size=F)
    mc = mixtral(num_experts=None, moe_router_topk=None, num_moe_experts=E, top_k=K,
                 moe_ffn_hidden_size=F)
    for rec in (hf, mc):
        assert [layer.signature() for layer in build_run(read_record(rec)).graph.layers] == \
            [layer.signature() for layer in base.layers]


def test_dense_first_layers_shared_experts_and_mla():
    """DeepSeek-style: 1 dense layer then MoE (``first_k_dense_replace``, or
    Megatron's ``moe_layer_freq`` string), 2 shared experts of the expert
    width, MLA. The graph's FLOPs equal Megatron-Core's count plus the router
    (``3·2·s·h·E`` per MoE layer) minus the MLA norm terms it counts
    (``3·2·s·(q_lora + kv_lora)`` per layer)."""
    model = dict(num_layers=4, hidden_size=1024, num_attention_heads=16, num_kv_heads=None,
                 ffn_hidden_size=4096, vocab_size=1000, seq_len=512, param_count_b=None,
                 num_experts=None, moe_router_topk=None, n_routed_experts=16,
                 num_experts_per_tok=4, moe_intermediate_size=256, n_shared_experts=2,
                 first_k_dense_replace=1, kv_lora_rank=128, q_lora_rank=192,
                 qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64,
                 arch="DeepSeek-V3-like MoE with MLA, SwiGLU, RMSNorm, no bias, no dropout")
    rec = mixtral(tp=1, pp=1, dp=64, ep=16, **model)
    run = build_run(read_record(rec))
    kinds = [layer.is_moe for layer in run.graph.layers[1:-1]]
    assert kinds == [False, True, True, True]
    moe = _block(run)
    assert moe.params - moe.expert_params - (
        1024 * 16 + 3 * 1024 * 512) == run.graph.layers[1].params - 3 * 1024 * 4096
    alt = copy.deepcopy(rec)
    del alt["model"]["first_k_dense_replace"]
    alt["model"]["moe_layer_freq"] = "([0]*1+[1]*3)"
    assert [x.signature() for x in build_run(read_record(alt)).graph.layers] == \
        [x.signature() for x in run.graph.layers]
    spec = read_moe(RawRecord.read(rec), 4, [])
    attn = attention_dims(RawRecord.read(rec).model, spec, 1024, 16, 16, False)
    mega = megatron_moe_flops(Dims(1, 512, 4, 1024, 1000, 0.0), attn, spec, True, causal=True)
    extra = 3 * (2 * 512 * 1024 * 16 * 3) - 4 * 6 * 512 * (192 + 128)
    assert run.graph.flops_per_sample() == pytest.approx(mega + extra, rel=1e-12)


def test_stated_dp_counting_expert_replicas_is_read_as_megatron_core_does():
    """tp·pp·dp·cp·ep = 64 with dp = 1: the stated dp counts expert replicas;
    the attention layers' dp is dp·ep = 8 (ep carved out of dp)."""
    run = build_run(read_record(mixtral(dp=1, ep=8)))
    st = run.plan.stages[1].strategies[0]
    assert (st.dp, st.ep, st.edp) == (8, 8, 1)
    assert any("counts expert replicas" in n for n in run.assumptions)


@pytest.mark.parametrize("counting, per_token", [
    ("Megatron-Core num_floating_point_operations (causal, halved core)", 79_706_456_064),
    ("torchtitan 6*N + 12*l*h*s (PaLM App. B)", 82_935_570_432),
])
def test_mfu_is_inverted_with_the_moe_flop_count(counting, per_token):
    """MFU only: samples/s = B / (F / (mfu · peak · n)), F = B·s·(per-token count),
    H100 bf16 peak. Megatron-Core: 79,706,456,064 (derived above). PaLM /
    torchtitan with the active non-embedding parameters: active = 46,702,792,704
    − 32·6·3·4096·14336 = 12,879,925,248, minus V·h = 12,748,853,248;
    6·12,748,853,248 + 12·32·4096·4096 = 82,935,570,432."""
    rec = mixtral()
    rec["measured"] = {"mfu_pct": 40.0}
    rec["flops_counting"] = counting
    run = build_run(read_record(rec))
    peak = DEVICE_CATALOG["H100-SXM-80GB"].peak_flops("bf16")
    t = 256 * S * per_token / (0.40 * peak * 64)
    assert run.measured_samples_per_s == pytest.approx(256 / t, rel=1e-12)


@pytest.mark.parametrize("mutate, reason", [
    (lambda r: r["model"].update(num_experts=None, moe_router_topk=None),
     "Mixture-of-Experts model but no expert count is stated"),
    (lambda r: r["model"].update(moe_router_topk=None), "experts per token are not stated"),
    (lambda r: r["model"].update(ffn_hidden_size=None), "expert width is not stated"),
    (lambda r: r["model"].update(num_local_experts=16), "disagree"),
    (lambda r: r["parallelism"].update(ep=3), "does not divide dp·cp"),
    (lambda r: r["parallelism"].update(ep=16, dp=16, tp=1), "does not divide the 8 routed"),
    (lambda r: r["parallelism"].update(etp=3), "etp·ep = 3·8 does not divide tp·cp·dp = 16"),
    (lambda r: r["model"].update(arch="MoE with MLA attention"), "kv_lora_rank"),
    (lambda r: r["model"].update(arch="MoE with GeLU experts"), "non-gated"),
    (lambda r: r.update(measured={"mfu_pct": 40.0}, flops_counting="llm-foundry 6*N*s"),
     "dense formula"),
])
def test_missing_or_inconsistent_fields_give_the_reason(mutate, reason):
    rec = mixtral()
    mutate(rec)
    with pytest.raises(Unmodelable, match=reason.replace("·", ".").replace("(", r"\(")):
        build_run(read_record(rec))


def test_expert_tensor_parallelism_apart_from_tp_is_read_into_the_plan():
    """MoE parallel folding (Liu et al. 2025): tp 2, ep 8, etp 1 on a stage of
    tp·dp = 2·8 = 16 ranks gives each expert edp = 16 / (1·8) = 2 replicas; the
    dense layers keep tp 2; a stated etp equal to tp is the default (0)."""
    rec = mixtral()
    rec["parallelism"]["etp"] = 1
    r = read_record(rec)
    assert (r.parallel.tp, r.parallel.ep, r.parallel.etp) == (2, 8, 1)
    assert any("expert tensor parallelism 1 apart from tp 2" in a.text for a in r.assumptions)
    run = build_run(r)
    is_moe = {layer.name: layer.is_moe for layer in run.graph.layers}
    moe = [s for st in run.plan.stages for name, s in zip(st.layers, st.strategies)
           if is_moe[name]]
    dense = [s for st in run.plan.stages for name, s in zip(st.layers, st.strategies)
             if not is_moe[name]]
    assert moe and all((s.tp, s.ep, s.expert_tp, s.edp) == (2, 8, 1, 2) for s in moe)
    assert all((s.ep, s.expert_tp) == (1, 2) for s in dense)
    rec["parallelism"]["etp"] = 2
    assert read_record(rec).parallel.etp == 0


def test_dense_record_with_ep_or_moe_words_is_never_priced_dense(tmp_path):
    rec = mixtral(num_experts=None, moe_router_topk=None, name="GPT", arch="dense decoder")
    with pytest.raises(Unmodelable, match="parallelism.ep = 8 but the model states no routed"):
        build_run(read_record(rec))
    rec = mixtral(num_experts=None, moe_router_topk=None, name="Qwen3-30B-A3B", arch="decoder")
    with pytest.raises(Unmodelable, match="no expert count"):
        build_run(read_record(rec))
    rec["id"] = "synthetic_qwen_moe_no_experts"
    report = calibrate_file(_write(tmp_path, [mixtral(), rec]))
    assert [c.id for c in report.comparisons] == ["synthetic_mixtral_8x7b"]
    assert report.comparisons[0].predicted > 0
    assert "no expert count" in str(report.skipped)


def test_placeholder_texts_are_unstated_and_digit_texts_are_numbers():
    """``ep: "none"`` on a dense record reads as unstated (it is priced dense, as
    before); ``num_experts: "8"`` reads as 8."""
    dense = mixtral(num_experts=None, moe_router_topk=None, name="GPT", arch="dense decoder")
    dense["parallelism"]["ep"] = "none"
    assert not any(layer.is_moe for layer in build_run(read_record(dense)).graph.layers)
    text = mixtral(num_experts="8")
    assert build_run(read_record(text)).graph.total_params() == 46_702_792_704


def test_published_records_are_all_dense():
    """None of the 96 shipped records is read as MoE, so their figures
    (benchmarks/calibration/RESULTS.md) are unchanged by this path."""
    records = load_run_file(RUNS)
    assert not any(names_moe(RawRecord.read(r).model) for r in records)
    assert all(read_moe(RawRecord.read(r), 1, []) is None for r in records)


def test_mlp_only_layers_valid_list_makes_those_layers_dense():
    """Qwen-MoE's dense-layer list: layers 0 and 31 of 32 dense, the other 30 MoE."""
    spec = read_moe(RawRecord.read(mixtral(mlp_only_layers=[0, 31])), L, [])
    assert [i for i, moe in enumerate(spec.pattern) if not moe] == [0, 31]
    assert read_moe(RawRecord.read(mixtral(mlp_only_layers=None)), L, []).moe_layers == L


@pytest.mark.parametrize("value, rule", [
    (["3"], "entry '3' is not an integer layer index"),
    ([1.5], "entry 1.5 is not an integer layer index"),
    ([True], "entry True is not an integer layer index"),
    ([-1], "entry -1 is negative"),
    ([32], "entry 32 is out of range: the model has 32 layers (indices 0 to 31)"),
    ([4, 7, 4], "entry 4 is repeated"),
    (5, "is not a list of layer indices"),
])
def test_invalid_mlp_only_layers_skip_the_record_with_key_value_rule_and_fix(tmp_path, value, rule):
    """Each broken entry is named with the key, the value, the rule and the fix, and the
    record is skipped (before: ignored, the layer silently stayed MoE)."""
    rec = mixtral(mlp_only_layers=value)
    with pytest.raises(Unmodelable) as err:
        read_moe(RawRecord.read(rec), L, [])
    why = str(err.value)
    assert why.startswith(f"model.mlp_only_layers = {value!r}: ") and rule in why and "(fix: " in why
    report = calibrate_file(_write(tmp_path, [rec]))
    assert not report.comparisons and report.skipped == [("synthetic_mixtral_8x7b", why)]


@pytest.mark.parametrize("framework, said", [
    ("Megatron-Core", True),
    ("Megatron-Core, --moe-token-dispatcher-type alltoall", False),
    ("Megatron-Core with DeepEP (--moe-token-dispatcher-type flex)", False),
])
def test_an_unstated_megatron_token_dispatcher_is_said(framework, said):
    """Megatron-Core's moe_token_dispatcher_type defaults to allgather (core_r0.6.0 to
    core_v0.17.1, transformer_config.py); the model prices the all-to-all, so a record
    that names no dispatcher says what was assumed (a named one is read)."""
    rec = mixtral()
    rec["training"]["framework"] = framework
    notes = build_run(read_record(rec)).assumptions
    assert any(n.startswith("token dispatcher not stated: Megatron-Core's default is "
                            "allgather") for n in notes) == said
