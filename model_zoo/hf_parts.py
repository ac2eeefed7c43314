"""The pieces every Hugging Face decoder reader shares: attention dimensions as
``transformers`` builds them, the embedding-blocks-head chain, learned position
tables and each layer's sliding window."""

from __future__ import annotations

from dataclasses import replace

from autopar_opt.ir.graph import Layer, LayerGraph
from autopar_opt.model_zoo.blocks import AttentionDims
from autopar_opt.model_zoo.hf_keys import Cfg, HfConfigError
from autopar_opt.model_zoo.hf_windows import layer_windows
from autopar_opt.model_zoo.transformer import embedding, lm_head

def attention_dims(c: Cfg, qkv_bias: bool = False, qk_norm: bool = False) -> AttentionDims:
    """Attention dimensions; ``num_key_value_heads`` must divide ``num_attention_heads``:
    ``transformers`` shares each key/value head among ``num_key_value_groups =
    num_attention_heads // num_key_value_heads`` query heads (``repeat_kv`` in
    ``modeling_llama.py``), so a remainder leaves heads without a key/value head."""
    h, a = c("hidden_size"), c("num_attention_heads")
    kv = c("num_key_value_heads", KV_HEADS_DEFAULT.get(c.model_type, a))
    kv = a if kv is None else kv     # stated null: every class takes the heads (MHA)
    stated = c("head_dim", None)
    if stated is None and default_head_dim(c.model_type, h, a) is None:
        raise HfConfigError(f"{c.origin}: num_attention_heads = {a} does not divide hidden_size = "
                            f"{h} and no head_dim is given (each head is hidden_size / "
                            "num_attention_heads wide) (fix: use the published head count, or "
                            "state head_dim as the model's config.json does)")
    if a % kv:
        given = "num_key_value_heads" in c.data
        shown = f"num_key_value_heads = {kv}" if given else (
            f"num_key_value_heads (not stated: model_type {c.model_type!r} defaults it to {kv})")
        raise HfConfigError(f"{c.origin}: {shown} does not divide "
                            f"num_attention_heads = {a} (each key/value head serves a whole "
                            f"group of query heads) (fix: use a divisor of {a}, e.g. "
                            f"{max(d for d in range(1, kv + 1) if a % d == 0)}, as the model's "
                            "published config.json does)")
    return AttentionDims(hidden=h, heads=a, kv_heads=kv,
                         head_dim=stated or default_head_dim(c.model_type, h, a),
                         qkv_bias=qkv_bias,
                         qk_norm=qk_norm)


#: ``num_key_value_heads`` where a config leaves the key out, for the families whose
#: configuration class has a fixed default rather than None (= the heads):
#: ``MistralConfig`` and ``MixtralConfig`` 8, ``GptOssConfig`` 8, ``Starcoder2Config`` 2,
#: ``GemmaConfig`` 16, ``Gemma2Config`` and ``Gemma3TextConfig`` 4, ``Qwen2Config`` and
#: ``Qwen3Config`` 32, ``Qwen2MoeConfig`` 16, ``Qwen3MoeConfig`` 4, ``GlmConfig`` and
#: ``Glm4Config`` 2, ``Glm4MoeConfig`` 8 (transformers
#: ``configuration_mistral.py`` etc.). A stated null is the heads in every
#: class ("for backward compatibility"). QA round 11: the heads were taken for these too
#: (a Mistral-7B config without the key built 4 times its key/value projections) while the
#: notice said the class's default was.
KV_HEADS_DEFAULT = {"mistral": 8, "mixtral": 8, "gpt_oss": 8, "starcoder2": 2, "gemma": 16,
                    "glm": 2, "glm4": 2, "glm4_moe": 8,
                    "gemma2": 4, "gemma3_text": 4, "qwen2": 32, "qwen3": 32, "qwen2_moe": 16,
                    "qwen3_moe": 4}


def kv_heads_of(config: dict, model_type: str, heads: int) -> int:
    """The key-value heads a config builds: ``num_key_value_heads``, else the class's
    default (:data:`KV_HEADS_DEFAULT`, else the heads); null is the heads."""
    if "num_key_value_heads" not in config:
        return KV_HEADS_DEFAULT.get(model_type, heads)
    value = config.get("num_key_value_heads")
    return heads if value is None else int(value)


#: ``Qwen3Config``'s head width where a config leaves ``head_dim`` out (``head_dim=128``,
#: transformers 4.57 ``configuration_qwen3.py``; not hidden/heads: Qwen3-8B's 4096/32 is
#: 128 too, Qwen3-0.6B's 1024/16 is 64). ``Qwen3MoeConfig`` has no such default.
QWEN3_HEAD_DIM = 128


def default_head_dim(model_type: str, h: int, a: int) -> int | None:
    """The head width ``transformers`` takes where the config states no ``head_dim``:
    Qwen3's 128 (:data:`QWEN3_HEAD_DIM`), else ``hidden / heads`` (None when the heads
    do not divide the hidden size). Gemma's 256 is filled in by its reader."""
    if model_type == "qwen3":
        return QWEN3_HEAD_DIM
    return h // a if h % a == 0 else None


def heads_divide(c: Cfg, hidden_key: str, heads_key: str) -> None:
    """Models without a ``head_dim`` key make each head ``hidden / heads`` wide: the
    heads must divide the hidden size (GPT-2, GPT-NeoX, BERT, ViT)."""
    h, a = c(hidden_key), c(heads_key)
    if h % a:
        raise HfConfigError(f"{c.origin}: {heads_key} = {a} does not divide {hidden_key} = {h} "
                            f"(each head is {hidden_key} / {heads_key} wide) (fix: use the "
                            "model's published config.json)")


def decoder_chain(c: Cfg, name: str, s: int, blocks: list[Layer], tied_default: bool,
             source: str, layer_norm: bool = False, dropout: bool = True) -> LayerGraph:
    """Embedding, ``blocks``, final norm + LM head, as a chain; ``dropout``: the
    embedding keeps its dropout mask (the blocks' own flag, the readers' ``opts``)."""
    h, v = c("hidden_size"), c("vocab_size")
    tied = bool(c("tie_word_embeddings", tied_default))
    head = lm_head("head", s, h, v, tied=tied)
    if not layer_norm:   # RMSNorm: one vector (lm_head counts a LayerNorm's two)
        head = replace(head, params=head.params - h)
    layers = [embedding("embed", s, h, v, dropout=dropout)] + blocks + [head]
    return LayerGraph.chain(name, layers, seq_len=s, source=source, causal=True)


def position_rows(c: Cfg, seq_len: int, key: str) -> int:
    """Rows of a learned position table; a longer training sequence cannot run."""
    rows = int(c(key))
    if seq_len > rows:
        raise HfConfigError(f"{c.origin}: seq_len {seq_len} exceeds {key}={rows}, the length "
                            f"of model_type {c.model_type!r}'s learned position table (fix: "
                            f"use a sequence length <= {rows})")
    return rows


def config_windows(c: Cfg) -> list[int]:
    """Each layer's sliding window (0: full attention): :mod:`.hf_windows`."""
    return layer_windows(c, c.model_type, c("num_hidden_layers"),
                         lambda rule, fix: HfConfigError(f"{c.origin}: {rule} (fix: {fix})"))


def with_extra_params(graph: LayerGraph, embed: int = 0, head: int = 0) -> LayerGraph:
    """``graph`` (a decoder chain) with ``embed`` parameters added to its embedding and
    ``head`` to its output layer: the tables and biases a family has beyond what the
    shared builders count (GPT-2's and OPT's learned positions, Phi's lm_head bias; a
    negative ``head``: OPT-350m's missing final norm)."""
    extra = {"embed": embed, "head": head}
    layers = [replace(layer, params=layer.params + extra[layer.name]) if layer.name in extra
              else layer for layer in graph.layers]
    return LayerGraph.chain(graph.name, layers, seq_len=graph.seq_len, source=graph.source,
                            causal=True)
