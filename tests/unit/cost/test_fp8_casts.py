"""The FP8 casts around each GEMM (autopar_opt.cost.fp8_casts).

Oracles: the bytes of a Llama-3-8B block by hand from Transformer Engine's kernels
(module docstring: the norm-fused inputs' transpose 2 B per element of the whole
input, other inputs' cast_transpose 4 B per local element, every output gradient's
cast_transpose 4 B, the row-parallel ones whole); MLA's output widths by hand from
DeepSeek-V3's dimensions; the copy bandwidth from the H200 run's JSON."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from autopar_opt.cost import compute, fp8_casts
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.params import default_params
from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Recompute, Training
from autopar_opt.model_zoo.blocks import AttentionDims, MlpDims, decoder_block
from autopar_opt.model_zoo.transformer import transformer_block

S, H, HKV, F = 4096, 4096, 1024, 14336      # Llama-3 8B: 32 heads of 128, 8 KV heads


def _llama_block() -> Layer:
    return transformer_block("b", S, H, 32, F, kv_heads=8, gated_mlp=True, flash_attention=True,
                             biases=False, fused_gated=True, dropout=False, layer_norm=False)


def test_a_llama_block_moves_the_bytes_of_te_s_kernels_by_hand():
    blk = _llama_block()
    # forward: the QKV and fc1 inputs (norm outputs, s x h each) transposed at 2 B per
    # element; the projection's (s x h) and fc2's (s x f) inputs cast and transposed at 4 B
    fwd = 2 * (2 * S * H) + 4 * (S * H + S * F)
    # backward: the output gradients of QKV (s x (h + 2 h_kv)) and fc1 (s x 2f) and of the
    # projection and fc2 (s x h each), 4 B per element
    bwd = 4 * (S * (H + 2 * HKV) + S * 2 * F) + 4 * (2 * S * H)
    assert (fwd, bwd) == (S * 90112, S * 172032)
    got = fp8_casts.cast_bytes(blk, Strategy(dp=1, tp=1), 1.0)
    assert got == pytest.approx((fwd, bwd))
    # 3 samples: three times the bytes
    assert fp8_casts.cast_bytes(blk, Strategy(dp=1, tp=1), 3.0) == pytest.approx((3 * fwd, 3 * bwd))


def test_tensor_parallelism_splits_only_the_local_tensors():
    """tp 4: the norm-fed inputs' transposes are of the gathered whole input and the
    row-parallel output gradients are gathered whole; the rest is split by 4."""
    blk = _llama_block()
    fwd = 2 * (2 * S * H) + 4 * (S * H + S * F) / 4
    bwd = 4 * (S * (H + 2 * HKV) + S * 2 * F) / 4 + 4 * (2 * S * H)
    assert (fwd, bwd) == (S * 34816, S * 67584)
    for sp in (True, False):
        assert fp8_casts.cast_bytes(blk, Strategy(dp=1, tp=4, sp=sp), 1.0) == pytest.approx((fwd, bwd))


def test_the_zoo_s_decoder_block_counts_the_same_bytes_as_the_transformer_block():
    attn = AttentionDims(hidden=H, heads=32, kv_heads=8, head_dim=128)
    blk = decoder_block("d", S, attn, mlp=MlpDims(ffn=F), dropout=False, fused_gated=True)
    ref = _llama_block()
    assert blk.gemm_output_bytes == pytest.approx(ref.gemm_output_bytes)
    assert blk.gemm_output_replicated_bytes == pytest.approx(ref.gemm_output_replicated_bytes)
    assert fp8_casts.cast_bytes(blk, Strategy(dp=1, tp=2), 1.0) == \
        pytest.approx(fp8_casts.cast_bytes(ref, Strategy(dp=1, tp=2), 1.0))


def test_mla_output_widths_by_hand():
    """DeepSeek-V3: 128 heads, q/k nope 128 + rope 64, v 128, q rank 1536, kv rank 512,
    hidden 7168. Column-parallel: Q up 128 x 192, KV up 128 x (128 + 128); whole: the
    output projection's 7168 and the down projections' 1536 and 512 + 64."""
    attn = AttentionDims(hidden=7168, heads=128, kv_heads=128, head_dim=128, q_lora_rank=1536,
                         kv_lora_rank=512, qk_nope_dim=128, qk_rope_dim=64, v_head_dim=128)
    assert attn.gemm_output_widths() == (128 * 192 + 128 * 256, 7168 + 1536 + 512 + 64)
    gqa = AttentionDims(hidden=H, heads=32, kv_heads=8, head_dim=128)
    assert gqa.gemm_output_widths() == (H + 2 * HKV, H)


def test_a_layer_without_gemm_sizes_takes_its_input_and_output():
    lin = Layer(name="fc", kind=LayerKind.linear, input_bytes=1000.0, output_bytes=300.0)
    assert fp8_casts.cast_bytes(lin, Strategy(dp=1, tp=1), 1.0) == pytest.approx((2000.0, 600.0))
    assert fp8_casts.cast_bytes(lin, Strategy(dp=1, tp=2), 1.0) == pytest.approx((1000.0, 300.0))


def test_the_copy_bandwidth_is_the_h200_measurement():
    rows = json.loads((Path(__file__).resolve().parents[3] / "benchmarks" / "kernels"
                       / "h200_results.json").read_text())["elementwise"]
    copy = next(r for r in rows if r["op"] == "copy")
    assert fp8_casts.COPY_BANDWIDTH_FRACTION == pytest.approx(copy["gb_per_s"] / 4800.0)
    assert 0.8 < fp8_casts.COPY_BANDWIDTH_FRACTION < 0.9


def _ctx(dtype: str) -> StageContext:
    cl = make_cluster("c", 1, 8, "H100-SXM-80GB")
    tr = Training(global_batch_size=64, seq_len=S, dtype=dtype, runtime=runtime_named("megatron-core"))
    return StageContext(cl, tr, default_params(), 8, 2)


def test_compute_time_adds_the_casts_in_fp8_only(monkeypatch):
    """An FP8 block's forward and backward grow by exactly the casts' time at the
    measured copy bandwidth of the H100's 3,350 GB/s; full recomputation re-runs the
    forward's casts; selective recomputation (the attention core) none; 16-bit none."""
    blk, bw = _llama_block(), 3350e9 * fp8_casts.COPY_BANDWIDTH_FRACTION
    ctx = _ctx("fp8")
    for rc, redo in ((Recompute.none, 0.0), (Recompute.selective, 0.0), (Recompute.full, 1.0)):
        s = Strategy(dp=2, tp=2, sp=True, recompute=rc)
        with_casts = compute.compute_time(blk, s, ctx)
        monkeypatch.setattr(fp8_casts, "cast_time", lambda *a, **k: (0.0, 0.0))
        without = compute.compute_time(blk, s, ctx)
        monkeypatch.undo()
        fb, bb = fp8_casts.cast_bytes(blk, s, 2 / 2)       # micro-batch 2 over dp 2
        assert with_casts.fwd_s - without.fwd_s == pytest.approx(fb / bw, rel=1e-9)
        assert with_casts.bwd_s - without.bwd_s == pytest.approx((bb + redo * fb) / bw, rel=1e-9)
        assert fb / bw > 1e-5                                # not vanishing: ~40 us forward
    bf16 = _ctx("bf16")
    assert fp8_casts.cast_time(blk, Strategy(dp=1, tp=1), 1.0, bf16.training, 3350.0) == (0.0, 0.0)
    assert fp8_casts.cast_time(replace(blk, kind=LayerKind.lm_head), Strategy(dp=1, tp=1), 1.0,
                               ctx.training, 3350.0) == (0.0, 0.0)   # output layer stays 16-bit
