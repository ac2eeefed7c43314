"""Readers of the decoders with LayerNorm blocks (most with biases and a plain MLP):
GPT-2, GPT-NeoX, OPT, BLOOM, Falcon, MPT, StarCoder2, Phi (1, 1.5, 2) and Cohere's
Command R."""

from __future__ import annotations

from dataclasses import replace

from autopar_opt.ir.graph import LayerGraph
from autopar_opt.model_zoo.blocks import AttentionDims, MlpDims, decoder_block
from autopar_opt.model_zoo.hf_keys import Cfg, HfConfigError
from autopar_opt.model_zoo.hf_parts import (attention_dims, config_windows, decoder_chain,
                                            heads_divide, position_rows, with_extra_params)
from autopar_opt.model_zoo.transformer import decoder_lm, embedding, lm_head


def read_gpt2(c: Cfg, name: str, s: int, opts: dict, source: str) -> LayerGraph:
    """GPT-2: learned positions, 4h GELU MLP (``n_inner``), LayerNorm, biases, output tied
    to the input embedding unless ``tie_word_embeddings`` is false (``GPT2LMHeadModel``
    ties ``lm_head`` to ``wte`` only where the config's ``tie_word_embeddings``, default
    true, says so; QA round 11: a stated false was built tied while the architecture
    line said untied)."""
    heads_divide(c, "n_embd", "n_head")
    h = c("n_embd")
    tied = bool(c("tie_word_embeddings", True))
    g = decoder_lm(name, c("n_layer"), s, h, c("n_head"), c("n_inner", 4 * h) or 4 * h,
                   c("vocab_size"), learned_positions=False, tied=tied, biases=True,
                   flash_attention=opts["flash_attention"], causal_flops=opts["causal_flops"],
                   source=source, model_fuses_qkv=True,    # GPT2Attention.c_attn
                   dropout=opts["dropout"])
    positions = position_rows(c, s, "n_positions") * h          # the learned position table (wpe)
    return with_extra_params(g, embed=positions)


def read_neox(c: Cfg, name: str, s: int, opts: dict, source: str) -> LayerGraph:
    """GPT-NeoX: rotary, LayerNorm, biases (the attention's only with ``attention_bias``,
    default true), GELU MLP, untied output (``embed_out``);
    attention and MLP in parallel through their two LayerNorms with
    ``use_parallel_residual`` (default true; Black et al. 2022, arXiv 2204.06745, Sec. 2)."""
    heads_divide(c, "hidden_size", "num_attention_heads")
    h, a = c("hidden_size"), c("num_attention_heads")
    bias = bool(c("attention_bias", True))      # GPTNeoXConfig: on query_key_value and dense
    attn = AttentionDims(hidden=h, heads=a, kv_heads=a, head_dim=h // a, qkv_bias=bias,
                         out_bias=bias, model_fuses_qkv=True)   # GPTNeoXAttention.query_key_value
    mlp = MlpDims(c("intermediate_size"), gated=False, bias=True)
    parallel = 2 if c("use_parallel_residual", True) else 0
    blocks = [decoder_block(f"block{i:03d}", s, attn, mlp=mlp, layer_norm=True, parallel=parallel,
                            **opts)
              for i in range(c("num_hidden_layers"))]
    return decoder_chain(c, name, s, blocks, False, source, layer_norm=True, dropout=opts["dropout"])


def read_opt(c: Cfg, name: str, s: int, opts: dict, source: str) -> LayerGraph:
    """OPT (Zhang et al. 2022, arXiv 2205.01068; ``OPTConfig``): MHA with separate Q,
    K, V projections, ReLU MLP of ``ffn_dim``, LayerNorm, biases (``enable_bias``),
    learned positions of ``max_position_embeddings + 2`` rows (the table's offset of
    2, ``OPTLearnedPositionalEmbedding``), tied output; the final LayerNorm only with
    ``do_layer_norm_before`` (post-LN OPT-350m has none). OPT-350m's
    ``word_embed_proj_dim`` projections are refused."""
    heads_divide(c, "hidden_size", "num_attention_heads")
    h, a = c("hidden_size"), c("num_attention_heads")
    proj = c("word_embed_proj_dim", h)
    if proj not in (None, h):
        raise HfConfigError(f"{c.origin}: word_embed_proj_dim = {proj} differs from hidden_size = "
                            f"{h}: OPT's embedding projections (project_in/out) are not modelled "
                            "(fix: use an OPT size whose word_embed_proj_dim equals hidden_size)")
    bias = bool(c("enable_bias", True))
    attn = AttentionDims(hidden=h, heads=a, kv_heads=a, head_dim=h // a, qkv_bias=bias,
                         out_bias=bias)
    mlp = MlpDims(c("ffn_dim"), gated=False, bias=bias)
    blocks = [decoder_block(f"block{i:03d}", s, attn, mlp=mlp, layer_norm=True, **opts)
              for i in range(c("num_hidden_layers"))]
    graph = decoder_chain(c, name, s, blocks, True, source, layer_norm=True, dropout=opts["dropout"])
    positions = (position_rows(c, s, "max_position_embeddings") + 2) * h
    final = 0 if c("do_layer_norm_before", True) else 2 * h
    return with_extra_params(graph, embed=positions, head=-final)


def read_bloom(c: Cfg, name: str, s: int, opts: dict, source: str) -> LayerGraph:
    """BLOOM (BigScience 2022, arXiv 2211.05100, Sec. 3.2; ``BloomConfig``): ALiBi (no
    position table; the bias is added inside the attention kernel, priced as the
    plain kernel), a LayerNorm after the word embedding, fused QKV with biases, 4h
    GELU MLP with biases, LayerNorm, tied output (``tie_word_embeddings`` default
    true)."""
    h = c("hidden_size", None) or c("n_embed")
    a = c("n_head", None) or c("num_attention_heads")
    if h % a:
        raise HfConfigError(f"{c.origin}: n_head = {a} does not divide hidden_size = {h} (each "
                            "head is hidden_size / n_head wide) (fix: use the model's published "
                            "config.json)")
    layers = c("n_layer", None) or c("num_hidden_layers")
    attn = AttentionDims(hidden=h, heads=a, kv_heads=a, head_dim=h // a, qkv_bias=True,
                         out_bias=True, model_fuses_qkv=True)   # BloomAttention.query_key_value
    mlp = MlpDims(4 * h, gated=False, bias=True)
    blocks = [decoder_block(f"block{i:03d}", s, attn, mlp=mlp, layer_norm=True, **opts)
              for i in range(layers)]
    tied = bool(c("tie_word_embeddings", True))
    v = c("vocab_size")
    head = lm_head("head", s, h, v, tied=tied)
    embed = embedding("embed", s, h, v, dropout=opts["dropout"])
    embed = replace(embed, params=embed.params + 2 * h)         # word_embeddings_layernorm
    return LayerGraph.chain(name, [embed] + blocks + [head], seq_len=s, source=source,
                            causal=True)


def read_falcon(c: Cfg, name: str, s: int, opts: dict, source: str) -> LayerGraph:
    """Falcon (Almazrouei et al. 2023, arXiv 2311.16867, Sec. 4; ``FalconConfig``): fused
    QKV, multi-query (``multi_query``) or grouped keys (``new_decoder_architecture``:
    ``num_kv_heads``), attention and MLP in parallel (``parallel_attn``) through one
    LayerNorm, or two with the new architecture (``num_ln_in_parallel_attn``), a
    plain GELU MLP of ``ffn_hidden_size`` (default 4h), biases only with ``bias``,
    rotary or ALiBi positions (no table), tied output (default true)."""
    heads_divide(c, "hidden_size", "num_attention_heads")
    h, a = c("hidden_size"), c("num_attention_heads")
    new = bool(c("new_decoder_architecture", False))
    kv = c("num_kv_heads", None) or a if new else (1 if c("multi_query", True) else a)
    if a % kv:
        raise HfConfigError(f"{c.origin}: num_kv_heads = {kv} does not divide "
                            f"num_attention_heads = {a} (fix: use the model's published "
                            "config.json)")
    bias = bool(c("bias", False))
    attn = AttentionDims(hidden=h, heads=a, kv_heads=kv, head_dim=h // a, qkv_bias=bias,
                         out_bias=bias, model_fuses_qkv=True)   # FalconAttention.query_key_value
    mlp = MlpDims(c("ffn_hidden_size", None) or 4 * h, gated=False, bias=bias)
    if new:
        parallel = 1 if c("num_ln_in_parallel_attn", 2) == 1 else 2
    else:
        parallel = 1 if c("parallel_attn", True) else 0
    blocks = [decoder_block(f"block{i:03d}", s, attn, mlp=mlp, layer_norm=True, parallel=parallel,
                            **opts)
              for i in range(c("num_hidden_layers"))]
    return decoder_chain(c, name, s, blocks, True, source, layer_norm=True, dropout=opts["dropout"])


def _mpt_attention_config(c: Cfg) -> dict:
    """MPT's ``attn_config`` object with ``MptAttentionConfig``'s defaults, refusing what
    ``transformers``' MPT does not build: it runs multi-head attention with ALiBi only
    (``MptModel`` builds ALiBi biases and no position table; ``MptAttention`` has no QK
    LayerNorm and one fused ``Wqkv``)."""
    raw = c("attn_config", {}) or {}
    if not isinstance(raw, dict):
        raise HfConfigError(f"{c.origin}: attn_config = {str(raw)[:60]!r} is not an object (fix: "
                            "copy the model's published config.json)")
    ac = {"attn_type": "multihead_attention", "alibi": True, "qk_ln": False, **raw}
    for key, want, why in (("attn_type", "multihead_attention", "multi-head attention"),
                           ("alibi", True, "ALiBi positions (no learned table)"),
                           ("qk_ln", False, "no QK LayerNorm")):
        if ac[key] != want:
            raise HfConfigError(f"{c.origin}: attn_config.{key} = {ac[key]!r}: transformers' MPT "
                                f"builds {why} only, so this llm-foundry variant is not modelled "
                                "(fix: describe the model as an explicit layer list)")
    return ac


def read_mpt(c: Cfg, name: str, s: int, opts: dict, source: str) -> LayerGraph:
    """MPT (MosaicML 2023, "Introducing MPT-7B", and its model card; ``MptConfig``): fused
    ``Wqkv``, multi-head attention with ALiBi (no position table), a GELU MLP of
    ``expansion_ratio · d_model`` (default 4), LayerNorms of a weight only and linears
    without biases where ``no_bias`` (default true; ``transformers``' ``MptBlock`` drops
    the norms' biases), output tied to the input embedding (``MptForCausalLM``) unless
    ``tie_word_embeddings`` is false (default true; QA round 11: a stated false was
    ignored without a word)."""
    _mpt_attention_config(c)
    heads_divide(c, "d_model", "n_heads")
    h, a = c("d_model"), c("n_heads")
    bias = not bool(c("no_bias", True))
    ratio = c("expansion_ratio", 4)
    if not isinstance(ratio, int) or isinstance(ratio, bool) or ratio < 1:
        raise HfConfigError(f"{c.origin}: expansion_ratio = {ratio!r} must be a positive integer "
                            "(the MLP is expansion_ratio x d_model wide) (fix: use the model's "
                            "published config.json)")
    attn = AttentionDims(hidden=h, heads=a, kv_heads=a, head_dim=h // a, qkv_bias=bias,
                         out_bias=bias, model_fuses_qkv=True)         # MptAttention.Wqkv
    mlp = MlpDims(ratio * h, gated=False, bias=bias)
    blocks = [decoder_block(f"block{i:03d}", s, attn, mlp=mlp, layer_norm=bias, **opts)
              for i in range(c("n_layers"))]
    v = c("vocab_size")
    head = lm_head("head", s, h, v, tied=bool(c("tie_word_embeddings", True)))
    if not bias:                      # norm_f: a weight only (lm_head counts a LayerNorm's two)
        head = replace(head, params=head.params - h)
    embed = embedding("embed", s, h, v, dropout=opts["dropout"])
    return LayerGraph.chain(name, [embed] + blocks + [head], seq_len=s, source=source, causal=True)


def read_starcoder2(c: Cfg, name: str, s: int, opts: dict, source: str) -> LayerGraph:
    """StarCoder2 (Lozhkov et al. 2024, arXiv 2402.19173, Sec. 6; ``Starcoder2Config``):
    grouped-query attention with RoPE, a GELU MLP (``c_fc``, ``c_proj``) of
    ``intermediate_size``, LayerNorm, biases on every linear with ``use_bias`` (default
    true), output tied (default true), ``sliding_window`` on every layer (default
    none), dropout from ``residual_dropout`` and ``attention_dropout``."""
    bias = bool(c("use_bias", True))
    attn = replace(attention_dims(c, qkv_bias=bias), out_bias=bias)
    mlp = MlpDims(c("intermediate_size"), gated=False, bias=bias)
    blocks = [decoder_block(f"block{i:03d}", s, replace(attn, window=w), mlp=mlp,
                            layer_norm=True, **opts)
              for i, w in enumerate(config_windows(c))]
    return decoder_chain(c, name, s, blocks, True, source, layer_norm=True, dropout=opts["dropout"])


def read_cohere(c: Cfg, name: str, s: int, opts: dict, source: str) -> LayerGraph:
    """Cohere Command R (``CohereConfig``; ``CohereDecoderLayer``): attention and a SwiGLU
    MLP in parallel through one shared ``CohereLayerNorm`` of a weight only, RoPE,
    ``attention_bias`` (default false), output tied (default true); ``use_qk_norm``
    (Command R+) adds a LayerNorm weight per head and channel on Q and K (``(heads,
    head_dim)`` and ``(kv_heads, head_dim)``: the full-width count, priced as such).
    Its ``logit_scale`` is a multiply of the logits, said with the model, not priced.
    Cohere2 (Command R7B, Command A; ``Cohere2Config``, ``Cohere2DecoderLayer``): the same
    parallel block without QK-norm (its configs' ``use_qk_norm: false`` is not read by
    transformers), a sliding window of ``sliding_window`` keys (default 4096) on every
    layer but each ``sliding_window_pattern``-th (default 4), or as ``layer_types`` says
    (:mod:`.hf_windows`); the global layers' lack of RoPE changes no cost."""
    bias = bool(c("attention_bias", False))
    qk = c.model_type == "cohere" and bool(c("use_qk_norm", False))
    attn = replace(attention_dims(c, qkv_bias=bias, qk_norm=qk), out_bias=bias,
                   qk_norm_full=qk)
    mlp = MlpDims(c("intermediate_size"), gated=True)
    blocks = [decoder_block(f"block{i:03d}", s, replace(attn, window=w), mlp=mlp, parallel=1,
                            **opts)
              for i, w in enumerate(config_windows(c))]
    return decoder_chain(c, name, s, blocks, True, source, dropout=opts["dropout"])


def read_phi(c: Cfg, name: str, s: int, opts: dict, source: str) -> LayerGraph:
    """Phi-1, Phi-1.5 and Phi-2 (``PhiConfig``; ``PhiDecoderLayer``): attention and a GELU
    MLP (``fc1``, ``fc2``) in parallel through one LayerNorm (weight and bias), biases on
    Q, K, V, ``dense`` and the MLP, RoPE on ``partial_rotary_factor`` of each head
    (default 0.5), ``qk_layernorm`` (a LayerNorm of ``head_dim`` on Q and K; default
    false), an untied output layer with a bias (``lm_head``), dropout from ``resid_pdrop``
    and ``attention_dropout``."""
    qk = bool(c("qk_layernorm", False))
    attn = replace(attention_dims(c, qkv_bias=True), out_bias=True)
    mlp = MlpDims(c("intermediate_size"), gated=False, bias=True)
    blocks = []
    for i in range(c("num_hidden_layers")):
        block = decoder_block(f"block{i:03d}", s, attn, mlp=mlp, layer_norm=True, parallel=1,
                              **opts)
        if qk:                        # q_layernorm, k_layernorm: weight and bias of head_dim
            block = replace(block, params=block.params + 4 * attn.head_dim)
        blocks.append(block)
    graph = decoder_chain(c, name, s, blocks, False, source, layer_norm=True, dropout=opts["dropout"])
    return with_extra_params(graph, head=c("vocab_size"))              # lm_head's bias
