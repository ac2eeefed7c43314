"""Model zoo: published parameter counts, FLOP formulas, DAG structure, errors.

Oracles are published numbers (papers / model cards) and closed-form formulas
written independently of the builders; the builders go through
``model_zoo/transformer.py``'s term-by-term expansions.
"""

from __future__ import annotations

import math

import networkx as nx
import pytest

from autopar_opt.ir.graph import LayerKind
from autopar_opt.model_zoo import build_model, list_models, model_dims

#: Published parameter counts (paper tables / model cards), in parameters.
PUBLISHED_PARAMS = {
    # Narayanan et al. 2021, Table 1
    "gpt-1.7b": 1.7e9, "gpt-3.6b": 3.6e9, "gpt-7.5b": 7.5e9, "gpt-18b": 18.4e9,
    "gpt-39b": 39.1e9, "gpt-76b": 76.1e9, "gpt-145b": 145.6e9, "gpt-310b": 310.1e9,
    "gpt-530b": 529.6e9, "gpt-1t": 1008.0e9,
    "gpt3-175b": 174.6e9,          # Brown et al. 2020
    "llama-7b": 6.74e9,            # LLaMA HF card (6,738,415,616)
    "llama2-7b": 6.74e9, "llama2-13b": 13.0e9, "llama2-70b": 69.0e9,  # Llama-2 cards
    "llama3-8b": 8.03e9, "llama3-70b": 70.6e9, "llama3-405b": 405.8e9,  # Llama-3 cards
    "vit-huge-32": 632e6,          # Dosovitskiy et al. 2021, Table 1 (ViT-H)
    "inception-v3": 23.8e6,        # torchvision / Keras, no auxiliary head
}

REQUIRED = set(PUBLISHED_PARAMS) | {"debug", "bert-huge-32", "t5-large-32", "swin-huge-32"}


def test_every_required_model_is_listed_with_description_and_source():
    infos = {m.name: m for m in list_models()}
    assert REQUIRED <= set(infos), REQUIRED - set(infos)
    for info in infos.values():
        assert info.description.strip() and info.source.strip(), info.name
        assert build_model(info.name).is_chain() == info.is_chain, info.name


@pytest.mark.parametrize("name", sorted(PUBLISHED_PARAMS))
def test_parameter_count_matches_published(name):
    got = build_model(name).total_params()
    assert got == pytest.approx(PUBLISHED_PARAMS[name], rel=0.03)


def test_bert_huge_params_match_closed_form():
    """BERT: L·(12h² + 13h) + (V + s)·h + 2h (final LN of the MLM head).

    Devlin et al. 2019; no published count exists for the UniAP 32-layer
    variant, so the oracle is the standard closed form (≈0.67B).
    """
    d = model_dims("bert-huge-32")
    L, h, V, s = d["num_layers"], d["hidden"], d["vocab"], d["seq_len"]
    expected = L * (12 * h * h + 13 * h) + (V + s) * h + 2 * h
    assert build_model("bert-huge-32").total_params() == pytest.approx(expected, rel=1e-3)
    assert 0.6e9 < expected < 0.7e9


def test_t5_params_match_closed_form():
    """T5 (no biases, shared embedding): encoder block 4h²+2hf, decoder block
    8h²+2hf (self + cross attention), one V·h table; norms ~h per sub-layer."""
    d = model_dims("t5-large-32")
    h, f, V = d["hidden"], d["ffn_hidden"], d["vocab"]
    expected = (d["encoder_layers"] * (4 * h * h + 2 * h * f)
                + d["decoder_layers"] * (8 * h * h + 2 * h * f) + V * h)
    assert build_model("t5-large-32").total_params() == pytest.approx(expected, rel=0.01)


def test_swin_params_match_closed_form():
    """Swin: blocks 12C²+13C (+ relative bias table), merges 8C², patch conv 48C,
    head 8C·classes (Liu et al. 2021)."""
    d = model_dims("swin-huge-32")
    c, total = d["embed_dim"], 48 * d["embed_dim"]
    for j, depth in enumerate(d["depths"]):
        if j:
            total += 8 * c * c
            c *= 2
        total += depth * 12 * c * c
    total += c * d["num_classes"]
    assert build_model("swin-huge-32").total_params() == pytest.approx(total, rel=0.01)


def korthikanti_eq7(L: int, h: int, s: int, V: int, batch: int = 1) -> float:
    """Model FLOPs per iteration: 72·B·s·L·h²·(1 + s/(6h) + V/(12·L·h))
    (Korthikanti et al. 2022, Eq. 7; Narayanan et al. 2021, Eq. 3 without recompute)."""
    return 72 * batch * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h))


@pytest.mark.parametrize("name", sorted(n for n in PUBLISHED_PARAMS if n.startswith("gpt")))
def test_gpt_flops_match_korthikanti_eq7(name):
    d = model_dims(name)
    expected = korthikanti_eq7(d["num_layers"], d["hidden"], d["seq_len"], d["vocab"])
    assert build_model(name).flops_per_sample() == pytest.approx(expected, rel=0.01)


@pytest.mark.parametrize("name", ["gpt-1.7b", "gpt-530b"])
def test_gpt_params_match_narayanan_eq2(name):
    """P = 12·L·h²·(1 + 13/(12h) + (V+s)/(12·L·h)) (Narayanan et al. 2021, Eq. 2)."""
    d = model_dims(name)
    L, h, V, s = d["num_layers"], d["hidden"], d["vocab"], d["seq_len"]
    expected = 12 * L * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * L * h))
    assert build_model(name).total_params() == pytest.approx(expected, rel=1e-4)


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_graph_is_topologically_ordered_dag(name):
    g = build_model(name)
    assert nx.is_directed_acyclic_graph(g.nx)
    assert all(u < v for u, v in g.edge_indices())
    assert nx.is_weakly_connected(g.nx)
    sinks = [n for n in g.nx if g.nx.out_degree(n) == 0]
    assert sinks == [g.layers[-1].name]  # a single output: the head


def test_t5_has_encoder_to_every_decoder_cross_edge():
    g = build_model("t5-large-32")
    d = model_dims("t5-large-32")
    enc_last = f"enc{d['encoder_layers'] - 1:03d}"
    decoders = [layer.name for layer in g if layer.name.startswith("dec0")]
    assert len(decoders) == d["decoder_layers"] == 16
    assert all(g.nx.has_edge(enc_last, dec) for dec in decoders)
    assert not g.is_chain()
    # encoder blocks are self-attention only; decoder blocks add cross-attention and its
    # norm (T5LayerNorm: a weight only, h)
    enc_block, dec_block = g.layers[g.index("enc000")], g.layers[g.index("dec000")]
    assert dec_block.params - enc_block.params == 4 * 1024 * 1024 + 1024


def test_inception_is_a_large_dag_with_published_totals():
    """torchvision: 5.71 GMAC per 299² image (≈11.4 GFLOPs forward), 23.8M params."""
    g = build_model("inception-v3")
    assert not g.is_chain() and len(g) >= 100
    kinds = {layer.kind for layer in g}
    assert {LayerKind.conv, LayerKind.pool, LayerKind.concat} <= kinds
    conv_fc = sum(l.flops_fwd for l in g if l.kind in (LayerKind.conv, LayerKind.linear))
    assert conv_fc == pytest.approx(2 * 5.71e9, rel=0.10)
    assert g.total_params() == pytest.approx(23.8e6, rel=0.10)
    assert max(g.nx.out_degree(n) for n in g.nx) == 4  # an Inception-A/C/E input fans out


def test_inception_hand_checked_layers():
    """Stem conv 3→32, 3×3 stride 2 on 299² → 149²: 2·3·32·9·149² FLOPs;
    Mixed_5b concatenates 64+64+96+32 = 256 channels at 35²; Mixed_7c outputs 2048 at 8²."""
    g = build_model("inception-v3")
    layer = {l.name: l for l in g}
    assert layer["Conv2d_1a_3x3"].flops_fwd == 2 * 3 * 32 * 9 * 149 * 149
    assert layer["Conv2d_1a_3x3"].params == 3 * 32 * 9 + 2 * 32
    assert layer["Mixed_5b.concat"].output_bytes == 2 * 256 * 35 * 35
    assert layer["Mixed_7c.concat"].output_bytes == 2 * 2048 * 8 * 8
    assert layer["Mixed_5b.branch1x1"].max_tp == 8 and layer["Conv2d_3b_1x1"].max_tp == 8
    assert layer["Mixed_5b.branch_pool"].max_tp == 8  # 32 channels, capped at 8
    assert g.nx.in_degree("Mixed_5b.concat") == 4


def test_vit_tokens_and_fixed_sequence():
    g = build_model("vit-huge-32")
    assert g.seq_len == (224 // 14) ** 2 + 1 == 257
    blocks = [l for l in g if l.kind == LayerKind.transformer_block]
    assert len(blocks) == 32
    with pytest.raises(ValueError, match=r"vit-huge-32.*image.*seq_len=1024"):
        build_model("vit-huge-32", seq_len=1024)
    smaller = build_model("vit-huge-32", overrides={"image_size": 112})
    assert smaller.seq_len == 8 * 8 + 1


def test_swin_is_non_uniform_with_window_attention_flops():
    """A Swin block on N tokens, C channels, M×M windows: forward FLOPs
    2·(4NC² + 2M²NC) (Liu et al. 2021, Eq. 2, multiply-adds ×2) + 16NC² (4C MLP)."""
    g = build_model("swin-huge-32")
    blocks = [l for l in g if l.kind == LayerKind.transformer_block]
    assert len(blocks) == 32
    assert [l.name for l in g if l.name.startswith("merge")] == ["merge1", "merge2", "merge3"]
    assert len({l.signature() for l in blocks}) == 4  # one per stage width
    n, c, m = 56 * 56, 352, 7
    expected = 2 * (4 * n * c * c + 2 * m * m * n * c) + 16 * n * c * c
    assert g.layers[g.index("s0b00")].flops_fwd == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match="swin-huge-32"):
        build_model("swin-huge-32", seq_len=512)


def test_seq_len_override_rescales_llama():
    """Llama block FLOPs are 2s·h·(h+2h_kv) + 4s²h + 2sh² + 6shf: check the s² term."""
    a, b = build_model("llama2-7b"), build_model("llama2-7b", seq_len=8192)
    assert a.seq_len == 4096 and b.seq_len == 8192
    d = model_dims("llama2-7b")
    h, f = d["hidden"], d["ffn_hidden"]
    blk = lambda s: 2 * s * h * 3 * h + 4 * s * s * h + 2 * s * h * h + 6 * s * h * f  # noqa: E731
    assert b.layers[1].flops_fwd == pytest.approx(blk(8192), rel=1e-12)
    assert a.layers[1].flops_fwd == pytest.approx(blk(4096), rel=1e-12)


def test_overrides_change_the_graph():
    g = build_model("debug", overrides={"num_layers": 2, "hidden": 128, "ffn_hidden": 512})
    assert len(g) == 4
    assert g.layers[1].params == 12 * 128 * 128 + 13 * 128
    t5 = build_model("t5-large-32", overrides={"encoder_layers": 2, "decoder_layers": 3})
    assert len(t5) == 1 + 2 + 1 + 3 + 1
    assert build_model("debug").layers[1].params == 12 * 256 * 256 + 13 * 256  # defaults intact


@pytest.mark.parametrize("kwargs, pattern", [
    (dict(name="no-such-model"), r"unknown model 'no-such-model'.*valid names:.*debug"),
    (dict(name="debug", overrides={"hiden": 64}),
     r"'debug'.*unknown override key 'hiden'.*allowed keys:.*hidden.*num_layers"),
    (dict(name="debug", overrides={"num_layers": 0}), r"'debug'.*num_layers = 0.*positive integer"),
    (dict(name="debug", overrides={"hidden": 2.5}), r"hidden = 2.5.*positive integer"),
    (dict(name="debug", overrides={"tied": "yes"}), r"tied = 'yes'.*true or false"),
    (dict(name="debug", overrides={"heads": 3}), r"hidden=256.*divisible by heads=3"),
    (dict(name="llama3-8b", overrides={"kv_heads": 5}), r"heads=32.*kv_heads=5"),
    (dict(name="debug", seq_len=-4), r"seq_len = -4.*positive integer"),
    (dict(name="debug", overrides=[("hidden", 1)]), r"overrides must be a dict"),
    (dict(name="inception-v3", overrides={"image_size": 32}), r"inception-v3.*larger image_size"),
    (dict(name="vit-huge-32", overrides={"patch_size": 15}), r"multiple of patch_size=15"),
    (dict(name="swin-huge-32", overrides={"depths": [2, 2]}), r"depths.*heads.*same length"),
])
def test_user_mistakes_raise_clear_value_errors(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        build_model(**kwargs)


def test_debug_model_is_tiny_and_priced_by_the_evaluator():
    """The debug model runs through the cost model: 2 stages × tp 4 on debug-2x4."""
    from autopar_opt.cost.evaluate import evaluate
    from autopar_opt.model_zoo import get_cluster
    from autopar_opt.ir.plan import uniform_plan
    from autopar_opt.ir.strategies import Strategy
    from autopar_opt.ir.training import Training

    g = build_model("debug")
    assert len(g) == 6 and g.total_params() < 5e6
    plan = uniform_plan([l.name for l in g], 2, Strategy(dp=1, tp=4), microbatches=4)
    metrics = evaluate(plan, g, get_cluster("debug-2x4"), Training(8, seq_len=g.seq_len))
    assert metrics.feasible and math.isfinite(metrics.iteration_time_s)
    assert metrics.iteration_time_s > 0


@pytest.mark.parametrize("name", ["t5-large-32", "inception-v3", "swin-huge-32", "vit-huge-32",
                                  "bert-huge-32"])
def test_every_family_is_priced_by_the_evaluator(name):
    """Each builder family's graph goes through evaluate() on a 2-stage dp=8 plan:
    an integration check that the zoo's Layer fields fit the cost model (feasible,
    finite time, 0 < MFU < 1)."""
    from autopar_opt.cost.evaluate import evaluate
    from autopar_opt.model_zoo import get_cluster
    from autopar_opt.ir.plan import uniform_plan
    from autopar_opt.ir.strategies import Strategy
    from autopar_opt.ir.training import Training

    g = build_model(name)
    plan = uniform_plan([l.name for l in g], 2, Strategy(dp=8, tp=1), microbatches=4)
    m = evaluate(plan, g, get_cluster("2x8-a100-40"), Training(64, seq_len=g.seq_len))
    assert m.feasible and math.isfinite(m.iteration_time_s) and 0 < m.mfu < 1
