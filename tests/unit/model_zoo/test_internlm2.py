"""InternLM2 / InternLM2.5 from its Hugging Face config (the model repository's own
configuration class, read with trust_remote_code): the published parameter count by hand
and the ``bias`` switch on ``wqkv`` and ``wo``. Before, the family was refused as an unknown
model_type (QA round 36)."""

from __future__ import annotations

import json

from autopar_opt.model_zoo.hf_config import build_hf_graph
from support.paths import REPO

CONFIG = json.loads((REPO / "tests" / "data" / "hf_reconstructed" / "internlm2_5-7b.json").read_text())


def test_internlm2_5_7b_builds_its_published_count():
    """Hugging Face's page for internlm/internlm2_5-7b: 7.74B. By hand: Q and O 4096^2,
    K and V 4096 x 8 x 128 (one wqkv GEMM), SwiGLU 3 x 4096 x 14336, two RMSNorms;
    32 blocks, untied 92,544 x 4096 tables, the final norm."""
    graph = build_hf_graph(CONFIG, 4096)
    block = 2 * 4096 ** 2 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    assert graph.total_params() == 32 * block + 2 * 92_544 * 4096 + 4096 == 7_737_708_544
    assert abs(graph.total_params() / 7.74e9 - 1) < 0.01
    assert graph.arch.kv_heads == 8 and not graph.arch.tied and graph.assumed == ()
    assert not graph.arch.attn_bias


def test_bias_puts_biases_on_wqkv_and_wo_only():
    """modeling_internlm2.py: wqkv and wo take bias=config.bias, the MLP's w1, w2, w3 none:
    (32 + 2 x 8) x 128 + 4096 = 10,240 per block."""
    plain = build_hf_graph(CONFIG, 4096)
    biased = build_hf_graph(dict(CONFIG, bias=True), 4096)
    assert biased.total_params() - plain.total_params() == 32 * 10_240
    assert biased.arch.attn_bias and not biased.arch.mlp_bias
