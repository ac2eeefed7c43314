"""The launch-time architecture (:class:`ModelArch`) of a decoder's Hugging Face config:
what the Megatron-LM, Megatron-Bridge, torchtitan and DeepSpeed exports state and the
framework targets check, read off the config and the built graph."""

from __future__ import annotations

from typing import Any

from autopar_opt.ir.arch import ModelArch
from autopar_opt.ir.graph import LayerGraph, LayerKind
from autopar_opt.model_zoo.hf_decoders import GEMMA_HEAD_DIM
from autopar_opt.model_zoo.hf_keys import Cfg, activation_name, dropout_rates
from autopar_opt.model_zoo.hf_moe import (QWEN2_MOE_SHARED_DEFAULT, SHARED_EXPERTS_DEFAULT,
                                          moe_router)
from autopar_opt.model_zoo.hf_parts import default_head_dim, kv_heads_of
from autopar_opt.model_zoo.hf_values import NORM_EPS_KEYS, rope_type

#: The Llama-layout families (gated MLP, RMSNorm, RoPE; dense or MoE) :func:`hf_arch`
#: reads in its main path, by ``model_type``.
LLAMA_LAYOUT = ("llama", "mistral", "qwen2", "qwen3", "phi3", "granite", "olmo2", "mixtral",
                "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "gemma", "gemma2",
                "gemma3_text", "gpt_oss", "glm", "glm4", "glm4_moe", "internlm2", "olmoe",
                "granitemoe", "phimoe")


def _blocks(graph: LayerGraph) -> list:
    """The graph's transformer layers, dense and MoE, in order."""
    return [layer for layer in graph.layers
            if layer.kind in (LayerKind.transformer_block, LayerKind.moe_block)]


def _windows(blocks: list) -> tuple[int, ...]:
    """Each block's sliding window (``ModelArch.windows``); empty where none has one."""
    return tuple(layer.attn_window for layer in blocks) \
        if any(layer.attn_window for layer in blocks) else ()


def hf_arch(config: dict[str, Any], graph: LayerGraph) -> ModelArch | None:
    """The launch-time architecture of a decoder-only HF config (None for the
    encoder, encoder-decoder and vision families, which the launchers' exports do
    not cover), with its normalisation epsilon and RoPE scaling as stated. The MoE
    layers are read off the built graph (the same rules that built it:
    ``first_k_dense_replace``, ``moe_layer_freq``, ``mlp_only_layers``,
    ``decoder_sparse_step``)."""
    from dataclasses import replace

    arch = _family_arch(config, graph)
    if arch is None:
        return None
    eps = next((config[k] for k in NORM_EPS_KEYS if isinstance(config.get(k), (int, float))
                and not isinstance(config.get(k), bool)), None)
    scaling = config.get("rope_scaling")
    rope = yarn = None
    if isinstance(scaling, dict) and not arch.learned_positions:
        kind = rope_type(config)            # checked when the file was read (hf_values)
        factor = scaling.get("factor")
        # LongRoPE has no single factor (a short and a long list): its original length is
        # in rope_scaling or, in Phi-3's and Phi-4's configs, at the config's top level
        orig = scaling.get("original_max_position_embeddings") or (
            config.get("original_max_position_embeddings") if kind == "longrope" else 0)
        if kind and kind != "default":
            rope = (kind, float(factor) if isinstance(factor, (int, float)) else 0.0,
                    float(scaling.get("low_freq_factor") or 0.0),
                    float(scaling.get("high_freq_factor") or 0.0),
                    int(orig or 0))
        if kind == "yarn":        # DeepSeek's yarn_get_mscale / yarn_find_correction_range
            yarn = tuple(float(scaling[k]) if isinstance(scaling.get(k), (int, float)) else d
                         for k, d in (("mscale", 1.0), ("mscale_all_dim", 0.0),
                                      ("beta_fast", 32.0), ("beta_slow", 1.0)))
    return replace(arch, norm_eps=float(eps) if eps is not None else None, rope_scaling=rope,
                   yarn=yarn, rotary_fraction=_rotary_fraction(config, arch))


#: GPT-NeoX rotates a quarter of each head where its config states no ``rotary_pct``
#: (``GPTNeoXConfig`` default 0.25, Pythia's value).
NEOX_ROTARY_PCT = 0.25


def _rotary_fraction(config: dict[str, Any], arch: ModelArch) -> float:
    """The share of each head RoPE rotates: ``partial_rotary_factor`` wherever a config
    states it (transformers' RoPE initialisation reads it for every family:
    ``modeling_rope_utils._compute_default_rope_parameters``; Phi-3.5/Phi-4-mini's 0.75,
    StableLM's 0.25), GPT-NeoX's ``rotary_pct``; else the family's own default (Phi's and
    Nemotron's 0.5, set by their readers; 1 elsewhere). Values were checked in (0, 1] when
    the file was read. Not for MLA, whose rotated width is ``qk_rope_head_dim``."""
    if arch.learned_positions or arch.alibi or arch.mla is not None:
        return arch.rotary_fraction
    share = config.get("partial_rotary_factor")
    if config.get("model_type") == "gpt_neox":
        share = config.get("rotary_pct", share if share is not None else NEOX_ROTARY_PCT)
    return float(share) if share is not None else arch.rotary_fraction


def _family_arch(config: dict[str, Any], graph: LayerGraph) -> ModelArch | None:
    """:func:`hf_arch` by family, before its epsilon and RoPE scaling."""
    mt = config.get("model_type")
    if mt in CLASSIC:
        return _classic_arch(config, graph)
    if mt == "nemotron":
        return _nemotron_arch(config, graph)
    if mt == "mpt":
        return _mpt_arch(config, graph)
    if mt in ("cohere", "cohere2"):
        return _cohere_arch(config, graph)
    if mt == "phi":
        return _phi_arch(config, graph)
    if mt not in LLAMA_LAYOUT:
        return None
    gemma = mt in ("gemma", "gemma2", "gemma3_text")
    glm = mt in ("glm", "glm4", "glm4_moe")
    g = config.get
    h, a = int(g("hidden_size")), int(g("num_attention_heads"))
    blocks = _blocks(graph)
    moe = tuple(i for i, layer in enumerate(blocks) if layer.is_moe)
    experts = int(g("num_local_experts") or g("num_experts") or g("n_routed_experts") or 0)
    expert_ffn = int(g("moe_intermediate_size")
                     or (g("intermediate_size") if mt in ("mixtral", "gpt_oss", "olmoe",
                                                           "granitemoe", "phimoe") else 0)
                     or 0)
    shared = _qwen2_moe_shared(config) if mt == "qwen2_moe" else \
        _deepseek_shared(config) * expert_ffn if mt.startswith("deepseek") or mt == "glm4_moe" \
        else 0
    # the linear biases hf_decoders builds (LlamaAttention/Qwen3Attention's attention_bias on
    # Q, K, V and O; LlamaMLP's mlp_bias), stated so the line and the exports say them
    # (OLMo 2's and Qwen3-MoE's attention_bias too: hf_decoders.read_olmo2, hf_moe.read_qwen_moe;
    # QA round 11: their line said "no biases" over a build that had them)
    attn_bias = (mt in ("llama", "qwen3", "granite", "olmo2", "qwen3_moe", "gemma", "gemma2",
                        "gemma3_text", "olmoe", "granitemoe", "phimoe")
                 and bool(g("attention_bias", False))) \
        or (mt == "internlm2" and bool(g("bias", True)))       # InternLM2's wqkv and wo
    mlp_bias = mt in ("llama", "granite") and bool(g("mlp_bias", False))
    mla = None
    if mt.startswith("deepseek"):
        mla = (int(g("q_lora_rank") or 0), int(g("kv_lora_rank")), int(g("qk_nope_head_dim")),
               int(g("qk_rope_head_dim")), int(g("v_head_dim")))
    return ModelArch(
        family=str(mt), num_layers=len(blocks), hidden=h, heads=a,
        kv_heads=kv_heads_of(config, mt, a) if not mla else a,
        head_dim=int(g("head_dim") or (GEMMA_HEAD_DIM if gemma
                                        else default_head_dim(mt, h, a) or h // a)),
        ffn_hidden=int(g("intermediate_size") or 0),
        vocab=int(g("vocab_size")), max_positions=int(g("max_position_embeddings") or 0),
        gated=True, norm="layernorm" if mt == "phimoe" else "rmsnorm",
        tied=bool(g("tie_word_embeddings", gemma)),
        qk_norm=mt in ("qwen3", "qwen3_moe", "gemma3_text", "olmo2", "olmoe")
        or (mt == "glm4_moe" and bool(g("use_qk_norm", False))),
        qkv_bias=mt in ("qwen2", "qwen2_moe")
        or (glm and bool(g("attention_bias", mt != "glm4_moe"))),
        activation=activation_name(config, "hidden_activation", "gelu_pytorch_tanh") if gemma
        else "silu" if mt == "gpt_oss" else activation_name(config, "hidden_act", "silu"),
        post_norms=(gemma and mt != "gemma") or mt == "glm4",
        rotary_fraction=0.5 if glm else 1.0,    # GlmConfig/Glm4Config partial_rotary_factor
        dropout=dropout_rates(config),
        unpriced=_gemma_unpriced(config) if gemma else _gpt_oss_unpriced(config)
        if mt == "gpt_oss" else _granite_unpriced(config) if mt in ("granite", "granitemoe")
        else ("SparseMixer routing (priced as a top-k softmax router) and its jitter noise",)
        if mt == "phimoe"
        else (f"clip_qkv {g('clip_qkv'):g} on Q, K and V",)
        if mt == "olmoe" and isinstance(g("clip_qkv"), (int, float)) else (),
        biases=(mt == "gpt_oss" and bool(g("attention_bias", True))) or (attn_bias and mlp_bias),
        attn_bias=attn_bias and not mlp_bias, mlp_bias=mlp_bias and not attn_bias,
        rope_theta=float(g("rope_theta")) if g("rope_theta") else None,
        num_experts=experts if moe else 0, top_k=int(g("num_experts_per_tok") or 0) if moe else 0,
        moe_ffn_hidden=expert_ffn if moe else 0, shared_ffn=shared if moe else 0,
        moe_layers=moe, mla=mla, router=moe_router(Cfg(config, "config.json")) if moe else None,
        shared_gate=bool(moe) and mt == "qwen2_moe" and bool(shared),
        hf_id=str(g("_name_or_path") or ""), windows=_windows(blocks))


def _qwen2_moe_shared(config: dict[str, Any]) -> int:
    """A Qwen2-MoE config's shared expert width, its class's default where absent."""
    n = config.get("shared_expert_intermediate_size")
    return int(QWEN2_MOE_SHARED_DEFAULT if n is None else n)


def _deepseek_shared(config: dict[str, Any]) -> int:
    """A DeepSeek config's shared experts: ``n_shared_experts``, else its configuration
    class's default (:data:`~.hf_moe.SHARED_EXPERTS_DEFAULT`), as the reader builds them."""
    n = config.get("n_shared_experts")
    return int(SHARED_EXPERTS_DEFAULT[config["model_type"]] if n is None else n)


#: Decoder families before the Llama layout, described for the launchers' rules (their
#: blocks: a plain MLP, LayerNorm, biases; GPT-2's learned positions, OPT's ReLU,
#: BLOOM's ALiBi, Falcon's and GPT-NeoX's parallel attention/MLP, StarCoder2's grouped
#: keys and sliding windows), by ``model_type``.
CLASSIC = ("opt", "bloom", "falcon", "gpt_neox", "gpt2", "starcoder2")


def _classic_activation(config: dict[str, Any]) -> str:
    """The plain MLP's activation of a :data:`CLASSIC` family, by the key and default its
    transformers config class has: OPT and GPT-2 ``activation_function`` (``relu``,
    ``gelu_new``), GPT-NeoX and StarCoder2 ``hidden_act`` (``gelu``,
    ``gelu_pytorch_tanh``); BLOOM's and Falcon's MLPs are GELU with no key."""
    mt = config["model_type"]
    if mt in ("opt", "gpt2"):
        return activation_name(config, "activation_function", "relu" if mt == "opt" else "gelu_new",
                               plain=True)
    if mt in ("gpt_neox", "starcoder2"):
        return activation_name(config, "hidden_act",
                               "gelu" if mt == "gpt_neox" else "gelu_pytorch_tanh", plain=True)
    return "gelu"


def _classic_arch(config: dict[str, Any], graph: LayerGraph) -> ModelArch:
    """:func:`hf_arch` of a :data:`CLASSIC` family, read off the built graph and the
    config (the same keys the reader took)."""
    g = config.get
    mt = config["model_type"]
    blocks = _blocks(graph)
    h = int(g("hidden_size") or g("n_embed") or g("n_embd"))
    a = int(g("num_attention_heads") or g("n_head"))
    kv = max(1, round(blocks[0].max_tp)) if blocks else a
    ffn = int(g("ffn_dim") or g("ffn_hidden_size") or g("intermediate_size") or g("n_inner")
              or 4 * h)
    parallel = (mt == "falcon" and (bool(g("new_decoder_architecture")) or g("parallel_attn", True))) \
        or (mt == "gpt_neox" and g("use_parallel_residual", True))
    return ModelArch(
        family=mt, num_layers=len(blocks), hidden=h, heads=a, kv_heads=kv, head_dim=h // a,
        ffn_hidden=ffn, vocab=int(g("vocab_size")),
        max_positions=int(g("max_position_embeddings") or g("n_positions") or 0), gated=False,
        norm="layernorm", tied=bool(g("tie_word_embeddings", mt != "gpt_neox")),
        biases=mt in ("bloom", "gpt2") or (mt == "opt" and bool(g("enable_bias", True)))
        or bool(g("bias", False))
        or (mt == "starcoder2" and bool(g("use_bias", True)))
        or (mt == "gpt_neox" and bool(g("attention_bias", True))),
        # GPT-NeoX without attention biases keeps its MLP's (GPTNeoXConfig.attention_bias)
        mlp_bias=mt == "gpt_neox" and not bool(g("attention_bias", True)),
        rope_theta=float(g("rope_theta")) if mt == "starcoder2" and g("rope_theta") else None,
        windows=_windows(blocks),
        learned_positions=mt in ("opt", "gpt2"), activation=_classic_activation(config),
        alibi=mt == "bloom" or (mt == "falcon" and bool(g("alibi", False))),
        parallel_block=bool(parallel), dropout=dropout_rates(config))


def _llama_like_fields(config: dict[str, Any], graph: LayerGraph) -> dict[str, Any]:
    """The :class:`ModelArch` fields a decoder config with Llama's keys states the same way
    for every family read here (``hidden_size``, ``num_attention_heads``,
    ``num_key_value_heads``, ``head_dim``, ``intermediate_size``, ``rope_theta``, ...)."""
    g = config.get
    h, a = int(g("hidden_size")), int(g("num_attention_heads"))
    blocks = _blocks(graph)
    return dict(num_layers=len(blocks), hidden=h, heads=a,
                kv_heads=kv_heads_of(config, str(g("model_type")), a),
                head_dim=int(g("head_dim") or h // a),
                ffn_hidden=int(g("intermediate_size")), vocab=int(g("vocab_size")),
                max_positions=int(g("max_position_embeddings") or 0), norm="layernorm",
                rope_theta=float(g("rope_theta")) if g("rope_theta") else None,
                dropout=dropout_rates(config), hf_id=str(g("_name_or_path") or ""))


def _mpt_arch(config: dict[str, Any], graph: LayerGraph) -> ModelArch:
    """:func:`hf_arch` of an MPT config (the keys and defaults the reader took)."""
    g = config.get
    h, a = int(g("d_model")), int(g("n_heads"))
    blocks = _blocks(graph)
    return ModelArch(
        family="mpt", num_layers=len(blocks), hidden=h, heads=a, kv_heads=a, head_dim=h // a,
        ffn_hidden=int(g("expansion_ratio") or 4) * h, vocab=int(g("vocab_size")),
        max_positions=int(g("max_seq_len") or 0), gated=False, norm="layernorm",
        tied=bool(g("tie_word_embeddings", True)),
        biases=not bool(g("no_bias", True)), activation="gelu", alibi=True,
        dropout=dropout_rates(config), hf_id=str(g("_name_or_path") or ""))


#: ``logit_scale`` where a Cohere config leaves it out: ``CohereConfig`` and ``Cohere2Config``
#: default it to 0.0625 (transformers ``configuration_cohere.py`` / ``configuration_cohere2.py``).
COHERE_LOGIT_SCALE = 0.0625


def _cohere_arch(config: dict[str, Any], graph: LayerGraph) -> ModelArch:
    """:func:`hf_arch` of a Cohere config (the keys and defaults the reader took)."""
    g = config.get
    stated = "logit_scale" in config      # absent: the class's default multiplies the logits
    scale = g("logit_scale") if stated else COHERE_LOGIT_SCALE
    mt = str(g("model_type"))
    klass = "Cohere2Config" if mt == "cohere2" else "CohereConfig"
    return ModelArch(
        family=mt, **_llama_like_fields(config, graph),
        activation=activation_name(config, "hidden_act", "silu"),
        # attention_bias: Q, K, V and O only (CohereAttention; its MLP has none)
        tied=bool(g("tie_word_embeddings", True)), attn_bias=bool(g("attention_bias", False)),
        qk_norm=mt == "cohere" and bool(g("use_qk_norm", False)), parallel_block=True,
        windows=_windows(_blocks(graph)),
        unpriced=(f"logit_scale {scale:g} on the output logits"
                  + ("" if stated else f" ({klass}'s default)"),)
        if isinstance(scale, (int, float)) and scale != 1 else ())


def _phi_arch(config: dict[str, Any], graph: LayerGraph) -> ModelArch:
    """:func:`hf_arch` of a Phi (1, 1.5, 2) config (the keys and defaults the reader took)."""
    g = config.get
    factor = g("partial_rotary_factor")
    return ModelArch(
        family="phi", **_llama_like_fields(config, graph), gated=False,
        activation=activation_name(config, "hidden_act", "gelu_new", plain=True),
        tied=bool(g("tie_word_embeddings", False)), biases=True,
        qk_norm=bool(g("qk_layernorm", False)), parallel_block=True,
        rotary_fraction=float(0.5 if factor is None else factor))


def _nemotron_arch(config: dict[str, Any], graph: LayerGraph) -> ModelArch:
    """:func:`hf_arch` of a Nemotron config (the keys and defaults the reader took:
    ``NemotronConfig``): a plain MLP with ``hidden_act``, LayerNorm1P, partial RoPE."""
    g = config.get
    factor = g("partial_rotary_factor")
    # attention_bias (Q, K, V, O) and mlp_bias apart, as the reader builds them: one alone is
    # not "biases" on every linear layer (QA round 11: the line and Megatron's
    # add_bias_linear said MLP biases the build did not have)
    attn, mlp = bool(g("attention_bias", False)), bool(g("mlp_bias", False))
    return ModelArch(
        family="nemotron", **_llama_like_fields(config, graph), gated=False,
        tied=bool(g("tie_word_embeddings", False)),
        biases=attn and mlp, attn_bias=attn and not mlp, mlp_bias=mlp and not attn,
        activation=activation_name(config, "hidden_act", "relu2", plain=True),
        rotary_fraction=float(0.5 if factor is None else factor), zero_centered_norm=True)


#: Gemma2Config's soft-caps where a config leaves them out (transformers
#: configuration_gemma2.py: attn_logit_softcapping 50.0, final_logit_softcapping 30.0;
#: Gemma 1 and Gemma3TextConfig default to none). QA round 11: a Gemma 2 config without
#: them soft-capped by default and the "not priced" line said nothing.
GEMMA2_SOFTCAPS = {"attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0}


def _gemma_unpriced(config: dict[str, Any]) -> tuple[str, ...]:
    """What a Gemma config computes that the cost model does not price: its
    logit soft-capping (``tanh`` over the attention scores inside the kernel, over
    the output logits as one more element-wise pass) and the embedding's scaling
    by sqrt(hidden) (one element-wise multiply)."""
    out = []
    defaults = GEMMA2_SOFTCAPS if config.get("model_type") == "gemma2" else {}
    for key in ("attn_logit_softcapping", "final_logit_softcapping"):
        value = config.get(key) if key in config else defaults.get(key)
        if value:
            out.append(f"{key} {value:g}" + ("" if key in config else " (Gemma2Config's default)"))
    out.append("the embedding's scaling by sqrt(hidden_size)")
    return tuple(out)


#: Granite's scalar multipliers that add work (``GraniteConfig``) and where each acts;
#: its ``attention_multiplier`` is the attention kernel's softmax scale (no extra work).
GRANITE_MULTIPLIERS = (("embedding_multiplier", "the embedding output"),
                       ("residual_multiplier", "each residual branch"),
                       ("logits_scaling", "the output logits (divided)"))


def _granite_unpriced(config: dict[str, Any]) -> tuple[str, ...]:
    """What a Granite config computes that the cost model does not price: its scalar
    multipliers, one element-wise multiply each."""
    return tuple(f"{key} {config[key]:g} on {where}" for key, where in GRANITE_MULTIPLIERS
                 if isinstance(config.get(key), (int, float)) and config[key] != 1)


def _gpt_oss_unpriced(config: dict[str, Any]) -> tuple[str, ...]:
    """What a gpt-oss config computes that the cost model does not price."""
    out = ["attention sinks (one learned softmax offset per head, inside the kernel)"]
    if config.get("swiglu_limit"):
        out.append(f"the SwiGLU clamp (swiglu_limit {config['swiglu_limit']:g})")
    if config.get("rope_scaling"):
        out.append("YaRN rope scaling")
    return tuple(out)
