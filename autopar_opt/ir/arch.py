"""A model's architecture as the launchers spell it (issue 29: complete exports).

The layer graph carries per-sample costs, not the dimensions a framework's
model builder takes; the zoo and Hugging Face builders attach this record to
the graph (``LayerGraph.arch``) so that an export can state the model:
Megatron-LM's ``--num-layers --hidden-size --num-attention-heads
--num-query-groups --ffn-hidden-size --num-experts ...``, torchtitan's model
flavour, DeepSpeed AutoEP's preset. No cost reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Router:
    """How a mixture-of-experts layer's router weighs and picks its experts, as the model's
    config states it. The default is the plain softmax top-k: the k largest logits, their
    softmax (the top-k probabilities renormalised to sum 1; Mixtral's, and Megatron-Core's
    default, ``topk_routing_with_score_function``).

    ``score``: ``softmax`` or ``sigmoid`` (DeepSeek-V3, Moonlight: ``scoring_func``);
    ``renormalise``: the chosen experts' weights are divided by their sum (``norm_topk_prob``;
    False with softmax: the probabilities over all experts, Qwen2-MoE's and DeepSeek-V2's);
    ``expert_bias``: a per-expert bias added to the scores for the choice only, updated
    outside the gradient (DeepSeek-V3's auxiliary-loss-free balancing, ``topk_method:
    noaux_tc``); ``scaling``: the weights' factor (``routed_scaling_factor``);
    ``groups`` / ``group_topk``: group-limited routing (``n_group`` / ``topk_group``), each
    group ranked by the sum of its ``group_rank_top`` best scores (DeepSeek-V3: 2;
    DeepSeek-V2's ``group_limited_greedy``: 1, its best)."""

    score: str = "softmax"
    renormalise: bool = True
    expert_bias: bool = False
    scaling: float = 1.0
    groups: int = 1
    group_topk: int = 1
    group_rank_top: int = 2


def router_text(r: Router) -> str:
    """The router in words (empty for the plain softmax top-k)."""
    if r == Router():
        return ""
    if r.score == "softmax":
        bits = ["softmax router" + ("" if r.renormalise else
                                    " over all experts, top-k weights not renormalised")]
    else:
        bits = [f"{r.score} router, top-k weights "
                + ("renormalised" if r.renormalise else "not renormalised")]
    if r.expert_bias:
        bits.append("expert-bias choice (auxiliary-loss-free)")
    if r.groups > 1:
        rank = "its best score" if r.group_rank_top == 1 else f"its top-{r.group_rank_top} sum"
        bits.append(f"{r.group_topk} of {r.groups} expert groups (each ranked by {rank})")
    if r.scaling != 1.0:
        bits.append(f"weights x{r.scaling:g}")
    return ", ".join(bits)


@dataclass(frozen=True)
class ModelArch:
    """Architecture of a decoder-only language model (the frameworks' common case).

    ``family`` is the Hugging Face ``model_type`` (``llama``, ``mixtral``,
    ``qwen3_moe``, ``deepseek_v3``, ...) or ``gpt`` for the zoo's GPT-style
    models. ``moe_layers`` lists the indices of the transformer layers whose MLP
    is a mixture of experts (empty: a dense model). ``mla`` holds DeepSeek's
    multi-latent attention ranks ``(q_lora_rank, kv_lora_rank, qk_nope_head_dim,
    qk_rope_head_dim, v_head_dim)``. ``hf_id`` is the published model's
    Hugging Face id when known (Megatron-Bridge and torchtitan name models so).
    ``windows`` holds each transformer layer's sliding attention window in keys per
    query, 0 for full attention (:mod:`autopar_opt.ir.window`); empty: none has one.
    ``activation`` is the MLP's (``silu``: SwiGLU; ``gelu_tanh``: Gemma's GeGLU;
    ``gelu``, ``relu``, ``relu2`` (squared ReLU: Nemotron-4) for a plain MLP);
    ``rotary_fraction``: the share of each head's channels RoPE rotates (Nemotron's
    ``partial_rotary_factor`` 0.5; Megatron-LM ``--rotary-percent``);
    ``zero_centered_norm``: LayerNorm weights stored as ``1 + w`` (Nemotron's
    ``NemotronLayerNorm1P``; Megatron-LM ``--apply-layernorm-1p``); ``post_norms``: a
    norm after the attention and after the MLP too (Gemma 2 and 3); ``alibi``: ALiBi
    positions (BLOOM); ``parallel_block``: attention and MLP read the same input (Falcon,
    GPT-NeoX). ``unpriced`` lists what the model computes that the cost model does not
    price, said with every plan (:mod:`autopar_opt.cost.assumptions`). ``dropout``:
    the (hidden, attention) dropout probabilities the model's config trains with,
    which the exports state (Megatron-LM's own defaults are 0.1 and 0.1); None: not
    stated (no flag written).
    """

    family: str
    num_layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn_hidden: int
    vocab: int
    max_positions: int
    gated: bool = True
    norm: str = "rmsnorm"
    tied: bool = False
    biases: bool = False
    qk_norm: bool = False
    qkv_bias: bool = False
    #: biases on the attention's four projections only (Q, K, V and O: Llama's and
    #: Qwen3's ``attention_bias`` without ``mlp_bias``), and on the MLP's only (Llama's
    #: ``mlp_bias`` alone); both set is ``biases`` (every linear layer)
    attn_bias: bool = False
    mlp_bias: bool = False
    rope_theta: float | None = None
    learned_positions: bool = False
    num_experts: int = 0
    top_k: int = 0
    moe_ffn_hidden: int = 0
    shared_ffn: int = 0
    moe_layers: tuple[int, ...] = ()
    mla: tuple[int, int, int, int, int] | None = None
    hf_id: str = ""
    windows: tuple[int, ...] = ()
    activation: str = "silu"
    rotary_fraction: float = 1.0
    zero_centered_norm: bool = False
    post_norms: bool = False
    alibi: bool = False
    parallel_block: bool = False
    unpriced: tuple[str, ...] = ()
    dropout: tuple[float, float] | None = None
    #: the normalisation epsilon the config states (None: not stated; the frameworks'
    #: default, 1e-5, applies)
    norm_eps: float | None = None
    #: RoPE scaling as the config states it: (type, factor, low_freq_factor,
    #: high_freq_factor, original_max_position_embeddings), e.g. Llama 3.1's
    #: ("llama3", 8, 1, 4, 8192); None without scaling
    rope_scaling: tuple[str, float, float, float, int] | None = None
    #: YaRN's other constants where the scaling is YaRN: (mscale, mscale_all_dim, beta_fast,
    #: beta_slow), DeepSeek's defaults (1, 0, 32, 1) where the config leaves them out
    yarn: tuple[float, float, float, float] | None = None
    #: the MoE router where it is not the plain softmax top-k (:class:`Router`; None: plain)
    router: Router | None = None
    #: Qwen2-MoE's sigmoid gate on the shared expert (``shared_expert_gate``)
    shared_gate: bool = False
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0 and bool(self.moe_layers)

    @property
    def window(self) -> int:
        """The sliding window of the windowed layers (0: none has one)."""
        return max(self.windows, default=0)

    @property
    def first_dense(self) -> int:
        """Leading dense layers before the first MoE layer (0 for an all-MoE model)."""
        return self.moe_layers[0] if self.moe_layers else self.num_layers


def positions_notice(arch: ModelArch | None, seq_len: int) -> list[str]:
    """A notice where the training sequence is longer than the model's config states
    (``max_position_embeddings``): not an error, since users extend a model's context
    (with RoPE scaling, or by training on longer sequences), but said, since the config's
    own model was not trained at that length (QA round 5 L6). Megatron-LM's export writes
    ``--max-position-embeddings`` as the sequence length then."""
    if arch is None or not arch.max_positions or seq_len <= arch.max_positions:
        return []
    table = "; its learned position table has that many rows" if arch.learned_positions else ""
    return [f"training.seq_len {seq_len} exceeds the model's max_position_embeddings "
            f"{arch.max_positions}{table}: priced at {seq_len} as asked (extending a model's "
            "context is a choice, e.g. with RoPE scaling); the Megatron-LM export writes "
            f"--max-position-embeddings {seq_len}"]


#: How :func:`describe` names an MLP activation (:attr:`ModelArch.activation`), in a
#: plain MLP and in a gated one (the activation times a linear gate: Shazeer 2020, "GLU
#: Variants Improve Transformer", SwiGLU / GEGLU / ReGLU); another name is said as given.
ACTIVATION_NAMES = {"silu": "SiLU", "gelu_tanh": "GELU (tanh)", "gelu": "GELU", "relu": "ReLU",
                    "relu2": "squared-ReLU"}
GATED_NAMES = {"silu": "SwiGLU", "gelu_tanh": "GeGLU", "gelu": "GeGLU (exact GELU)",
               "relu": "ReGLU", "relu2": "squared-ReLU-gated"}


def rope_scaling_words(a: ModelArch) -> str:
    """The architecture's RoPE scaling in words: its type and factor (``llama3 scaling
    x8``), or for LongRoPE, which has no single factor (a list per channel for short and
    for long contexts: Phi-3's ``short_factor``, ``long_factor``), its original length
    and the longest it extends to (``longrope from 4096 to 131072 positions``)."""
    kind, factor, _, _, orig = a.rope_scaling
    if kind == "longrope":
        return f"longrope from {orig or '?'} to {a.max_positions or '?'} positions"
    return f"{kind} scaling x{factor:g}"


def describe(a: ModelArch) -> str:
    """One line of what the model's blocks are as built: the record the exports state
    and a reader checks against the model card (issue 28: architectures are stated,
    never guessed) — block count and width, attention layout, MLP (activation, width,
    matrices), MoE layers, norm, positions, parallel blocks, tying, biases, dropout.
    Sliding windows are said apart (:func:`autopar_opt.ir.window.windows_text`)."""
    parts = [f"{a.num_layers} block{'' if a.num_layers == 1 else 's'} of hidden {a.hidden}"]
    if a.mla is not None:
        q, kv, nope, rope, v = a.mla
        parts.append(f"multi-latent attention, {a.heads} heads (q rank {q or 'none'}, kv rank "
                     f"{kv}, qk {nope}+{rope}, v {v})")
    elif a.kv_heads == a.heads:
        parts.append(f"multi-head attention, {a.heads} heads of {a.head_dim}")
    else:
        kind = "multi-query" if a.kv_heads == 1 else "grouped-query"
        parts.append(f"{kind} attention, {a.heads} query / {a.kv_heads} key-value "
                     f"head{'s' if a.kv_heads > 1 else ''} of {a.head_dim}")
    if a.qk_norm:
        parts.append("QK-norm")
    act = (GATED_NAMES if a.gated else ACTIVATION_NAMES).get(
        a.activation, f"{a.activation}-gated" if a.gated else a.activation)
    dense = a.num_layers - len(a.moe_layers) if a.is_moe else a.num_layers
    if dense:
        parts.append(f"{act} MLP of {a.ffn_hidden} ({3 if a.gated else 2} matrices)"
                     + (f" on {dense} block{'' if dense == 1 else 's'}" if a.is_moe else ""))
    if a.is_moe:
        shared = f" + shared {a.shared_ffn}" if a.shared_ffn else ""
        if a.shared_ffn and a.shared_gate:
            shared += " with a sigmoid gate"
        routed = router_text(a.router) if a.router is not None else ""
        n_moe = len(a.moe_layers)
        parts.append(f"MoE on {n_moe} block{'' if n_moe == 1 else 's'}: top-{a.top_k} of "
                     f"{a.num_experts} "
                     f"{act} experts of {a.moe_ffn_hidden}{shared}"
                     + (f" ({routed})" if routed else ""))
    norm = "RMSNorm" if a.norm == "rmsnorm" else "LayerNorm"
    if a.zero_centered_norm:
        norm += " (weights stored as 1+w)"
    parts.append(norm + (", also after attention and MLP" if a.post_norms else ""))
    if a.parallel_block:
        parts.append("attention and MLP in parallel")
    if a.learned_positions:
        parts.append("learned positions")
    elif a.alibi:
        parts.append("ALiBi")
    else:
        rope = f"RoPE on {a.rotary_fraction:.0%} of each head" if a.rotary_fraction != 1.0 \
            else "RoPE"
        if a.rope_scaling is not None:
            rope += f" ({rope_scaling_words(a)})"
        parts.append(rope)
    parts.append("tied embeddings" if a.tied else "untied embeddings")
    parts.append("biases" if a.biases else "QKV biases" if a.qkv_bias else
                 "attention biases (Q, K, V, O)" if a.attn_bias else "MLP biases" if a.mlp_bias
                 else "no biases")
    if a.dropout is None:           # the zoo's GPT and MoE builders keep the masks
        parts.append("dropout at the launcher's default rates (its masks priced)")
    elif any(a.dropout):
        parts.append(f"dropout {a.dropout[0]:g} (hidden) / {a.dropout[1]:g} (attention)")
    else:
        parts.append("no dropout")
    return ", ".join(parts)
