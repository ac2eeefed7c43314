"""T5 and ViT parameter counts from the Hugging Face module shapes, by hand.

T5 v1.0 (``modeling_t5.py``): ``T5LayerNorm`` has a weight only (RMS-style), one per
sub-layer and a ``final_layer_norm`` per stack; q, k, v, o and ``wi``, ``wo`` carry no
bias; the first block of each stack holds the ``relative_attention_num_buckets x
num_heads`` relative position bias; one ``shared`` table, tied to ``lm_head``.
ViT (``modeling_vit.py``): the patch Conv2d with its bias, cls token and position table;
query, key, value (``qkv_bias`` true), output, intermediate and output dense layers
all biased, two LayerNorms (weight and bias) per layer, a final one, the classifier.
"""

from __future__ import annotations

import json
from pathlib import Path

from autopar_opt.model_zoo.hf_config import build_hf_graph
from autopar_opt.model_zoo.registry import build_model, model_dims

HF = Path(__file__).resolve().parents[3] / "model_zoo" / "hf"


def _t5(h: int, f: int, v: int, heads: int, n_enc: int, n_dec: int, buckets: int = 32) -> int:
    enc_block = 4 * h * h + 2 * h * f + 2 * h          # self-attention + MLP + 2 norm weights
    dec_block = 8 * h * h + 2 * h * f + 3 * h          # + cross-attention and its norm
    return v * h + n_enc * enc_block + n_dec * dec_block + 2 * h + 2 * buckets * heads


def test_t5_large_from_its_config():
    """t5-large.json: d_model 1024, d_ff 4096, 16 heads, 24 + 24 layers, 32,128 tokens:
    737,668,096 parameters (the builder counted LayerNorm's weight and bias: 121,856 more)."""
    graph = build_hf_graph(json.loads((HF / "t5-large.json").read_text()), 512)
    assert _t5(1024, 4096, 32128, 16, 24, 24) == 737_668_096
    assert graph.total_params() == 737_668_096
    by_name = {layer.name: layer.params for layer in graph.layers}
    assert by_name["enc005"] == 4 * 1024 ** 2 + 2 * 1024 * 4096 + 2 * 1024
    assert by_name["dec000"] == 8 * 1024 ** 2 + 2 * 1024 * 4096 + 3 * 1024 + 32 * 16
    assert by_name["head"] == 1024                       # the decoder's final norm, weight only


def test_the_zoo_t5_counts_alike():
    d = model_dims("t5-large-32")
    want = _t5(d["hidden"], d["ffn_hidden"], d["vocab"], d["heads"], d["encoder_layers"],
               d["decoder_layers"])
    assert build_model("t5-large-32").total_params() == want


def test_vit_base_counts_its_biases():
    """vit-base-patch16-224: h = 768, f = 3072, 12 layers, 14 x 14 patches of 16 x 16 x 3,
    1000 labels. Embeddings 3·16²·768 + 768 + 768 + 197·768 = 742,656; a layer
    4(h² + h) + (h·f + f) + (f·h + h) + 2·2h = 7,087,872 (the qkv biases were counted
    already); final LayerNorm 2h and the classifier 768·1000 + 1000 (its bias was not):
    86,567,656 in all."""
    h, f = 768, 3072
    layer = 4 * (h * h + h) + (h * f + f) + (f * h + h) + 4 * h
    embed = 3 * 16 * 16 * h + h + h + 197 * h
    want = embed + 12 * layer + 2 * h + h * 1000 + 1000
    assert (embed, layer, want) == (742_656, 7_087_872, 86_567_656)
    graph = build_hf_graph(json.loads((HF / "vit-base-patch16-224.json").read_text()), None)
    assert graph.total_params() == want
