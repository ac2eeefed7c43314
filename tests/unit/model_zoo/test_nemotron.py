"""Nemotron-4 and Minitron from their Hugging Face configs (``model_type`` nemotron):
parameter counts against the published ones (Minitron-4B's safetensors total; the
Nemotron-4 reports' embedding / non-embedding split), a block by hand, the launch-time
architecture and the Megatron-LM flags NVIDIA's own launch settings use."""

from __future__ import annotations

import json

import pytest

from autopar_opt.export.megatron import model_args
from autopar_opt.ir.target import megatron_model_problem
from autopar_opt.model_zoo.hf_config import build_hf_graph
from support.paths import REPO

HF = REPO / "model_zoo" / "hf"


def _minitron() -> dict:
    return json.loads((HF / "minitron-4b-base.json").read_text())


def _nemotron4(hidden: int, layers: int, heads: int, ffn: int) -> dict:
    """A Nemotron-4 config of the reports' dimensions (8 KV heads, vocabulary 256,000)."""
    return {"model_type": "nemotron", "hidden_size": hidden, "num_hidden_layers": layers,
            "num_attention_heads": heads, "num_key_value_heads": 8, "intermediate_size": ffn,
            "vocab_size": 256000, "max_position_embeddings": 4096, "hidden_act": "relu2",
            "partial_rotary_factor": 0.5, "tie_word_embeddings": False}


def _split(graph) -> tuple[int, int]:
    """(embedding, non-embedding) parameters: the input table and the untied output
    matrix against everything else (the reports' convention)."""
    h, v = graph.arch.hidden, graph.arch.vocab
    embedding = 2 * v * h
    return embedding, graph.total_params() - embedding


def test_minitron_4b_block_by_hand():
    """One block: Q and O 3072 x (24·128), K and V 3072 x (8·128), a plain MLP of two
    3072 x 9216 matrices (squared ReLU: up_proj, down_proj), two LayerNorm1P of weight
    and bias, no biases elsewhere."""
    block = build_hf_graph(_minitron(), 4096).layers[1]
    assert block.params == 2 * 3072 * 3072 + 2 * 3072 * 1024 + 2 * 3072 * 9216 + 2 * 2 * 3072


def test_minitron_4b_total_is_the_published_count():
    """4,190,509,056 by hand (32 blocks, two 256,000 x 3072 tables, the final norm's two
    vectors): nvidia/Minitron-4B-Base's 8.38 GB of bfloat16 weights, 4.19B parameters
    (model_zoo/hf/SOURCES.yaml)."""
    per_block = 2 * 3072 * 3072 + 2 * 3072 * 1024 + 2 * 3072 * 9216 + 4 * 3072
    by_hand = 32 * per_block + 2 * 256000 * 3072 + 2 * 3072
    assert by_hand == 4_190_509_056
    assert build_hf_graph(_minitron(), 4096).total_params() == by_hand


@pytest.mark.parametrize("dims, embedding, non_embedding", [
    # Nemotron-4 340B report (arXiv 2406.11704) Sec. 2.1: 9.4B embedding, 331.6B non-embedding
    ((18432, 96, 96, 73728), 9.4e9, 331.6e9),
    # Nemotron-4 15B report (arXiv 2402.16819) Table 1: 12.5B non-embedding (its 3.2B
    # embedding is 3.15B at 256,000 x 6,144 x 2: checked to 0.1B below)
    ((6144, 32, 48, 24576), 3.15e9, 12.5e9),
])
def test_nemotron4_reports_split(dims, embedding, non_embedding):
    graph = build_hf_graph(_nemotron4(*dims), 4096)
    got = _split(graph)
    assert abs(got[0] - embedding) < 0.05e9 and abs(got[1] - non_embedding) < 0.05e9, got


def test_the_plain_mlp_has_one_matrix_fewer_than_swiglu():
    """A squared-ReLU MLP has two matrices: its forward GEMM FLOPs are 2/3 of a SwiGLU's of
    the same width (three matrices), the attention unchanged."""
    plain = build_hf_graph(_minitron(), 4096).layers[1]
    gated_cfg = dict(_minitron(), model_type="llama", hidden_act="silu", rms_norm_eps=1e-5)
    gated = build_hf_graph(gated_cfg, 4096).layers[1]
    mlp_flops = 2 * 4096 * 3072 * 9216          # one matrix, forward, one sample
    assert gated.flops_fwd - plain.flops_fwd == pytest.approx(mlp_flops, rel=0.02)


def test_architecture_and_megatron_flags():
    """The launch-time record and the flags NVIDIA's Megatron-LM settings for
    Nemotron-Mini-4B use (examples/post_training/modelopt/conf/nvidia/
    Nemotron-Mini-4B-Instruct.sh: --squared-relu --apply-layernorm-1p --rotary-percent
    0.5 --disable-bias-linear --untie-embeddings-and-output-weights, LayerNorm)."""
    graph = build_hf_graph(_minitron(), 4096)
    a = graph.arch
    assert (a.gated, a.activation, a.norm, a.zero_centered_norm, a.rotary_fraction, a.tied,
            a.biases) == (False, "relu2", "layernorm", True, 0.5, False, False)
    assert megatron_model_problem(a) is None
    view = type("View", (), {"arch": a, "seq_len": 4096})()
    args = model_args(view)
    for flag in ("--squared-relu", "--apply-layernorm-1p", "--disable-bias-linear",
                 "--untie-embeddings-and-output-weights"):
        assert flag in args
    assert args[args.index("--rotary-percent") + 1] == "0.5"
    assert "--swiglu" not in args and "--normalization" not in args   # LayerNorm: the default


def test_a_plain_mlp_activation_megatron_has_no_flag_for_is_a_target_problem():
    """hidden_act silu on Nemotron's plain MLP: Megatron-LM's flags give GELU, squared ReLU
    or gated forms only, so a Megatron target says why instead of exporting GELU."""
    graph = build_hf_graph(dict(_minitron(), hidden_act="silu"), 4096)
    problem = megatron_model_problem(graph.arch)
    assert problem is not None and "'silu'" in problem and "--squared-relu" in problem


@pytest.mark.parametrize("key, value, words", [
    ("partial_rotary_factor", 2, "must be a number in (0, 1]"),
    ("partial_rotary_factor", "half", "must be a number in (0, 1]"),
    ("hidden_act", 5, "is not an activation name"),
    ("attention_bias", "no", "is not true or false"),
    ("tie_word_embeddings", "yes", "is not true or false"),
])
def test_a_bad_value_is_refused_with_its_key(tmp_path, key, value, words):
    """A string switch would read as true ("no" is truthy) and a rotary share above 1 would
    reach --rotary-percent: the file, key, value, rule and fix, before anything is built."""
    from autopar_opt.model_zoo.hf_config import HfConfigError, load_hf_config
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(_minitron(), **{key: value})))
    with pytest.raises(HfConfigError) as err:
        load_hf_config(path)
    text = str(err.value)
    assert str(path) in text and f"{key} = " in text and words in text and "(fix:" in text


def test_granite_is_llama_with_its_multipliers_said():
    """Granite 3.1 2B (GraniteConfig: Llama's block, tied output): 2,533,531,648 by hand,
    its 5.07 GB of bfloat16 safetensors; the embedding, residual and logit multipliers are
    element-wise work the cost model does not price, said with the model; Megatron-LM's
    flags cannot state them, so a Megatron target says why."""
    cfg = json.loads((HF / "granite-3.1-2b-base.json").read_text())
    graph = build_hf_graph(cfg, 4096)
    per_block = 2 * 2048 * 2048 + 2 * 2048 * 512 + 3 * 2048 * 8192 + 2 * 2048
    assert graph.total_params() == 40 * per_block + 49155 * 2048 + 2048 == 2_533_531_648
    assert graph.arch.unpriced == ("embedding_multiplier 12 on the embedding output",
                                   "residual_multiplier 0.22 on each residual branch",
                                   "logits_scaling 8 on the output logits (divided)")
    assert "multipliers" in megatron_model_problem(graph.arch)
    assert graph.arch.dropout == (0.0, 0.1)
