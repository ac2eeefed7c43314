"""GLM-4 (model_type glm) and GLM-4-0414 (glm4) from their Hugging Face configs: the
published parameter counts by hand, the blocks' Q/K/V-only biases, grouped keys and
GLM-4-0414's post-norms, and what the Megatron exports cannot state. Before, both were
refused as unknown model_types (QA round 36)."""

from __future__ import annotations

import json

from autopar_opt.ir.target import megatron_model_problem
from autopar_opt.model_zoo.hf_config import build_hf_graph
from support.paths import REPO

HF = REPO / "model_zoo" / "hf"


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
