"""Hugging Face ``config.json`` → :class:`LayerGraph`.

``build_hf_graph(config, seq_len)`` reads the keys the ``transformers``
configuration classes define (``LlamaConfig``, ``MistralConfig``, ``Phi3Config``,
``Olmo2Config``, ``MixtralConfig``, ``Qwen2Config``, ``Qwen2MoeConfig``,
``Qwen3Config``, ``Qwen3MoeConfig``, ``DeepseekV3Config``, ``GptOssConfig``,
``GemmaConfig``, ``Gemma2Config``, ``Gemma3TextConfig``, ``OPTConfig``,
``BloomConfig``, ``FalconConfig``, ``GPT2Config``, ``GPTNeoXConfig``,
``BertConfig``, ``T5Config``, ``ViTConfig``; key names and defaults from the
``transformers`` documentation of each class) and builds the layer graph
with :mod:`.blocks` (decoders) or the zoo's encoder/vision builders; sliding
windows per layer come from :mod:`.hf_windows`, dropout from
:func:`dropout_rates`.

Not modelled: DeepSeek-V3's multi-token-prediction module
(``num_nextn_predict_layers``; the published 671 B excludes its 14 B:
DeepSeek-V3 report, arXiv 2412.19437, Sec. 2 and its model card), BERT's
token-type table is counted but not its cost.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from autopar_opt.core import limits
from autopar_opt.ir.arch import ModelArch
from autopar_opt.ir.graph import Layer, LayerGraph, LayerKind
from autopar_opt.model_zoo.blocks import AttentionDims, MlpDims, MoeDims, decoder_block
from autopar_opt.model_zoo.encoders import build_encoder_decoder, build_encoder_lm
from autopar_opt.model_zoo.hf_windows import layer_windows
from autopar_opt.model_zoo.layer_index import layer_index_problem
from autopar_opt.model_zoo.transformer import decoder_lm, embedding, lm_head
from autopar_opt.model_zoo.vision import build_vit

_MISSING = object()


class HfConfigError(ValueError):
    """A config the importer cannot read; the message names the key and the fix."""


class _Cfg:
    """Key access that names the missing key, the model type and the file."""

    def __init__(self, data: dict[str, Any], origin: str) -> None:
        self.data, self.origin = data, origin
        self.model_type = str(data.get("model_type"))

    def __call__(self, key: str, default: Any = _MISSING) -> Any:
        value = self.data.get(key, default)
        if value is _MISSING or (value is None and default is _MISSING):
            raise HfConfigError(
                f"{self.origin}: model_type {self.model_type!r} needs key {key!r}, which is "
                f"missing (fix: add {key!r} from the model's published config.json)")
        return value


#: Keys counting layers (bounded by ``limits.MAX_LAYERS``) and keys that must be
#: positive integers when present; every integer is at most ``MAX_DIMENSION``.
LAYER_KEYS = ("num_hidden_layers", "num_layers", "n_layer", "num_decoder_layers",
              "encoder_layers", "decoder_layers")
POSITIVE_KEYS = ("hidden_size", "num_attention_heads", "num_hidden_layers", "vocab_size",
                 "intermediate_size", "num_key_value_heads", "head_dim", "num_experts_per_tok",
                 # Mixtral experts, MoE expert width; GPT-2 / T5 / ViT sizes (a 0 built an
                 # empty or expert-less model silently)
                 "num_local_experts", "moe_intermediate_size", "n_layer", "n_head", "n_embd",
                 "num_layers", "d_model", "d_ff", "num_heads", "image_size", "patch_size",
                 "num_channels",
                 # DeepSeek MLA ranks and head widths, routed experts and their layer
                 # stride (transformers: ``layer_idx % moe_layer_freq``); null stays allowed
                 "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                 "v_head_dim", "n_routed_experts", "moe_layer_freq")


#: Keys stating the longest sequence a config's model takes, in the order they are read.
POSITION_KEYS = ("max_position_embeddings", "n_positions", "n_ctx", "max_sequence_length",
                 "seq_length")


def max_positions(config: dict[str, Any]) -> tuple[str, int] | None:
    """(key, value) of the longest sequence the config states (a learned position table
    or a context window), or None (ViT: tokens come from the image; T5 v1.0 may state
    none). A bare config's default training length (``autopar model``)."""
    if config.get("model_type") == "vit":
        return None
    for key in POSITION_KEYS:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and \
                0 < value <= limits.MAX_SEQ_LEN:
            return key, value
    return None


def load_hf_config(path: str | Path) -> tuple[dict[str, Any], Path]:
    """Read ``path`` (a ``config.json`` or a directory holding one), within the
    spec limits (file size, nesting, sizes; :mod:`autopar_opt.core.limits`)."""
    p = Path(path)
    try:
        if p.is_dir():
            p = p / "config.json"
        is_file = p.is_file()
    except (OSError, ValueError) as exc:
        raise HfConfigError(f"{str(p)[:200]}: cannot be opened ({exc.__class__.__name__}) "
                            "(fix: give a config.json or a directory holding one)") from None
    if not is_file:
        what = "a directory, not a file" if p.is_dir() else "no such file"
        raise HfConfigError(f"{p}: {what} (fix: give a config.json or a directory "
                            "holding one)")
    from autopar_opt.core import reading
    from autopar_opt.core.errors import SpecError

    try:                  # size, special files, syntax, nesting, integers of 6,000 digits
        data = reading.read_json(p, reading.HF_CONFIG, parse_int=limits.read_int)
    except SpecError as exc:
        first = exc.problems[0]
        raise HfConfigError(f"{p}: {first.rule} (fix: {first.fix})") from None
    if not isinstance(data, dict):
        raise HfConfigError(f"{p}: expected a JSON object with a 'model_type' key")
    problems = limits.structure_problems(data)
    if problems:
        key, value, rule, fix = problems[0]
        shown = "" if value is None else f" = {value!r}"
        raise HfConfigError(f"{p}: {key}{shown}: {rule} (fix: {fix})")
    _check_sizes(data, p)
    return data, p


def _check_sizes(data: dict[str, Any], path: Path) -> None:
    """Refuse sizes that would hang or divide by zero, naming the key and the limit."""
    for key, value in data.items():
        if not isinstance(value, int) or isinstance(value, bool):
            if key in POSITIVE_KEYS and value is not None:
                raise HfConfigError(f"{path}: {key} = {str(value)[:40]!r} is not an integer "
                                    "(fix: copy the value from the model's published config.json)")
            continue
        if key in LAYER_KEYS and value > limits.MAX_LAYERS:
            raise HfConfigError(f"{path}: {key} = {value} exceeds the limit of {limits.MAX_LAYERS} "
                                "layers (fix: use a model with fewer layers)")
        if value > limits.MAX_SEQ_LEN:
            raise HfConfigError(f"{path}: {key} = {value} exceeds the limit of "
                                f"{limits.MAX_SEQ_LEN} for a model dimension (fix: use the "
                                "model's published config.json)")
        if key in POSITIVE_KEYS and value <= 0:
            raise HfConfigError(f"{path}: {key} = {value} must be a positive integer (fix: use "
                                "the model's published config.json)")


def _attention(c: _Cfg, qkv_bias: bool = False, qk_norm: bool = False) -> AttentionDims:
    """Attention dimensions; ``num_key_value_heads`` must divide ``num_attention_heads``:
    ``transformers`` shares each key/value head among ``num_key_value_groups =
    num_attention_heads // num_key_value_heads`` query heads (``repeat_kv`` in
    ``modeling_llama.py``), so a remainder leaves heads without a key/value head."""
    h, a = c("hidden_size"), c("num_attention_heads")
    kv = c("num_key_value_heads", a) or a
    if c("head_dim", None) is None and h % a:
        raise HfConfigError(f"{c.origin}: num_attention_heads = {a} does not divide hidden_size = "
                            f"{h} and no head_dim is given (each head is hidden_size / "
                            "num_attention_heads wide) (fix: use the published head count, or "
                            "state head_dim as the model's config.json does)")
    if a % kv:
        raise HfConfigError(f"{c.origin}: num_key_value_heads = {kv} does not divide "
                            f"num_attention_heads = {a} (each key/value head serves a whole "
                            f"group of query heads) (fix: use a divisor of {a}, e.g. "
                            f"{max(d for d in range(1, kv + 1) if a % d == 0)}, as the model's "
                            "published config.json does)")
    return AttentionDims(hidden=h, heads=a, kv_heads=kv,
                         head_dim=c("head_dim", h // a) or h // a, qkv_bias=qkv_bias,
                         qk_norm=qk_norm)


def _heads_divide(c: _Cfg, hidden_key: str, heads_key: str) -> None:
    """Models without a ``head_dim`` key make each head ``hidden / heads`` wide: the
    heads must divide the hidden size (GPT-2, GPT-NeoX, BERT, ViT)."""
    h, a = c(hidden_key), c(heads_key)
    if h % a:
        raise HfConfigError(f"{c.origin}: {heads_key} = {a} does not divide {hidden_key} = {h} "
                            f"(each head is {hidden_key} / {heads_key} wide) (fix: use the "
                            "model's published config.json)")


def _decoder(c: _Cfg, name: str, s: int, blocks: list[Layer], tied_default: bool,
             source: str, layer_norm: bool = False) -> LayerGraph:
    """Embedding, ``blocks``, final norm + LM head, as a chain."""
    h, v = c("hidden_size"), c("vocab_size")
    tied = bool(c("tie_word_embeddings", tied_default))
    head = lm_head("head", s, h, v, tied=tied)
    if not layer_norm:   # RMSNorm: one vector (lm_head counts a LayerNorm's two)
        head = replace(head, params=head.params - h)
    layers = [embedding("embed", s, h, v)] + blocks + [head]
    return LayerGraph.chain(name, layers, seq_len=s, source=source, causal=True)


def _positions(c: _Cfg, seq_len: int, key: str) -> int:
    """Rows of a learned position table; a longer training sequence cannot run."""
    rows = int(c(key))
    if seq_len > rows:
        raise HfConfigError(f"{c.origin}: seq_len {seq_len} exceeds {key}={rows}, the length "
                            f"of model_type {c.model_type!r}'s learned position table (fix: "
                            f"use a sequence length <= {rows})")
    return rows


def _windows(c: _Cfg) -> list[int]:
    """Each layer's sliding window (0: full attention): :mod:`.hf_windows`."""
    return layer_windows(c, c.model_type, c("num_hidden_layers"),
                         lambda rule, fix: HfConfigError(f"{c.origin}: {rule} (fix: {fix})"))


def _dense_llama(c: _Cfg, name: str, s: int, opts: dict, source: str) -> LayerGraph:
    """Llama, Mistral, Qwen2 (QKV bias), Qwen3 (QK-norm), Phi-3 (fused ``qkv_proj`` and
    ``gate_up_proj``): GQA + SwiGLU, RMSNorm; Llama's and Qwen3's ``attention_bias``
    (on Q, K, V and O: ``LlamaAttention``, ``Qwen3Attention``) and Llama's ``mlp_bias``
    where a config sets them (default false); Mistral's, Qwen's and Phi-3's sliding
    windows (:func:`_windows`)."""
    mt = c.model_type
    bias = mt in ("llama", "qwen3") and bool(c("attention_bias", False))
    attn = _attention(c, qkv_bias=mt == "qwen2" or bias, qk_norm=mt == "qwen3")
    attn = replace(attn, out_bias=bias, model_fuses_qkv=mt == "phi3")
    mlp = MlpDims(c("intermediate_size"), gated=True,
                  bias=mt == "llama" and bool(c("mlp_bias", False)), model_fuses_gate_up=mt == "phi3")
    blocks = [decoder_block(f"block{i:03d}", s, replace(attn, window=w), mlp=mlp, **opts)
              for i, w in enumerate(_windows(c))]
    return _decoder(c, name, s, blocks, False, source)


def _olmo2(c: _Cfg, name: str, s: int, opts: dict, source: str) -> LayerGraph:
    """OLMo 2 (OLMo Team 2024, "2 OLMo 2 Furious", arXiv 2501.00656, Sec. 3.2;
    ``Olmo2Config``): a Llama block whose two RMSNorms act on the attention's and the
    MLP's outputs before each residual add (no norm before them: the same two norm
    vectors and stored norm inputs), a QK-norm over the whole Q and K projections,
    ``attention_bias`` (default false), untied output."""
    bias = bool(c("attention_bias", False))
    attn = replace(_attention(c, qkv_bias=bias, qk_norm=True), out_bias=bias, qk_norm_full=True)
    mlp = MlpDims(c("intermediate_size"), gated=True)
    blocks = [decoder_block(f"block{i:03d}", s, attn, mlp=mlp, **opts)
              for i in range(c("num_hidden_layers"))]
    return _decoder(c, name, s, blocks, False, source)


#: ``GemmaConfig``'s head width where a config leaves ``head_dim`` out (not hidden/heads).
GEMMA_HEAD_DIM = 256


def _gemma(c: _Cfg, name: str, s: int, opts: dict, source: str) -> LayerGraph:
    """Gemma, Gemma 2 and Gemma 3 (text): GeGLU MLP (three matrices, tanh GELU:
    same GEMMs as SwiGLU), RMSNorm, MHA/GQA/MQA with ``head_dim`` (default 256), input
    and output embeddings tied (``tie_word_embeddings`` default true); Gemma 2 and 3 add
    a norm after the attention and after the MLP (:func:`decoder_block`
    ``post_norms``) and sliding windows on most layers (:mod:`.hf_windows`), Gemma 3
    QK-norm (Gemma Team 2024, arXiv 2403.08295 and 2408.00118; Gemma 3 technical
    report, arXiv 2503.19786, Sec. 2). Not priced (stated with the model): the logit
    soft-capping of Gemma 2 (``attn_logit_softcapping``, ``final_logit_softcapping``),
    the embedding's scaling by sqrt(hidden). Bidirectional attention
    (``use_bidirectional_attention``, an encoder use of Gemma 3) is refused."""
    if c("use_bidirectional_attention", False):
        raise HfConfigError(f"{c.origin}: use_bidirectional_attention = true is not modelled "
                            "(its windows and mask are an encoder's) (fix: use a causal "
                            "config, or describe the model as an explicit layer list)")
    if c("head_dim", None) is None:
        c = _Cfg(dict(c.data, head_dim=GEMMA_HEAD_DIM), c.origin)
    attn = _attention(c, qk_norm=c.model_type == "gemma3_text")
    mlp = MlpDims(c("intermediate_size"), gated=True)
    post = c.model_type != "gemma"
    blocks = [decoder_block(f"block{i:03d}", s, replace(attn, window=w), mlp=mlp,
                            post_norms=post, **opts)
              for i, w in enumerate(_windows(c))]
    return _decoder(c, name, s, blocks, True, source)


def _moe_common(c: _Cfg, moe_opts: dict, experts_key: str, **kw: Any) -> MoeDims:
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


def _count(c: _Cfg, key: str, default: int, low: int, high: int, what: str) -> int:
    """An integer setting in ``[low, high]`` (a layer stride, a count of layers)."""
    value = c(key, default)
    value = default if value is None else value
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise HfConfigError(f"{c.origin}: {key} = {value!r} must be an integer from {low} to "
                            f"{high} ({what}) (fix: use the value of the model's published "
                            "config.json)")
    return value


def _some_moe_layer(c: _Cfg, sparse: list[bool], rule: str) -> None:
    """An MoE model_type whose settings leave no MoE layer is refused, not priced dense."""
    if not any(sparse):
        raise HfConfigError(f"{c.origin}: {rule} leave none of the {len(sparse)} layers an MoE "
                            f"layer, so model_type {c.model_type!r} would be priced as a dense "
                            "model (fix: use the model's published config.json)")


def _mixtral(c: _Cfg, name: str, s: int, opts: dict, source: str, moe_opts: dict) -> LayerGraph:
    """Mixtral: Mistral attention, every MLP an MoE of ``num_local_experts``."""
    moe = _moe_common(c, moe_opts, "num_local_experts", expert_ffn=c("intermediate_size"))
    attn = _attention(c)
    blocks = [decoder_block(f"block{i:03d}", s, replace(attn, window=w), moe=moe, **opts)
              for i, w in enumerate(_windows(c))]
    return _decoder(c, name, s, blocks, False, source)


def _qwen_moe(c: _Cfg, name: str, s: int, opts: dict, source: str, moe_opts: dict) -> LayerGraph:
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
    attn = replace(_attention(c, qkv_bias=qwen2 or bias, qk_norm=not qwen2), out_bias=bias)
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
    for i, w in enumerate(_windows(c)):
        kind = {"moe": moe} if sparse[i] else {"mlp": MlpDims(c("intermediate_size"))}
        blocks.append(decoder_block(f"block{i:03d}", s, replace(attn, window=w), **kind, **opts))
    return _decoder(c, name, s, blocks, False, source)


def _gpt_oss(c: _Cfg, name: str, s: int, opts: dict, source: str, moe_opts: dict) -> LayerGraph:
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
    attn = replace(_attention(c, qkv_bias=bias), out_bias=bias, sinks=True)
    blocks = [decoder_block(f"block{i:03d}", s, replace(attn, window=w), moe=moe, **opts)
              for i, w in enumerate(_windows(c))]
    return _decoder(c, name, s, blocks, False, source)


def _deepseek(c: _Cfg, name: str, s: int, opts: dict, source: str, moe_opts: dict) -> LayerGraph:
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
    return _decoder(c, name, s, blocks, False, source)


def _gpt2(c: _Cfg, name: str, s: int, opts: dict, source: str) -> LayerGraph:
    """GPT-2: learned positions, 4h GELU MLP (``n_inner``), LayerNorm, biases, tied."""
    _heads_divide(c, "n_embd", "n_head")
    h = c("n_embd")
    g = decoder_lm(name, c("n_layer"), s, h, c("n_head"), c("n_inner", 4 * h) or 4 * h,
                   c("vocab_size"), learned_positions=False, tied=True, biases=True,
                   flash_attention=opts["flash_attention"], causal_flops=opts["causal_flops"],
                   source=source, model_fuses_qkv=True,    # GPT2Attention.c_attn
                   dropout=opts["dropout"])
    positions = _positions(c, s, "n_positions") * h          # the learned position table (wpe)
    layers = [replace(layer, params=layer.params + positions) if layer.name == "embed" else layer
              for layer in g.layers]
    return LayerGraph.chain(name, layers, seq_len=s, source=source, causal=True)


def _neox(c: _Cfg, name: str, s: int, opts: dict, source: str) -> LayerGraph:
    """GPT-NeoX: rotary, LayerNorm, biases, GELU MLP, untied output (``embed_out``);
    attention and MLP in parallel through their two LayerNorms with
    ``use_parallel_residual`` (default true; Black et al. 2022, arXiv 2204.06745, Sec. 2)."""
    _heads_divide(c, "hidden_size", "num_attention_heads")
    h, a = c("hidden_size"), c("num_attention_heads")
    attn = AttentionDims(hidden=h, heads=a, kv_heads=a, head_dim=h // a, qkv_bias=True,
                         out_bias=True, model_fuses_qkv=True)   # GPTNeoXAttention.query_key_value
    mlp = MlpDims(c("intermediate_size"), gated=False, bias=True)
    parallel = 2 if c("use_parallel_residual", True) else 0
    blocks = [decoder_block(f"block{i:03d}", s, attn, mlp=mlp, layer_norm=True, parallel=parallel,
                            **opts)
              for i in range(c("num_hidden_layers"))]
    return _decoder(c, name, s, blocks, False, source, layer_norm=True)


def _opt(c: _Cfg, name: str, s: int, opts: dict, source: str) -> LayerGraph:
    """OPT (Zhang et al. 2022, arXiv 2205.01068; ``OPTConfig``): MHA with separate Q,
    K, V projections, ReLU MLP of ``ffn_dim``, LayerNorm, biases (``enable_bias``),
    learned positions of ``max_position_embeddings + 2`` rows (the table's offset of
    2, ``OPTLearnedPositionalEmbedding``), tied output; the final LayerNorm only with
    ``do_layer_norm_before`` (post-LN OPT-350m has none). OPT-350m's
    ``word_embed_proj_dim`` projections are refused."""
    _heads_divide(c, "hidden_size", "num_attention_heads")
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
    graph = _decoder(c, name, s, blocks, True, source, layer_norm=True)
    positions = (_positions(c, s, "max_position_embeddings") + 2) * h
    final = 0 if c("do_layer_norm_before", True) else 2 * h
    layers = [replace(layer, params=layer.params + positions) if layer.name == "embed" else
              replace(layer, params=layer.params - final) if layer.name == "head" else layer
              for layer in graph.layers]
    return LayerGraph.chain(name, layers, seq_len=s, source=source, causal=True)


def _bloom(c: _Cfg, name: str, s: int, opts: dict, source: str) -> LayerGraph:
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
    embed = embedding("embed", s, h, v)
    embed = replace(embed, params=embed.params + 2 * h)         # word_embeddings_layernorm
    return LayerGraph.chain(name, [embed] + blocks + [head], seq_len=s, source=source,
                            causal=True)


def _falcon(c: _Cfg, name: str, s: int, opts: dict, source: str) -> LayerGraph:
    """Falcon (Almazrouei et al. 2023, arXiv 2311.16867, Sec. 4; ``FalconConfig``): fused
    QKV, multi-query (``multi_query``) or grouped keys (``new_decoder_architecture``:
    ``num_kv_heads``), attention and MLP in parallel (``parallel_attn``) through one
    LayerNorm, or two with the new architecture (``num_ln_in_parallel_attn``), a
    plain GELU MLP of ``ffn_hidden_size`` (default 4h), biases only with ``bias``,
    rotary or ALiBi positions (no table), tied output (default true)."""
    _heads_divide(c, "hidden_size", "num_attention_heads")
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
    return _decoder(c, name, s, blocks, True, source, layer_norm=True)


def _bert(c: _Cfg, name: str, s: int, opts: dict, source: str) -> LayerGraph:
    """BERT: the zoo's encoder plus the token-type table and embedding LayerNorm
    (in ``embed``) and the pooler and masked-LM transform (in ``head``)."""
    _heads_divide(c, "hidden_size", "num_attention_heads")
    h = c("hidden_size")
    dims = dict(seq_len=s, hidden=h, heads=c("num_attention_heads"),
                ffn_hidden=c("intermediate_size"), vocab=c("vocab_size"),
                num_layers=c("num_hidden_layers"), flash_attention=opts["flash_attention"])
    g = build_encoder_lm(name, dims, source)
    v, positions = c("vocab_size"), _positions(c, s, "max_position_embeddings")
    embed_params = v * h + positions * h + c("type_vocab_size", 2) * h + 2 * h
    extra_head = (h * h + h) + (h * h + h + 2 * h) + v   # pooler, MLM transform, decoder bias
    layers = [replace(layer, params=embed_params) if layer.name == "embed" else
              replace(layer, params=layer.params + extra_head) if layer.name == "head" else layer
              for layer in g.layers]
    return LayerGraph.chain(name, layers, seq_len=s, source=source, causal=False)


def _t5(c: _Cfg, name: str, s: int, opts: dict, source: str) -> LayerGraph:
    """T5 (v1.0, ReLU MLP): the zoo's encoder-decoder DAG."""
    proj = c("feed_forward_proj", "relu")
    if proj != "relu":
        raise HfConfigError(f"{c.origin}: feed_forward_proj={proj!r} (gated T5 v1.1) is not "
                            "supported; only 'relu' (T5 v1.0) is (fix: use a T5 v1.0 config)")
    n = c("num_layers")
    dims = dict(seq_len=s, hidden=c("d_model"), heads=c("num_heads"), ffn_hidden=c("d_ff"),
                vocab=c("vocab_size"), encoder_layers=n,
                decoder_layers=c("num_decoder_layers", n) or n,
                flash_attention=opts["flash_attention"])
    return build_encoder_decoder(name, dims, source)


def _vit(c: _Cfg, name: str, s: int | None, opts: dict, source: str) -> LayerGraph:
    """ViT for image classification (``num_labels`` from ``id2label``, else 1000)."""
    _heads_divide(c, "hidden_size", "num_attention_heads")
    labels = len(c("id2label", {}) or {}) or 1000
    dims = dict(num_layers=c("num_hidden_layers"), image_size=c("image_size"),
                patch_size=c("patch_size"), hidden=c("hidden_size"),
                heads=c("num_attention_heads"), ffn_hidden=c("intermediate_size"),
                num_classes=labels, flash_attention=opts["flash_attention"])
    return build_vit(name, dims, source)


_DENSE: dict[str, Callable[..., LayerGraph]] = {
    "llama": _dense_llama, "mistral": _dense_llama, "qwen2": _dense_llama, "qwen3": _dense_llama,
    "phi3": _dense_llama, "olmo2": _olmo2,
    "gemma": _gemma, "gemma2": _gemma, "gemma3_text": _gemma,
    "opt": _opt, "bloom": _bloom, "falcon": _falcon,
    "gpt2": _gpt2, "gpt_neox": _neox, "bert": _bert, "t5": _t5, "vit": _vit,
}
_MOE: dict[str, Callable[..., LayerGraph]] = {
    "mixtral": _mixtral, "qwen2_moe": _qwen_moe, "qwen3_moe": _qwen_moe,
    "deepseek_v3": _deepseek, "deepseek_v2": _deepseek, "gpt_oss": _gpt_oss,
}

#: Every ``model_type`` the importer reads.
SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(sorted(set(_DENSE) | set(_MOE)))


def build_hf_graph(config: dict[str, Any], seq_len: int | None, name: str | None = None,
                   origin: str = "config.json", flash_attention: bool = True,
                   capacity_factor: float | None = None,
                   load_imbalance: float = 1.0) -> LayerGraph:
    """The layer graph of a Hugging Face ``config``.

    ``seq_len`` is the training sequence length (required for language
    models: ``max_position_embeddings`` is a context limit, not a training
    length; ignored by ViT, whose tokens come from the image).
    ``capacity_factor``/``load_imbalance`` set the MoE load factor
    (:class:`~autopar_opt.model_zoo.blocks.MoeDims`). Raises
    :class:`HfConfigError` for an unknown ``model_type`` (listing the
    supported ones), a missing key, or a missing ``seq_len``.
    """
    try:
        return _build_hf_graph(config, seq_len, name, origin, flash_attention, capacity_factor,
                               load_imbalance)
    except (TypeError, ValueError, ZeroDivisionError, KeyError, AttributeError,
            OverflowError) as exc:
        if isinstance(exc, HfConfigError):
            raise
        raise HfConfigError(f"{origin}: the config's values cannot build a model "
                            f"({type(exc).__name__}: {str(exc)[:200]}) (fix: check its numeric "
                            "keys against the model's published config.json)") from None


#: The dropout keys (hidden, attention) of the families whose modelling code has a
#: hidden dropout, with their ``transformers`` configuration defaults. Every other
#: decoder family's code has none (``LlamaDecoderLayer``, ``MistralDecoderLayer``,
#: Qwen's, Gemma's, DeepSeek's: only ``attention_dropout``, default 0.0).
DROPOUT_KEYS = {"gpt2": (("resid_pdrop", 0.1), ("attn_pdrop", 0.1)),
                "gpt_neox": (("hidden_dropout", 0.0), ("attention_dropout", 0.0)),
                "opt": (("dropout", 0.1), ("attention_dropout", 0.0)),
                "bloom": (("hidden_dropout", 0.0), ("attention_dropout", 0.0)),
                "falcon": (("hidden_dropout", 0.0), ("attention_dropout", 0.0)),
                "phi3": (("resid_pdrop", 0.0), ("attention_dropout", 0.0))}


def dropout_rates(config: dict[str, Any], origin: str = "config.json") -> tuple[float, float]:
    """(hidden, attention) dropout probabilities a decoder config trains with: its
    family's keys (:data:`DROPOUT_KEYS`), else 0 and ``attention_dropout``."""
    mt = config.get("model_type")
    keys = DROPOUT_KEYS.get(mt, (None, ("attention_dropout", 0.0)))
    out = []
    for entry in keys:
        if entry is None:
            out.append(0.0)
            continue
        key, default = entry
        value = config.get(key, default)
        value = default if value is None else value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
            raise HfConfigError(f"{origin}: {key} = {value!r} must be a probability in [0, 1) "
                                "(fix: use the value of the model's published config.json)")
        out.append(float(value))
    return out[0], out[1]


def _build_hf_graph(config: dict[str, Any], seq_len: int | None, name: str | None, origin: str,
                    flash_attention: bool, capacity_factor: float | None,
                    load_imbalance: float) -> LayerGraph:
    """:func:`build_hf_graph` without the guard that turns bad values into HfConfigError."""
    mt = config.get("model_type")
    if not isinstance(mt, str):
        raise HfConfigError(f"{origin}: model_type = {repr(mt)[:60]} is not a string (fix: "
                            "write the family's name, e.g. \"model_type\": \"llama\"; supported: "
                            f"{', '.join(SUPPORTED_MODEL_TYPES)})")
    c = _Cfg(config, origin)
    if mt == "gemma3" and isinstance(config.get("text_config"), dict):
        raise HfConfigError(f"{origin}: model_type 'gemma3' is Gemma 3's image-text model; its "
                            "vision tower is not modelled (fix: train its language model: use "
                            "the text_config object as the config, with \"model_type\": "
                            "\"gemma3_text\")")
    if mt not in _DENSE and mt not in _MOE:
        raise HfConfigError(f"{origin}: model_type {mt!r} is not supported; supported: "
                            f"{', '.join(SUPPORTED_MODEL_TYPES)} (fix: use one of these "
                            "families, or describe the model as an explicit layer list)")
    stem = Path(origin).stem if Path(origin).stem != "config" else Path(origin).parent.name
    name = name or str(config.get("_name_or_path") or stem or mt)
    source = f"Hugging Face config {origin} (model_type {mt})"
    if mt != "vit" and not seq_len:
        raise HfConfigError(f"{origin}: a sequence length is needed for model_type {mt!r} "
                            "(fix: set training.seq_len in the spec, or --seq-len)")
    # dropout masks are kept only where the config trains with dropout (issue 28: not on
    # by default); encoders, T5 and ViT keep theirs (their builders' own convention)
    opts = dict(flash_attention=flash_attention, causal_flops=False,
                dropout=any(dropout_rates(config, origin)))
    if mt in _MOE:
        moe_opts = dict(capacity_factor=capacity_factor, load_imbalance=load_imbalance)
        graph = _MOE[mt](c, name, seq_len, opts, source, moe_opts)
    else:
        graph = _DENSE[mt](c, name, seq_len, opts, source)
    graph.arch = hf_arch(config, graph)
    return graph


def hf_arch(config: dict[str, Any], graph: LayerGraph) -> ModelArch | None:
    """The launch-time architecture of a decoder-only HF config (None for the
    encoder, encoder-decoder and vision families, which the launchers' exports do
    not cover). The MoE layers are read off the built graph (the same rules
    that built it: ``first_k_dense_replace``, ``moe_layer_freq``,
    ``mlp_only_layers``, ``decoder_sparse_step``)."""
    mt = config.get("model_type")
    if mt in CLASSIC:
        return _classic_arch(config, graph)
    if mt not in ("llama", "mistral", "qwen2", "qwen3", "phi3", "olmo2", "mixtral", "qwen2_moe",
                  "qwen3_moe", "deepseek_v2", "deepseek_v3", "gemma", "gemma2", "gemma3_text",
                  "gpt_oss"):
        return None
    gemma = mt in ("gemma", "gemma2", "gemma3_text")
    g = config.get
    h, a = int(g("hidden_size")), int(g("num_attention_heads"))
    blocks = [layer for layer in graph.layers if layer.kind in (LayerKind.transformer_block,
                                                                LayerKind.moe_block)]
    moe = tuple(i for i, layer in enumerate(blocks) if layer.is_moe)
    experts = int(g("num_local_experts") or g("num_experts") or g("n_routed_experts") or 0)
    expert_ffn = int(g("moe_intermediate_size")
                     or (g("intermediate_size") if mt in ("mixtral", "gpt_oss") else 0) or 0)
    shared = int(g("shared_expert_intermediate_size") or 0) if mt == "qwen2_moe" else \
        int(g("n_shared_experts") or 0) * expert_ffn if mt.startswith("deepseek") else 0
    mla = None
    if mt.startswith("deepseek"):
        mla = (int(g("q_lora_rank") or 0), int(g("kv_lora_rank")), int(g("qk_nope_head_dim")),
               int(g("qk_rope_head_dim")), int(g("v_head_dim")))
    return ModelArch(
        family=str(mt), num_layers=len(blocks), hidden=h, heads=a,
        kv_heads=int(g("num_key_value_heads") or a) if not mla else a,
        head_dim=int(g("head_dim") or (GEMMA_HEAD_DIM if gemma else h // a)),
        ffn_hidden=int(g("intermediate_size") or 0),
        vocab=int(g("vocab_size")), max_positions=int(g("max_position_embeddings") or 0),
        gated=True, norm="rmsnorm", tied=bool(g("tie_word_embeddings", gemma)),
        qk_norm=mt in ("qwen3", "qwen3_moe", "gemma3_text", "olmo2"),
        qkv_bias=mt in ("qwen2", "qwen2_moe"),
        activation="gelu_tanh" if gemma else "silu", post_norms=gemma and mt != "gemma",
        dropout=dropout_rates(config),
        unpriced=_gemma_unpriced(config) if gemma else _gpt_oss_unpriced(config)
        if mt == "gpt_oss" else (),
        biases=mt == "gpt_oss" and bool(g("attention_bias", True)),
        rope_theta=float(g("rope_theta")) if g("rope_theta") else None,
        num_experts=experts if moe else 0, top_k=int(g("num_experts_per_tok") or 0) if moe else 0,
        moe_ffn_hidden=expert_ffn if moe else 0, shared_ffn=shared if moe else 0,
        moe_layers=moe, mla=mla, hf_id=str(g("_name_or_path") or ""),
        windows=tuple(layer.attn_window for layer in blocks)
        if any(layer.attn_window for layer in blocks) else ())


#: Decoder families before the Llama layout, described for the launchers' rules (their
#: blocks: a plain MLP, LayerNorm, biases; OPT's ReLU, BLOOM's ALiBi, Falcon's and
#: GPT-NeoX's parallel attention/MLP), by ``model_type``.
CLASSIC = ("opt", "bloom", "falcon", "gpt_neox")


def _classic_arch(config: dict[str, Any], graph: LayerGraph) -> ModelArch:
    """:func:`hf_arch` of a :data:`CLASSIC` family, read off the built graph and the
    config (the same keys the reader took)."""
    g = config.get
    mt = config["model_type"]
    blocks = [layer for layer in graph.layers if layer.kind is LayerKind.transformer_block]
    h = int(g("hidden_size") or g("n_embed"))
    a = int(g("num_attention_heads") or g("n_head"))
    kv = max(1, round(blocks[0].max_tp)) if blocks else a
    ffn = int(g("ffn_dim") or g("ffn_hidden_size") or g("intermediate_size") or 4 * h)
    parallel = (mt == "falcon" and (bool(g("new_decoder_architecture")) or g("parallel_attn", True))) \
        or (mt == "gpt_neox" and g("use_parallel_residual", True))
    return ModelArch(
        family=mt, num_layers=len(blocks), hidden=h, heads=a, kv_heads=kv, head_dim=h // a,
        ffn_hidden=ffn, vocab=int(g("vocab_size")),
        max_positions=int(g("max_position_embeddings") or 0), gated=False, norm="layernorm",
        tied=bool(g("tie_word_embeddings", mt != "gpt_neox")),
        biases=mt in ("opt", "bloom", "gpt_neox") or bool(g("bias", False)),
        learned_positions=mt == "opt", activation="relu" if mt == "opt" else "gelu",
        alibi=mt == "bloom" or (mt == "falcon" and bool(g("alibi", False))),
        parallel_block=bool(parallel), dropout=dropout_rates(config))


def _gemma_unpriced(config: dict[str, Any]) -> tuple[str, ...]:
    """What a Gemma config computes that the cost model does not price: its
    logit soft-capping (``tanh`` over the attention scores inside the kernel, over
    the output logits as one more element-wise pass) and the embedding's scaling
    by sqrt(hidden) (one element-wise multiply)."""
    out = []
    for key in ("attn_logit_softcapping", "final_logit_softcapping"):
        if config.get(key):
            out.append(f"{key} {config[key]:g}")
    out.append("the embedding's scaling by sqrt(hidden_size)")
    return tuple(out)


def _gpt_oss_unpriced(config: dict[str, Any]) -> tuple[str, ...]:
    """What a gpt-oss config computes that the cost model does not price."""
    out = ["attention sinks (one learned softmax offset per head, inside the kernel)"]
    if config.get("swiglu_limit"):
        out.append(f"the SwiGLU clamp (swiglu_limit {config['swiglu_limit']:g})")
    if config.get("rope_scaling"):
        out.append("YaRN rope scaling")
    return tuple(out)


def layer_kinds(graph: LayerGraph) -> dict[str, int]:
    """Layer count by kind (what ``autopar model`` summarises)."""
    out: dict[str, int] = {}
    for layer in graph.layers:
        kind = layer.kind.value if isinstance(layer.kind, LayerKind) else str(layer.kind)
        out[kind] = out.get(kind, 0) + 1
    return out
