"""OPT, BLOOM and Falcon from their Hugging Face configs, and parallel attention/MLP
blocks (Falcon, GPT-NeoX): parameter counts against the published safetensors counts
(exact), blocks by hand, and what is refused."""

from __future__ import annotations

import json

import pytest

from autopar_opt.model_zoo.blocks import AttentionDims, MlpDims, decoder_block
from autopar_opt.model_zoo.hf_config import HfConfigError, build_hf_graph
from support.paths import REPO

HF = REPO / "model_zoo" / "hf"
PUBLISHED = {"opt-6.7b": 6_658_473_984, "bloom-7b1": 7_069_016_064, "falcon-7b": 6_921_720_704}


def _cfg(name: str) -> dict:
    return json.loads((HF / f"{name}.json").read_text())


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_is_the_published_one(name):
    assert build_hf_graph(_cfg(name), 2048).total_params() == PUBLISHED[name]


def test_falcon_7b_block_by_hand():
    """Falcon-7B: fused multi-query QKV 4544 x (71·64 + 2·64), dense 4544², GELU MLP
    2 x 4544 x 18176, one LayerNorm (weight and bias) shared by attention and MLP;
    without dropout a sequential block keeps 8·s·h bytes of norm inputs and outputs
    (16-bit), a parallel one with a shared norm 4·s·h, with two norms 6·s·h."""
    s, h = 2048, 4544
    block = build_hf_graph(_cfg("falcon-7b"), s).layers[1]
    assert block.params == 4544 * 4672 + 4544 ** 2 + 2 * 4544 * 18176 + 2 * 4544 == 207_070_080
    attn = AttentionDims(hidden=h, heads=71, kv_heads=1, head_dim=64, model_fuses_qkv=True)
    mlp = MlpDims(4 * h, gated=False)
    seq, one, two = (decoder_block("b", s, attn, mlp=mlp, layer_norm=True, dropout=False,
                                   parallel=p) for p in (0, 1, 2))
    assert (seq.act_replicated_bytes, one.act_replicated_bytes, two.act_replicated_bytes) == \
        (8 * s * h, 4 * s * h, 6 * s * h)
    assert seq.act_bytes - one.act_bytes == 4 * s * h and seq.act_bytes - two.act_bytes == 2 * s * h
    assert seq.params - one.params == 2 * h and seq.params == two.params
    assert seq.flops_fwd == one.flops_fwd == two.flops_fwd
    # Falcon-7B: parallel, one norm, and no dropout (hidden_dropout 0.0 in its config)
    assert block.act_replicated_bytes == 4 * s * h
    # the shared norm hands QKV and the MLP one input: one 2sh GEMM input fewer
    assert seq.act_gemm_input_bytes - one.act_gemm_input_bytes == 2 * s * h


def test_falcon_new_architecture_groups_keys_and_keeps_two_norms():
    cfg = dict(_cfg("falcon-7b"), new_decoder_architecture=True, num_kv_heads=8,
               num_attention_heads=64, hidden_size=4096)
    block = build_hf_graph(cfg, 2048).layers[1]
    h = 4096
    assert block.params == h * (h + 2 * 8 * 64) + h * h + 2 * h * 4 * h + 2 * 2 * h
    assert block.act_replicated_bytes == 6 * 2048 * h


def test_neox_parallel_residual():
    """GPT-NeoX (use_parallel_residual, default true): two norms reading the block
    input: 6·s·h replicated bytes; with it false the sequential 8·s·h."""
    cfg = json.loads((HF / "gpt-neox-20b.json").read_text())
    s, h = 2048, cfg["hidden_size"]
    assert build_hf_graph(cfg, s).layers[1].act_replicated_bytes == \
        build_hf_graph(dict(cfg, use_parallel_residual=False), s).layers[1].act_replicated_bytes \
        - 2 * s * h


def test_dropout_follows_the_config():
    """Masks are kept where the config trains with dropout (OPT's dropout 0.1: one s·h
    mask after the attention and one after the MLP), not where it has none (Falcon),
    and the architecture states the rates the Megatron exports write."""
    from autopar_opt.model_zoo.hf_config import dropout_rates
    s = 2048
    opt = build_hf_graph(_cfg("opt-6.7b"), s)
    dry = build_hf_graph(dict(_cfg("opt-6.7b"), dropout=0.0), s)
    h = 4096
    assert opt.layers[1].act_replicated_bytes - dry.layers[1].act_replicated_bytes == 2 * s * h
    assert dropout_rates(_cfg("opt-6.7b")) == (0.1, 0.0)
    assert dropout_rates(_cfg("falcon-7b")) == (0.0, 0.0)
    assert dropout_rates(json.loads((HF / "llama-3.1-8b.json").read_text())) == (0.0, 0.0)
    assert build_hf_graph(json.loads((HF / "llama-3.1-8b.json").read_text()), s).arch.dropout == \
        (0.0, 0.0)
    with pytest.raises(HfConfigError, match="dropout = 1.5 must be a probability"):
        dropout_rates(dict(_cfg("opt-6.7b"), dropout=1.5))


def test_opt_positions_and_final_norm():
    """OPT's table has max_position_embeddings + 2 rows; post-LN OPT has no final
    LayerNorm; a longer sequence than the table, or OPT-350m's projections, are refused."""
    cfg = _cfg("opt-6.7b")
    h = cfg["hidden_size"]
    g = build_hf_graph(cfg, 2048)
    assert g.layers[0].params == cfg["vocab_size"] * h + (2048 + 2) * h
    post = build_hf_graph(dict(cfg, do_layer_norm_before=False), 2048)
    assert g.total_params() - post.total_params() == 2 * h
    with pytest.raises(HfConfigError, match="seq_len 4096 exceeds max_position_embeddings=2048"):
        build_hf_graph(cfg, 4096)
    with pytest.raises(HfConfigError, match="word_embed_proj_dim = 512"):
        build_hf_graph(dict(cfg, word_embed_proj_dim=512), 2048)


def test_bloom_embedding_norm_and_alias_keys():
    """BLOOM keeps a LayerNorm after the word embedding (2h); its configs name the
    width n_embed or hidden_size."""
    cfg = _cfg("bloom-7b1")
    h = cfg["hidden_size"]
    g = build_hf_graph(cfg, 2048)
    assert g.layers[0].params == cfg["vocab_size"] * h + 2 * h
    alias = {k: v for k, v in cfg.items() if k != "hidden_size"} | {"n_embed": h}
    assert build_hf_graph(alias, 2048).total_params() == PUBLISHED["bloom-7b1"]


def test_phi3_and_llama_biases():
    """Phi-3-mini (fused qkv_proj and gate_up_proj, a 2,047-key window on every layer)
    builds to its published count; a Llama config's attention_bias and mlp_bias add
    Q, K, V, O and gate, up, down biases: 4096 + 2·1024 + 4096 + 2·14336 + 4096 = 43,008
    per Llama-3.1-8B layer."""
    phi = build_hf_graph(_cfg("phi-3-mini-4k"), 4096)
    assert phi.total_params() == 3_821_079_552
    assert phi.attention_windows() == [2047] * 32 and phi.arch.dropout == (0.0, 0.0)
    assert phi.layers[1].gemm_kernels_unfused == phi.layers[1].gemm_kernels == 4   # qkv, o, gate_up, down
    llama = json.loads((HF / "llama-3.1-8b.json").read_text())
    plain = build_hf_graph(llama, 4096).total_params()
    biased = build_hf_graph(dict(llama, attention_bias=True, mlp_bias=True), 4096).total_params()
    assert biased - plain == 32 * 43_008


def test_qwen3_moe_attention_bias():
    """Qwen3-MoE's attention_bias puts biases on Q, K, V and O: 32·128 + 2·4·128 + 2048
    per Qwen3-30B-A3B layer."""
    cfg = json.loads((HF / "qwen3-30b-a3b.json").read_text())
    plain = build_hf_graph(cfg, 4096).total_params()
    assert build_hf_graph(dict(cfg, attention_bias=True), 4096).total_params() - plain == \
        48 * (32 * 128 + 2 * 4 * 128 + 2048)


@pytest.mark.parametrize("name,why", [("opt-6.7b", "a ReLU MLP"), ("bloom-7b1", "ALiBi positions"),
                                      ("falcon-7b", "attention and MLP in parallel"),
                                      ("gpt-neox-20b", "attention and MLP in parallel")])
def test_megatron_cannot_build_the_classic_families(name, why, tmp_path):
    """Megatron-LM's flags have no ReLU MLP, no ALiBi and no parallel block (arguments.py):
    a stated Megatron target is a spec error naming it; DeepSpeed keeps its target."""
    from autopar_opt.ir.target import megatron_model_problem
    from autopar_opt.spec import SpecError, load_spec
    graph = build_hf_graph(_cfg(name), 2048)
    assert graph.arch is not None and graph.arch.family == _cfg(name)["model_type"]
    assert why in megatron_model_problem(graph.arch)
    path = tmp_path / "s.yaml"
    body = (f"model: {{hf_config: {HF / (name + '.json')}}}\ncluster: {{zoo: 2x8-h100}}\n"
            "training: {global_batch_size: 32, seq_len: 2048RT}\n")
    path.write_text(body.replace("RT", "") + "target: megatron\n")
    with pytest.raises(SpecError, match=why):
        load_spec(path)
    path.write_text(body.replace("RT", ", runtime: deepspeed"))
    assert load_spec(path).space.target.framework == "deepspeed"


def test_classic_architectures_are_read_off_the_build():
    falcon = build_hf_graph(_cfg("falcon-7b"), 2048).arch
    assert (falcon.kv_heads, falcon.ffn_hidden, falcon.tied, falcon.biases) == (1, 4 * 4544, True, False)
    opt = build_hf_graph(_cfg("opt-6.7b"), 2048).arch
    assert (opt.learned_positions, opt.activation, opt.dropout, opt.num_layers) == (True, "relu", (0.1, 0.0), 32)


def test_olmo2_block_and_megatron_refusal():
    """OLMo-2 7B: a Llama block with its two norms after the attention and the MLP and a
    QK-norm over the whole Q and K projections (32·128 + 32·128 weights, not 2·128):
    4·4096² + 3·4096·11008 + 4·4096 per layer; 7.2986 B in all (the model page's 7.3B).
    Megatron-LM's flags cannot state the norm placement."""
    from autopar_opt.ir.target import megatron_model_problem
    g = build_hf_graph(_cfg("olmo-2-7b"), 4096)
    assert g.layers[1].params == 4 * 4096 ** 2 + 3 * 4096 * 11008 + 4 * 4096
    assert g.total_params() == 7_298_617_344 and round(g.total_params(), -8) == 7.3e9
    assert "OLMo 2's norms" in megatron_model_problem(g.arch)


def test_mpt_7b_by_hand():
    """MPT-7B (transformers' MptBlock: fused Wqkv, out_proj and a 4 x d_model GELU MLP,
    none with a bias; two LayerNorms of a weight only; ALiBi, no position table; output
    tied): 6,649,286,656, the model card's 6.7B."""
    graph = build_hf_graph(_cfg("mpt-7b"), 2048)
    per_block = 4096 * 3 * 4096 + 4096 * 4096 + 2 * 4096 * 16384 + 2 * 4096
    assert graph.layers[1].params == per_block
    assert graph.total_params() == 32 * per_block + 50432 * 4096 + 4096 == 6_649_286_656
    a = graph.arch
    assert (a.alibi, a.tied, a.biases, a.gated, a.learned_positions) == \
        (True, True, False, False, False)


@pytest.mark.parametrize("attn, key", [
    ({"alibi": False}, "attn_config.alibi"),
    ({"qk_ln": True}, "attn_config.qk_ln"),
    ({"attn_type": "grouped_query_attention", "kv_n_heads": 8}, "attn_config.attn_type"),
])
def test_mpt_variants_transformers_does_not_build_are_refused(attn, key):
    """llm-foundry's learned positions, QK LayerNorm and grouped-query attention are not in
    transformers' MPT: refused with the key, not built as something else."""
    cfg = _cfg("mpt-7b")
    cfg["attn_config"] = dict(cfg["attn_config"], **attn)
    with pytest.raises(HfConfigError, match=key.replace(".", r"\.")):
        build_hf_graph(cfg, 2048)


def test_mpt_dropout_is_read_inside_attn_config():
    """MptConfig's resid_pdrop (hidden) and its attn_config's attn_pdrop (attention)."""
    from autopar_opt.model_zoo.hf_config import dropout_rates
    cfg = _cfg("mpt-7b")
    assert dropout_rates(cfg) == (0.0, 0.0)
    cfg.update(resid_pdrop=0.05, attn_config=dict(cfg["attn_config"], attn_pdrop=0.1))
    assert dropout_rates(cfg) == (0.05, 0.1)
    assert build_hf_graph(cfg, 2048).arch.dropout == (0.05, 0.1)


def test_starcoder2_3b_by_hand():
    """StarCoder2-3B (Starcoder2Config: biases on Q, K, V, O and the GELU MLP's c_fc and
    c_proj, two LayerNorms of weight and bias, 2 key-value heads of 128, output tied):
    3,030,371,328, its 12.1 GB of float32 safetensors; a 4,096-key window on all 30 layers;
    dropout 0.1 from residual_dropout and attention_dropout."""
    graph = build_hf_graph(_cfg("starcoder2-3b"), 16384)
    per_block = (2 * 3072 * 3072 + 2 * 3072 * 256 + (3072 + 256 + 256 + 3072)
                 + 2 * 3072 * 12288 + 12288 + 3072 + 4 * 3072)
    assert graph.layers[1].params == per_block
    assert graph.total_params() == 30 * per_block + 49152 * 3072 + 2 * 3072 == 3_030_371_328
    assert graph.attention_windows() == [4096] * 30
    a = graph.arch
    assert (a.kv_heads, a.biases, a.tied, a.dropout, a.windows) == (2, True, True, (0.1, 0.1),
                                                                  (4096,) * 30)


def test_starcoder2_megatron_flags():
    """Megatron-LM states StarCoder2 (GELU, LayerNorm and biases are its defaults): grouped
    keys, the window as --window-size 4095,0 and the RoPE base."""
    from autopar_opt.export.megatron import model_args
    from autopar_opt.ir.target import megatron_model_problem
    a = build_hf_graph(_cfg("starcoder2-3b"), 16384).arch
    assert megatron_model_problem(a) is None
    args = model_args(type("View", (), {"arch": a, "seq_len": 16384})())
    assert args[args.index("--num-query-groups") + 1] == "2"
    assert args[args.index("--window-size") + 1] == "4095,0"
    assert args[args.index("--rotary-base") + 1] == "999999"
    assert "--disable-bias-linear" not in args and "--swiglu" not in args
    assert args[args.index("--hidden-dropout") + 1] == "0.1"


def test_command_r_by_hand():
    """Command R (CohereDecoderLayer: attention and a SwiGLU MLP in parallel through one
    weight-only LayerNorm, no biases, tied output): 34,980,831,232, its model card's 35
    billion; use_qk_norm adds a weight per head and channel on Q and K; the logit scale is
    said, not priced; Megatron-Core's layer cannot run the parallel block."""
    from autopar_opt.ir.target import megatron_model_problem
    cfg = _cfg("command-r-v01")
    graph = build_hf_graph(cfg, 8192)
    per_block = 4 * 8192 * 8192 + 3 * 8192 * 22528 + 8192
    assert graph.layers[1].params == per_block
    assert graph.total_params() == 40 * per_block + 256000 * 8192 + 8192 == 34_980_831_232
    a = graph.arch
    assert (a.parallel_block, a.gated, a.tied, a.unpriced) == \
        (True, True, True, ("logit_scale 0.0625 on the output logits",))
    assert "in parallel" in megatron_model_problem(a)
    plus = build_hf_graph(dict(cfg, use_qk_norm=True), 8192)
    assert plus.layers[1].params - per_block == 64 * 128 + 64 * 128


def test_phi_2_by_hand():
    """Phi-2 (PhiDecoderLayer: attention and a GELU MLP in parallel through one LayerNorm,
    biases everywhere, an untied lm_head with a bias): 2,779,683,840, its 5.56 GB of
    float16 safetensors; RoPE on 40% of each head; qk_layernorm adds a LayerNorm of the
    head width (weight and bias) on Q and K."""
    cfg = _cfg("phi-2")
    graph = build_hf_graph(cfg, 2048)
    per_block = 4 * 2560 * 2560 + 4 * 2560 + 2 * 2560 * 10240 + 10240 + 2560 + 2 * 2560
    assert graph.layers[1].params == per_block
    head = 51200 * 2560 + 51200 + 2 * 2560
    assert graph.total_params() == 32 * per_block + 51200 * 2560 + head == 2_779_683_840
    a = graph.arch
    assert (a.parallel_block, a.rotary_fraction, a.tied, a.dropout) == (True, 0.4, False, (0.1, 0.0))
    qk = build_hf_graph(dict(cfg, qk_layernorm=True), 2048)
    assert qk.layers[1].params - per_block == 4 * 80


@pytest.mark.parametrize("name, vocab, hidden", [("gpt2-xl", 50257, 1600), ("mpt-7b", 50432, 4096)])
def test_untied_output_follows_tie_word_embeddings(name, vocab, hidden):
    """GPT-2 and MPT tie their output layer to the input embedding only where
    ``tie_word_embeddings`` (default true) says so (``PreTrainedModel.tie_weights``): a
    stated false adds the output matrix, vocab x hidden, and the architecture line says
    untied (QA round 11: GPT-2 was built tied while its line said untied; MPT ignored
    the key)."""
    tied = build_hf_graph(_cfg(name), 1024)
    untied = build_hf_graph(dict(_cfg(name), tie_word_embeddings=False), 1024)
    assert untied.total_params() - tied.total_params() == vocab * hidden
    assert (tied.arch.tied, untied.arch.tied) == (True, False)


def test_the_architecture_line_states_the_biases_the_build_has():
    """OPT's enable_bias false drops every linear bias (32 x (4 x 4096 + 16384 + 4096));
    Nemotron's attention_bias alone adds Q, K, V and O biases only (24·128 + 2·8·128 + 3072
    per block). The architecture line (and the exports reading it) said "biases" on every
    linear layer in both (QA round 11)."""
    opt = build_hf_graph(_cfg("opt-6.7b"), 2048)
    no_bias = build_hf_graph(dict(_cfg("opt-6.7b"), enable_bias=False), 2048)
    assert opt.total_params() - no_bias.total_params() == 32 * (4 * 4096 + 16384 + 4096)
    assert (opt.arch.biases, no_bias.arch.biases) == (True, False)
    plain = build_hf_graph(_cfg("minitron-4b-base"), 2048)
    attn = build_hf_graph(dict(_cfg("minitron-4b-base"), attention_bias=True), 2048)
    assert attn.total_params() - plain.total_params() == 32 * (3072 + 2 * 1024 + 3072)
    assert (attn.arch.biases, attn.arch.attn_bias, attn.arch.mlp_bias) == (False, True, False)
    both = build_hf_graph(dict(_cfg("minitron-4b-base"), attention_bias=True, mlp_bias=True), 2048)
    assert both.arch.biases and not (both.arch.attn_bias or both.arch.mlp_bias)


@pytest.mark.parametrize("name, per_block, blocks", [
    ("olmo-2-7b", 4 * 4096, 32),                        # Q, K, V, O of 32 x 128 each
    ("qwen3-30b-a3b", 32 * 128 + 2 * 4 * 128 + 2048, 48),  # Q 32 x 128, K, V 4 x 128, O 2048
    ("command-r-v01", 4 * 8192, 40)])
def test_attention_bias_alone_is_said_as_attention_biases(name, per_block, blocks):
    """attention_bias on OLMo 2, Qwen3-MoE and Command R adds Q, K, V and O biases and
    nothing on the MLP; the architecture line said "no biases" (OLMo 2, Qwen3-MoE) or
    "biases" on every linear layer (Command R) (QA round 11)."""
    plain = build_hf_graph(_cfg(name), 1024)
    biased = build_hf_graph(dict(_cfg(name), attention_bias=True), 1024)
    assert biased.total_params() - plain.total_params() == blocks * per_block
    assert (biased.arch.attn_bias, biased.arch.biases, biased.arch.mlp_bias) == (True, False, False)
    assert not (plain.arch.attn_bias or plain.arch.biases)
