"""Per-sample costs of transformer layers, from model dimensions.

Sources
-------
* FLOPs: Narayanan et al. 2021 (SC21), Sec. 5.1 / App.: a block costs
  ``24·s·h² + 4·s²·h`` forward for a 4h MLP with multi-head attention; we
  expand it term by term so that GQA (``h_kv < h``) and gated MLPs (SwiGLU,
  three matrices: Shazeer 2020) are exact. Backward = 2x forward.
* Activations: Korthikanti et al. 2022, Sec. 4.1, Eq. 1: ``s·h·(34 + 5·a·s/h)``
  bytes per sample for 16-bit training; the ``10·s·h`` replicated part of
  Eq. 2; FlashAttention (Dao et al. 2022) never stores the ``5·a·s²`` scores.
* Attention core: ``flops_recompute_selective`` is the score/softmax·V part
  (``4·s²·h`` forward, halved when causal blocks are skipped) with or without
  FlashAttention; the cost model prices it at its own efficiency. Under
  FlashAttention selective recomputation is never offered (no score
  activations to drop: ``act_attn_bytes = 0``).
* Tensor-parallel traffic: two all-reduces of ``2·s·h`` bytes per block in the
  forward pass (Shoeybi et al. 2019, Fig. 4).
"""

from __future__ import annotations

from autopar_opt.ir.graph import COUNTED_SCORE_BYTES, Layer, LayerGraph, LayerKind

#: Large power of two: any power-of-two tp divides it (vocab-parallel layers
#: pad the vocabulary, Megatron ``--make-vocab-size-divisible-by``).
ANY_TP = 1024


def transformer_block(name: str, seq_len: int, hidden: int, heads: int, ffn_hidden: int,
                      kv_heads: int | None = None, gated_mlp: bool = False,
                      flash_attention: bool = False, causal_flops: bool = False,
                      cross_attention_len: int | None = None, act_dtype_bytes: int = 2,
                      biases: bool = True, fused_gated: bool = False,
                      dropout: bool = True, model_fuses_qkv: bool = False,
                      causal: bool = True, layer_norm: bool = True) -> Layer:
    """One transformer block (attention + MLP + 2 norms), per sample.

    ``layer_norm``: LayerNorm's weight and bias per norm (``2·h``); False for RMSNorm,
    which has a weight only (``h``: Zhang and Sennrich 2019; Llama's ``LlamaRMSNorm``).

    ``causal``: a decoder's masked self-attention (False for encoders); with
    ``causal_flops`` the counted core FLOPs are already halved. The block
    records its head dimension, mask and the forward GEMM FLOPs of its four
    tensor-parallel collective-GEMM pairs (QKV, output projection, MLP up, MLP
    down) for the attention-kernel and overlap models (``Layer.head_dim``,
    ``attn_causal``, ``attn_flops_halved``, ``tp_gemm_shares``).

    ``cross_attention_len`` adds an encoder-decoder cross-attention sub-layer
    over that many encoder tokens (T5/Transformer decoders).
    ``causal_flops`` halves the attention-score FLOPs (causal masking skips
    half; Megatron's formula counts them all, so it defaults to False).

    Gated MLP activations: an eager SwiGLU (``silu(x·W1) * (x·W3)``, as in
    Hugging Face Llama and torchtitan) keeps four ``f``-wide tensors for
    backward (both GEMM outputs, the SiLU output, the product): ``8·s·f``
    bytes. A fused SwiGLU (``fused_gated``: Megatron-Core ``bias_swiglu_impl``,
    whose backward ``swiglu_back`` recomputes SiLU from its saved ``2f``-wide
    input) keeps that input and the product that feeds the second GEMM:
    ``4·s·f + 2·s·f = 6·s·f`` bytes (``megatron/core/fusions/fused_bias_swiglu.py``).

    ``dropout=False`` (a model trained without dropout, e.g. Llama 3 and MPT)
    keeps no dropout masks: Korthikanti's counts include one ``s·h`` mask
    after the attention projection and one after the MLP, both in the
    replicated ``10·s·h`` part (Korthikanti et al. 2022, Sec. 4.1, Eq. 2);
    the unfused core's scores keep only the softmax output: ``2·a·s²`` instead
    of Korthikanti's ``5·a·s²`` (:func:`kept_per_score`; the runtime's softmax
    rescales both, :mod:`autopar_opt.cost.scores`).

    GEMM kernels per forward pass: 4 with fused projections (QKV, output,
    MLP up with SwiGLU's gate fused, down: Megatron-Core ``linear_qkv``,
    ``linear_proj``, ``linear_fc1``, ``linear_fc2``), cross-attention adding
    its Q, fused KV and output projections (7). Without fused projections
    (runtime ``fused_projections`` off: Hugging Face Transformers, torchtitan)
    Q, K and V are three GEMMs and a gated MLP's gate and up two: 7 for a
    Llama block (``q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj,
    down_proj``, ``modeling_llama.py``), 6 for a plain MLP (BERT's ``query``,
    ``key``, ``value``), cross-attention's K and V two (T5 ``EncDecAttention``
    ``q, k, v, o``). ``model_fuses_qkv``: the model's own code fuses Q, K and V
    on every stack (HF GPT-2 ``c_attn``, GPT-NeoX ``query_key_value``, MPT
    ``Wqkv``).
    """
    s, h, a, f = seq_len, hidden, heads, ffn_hidden
    kv = kv_heads or heads
    h_kv = h * kv // a
    score = 4 * s * s * h * (0.5 if causal_flops else 1.0)
    attn = 2 * s * h * (h + 2 * h_kv) + score + 2 * s * h * h
    mlp = (6 if gated_mlp else 4) * s * h * f
    params = h * (h + 2 * h_kv) + h * h + (3 if gated_mlp else 2) * h * f + (4 if layer_norm else 2) * h
    if biases:
        params += (h + 2 * h_kv) + h + (2 if gated_mlp else 1) * f + h
    e = act_dtype_bytes / 2.0
    attn_act = (7 * s * h + 4 * s * h_kv) * e          # Korthikanti: 11sh for MHA
    gated_f = 6 if fused_gated else 8
    mlp_act = ((gated_f if gated_mlp else 4) * s * f + 3 * s * h) * e  # 19sh for a 4h MLP
    # GEMM inputs kept for the weight gradients (Korthikanti Sec. 4.1): the two
    # norm outputs feeding QKV and the first MLP GEMM (replicated without SP),
    # the attention output feeding the projection, the MLP product feeding W2.
    gemm_in_repl = 4 * s * h * e
    gemm_in = gemm_in_repl + (2 * s * h + 2 * s * f) * e
    # GEMM outputs (their gradients feed the backward GEMMs): the column-parallel QKV
    # and first MLP GEMM outputs, split by tp; the row-parallel output projection's and
    # second MLP GEMM's, whole on every rank (cost.fp8_casts). Cross-attention's GEMMs
    # are in neither count (nor in gemm_in).
    gemm_out_repl = 4 * s * h * e
    gemm_out = gemm_out_repl + 2 * s * (h + 2 * h_kv + (2 if gated_mlp else 1) * f) * e
    norm_act = 4 * s * h * e
    per_score = kept_per_score(dropout)
    scores = 0.0 if flash_attention else per_score * a * s * s * e
    replicated = 10 * s * h * e
    if not dropout:
        attn_act -= s * h * e
        mlp_act -= s * h * e
        replicated -= 2 * s * h * e
    cross_flops = 0.0
    if cross_attention_len:
        t = cross_attention_len
        cross_flops = 2 * s * h * h + 2 * t * h * 2 * h_kv + 4 * s * t * h + 2 * s * h * h
        params += 2 * h * h + 2 * h * h_kv + (2 if layer_norm else 1) * h   # + its norm
        attn_act += (7 * s * h + 4 * t * h_kv) * e
        scores += 0.0 if flash_attention else per_score * a * s * t * e
        replicated += 4 * s * h * e
    fwd = attn + mlp + cross_flops
    fused_kernels = 4 + (3 if cross_attention_len else 0)
    split_qkv = 0 if model_fuses_qkv else 2 + (1 if cross_attention_len else 0)
    unfused_kernels = fused_kernels + split_qkv + (1 if gated_mlp else 0)
    return Layer(
        name=name, kind=LayerKind.transformer_block,
        flops_fwd=fwd, flops_bwd=2 * fwd, params=int(params),
        act_bytes=attn_act + mlp_act + norm_act + scores,
        act_replicated_bytes=replicated, act_attn_bytes=scores, attn_dropout=dropout,
        act_gemm_input_bytes=gemm_in, act_gemm_input_replicated_bytes=gemm_in_repl,
        gemm_output_bytes=gemm_out, gemm_output_replicated_bytes=gemm_out_repl,
        flops_recompute_selective=score,   # the attention core (fused under FlashAttention)
        input_bytes=2 * s * h * e, output_bytes=2 * s * h * e,
        tp_comm_bytes=(6 if cross_attention_len else 4) * s * h * e,
        tp_collectives=3 if cross_attention_len else 2,
        head_dim=h // a, attn_causal=causal, attn_flops_halved=causal_flops and causal,
        tp_gemm_shares=() if cross_attention_len else (
            2.0 * s * h * (h + 2 * h_kv), 2.0 * s * h * h, (4.0 if gated_mlp else 2.0) * s * h * f,
            2.0 * s * h * f),
        cp_comm_bytes=4 * s * h_kv * e,
        max_tp=kv, supports_sp=True, supports_cp=True,
        # cross-attention adds its Q, fused KV and output projections to the 4 GEMMs
        gemm_kernels=7 if cross_attention_len else None, gemm_kernels_unfused=unfused_kernels,
        **({} if biases or cross_attention_len else
           op_sac_terms(s, h, h, h_kv, f, a, gated_mlp, model_fuses_qkv, e)))


def kept_per_score(dropout: bool) -> int:
    """16-bit bytes an unfused attention core keeps per score for the backward
    pass, as the builders count ``Layer.act_attn_bytes`` (``Layer.attn_dropout``
    says which): one 16-bit softmax output, which the softmax's backward and the
    ``softmax·V`` GEMM share (Megatron's fused softmax,
    ``megatron/core/fusions/fused_softmax.py``: ``ScaledUpperTriangMaskedSoftmax``
    saves ``softmax_results`` and returns them, and ``DotProductAttention`` hands
    them to ``torch.bmm``): 2; with attention dropout the dropout's 1-byte mask and
    its 16-bit output, which the GEMM keeps instead: 2 + 1 + 2 = 5 (Korthikanti et
    al. 2022, Sec. 4.1). A dropout of probability 0 keeps nothing (PyTorch's
    ``_dropout_impl`` returns its input, ``aten/src/ATen/native/Dropout.cpp``)."""
    return COUNTED_SCORE_BYTES[1 if dropout else 0]


def op_sac_terms(s: int, h: int, q_width: int, kv_width: int, ffn: int, heads: int,
                 gated_mlp: bool, fuses_qkv: bool, e: float) -> dict[str, float]:
    """The :class:`~autopar_opt.ir.graph.Layer` fields of op-level selective
    checkpointing for a bias-free block (``act_op_saved_bytes``, its
    replicated and unsplit parts, ``flops_recompute_op``), per sample.

    torchtitan ``activation_checkpoint.mode = "selective"``,
    ``selective_ac_option = "op"`` (``torchtitan/models/llama3/infra/parallelize.py``
    at 9a8cb98, ``_apply_ac_to_transformer_block``): the policy saves the
    output of every op in ``_save_list`` (``aten.mm``,
    ``_scaled_dot_product_flash_attention``/``_efficient_attention``,
    ``_c10d_functional.reduce_scatter_tensor``, ``aten.max``) "except every
    second mm" (the count restarts per block call), and re-runs everything
    else in the backward pass. torchtitan's Llama runs ``wq, wk, wv``
    (``model.py``: ``self.wq(x), self.wk(x), self.wv(x)``), ``wo``, then ``w1,
    w3, w2`` (``self.w2(F.silu(self.w1(x)) * self.w3(x))``), so wq, wv, w1 and
    w2 are kept and wk, wo and w3 re-run with every element-wise op; a plain
    MLP (up, down) keeps up and re-runs down; a model that fuses QKV keeps
    QKV and the MLP's first GEMM. Kept besides: the block input (the
    checkpoint's input: split only under sequence parallelism) and the
    attention kernel's 16-bit output with its fp32 log-sum-exp per head and
    token (``4·heads·s`` bytes). A column-parallel output splits by ``tp``; a
    row-parallel GEMM's output (wo, w2: the partial sums before the
    reduce-scatter) is whole on every tensor-parallel rank (``unsplit``). Left
    out: the reduce-scatter outputs kept under ``tp > 1`` (``2·s·h/tp`` bytes
    each). A biased projection runs ``aten.addmm``, not in the save list, so
    the builders give these fields only to bias-free blocks (0: not offered).
    """
    mm = [(2.0 * s * h * (q_width + 2 * kv_width), 2.0 * s * (q_width + 2 * kv_width) * e, False)] \
        if fuses_qkv else [(2.0 * s * h * q_width, 2.0 * s * q_width * e, False),
                           (2.0 * s * h * kv_width, 2.0 * s * kv_width * e, False),
                           (2.0 * s * h * kv_width, 2.0 * s * kv_width * e, False)]
    mm.append((2.0 * s * q_width * h, 2.0 * s * h * e, True))            # wo
    mm += [(2.0 * s * h * ffn, 2.0 * s * ffn * e, False)] * (2 if gated_mlp else 1)
    mm.append((2.0 * s * ffn * h, 2.0 * s * h * e, True))                # w2
    split = unsplit = flops = 0.0
    for i, (gemm_flops, out, row_parallel) in enumerate(mm, start=1):
        if i % 2 == 0:
            flops += gemm_flops
        elif row_parallel:
            unsplit += out
        else:
            split += out
    block_input = 2.0 * s * h * e
    split += 2.0 * s * q_width * e + 4.0 * heads * s      # SDPA output + fp32 log-sum-exp
    return {"act_op_saved_bytes": split + unsplit + block_input,
            "act_op_saved_replicated_bytes": block_input,
            "act_op_saved_unsplit_bytes": unsplit, "flops_recompute_op": flops}


def embedding(name: str, seq_len: int, hidden: int, vocab: int, learned_positions: bool = False,
              act_dtype_bytes: int = 2, dropout: bool = True) -> Layer:
    """Token (+ learned position) embedding, vocab-parallel under tp.

    No GEMM FLOPs (a lookup); the vocab-parallel lookup all-reduces its
    ``2·s·h``-byte output (Shoeybi et al. 2019, Sec. 3). Activations: the
    embedding dropout's ``s·h`` mask (Korthikanti et al. 2022, Sec. 4.3), whole on
    every tensor-parallel rank unless sequence parallelism splits it; the lookup's
    backward reads only the token ids. ``dropout=False`` (a model trained without
    dropout, as the blocks' :func:`transformer_block` ``dropout``) keeps nothing:
    PyTorch's dropout at ``p = 0`` returns its input and draws no mask
    (``aten/src/ATen/native/Dropout.cpp``: the fused kernel only for ``0 < p < 1``,
    ``_dropout_impl``: ``if (p == 0 || !train) return input``).
    """
    s, h = seq_len, hidden
    e = act_dtype_bytes / 2.0
    params = vocab * h + (s * h if learned_positions else 0)
    mask = s * h * e if dropout else 0.0
    return Layer(name=name, kind=LayerKind.embedding, params=int(params),
                 act_bytes=mask, act_replicated_bytes=mask,
                 input_bytes=0.0, output_bytes=2 * s * h * e, tp_comm_bytes=2 * s * h * e,
                 max_tp=ANY_TP, supports_sp=True, supports_cp=True)


def lm_head(name: str, seq_len: int, hidden: int, vocab: int, tied: bool = True,
            act_dtype_bytes: int = 2, tied_to: str = "embed", layer_norm: bool = True) -> Layer:
    """Final norm + output projection to the vocabulary + cross-entropy.

    ``layer_norm``: the final norm's weight and bias (``2·h``); False for RMSNorm (``h``).

    ``2·s·h·V`` forward FLOPs (Narayanan et al. 2021 Eq. 3, the ``V/(16·l·h)``
    term). Activations (Korthikanti et al. 2022, Sec. 4.3: ``4·s·b·h·(1 + V/h)``):
    the final norm's input (``2·s·h``, its backward reads it), the output
    projection's input, the norm's output (``2·s·h``, the weight gradient reads
    it), both replicated over ``tp`` unless sequence parallelism splits them, and
    the fp32 logits kept for the loss (``4·s·V`` bytes). Tied weights
    (``tied``: the ``V·h`` word-embedding matrix of the layer ``tied_to``) are
    not in ``params``: counted once, in the embedding, while both share a
    pipeline stage; with ``pp > 1`` the last stage keeps its own copy
    (:attr:`autopar_opt.ir.graph.Layer.tied_params`).
    """
    s, h = seq_len, hidden
    e = act_dtype_bytes / 2.0
    fwd = 2 * s * h * vocab
    return Layer(name=name, kind=LayerKind.lm_head, flops_fwd=fwd, flops_bwd=2 * fwd,
                 params=int((0 if tied else vocab * h) + (2 if layer_norm else 1) * h),
                 tied_params=int(vocab * h) if tied else 0, tied_to=tied_to if tied else "",
                 act_bytes=4 * s * h * e + 4 * s * vocab, act_replicated_bytes=4 * s * h * e,
                 input_bytes=2 * s * h * e, output_bytes=4 * s,
                 tp_comm_bytes=2 * s * h * e, max_tp=ANY_TP, supports_sp=True, supports_cp=True)


def decoder_lm(name: str, num_layers: int, seq_len: int, hidden: int, heads: int,
               ffn_hidden: int, vocab: int, kv_heads: int | None = None,
               gated_mlp: bool = False, flash_attention: bool = False,
               learned_positions: bool = False, tied: bool = True, biases: bool = True,
               act_dtype_bytes: int = 2, source: str = "",
               causal_flops: bool = False, fused_gated: bool = False,
               dropout: bool = True, model_fuses_qkv: bool = False,
               layer_norm: bool = True) -> LayerGraph:
    """A decoder-only language model as a chain: embedding, blocks, head.

    ``causal_flops`` is passed to every block: kernels that skip the masked
    half of the score matrix (FlashAttention-2, Dao 2023, Sec. 3.1.1) do half
    the ``4·s²·h`` score FLOPs. ``fused_gated``, ``dropout``,
    ``model_fuses_qkv``, ``layer_norm``: see :func:`transformer_block` (``dropout``
    also for the embedding's mask, :func:`embedding`).
    """
    layers = [embedding("embed", seq_len, hidden, vocab, learned_positions, act_dtype_bytes,
                        dropout=dropout)]
    layers += [transformer_block(f"block{i:03d}", seq_len, hidden, heads, ffn_hidden, kv_heads,
                                 gated_mlp, flash_attention, causal_flops=causal_flops,
                                 act_dtype_bytes=act_dtype_bytes, biases=biases,
                                 fused_gated=fused_gated, dropout=dropout,
                                 model_fuses_qkv=model_fuses_qkv, layer_norm=layer_norm)
               for i in range(num_layers)]
    layers.append(lm_head("head", seq_len, hidden, vocab, tied, act_dtype_bytes,
                          layer_norm=layer_norm))
    return LayerGraph.chain(name, layers, seq_len=seq_len, source=source, causal=True)
