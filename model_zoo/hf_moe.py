"""Readers of the Mixture-of-Experts decoders: Mixtral, Qwen2-MoE, Qwen3-MoE,
DeepSeek-V2/V3 (multi-latent attention), gpt-oss, GLM-4.5, OLMoE, Granite MoE and
Phi-3.5-MoE, with the router's checks."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from autopar_opt.core import limits
from autopar_opt.ir.arch import Router
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.model_zoo.blocks import AttentionDims, MlpDims, MoeDims, decoder_block
from autopar_opt.model_zoo.hf_keys import Cfg, HfConfigError, as_json, integer_fix
from autopar_opt.model_zoo.hf_parts import (attention_dims, config_windows, decoder_chain,
                                            with_extra_params)
from autopar_opt.model_zoo.layer_index import layer_index_problem

def _moe_common(c: Cfg, moe_opts: dict, experts_key: str, **kw: Any) -> MoeDims:
    """The MoE dimensions, checked as the ``transformers`` router needs them: at least one
    routed expert (``experts_key``), ``1 <= num_experts_per_tok <= experts`` (``topk``
    picks that many of the router's logits), and DeepSeek's group-limited routing
    (``n_group`` divides the experts, ``topk_group <= n_group``)."""
    experts, top_k = c(experts_key), c("num_experts_per_tok")
    if not isinstance(experts, int) or isinstance(experts, bool):     # "128", 128.0, true
        raise HfConfigError(f"{c.origin}: {experts_key} = {as_json(experts)} is not an integer "
                            f"({integer_fix(experts)}, as the model's published config.json "
                            "has it)")
    if experts < 1:
        raise HfConfigError(f"{c.origin}: {experts_key} = {experts!r}: model_type "
                            f"{c.model_type!r} is a Mixture-of-Experts model and needs at least "
                            "one routed expert (with 0, every layer would be priced dense) (fix: "
                            "give the published expert count, or use the dense model_type "
                            f"{_DENSE_TWIN.get(c.model_type, 'of the family')!r})")
    if not 1 <= top_k <= experts:
        raise HfConfigError(f"{c.origin}: num_experts_per_tok = {top_k} is not within 1 and "
                            f"{experts_key} = {experts}: each token is routed to that many of the "
                            f"layer's {experts} experts (fix: use the published top-k, at most "
                            f"{experts})")
    groups, top_groups = c("n_group", None), c("topk_group", None)
    if isinstance(groups, int) and groups >= 1 and (experts % groups or (
            isinstance(top_groups, int) and not 1 <= top_groups <= groups)):
        raise HfConfigError(f"{c.origin}: n_group = {groups}, topk_group = {top_groups}: the "
                            f"{experts} experts must split into n_group equal groups and "
                            "1 <= topk_group <= n_group (DeepSeek's group-limited routing) "
                            "(fix: use the published n_group and topk_group)")
    moe_router(c)                   # its keys checked where the model is read
    return MoeDims(num_experts=experts, top_k=top_k, **kw, **moe_opts)


#: The router keys' defaults by model_type where the config leaves them out: the
#: ``transformers`` config classes' (DeepseekV3Config: routed_scaling_factor 2.5, n_group 8,
#: topk_group 4, norm_topk_prob true; DeepseekV2Config: routed_scaling_factor 1.0,
#: topk_method greedy, norm_topk_prob false; Qwen2MoeConfig, Qwen3MoeConfig: norm_topk_prob
#: false) and DeepSeek-V3's published modelling code (scoring_func sigmoid, topk_method
#: noaux_tc, the only ones it implements).
ROUTER_DEFAULTS = {
    "deepseek_v3": {"scoring_func": "sigmoid", "topk_method": "noaux_tc", "norm_topk_prob": True,
                    "routed_scaling_factor": 2.5, "n_group": 8, "topk_group": 4},
    "deepseek_v2": {"scoring_func": "softmax", "topk_method": "greedy", "norm_topk_prob": False,
                    "routed_scaling_factor": 1.0, "n_group": None, "topk_group": None},
    "qwen2_moe": {"norm_topk_prob": False}, "qwen3_moe": {"norm_topk_prob": False},
    "olmoe": {"norm_topk_prob": False},           # OlmoeConfig: Qwen2-MoE's router
    # Glm4MoeConfig (GLM-4.5): Glm4MoeTopkRouter is DeepSeek-V3's (sigmoid, expert bias,
    # group-limited), defaults routed_scaling_factor 1.0, n_group 1, topk_group 1
    "glm4_moe": {"scoring_func": "sigmoid", "topk_method": "noaux_tc", "norm_topk_prob": True,
                 "routed_scaling_factor": 1.0, "n_group": 1, "topk_group": 1},
}
#: ``topk_method`` values each DeepSeek generation's modelling code implements
TOPK_METHODS = {"deepseek_v3": ("noaux_tc",), "deepseek_v2": ("greedy", "group_limited_greedy"),
                "glm4_moe": ("noaux_tc",)}


def moe_router(c: Cfg) -> Router | None:
    """The router a MoE config states (:class:`~autopar_opt.ir.arch.Router`; None: the plain
    softmax top-k, Mixtral's and gpt-oss's: the top-k logits' softmax). Read as the models'
    code runs them:

    * Qwen2-MoE / Qwen3-MoE (``Qwen2MoeSparseMoeBlock``): softmax over every expert, top-k,
      divided by the chosen weights' sum only with ``norm_topk_prob``;
    * DeepSeek-V2 (its published ``modeling_deepseek.py`` ``MoEGate``): softmax over every
      expert; ``topk_method`` ``greedy`` or ``group_limited_greedy`` (the ``topk_group`` of
      ``n_group`` groups with the best single score); with ``norm_topk_prob`` the weights
      are renormalised, else multiplied by ``routed_scaling_factor``;
    * DeepSeek-V3 / Moonlight (``DeepseekV3TopkRouter``): sigmoid scores, the choice made on
      scores plus ``e_score_correction_bias`` (``noaux_tc``) within the ``topk_group`` of
      ``n_group`` groups ranked by their two best scores, the weights renormalised with
      ``norm_topk_prob`` and multiplied by ``routed_scaling_factor``.

    A value the code does not take (another ``scoring_func`` or ``topk_method``, a factor
    that is not a positive number, a ``norm_topk_prob`` that is not a boolean) is refused."""
    mt = c.model_type
    defaults = ROUTER_DEFAULTS.get(mt)
    if defaults is None:
        return None

    def key(name: str) -> Any:
        value = c(name, defaults[name])
        return defaults[name] if value is None else value

    renorm = key("norm_topk_prob")
    if not isinstance(renorm, bool):
        raise HfConfigError(f"{c.origin}: norm_topk_prob = {renorm!r} must be true or false "
                            "(whether the chosen experts' weights are renormalised) (fix: use the "
                            "value of the model's published config.json)")
    if mt.startswith("qwen") or mt == "olmoe":
        return None if renorm else Router(renormalise=False)
    score, method = key("scoring_func"), key("topk_method")
    if score != defaults["scoring_func"] or method not in TOPK_METHODS[mt]:
        raise HfConfigError(f"{c.origin}: scoring_func = {score!r}, topk_method = {method!r}: "
                            f"model_type {mt!r} routes with scoring_func "
                            f"{defaults['scoring_func']!r} and topk_method "
                            f"{' or '.join(map(repr, TOPK_METHODS[mt]))} (its modelling code "
                            "implements no other) (fix: use the model's published config.json)")
    factor = key("routed_scaling_factor")
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1e6:
        raise HfConfigError(f"{c.origin}: routed_scaling_factor = {factor!r} must be a positive "
                            "number (the routed experts' weight factor) (fix: use the value of "
                            "the model's published config.json)")
    grouped = method in ("noaux_tc", "group_limited_greedy")
    groups, top_groups = (key("n_group"), key("topk_group")) if grouped else (1, 1)
    if grouped and not (isinstance(groups, int) and isinstance(top_groups, int)
                        and 1 <= top_groups <= groups):
        raise HfConfigError(f"{c.origin}: n_group = {groups!r}, topk_group = {top_groups!r}: "
                            f"topk_method {method!r} routes within topk_group of n_group expert "
                            "groups, 1 <= topk_group <= n_group (fix: use the published n_group "
                            "and topk_group)")
    experts = c("n_routed_experts")
    if grouped and isinstance(experts, int) and experts % groups:
        raise HfConfigError(f"{c.origin}: n_group = {groups}: the {experts} experts must split "
                            "into n_group equal groups (DeepSeek's group-limited routing; "
                            f"model_type {mt!r} takes n_group {defaults['n_group']} where the "
                            "config leaves it out) (fix: use the published n_group)")
    if mt == "deepseek_v2":
        return Router(renormalise=renorm, scaling=1.0 if renorm else float(factor),
                      groups=groups, group_topk=top_groups, group_rank_top=1 if groups > 1 else 2)
    return Router(score="sigmoid", renormalise=renorm, expert_bias=True, scaling=float(factor),
                  groups=groups, group_topk=top_groups)


#: The dense model_type of each MoE family (for the fix of an expert count of 0).
_DENSE_TWIN = {"qwen2_moe": "qwen2", "qwen3_moe": "qwen3", "mixtral": "mistral"}


def _count(c: Cfg, key: str, default: int, low: int, high: int, what: str) -> int:
    """An integer setting in ``[low, high]`` (a layer stride, a count of layers); absent,
    the class's ``default`` (said with the model: :mod:`.hf_keys` ``ARCH_GROUPS``). A
    stated null is refused: the modelling code multiplies or compares it (transformers'
    ``DeepseekV3MoE``, Qwen2-MoE's ``decoder_sparse_step`` test fail on it) and DeepSeek's
    own ``modeling_deepseek.py`` reads a null ``n_shared_experts`` as no shared expert
    (``if config.n_shared_experts is not None``). QA round 34: a null was built as the
    class default (DeepSeek-V2-Lite with two shared experts) without a word."""
    value = c(key, default)
    if value is None and dict.__contains__(c.data, key):
        raise HfConfigError(f"{c.origin}: {key} = null: what it builds is not known "
                            "(transformers' modelling code fails on a null, DeepSeek's own "
                            "modeling_deepseek.py reads a null n_shared_experts as none) (fix: "
                            "state the number as the model's published config.json does"
                            f"{', 0 for none' if low == 0 else ''})")
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise HfConfigError(f"{c.origin}: {key} = {value!r} must be an integer from {low} to "
                            f"{high} ({what}) (fix: use the value of the model's published "
                            "config.json)")
    return value


def _some_moe_layer(c: Cfg, sparse: list[bool], rule: str) -> None:
    """An MoE model_type whose settings leave no MoE layer is refused, not priced dense."""
    if not any(sparse):
        raise HfConfigError(f"{c.origin}: {rule} leave none of the {len(sparse)} layers an MoE "
                            f"layer, so model_type {c.model_type!r} would be priced as a dense "
                            "model (fix: use the model's published config.json)")


def read_mixtral(c: Cfg, name: str, s: int, opts: dict, source: str, moe_opts: dict) -> LayerGraph:
    """Mixtral: Mistral attention, every MLP an MoE of ``num_local_experts``."""
    moe = _moe_common(c, moe_opts, "num_local_experts", expert_ffn=c("intermediate_size"))
    attn = attention_dims(c)
    blocks = [decoder_block(f"block{i:03d}", s, replace(attn, window=w), moe=moe, **opts)
              for i, w in enumerate(config_windows(c))]
    return decoder_chain(c, name, s, blocks, False, source, dropout=opts["dropout"])


#: ``Qwen2MoeConfig``'s ``shared_expert_intermediate_size`` where a config leaves it out (its
#: Qwen1.5-MoE-A2.7B defaults; QA round 11: 0, no shared expert, was taken under a notice
#: saying the class's default was).
QWEN2_MOE_SHARED_DEFAULT = 5632


def read_qwen_moe(c: Cfg, name: str, s: int, opts: dict, source: str, moe_opts: dict) -> LayerGraph:
    """Qwen2-MoE (shared expert with a sigmoid gate, QKV bias) and Qwen3-MoE
    (QK-norm, no shared expert); ``mlp_only_layers`` and ``decoder_sparse_step``
    choose the dense layers, as in the ``transformers`` modelling code; an
    ``mlp_only_layers`` entry that is not a distinct index of a layer is refused
    (:func:`~autopar_opt.model_zoo.layer_index.layer_index_problem`)."""
    qwen2 = c.model_type == "qwen2_moe"
    shared = _count(c, "shared_expert_intermediate_size", QWEN2_MOE_SHARED_DEFAULT, 0,
                    limits.MAX_SEQ_LEN, "the shared expert's width; 0: none") if qwen2 else 0
    moe = _moe_common(c, moe_opts, "num_experts", expert_ffn=c("moe_intermediate_size"),
                      shared_ffn=shared, shared_gate=bool(shared))
    bias = not qwen2 and bool(c("attention_bias", False))     # Qwen3MoeAttention: Q, K, V, O
    attn = replace(attention_dims(c, qkv_bias=qwen2 or bias, qk_norm=not qwen2), out_bias=bias)
    layers = c("num_hidden_layers")
    only = c("mlp_only_layers", None)
    problem = layer_index_problem(only, layers)
    if problem is not None:
        rule, fix = problem
        raise HfConfigError(f"{c.origin}: mlp_only_layers = {repr(only)[:80]}: {rule} (fix: {fix})")
    dense_only = set(only or [])
    step = _count(c, "decoder_sparse_step", 1, 1, layers, "every step-th layer is an MoE layer")
    sparse = [i not in dense_only and (i + 1) % step == 0 for i in range(layers)]
    _some_moe_layer(c, sparse, "mlp_only_layers and decoder_sparse_step")
    blocks = []
    for i, w in enumerate(config_windows(c)):
        kind = {"moe": moe} if sparse[i] else {"mlp": MlpDims(c("intermediate_size"))}
        blocks.append(decoder_block(f"block{i:03d}", s, replace(attn, window=w), **kind, **opts))
    return decoder_chain(c, name, s, blocks, False, source, dropout=opts["dropout"])


def read_olmoe(c: Cfg, name: str, s: int, opts: dict, source: str, moe_opts: dict) -> LayerGraph:
    """OLMoE (Muennighoff et al. 2024, "OLMoE: Open Mixture-of-Experts Language Models",
    arXiv 2409.02060, Sec. 2; ``OlmoeConfig``, ``OlmoeDecoderLayer``): Llama's pre-norm
    block with a QK-norm over the whole Q and K projections (OLMo 2's: RMSNorm of
    heads x head_dim and kv_heads x head_dim), every MLP an MoE of ``num_experts`` SwiGLU
    experts of ``intermediate_size``, top ``num_experts_per_tok``, Qwen2-MoE's router
    (softmax over every expert, renormalised only with ``norm_topk_prob``, default false),
    no shared expert, ``attention_bias`` (Q, K, V and O; default false), untied output.
    ``clip_qkv`` (a clamp, default none) is said, not priced. QA round 36: refused as an
    unknown model_type."""
    moe = _moe_common(c, moe_opts, "num_experts", expert_ffn=c("intermediate_size"))
    bias = bool(c("attention_bias", False))            # OlmoeAttention: Q, K, V and O
    attn = replace(attention_dims(c, qkv_bias=bias, qk_norm=True), qk_norm_full=True,
                   out_bias=bias)
    blocks = [decoder_block(f"block{i:03d}", s, attn, moe=moe, **opts)
              for i in range(c("num_hidden_layers"))]
    return decoder_chain(c, name, s, blocks, False, source, dropout=opts["dropout"])


def read_granitemoe(c: Cfg, name: str, s: int, opts: dict, source: str,
                    moe_opts: dict) -> LayerGraph:
    """Granite 3.x MoE (``GraniteMoeConfig``, ``GraniteMoeDecoderLayer``; IBM Granite 3.0
    language models report): Granite's block (its scalar multipliers said with the model,
    not priced) with every MLP an MoE of ``num_local_experts`` SwiGLU experts of
    ``intermediate_size`` (``GraniteMoeParallelExperts``), top ``num_experts_per_tok``,
    Mixtral's router (``GraniteMoeTopKGating``: softmax of the top-k logits), grouped keys,
    ``attention_bias`` on Q, K, V and O (default false), output tied only where
    ``tie_word_embeddings`` says so (default false; the published configs state true).
    QA round 36: refused as an unknown model_type."""
    moe = _moe_common(c, moe_opts, "num_local_experts", expert_ffn=c("intermediate_size"))
    bias = bool(c("attention_bias", False))
    attn = replace(attention_dims(c, qkv_bias=bias), out_bias=bias)
    blocks = [decoder_block(f"block{i:03d}", s, attn, moe=moe, **opts)
              for i in range(c("num_hidden_layers"))]
    return decoder_chain(c, name, s, blocks, False, source, dropout=opts["dropout"])


def read_phimoe(c: Cfg, name: str, s: int, opts: dict, source: str,
                moe_opts: dict) -> LayerGraph:
    """Phi-3.5-MoE (Abdin et al. 2024, Phi-3 Technical Report, arXiv 2404.14219, Sec. 2;
    ``PhimoeConfig``, ``PhimoeDecoderLayer``): grouped-query attention with biases on Q,
    K, V and O where ``attention_bias`` (default false; the published config true),
    LayerNorms with weight and bias, every MLP an MoE of ``num_local_experts`` SwiGLU
    experts of ``intermediate_size``, top ``num_experts_per_tok``, Mistral's
    ``sliding_window`` (default none), an untied output layer with a bias where
    ``lm_head_bias``. Its SparseMixer router (and the jitter noise) is priced as the
    plain top-k router it replaces, and said. QA round 36: refused as an unknown
    model_type."""
    moe = _moe_common(c, moe_opts, "num_local_experts", expert_ffn=c("intermediate_size"))
    bias = bool(c("attention_bias", False))
    attn = replace(attention_dims(c, qkv_bias=bias), out_bias=bias)
    blocks = [decoder_block(f"block{i:03d}", s, replace(attn, window=w), moe=moe,
                            layer_norm=True, **opts)
              for i, w in enumerate(config_windows(c))]
    graph = decoder_chain(c, name, s, blocks, False, source, layer_norm=True,
                          dropout=opts["dropout"])
    return with_extra_params(graph, head=c("vocab_size") if c("lm_head_bias", False) else 0)


def read_gpt_oss(c: Cfg, name: str, s: int, opts: dict, source: str, moe_opts: dict) -> LayerGraph:
    """gpt-oss (OpenAI 2025, gpt-oss model card, arXiv 2508.10925, Sec. 2.1;
    ``GptOssConfig``): GQA with biases (``attention_bias``) and a learned sink per head,
    128-token windows on every second layer (``layer_types``), an MoE on every layer:
    ``num_local_experts`` SwiGLU experts of ``intermediate_size`` with biases, top
    ``num_experts_per_tok``, a router with a bias; RMSNorm, untied output. Not priced
    (stated with the model): the SwiGLU clamp (``swiglu_limit``), the sinks' softmax
    offset and YaRN's rope scaling (element-wise work inside the kernels)."""
    moe = _moe_common(c, moe_opts, "num_local_experts", expert_ffn=c("intermediate_size"),
                      router_bias=True, expert_bias=True)
    bias = bool(c("attention_bias", True))
    attn = replace(attention_dims(c, qkv_bias=bias), out_bias=bias, sinks=True)
    blocks = [decoder_block(f"block{i:03d}", s, replace(attn, window=w), moe=moe, **opts)
              for i, w in enumerate(config_windows(c))]
    return decoder_chain(c, name, s, blocks, False, source, dropout=opts["dropout"])


#: ``n_shared_experts`` and ``first_k_dense_replace`` where a DeepSeek config leaves them out:
#: the configuration classes' defaults (transformers ``DeepseekV3Config``: 1 and 3;
#: ``DeepseekV2Config``: 2 and 0). QA round 11: 0 and 0 were taken for both, and the build
#: said "the defaults of transformers' configuration class ... were taken".
SHARED_EXPERTS_DEFAULT = {"deepseek_v3": 1, "deepseek_v2": 2, "glm4_moe": 1}
FIRST_DENSE_DEFAULT = {"deepseek_v3": 3, "deepseek_v2": 0, "glm4_moe": 1}


def read_deepseek(c: Cfg, name: str, s: int, opts: dict, source: str, moe_opts: dict) -> LayerGraph:
    """DeepSeek-V2/V3: MLA attention; the first ``first_k_dense_replace`` layers
    dense, then MoE every ``moe_layer_freq`` layers with ``n_shared_experts``
    shared experts of ``moe_intermediate_size`` each."""
    a = c("num_attention_heads")
    if c("attention_bias", False):
        # DeepseekV3Attention puts biases on q_a_proj (q_proj), kv_a_proj_with_mqa and o_proj
        # only; MLA's blocks have no such biases (QA round 11: a true was ignored silently)
        raise HfConfigError(f"{c.origin}: attention_bias = true: the biases DeepSeek's "
                            "attention then has (on its query and key-value down projections "
                            "and its output projection) are not modelled (fix: use the "
                            "published config.json, whose attention_bias is false, or describe "
                            "the model as an explicit layer list)")
    attn = AttentionDims(hidden=c("hidden_size"), heads=a, kv_heads=a, head_dim=0,
                         q_lora_rank=c("q_lora_rank", 0) or 0, kv_lora_rank=c("kv_lora_rank"),
                         qk_nope_dim=c("qk_nope_head_dim"), qk_rope_dim=c("qk_rope_head_dim"),
                         v_head_dim=c("v_head_dim"))
    f_e = c("moe_intermediate_size")
    mt = c.model_type
    shared = _count(c, "n_shared_experts", SHARED_EXPERTS_DEFAULT[mt], 0, limits.MAX_SEQ_LEN,
                    "always-on shared experts")
    moe = _moe_common(c, moe_opts, "n_routed_experts", expert_ffn=f_e, shared_ffn=shared * f_e,
                      router_bias=c.model_type == "deepseek_v3")
    layers = c("num_hidden_layers")
    first_dense = _count(c, "first_k_dense_replace", FIRST_DENSE_DEFAULT[mt], 0, layers,
                         "the first layers are dense")
    freq = _count(c, "moe_layer_freq", 1, 1, layers, "every freq-th layer is an MoE layer")
    sparse = [i >= first_dense and i % freq == 0 for i in range(layers)]
    _some_moe_layer(c, sparse, "first_k_dense_replace and moe_layer_freq")
    return decoder_chain(c, name, s, _dense_or_moe_blocks(c, s, attn, moe, sparse, opts), False,
                         source, dropout=opts["dropout"])


def read_glm4_moe(c: Cfg, name: str, s: int, opts: dict, source: str,
                  moe_opts: dict) -> LayerGraph:
    """GLM-4.5 and GLM-4.5-Air (GLM-4.5 Team 2025, "GLM-4.5: Agentic, Reasoning, and Coding
    (ARC) Foundation Models", arXiv 2508.06471; ``Glm4MoeConfig``): grouped-query
    attention (``num_key_value_heads`` default 8) with Q, K, V biases (``attention_bias``),
    a per-head QK-norm where ``use_qk_norm`` (GLM-4.5; not Air), RoPE on half of each head;
    the first ``first_k_dense_replace`` layers (default 1) dense, every other layer an MoE
    of ``n_routed_experts`` experts of ``moe_intermediate_size`` with ``n_shared_experts``
    shared ones (default 1) and DeepSeek-V3's router (sigmoid scores, expert bias,
    group-limited; :func:`moe_router`); untied output. The multi-token-prediction layers
    (``num_nextn_predict_layers``) are not built, and said."""
    mt = c.model_type
    attn = attention_dims(c, qkv_bias=bool(c("attention_bias", False)),
                          qk_norm=bool(c("use_qk_norm", False)))
    f_e = c("moe_intermediate_size")
    shared = _count(c, "n_shared_experts", SHARED_EXPERTS_DEFAULT[mt], 0, limits.MAX_SEQ_LEN,
                    "always-on shared experts")
    moe = _moe_common(c, moe_opts, "n_routed_experts", expert_ffn=f_e, shared_ffn=shared * f_e,
                      router_bias=True)
    layers = c("num_hidden_layers")
    first_dense = _count(c, "first_k_dense_replace", FIRST_DENSE_DEFAULT[mt], 0, layers,
                         "the first layers are dense")
    sparse = [i >= first_dense for i in range(layers)]
    _some_moe_layer(c, sparse, "first_k_dense_replace")
    return decoder_chain(c, name, s, _dense_or_moe_blocks(c, s, attn, moe, sparse, opts), False,
                         source, dropout=opts["dropout"])


def _dense_or_moe_blocks(c: Cfg, s: int, attn, moe, sparse: list[bool], opts: dict) -> list:
    """The decoder blocks of a stack whose layer ``i`` is an MoE layer where ``sparse[i]``,
    else a dense MLP of ``intermediate_size`` (DeepSeek's and GLM-4.5's first dense layers)."""
    blocks = []
    for i, is_moe in enumerate(sparse):
        kind = {"moe": moe} if is_moe else {"mlp": MlpDims(c("intermediate_size"))}
        blocks.append(decoder_block(f"block{i:03d}", s, attn, **kind, **opts))
    return blocks
