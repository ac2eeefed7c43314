"""Memory of one layer under one strategy on one device: activations kept for the
backward pass (:func:`activation_bytes`), the output layer's loss buffers, and the
transient working set of the layer in flight (:func:`working_set_bytes`). The
weights, gradients and optimizer state are in :mod:`autopar_opt.cost.state`."""

from __future__ import annotations

from autopar_opt.cost import moe
from autopar_opt.cost.comm import projection_inputs, tp_collectives, zero3_bytes
from autopar_opt.cost.scores import score_bytes
from autopar_opt.cost.state import FP8_KINDS, autocast_cast_params, held_layer
from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.strategies import Strategy, effective_recompute
from autopar_opt.ir.training import AUTOCAST_CACHE_BYTES, DTYPE_BYTES, Recompute, Training


def logits_per_device(layer: Layer, s: Strategy, microbatch_samples: int,
                      parallel: bool = True) -> float:
    """Logits of one micro-batch on one device of the output layer: its
    ``4·s·V`` fp32-logit bytes (``act_bytes - act_replicated_bytes``) over 4,
    vocabulary-parallel over ``tp`` (``parallel``: the runtime's
    ``loss_parallel``; off, every tensor-parallel rank holds them all), with the
    micro-batch share of :func:`activation_bytes`."""
    return (layer.act_bytes - layer.act_replicated_bytes) / 4.0 / (s.tp if parallel else 1) \
        * microbatch_samples / (s.dp * s.cp)


def activation_bytes(layer: Layer, s: Strategy, microbatch_samples: int,
                     recompute: Recompute | None = None, training: Training | None = None,
                     fp8_casts: bool = True) -> float:
    """Activations kept for backward on one device for one micro-batch.

    Korthikanti et al. 2022: Eq. 2 (tensor parallel: the replicated part stays
    whole), Eq. 4 (sequence parallel: everything split by t), Sec. 5 (selective
    recomputation drops the attention-core term), Sec. 4.1 (full
    recomputation keeps only the layer input, split by t under sequence
    parallelism). Op-level selective checkpointing (:attr:`Recompute.op`)
    keeps ``act_op_saved_bytes`` (torchtitan's save list:
    ``model_zoo/transformer.py`` ``op_sac_terms``): the column-parallel
    outputs split by t, the input by t under sequence parallelism, a
    row-parallel GEMM's partial sums whole. Context parallelism splits the sequence by ``cp``. A
    runtime with fused (flash) attention never stores the ``5·a·s²`` scores
    (Dao et al. 2022); an unfused core keeps them as the runtime's softmax does
    (:func:`autopar_opt.cost.scores.score_bytes`). In FP8 training the GEMM inputs kept for the weight
    gradients are their FP8 casts (Transformer Engine ``Linear`` and
    ``LayerNormLinear`` save the FP8 ``inputmat``/``ln_out``; Micikevicius et
    al. 2022, Sec. 4): half of ``act_gemm_input_bytes``. The output layer's
    ``4·s·V`` fp32 logits are :func:`kept_logit_bytes` per logit instead
    (16-bit under a fused cross-entropy kernel, runtime
    ``fused_cross_entropy``, or a 16-bit plain PyTorch loss). ``recompute`` overrides the
    strategy's mode; ``fp8_casts=False`` counts the 16-bit tensors the
    element-wise kernels read and write (the FP8 casts are extra copies for
    the GEMMs, not smaller element-wise traffic; so are the whole inputs a
    DTensor stack keeps gathered under sequence parallelism,
    :func:`gathered_gemm_input_bytes`, written by NCCL).
    """
    mode = effective_recompute(layer, s.recompute if recompute is None else recompute)
    share = microbatch_samples / (s.dp * s.cp)
    measured = layer.measured_for(s.tp) if layer.measured else None
    if measured is not None and measured.act_bytes_per_sample is not None \
            and mode is Recompute.none:
        return measured.act_bytes_per_sample * share
    if mode is Recompute.full:
        per = layer.input_bytes / (s.tp if s.sp else 1)
        return per * share
    if mode is Recompute.op:
        repl, whole = layer.act_op_saved_replicated_bytes, layer.act_op_saved_unsplit_bytes
        split = layer.act_op_saved_bytes - repl - whole
        return (split / s.tp + repl / (s.tp if s.sp else 1) + whole) * share
    act = moe.busiest_act_bytes(layer)        # = act_bytes for dense layers
    flash = training is not None and training.runtime.flash_attention
    if mode is Recompute.selective or flash:
        act -= layer.act_attn_bytes
    else:                                     # the runtime's softmax: cost.scores
        act += score_bytes(layer, training) - layer.act_attn_bytes
    repl = min(layer.act_replicated_bytes, act)
    split = act - repl
    if layer.kind is LayerKind.lm_head and training is not None:
        split *= kept_logit_bytes(training) / 4.0     # 4·s·V: fp32 unless the loss keeps less
    gin = layer.act_gemm_input_replicated_bytes
    if fp8_casts and training is not None and training.dtype == "fp8" \
            and layer.kind in FP8_KINDS:
        # TE keeps FP8 GEMM inputs as their FP8 cast: 1 byte instead of 2.
        repl -= layer.act_gemm_input_replicated_bytes / 2
        split -= (layer.act_gemm_input_bytes - layer.act_gemm_input_replicated_bytes) / 2
        gin /= 2
    whole = layer.kind is LayerKind.lm_head and training is not None \
        and not training.runtime.loss_parallel    # logits gathered to every TP rank
    gin = min(gin, repl)                      # the replicated part's GEMM inputs
    gathered = gathered_gemm_input_bytes(layer, s, training, gin) if fp8_casts else 0.0
    per = split / (1 if whole else s.tp) + (repl - gin if gathered else repl) / (s.tp if s.sp else 1)
    return (per + gathered) * share


def gathered_gemm_input_bytes(layer: Layer, s: Strategy, training: Training | None,
                              gin: float) -> float:
    """Bytes per sample a dense block keeps of its sequence-parallel column-parallel
    inputs *gathered* (whole on every rank) on a stack that does not re-gather them in
    the backward pass (runtime ``sp_input_regather`` off: PyTorch DTensor, whose
    all-gather output is the tensor each column-parallel matmul saves, one per input
    redistribution, :func:`autopar_opt.cost.comm.projection_inputs`); ``gin`` is the
    layer's kept norm outputs feeding those GEMMs (``act_gemm_input_replicated_bytes``).
    Megatron's layers keep the shard and gather again (Korthikanti et al. 2022,
    Sec. 4.2.2: Eq. 4 splits them by t). 0 where the rule does not apply."""
    if not s.sp or s.tp <= 1 or training is None or training.runtime.sp_input_regather \
            or layer.kind is not LayerKind.transformer_block or gin <= 0:
        return 0.0
    n = tp_collectives(layer)
    return gin * projection_inputs(layer, training.runtime, n) / n


def eager_logp_bytes(training: Training) -> float:
    """Bytes per log-probability of a plain PyTorch loss (runtime
    ``eager_cross_entropy``): 4 when it computes in fp32, under
    ``torch.autocast`` (``cross_entropy``/``log_softmax``/``nll_loss`` autocast
    to float32, PyTorch AMP docs, "CUDA Ops that can autocast to float32"),
    after the loss's own ``.float()`` (``loss_fp32_upcast``, torchtitan) or in
    fp32 training; else 2: the 16-bit logits of a 16-bit model (DeepSpeed and
    Colossal-AI fp16/bf16 engines; the output layer stays 16-bit under FP8),
    whose dtype ``log_softmax`` keeps."""
    if training.autocast or training.runtime.loss_fp32_upcast \
            or DTYPE_BYTES.get(training.dtype, 4) >= 4:
        return 4.0
    return 2.0


def kept_logit_bytes(training: Training) -> float:
    """Bytes per logit the output layer keeps for the backward pass: 2 under
    a fused loss kernel (``fused_cross_entropy``: the 16-bit logits and one
    fp32 log-sum-exp per token); :func:`eager_logp_bytes` under a plain
    PyTorch loss (``eager_cross_entropy``: its saved log-probabilities); 4
    otherwise (Megatron's vocabulary-parallel loss saves the fp32 softmax,
    :func:`loss_grad_cast_bytes`)."""
    rt = training.runtime
    if rt.fused_cross_entropy:
        return 2.0
    if rt.eager_cross_entropy:
        return eager_logp_bytes(training)
    return 4.0


def eager_loss_bytes(layer: Layer, s: Strategy, microbatch_samples: int,
                     training: Training) -> float:
    """The output layer's backward transient under a plain PyTorch loss
    (runtime ``eager_cross_entropy``, not fused): ``X_ce = 2·e · s·V / tp ·
    b / (dp·cp)`` bytes, ``e`` = :func:`eager_logp_bytes`, on top of the
    ``e·s·V`` log-probabilities kept (:func:`kept_logit_bytes`), with the
    micro-batch share of :func:`activation_bytes`.

    ``F.cross_entropy`` is ``log_softmax`` then ``nll_loss``
    (``aten/src/ATen/native/LossNLL.cpp``, ``cross_entropy_loss``). In the
    backward, ``nll_loss_backward`` returns a zero-filled gradient of the
    log-probabilities' shape and dtype (``aten/src/ATen/native/cuda/Loss.cu``,
    ``nll_loss_backward_out_cuda``: ``grad_input.zero_()``), and
    ``_log_softmax_backward_data`` writes a new tensor of that shape
    (``tools/autograd/derivatives.yaml``, ``_log_softmax``: ``self:
    _log_softmax_backward_data(grad, result, dim, self.scalar_type())``)
    while both that gradient and the saved ``result`` are alive: ``3·e``
    bytes per logit at the peak, ``2·e`` of them transient. What follows is
    smaller: under an fp32 loss the cast of the fp32 gradient back to the
    16-bit logits (``_to_copy`` backward, 4 + 2 bytes), and a shifted-label
    loss's slice backward (``logits[..., :-1, :]``: a zero-filled 16-bit
    gradient of the unshifted logits beside the shifted one, 2 + 2 bytes).
    The forward holds no more: the 16-bit logits, a shifted contiguous copy
    (Hugging Face ``GPT2LMHeadModel``: ``shift_logits = lm_logits[..., :-1,
    :].contiguous()``), the fp32 cast when the loss computes in fp32, and the
    log-probabilities: 2 + 2 + 4 + 4 = 12 = ``3·e`` bytes per logit in fp32,
    2 + 2 + 2 = 6 = ``3·e`` in 16 bits. The 16-bit logits themselves are
    saved by no backward (a GEMM saves its input and weight) and are gone
    by the backward pass (the training step returns only the loss;
    torchtitan ``del pred`` before ``loss.backward()``).

    0 for any layer but the output layer, without ``eager_cross_entropy``,
    and under a fused loss (``fused_cross_entropy``, which takes precedence).
    Approximation: a shifted-label loss has ``s - 1`` logits per sample, counted
    as ``s``.
    """
    rt = training.runtime
    if layer.kind is not LayerKind.lm_head or not rt.eager_cross_entropy \
            or rt.fused_cross_entropy:
        return 0.0
    return 2.0 * eager_logp_bytes(training) * logits_per_device(
        layer, s, microbatch_samples, training.runtime.loss_parallel)


def loss_grad_cast_bytes(layer: Layer, s: Strategy, microbatch_samples: int,
                         training: Training) -> float:
    """The output layer's cross-entropy backward transient on one device:
    ``X_ce = 2 · s · V / tp · b / (dp · cp)`` bytes (``s·V`` logits per sample,
    vocabulary-parallel over ``tp``; ``b / (dp·cp)`` the micro-batch share of
    :func:`activation_bytes`), on top of the ``4·s·V`` fp32 softmax kept for
    the backward pass.

    Megatron's vocabulary-parallel loss computes in fp32 on the 16-bit logits
    and saves the fp32 softmax (Megatron-Core
    ``megatron/core/tensor_parallel/cross_entropy.py``,
    ``_VocabParallelCrossEntropy.forward``: ``calculate_logits_max`` casts
    with ``.float()``, ``ctx.save_for_backward(exp_logits, ...)``). Its
    ``backward`` writes the gradient in place of that fp32 softmax
    (``prepare_gradient_calculation_operands``: ``grad_input = softmax``) and
    returns it in fp32; autograd casts it to the 16-bit input's dtype while
    the fp32 one is alive (PyTorch ``torch/csrc/autograd/engine.cpp``,
    ``validate_outputs``: ``grad = grad.to(metadata dtype)``). Megatron-LM and
    BigScience's Megatron-DeepSpeed cast outside the function
    (``vocab_parallel_cross_entropy(output.float(), labels)``, ``gpt_model.py``
    ``post_language_model_processing``; ``megatron/mpu/cross_entropy.py``): the
    ``_to_copy`` backward (``tools/autograd/derivatives.yaml``:
    ``_to_copy_backward(grad, self.options())``) makes the same 16-bit copy.
    So 4 + 2 = 6 bytes per logit at the peak. Only runtimes with
    ``loss_grad_cast`` (the Megatron stacks); none under a fused loss kernel
    that writes its gradient in place (``fused_cross_entropy``: llm-foundry's
    flash-attn xentropy) or with 32-bit logits (nothing to cast). A plain
    PyTorch loss (``eager_cross_entropy``) has its own transient instead
    (:func:`eager_loss_bytes`).
    """
    rt = training.runtime
    if layer.kind is not LayerKind.lm_head or not rt.loss_grad_cast \
            or rt.fused_cross_entropy or rt.eager_cross_entropy \
            or DTYPE_BYTES.get(training.dtype, 4) >= 4:
        return 0.0
    return 2.0 * logits_per_device(layer, s, microbatch_samples, training.runtime.loss_parallel)


def working_set_bytes(layer: Layer, s: Strategy, microbatch_samples: int,
                      training: Training, tie_active: bool = False) -> float:
    """Transient bytes live on one device while ``layer`` is being computed
    under ``s``, on top of everything stored (weights, gradients, optimizer
    state, the in-flight micro-batches' activations). One layer is in flight
    per device at a time, so a stage's peak is its stored bytes plus the
    largest of its layers' working sets (not their sum).

    * Full recomputation: the backward of a checkpointed layer first re-runs
      its forward, so its full activations for one micro-batch (the
      no-recompute bytes under the same strategy) are live beside the stored
      checkpoints, less the checkpoint itself, which is counted already
      (Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost",
      Sec. 3: the peak is the checkpoints plus one segment's activations; Feng
      & Huang 2018, arXiv 1808.00079, Sec. 1: "the sum of the memory cost of
      the gradient checkpoints and the maximum memory cost of local forwards";
      Korthikanti et al. 2022, Sec. 4.1 and Eq. 1: 34·s·b·h + 5·a·s²·b per
      layer, the layer input 2·s·b·h among it). Selective recomputation
      re-materialises the attention core of one layer (the ``5·a·s²`` term,
      Korthikanti et al. 2022, Sec. 5), zero under fused (flash) attention,
      which never stores it (Dao et al. 2022). Both are
      ``activation_bytes(none) - activation_bytes(mode)``.
    * ZeRO-3/FSDP: the layer's parameters gathered unsharded (16-bit; fp32 under
      PyTorch AMP, :func:`~autopar_opt.ir.training.param_state_bytes`), plus
      those of the prefetched neighbour (priced as this layer, as
      :func:`zero3_comm` prices its gathers), and the unsharded gradient in
      the reduce dtype (4 bytes with ``fp32_grad_reduce``) before its
      reduce-scatter (Zhao et al. 2023, "PyTorch FSDP", Sec. 3.3 and 4:
      ``limit_all_gathers`` keeps at most two units' unsharded parameters in
      flight; PyTorch "FSDP Notes", Prefetch Nuances: with prefetching "the
      next all-gather's output tensor must be allocated while the current one
      is still in use"; FSDP2, pytorch PR #128884: two all-gather outputs
      alive at once; Rajbhandari et al. 2020, ZeRO, Sec. 7.2.2: parameters
      gathered per layer and released after use). Without prefetch one unit
      is in flight. The shards themselves are in :func:`weight_bytes`. A layer
      that does not reshard after its forward pass holds its own gather with
      the stored bytes (:func:`autopar_opt.cost.layer_cost.unsharded_held_bytes`):
      here only the prefetched neighbour and the unsharded gradient, or, under
      pipelining, nothing (all of it is held for the iteration).

    * The output layer's cross-entropy: the 16-bit copy of the fp32 logits'
      gradient of Megatron's loss (:func:`loss_grad_cast_bytes`), or the two
      gradients of a plain PyTorch loss beside its log-probabilities
      (:func:`eager_loss_bytes`).
    * ZeRO-3/FSDP under PyTorch AMP with full recomputation: the recomputed
      forward casts the layer's gathered fp32 weights to 16 bits again and
      autograd keeps those casts until the layer's backward, 2 B per local
      parameter autocast casts (:func:`~autopar_opt.cost.state.autocast_cast_params`:
      none for a lookup embedding, the tied matrix on a tied output layer;
      what :func:`~autopar_opt.cost.state.autocast_saved_cast_bytes`
      stores per micro-batch without recomputation). Limitation: under FSDP2
      the casts of the first forward are also cached (leaf parameters) until
      the autocast region exits, so the end of each forward holds the whole
      stage's casts; that peak is not modelled (FSDP1's flat-parameter views
      are not cached, ``cached_cast`` in ``aten/src/ATen/autocast_mode.cpp``).

    The parts add when a layer has several: its parameters and gradient are
    unsharded during the backward that runs on the recomputed activations,
    and the loss gradient is cast in that backward. Any other layer has no
    transient term here (0).

    Limitation: DeepSpeed ZeRO-3 is modelled like FSDP (two gathered units and
    one layer's unsharded gradient). DeepSpeed instead holds gradients up to
    ``reduce_bucket_size`` (default 5e8 elements) before reducing them and
    bounds gathered parameters by ``stage3_prefetch_bucket_size`` /
    ``stage3_max_live_parameters`` (DeepSpeed ``runtime/zero/stage3.py``,
    ``DeepSpeedZeroOptimizer_Stage3``; ZeRO config docs); those buckets are not
    modelled, so its working set can be under-estimated.

    ``layer`` is the layer as declared; ``tie_active`` (``pp > 1``) gives a
    tied output layer its own copy of the tied matrix to gather
    (:func:`~autopar_opt.cost.state.held_layer`).
    """
    declared, layer = layer, held_layer(layer, tie_active)
    out = 0.0
    if s.recompute is not Recompute.none:
        full = activation_bytes(layer, s, microbatch_samples, Recompute.none, training)
        kept = activation_bytes(layer, s, microbatch_samples, s.recompute, training)
        out += max(0.0, full - kept)
    if s.zero >= 3 and s.dp * s.cp > 1 and layer.params > 0:
        w_bytes, g_bytes = zero3_bytes(training)    # the bytes zero3_comm moves
        dense, expert = moe.split_params(layer, s)   # MoE: experts sharded over edp only
        gathered = dense + (expert if s.shard_group(s.edp) > 1 else 0.0)
        units = 2 if training.runtime.fsdp_prefetch else 1
        if training.runtime.reshards_after_forward(tie_active):
            out += gathered * (units * w_bytes + g_bytes)
        elif not tie_active:      # its own gather is held per micro-batch (layer_cost)
            out += gathered * ((units - 1) * w_bytes + g_bytes)
        # under pipelining without resharding everything is held for the iteration
    if training.autocast and s.zero >= 3 and s.recompute is Recompute.full:
        out += AUTOCAST_CACHE_BYTES * autocast_cast_params(declared, s)
    return out + loss_grad_cast_bytes(layer, s, microbatch_samples, training) \
        + eager_loss_bytes(layer, s, microbatch_samples, training)
