"""General decoder blocks: GQA/MLA attention, dense or Mixture-of-Experts MLP.

Used by the Hugging Face importer (:mod:`autopar_opt.model_zoo.hf_config`)
and the MoE zoo models. Everything is per sample, like
:mod:`autopar_opt.model_zoo.transformer`, whose formulas these generalise:

* FLOPs: 2 FLOPs per weight per token for every matrix (Kaplan et al. 2020,
  Sec. 2.1; Narayanan et al. 2021, Sec. 5.1), plus the attention core
  ``2·s²·heads·(d_qk + d_v)`` (QKᵀ and softmax·V; ``4·s²·h`` for multi-head
  attention, halved when causal kernels skip the masked half). Backward = 2x.
  A sliding window of ``w`` keys (Mistral 7B, Jiang et al. 2023, Sec. 2; HF
  ``sliding_window``) keeps ``w·s - w(w-1)/2`` of the ``s(s+1)/2`` causal pairs
  (:mod:`autopar_opt.ir.window`).
* MLA (DeepSeek-V2, arXiv 2405.04434, Sec. 2.1.2; DeepSeek-V3, arXiv
  2412.19437, Sec. 2.1.1): low-rank query and joint key/value compression,
  ``q_a``/``q_b``, ``kv_a`` (with the shared RoPE key) and ``kv_b`` projections.
* Mixture-of-Experts (Shazeer et al. 2017; Fedus et al. 2022; Mixtral,
  arXiv 2401.04088; DeepSeekMoE, arXiv 2401.06066): a linear router
  ``h × E``, ``top_k`` routed SwiGLU experts per token, optional always-on
  shared experts. Routed-expert FLOPs and activations scale with the stated
  load factor (:attr:`MoeDims.load_factor`).
* Activations: Korthikanti et al. 2022, Eq. 1 term by term (QKV input ``2sh``,
  Q/K/V, output-projection input ``2sh``, dropout mask ``sh``; MLP input,
  intermediate outputs and mask), with each routed token copy keeping its
  dispatched input, its ``8·f_e`` intermediate values and its output.
"""

from __future__ import annotations

from dataclasses import dataclass

from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.window import window_share
from autopar_opt.model_zoo.transformer import kept_per_score, op_sac_terms


@dataclass(frozen=True)
class AttentionDims:
    """Self-attention: GQA (``kv_heads`` ≤ ``heads``) or MLA (``kv_lora_rank`` > 0)."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    qkv_bias: bool = False
    out_bias: bool = False
    qk_norm: bool = False
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_dim: int = 0
    qk_rope_dim: int = 0
    v_head_dim: int = 0
    #: the model's own code fuses Q, K and V into one GEMM on every stack
    #: (HF GPT-NeoX ``query_key_value``), not only under Megatron's ``linear_qkv``
    model_fuses_qkv: bool = False
    #: sliding-window attention: keys each query sees, itself included (HF
    #: ``sliding_window``; :mod:`autopar_opt.ir.window`); 0: the whole causal prefix
    window: int = 0
    #: attention sinks: one learned softmax offset per head (gpt-oss ``sinks``)
    sinks: bool = False
    #: the QK-norm spans the whole projections (OLMo 2: RMSNorm over heads·head_dim and
    #: kv_heads·head_dim) instead of one head (Qwen3, Gemma 3)
    qk_norm_full: bool = False

    @property
    def mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def qk_dim(self) -> int:
        """Per-head query/key width."""
        return self.qk_nope_dim + self.qk_rope_dim if self.mla else self.head_dim

    @property
    def v_dim(self) -> int:
        """Per-head value width."""
        return self.v_head_dim if self.mla else self.head_dim

    def matrix_params(self) -> int:
        """Weights of the projection matrices (no biases, no norms)."""
        h, a = self.hidden, self.heads
        if self.mla:
            q = (h * self.q_lora_rank + self.q_lora_rank * a * self.qk_dim if self.q_lora_rank
                 else h * a * self.qk_dim)
            kv = (h * (self.kv_lora_rank + self.qk_rope_dim)
                  + self.kv_lora_rank * a * (self.qk_nope_dim + self.v_head_dim))
            return q + kv + a * self.v_head_dim * h
        q_dim, kv_dim = a * self.head_dim, self.kv_heads * self.head_dim
        return h * (q_dim + 2 * kv_dim) + q_dim * h

    def gemm_output_widths(self) -> tuple[int, int]:
        """Per-token output widths of the projection GEMMs, (split by tensor
        parallelism, whole on every rank): GQA's fused QKV output is
        column-parallel, the output projection's row-parallel (``h`` whole);
        MLA's Q and KV up projections are column-parallel, its down projections
        run unsplit on every rank (Megatron-Core MLA: ``linear_q_down_proj``,
        ``linear_kv_down_proj`` are not tensor-parallel) and sit with the output
        projection's ``h``."""
        h, a = self.hidden, self.heads
        if self.mla:
            split = a * self.qk_dim + a * (self.qk_nope_dim + self.v_head_dim)
            return split, h + self.q_lora_rank + self.kv_lora_rank + self.qk_rope_dim
        return a * self.head_dim + 2 * self.kv_heads * self.head_dim, h

    def extra_params(self) -> int:
        """Biases, inner norms (MLA latent norms, Qwen3 QK-norm), attention sinks."""
        n = 0
        if self.qkv_bias:
            n += (self.heads + 2 * self.kv_heads) * self.head_dim
        if self.out_bias:
            n += self.hidden
        if self.qk_norm:
            n += (self.heads + self.kv_heads) * self.head_dim if self.qk_norm_full \
                else 2 * self.head_dim
        if self.sinks:
            n += self.heads
        if self.mla:
            n += self.kv_lora_rank + (self.q_lora_rank or 0)
        return n

    def params(self) -> int:
        return self.matrix_params() + self.extra_params()

    def score_flops(self, seq_len: int, causal: bool) -> float:
        """Attention-core forward FLOPs per sample: ``2·s²·a·(d_qk + d_v)``
        (``causal``: counted at half, as fused kernels execute a causal core),
        times the share of the causal core's pairs a sliding window keeps
        (:func:`~autopar_opt.ir.window.window_share`; 1 without one)."""
        f = 2.0 * seq_len * seq_len * self.heads * (self.qk_dim + self.v_dim)
        return f * (0.5 if causal else 1.0) * window_share(seq_len, self.window)

    def gemm_kernels(self, fused: bool = True) -> int:
        """GEMM kernels of the attention's forward: fused QKV and output
        projection (Megatron ``linear_qkv``, ``linear_proj``), or with
        ``fused=False`` (runtime ``fused_projections`` off) separate Q, K, V
        and output (HF ``LlamaAttention`` ``q_proj, k_proj, v_proj, o_proj``,
        GQA included; unless :attr:`model_fuses_qkv`); MLA's query down/up
        (one without ``q_lora_rank``), KV down and up, and output projection,
        separate on every stack (DeepSeek-V2, Sec. 2.1.2; Megatron-Core
        ``MLASelfAttention``; HF ``DeepseekV3Attention`` ``q_a_proj, q_b_proj,
        kv_a_proj_with_mqa, kv_b_proj, o_proj``)."""
        if self.mla:
            return (2 if self.q_lora_rank else 1) + 2 + 1
        return 2 if fused or self.model_fuses_qkv else 4

    def kv_width(self) -> int:
        """Key + value elements per token that context parallelism exchanges
        (MLA: the up-projected per-head keys/values, as Megatron-Core's CP does)."""
        if self.mla:
            return self.heads * (self.qk_dim + self.v_dim)
        return 2 * self.kv_heads * self.head_dim

    def act_bytes16(self, s: int) -> float:
        """Activation bytes per sample at 2-byte elements (Korthikanti Eq. 1, term
        by term): QKV input ``2sh``, Q, K and V, the output projection's input,
        the dropout mask ``sh``, and MLA's latent vectors. ``11sh`` for MHA."""
        q = self.heads * self.qk_dim
        latent = (self.q_lora_rank + self.kv_lora_rank + self.qk_rope_dim) if self.mla else 0
        return (2 * s * self.hidden + 2 * s * q + 2 * s * self.kv_width()
                + 2 * s * self.heads * self.v_dim + s * self.hidden + 2 * s * latent)


@dataclass(frozen=True)
class MlpDims:
    """A dense MLP: ``ffn`` intermediate width, gated (SwiGLU) or not."""

    ffn: int
    gated: bool = True
    bias: bool = False
    #: the model's own code runs gate and up as one GEMM on every stack (Phi-3's
    #: ``gate_up_proj``), not only under Megatron's fused ``linear_fc1``
    model_fuses_gate_up: bool = False

    def params(self, hidden: int) -> int:
        n = (3 if self.gated else 2) * hidden * self.ffn
        if self.bias:
            n += (2 if self.gated else 1) * self.ffn + hidden
        return n


@dataclass(frozen=True)
class MoeDims:
    """Routed experts (SwiGLU, ``expert_ffn`` wide), ``top_k`` per token, shared experts.

    ``shared_ffn`` is the total width of the always-on shared experts (0 =
    none); ``shared_gate`` adds Qwen2-MoE's ``h → 1`` gate on them.
    ``capacity_factor``: tokens an expert takes, as a multiple of the
    average (Fedus et al. 2022, Sec. 2.1; Megatron-Core
    ``--moe-expert-capacity-factor`` with ``--moe-pad-expert-input-to-capacity``);
    None = dropless. ``load_imbalance``: the stated busiest/average load of
    a dropless router (1.0 = perfectly balanced).
    """

    num_experts: int
    top_k: int
    expert_ffn: int
    shared_ffn: int = 0
    shared_gate: bool = False
    router_bias: bool = False
    #: each routed expert's projections carry biases (gpt-oss: gate/up 2f, down h)
    expert_bias: bool = False
    capacity_factor: float | None = None
    load_imbalance: float = 1.0

    @property
    def load_factor(self) -> float:
        """Work of the busiest rank over the average: padded capacity, else the imbalance."""
        return self.capacity_factor if self.capacity_factor is not None else self.load_imbalance

    def expert_params(self, hidden: int) -> int:
        bias = 2 * self.expert_ffn + hidden if self.expert_bias else 0
        return self.num_experts * (3 * hidden * self.expert_ffn + bias)

    def other_params(self, hidden: int) -> int:
        """Router, shared experts (and their gate), router bias."""
        n = hidden * self.num_experts + 3 * hidden * self.shared_ffn
        if self.shared_gate:
            n += hidden
        if self.router_bias:
            n += self.num_experts
        return n


def _norm_params(hidden: int, layer_norm: bool) -> int:
    return (2 if layer_norm else 1) * hidden


def decoder_block(name: str, seq_len: int, attn: AttentionDims, mlp: MlpDims | None = None,
                  moe: MoeDims | None = None, layer_norm: bool = False,
                  flash_attention: bool = True, causal_flops: bool = False,
                  act_dtype_bytes: int = 2, dropout: bool = True,
                  fused_gated: bool = False, post_norms: bool = False,
                  parallel: int = 0) -> Layer:
    """One pre-norm decoder block with a dense (``mlp``) or MoE (``moe``) MLP.

    Returns a ``transformer_block`` layer, or a ``moe_block`` layer whose
    ``expert_*`` fields separate the routed experts (what expert parallelism
    shards and load imbalance scales). ``flash_attention`` drops the ``5·a·s²``
    score activations (Dao et al. 2022). ``dropout=False`` (a model trained
    without dropout) keeps no ``s·h`` masks after the attention projection and
    the MLP, and of the unfused core's scores only the softmax output (``2·a·s²``:
    :func:`~autopar_opt.model_zoo.transformer.kept_per_score`): the replicated part
    becomes ``8·s·h``
    (Korthikanti et al. 2022, Eq. 2, as in
    :func:`~autopar_opt.model_zoo.transformer.transformer_block`).
    ``fused_gated``: a fused SwiGLU (Megatron-Core ``bias_swiglu_impl``, also
    used by its grouped experts) keeps ``6·f`` instead of ``8·f`` bytes per
    token of every gated MLP, dense, shared or routed (see
    :func:`~autopar_opt.model_zoo.transformer.transformer_block`).
    ``post_norms``: a norm also after the attention and after the MLP, before each
    residual add (Gemma 2 and 3: ``post_attention_layernorm``,
    ``post_feedforward_layernorm``; Gemma Team 2024, arXiv 2408.00118, Sec. 2), two
    more norm vectors and two more stored norm inputs (``2·s·h`` each, in the
    replicated part: they act on the whole hidden state, split only by sequence
    parallelism). ``parallel``: attention and MLP read the same input (GPT-J,
    GPT-NeoX's ``use_parallel_residual``, Falcon's ``parallel_attn``; Wang &
    Komatsuzaki 2021), through one shared norm (1: Falcon-7B) or two (2: GPT-NeoX,
    Falcon's ``new_decoder_architecture``); 0: one after the other. The MLP's norm
    then reads the block input the attention's norm already keeps (``2·s·h`` fewer
    stored bytes), and a shared norm also hands both the same output (``2·s·h``
    fewer again, one norm vector fewer).
    """
    if (mlp is None) == (moe is None):
        raise ValueError(f"block {name!r}: give exactly one of mlp= or moe=")
    s, h = seq_len, attn.hidden
    e = act_dtype_bytes / 2.0
    # GEMM inputs kept for the weight gradients (what FP8 training keeps as its 1-byte
    # cast, cost.memory.activation_bytes), each a term of the activations below: the two
    # norm outputs feeding QKV (or MLA's down projections) and the first MLP GEMM, inside
    # the replicated part (as in transformer.py's block); the output projection's input,
    # MLA's normed latents feeding its up projections (in the split part, where
    # act_bytes16 counts them) and the second MLP GEMM's input.
    gemm_repl = 4 * s * h * e
    gemm_in = gemm_repl + 2 * s * attn.heads * attn.v_dim * e
    if attn.mla:
        gemm_in += 2 * s * (attn.q_lora_rank + attn.kv_lora_rank) * e
    # GEMM outputs, whose gradients the backward GEMMs read (cost.fp8_casts): split by
    # tp (column-parallel) and whole on every rank (row-parallel, unsplit)
    out_split, out_whole = attn.gemm_output_widths()
    gemm_out_split, gemm_out_whole = 2 * s * out_split * e, 2 * s * out_whole * e
    score = attn.score_flops(s, causal_flops)
    attn_fwd = 2.0 * s * attn.matrix_params() + score
    if parallel not in (0, 1, 2) or (parallel and post_norms):
        raise ValueError(f"block {name!r}: parallel is 0, 1 or 2, without post_norms")
    norms = (4 if post_norms else 2) - (1 if parallel == 1 else 0)
    params = attn.params() + norms * _norm_params(h, layer_norm)
    mask = s * h * e if dropout else 0.0                    # one dropout mask
    attn_act = attn.act_bytes16(s) * e - (s * h * e - mask)
    scores = 0.0 if flash_attention else kept_per_score(dropout) * attn.heads * s * s * e
    post = 4 * s * h * e if post_norms else 0.0             # the post-norms' inputs
    # a parallel block's MLP norm reads the kept block input; one shared norm, one output
    post -= {0: 0.0, 1: 4 * s * h * e, 2: 2 * s * h * e}[parallel]
    if parallel == 1:
        gemm_repl -= 2 * s * h * e
        gemm_in -= 2 * s * h * e
    base_act = attn_act + 4 * s * h * e + scores + mask + post   # + norms, MLP dropout mask
    gated = 6 if fused_gated else 8
    fields: dict = {}
    if mlp is not None:
        mlp_fwd = 2.0 * s * (3 if mlp.gated else 2) * h * mlp.ffn
        params += mlp.params(h)
        mlp_act = ((gated if mlp.gated else 4) * s * mlp.ffn + 2 * s * h) * e
        gemm_in += 2 * s * mlp.ffn * e
        gemm_out_split += 2 * s * (2 if mlp.gated else 1) * mlp.ffn * e
        gemm_out_whole += 2 * s * h * e
        kind = LayerKind.transformer_block
        kernels = attn.gemm_kernels() + 2                  # MLP up (gate fused) and down
        # unfused: gate and up separate (HF LlamaMLP gate_proj, up_proj, down_proj)
        unfused = attn.gemm_kernels(fused=False) + (3 if mlp.gated and not mlp.model_fuses_gate_up
                                                    else 2)
    else:
        k, lf = moe.top_k, moe.load_factor
        routed_fwd = 2.0 * s * k * 3 * h * moe.expert_ffn
        mlp_fwd = 2.0 * s * (h * moe.num_experts + 3 * h * moe.shared_ffn) + routed_fwd
        expert_act = s * k * (4 * h + gated * moe.expert_ffn) * e
        mlp_act = (2 * s * h + gated * s * moe.shared_ffn) * e + 4 * s * moe.num_experts + expert_act
        # the shared experts' second GEMM input, each routed copy's dispatched input and
        # its second GEMM input (the first MLP input is the norm output counted above)
        gemm_in += 2 * s * moe.shared_ffn * e + 2 * s * k * (h + moe.expert_ffn) * e
        # the shared experts' (gated) up and down outputs, each routed copy's up and
        # down outputs (the experts' tokens taken as split like the column-parallel
        # outputs); the router's logits are not an FP8 GEMM (Megatron-Core's router
        # is a plain torch GEMM)
        gemm_out_split += 2 * s * 2 * moe.shared_ffn * e + 2 * s * k * (2 * moe.expert_ffn + h) * e
        gemm_out_whole += 2 * s * h * e if moe.shared_ffn else 0.0
        params += moe.expert_params(h) + moe.other_params(h)
        kind = LayerKind.moe_block
        # the router, the shared expert's up and down, the routed experts' up and
        # down as grouped GEMMs (Megatron-Core --moe-grouped-gemm)
        kernels = attn.gemm_kernels() + 1 + (2 if moe.shared_ffn else 0) + 2
        # unfused: the shared experts' gate and up separate (HF Qwen2MoE
        # shared_expert, DeepseekV3MLP: gate_proj, up_proj, down_proj); the
        # routed experts stay two grouped GEMMs (limitation: HF's eager MoE
        # loops over the experts, one set of GEMMs per expert, not modelled)
        unfused = attn.gemm_kernels(fused=False) + 1 + (3 if moe.shared_ffn else 0) + 2
        fields = dict(num_experts=moe.num_experts, top_k=k, expert_params=moe.expert_params(h),
                      expert_flops_fwd=routed_fwd, expert_act_bytes=expert_act,
                      a2a_bytes=2.0 * s * k * h * e, expert_load=lf)
    fwd = attn_fwd + mlp_fwd
    return Layer(
        name=name, kind=kind, flops_fwd=fwd, flops_bwd=2 * fwd, params=int(params),
        act_bytes=base_act + mlp_act, act_replicated_bytes=(8 * s * h * e + 2 * mask + post),
        act_attn_bytes=scores, attn_dropout=dropout, flops_recompute_selective=score,
        act_gemm_input_bytes=gemm_in, act_gemm_input_replicated_bytes=gemm_repl,
        gemm_output_bytes=gemm_out_split + gemm_out_whole, gemm_output_replicated_bytes=gemm_out_whole,
        input_bytes=2 * s * h * e, output_bytes=2 * s * h * e,
        tp_comm_bytes=4 * s * h * e, cp_comm_bytes=2 * s * attn.kv_width() * e,
        max_tp=attn.heads if attn.mla else attn.kv_heads, supports_sp=True, supports_cp=True,
        gemm_kernels=kernels, gemm_kernels_unfused=unfused,
        head_dim=attn.qk_dim, attn_heads=attn.heads, attn_causal=True, attn_flops_halved=causal_flops,
        attn_window=attn.window if 0 < attn.window < s else 0, **fields,
        **({} if post_norms or parallel else _op_sac(s, attn, mlp, e)))


def _op_sac(s: int, attn: AttentionDims, mlp: MlpDims | None, e: float) -> dict[str, float]:
    """Op-level selective checkpointing fields of a dense, bias-free GQA block
    (:func:`~autopar_opt.model_zoo.transformer.op_sac_terms`); none for MoE,
    MLA or biased blocks (not offered)."""
    if mlp is None or attn.mla or attn.qkv_bias or attn.out_bias or mlp.bias:
        return {}
    return op_sac_terms(s, attn.hidden, attn.heads * attn.head_dim, attn.kv_heads * attn.head_dim,
                        mlp.ffn, attn.heads, mlp.gated, attn.model_fuses_qkv, e)
