"""OLMoE from its Hugging Face config: the published totals by hand, the full-width QK-norm,
Qwen2-MoE's router, and what is said rather than priced. Before, the family was refused as
an unknown model_type (QA round 36)."""

from __future__ import annotations

import json

from autopar_opt.cli.model import model_summary
from autopar_opt.ir.target import megatron_model_problem
from autopar_opt.model_zoo.hf_config import build_hf_graph
from support.paths import REPO

CONFIG = json.loads((REPO / "tests" / "data" / "hf_reconstructed" / "olmoe-1b-7b-0924.json").read_text())


def test_olmoe_builds_its_published_totals():
    """Muennighoff et al. 2024 (arXiv 2409.02060): 6.9B total, 1.3B active. By hand per
    block: 4 x 2048^2 attention, a QK-norm over the whole Q and K (2 x 2048; OlmoeAttention
    q_norm, k_norm), 64 SwiGLU experts of 3 x 2048 x 1024, a 64 x 2048 router, two norms;
    16 blocks, untied 50,304 x 2048 tables, the final norm. Active: 8 of the 64 experts."""
    graph = build_hf_graph(CONFIG, 4096)
    expert = 3 * 2048 * 1024
    block = 4 * 2048 ** 2 + 2 * 2048 + 64 * expert + 64 * 2048 + 2 * 2048
    tables = 2 * 50_304 * 2048 + 2048
    assert graph.total_params() == 16 * block + tables == 6_919_161_856
    assert abs(graph.total_params() / 6.9e9 - 1) < 0.01
    active = model_summary(graph)["params_active"]
    assert active == 16 * (block - 56 * expert) + tables
    assert round(active / 1e8) == 13                      # "1.3B": 1.28B
    arch = graph.arch
    assert (arch.num_experts, arch.top_k, arch.moe_ffn_hidden, arch.shared_ffn) == \
        (64, 8, 1024, 0)
    assert arch.qk_norm and arch.router is not None and not arch.router.renormalise
    assert "QK-norm over the whole projections" in megatron_model_problem(arch)


def test_attention_bias_is_built_and_clip_qkv_said():
    """OlmoeAttention's attention_bias puts biases on Q, K, V and O (4 x 2048 per block);
    a clip_qkv clamp is element-wise work, said with the model, not priced."""
    plain = build_hf_graph(CONFIG, 4096)
    other = build_hf_graph(dict(CONFIG, attention_bias=True, clip_qkv=8.0), 4096)
    assert other.total_params() - plain.total_params() == 16 * 4 * 2048
    assert other.arch.attn_bias and other.arch.unpriced == ("clip_qkv 8 on Q, K and V",)
    assert plain.arch.unpriced == ()
