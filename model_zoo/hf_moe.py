"""Readers of the Mixture-of-Experts decoders: Mixtral, Qwen2-MoE, Qwen3-MoE,
DeepSeek-V2/V3 (multi-latent attention) and gpt-oss, with the router's checks."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from autopar_opt.core import limits
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.model_zoo.blocks import AttentionDims, MlpDims, MoeDims, decoder_block
from autopar_opt.model_zoo.hf_keys import Cfg, HfConfigError
from autopar_opt.model_zoo.hf_parts import attention_dims, config_windows, decoder_chain
from autopar_opt.model_zoo.layer_index import layer_index_problem

def _moe_common(c: Cfg, moe_opts: dict, experts_key: str, **kw: Any) -> MoeDims:
    """The MoE dimensions, checked as the ``transformers`` router needs them: at least one
    routed expert (``experts_key``), ``1 <= num_experts_per_tok <= experts`` (``topk``
    picks that many of the router's logits), and DeepSeek's group-limited routing
    (``n_group`` divides the experts, ``topk_group <= n_group``)."""
    experts, top_k = c(experts_key), c("num_experts_per_tok")
    if not isinstance(experts, int) or experts < 1:
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
    return MoeDims(num_experts=experts, top_k=top_k, **kw, **moe_opts)


#: The dense model_type of each MoE family (for the fix of an expert count of 0).
_DENSE_TWIN = {"qwen2_moe": "qwen2", "qwen3_moe": "qwen3", "mixtral": "mistral"}


def _count(c: Cfg, key: str, default: int, low: int, high: int, what: str) -> int:
    """An integer setting in ``[low, high]`` (a layer stride, a count of layers)."""
    value = c(key, default)
    value = default if value is None else value
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
    return decoder_chain(c, name, s, blocks, False, source)


def read_qwen_moe(c: Cfg, name: str, s: int, opts: dict, source: str, moe_opts: dict) -> LayerGraph:
    """Qwen2-MoE (shared expert with a sigmoid gate, QKV bias) and Qwen3-MoE
    (QK-norm, no shared expert); ``mlp_only_layers`` and ``decoder_sparse_step``
    choose the dense layers, as in the ``transformers`` modelling code; an
    ``mlp_only_layers`` entry that is not a distinct index of a layer is refused
    (:func:`~autopar_opt.model_zoo.layer_index.layer_index_problem`)."""
    qwen2 = c.model_type == "qwen2_moe"
    shared = _count(c, "shared_expert_intermediate_size", 0, 0, limits.MAX_SEQ_LEN,
                    "the shared expert's width; 0: none") if qwen2 else 0
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
    return decoder_chain(c, name, s, blocks, False, source)


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
    return decoder_chain(c, name, s, blocks, False, source)


def read_deepseek(c: Cfg, name: str, s: int, opts: dict, source: str, moe_opts: dict) -> LayerGraph:
    """DeepSeek-V2/V3: MLA attention; the first ``first_k_dense_replace`` layers
    dense, then MoE every ``moe_layer_freq`` layers with ``n_shared_experts``
    shared experts of ``moe_intermediate_size`` each."""
    a = c("num_attention_heads")
    attn = AttentionDims(hidden=c("hidden_size"), heads=a, kv_heads=a, head_dim=0,
                         q_lora_rank=c("q_lora_rank", 0) or 0, kv_lora_rank=c("kv_lora_rank"),
                         qk_nope_dim=c("qk_nope_head_dim"), qk_rope_dim=c("qk_rope_head_dim"),
                         v_head_dim=c("v_head_dim"))
    f_e = c("moe_intermediate_size")
    shared = _count(c, "n_shared_experts", 0, 0, limits.MAX_SEQ_LEN, "always-on shared experts")
    moe = _moe_common(c, moe_opts, "n_routed_experts", expert_ffn=f_e, shared_ffn=shared * f_e,
                      router_bias=c.model_type == "deepseek_v3")
    layers = c("num_hidden_layers")
    first_dense = _count(c, "first_k_dense_replace", 0, 0, layers, "the first layers are dense")
    freq = _count(c, "moe_layer_freq", 1, 1, layers, "every freq-th layer is an MoE layer")
    sparse = [i >= first_dense and i % freq == 0 for i in range(layers)]
    _some_moe_layer(c, sparse, "first_k_dense_replace and moe_layer_freq")
    blocks = []
    for i in range(layers):
        kind = {"moe": moe} if sparse[i] else {"mlp": MlpDims(c("intermediate_size"))}
        blocks.append(decoder_block(f"block{i:03d}", s, attn, **kind, **opts))
    return decoder_chain(c, name, s, blocks, False, source)
