"""Gemma, Gemma 2 and Gemma 3 (text) from their Hugging Face configs: parameter counts
against the published safetensors counts (exact), the block's extra norms, the layers
each default pattern windows, what is refused, what no framework target can state and
what the cost model says it does not price."""

from __future__ import annotations

import json

import pytest

from autopar_opt.cost.assumptions import cost_assumptions
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.training import Training
from autopar_opt.model_zoo.hf_config import HfConfigError, build_hf_graph
from support.paths import REPO

HF = REPO / "model_zoo" / "hf"


def _cfg(name: str) -> dict:
    return json.loads((HF / f"{name}.json").read_text())


#: Published counts (the model pages' safetensors totals, model_zoo/hf/SOURCES.yaml).
PUBLISHED = {"gemma-7b": 8_537_680_896, "gemma-2-9b": 9_241_705_984,
             "gemma-2-27b": 27_227_128_320, "gemma-3-1b": 999_885_952}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_is_the_published_one(name):
    assert build_hf_graph(_cfg(name), 4096).total_params() == PUBLISHED[name]


def test_gemma_2_block_by_hand():
    """Gemma-2-9B's block: Q 3584x16x256, K and V 3584x8x256, O 16x256x3584, GeGLU
    3x3584x14336, four RMSNorm vectors (pre and post around attention and MLP):
    198,195,200; the same dims as a Gemma 1 block keep two norm vectors and
    2 x 2·s·h bytes fewer of stored norm inputs (16-bit)."""
    cfg = _cfg("gemma-2-9b")
    block = build_hf_graph(cfg, 4096).layers[1]
    h, f = 3584, 14336
    attn = h * 16 * 256 + 2 * h * 8 * 256 + 16 * 256 * h
    assert block.params == attn + 3 * h * f + 4 * h == 198_195_200
    one = build_hf_graph(dict(cfg, model_type="gemma"), 4096).layers[1]
    assert block.params - one.params == 2 * h
    assert block.act_bytes - one.act_bytes == 4 * 4096 * h
    assert block.act_replicated_bytes - one.act_replicated_bytes == 4 * 4096 * h
    assert block.flops_fwd == one.flops_fwd


def test_default_window_patterns():
    """Gemma 2: even layers windowed (Gemma2Config ``(i + 1) % 2``); Gemma 3: all but
    every sliding_window_pattern-th (default 6); layer_types decides where given;
    a window at least the sequence is none."""
    assert build_hf_graph(_cfg("gemma-2-9b"), 8192).attention_windows() == [4096, 0] * 21
    assert build_hf_graph(_cfg("gemma-2-9b"), 4096).attention_windows() == [0] * 42
    g3 = _cfg("gemma-3-1b")
    assert build_hf_graph(g3, 4096).attention_windows() == ([512] * 5 + [0]) * 4 + [512, 512]
    assert build_hf_graph({k: v for k, v in g3.items() if k != "sliding_window_pattern"},
                          4096).attention_windows() == ([512] * 5 + [0]) * 4 + [512, 512]
    assert build_hf_graph(dict(g3, sliding_window_pattern=2), 4096).attention_windows() == \
        [512, 0] * 13
    types = ["full_attention"] * 25 + ["sliding_attention"]
    assert build_hf_graph(dict(g3, layer_types=types), 4096).attention_windows() == [0] * 25 + [512]
    assert build_hf_graph(_cfg("gemma-7b"), 8192).attention_windows() == [0] * 28


def test_head_dim_defaults_to_gemmas():
    """GemmaConfig's head_dim default is 256, not hidden/heads (3072/16 = 192)."""
    cfg = {k: v for k, v in _cfg("gemma-7b").items() if k != "head_dim"}
    assert build_hf_graph(cfg, 2048).total_params() == PUBLISHED["gemma-7b"]
    assert build_hf_graph(cfg, 2048).arch.head_dim == 256


@pytest.mark.parametrize("config,text", [
    ({"model_type": "gemma3", "text_config": {"model_type": "gemma3_text"}}, "text_config"),
    (dict(json.loads((HF / "gemma-3-1b.json").read_text()), use_bidirectional_attention=True),
     "use_bidirectional_attention"),
    (dict(json.loads((HF / "gemma-3-1b.json").read_text()), sliding_window_pattern=0),
     "sliding_window_pattern = 0"),
])
def test_refused_with_the_key_and_a_fix(config, text):
    with pytest.raises(HfConfigError) as err:
        build_hf_graph(config, 4096, origin="g.json")
    assert text in str(err.value) and "fix:" in str(err.value) and "g.json" in str(err.value)


def test_unpriced_work_is_said():
    graph = build_hf_graph(_cfg("gemma-2-9b"), 4096)
    lines = cost_assumptions(graph, make_cluster("c", 1, 8, "H100-SXM-80GB"),
                             Training(global_batch_size=8, seq_len=4096))
    (line,) = [x for x in lines if "not priced" in x]
    assert "attn_logit_softcapping 50" in line and "final_logit_softcapping 30" in line


def test_megatron_cannot_state_gemma(tmp_path):
    """Megatron-LM's flags have no GeGLU or post-norm: a stated target megatron is a
    spec error, the default runtime falls back to the free space and says why, the
    export refuses; DeepSpeed (the Hugging Face model) runs it."""
    from autopar_opt.export import plan_view, rules_for
    from autopar_opt.spec import SpecError, load_spec
    path = tmp_path / "g.yaml"
    body = (f"model: {{hf_config: {HF / 'gemma-2-9b.json'}}}\ncluster: {{zoo: 2x8-h100}}\n"
            "training: {global_batch_size: 32, seq_len: 4096RUNTIME}\n")
    path.write_text(body.replace("RUNTIME", "") + "target: megatron\n")
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert "GeGLU" in err.value.problems[0].rule
    path.write_text(body.replace("RUNTIME", ""))
    spec = load_spec(path)
    assert spec.space.target.free and any("GeGLU" in n for n in spec.notices)
    path.write_text(body.replace("RUNTIME", ", runtime: deepspeed")
                    + "plan: {tp: 1, pp: 1, zero: 3, micro_batch_size: 1}\n")
    spec = load_spec(path)
    assert spec.space.target.framework == "deepspeed"
    view = plan_view(spec.plan, spec.graph, spec.cluster, spec.training)
    assert not rules_for("deepspeed", view, True, "")
    assert any("GeGLU" in r for r in rules_for("megatron", view, True, ""))


@pytest.mark.parametrize("name, per_block, blocks", [
    ("gemma-7b", 3 * 16 * 256 + 3072, 28), ("gemma-2-9b", 16 * 256 + 2 * 8 * 256 + 3584, 42),
    ("gemma-3-1b", 4 * 256 + 2 * 256 + 1152, 26)])
def test_attention_bias_adds_q_k_v_o_biases(name, per_block, blocks):
    """GemmaConfig, Gemma2Config and Gemma3TextConfig put attention_bias on q_proj, k_proj,
    v_proj and o_proj; a true was ignored without a word (QA round 11). DeepSeek's MLA
    biases (q_a, kv_a, o) are not modelled: refused."""
    plain = build_hf_graph(_cfg(name), 1024)
    biased = build_hf_graph(dict(_cfg(name), attention_bias=True), 1024)
    assert biased.total_params() - plain.total_params() == blocks * per_block
    assert biased.arch.attn_bias and not plain.arch.attn_bias
    with pytest.raises(HfConfigError, match="attention_bias = true: the biases DeepSeek's"):
        build_hf_graph(dict(_cfg("deepseek-v2-lite"), attention_bias=True), 1024)


def test_gemma_2_default_soft_caps_are_said_unpriced():
    """Gemma2Config soft-caps at 50 (attention) and 30 (logits) where a config leaves the
    keys out; the "not priced" line said nothing then (QA round 11). A stated null caps
    nothing and is not listed; Gemma 3 has no default cap."""
    cfg = _cfg("gemma-2-9b")
    del cfg["attn_logit_softcapping"], cfg["final_logit_softcapping"]
    unpriced = build_hf_graph(cfg, 1024).arch.unpriced
    assert "attn_logit_softcapping 50 (Gemma2Config's default)" in unpriced
    assert "final_logit_softcapping 30 (Gemma2Config's default)" in unpriced
    off = build_hf_graph(dict(cfg, attn_logit_softcapping=None, final_logit_softcapping=None),
                         1024).arch.unpriced
    assert not any("softcapping" in u for u in off)
    assert not any("softcapping" in u for u in build_hf_graph(_cfg("gemma-3-1b"), 1024).arch.unpriced)


#: google/gemma-3-12b-pt's config.json text_config as published: no vocab_size, head_dim,
#: hidden_activation or tie_word_embeddings (Gemma3TextConfig's defaults: 262,208, 256,
#: gelu_pytorch_tanh, true).
GEMMA_3_12B_TEXT = {"hidden_size": 3840, "intermediate_size": 15360, "model_type": "gemma3_text",
                    "num_attention_heads": 16, "num_hidden_layers": 48, "num_key_value_heads": 8,
                    "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024}


def test_gemma_3_published_text_config_takes_the_class_vocabulary_and_says_so():
    """Gemma 3's 4B/12B/27B text_config leaves vocab_size to Gemma3TextConfig's default
    262,208: it was refused ("add 'vocab_size' from the model's published config.json",
    which holds none). By hand from the shapes: per block Q 3840x16x256, K and V
    3840x8x256 each, O 16x256x3840 (47,185,920), GeGLU 3x3840x15360 (176,947,200),
    QK-norm 2x256, four norm vectors 4x3840: 224,148,992; 48 blocks, a tied
    262,208 x 3840 table and the final norm: 11,766,034,176 (keras-hub's gemma3_12b_text
    preset counts 11,765,788,416 with a 262,144-row table: 64 x 3840 fewer)."""
    graph = build_hf_graph(GEMMA_3_12B_TEXT, 8192, origin="gemma-3-12b.json")
    block = 3840 * 16 * 256 + 2 * 3840 * 8 * 256 + 16 * 256 * 3840 + 3 * 3840 * 15360 \
        + 2 * 256 + 4 * 3840
    assert block == 224_148_992
    assert graph.total_params() == 48 * block + 262_208 * 3840 + 3840 == 11_766_034_176
    assert graph.total_params() - 64 * 3840 == 11_765_788_416
    assert graph.arch.vocab == 262_208
    (said,) = [a for a in graph.assumed if "vocab_size" in a]
    assert "262,208" in said and "gemma-3-12b.json" in said
    stated = build_hf_graph(dict(GEMMA_3_12B_TEXT, vocab_size=262_144), 8192)
    assert stated.total_params() == 11_765_788_416
    assert not any("vocab_size" in a for a in stated.assumed)
    with pytest.raises(HfConfigError, match="needs key 'vocab_size'"):
        build_hf_graph(dict(GEMMA_3_12B_TEXT, model_type="gemma2"), 8192)


#: google/gemma-3-4b-it's config.json text_config as published (transformers 4.50.0.dev0):
#: it states no num_attention_heads either (Gemma3TextConfig's defaults are the 4B's: 8
#: heads, 4 key/value heads of 256, a 262,208-row table).
GEMMA_3_4B_TEXT = {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                   "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                   "sliding_window": 1024}


def test_gemma_3_4b_published_text_config_takes_the_class_heads_and_says_so():
    """The 4B's published text_config was refused ("needs key 'num_attention_heads' ...
    add it from the model's published config.json", which holds none). Oracle: the Gemma 3
    Technical Report (arXiv 2503.19786) Table 1 gives the 4B 3,209M non-embedding
    parameters; by hand per block Q, K+V and O 3 x 5,242,880, GeGLU 3x2560x10240, QK-norm
    2x256, four norms 4x2560: 94,382,592, x34 = 3,209,008,128."""
    graph = build_hf_graph(GEMMA_3_4B_TEXT, 4096, origin="gemma-3-4b.json")
    block = 3 * 2560 * 8 * 256 + 3 * 2560 * 10240 + 2 * 256 + 4 * 2560
    assert block == 94_382_592 and 34 * block == 3_209_008_128
    assert graph.total_params() == 34 * block + 262_208 * 2560 + 2560
    assert (graph.arch.heads, graph.arch.kv_heads, graph.arch.head_dim) == (8, 4, 256)
    (said,) = [a for a in graph.assumed if "num_attention_heads" in a]
    assert "gemma-3-4b.json states no num_attention_heads" in said and ", 8, was taken" in said
    stated = build_hf_graph(dict(GEMMA_3_4B_TEXT, num_attention_heads=8), 4096)
    assert stated.total_params() == graph.total_params()
    assert not any("num_attention_heads" in a for a in stated.assumed)


@pytest.mark.parametrize("name, changes, said, unsaid", [
    ("gemma-2-9b", {}, "Gemma's block (a GeGLU MLP and norms after the attention and the MLP)",
     ()),
    ("gemma-7b", {}, "Gemma's block (a GeGLU MLP):", ("post-norms", "norms after")),
    ("llama-3.1-8b", {"hidden_act": "gelu"}, "the model's block (a GeGLU (exact GELU) MLP)",
     ("Gemma", "post-norms")),
    ("llama-3.1-8b", {"hidden_act": "relu"}, "the model's block (a ReGLU MLP)",
     ("Gemma", "GeGLU", "post-norms"))])
def test_megatron_refusal_names_the_block_the_model_has(name, changes, said, unsaid):
    """Gemma 1 (no norms after the attention and MLP: GemmaDecoderLayer) and a Llama
    config with a GELU or ReLU gate were refused as "Gemma's block (a GeGLU MLP and norms
    after the attention and the MLP)": the reason names what the block has. The
    architecture line is the oracle (describe: post-norms only for Gemma 2/3)."""
    from autopar_opt.ir.arch import describe
    from autopar_opt.ir.target import megatron_model_problem
    graph = build_hf_graph(dict(_cfg(name), **changes), 1024)
    problem = megatron_model_problem(graph.arch)
    assert said in problem and "Megatron-LM's flags cannot state it" in problem
    assert not any(word in problem for word in unsaid)
    assert ("also after attention and MLP" in describe(graph.arch)) == ("norms after" in problem)
