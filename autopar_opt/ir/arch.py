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
