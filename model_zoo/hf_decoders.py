"""Readers of the Llama-layout decoders (pre-norm blocks, RoPE, a gated or plain MLP
without biases by default): Llama, Mistral, Qwen2/3, Phi-3, GLM-4, InternLM2, OLMo 2,
Gemma 1-3 and Nemotron-4 (Minitron)."""

from __future__ import annotations

from dataclasses import replace

from autopar_opt.ir.graph import LayerGraph
from autopar_opt.model_zoo.blocks import MlpDims, decoder_block
from autopar_opt.model_zoo.hf_keys import Cfg, HfConfigError, TrackedConfig
from autopar_opt.model_zoo.hf_parts import attention_dims, config_windows, decoder_chain

def read_llama(c: Cfg, name: str, s: int, opts: dict, source: str) -> LayerGraph:
    """Llama, Mistral, Qwen2 (QKV bias), Qwen3 (QK-norm), Phi-3 (fused ``qkv_proj`` and
    ``gate_up_proj``), Granite (Llama's block with scalar multipliers on the embedding,
    the attention scores, the residual branches and the logits: ``GraniteConfig``, not
    priced and said with the model): GQA + SwiGLU, RMSNorm; Llama's, Granite's and
    Qwen3's ``attention_bias`` (on Q, K, V and O: ``LlamaAttention``, ``Qwen3Attention``)
    and Llama's and Granite's ``mlp_bias`` where a config sets them (default false);
    Mistral's, Qwen's and Phi-3's sliding windows (:func:`config_windows`)."""
    mt = c.model_type
    bias = mt in ("llama", "qwen3", "granite") and bool(c("attention_bias", False))
    attn = attention_dims(c, qkv_bias=mt == "qwen2" or bias, qk_norm=mt == "qwen3")
    attn = replace(attn, out_bias=bias, model_fuses_qkv=mt == "phi3")
    mlp = MlpDims(c("intermediate_size"), gated=True,
                  bias=mt in ("llama", "granite") and bool(c("mlp_bias", False)),
                  model_fuses_gate_up=mt == "phi3")
    blocks = [decoder_block(f"block{i:03d}", s, replace(attn, window=w), mlp=mlp, **opts)
              for i, w in enumerate(config_windows(c))]
    return decoder_chain(c, name, s, blocks, False, source, dropout=opts["dropout"])


def read_glm(c: Cfg, name: str, s: int, opts: dict, source: str) -> LayerGraph:
    """GLM-4 (``GlmConfig``, model_type glm: glm-4-9b-chat-hf) and GLM-4-0414
    (``Glm4Config``, model_type glm4: GLM-4-9B/32B-0414): Llama's block with biases on
    Q, K and V only (``attention_bias``, default true; ``o_proj`` has none), grouped keys
    (``num_key_value_heads`` default 2), one fused ``gate_up_proj`` SwiGLU, RoPE on
    interleaved pairs of ``partial_rotary_factor`` of each head (default 0.5; element-wise
    work, as for every family), untied output (``tie_word_embeddings`` default false).
    GLM-4-0414 adds a norm after the attention and after the MLP, before each residual add
    (``post_self_attn_layernorm``, ``post_mlp_layernorm``: Gemma 2's post-norms;
    ``Glm4DecoderLayer``). QA round 36: both were refused as unknown model_types."""
    attn = attention_dims(c, qkv_bias=bool(c("attention_bias", True)))
    mlp = MlpDims(c("intermediate_size"), gated=True, model_fuses_gate_up=True)
    post = c.model_type == "glm4"
    blocks = [decoder_block(f"block{i:03d}", s, attn, mlp=mlp, post_norms=post, **opts)
              for i in range(c("num_hidden_layers"))]
    return decoder_chain(c, name, s, blocks, False, source, dropout=opts["dropout"])


def read_internlm2(c: Cfg, name: str, s: int, opts: dict, source: str) -> LayerGraph:
    """InternLM2 / InternLM2.5 (Cai et al. 2024, "InternLM2 Technical Report", arXiv
    2403.17297, Sec. 2.2; the ``InternLM2Config`` and ``modeling_internlm2.py`` its model
    repositories ship, read with trust_remote_code): Llama's block with Q, K and V in one
    ``wqkv`` GEMM, biases on ``wqkv`` and ``wo`` where ``bias`` (the class's default true;
    the published configs state false; ``w1``, ``w2``, ``w3`` have none), grouped keys
    (``num_key_value_heads``, default the heads), untied output (default false). QA round
    36: refused as an unknown model_type."""
    bias = bool(c("bias", True))
    attn = replace(attention_dims(c, qkv_bias=bias), out_bias=bias, model_fuses_qkv=True)
    mlp = MlpDims(c("intermediate_size"), gated=True)
    blocks = [decoder_block(f"block{i:03d}", s, attn, mlp=mlp, **opts)
              for i in range(c("num_hidden_layers"))]
    return decoder_chain(c, name, s, blocks, False, source, dropout=opts["dropout"])


def read_olmo2(c: Cfg, name: str, s: int, opts: dict, source: str) -> LayerGraph:
    """OLMo 2 (OLMo Team 2024, "2 OLMo 2 Furious", arXiv 2501.00656, Sec. 3.2;
    ``Olmo2Config``): a Llama block whose two RMSNorms act on the attention's and the
    MLP's outputs before each residual add (no norm before them: the same two norm
    vectors and stored norm inputs), a QK-norm over the whole Q and K projections,
    ``attention_bias`` (default false), untied output."""
    bias = bool(c("attention_bias", False))
    attn = replace(attention_dims(c, qkv_bias=bias, qk_norm=True), out_bias=bias, qk_norm_full=True)
    mlp = MlpDims(c("intermediate_size"), gated=True)
    blocks = [decoder_block(f"block{i:03d}", s, attn, mlp=mlp, **opts)
              for i in range(c("num_hidden_layers"))]
    return decoder_chain(c, name, s, blocks, False, source, dropout=opts["dropout"])


#: ``GemmaConfig``'s head width where a config leaves ``head_dim`` out (not hidden/heads).
GEMMA_HEAD_DIM = 256


def read_gemma(c: Cfg, name: str, s: int, opts: dict, source: str) -> LayerGraph:
    """Gemma, Gemma 2 and Gemma 3 (text): GeGLU MLP (three matrices, tanh GELU:
    same GEMMs as SwiGLU), RMSNorm, MHA/GQA/MQA with ``head_dim`` (default 256), input
    and output embeddings tied (``tie_word_embeddings`` default true); Gemma 2 and 3 add
    a norm after the attention and after the MLP (:func:`decoder_block`
    ``post_norms``) and sliding windows on most layers (:mod:`.hf_windows`), Gemma 3
    QK-norm (Gemma Team 2024, arXiv 2403.08295 and 2408.00118; Gemma 3 technical
    report, arXiv 2503.19786, Sec. 2). Not priced (stated with the model): the logit
    soft-capping of Gemma 2 (``attn_logit_softcapping``, ``final_logit_softcapping``),
    the embedding's scaling by sqrt(hidden). ``attention_bias`` (default false) adds Q, K, V
    and O biases. Bidirectional attention
    (``use_bidirectional_attention``, an encoder use of Gemma 3) is refused."""
    if c("use_bidirectional_attention", False):
        raise HfConfigError(f"{c.origin}: use_bidirectional_attention = true is not modelled "
                            "(its windows and mask are an encoder's) (fix: use a causal "
                            "config, or describe the model as an explicit layer list)")
    if c("head_dim", None) is None:
        data = c.data.derived(head_dim=GEMMA_HEAD_DIM) if isinstance(c.data, TrackedConfig) \
            else dict(c.data, head_dim=GEMMA_HEAD_DIM)
        c = Cfg(data, c.origin)
    # attention_bias (GemmaConfig, Gemma2Config, Gemma3TextConfig; default false): biases on
    # q_proj, k_proj, v_proj and o_proj (QA round 11: a true was ignored without a word)
    bias = bool(c("attention_bias", False))
    attn = replace(attention_dims(c, qkv_bias=bias, qk_norm=c.model_type == "gemma3_text"),
                   out_bias=bias)
    mlp = MlpDims(c("intermediate_size"), gated=True)
    post = c.model_type != "gemma"
    blocks = [decoder_block(f"block{i:03d}", s, replace(attn, window=w), mlp=mlp,
                            post_norms=post, **opts)
              for i, w in enumerate(config_windows(c))]
    return decoder_chain(c, name, s, blocks, True, source, dropout=opts["dropout"])


def read_nemotron(c: Cfg, name: str, s: int, opts: dict, source: str) -> LayerGraph:
    """Nemotron-4 and its pruned Minitron models (Parmar et al. 2024, "Nemotron-4 15B
    Technical Report", arXiv 2402.16819, Sec. 2; NVIDIA 2024, "Nemotron-4 340B Technical
    Report", arXiv 2406.11704, Sec. 2.1; ``NemotronConfig``): GQA with ``head_dim``
    (default hidden / heads, as ``NemotronConfig`` sets it; a ``kv_channels`` key is not
    read there either), a plain MLP of two matrices (``up_proj``, ``down_proj``) with the
    config's ``hidden_act`` (default ``relu2``, squared ReLU), ``NemotronLayerNorm1P``
    norms (a LayerNorm with weight and bias: two vectors each), ``attention_bias`` and
    ``mlp_bias`` (default false), untied output (``tie_word_embeddings`` default false).
    RoPE on ``partial_rotary_factor`` of each head (default 0.5) is element-wise work
    the cost model prices for no family."""
    bias = bool(c("attention_bias", False))
    attn = replace(attention_dims(c, qkv_bias=bias), out_bias=bias)
    mlp = MlpDims(c("intermediate_size"), gated=False, bias=bool(c("mlp_bias", False)))
    blocks = [decoder_block(f"block{i:03d}", s, attn, mlp=mlp, layer_norm=True, **opts)
              for i in range(c("num_hidden_layers"))]
    return decoder_chain(c, name, s, blocks, False, source, layer_norm=True, dropout=opts["dropout"])
