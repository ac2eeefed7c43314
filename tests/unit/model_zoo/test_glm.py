"""GLM-4 (model_type glm) and GLM-4-0414 (glm4) from their Hugging Face configs: the
published parameter counts by hand, the blocks' Q/K/V-only biases, grouped keys and
GLM-4-0414's post-norms, and what the Megatron exports cannot state. Before, both were
refused as unknown model_types (QA round 36)."""

from __future__ import annotations

import json

from autopar_opt.ir.target import megatron_model_problem
from autopar_opt.model_zoo.hf_config import build_hf_graph
from support.paths import REPO

HF = REPO / "tests" / "data" / "hf_reconstructed"


def _cfg(name: str) -> dict:
    return json.loads((HF / f"{name}.json").read_text())


def _block(graph):
    return next(layer for layer in graph.layers if layer.name == "block000")


#: per block by hand: Q and O 4096^2 each, K and V 4096 x 2 x 128 each, Q/K/V biases
#: (32 + 2 x 2) x 128 (o_proj has none: GlmAttention), a fused 3 x 4096 x 13696 SwiGLU,
#: two RMSNorm vectors (four in GLM-4-0414: post_self_attn_layernorm, post_mlp_layernorm)
BLOCK = 2 * 4096 ** 2 + 2 * 4096 * 256 + 36 * 128 + 3 * 4096 * 13696 + 2 * 4096
TABLES = 2 * 151_552 * 4096 + 4096          # untied input and output tables, final norm


def test_glm_4_9b_builds_its_published_count():
    """Hugging Face's pages for THUDM/glm-4-9b-chat-hf and THUDM/GLM-4-9B-0414: 9.4B."""
    chat, v0414 = build_hf_graph(_cfg("glm-4-9b-chat-hf"), 4096), \
        build_hf_graph(_cfg("glm-4-9b-0414"), 4096)
    assert chat.total_params() == 40 * BLOCK + TABLES == 9_399_951_360
    assert v0414.total_params() == 40 * (BLOCK + 2 * 4096) + TABLES == 9_400_279_040
    for graph in (chat, v0414):
        assert abs(graph.total_params() / 9.4e9 - 1) < 0.01
        assert graph.arch.qkv_bias and not graph.arch.attn_bias and not graph.arch.tied
        assert graph.arch.rotary_fraction == 0.5 and graph.arch.kv_heads == 2
    assert v0414.arch.post_norms and not chat.arch.post_norms


def test_grouped_keys_are_priced_at_two_heads():
    """Two key/value heads (GlmConfig's default too): the activation bytes a block keeps
    for K and V are 2·s·2·kv·128 (2-byte elements), so the same block with 32 key/value
    heads keeps 2·s·2·30·128 more at s = 4096; an absent key takes the class's 2."""
    cfg = _cfg("glm-4-9b-chat-hf")
    gqa = _block(build_hf_graph(cfg, 4096)).act_bytes
    mha = _block(build_hf_graph(dict(cfg, num_key_value_heads=32), 4096)).act_bytes
    assert mha - gqa == 2 * 4096 * 2 * 30 * 128
    absent = dict(cfg)
    absent.pop("num_key_value_heads")
    assert build_hf_graph(absent, 4096).total_params() == 40 * BLOCK + TABLES


def test_megatron_cannot_state_glms_rope_or_its_post_norms():
    assert "interleaved" in megatron_model_problem(build_hf_graph(_cfg("glm-4-9b-chat-hf"),
                                                                  4096).arch)
    assert "norms after" in megatron_model_problem(build_hf_graph(_cfg("glm-4-9b-0414"),
                                                                  4096).arch)


def test_glm_4_5_air_builds_its_published_totals_and_says_its_mtp_layer():
    """GLM-4.5 Team 2025 (arXiv 2508.06471): GLM-4.5-Air has 106B parameters, 12B active.
    By hand: attention 2 x 4096 x 96 x 128 + 2 x 4096 x 8 x 128 with (96 + 16) x 128
    Q/K/V biases; layer 0 a 3 x 4096 x 10944 SwiGLU; 45 MoE layers of 128 routed + 1
    shared experts of 3 x 4096 x 1408, a 128 x 4096 router and its 128 expert biases;
    two norms per block; untied 151,552 x 4096 tables and the final norm. The
    multi-token-prediction layer (num_nextn_predict_layers 1) is not built, and said."""
    graph = build_hf_graph(_cfg("glm-4.5-air"), 4096)
    attn = 2 * 4096 * 96 * 128 + 2 * 4096 * 8 * 128 + 112 * 128
    expert = 3 * 4096 * 1408
    moe = attn + 129 * expert + 128 * 4096 + 128 + 2 * 4096
    dense = attn + 3 * 4096 * 10944 + 2 * 4096
    total = dense + 45 * moe + 2 * 151_552 * 4096 + 4096
    assert graph.total_params() == total == 106_852_251_264
    assert abs(total / 106e9 - 1) < 0.01
    active_no_input = dense + 45 * (moe - 120 * expert) + 151_552 * 4096 + 4096
    assert 12e9 <= active_no_input < 13e9          # "12B": 12.80B without the input table
    arch = graph.arch
    assert (arch.num_experts, arch.top_k, arch.moe_ffn_hidden, arch.shared_ffn) == \
        (128, 8, 1408, 1408)
    assert arch.moe_layers == tuple(range(1, 46)) and arch.qkv_bias and not arch.qk_norm
    assert arch.router.score == "sigmoid" and arch.router.expert_bias
    assert any("GLM-4.5's multi-token-prediction" in a for a in graph.assumed)
    qk = build_hf_graph(dict(_cfg("glm-4.5-air"), use_qk_norm=True), 4096)
    assert qk.total_params() == total + 46 * 2 * 128 and qk.arch.qk_norm
