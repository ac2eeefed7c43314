"""How full one attention call keeps the GPU (autopar_opt.cost.attention.fill_factor).

Oracles: the device measurement files (benchmarks/kernels/h200_fill.json and
h200_results.json: one H200, one sequence with 1-64 heads per call, per kernel, mask and
head dim), combined by hand as the module docstring says; the heads of a call by hand
from a block's dimensions and the parallel degrees."""

import json
import math
from pathlib import Path

import pytest

from autopar_opt.cost import attention
from autopar_opt.cost.compute import attention_lookup, call_batch_heads
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.params import default_params
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Training
from autopar_opt.model_zoo.hf_config import build_hf_graph
from autopar_opt.model_zoo.transformer import transformer_block

ROOT = Path(__file__).resolve().parents[3] / "benchmarks" / "kernels"


def _measured(backend: str, causal: bool, head_dim: int, seq: int) -> dict[int, float]:
    """heads -> TFLOP/s forward+backward of one sequence: the device runs' rows
    (h200_results.json attention_fill and h200_fill.json), a point measured twice averaged."""
    rows = json.loads((ROOT / "h200_fill.json").read_text())["rows"]
    rows += json.loads((ROOT / "h200_results.json").read_text())["attention_fill"]
    got: dict[int, list[float]] = {}
    for r in rows:
        if (r["backend"], r["causal"], r["head_dim"], r["seq"], r["b"]) == (backend, causal, head_dim, seq, 1):
            got.setdefault(r["heads"], []).append(round(r["fwd_bwd_tflops"], 1))
    return {h: sum(v) / len(v) for h, v in got.items()}


AT_4K = _measured("cudnn", True, 128, 4096)
AT_16K = _measured("cudnn", True, 128, 16384)


def test_a_measured_point_is_its_ratio_to_the_published_call():
    # at 4k the published call runs 16384/4096 x 2048/128 = 64 heads
    assert attention.reference_calls(4096, 128) == 64
    assert len(AT_4K) == 7 and len(AT_16K) == 7
    assert attention.fill_factor(8, 4096, 128) == pytest.approx(AT_4K[8] / AT_4K[64])
    # at 16k the published call is one sequence of 16 heads
    assert attention.fill_factor(2, 16384, 128) == pytest.approx(AT_16K[2] / AT_16K[16])
    # a call at least as large as the published one: no correction
    assert attention.fill_factor(64, 4096, 128) == 1.0 and attention.fill_factor(16, 16384, 128) == 1.0


def test_lengths_between_interpolate_in_log2():
    """s = 5793 (2^12.5) is half way between the measured 4k and 8k in log2; the published
    call there has 16384/5793 x 16 = 45.25 heads (between the measured 32 and 64, also
    interpolated in log2). 8 heads: the mean of the two lengths' ratios."""
    at_8k = _measured("cudnn", True, 128, 8192)
    seq = 2 ** 12.5
    ref = 16384 / seq * 16
    t = (math.log2(ref) - 5.0)            # between 32 (2^5) and 64 (2^6)

    def at(c):
        return c[32] + t * (c[64] - c[32])
    want = (AT_4K[8] / at(AT_4K) + min(1.0, at_8k[8] / at(at_8k))) / 2
    assert attention.fill_factor(8, seq, 128) == pytest.approx(want)


def test_lengths_outside_take_the_nearer_curve_at_the_same_tiles():
    """s = 32768: the published call is 16 heads (batch 1); one head has the query tiles
    of two heads at 16k, the published call those of 32. s = 1024, 16 heads: the tiles of
    four heads at 2k against the published 256's 128, held at the measured 64."""
    assert attention.fill_factor(1, 32768, 128) == pytest.approx(AT_16K[2] / AT_16K[32])
    at_2k = _measured("cudnn", True, 128, 2048)
    assert attention.fill_factor(16, 1024, 128) == pytest.approx(at_2k[8] / at_2k[64])


def test_each_kernel_mask_and_head_dim_takes_its_own_curve():
    """FlashAttention-2 without the mask, head dim 64, 4k tokens: the published call has 4 x
    32 = 128 heads (held at the measured 64); 2 heads: their measured ratio. FlashAttention-3
    takes cuDNN's curves, FlashAttention-1 FlashAttention-2's; head dim 96 the nearer 128."""
    fa2 = _measured("flash", False, 64, 4096)
    assert attention.fill_factor(2, 4096, 64, "flash_attention_2", False) == \
        pytest.approx(fa2[2] / fa2[64])
    assert attention.fill_curve_for("flash_attention_3", True, 96)[0] == ("cudnn", True, 128)
    assert attention.fill_curve_for("flash_attention_1", False, 64)[0] == \
        ("flash_attention_2", False, 64)


def _ctx(tp_samples: int) -> StageContext:
    cl = make_cluster("c", 1, 8, "H100-SXM-80GB")
    tr = Training(global_batch_size=64, seq_len=4096, runtime=runtime_named("megatron-core"))
    return StageContext(cl, tr, default_params(), 8, tp_samples)


def test_heads_per_call_from_the_block():
    """32 heads of 128, micro-batch of 4 samples over dp = 2 and tp = 8: 2 x 4 = 8 per call;
    the same with the causal core counted at half (FlashAttention's count)."""
    for halved in (False, True):
        blk = transformer_block("b", 4096, 4096, 32, 14336, kv_heads=8, gated_mlp=True,
                                flash_attention=True, causal_flops=halved)
        assert blk.head_dim == 128
        assert call_batch_heads(blk, Strategy(dp=2, tp=8), _ctx(4)) == pytest.approx(8.0)


def test_the_plan_pays_the_fill_of_its_calls():
    """Megatron-Core on H100 runs cuDNN attention; at 4k tokens a call of 8 heads runs at
    its measured 8-over-64-heads ratio of the published speed, one of 64 heads (tp = 1,
    2 samples) at full."""
    blk = transformer_block("b", 4096, 4096, 32, 14336, kv_heads=8, gated_mlp=True,
                            flash_attention=True)
    full = attention.lookup("cudnn", "hopper", True, 128, 4096)
    small = attention_lookup(blk, Strategy(dp=1, tp=4), _ctx(1))
    assert small.kernel == "cudnn"
    assert small.fwd == pytest.approx(full.fwd * AT_4K[8] / AT_4K[64])
    assert small.bwd == pytest.approx(full.bwd * AT_4K[8] / AT_4K[64])
    big = attention_lookup(blk, Strategy(dp=1, tp=1), _ctx(2))
    assert math.isclose(big.fwd, full.fwd) and math.isclose(big.bwd, full.bwd)


def test_the_assumptions_state_the_fill():
    from autopar_opt.cost.assumptions import cost_assumptions
    from autopar_opt.ir.graph import LayerGraph

    blk = transformer_block("b", 4096, 4096, 32, 14336, kv_heads=8, gated_mlp=True,
                            flash_attention=True)
    cl = make_cluster("c", 1, 8, "H100-SXM-80GB")
    tr = Training(global_batch_size=64, seq_len=4096, runtime=runtime_named("megatron-core"))
    text = "\n".join(cost_assumptions(LayerGraph.chain("g", [blk], seq_len=4096), cl, tr))
    assert "measured with 16,384 tokens x 2,048 hidden per call; a plan's smaller calls " \
        "(heads/tp of its micro-batch) run at the measured fill ratio " \
        "(cost/data/attention_fill.yaml, one H200: cudnn, causal, head dim 128)" in text


def test_an_mla_call_has_all_its_heads():
    """DeepSeek-V3's config (model_zoo/hf/deepseek-v3.json): 128 heads, query/key width
    128 + 64 = 192, value width 128. Its core is 2·s²·128·(192 + 128) FLOPs, which read
    as multi-head attention of head dim 192 would be 128 x 320 / 384 = 106.7 heads: one
    sample at tp = 8 runs 128 / 8 = 16 heads per call, a micro-batch of 4 at dp = 2, 32."""
    config = json.loads((ROOT.parents[1] / "model_zoo" / "hf" / "deepseek-v3.json").read_text())
    graph = build_hf_graph(config, 4096, flash_attention=True)
    blocks = [layer for layer in graph.layers if layer.flops_recompute_selective > 0]
    assert blocks and all(b.head_dim == 192 for b in blocks)
    for blk in (blocks[0], blocks[-1]):           # a dense and an MoE block
        assert call_batch_heads(blk, Strategy(dp=1, tp=8), _ctx(1)) == pytest.approx(16.0)
        assert call_batch_heads(blk, Strategy(dp=2, tp=8), _ctx(4)) == pytest.approx(32.0)
