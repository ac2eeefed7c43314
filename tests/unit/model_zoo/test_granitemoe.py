"""Granite 3.x MoE from its Hugging Face config: the published totals by hand, Mixtral's
router, tying as stated, Granite's multipliers said. Before, the family was refused as an
unknown model_type (QA round 36)."""

from __future__ import annotations

import json

from autopar_opt.cli.model import model_summary
from autopar_opt.ir.target import megatron_model_problem
from autopar_opt.model_zoo.hf_config import build_hf_graph
from support.paths import REPO

#: written from the model card's figures (tests/data/hf_reconstructed/SOURCES.yaml)
CONFIG = json.loads((REPO / "tests" / "data" / "hf_reconstructed"
                     / "granite-3.1-3b-a800m-base.json").read_text())


def test_granite_3b_a800m_builds_its_published_totals():
    """The model card of ibm-granite/granite-3.1-3b-a800m-base: 3.3B total, 800M active.
    By hand per block: 2 x 1536^2 + 2 x 1536 x 8 x 64 attention, 40 SwiGLU experts of
    3 x 1536 x 512, a 40 x 1536 router, two norms; 32 blocks, a tied 49,155 x 1536 table,
    the final norm. Active: 8 of the 40 experts, without the table."""
    graph = build_hf_graph(CONFIG, 4096)
    expert = 3 * 1536 * 512
    block = 2 * 1536 ** 2 + 2 * 1536 * 512 + 40 * expert + 40 * 1536 + 2 * 1536
    assert graph.total_params() == 32 * block + 49_155 * 1536 + 1536 == 3_298_793_472
    assert abs(graph.total_params() / 3.3e9 - 1) < 0.01
    active = model_summary(graph)["params_active_no_embedding"]
    assert active == 32 * (block - 32 * expert) + 1536
    assert 0.8e9 <= active < 0.9e9                        # "800M": 807M
    arch = graph.arch
    assert arch.tied and (arch.num_experts, arch.top_k, arch.moe_ffn_hidden) == (40, 8, 512)
    assert arch.router is None                           # softmax of the top-k logits
    assert any("residual_multiplier 0.22" in u for u in arch.unpriced)
    assert "scalar multipliers" in megatron_model_problem(arch)
    untied = build_hf_graph(dict(CONFIG, tie_word_embeddings=False), 4096)
    assert untied.total_params() - graph.total_params() == 49_155 * 1536
