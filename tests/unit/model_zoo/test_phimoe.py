"""Phi-3.5-MoE from its Hugging Face config: the published totals by hand, LayerNorms and
biases, the window it states, and its SparseMixer router said rather than priced. Before,
the family was refused as an unknown model_type (QA round 36)."""

from __future__ import annotations

import json

from autopar_opt.cli.model import model_summary
from autopar_opt.ir.target import megatron_model_problem
from autopar_opt.model_zoo.hf_config import build_hf_graph
from support.paths import REPO

CONFIG = json.loads((REPO / "tests" / "data" / "hf_reconstructed" / "phi-3.5-moe.json").read_text())


def test_phi_3_5_moe_builds_its_published_totals():
    """microsoft/Phi-3.5-MoE-instruct: 41.9B parameters (the page), 6.6B active (the model
    card). By hand per block: 2 x 4096^2 + 2 x 4096 x 1024 attention with Q, K, V, O biases
    (4096 + 2 x 1024 + 4096), 16 SwiGLU experts of 3 x 4096 x 6400, a 16 x 4096 router, two
    LayerNorms of weight and bias; 32 blocks, untied 32,064 x 4096 tables, the lm_head's
    bias (lm_head_bias) and the final LayerNorm. Active: 2 of the 16 experts."""
    graph = build_hf_graph(CONFIG, 4096)
    expert = 3 * 4096 * 6400
    block = 2 * 4096 ** 2 + 2 * 4096 * 1024 + 10_240 + 16 * expert + 16 * 4096 + 4 * 4096
    tables = 2 * 32_064 * 4096 + 32_064 + 2 * 4096
    assert graph.total_params() == 32 * block + tables == 41_873_153_344
    assert abs(graph.total_params() / 41.9e9 - 1) < 0.01
    active = model_summary(graph)["params_active"]
    assert active == 32 * (block - 14 * expert) + tables
    assert abs(active / 6.6e9 - 1) < 0.01
    arch = graph.arch
    assert arch.norm == "layernorm" and arch.attn_bias and not arch.tied
    assert any("SparseMixer" in u for u in arch.unpriced)
    assert megatron_model_problem(arch) is not None
    assert build_hf_graph(dict(CONFIG, lm_head_bias=False), 4096).total_params() == \
        graph.total_params() - 32_064


def test_a_stated_window_is_built_on_every_layer():
    """PhimoeConfig's sliding_window (default none) windows every layer, as Mistral's: the
    published 131,072 changes nothing at 4,096 tokens; 2,048 windows all 32 layers."""
    assert not any(build_hf_graph(CONFIG, 4096).attention_windows())
    assert build_hf_graph(dict(CONFIG, sliding_window=2048), 4096).attention_windows() == \
        [2048] * 32


def test_an_lm_head_bias_that_is_not_a_boolean_is_refused(tmp_path):
    """Phi-3.5-MoE's lm_head_bias was read by truthiness (QA round 36): "false" (a string)
    built the 32,064 bias parameters it says are not there, exit 0. It is refused as every
    other switch is (hf_keys.BOOL_KEYS), naming the file, the key and the value."""
    from support.cli import run_cli

    path = tmp_path / "config.json"
    for value, code in ((False, 0), (True, 0), ("false", 2), (1.5, 2)):
        path.write_text(json.dumps(dict(CONFIG, lm_head_bias=value)))
        got, text = run_cli("model", path, "--seq-len", "512")
        assert got == code, text
        if code:
            assert f"{path}: lm_head_bias = {str(value)!r} is not true or false" in text, text
            assert "fix: write true or false" in text, text
