"""Compute time of one layer under one strategy, for one micro-batch on one device.

GEMMs at a size-dependent efficiency (:func:`kernel_time`, one launch per kernel,
:data:`GEMM_KERNELS`), the attention core at its kernel's measured efficiency
(:func:`attention_lookup`, :mod:`autopar_opt.cost.attention`), element-wise
and memory-bound layers as HBM traffic, recomputation, and the low-precision
gradient accumulation pass of runtimes that keep one
(:func:`grad_accumulate_time`) and PyTorch AMP's per-micro-batch weight casts
(:func:`autocast_weight_time`). Returns a :class:`~autopar_opt.cost.context.Compute`
split into the windows :mod:`autopar_opt.cost.comm` hides communication behind."""

from __future__ import annotations

from dataclasses import replace

from autopar_opt.cost import attention, comm, fp8_casts, moe
from autopar_opt.cost.context import Compute, StageContext
from autopar_opt.cost.memory import activation_bytes, eager_logp_bytes, kept_logit_bytes, logits_per_device
from autopar_opt.cost.state import FP8_KINDS, autocast_cast_params, hp_grad_accumulate_bytes
from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.runtime import Runtime
from autopar_opt.ir.strategies import Strategy, effective_recompute
from autopar_opt.ir.training import DTYPE_BYTES, Recompute, Training
from autopar_opt.ir.window import window_share


#: Head dimension and length taken when a layer or the training does not state
#: them (said in the plan's assumptions).
DEFAULT_HEAD_DIM, DEFAULT_SEQ = 128, 2048


def kernel_time(flops: float, peak: float, eff_max: float, half_us: float) -> float:
    """Time of ``flops`` FLOPs of one kind on one device.

    ``t = f / (peak · eff(τ))`` with ``eff(τ) = eff_max · τ / (τ + τ_half)``
    and ``τ = f / peak`` (time at peak): large GEMMs reach ``eff_max``, small
    ones are latency bound (roofline saturation; Williams et al. 2009; the
    GEMM-size dependence of achieved TFLOP/s in Narayanan et al. 2021 Fig. 13;
    measured on H100 in ``benchmarks/kernels``). Never faster than ``peak``.
    """
    if flops <= 0:
        return 0.0
    tau = flops / peak
    half = half_us * 1e-6
    return tau / (eff_max * tau / (tau + half))


#: GEMM kernels of one forward pass of a layer, by kind (the backward runs two
#: per forward GEMM: the input gradient and the weight gradient, Narayanan et
#: al. 2021 Sec. 5.1). A transformer block: the fused QKV projection, the
#: output projection, the MLP's up (SwiGLU's gate and up fused, as Megatron's
#: ``linear_fc1``) and down projections (Shoeybi et al. 2019 Sec. 3); an MoE
#: block the same with its local experts' up and down as grouped GEMMs
#: (Megatron-Core ``--moe-grouped-gemm``; where those launch one GEMM per expert,
#: :func:`per_expert_kernels` adds the rest); a split attention or MLP layer two.
#: Other GEMM kinds (output layer, linear, convolution) one; memory-bound kinds
#: (:data:`MEMORY_BOUND_KINDS`) none. Builders override it per layer
#: (``Layer.gemm_kernels``): cross-attention, MLA, router and shared experts.
#: Stacks that run Q, K, V (and SwiGLU's gate and up) as separate GEMMs (Hugging
#: Face Llama, torchtitan: runtime ``fused_projections`` off) launch the
#: builder's ``Layer.gemm_kernels_unfused`` instead (7 for a Llama block).
GEMM_KERNELS: dict[LayerKind, int] = {LayerKind.transformer_block: 4, LayerKind.moe_block: 4,
                                      LayerKind.attention: 2, LayerKind.mlp: 2,
                                      LayerKind.pool: 0, LayerKind.norm: 0}


#: Layer kinds that run no GEMM: pooling and normalisation kernels are
#: memory bound (a few operations per byte, far below the ridge point of any
#: GPU: roofline, Williams et al. 2009), priced as HBM traffic
#: (:func:`memory_bound_bytes`), never at a GEMM peak and never with the
#: per-GEMM-kernel latency.
MEMORY_BOUND_KINDS = frozenset({LayerKind.pool, LayerKind.norm})


def gemm_kernels(layer: Layer, runtime: Runtime | None = None) -> int:
    """GEMM kernels of the layer's forward pass: the layer's own count where its
    builder set one (``Layer.gemm_kernels``), else its kind's (:data:`GEMM_KERNELS`).
    On a runtime without fused projections (``runtime.fused_projections`` off:
    separate Q, K, V and gate, up GEMMs, :mod:`autopar_opt.ir.runtime`) the
    builder's ``Layer.gemm_kernels_unfused`` where it set one."""
    if runtime is not None and not runtime.fused_projections \
            and layer.gemm_kernels_unfused is not None:
        return layer.gemm_kernels_unfused
    if layer.gemm_kernels is not None:
        return layer.gemm_kernels
    return GEMM_KERNELS.get(layer.kind, 1)


def per_expert_kernels(layer: Layer, s: Strategy, runtime: Runtime) -> int:
    """GEMM kernels a forward pass adds when an MoE layer launches one GEMM per
    local expert for its up and its down projection instead of two grouped
    kernels: experts run one after the other (runtime ``moe_grouped_gemm`` off:
    Megatron-Core ``SequentialMLP``) or through Transformer Engine's multi-stream
    grouped GEMM (``moe_expert_kernels`` ``per_expert``: one cuBLAS GEMM per
    expert, :mod:`autopar_opt.ir.runtime`): ``2·(E/ep - 1)`` for ``E/ep`` local
    experts; 0 for one-kernel grouped GEMMs and dense layers. Each pays the
    per-kernel latency (:func:`kernel_time`); the concurrency of TE's 4 streams
    is not credited."""
    if layer.kind is not LayerKind.moe_block or layer.num_experts <= 0 \
            or (runtime.moe_grouped_gemm and runtime.moe_expert_kernels == "grouped"):
        return 0
    local = max(layer.num_experts // max(s.ep, 1), 1)
    return 2 * (local - 1)


def memory_bound_bytes(layer: Layer) -> tuple[float, float]:
    """(forward, backward) HBM bytes per sample of a memory-bound layer
    (:data:`MEMORY_BOUND_KINDS`), from its input and output sizes ``x``, ``y``.

    * Pooling: the forward reads the input once and writes the output once
      (PyTorch ``max_pool2d``/``avg_pool2d`` CUDA kernels, one thread per
      output element over its window: ``aten/src/ATen/native/cuda/
      DilatedMaxPool2d.cu`` ``max_pool_forward_nchw``, ``AveragePool2d.cu``;
      taken as one HBM read of the input: the overlap of neighbouring windows
      is assumed served from cache); the backward reads the
      output gradient and writes the input gradient (max-pool scatters each
      output gradient to its arg-max input, average pool spreads it over the
      window): ``x + y`` each way. A max pool also writes its int64 arg-max
      index per output element forward (``max_pool_forward_nchw``'s
      ``top_mask``) and reads it backward to route each output gradient:
      ``Layer.pool_index_bytes`` each way (4x the 16-bit output: a 3x3
      stride-2 max pool moves ``x + y + 8/2·y ≈ 9·y`` bytes a pass against
      ``5·y`` without it).
    * Normalisation (LayerNorm/RMSNorm/BatchNorm as its own layer): forward
      reads ``x`` and writes ``y``; backward reads the output gradient and the
      saved input and writes the input gradient (PyTorch
      ``native_layer_norm_backward`` takes ``grad_out, input, mean, rstd``,
      ``tools/autograd/derivatives.yaml``): ``x + y`` and ``2·x + y``; the
      per-row statistics and the weights are negligible.

    A layer that states neither size falls back on its stored activation
    bytes for both.
    """
    x = layer.input_bytes or layer.act_bytes
    y = layer.output_bytes or layer.act_bytes
    if layer.kind is LayerKind.norm:
        return x + y, 2.0 * x + y
    idx = layer.pool_index_bytes
    return x + y + idx, y + x + idx


def _gemm_time(flops: float, layer: Layer, ctx: StageContext, kernels: int = 1) -> float:
    """GEMM FLOPs at the training dtype's peak (FP8 for FP8 kinds, else 16-bit),
    run as ``kernels`` GEMM kernels. Each kernel's efficiency saturates with its
    own work (:func:`kernel_time`), and ``t = (τ_i + τ_half) / eff_max`` is
    linear in ``τ_i``, so ``kernels`` kernels of any sizes summing to ``flops``
    take ``(τ + kernels·τ_half) / eff_max``: ``τ_half`` is a per-kernel figure,
    as measured (one GEMM at a time, ``benchmarks/kernels``)."""
    p = ctx.params
    dev = ctx.cluster.device.name
    half = p.efficiency_half_us * kernels
    if ctx.training.dtype == "fp8" and layer.kind in FP8_KINDS:
        return kernel_time(flops, ctx.peak_flops, p.efficiency_for(dev, fp8=True), half)
    return kernel_time(flops, ctx.half_peak_flops, p.efficiency_for(dev), half)


def attention_lookup(layer: Layer, s: Strategy, ctx: StageContext) -> attention.Lookup | None:
    """The measured efficiency of the fused attention kernel the runtime runs
    for ``layer`` under ``s`` (:mod:`autopar_opt.cost.attention`), None for
    unfused attention. The kernel call's query length is the sequence a rank
    holds, ``seq_len/cp`` (a context-parallel ring step processes one chunk
    pair of that size; the all-gather variant the local queries against the
    whole sequence: taken at the same length, stated in
    :mod:`autopar_opt.cost.overlap`); under Ulysses (``cp_comm_type`` ``a2a``)
    each rank runs the whole sequence on ``heads/cp`` heads."""
    rt, dev = ctx.training.runtime, ctx.cluster.device
    arch = dev.arch or attention.UNKNOWN_ARCH
    kernel = attention.runtime_kernel(rt, arch)
    if kernel is None:
        return None
    seq = (ctx.training.seq_len or DEFAULT_SEQ) / (1 if rt.cp_splits_heads else max(s.cp, 1))
    causal = True if layer.attn_causal is None else layer.attn_causal
    head_dim = layer.head_dim or DEFAULT_HEAD_DIM
    look = attention.lookup(kernel, arch, causal, head_dim, window_length(layer, seq))
    fill = attention.fill_factor(call_batch_heads(layer, s, ctx), seq, head_dim, look.kernel, causal)
    return replace(look, fwd=look.fwd * fill, bwd=look.bwd * fill) if fill < 1.0 else look


def window_length(layer: Layer, seq: float) -> float:
    """The causal call length whose measured efficiency a sliding-window call of
    ``seq`` query tokens takes: ``min(seq, w)`` for a window of ``w`` keys, else
    ``seq``. A fused kernel loops over query blocks and, inside, over the key blocks
    each sees (Dao 2023, FlashAttention-2, Algorithm 1): a window's query block sees
    ``w`` keys with two partly masked blocks (the window's start and the diagonal), a
    causal call of length ``L`` ``L/2`` keys on average with one. The work per block
    matches at ``L = 2w``, the masked blocks' share at ``L = w``; the one published
    windowed measurement, Mistral 7B's "2x speed improvement" at 16k tokens with
    W = 4096 in FlashAttention and xFormers (Jiang et al. 2023, arXiv 2310.06825,
    Sec. 2), sits nearer ``w``: the model gives 2.09x on A100 at ``w``, 2.20x at
    ``2w`` (tests/unit/cost/test_sliding_window.py). An assumption either way, stated
    with the plan: ``data/attention_kernels.yaml`` has no windowed rows."""
    if 0 < layer.attn_window < seq:
        return min(seq, float(layer.attn_window))
    return seq


def call_batch_heads(layer: Layer, s: Strategy, ctx: StageContext) -> float:
    """Batch x heads of one attention call on one device: the layer's query heads
    (``Layer.attn_heads``; where not stated, recovered from its attention-core FLOPs
    per sample counted whole, ``4·heads·s²·d`` for multi-head attention: an MLA
    core, ``2·s²·heads·(d_qk + d_v)``, states its heads, as that recovery would
    find ``(d_qk + d_v) / (2·d_qk)`` of them); a device runs
    ``microbatch_samples/dp`` samples of ``heads/tp`` heads (a context-parallel step
    the same heads over a chunk of the sequence; Ulysses, ``cp_comm_type`` ``a2a``,
    ``heads/(tp·cp)`` heads over the whole sequence)."""
    seq = ctx.training.seq_len or DEFAULT_SEQ
    heads = float(layer.attn_heads)
    if heads <= 0:
        head_dim = layer.head_dim or DEFAULT_HEAD_DIM
        whole = layer.flops_recompute_selective * (2.0 if layer.attn_flops_halved else 1.0)
        heads = whole / (4.0 * seq * seq * head_dim * window_share(seq, layer.attn_window))
    split = max(s.tp, 1) * (max(s.cp, 1) if ctx.training.runtime.cp_splits_heads else 1)
    return ctx.microbatch_samples / max(s.dp, 1) * heads / split


def executed_core(layer: Layer) -> float:
    """Share of the counted attention-core FLOPs a fused kernel executes: 1/2
    for a causal core counted whole (fused kernels skip the masked blocks; the
    FlashAttention benchmarks count causal FLOPs at half, ``flops()`` in
    ``benchmarks/benchmark_flash_attention.py``), else 1."""
    causal = True if layer.attn_causal is None else layer.attn_causal
    return 0.5 if causal and not layer.attn_flops_halved else 1.0


def uncomputed_attention_share(layers) -> float:
    """Share of the model FLOPs of ``layers`` that causal attention does not compute.

    Model FLOPs (MFU's numerator) count each attention core as its whole score matrix,
    ``12·l·h·s²`` per sequence, as PaLM (Chowdhery et al. 2022, App. B), Megatron-LM
    (Narayanan et al. 2021, Sec. 5.1) and torchtitan count them; with a causal mask only
    the lower triangle is needed (fused kernels skip the masked blocks:
    :func:`executed_core`), so at long context that count exceeds the work by up to half
    the attention's share. Forward core FLOPs ``flops_recompute_selective``, backward
    twice the forward (the model count's rule); 0 without causal cores."""
    total = skipped = 0.0
    for layer in layers:
        total += layer.flops_fwd + layer.flops_bwd
        skipped += 3.0 * layer.flops_recompute_selective * (1.0 - executed_core(layer))
    return skipped / total if total > 0 else 0.0


def causal_mfu(mfu: float, layers) -> float:
    """``mfu`` counting each causal attention core at the half its kernel computes
    (:func:`uncomputed_attention_share`): a plan's and a fleet's ``mfu_causal``."""
    return mfu * (1.0 - uncomputed_attention_share(layers))


def _unfused_attn_time(flops: float, ctx: StageContext) -> float:
    """Unfused attention core: two batched GEMMs at the GEMM efficiency (one
    kernel's ``τ_half`` per pass: the batched GEMMs are large, their count is
    not resolved); its softmax/mask/dropout traffic over the stored
    ``5·a·s²`` scores is priced with the other element-wise kernels
    (:func:`_elementwise_time`). ``flops``: what the GEMMs compute, the whole
    score matrix (:func:`unfused_core`)."""
    p = ctx.params
    return kernel_time(flops, ctx.half_peak_flops, p.efficiency_for(ctx.cluster.device.name),
                       p.efficiency_half_us)


def unfused_core(layer: Layer, counted: float, ctx: StageContext) -> float:
    """FLOPs an unfused attention core computes for ``counted`` core FLOPs of
    ``layer``: a sliding window's mask only zeroes scores of the whole matrix the
    batched GEMMs compute (Transformer Engine's unfused backend turns the window
    into an ``arbitrary`` mask), so the count is divided by the window's share
    (:func:`~autopar_opt.ir.window.window_share`); the count itself otherwise."""
    return counted / window_share(ctx.training.seq_len or DEFAULT_SEQ, layer.attn_window)


def _elementwise_time(layer: Layer, s: Strategy, ctx: StageContext) -> float:
    """Memory-bound element-wise kernels (norms, activation functions,
    dropout, residual adds, unfused softmax) of forward + backward: each
    stored activation byte is written, re-read and its gradient written
    (``elementwise_passes`` passes) at HBM bandwidth (roofline, Williams et
    al. 2009; the element-wise share of a transformer layer: Korthikanti et
    al. 2022, Sec. 4.1 counts the stored tensors). The output layer's loss,
    where its kernels' traffic is derived (:func:`loss_traffic_bytes`: a
    fused or a plain PyTorch loss), is priced at that traffic per logit
    instead of the passes over the logits it keeps: what it keeps says
    nothing of what it moves (a 16-bit eager loss keeps as few bytes as the
    fused kernel but moves twice as many)."""
    nbytes = activation_bytes(layer, s, ctx.microbatch_samples, Recompute.none, ctx.training,
                              fp8_casts=False)
    passes = ctx.params.elementwise_passes
    bw = ctx.cluster.device.hbm_gb_per_s * 1e9
    loss = loss_traffic_bytes(ctx.training) if layer.kind is LayerKind.lm_head else None
    if loss is None:
        return passes * nbytes / bw
    logits = logits_per_device(layer, s, ctx.microbatch_samples,
                               ctx.training.runtime.loss_parallel)
    kept = kept_logit_bytes(ctx.training) * logits
    return (passes * (nbytes - kept) + loss * logits) / bw


def recomputed_score_time(layer: Layer, s: Strategy, ctx: StageContext) -> float:
    """Seconds of the element-wise kernels that selective recomputation re-runs over
    an unfused attention core's scores, in the backward pass of one micro-batch.

    Korthikanti et al. 2022, Sec. 5: selective recomputation re-runs "the QKᵀ matrix
    multiply, softmax, softmax dropout, and attention over V". The two batched GEMMs
    are priced with the attention core (``core_re`` in :func:`compute_time`); the
    softmax and dropout, memory-bound kernels over the ``5·a·s²`` score activations
    the strategy drops, are priced here as :func:`_elementwise_time` prices them in
    the forward pass: one of its ``elementwise_passes`` three (write, re-read,
    gradient) over those bytes on this device (:func:`activation_bytes` without
    recomputation less with it), at HBM bandwidth. 0 under a fused (flash) kernel,
    which keeps no scores: its recomputation is the kernel, priced with the core."""
    mb, tr = ctx.microbatch_samples, ctx.training
    dropped = activation_bytes(layer, s, mb, Recompute.none, tr, fp8_casts=False) \
        - activation_bytes(layer, s, mb, Recompute.selective, tr, fp8_casts=False)
    return ctx.params.elementwise_passes / 3.0 * max(dropped, 0.0) \
        / (ctx.cluster.device.hbm_gb_per_s * 1e9)


def loss_traffic_bytes(training: Training) -> float | None:
    """HBM bytes per logit the loss moves in forward + backward, where derived
    from its kernels; None for Megatron's vocabulary-parallel loss (a chain of
    fp32 element-wise kernels, priced like every stored activation as
    ``elementwise_passes`` passes over the 4-byte softmax it keeps).

    * Fused (``fused_cross_entropy``: flash-attn's cross-entropy kernel, as
      llm-foundry's ``fused_crossentropy``, ``flash_attn/ops/triton/
      cross_entropy.py``): the forward reads the 16-bit logits once (one
      log-sum-exp per row written), the backward reads them and writes the
      gradient in place: ``2 + 2 + 2 = 6``.
    * Plain PyTorch (``eager_cross_entropy``; ``F.cross_entropy`` =
      ``log_softmax`` + ``nll_loss``, ``aten/src/ATen/native/LossNLL.cpp``
      ``cross_entropy_loss``), in the dtype ``e`` it computes in
      (:func:`eager_logp_bytes`): ``log_softmax`` reads its input and writes
      the log-probabilities (``2·e``); the backward's ``nll_loss_backward``
      writes a zero-filled gradient of their shape (``Loss.cu``,
      ``nll_loss_backward_out_cuda``: ``grad_input.zero_()``) and
      ``_log_softmax_backward_data`` reads it and the saved result and writes
      the input gradient (``tools/autograd/derivatives.yaml``,
      ``_log_softmax``): ``4·e``. A loss in fp32 on 16-bit logits adds the
      cast (``.float()`` or autocast: read 2, write 4) and its backward
      (``_to_copy_backward``: read 4, write 2): 12. So ``6·e`` (12 in 16
      bits), plus 12 when it upcasts (36: torchtitan).

    The transient tensors the backward allocates (:func:`eager_loss_bytes`)
    are among these bytes. Not counted: the shifted-label copy a Hugging Face
    model makes (``shift_logits ... .contiguous()``), as in
    :func:`eager_loss_bytes`.
    """
    rt = training.runtime
    if rt.fused_cross_entropy:
        return 6.0
    if not rt.eager_cross_entropy:
        return None
    e = eager_logp_bytes(training)
    logit = 4.0 if DTYPE_BYTES.get(training.dtype, 4) >= 4 else 2.0   # FP8: 16-bit output layer
    return 6.0 * e + (12.0 if e > logit else 0.0)


def tp_divisor(layer: Layer, s: Strategy) -> float:
    """The factor tensor parallelism divides a memory-bound layer's per-rank
    traffic by: the decomposition :func:`activation_bytes` applies to its
    stored bytes, ``1 / (r / t_r + (1 - r) / tp)`` with ``r`` the replicated
    share ``act_replicated_bytes / act_bytes`` and ``t_r = tp`` under sequence
    parallelism, else 1 (Korthikanti et al. 2022, Eq. 2 and 4). A layer that
    stores nothing (``act_bytes`` 0) is taken as replicated."""
    if s.tp <= 1:
        return 1.0
    r = min(layer.act_replicated_bytes, layer.act_bytes) / layer.act_bytes \
        if layer.act_bytes > 0 else 1.0
    return 1.0 / (r / (s.tp if s.sp else 1) + (1.0 - r) / s.tp)


def _memory_bound_compute(layer: Layer, s: Strategy, ctx: StageContext) -> Compute:
    """Compute of a memory-bound layer (:data:`MEMORY_BOUND_KINDS`): its HBM
    traffic (:func:`memory_bound_bytes`) at the device's HBM bandwidth, like
    the element-wise kernels of :func:`_elementwise_time` (roofline, Williams
    et al. 2009), with no GEMM kernel and no per-kernel latency. Under tensor
    parallelism the traffic splits as the layer's stored activations do in
    :func:`activation_bytes` (:func:`tp_divisor`): the replicated part
    (``act_replicated_bytes``, e.g. a LayerNorm on the full hidden state,
    Korthikanti et al. 2022, Eq. 2) stays whole unless sequence parallelism
    splits its tokens (Sec. 4.2.2), the rest is split by ``tp``; full
    recomputation re-runs its forward traffic in the backward pass. Its
    operations stay in the model FLOPs (``flops``), as before."""
    share = ctx.microbatch_samples / (s.dp * s.cp)
    per = share / tp_divisor(layer, s)
    bw = ctx.cluster.device.hbm_gb_per_s * 1e9
    fb, bb = memory_bound_bytes(layer)
    fwd, bwd = fb * per / bw, bb * per / bw
    redo = fwd if s.recompute is Recompute.full else 0.0
    launch = ctx.params.layer_overhead_us * 1e-6
    model = (layer.flops_fwd + layer.flops_bwd) * share / s.tp
    f_re = layer.flops_fwd * share / s.tp if s.recompute is Recompute.full else 0.0
    return Compute(fwd + launch / 3.0, bwd + redo + 2.0 * launch / 3.0, 0.0, 0.0,
                   model, model + f_re)


def compute_time(layer: Layer, s: Strategy, ctx: StageContext) -> Compute:
    """Forward and backward compute of one micro-batch on one device.

    GEMMs (``2·m·n·k`` FLOPs; backward = 2x forward, Narayanan et al. 2021
    Sec. 5.1) at the dtype's peak, as :func:`gemm_kernels` kernels per forward
    (twice as many backward); the attention core at its own efficiency;
    element-wise traffic at HBM bandwidth; in FP8 training the casts and
    transposes of the GEMMs' inputs and output gradients
    (:mod:`autopar_opt.cost.fp8_casts`), re-run with the GEMMs a
    recomputation re-runs; a fixed launch overhead per layer.
    Memory-bound layers (pooling, norms) are HBM traffic only
    (:func:`_memory_bound_compute`). Recomputation re-runs (part of) the
    forward inside the backward pass: all of it (full), the attention core
    with an unfused core's softmax and dropout (selective,
    :func:`recomputed_score_time`), or, op-level (:attr:`Recompute.op`, torchtitan), the
    GEMMs whose outputs the save list drops (``flops_recompute_op``: every
    second of the forward's GEMM kernels) with all element-wise kernels, the
    attention kernel's output being kept.
    """
    share = ctx.microbatch_samples / (s.dp * s.cp)   # samples (x sequence share) per device
    measured = layer.measured_for(s.tp) if layer.measured else None
    if measured is not None:
        fwd = measured.fwd_ms_per_sample * 1e-3 * share
        bwd = measured.bwd_ms_per_sample * 1e-3 * share
        extra = fwd if s.recompute is Recompute.full else 0.0
        flops = (layer.flops_fwd + layer.flops_bwd) * share / s.tp
        return Compute(fwd, bwd + extra, fwd + bwd + extra, 0.0, flops, flops)
    if layer.kind in MEMORY_BOUND_KINDS:
        return _memory_bound_compute(layer, s, ctx)
    per_dev = share / s.tp
    fwd, bwd = moe.busiest_flops(layer)      # = flops_fwd/bwd for dense layers
    f_fwd = fwd * per_dev
    f_bwd = bwd * per_dev
    core = min(layer.flops_recompute_selective * per_dev, f_fwd)   # attention core, forward
    rc = effective_recompute(layer, s.recompute)
    if s.recompute is Recompute.full:
        f_re, core_re = f_fwd, core
    elif s.recompute is Recompute.selective:
        f_re, core_re = core, core
    elif rc is Recompute.op:
        f_re, core_re = min(layer.flops_recompute_op * per_dev, f_fwd - core), 0.0
    else:
        f_re, core_re = 0.0, 0.0
    k = gemm_kernels(layer, ctx.training.runtime) + per_expert_kernels(layer, s, ctx.training.runtime)
    k_re = max(k // 2, 1) if rc is Recompute.op else k    # every second GEMM
    g_fwd = _gemm_time(f_fwd - core, layer, ctx, k)
    g_bwd = _gemm_time(f_bwd - 2 * core, layer, ctx, 2 * k) + _gemm_time(f_re - core_re, layer, ctx, k_re)
    look = attention_lookup(layer, s, ctx) if core > 0 else None
    if look is None:
        u, u_re = unfused_core(layer, core, ctx), unfused_core(layer, core_re, ctx)
        a_fwd = _unfused_attn_time(u, ctx)
        a_bwd = _unfused_attn_time(2 * u, ctx) + _unfused_attn_time(u_re, ctx)
    else:
        peak, run = ctx.half_peak_flops, executed_core(layer)
        a_fwd = run * core / (peak * look.fwd)
        a_bwd = run * (2 * core / (peak * look.bwd) + core_re / (peak * look.fwd))
    elem = _elementwise_time(layer, s, ctx) if layer.flops_fwd > 0 or layer.act_bytes > 0 else 0.0
    elem_re = elem / 3.0 if rc in (Recompute.full, Recompute.op) \
        else recomputed_score_time(layer, s, ctx) if rc is Recompute.selective else 0.0
    c_fwd, c_bwd = fp8_casts.cast_time(layer, s, share, ctx.training, ctx.cluster.device.hbm_gb_per_s)
    c_re = c_fwd * (f_re - core_re) / (f_fwd - core) if f_fwd > core else 0.0   # re-run GEMMs' casts
    launch = ctx.params.layer_overhead_us * 1e-6
    fwd = g_fwd + a_fwd + elem / 3.0 + c_fwd + launch / 3.0
    bwd = g_bwd + a_bwd + 2.0 * elem / 3.0 + elem_re + c_bwd + c_re + 2.0 * launch / 3.0
    model = (layer.flops_fwd + layer.flops_bwd) * per_dev   # MoE: mean expert load
    return Compute(fwd, bwd, g_fwd + g_bwd, a_fwd + a_bwd, model, model + f_re,
                   gemm_fwd_s=g_fwd, attn_fwd_s=a_fwd)


def grad_accumulate_time(layer: Layer, s: Strategy, ctx: StageContext) -> float:
    """Per-micro-batch gradient accumulation outside the GEMMs, on the
    critical path: DeepSpeed's ``BF16_Optimizer.update_hp_grads`` adds every
    16-bit ``.grad`` into the fp32 accumulator after each micro-batch's
    backward pass, on the compute stream, before the next pipeline
    instruction (:func:`~autopar_opt.cost.state.hp_grad_accumulate_bytes`:
    18 bytes per local parameter, 0 on other runtimes). ``layer`` is the held
    layer (:func:`~autopar_opt.cost.state.held_layer`: a tied copy's gradient
    is accumulated like any other); its parameters per device after tensor
    and expert parallelism (:func:`autopar_opt.cost.moe.split_params`; the
    fp32 accumulator is whole-size, ``fp32_groups_gradients_flat``, so ZeRO-1
    does not divide it). HBM traffic at the device's datasheet bandwidth,
    as the element-wise kernels (:func:`_elementwise_time`; roofline,
    Williams et al. 2009): a lower bound on the kernels' time."""
    per_param = hp_grad_accumulate_bytes(ctx.training, s)
    if per_param <= 0 or layer.params <= 0:
        return 0.0
    local = sum(moe.split_params(layer, s))
    return per_param * local / (ctx.cluster.device.hbm_gb_per_s * 1e9)


def autocast_weight_time(declared: Layer, held: Layer, s: Strategy, ctx: StageContext) -> float:
    """Seconds per micro-batch of PyTorch AMP's weight casts and fp32 gradient
    accumulation (:func:`autocast_weight_bytes`) at the device's datasheet HBM
    bandwidth, as the element-wise kernels (roofline, Williams et al. 2009); 0
    without ``training.autocast``. On the critical path: the casts run on the
    compute stream before each GEMM, the accumulation as each gradient is produced."""
    if not ctx.training.autocast:
        return 0.0
    return autocast_weight_bytes(declared, held, s, ctx) / (ctx.cluster.device.hbm_gb_per_s * 1e9)


#: HBM bytes per parameter of PyTorch AMP's per-micro-batch weight traffic outside the
#: GEMMs (``torch.autocast`` over fp32 parameters): the forward's cast of an fp32 weight
#: to 16 bits (read 4, write 2: ``aten/src/ATen/autocast_mode.cpp`` ``cached_cast``,
#: ``arg.to(to_type)``), the backward's cast of its 16-bit gradient back to fp32
#: (``_to_copy_backward``: read 2, write 4), and autograd's ``AccumulateGrad`` adding a
#: micro-batch's fp32 gradient into the existing fp32 ``.grad`` (``variable.grad +=
#: new_grad``: read 4 + 4, write 4).
AUTOCAST_CAST_BYTES, AUTOCAST_GRAD_CAST_BYTES, FP32_ACCUMULATE_BYTES = 6.0, 6.0, 12.0


def autocast_weight_bytes(declared: Layer, held: Layer, s: Strategy, ctx: StageContext) -> float:
    """HBM bytes per micro-batch of PyTorch AMP's weight casts and fp32 gradient
    accumulation on one device (``training.autocast``; the bytes of
    :data:`AUTOCAST_CAST_BYTES` and its neighbours):

    * every parameter autocast casts (:func:`~autopar_opt.cost.state.autocast_cast_params`
      of the ``declared`` layer: the GEMM weights after tensor/expert parallelism,
      unsharded under ZeRO-3/FSDP, whose gathered weight is what autocast casts; an
      output layer tied to the input embedding casts the tied matrix whether it holds a
      copy or not; a lookup embedding or a norm casts nothing)
      is cast once per forward, the cache living only inside the autocast region
      (``clear_cache`` when the outermost region exits), so each micro-batch casts
      again, and a recomputed forward (full or op-level checkpointing, which re-enter
      autocast with the saved state: ``torch.utils.checkpoint``) once more; its
      16-bit gradient is cast back to fp32 in the backward;
    * every parameter the device holds (``held``: :func:`~autopar_opt.cost.state.held_layer`,
      a tied copy included) has its fp32 gradient added into ``.grad`` on all micro-batches
      but the first of an iteration (``zero_grad(set_to_none=True)``, the default
      since PyTorch 2.0, leaves no ``.grad``: the first gradient is stolen, not
      added): ``(c - 1)/c`` of :data:`FP32_ACCUMULATE_BYTES` per micro-batch on
      average, over the gradients a device keeps (divided by the shard group under
      ZeRO-2/3, which reduce-scatters each micro-batch's gradient and accumulates
      the shard, unless the runtime keeps the gradient unsharded across micro-batches:
      :func:`~autopar_opt.cost.comm.accumulates_unsharded`).

    Measured: on one H200 these bytes account for 7.1 of the 16.5 ms per
    micro-batch the model missed outside the GEMMs and attention before they were
    priced (``benchmarks/kernels/H200.md``, training step: fp32 parameters, bf16
    autocast, 4 micro-batches). Not counted: the lookup
    embedding's dense gradient (``embedding_dense_backward`` writes a zero-filled
    table-sized gradient on every runtime)."""
    cast = autocast_cast_params(declared, s)
    recasts = 2.0 if effective_recompute(declared, s.recompute) in (Recompute.full, Recompute.op) \
        else 1.0
    dense, expert = moe.split_params(held, s)
    if not comm.accumulates_unsharded(s, ctx):
        dense, expert = dense / s.zero_divisors(s.dp * s.cp)[1], expert / s.zero_divisors(s.edp)[1]
    grads = dense + expert
    c = ctx.microbatches
    return (cast * (recasts * AUTOCAST_CAST_BYTES + AUTOCAST_GRAD_CAST_BYTES)
            + grads * FP32_ACCUMULATE_BYTES * (c - 1) / c)
