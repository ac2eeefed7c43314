"""Sliding-window attention (Mistral's and Qwen's ``sliding_window``): the pairs it
computes, the layers the Hugging Face importer windows, what fused and unfused kernels
are charged, the exporters' flags and the targets' rules; the solvers agree on it."""

from __future__ import annotations

import copy
import json
from dataclasses import replace

import pytest

from autopar_opt.cost.compute import compute_time, window_length
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.params import default_params
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Recompute, Training
from autopar_opt.ir.window import causal_pairs, window_share, windows_text
from autopar_opt.model_zoo.blocks import AttentionDims, MlpDims, decoder_block
from autopar_opt.model_zoo.hf_config import HfConfigError, build_hf_graph
from support.paths import REPO

MISTRAL = json.loads((REPO / "model_zoo" / "hf" / "mistral-7b-v0.1.json").read_text())
QWEN3 = json.loads((REPO / "model_zoo" / "hf" / "qwen3-8b.json").read_text())


def _mask_pairs(s: int, w: int) -> int:
    """Pairs the Hugging Face mask keeps: causal (kv <= q) and the window overlay
    (kv > q - w; transformers masking_utils.sliding_window_overlay), enumerated."""
    return sum(1 for q in range(s) for kv in range(s) if kv <= q and kv > q - w)


@pytest.mark.parametrize("s,w", [(1, 1), (7, 1), (7, 3), (8, 8), (8, 20), (33, 5), (64, 63)])
def test_pairs_are_the_masks_pairs(s, w):
    assert causal_pairs(s, w) == _mask_pairs(s, w)
    assert causal_pairs(s) == _mask_pairs(s, s) == s * (s + 1) / 2
    assert window_share(s, w) == pytest.approx(_mask_pairs(s, w) / _mask_pairs(s, s), rel=1e-15)


def test_mistral_windows_every_layer_beyond_its_window():
    """Mistral-7B v0.1 (sliding_window 4096, Jiang et al. 2023): at 32k tokens each
    layer's core counts (4096·32768 - 4096·4095/2)/(32768·32769/2) = 23.44% of the
    causal core; at 4k the window covers the sequence and nothing changes."""
    share = (4096 * 32768 - 4096 * 4095 / 2) / (32768 * 32769 / 2)
    full = dict(MISTRAL, sliding_window=None)
    for s, expect in ((32768, share), (4096, 1.0)):
        win, ref = build_hf_graph(MISTRAL, s), build_hf_graph(full, s)
        blocks = [(a, b) for a, b in zip(win.layers, ref.layers) if a.flops_recompute_selective]
        assert len(blocks) == 32
        for a, b in blocks:
            assert a.flops_recompute_selective == pytest.approx(expect * b.flops_recompute_selective,
                                                                rel=1e-12)
            # the GEMMs are untouched: the whole difference is the core's
            assert b.flops_fwd - a.flops_fwd == pytest.approx(
                b.flops_recompute_selective - a.flops_recompute_selective, rel=1e-9)
            assert a.attn_window == (4096 if expect < 1 else 0) and a.params == b.params
    assert build_hf_graph(MISTRAL, 32768).arch.windows == (4096,) * 32
    assert build_hf_graph(MISTRAL, 4096).arch.windows == ()
    # MistralConfig's default sliding_window (4096) where the key is absent
    bare = {k: v for k, v in MISTRAL.items() if k != "sliding_window"}
    assert build_hf_graph(bare, 8192).arch.windows == (4096,) * 32


def test_qwen_windows_follow_use_sliding_window_and_max_window_layers():
    """Qwen2/Qwen3Config: a window only with use_sliding_window, on the layers from
    max_window_layers on (default 28), or where layer_types says so."""
    assert build_hf_graph(dict(QWEN3, sliding_window=4096), 8192).arch.windows == ()
    on = dict(QWEN3, use_sliding_window=True, sliding_window=4096, max_window_layers=28)
    assert build_hf_graph(on, 8192).arch.windows == (0,) * 28 + (4096,) * 8
    assert build_hf_graph({k: v for k, v in on.items() if k != "max_window_layers"},
                          8192).arch.windows == (0,) * 28 + (4096,) * 8
    types = ["sliding_attention" if i % 2 else "full_attention" for i in range(36)]
    assert build_hf_graph(dict(on, layer_types=types), 8192).arch.windows == (0, 4096) * 18


@pytest.mark.parametrize("change,key", [
    ({"layer_types": ["full_attention"] * 3}, "layer_types must list one entry per layer"),
    ({"layer_types": ["chunked_attention"] * 32}, "layer_types[0] = 'chunked_attention'"),
    ({"sliding_window": 0}, "sliding_window = 0"),
    ({"sliding_window": "4k"}, "sliding_window = '4k'"),
    ({"layer_types": ["sliding_attention"] * 32, "sliding_window": None}, "sliding_window is null"),
])
def test_bad_window_keys_are_named(change, key):
    with pytest.raises(HfConfigError) as err:
        build_hf_graph(dict(copy.deepcopy(MISTRAL), **change), 8192, origin="m.json")
    assert key in str(err.value) and "m.json" in str(err.value) and "fix:" in str(err.value)


def _block(window: int, s: int = 32768):
    attn = AttentionDims(hidden=4096, heads=32, kv_heads=8, head_dim=128, window=window)
    return decoder_block("b", s, attn, mlp=MlpDims(14336), dropout=False)


def _compute(layer, runtime, s: int = 32768, device: str = "A100-80GB"):
    cluster = make_cluster("c", 1, 8, device)
    training = Training(global_batch_size=8, seq_len=s, runtime=runtime)
    ctx = StageContext(cluster, training, default_params(), 8, 8)
    return compute_time(layer, Strategy(dp=8, tp=1, recompute=Recompute.selective), ctx)


def test_fused_kernel_is_charged_the_windows_pairs():
    """A window of half the sequence (16,384 of 32,768 keys) on an A100, whose
    FlashAttention-2 rows reach 16k tokens (longer calls take the 16k efficiency), runs
    at the full call's efficiency and fill: its attention time (forward, backward,
    selective recompute) is the share of the full layer's, 0.7500 by hand:
    (16384·32768 - 16384·16383/2)/(32768·32769/2); the GEMMs are the same."""
    share = (16384 * 32768 - 16384 * 16383 / 2) / (32768 * 32769 / 2)
    rt = runtime_named("megatron-core")
    win, full = _compute(_block(16384), rt), _compute(_block(0), rt)
    assert window_length(_block(16384), 32768) == 16384
    assert win.attn_s == pytest.approx(share * full.attn_s, rel=1e-12)
    assert win.attn_fwd_s == pytest.approx(share * full.attn_fwd_s, rel=1e-12)
    assert win.gemm_s == pytest.approx(full.gemm_s, rel=1e-12)
    assert full.flops - win.flops == pytest.approx(
        3 * (1 - share) * _block(0).flops_recompute_selective, rel=1e-9)


def test_kernel_length_is_the_window():
    assert window_length(_block(4096), 32768) == 4096
    assert window_length(_block(0), 32768) == 32768
    assert window_length(_block(4096, s=4096), 4096) == 4096      # window covers it: no window


@pytest.mark.parametrize("device", ["A100-80GB", "H100-SXM-80GB"])
def test_mistral_papers_speedup(device):
    """Jiang et al. 2023 ("Mistral 7B", arXiv 2310.06825, Sec. 2): "for a sequence length
    of 16K and W = 4096, changes made to FlashAttention and xFormers yield a 2x speed
    improvement over a vanilla attention baseline". The model's attention (forward and
    backward) of a Mistral-7B layer at 16k tokens, full causal over windowed: within
    10% of 2 (the figure is rounded; the pairs alone would give 2.29)."""
    rt = runtime_named("megatron-core")
    full = _compute(_block(0, s=16384), rt, 16384, device)
    win = _compute(_block(4096, s=16384), rt, 16384, device)
    assert 16384 * 16385 / 2 / causal_pairs(16384, 4096) == pytest.approx(2.286, abs=1e-3)
    assert full.attn_s / win.attn_s == pytest.approx(2.0, rel=0.10)


def test_unfused_core_computes_the_whole_matrix():
    """Without a fused kernel the batched GEMMs compute every score and the window
    only masks them: the attention time is the full layer's."""
    rt = runtime_named("megatron-core", flash_attention=False)
    win, full = _compute(_block(4096), rt), _compute(_block(0), rt)
    assert win.attn_s == pytest.approx(full.attn_s, rel=1e-12)
    assert win.flops < full.flops


def test_window_text():
    assert windows_text([0, 0]) == ""
    assert windows_text([4096, 0, 4096]) == ("sliding-window attention of 4,096 keys per query on "
                                             "2 of 3 attention layers")


def test_solvers_agree_on_a_windowed_model():
    """Brute force over the cost functions = DP = MILP = MIQP (when installed) = block
    MILP, and evaluate reproduces each objective, on a model of a full-attention layer
    followed by windowed ones."""
    from support.solver_agreement import agree_with_brute_force
    from autopar_opt.ir.graph import LayerGraph
    from autopar_opt.ir.training import SearchSpace
    from autopar_opt.model_zoo.synthetic import small_cluster
    s = 2048
    layers = [replace(_block(256 if i else 0, s=s), name=f"b{i}") for i in range(4)]
    graph = LayerGraph.chain("swa", layers, seq_len=s, causal=True)
    assert [layer.attn_window for layer in graph.layers] == [0, 256, 256, 256]
    space = SearchSpace(zero_levels=(0, 1), recompute=(Recompute.none, Recompute.selective),
                        sequence_parallel=(False,), tp_degrees=(1, 2), hybrid_sharding=(False,))
    training = Training(global_batch_size=8, seq_len=s)
    for pp in (1, 2):
        agree_with_brute_force(graph, small_cluster(1, 4), training, space, pp, 2)


def _spec(tmp_path, training: str = "", extra: str = ""):
    """A Mistral-7B v0.1 spec at 16k tokens on 16 H100 (its window binds)."""
    from autopar_opt.spec import load_spec
    path = tmp_path / "s.yaml"
    path.write_text(f"""
model: {{hf_config: {REPO / 'model_zoo' / 'hf' / 'mistral-7b-v0.1.json'}}}
cluster: {{zoo: 2x8-h100}}
training: {{global_batch_size: 32, seq_len: 16384{training}}}
{extra}
""")
    return load_spec(path)


def test_megatron_context_parallelism_needs_a_ring_free_exchange(tmp_path):
    """Transformer Engine refuses context parallelism over windowed layers with the
    ring exchange (attn_forward_func_with_cp): offered with the default p2p runtime, it
    is a spec error on search.cp_degrees naming the fix; with all_gather it searches."""
    from autopar_opt.spec import SpecError
    with pytest.raises(SpecError) as err:
        _spec(tmp_path, extra="search: {cp_degrees: [1, 2]}")
    (problem,) = err.value.problems
    assert problem.key == "search.cp_degrees" and "all_gather or a2a" in problem.fix
    spec = _spec(tmp_path, ", runtime_options: {cp_comm_type: all_gather}",
                 "search: {cp_degrees: [1, 2]}")
    assert spec.space.target.framework == "megatron" and 2 in spec.space.cp_degrees


def test_torchtitan_cannot_build_a_windowed_model(tmp_path):
    """torchtitan's Llama 3 / Qwen3 models take no window: a stated target is an error,
    a torchtitan runtime falls back to the free space and says why."""
    from autopar_opt.spec import SpecError
    with pytest.raises(SpecError) as err:
        _spec(tmp_path, extra="target: torchtitan")
    assert err.value.problems[0].key == "target"
    assert "no attention window" in err.value.problems[0].rule
    spec = _spec(tmp_path, ", runtime: torchtitan")
    assert spec.space.target.free
    assert any("sliding-window attention" in n for n in spec.notices)


def test_exports_state_the_window(tmp_path):
    """Megatron-LM: --window-size w-1,0 and, for windows on some layers only, the
    skip pattern (1 = windowed layer); torchtitan refuses; the solve summary says it."""
    from autopar_opt.export import plan_view, rules_for
    from autopar_opt.export.megatron import model_args
    from support.cli import run_cli
    on = dict(QWEN3, use_sliding_window=True, sliding_window=4096, max_window_layers=28)
    graph = build_hf_graph(on, 8192)
    spec = _spec(tmp_path, extra="plan: {tp: 2, pp: 1, zero: 1, micro_batch_size: 1}")
    view = replace(plan_view(spec.plan, spec.graph, spec.cluster, spec.training), arch=graph.arch)
    args = model_args(view)
    assert args[args.index("--window-size") + 1] == "4095,0"
    assert args[args.index("--window-attn-skip-freq") + 1] == "([0]*28+[1]*8)"
    assert any("no attention window" in r for r in rules_for("torchtitan", view, True, "0.3"))
    assert not rules_for("megatron", view, True, "")
    cp = replace(view, cp=2, cp_comm_type="p2p")
    assert any("cp_comm_type p2p" in r for r in rules_for("megatron", cp, True, ""))
    out = tmp_path / "solve.yaml"
    out.write_text((tmp_path / "s.yaml").read_text().replace(
        "plan: {tp: 2, pp: 1, zero: 1, micro_batch_size: 1}",
        "search: {pp_degrees: [1], tp_degrees: [2], zero_levels: [1]}"))
    code, text = run_cli("solve", out, "--out", tmp_path / "o")
    assert code == 0, text
    assert "sliding-window attention of 4,096 keys per query on 32 of 32 attention layers" in text


def test_a_window_covering_the_sequence_is_none():
    """A layer list may state a window at least as long as its sequence: it changes no
    pair, and the model is not called windowed."""
    from autopar_opt.ir.graph import LayerGraph
    s = 2048
    layers = [replace(_block(0, s=s), name="a", attn_window=4096),
              replace(_block(0, s=s), name="b", attn_window=512)]
    graph = LayerGraph.chain("g", layers, seq_len=s, causal=True)
    assert graph.attention_windows() == [0, 512]
    assert window_share(s, 4096) == 1.0
