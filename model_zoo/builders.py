"""Builders: model dimensions (from ``models/*.yaml``) -> :class:`LayerGraph`.

One small function per model family. Transformer families reuse the per-sample
cost formulas of :mod:`autopar_opt.model_zoo.transformer` (whose docstrings
cite Narayanan et al. 2021, Korthikanti et al. 2022 and Shoeybi et al. 2019);
encoder families live in :mod:`.encoders`, vision transformers in
:mod:`.vision` and the Inception-v3 CNN in :mod:`.cnn`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from autopar_opt.ir.arch import ModelArch
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.model_zoo.cnn import build_inception_v3
from autopar_opt.model_zoo.encoders import build_encoder_decoder, build_encoder_lm
from autopar_opt.model_zoo.blocks import AttentionDims, MoeDims, decoder_block
from autopar_opt.model_zoo.transformer import decoder_lm, embedding, lm_head
from autopar_opt.model_zoo.vision import build_swin, build_vit

Builder = Callable[[str, dict[str, Any], str], LayerGraph]


@dataclass(frozen=True)
class Family:
    """A model family: its builder and whether its graphs are chains."""

    build: Builder
    is_chain: bool


def _decoder(name: str, dims: dict[str, Any], source: str) -> LayerGraph:
    """Decoder-only LM (GPT, Llama): embedding, ``num_layers`` blocks, head."""
    gated = bool(dims.get("gated_mlp", False))
    # ``dropout: false`` (Llama: no dropout in its modelling code, HF attention_dropout 0.0):
    # no masks kept, and the exports say 0 (Megatron-LM's default is 0.1); unstated: masks
    # kept and no flag written (the launch runs Megatron's 0.1, as priced)
    dropout = bool(dims.get("dropout", True))
    graph = decoder_lm(name, dims["num_layers"], dims["seq_len"], dims["hidden"], dims["heads"],
                       dims["ffn_hidden"], dims["vocab"], kv_heads=dims.get("kv_heads"),
                       gated_mlp=gated, layer_norm=not gated,     # the norm ModelArch states below
                       flash_attention=dims.get("flash_attention", False),
                       learned_positions=dims.get("learned_positions", False),
                       tied=dims.get("tied", True), biases=dims.get("biases", True),
                       source=source, dropout=dropout)
    graph.arch = ModelArch(
        family="llama" if gated else "gpt", num_layers=dims["num_layers"], hidden=dims["hidden"],
        heads=dims["heads"], kv_heads=dims.get("kv_heads") or dims["heads"],
        head_dim=dims["hidden"] // dims["heads"], ffn_hidden=dims["ffn_hidden"],
        vocab=dims["vocab"], max_positions=dims["seq_len"], gated=gated,
        norm="rmsnorm" if gated else "layernorm", tied=bool(dims.get("tied", True)),
        activation="silu" if gated else "gelu",      # SwiGLU (Llama) or GPT's GELU MLP
        biases=bool(dims.get("biases", True)),
        learned_positions=bool(dims.get("learned_positions", False)),
        # RoPE's base where the model states it (exports write it: Megatron-LM's default
        # --rotary-base is 10,000, Llama 3 trained with 500,000)
        rope_theta=float(dims["rope_theta"]) if dims.get("rope_theta") else None,
        # the normalisation epsilon where the model states it (exports write it: Megatron-LM's
        # default --norm-epsilon is 1e-5, LLaMA-1 trained with 1e-6; QA round 9)
        norm_eps=float(dims["norm_eps"]) if dims.get("norm_eps") else None,
        dropout=None if dropout else (0.0, 0.0))
    return graph


def _hf(name: str, dims: dict[str, Any], source: str) -> LayerGraph:
    """A bundled Hugging Face config (``hf/<config>.json``), see :mod:`.hf_config`."""
    from importlib import resources

    from autopar_opt.model_zoo.hf_config import build_hf_graph

    text = resources.files("autopar_opt.model_zoo").joinpath("hf", f"{dims['config']}.json")
    config = json.loads(text.read_text(encoding="utf-8"))
    return build_hf_graph(config, dims.get("seq_len"), name=name, origin=f"hf/{dims['config']}.json",
                          flash_attention=dims.get("flash_attention", True),
                          capacity_factor=dims.get("capacity_factor"),
                          load_imbalance=float(dims.get("load_imbalance", 1.0)))


def _moe(name: str, dims: dict[str, Any], source: str) -> LayerGraph:
    """MoE decoder: embedding, ``num_layers`` MoE blocks (GQA attention, ``top_k`` of
    ``num_experts`` SwiGLU experts of width ``ffn_hidden``), head; see :mod:`.blocks`."""
    h, a = dims["hidden"], dims["heads"]
    attn = AttentionDims(hidden=h, heads=a, kv_heads=dims.get("kv_heads", a), head_dim=h // a)
    moe = MoeDims(num_experts=dims["num_experts"], top_k=dims["top_k"],
                  expert_ffn=dims["ffn_hidden"], shared_ffn=dims.get("shared_ffn", 0),
                  load_imbalance=float(dims.get("load_imbalance", 1.0)))
    s = dims["seq_len"]
    layers = [embedding("embed", s, h, dims["vocab"])]
    layers += [decoder_block(f"block{i:03d}", s, attn, moe=moe,
                             flash_attention=dims.get("flash_attention", True))
               for i in range(dims["num_layers"])]
    layers.append(lm_head("head", s, h, dims["vocab"], tied=dims.get("tied", True)))
    graph = LayerGraph.chain(name, layers, seq_len=s, source=source, causal=True)
    graph.arch = ModelArch(
        family="mixtral", num_layers=dims["num_layers"], hidden=h, heads=a,
        kv_heads=dims.get("kv_heads", a), head_dim=h // a, ffn_hidden=dims["ffn_hidden"],
        vocab=dims["vocab"], max_positions=s, tied=bool(dims.get("tied", True)),
        num_experts=dims["num_experts"], top_k=dims["top_k"], moe_ffn_hidden=dims["ffn_hidden"],
        shared_ffn=dims.get("shared_ffn", 0), moe_layers=tuple(range(dims["num_layers"])))
    return graph


#: family name -> :class:`Family`.
FAMILIES: dict[str, Family] = {
    "decoder_lm": Family(_decoder, True),
    "encoder_lm": Family(build_encoder_lm, True),
    "encoder_decoder": Family(build_encoder_decoder, False),
    "vit": Family(build_vit, True),
    "swin": Family(build_swin, True),
    "inception_v3": Family(build_inception_v3, False),
    "hf": Family(_hf, True),
    "moe_decoder": Family(_moe, True),
}


def _check_value(value: Any, default: Any) -> str | None:
    """Why ``value`` is not a valid replacement for ``default``, or None."""
    if isinstance(default, bool):
        return None if isinstance(value, bool) else "must be true or false"
    if isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
        return None if ok else "must be a positive integer"
    if isinstance(default, list):
        ok = (isinstance(value, (list, tuple)) and len(value) > 0
              and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value))
        return None if ok else "must be a non-empty list of positive integers"
    return None


def validate_dims(model: str, dims: dict[str, Any], defaults: dict[str, Any]) -> None:
    """Raise ``ValueError`` naming the model, key, value and fix for bad dimensions.

    A value must have the type of the default it replaces (bool, positive int,
    list of positive ints); attention heads must divide the hidden size and
    key/value heads must divide the heads.
    """
    for key, value in dims.items():
        why = _check_value(value, defaults.get(key))
        if why:
            from autopar_opt.core.errors import yaml_flow    # as the spec writes it

            raise ValueError(f"model {model!r}: {key} = {yaml_flow(value)} {why} (default "
                             f"{yaml_flow(defaults.get(key))}; fix: give a valid value or "
                             "drop it)")
    hidden, heads = dims.get("hidden"), dims.get("heads")
    if hidden and heads and hidden % heads:
        raise ValueError(f"model {model!r}: hidden={hidden} must be divisible by heads={heads} "
                         "(fix: change hidden or heads)")
    kv = dims.get("kv_heads")
    if kv and heads and heads % kv:
        raise ValueError(f"model {model!r}: heads={heads} must be divisible by kv_heads={kv} "
                         "(fix: choose kv_heads dividing heads)")
