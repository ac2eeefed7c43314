"""Cohere2 (Command R7B, Command A) from its Hugging Face config: the published parameter
count, the layers its sliding window covers and their attention FLOPs by hand. Before, the
family was refused as an unknown model_type (QA round 36)."""

from __future__ import annotations

import json

from autopar_opt.model_zoo.hf_config import build_hf_graph
from support.paths import REPO

CONFIG = json.loads((REPO / "tests" / "data" / "hf_reconstructed" / "command-r7b-12-2024.json").read_text())


def _blocks(graph):
    return [layer for layer in graph.layers if layer.name.startswith("block")]


def test_command_r7b_builds_its_published_count():
    """Hugging Face's page for CohereForAI/c4ai-command-r7b-12-2024: 8.03B parameters. By
    hand: Q and O 4096^2 each, K and V 4096 x 8 x 128 each, SwiGLU 3 x 4096 x 14336, one
    weight-only LayerNorm shared by the parallel attention and MLP; 32 blocks, a tied
    256,000 x 4096 table and the final norm."""
    graph = build_hf_graph(CONFIG, 8192)
    block = 2 * 4096 ** 2 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 4096
    assert graph.total_params() == 32 * block + 256_000 * 4096 + 4096 == 8_028_033_024
    assert abs(graph.total_params() / 8.03e9 - 1) < 0.01
    assert graph.arch.family == "cohere2" and graph.arch.parallel_block and graph.arch.tied
    assert not graph.arch.qk_norm


def test_every_fourth_layer_is_global_and_the_others_keep_4096_keys():
    """Cohere2Attention: no window where (layer_idx + 1) % sliding_window_pattern == 0
    (pattern 4): 24 of 32 layers windowed. The attention core of a windowed layer at 8,192
    tokens keeps 4096·4097/2 + 4096·4096 = 25,167,872 of the causal core's 8192·8193/2 =
    33,558,528 query-key pairs: its forward FLOPs are the global layer's less that share
    of 2·s²·a·(d_qk + d_v) = 2·8192²·32·256."""
    graph = build_hf_graph(CONFIG, 8192)
    blocks = _blocks(graph)
    windows = [w for w in graph.attention_windows()]
    assert windows == [0 if (i + 1) % 4 == 0 else 4096 for i in range(32)]
    core = 2 * 8192 ** 2 * 32 * 256
    kept = (4096 * 4097 // 2 + 4096 * 4096) / (8192 * 8193 / 2)
    assert blocks[3].flops_fwd - blocks[0].flops_fwd == core * (1 - kept)
    stated = build_hf_graph(dict(CONFIG, sliding_window_pattern=2), 8192)
    assert sum(1 for w in stated.attention_windows() if w) == 16


def test_use_qk_norm_is_commands_r_plus_not_cohere2():
    """Cohere2's configs carry Cohere's use_qk_norm key, which Cohere2's modelling never
    reads: a true builds no QK-norm (Command R+'s cohere does)."""
    plain = build_hf_graph(CONFIG, 1024).total_params()
    assert build_hf_graph(dict(CONFIG, use_qk_norm=True), 1024).total_params() == plain
    cohere = build_hf_graph(dict(CONFIG, model_type="cohere", use_qk_norm=True), 1024)
    assert cohere.total_params() == plain + 32 * (32 + 8) * 128
