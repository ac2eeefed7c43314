"""Per-layer, per-strategy costs: the pure heart of the cost model (v2).

Everything is for one device of a pipeline stage and one micro-batch of
``microbatch_samples`` samples (split over the layer's data-parallel degree),
except :attr:`LayerCost.sync_s`, which is paid once per iteration.

Overlap is physics, not a fraction: every communication is either exposed or
hidden behind a named compute window, ``exposed = max(0, comm - window)``
(:func:`exposed`). Which windows exist is the runtime's capability
(:mod:`autopar_opt.runtime`):

* data-parallel reduce-scatter/all-reduce: behind the backward pass of the
  last micro-batch (gradient buckets; one bucket per layer), only with
  ``grad_reduce_overlap``; the distributed optimizer's parameter all-gather
  behind the next forward with ``param_gather_overlap``;
* ZeRO-3/FSDP gathers: behind the neighbouring layer's compute (prefetch)
  with ``fsdp_prefetch``, else exposed;
* tensor-parallel collectives: exposed unless ``tp_comm_overlap`` (then
  behind the layer's GEMMs);
* context-parallel K/V exchange: behind the attention core (ring attention);
* pipeline sends: exposed (:mod:`autopar_opt.cost.reshard`).

Every window is the layer's own compute under its own strategy, so each term
is a number per (layer, strategy): the MILP/MIQP and the DPs read it from the
cost tables unchanged and ``evaluate(plan)`` equals their objective exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

from autopar_opt.cost import moe, offload
from autopar_opt.cost.comm import allgather_time, allreduce_time
from autopar_opt.cost.params import CostParams
from autopar_opt.cost.state import (  # noqa: F401 (re-exported: the state model's names)
    FP8_KINDS, FP8_WEIGHT_COPY_BYTES, autocast_cast_params, autocast_saved_cast_bytes, held_layer,
    hp_grad_accumulate_bytes, reduced_grad_bytes, state_bytes, weight_bytes)
from autopar_opt.graph import Layer, LayerKind
from autopar_opt.hardware import GIB, Cluster, LinkTier
from autopar_opt.runtime import Runtime
from autopar_opt.strategies import Strategy
from autopar_opt.training import (AUTOCAST_CACHE_BYTES, DTYPE_BYTES, Recompute, Training,
                                   param_state_bytes)

#: Devices with Hopper/Blackwell tensor-core instructions (wgmma/TMA, tcgen05).
HOPPER_OR_LATER = frozenset({"H100-SXM-80GB", "H200-141GB", "B200", "GB200"})
#: FlashAttention-2-class kernels on Hopper reach ~35% of peak where
#: Hopper-native ones (FlashAttention-3) reach up to 75% (Shah et al. 2024,
#: Sec. 1, 4.1): about half (see autopar_opt.runtime, ``hopper_attention``).
FA2_ON_HOPPER = 0.5
#: A FlashAttention-1-class kernel (FlashAttention-1 CUDA, or the pre-MLIR
#: Triton kernel ``flash_attn_triton``: "Overall Triton forward + backward is
#: slightly slower than CUDA forward + backward", flash-attention
#: ``flash_attn/flash_attn_triton.py`` docstring, not quantified) against a
#: FlashAttention-2-class one: FlashAttention-2 is "around 2x speedup compared
#: to FlashAttention" (Dao 2023, abstract; Sec. 4.1 "around 2x faster than
#: FlashAttention", forward + backward on A100, Fig. 4; Sec. 4 gives the range
#: 1.7-3.0x; Sec. 5 "2x faster than FlashAttention"): 1/2, the paper's own
#: headline figure (see autopar_opt.runtime, ``flash_v2_attention``).
FA1_VS_FA2 = 1 / 2


def exposed(comm: float, window: float) -> float:
    """Communication left on the critical path when it overlaps ``window``:
    ``max(0, comm - window)`` (the comm runs on its own stream/channels
    concurrently with the window's kernels)."""
    return max(0.0, comm - window)


@dataclass(frozen=True)
class StageContext:
    """Where a layer runs: a stage of ``devices`` ranks starting at ``first_rank``."""

    cluster: Cluster
    training: Training
    params: CostParams
    devices: int
    microbatch_samples: int
    first_rank: int = 0
    #: link between the first and the last pipeline stage when ``pp > 1``
    #: (tied parameters are copied and their gradients all-reduced over it);
    #: None with one stage (:func:`autopar_opt.pipeline.tie_tier`)
    tie_tier: LinkTier | None = None

    def tier(self, group_span: int) -> LinkTier:
        """Tier binding a group covering ``group_span`` consecutive ranks of the stage."""
        last = self.first_rank + max(group_span, 1) - 1
        return self.cluster.tier_for_span(self.first_rank, last)

    @property
    def stage_tier(self) -> LinkTier:
        return self.tier(self.devices)

    @property
    def peak_flops(self) -> float:
        return self.cluster.device.peak_flops(self.training.dtype)

    @property
    def half_peak_flops(self) -> float:
        """16-bit peak: what non-GEMM math (attention core, FP8 runs' output
        layer) runs at when the training dtype is FP8."""
        dev = self.cluster.device
        if self.training.dtype != "fp8":
            return self.peak_flops
        return dev.peak_flops("bf16" if "bf16" in dev.peak_tflops else "fp16")

    def link_efficiency(self, tier: LinkTier) -> float:
        """NCCL bus-bandwidth efficiency of ``tier`` (NVLink or network)."""
        intra = self.cluster.intra_node
        if tier is intra or tier.name == intra.name:
            return self.params.comm_efficiency
        return self.params.inter_comm_efficiency

    @property
    def capacity_bytes(self) -> float:
        """Bytes the model's tensors may use per device: HBM minus the
        user's reserve and the calibrated runtime reserve, divided by the
        allocator's fragmentation overhead (so that ``modelled·(1+f) +
        reserve <= HBM`` is a linear constraint on the modelled bytes)."""
        p = self.params
        free = self.cluster.device.hbm_gib - self.training.memory_reserve_gib - p.memory_reserve_gib
        return free * GIB / (1.0 + p.memory_fragmentation)


def user_reserve_for(capacity_gib: float, hbm_gib: float, params: CostParams) -> float:
    """The ``training.memory_reserve_gib`` that leaves ``capacity_gib`` of
    modelled bytes per device (inverse of :attr:`StageContext.capacity_bytes`)."""
    return hbm_gib - params.memory_reserve_gib - capacity_gib * (1.0 + params.memory_fragmentation)


@dataclass(frozen=True)
class LayerCost:
    """Cost of one layer under one strategy on one device.

    time_s : forward + backward (+ recomputation) time of one micro-batch,
        including the strategy's own exposed per-micro-batch communication.
    compute_s, comm_s : the two parts of ``time_s`` (``comm_s`` = exposed).
    sync_s : once-per-iteration time: exposed gradient reduction plus the
        optimizer step (``dp_exposed_s + optimizer_s``).
    weight_bytes : weights + gradients + optimizer state after sharding.
    act_bytes : activations kept for backward on the device, per in-flight
        micro-batch (the part CPU activation offload moves to the host
        excluded), with the 16-bit weight casts autograd keeps under ZeRO-3 and
        PyTorch AMP (:func:`~autopar_opt.cost.state.autocast_saved_cast_bytes`;
        kept whole on the device: ``training.activation_offload`` is a fraction
        of the layer's activations, not of its weights).
    flops, hw_flops : model / executed FLOPs of one micro-batch on this device.
    tp_exposed_s, cp_exposed_s, zero_exposed_s, ep_exposed_s, dp_exposed_s, optimizer_s,
    offload_exposed_s : the breakdown reports show (the last: CPU activation
        offload transfers not hidden behind compute,
        :func:`autopar_opt.cost.offload.transfer_time`).
    working_bytes : transient working set while this layer is being computed
        (:func:`working_set_bytes`): held once per stage, by the layer in
        flight, so a stage's peak adds the largest of its layers' values.
    """

    time_s: float
    compute_s: float
    comm_s: float
    sync_s: float
    weight_bytes: float
    act_bytes: float
    flops: float
    hw_flops: float
    tp_exposed_s: float = 0.0
    cp_exposed_s: float = 0.0
    zero_exposed_s: float = 0.0
    ep_exposed_s: float = 0.0
    dp_exposed_s: float = 0.0
    optimizer_s: float = 0.0
    offload_exposed_s: float = 0.0
    working_bytes: float = 0.0


@dataclass(frozen=True)
class Compute:
    """Compute of one micro-batch on one device, split into the windows
    communication can hide behind."""

    fwd_s: float
    bwd_s: float          # backward incl. recomputation (it runs in the backward pass)
    gemm_s: float         # GEMM part of fwd + bwd (the TP-overlap window)
    attn_s: float         # attention-core part (the CP window)
    flops: float
    hw_flops: float

    @property
    def total_s(self) -> float:
        return self.fwd_s + self.bwd_s


def group_tier(ctx: StageContext, group: int, stride: int) -> LinkTier:
    """Link tier seen by a ring collective over ``group`` ranks spaced ``stride`` apart.

    Inside a node: the intra-node tier. Across nodes, NCCL runs one ring per
    NIC ("channels", Jeaugey, NCCL 2.0, GTC 2017; rail-optimised DGX SuperPOD
    topology, NVIDIA DGX A100 SuperPOD reference architecture 2020), so ``k``
    group members per node drive ``k`` NICs in parallel and each inter-node
    hop carries ``1/k`` of the ring's data: the per-rank ring bandwidth is
    ``min(intra, k · inter)``, the figure nccl-tests report as bus bandwidth
    (hierarchical all-reduce: Jia et al. 2018, Sec. 3.3). One member per node
    (e.g. the data-parallel ring of a tp=8 model) sees the plain NIC.
    """
    tier = ctx.tier(group * stride)
    cl = ctx.cluster
    if tier is cl.intra_node or group <= 1:
        return tier
    per_node = min(group, max(1, cl.gpus_per_node // max(stride, 1)))
    if per_node <= 1:
        return tier
    bw = min(cl.intra_node.bandwidth_gb_per_s, per_node * tier.bandwidth_gb_per_s)
    return LinkTier(f"{tier.name}x{per_node}", bw, tier.latency_us)


def _ring(ctx: StageContext, group: int, stride: int) -> tuple[LinkTier, float]:
    tier = group_tier(ctx, group, stride)
    return tier, ctx.link_efficiency(tier)


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
#: (Megatron-Core ``--moe-grouped-gemm``); a split attention or MLP layer two.
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
    separate Q, K, V and gate, up GEMMs, :mod:`autopar_opt.runtime`) the
    builder's ``Layer.gemm_kernels_unfused`` where it set one."""
    if runtime is not None and not runtime.fused_projections \
            and layer.gemm_kernels_unfused is not None:
        return layer.gemm_kernels_unfused
    if layer.gemm_kernels is not None:
        return layer.gemm_kernels
    return GEMM_KERNELS.get(layer.kind, 1)


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


def _attn_time(flops: float, ctx: StageContext) -> float:
    """Attention core (scores, softmax, ·V) in 16-bit.

    Fused (flash) kernels run at ``attention_efficiency`` x the GEMM
    efficiency (FlashAttention-2 reaches 50-73% of A100 peak forward, less
    backward, Dao 2023 Sec. 4.1), times :data:`FA1_VS_FA2` for a
    FlashAttention-1-class kernel (runtime ``flash_v2_attention`` off; Dao
    2023: FlashAttention-2 is "around 2x" faster), times
    :data:`FA2_ON_HOPPER` for a kernel that is not Hopper-native on Hopper or
    later (~35% of H100 peak before FlashAttention-3, Shah et al. 2024; a
    FlashAttention-1-class kernel never is, whatever ``hopper_attention``
    says). The FlashAttention-1/2 ratio was measured on A100 and is applied
    on every device (no published H100 measurement of FlashAttention-1).
    Unfused attention is two batched GEMMs at the GEMM efficiency; its
    softmax/mask/dropout traffic over the stored ``5·a·s²`` scores is priced
    with the other element-wise kernels (:func:`_elementwise_time`).
    Priced as one kernel per pass (``τ_half``
    once): a fused kernel is one forward and one backward launch; the unfused
    core's batched GEMMs are large (``τ ≫ τ_half``), so their count is not
    resolved.
    """
    p, rt = ctx.params, ctx.training.runtime
    eff = p.efficiency_for(ctx.cluster.device.name)
    if rt.flash_attention:
        eff *= p.attention_efficiency
        if not rt.flash_v2_attention:
            eff *= FA1_VS_FA2
        hopper_native = rt.hopper_attention and rt.flash_v2_attention
        if not hopper_native and ctx.cluster.device.name in HOPPER_OR_LATER:
            eff *= FA2_ON_HOPPER
    return kernel_time(flops, ctx.half_peak_flops, eff, p.efficiency_half_us)


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
    logits = logits_per_device(layer, s, ctx.microbatch_samples)
    kept = kept_logit_bytes(ctx.training) * logits
    return (passes * (nbytes - kept) + loss * logits) / bw


def logits_per_device(layer: Layer, s: Strategy, microbatch_samples: int) -> float:
    """Logits of one micro-batch on one device of the output layer: its
    ``4·s·V`` fp32-logit bytes (``act_bytes - act_replicated_bytes``) over 4,
    vocabulary-parallel over ``tp``, with the micro-batch share of
    :func:`activation_bytes`."""
    return (layer.act_bytes - layer.act_replicated_bytes) / 4.0 / s.tp \
        * microbatch_samples / (s.dp * s.cp)


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


def _tp_divisor(layer: Layer, s: Strategy) -> float:
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
    :func:`activation_bytes` (:func:`_tp_divisor`): the replicated part
    (``act_replicated_bytes``, e.g. a LayerNorm on the full hidden state,
    Korthikanti et al. 2022, Eq. 2) stays whole unless sequence parallelism
    splits its tokens (Sec. 4.2.2), the rest is split by ``tp``; full
    recomputation re-runs its forward traffic in the backward pass. Its
    operations stay in the model FLOPs (``flops``), as before."""
    share = ctx.microbatch_samples / (s.dp * s.cp)
    per = share / _tp_divisor(layer, s)
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
    element-wise traffic at HBM bandwidth; a fixed launch overhead per layer.
    Memory-bound layers (pooling, norms) are HBM traffic only
    (:func:`_memory_bound_compute`). Recomputation re-runs (part of) the
    forward inside the backward pass.
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
    if s.recompute is Recompute.full:
        f_re, core_re = f_fwd, core
    elif s.recompute is Recompute.selective:
        f_re, core_re = core, core
    else:
        f_re, core_re = 0.0, 0.0
    k = gemm_kernels(layer, ctx.training.runtime)
    g_fwd = _gemm_time(f_fwd - core, layer, ctx, k)
    g_bwd = _gemm_time(f_bwd - 2 * core, layer, ctx, 2 * k) + _gemm_time(f_re - core_re, layer, ctx, k)
    a_fwd = _attn_time(core, ctx)
    a_bwd = _attn_time(2 * core, ctx) + _attn_time(core_re, ctx)
    elem = _elementwise_time(layer, s, ctx) if layer.flops_fwd > 0 or layer.act_bytes > 0 else 0.0
    elem_re = elem / 3.0 if s.recompute is Recompute.full else 0.0
    launch = ctx.params.layer_overhead_us * 1e-6
    fwd = g_fwd + a_fwd + elem / 3.0 + launch / 3.0
    bwd = g_bwd + a_bwd + 2.0 * elem / 3.0 + elem_re + 2.0 * launch / 3.0
    model = (layer.flops_fwd + layer.flops_bwd) * per_dev   # MoE: mean expert load
    return Compute(fwd, bwd, g_fwd + g_bwd, a_fwd + a_bwd, model, model + f_re)


def _tp_comm_time(layer: Layer, s: Strategy, ctx: StageContext) -> float:
    """Tensor-parallel collectives of one micro-batch (before overlap).

    Megatron: two all-reduces forward and two backward per block of
    ``2·b·s·h`` bytes (Shoeybi et al. 2019, Fig. 4); with sequence parallelism
    they become reduce-scatter + all-gather of the same total volume
    (Korthikanti et al. 2022, Sec. 4.2.2). Full recomputation repeats the
    forward ones.
    """
    if s.tp <= 1 or layer.tp_comm_bytes <= 0:
        return 0.0
    nbytes = layer.tp_comm_bytes * ctx.microbatch_samples / (s.dp * s.cp)
    passes = 3 if s.recompute is Recompute.full else 2
    tier, eff = _ring(ctx, s.tp, 1)
    return passes * allreduce_time(s.tp, nbytes, tier, eff)


def _cp_comm_time(layer: Layer, s: Strategy, ctx: StageContext) -> float:
    """Context parallelism: all-gather K/V forward, all-gather + reduce-scatter of
    their gradients backward (ring attention; Liu et al. 2023; Megatron CP)."""
    if s.cp <= 1 or layer.cp_comm_bytes <= 0:
        return 0.0
    nbytes = layer.cp_comm_bytes / s.tp * ctx.microbatch_samples / s.dp
    tier, eff = _ring(ctx, s.cp, s.tp)
    return 3 * allgather_time(s.cp, nbytes, tier, eff)


def zero3_bytes(training: Training) -> tuple[float, float]:
    """Bytes per parameter ZeRO-3/FSDP moves unsharded: (gathered weight, reduced
    gradient). The weight in its state dtype (16-bit; fp32 under PyTorch AMP,
    :func:`~autopar_opt.training.param_state_bytes`); the gradient in the same
    dtype, or 4 bytes with ``fp32_grad_reduce`` (FSDP ``reduce_dtype=float32``)."""
    w_bytes = param_state_bytes(training)[0]
    return w_bytes, (max(w_bytes, 4.0) if training.runtime.fp32_grad_reduce else w_bytes)


def _zero3_comm(layer: Layer, s: Strategy, ctx: StageContext, comp: Compute
                ) -> tuple[float, float]:
    """ZeRO-3/FSDP per micro-batch: all-gather parameters for forward and for
    backward, reduce-scatter gradients (Rajbhandari et al. 2020, Sec. 7.2.2:
    3x the parameter volume). The reduce-scatter moves the gradient dtype:
    the weight bytes, or 4 with ``fp32_grad_reduce`` (FSDP
    ``reduce_dtype=float32``), priced as a ring all-gather of that many
    bytes (a ring reduce-scatter moves the same volume, Thakur et al. 2005).
    With prefetch the forward gather hides behind the forward
    compute of the neighbouring layer and the backward gather +
    reduce-scatter behind its backward (Zhao et al. 2023, Sec. 3.3); the
    neighbour is priced as this layer (a stack of equal layers). Returns
    (all gather/scatter time, exposed part)."""
    if s.zero < 3 or s.dp <= 1 or layer.params <= 0:
        return 0.0, 0.0
    w_bytes, g_bytes = zero3_bytes(ctx.training)
    dense, expert = moe.split_params(layer, s)   # MoE: experts gather over edp only
    tier, eff = _ring(ctx, s.dp * s.cp, s.tp)
    etier, eeff = _ring(ctx, s.edp, s.tp * s.ep) if expert else (tier, eff)

    def ring(nbytes_per_param: float) -> float:
        t = allgather_time(s.dp * s.cp, dense * nbytes_per_param, tier, eff)
        return t + (allgather_time(s.edp, expert * nbytes_per_param, etier, eeff) if expert else 0.0)

    gather, rs = ring(w_bytes), ring(g_bytes)
    if not ctx.training.runtime.fsdp_prefetch:
        return 2 * gather + rs, 2 * gather + rs
    return 2 * gather + rs, exposed(gather, comp.fwd_s) + exposed(gather + rs, comp.bwd_s)


def _sync(layer: Layer, s: Strategy, ctx: StageContext, comp: Compute
          ) -> tuple[float, float, float]:
    """(exposed gradient reduction, its hidden part, optimizer step), once per iteration.

    Gradient reduction over the dp×cp group: a ring all-reduce, or with
    ZeRO-1/2 a reduce-scatter + all-gather of the same total volume (ZeRO-3
    reduced per micro-batch already). With ``grad_reduce_overlap`` the
    reduction of a layer's gradient bucket runs while the last micro-batch's
    backward continues: window = the layer's backward (one bucket per layer;
    PyTorch DDP, Li et al. 2020, Sec. 3.2.3; Megatron-Core
    ``--overlap-grad-reduce``); the all-gather of updated parameters hides
    behind the next forward with ``param_gather_overlap``. The step itself is
    HBM-bound: ``shard · bytes_per_param / HBM bandwidth``.
    """
    if layer.params <= 0:
        return 0.0, 0.0, 0.0
    p, rt = ctx.params, ctx.training.runtime
    w_bytes = state_bytes(ctx.training, s.zero)[0]
    g_bytes = reduced_grad_bytes(ctx.training, s.zero)
    dense, expert = moe.split_params(layer, s)   # MoE: expert grads reduce over edp
    comm = raw = shard = 0.0
    bwd_window = comp.bwd_s if rt.grad_reduce_overlap else 0.0
    fwd_window = comp.fwd_s if rt.param_gather_overlap else 0.0
    for local, group, stride in ((dense, s.dp * s.cp, s.tp), (expert, s.edp, s.tp * s.ep)):
        if local <= 0:
            continue
        if s.zero < 3 and group > 1:
            tier, eff = _ring(ctx, group, stride)
            if s.zero == 0:
                ar = allreduce_time(group, local * g_bytes, tier, eff)
                raw += ar
                comm += exposed(ar, bwd_window)
            else:
                rs = allgather_time(group, local * g_bytes, tier, eff)
                ag = allgather_time(group, local * w_bytes, tier, eff)
                raw += rs + ag
                comm += exposed(rs, bwd_window) + exposed(ag, fwd_window)
        shard += local / s.zero_divisors(group)[2]
    step = shard * p.optimizer_bytes_per_param / (ctx.cluster.device.hbm_gb_per_s * 1e9)
    if not rt.fused_optimizer:
        step *= p.unfused_optimizer_factor
    return comm, raw - comm, step


def activation_bytes(layer: Layer, s: Strategy, microbatch_samples: int,
                     recompute: Recompute | None = None, training: Training | None = None,
                     fp8_casts: bool = True) -> float:
    """Activations kept for backward on one device for one micro-batch.

    Korthikanti et al. 2022: Eq. 2 (tensor parallel: the replicated part stays
    whole), Eq. 4 (sequence parallel: everything split by t), Sec. 5 (selective
    recomputation drops the attention-core term), Sec. 4.1 (full
    recomputation keeps only the layer input, split by t under sequence
    parallelism). Context parallelism splits the sequence by ``cp``. A
    runtime with fused (flash) attention never stores the ``5·a·s²`` scores
    (Dao et al. 2022). In FP8 training the GEMM inputs kept for the weight
    gradients are their FP8 casts (Transformer Engine ``Linear`` and
    ``LayerNormLinear`` save the FP8 ``inputmat``/``ln_out``; Micikevicius et
    al. 2022, Sec. 4): half of ``act_gemm_input_bytes``. The output layer's
    ``4·s·V`` fp32 logits are :func:`kept_logit_bytes` per logit instead
    (16-bit under a fused cross-entropy kernel, runtime
    ``fused_cross_entropy``, or a 16-bit plain PyTorch loss). ``recompute`` overrides the
    strategy's mode; ``fp8_casts=False`` counts the 16-bit tensors the
    element-wise kernels read and write (the FP8 casts are extra copies for
    the GEMMs, not smaller element-wise traffic).
    """
    mode = s.recompute if recompute is None else recompute
    share = microbatch_samples / (s.dp * s.cp)
    measured = layer.measured_for(s.tp) if layer.measured else None
    if measured is not None and measured.act_bytes_per_sample is not None \
            and mode is Recompute.none:
        return measured.act_bytes_per_sample * share
    if mode is Recompute.full:
        per = layer.input_bytes / (s.tp if s.sp else 1)
        return per * share
    act = moe.busiest_act_bytes(layer)        # = act_bytes for dense layers
    flash = training is not None and training.runtime.flash_attention
    if mode is Recompute.selective or flash:
        act -= layer.act_attn_bytes
    repl = min(layer.act_replicated_bytes, act)
    split = act - repl
    if layer.kind is LayerKind.lm_head and training is not None:
        split *= kept_logit_bytes(training) / 4.0     # 4·s·V: fp32 unless the loss keeps less
    if fp8_casts and training is not None and training.dtype == "fp8" \
            and layer.kind in FP8_KINDS:
        # TE keeps FP8 GEMM inputs as their FP8 cast: 1 byte instead of 2.
        repl -= layer.act_gemm_input_replicated_bytes / 2
        split -= (layer.act_gemm_input_bytes - layer.act_gemm_input_replicated_bytes) / 2
    per = split / s.tp + repl / (s.tp if s.sp else 1)
    return per * share


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
    return 2.0 * eager_logp_bytes(training) * logits_per_device(layer, s, microbatch_samples)


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
    return 2.0 * logits_per_device(layer, s, microbatch_samples)


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
      PyTorch AMP, :func:`~autopar_opt.training.param_state_bytes`), plus
      those of the prefetched neighbour (priced as this layer, as
      :func:`_zero3_comm` prices its gathers), and the unsharded gradient in
      the reduce dtype (4 bytes with ``fp32_grad_reduce``) before its
      reduce-scatter (Zhao et al. 2023, "PyTorch FSDP", Sec. 3.3 and 4:
      ``limit_all_gathers`` keeps at most two units' unsharded parameters in
      flight; PyTorch "FSDP Notes", Prefetch Nuances: with prefetching "the
      next all-gather's output tensor must be allocated while the current one
      is still in use"; FSDP2, pytorch PR #128884: two all-gather outputs
      alive at once; Rajbhandari et al. 2020, ZeRO, Sec. 7.2.2: parameters
      gathered per layer and released after use). Without prefetch one unit
      is in flight. The shards themselves are in :func:`weight_bytes`.

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
        w_bytes, g_bytes = zero3_bytes(training)    # the bytes _zero3_comm moves
        dense, expert = moe.split_params(layer, s)   # MoE: experts sharded over edp only
        gathered = dense + (expert if s.edp > 1 else 0.0)
        units = 2 if training.runtime.fsdp_prefetch else 1
        out += gathered * (units * w_bytes + g_bytes)
    if training.autocast and s.zero >= 3 and s.recompute is Recompute.full:
        out += AUTOCAST_CACHE_BYTES * autocast_cast_params(declared, s)
    return out + loss_grad_cast_bytes(layer, s, microbatch_samples, training) \
        + eager_loss_bytes(layer, s, microbatch_samples, training)


def tie_sync_time(layer: Layer, s: Strategy, ctx: StageContext) -> float:
    """The tied-gradient all-reduce between the first and the last pipeline
    stage, once per iteration, exposed (0 without a tie or with one stage).

    After the backward pass and the data-parallel reduction, the two copies
    of the word-embedding gradient are all-reduced over a 2-rank group, one
    per tensor-parallel rank (Megatron-Core ``finalize_model_grads``:
    ``_allreduce_word_embedding_grads`` all-reduces ``main_grad`` over the
    embedding group of the first and last stage; DeepSpeed
    ``PipelineModule.allreduce_tied_weight_gradients``, called by
    ``PipelineEngine._exec_reduce_tied_grads``). Nothing overlaps it: the
    optimizer step waits for it. Bytes: the layer's own tensor-parallel shard
    of the tied parameters in the gradient-reduction dtype
    (:func:`~autopar_opt.cost.state.reduced_grad_bytes`); the ring all-reduce
    of ``allreduce_time`` with 2 ranks over ``ctx.tie_tier``. Both ends of the
    tie pay it (the copy holder on the last stage, the owner on the first):
    the collective completes for both once the later of the two arrives, which
    is what adding it to each stage's once-per-iteration term gives under the
    ``max_i g_i`` of docs/DESIGN.md §3.
    """
    tier = ctx.tie_tier
    if tier is None or layer.tied_params <= 0:
        return 0.0
    nbytes = layer.tied_params / s.tp * reduced_grad_bytes(ctx.training, s.zero)
    return allreduce_time(2, nbytes, tier, ctx.link_efficiency(tier))


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


def layer_cost(layer: Layer, s: Strategy, ctx: StageContext) -> LayerCost:
    """All costs of ``layer`` under ``s`` in stage context ``ctx``.

    Hidden communication is not free: NCCL kernels occupy SMs and HBM
    bandwidth while they overlap compute, which slows the compute by
    ``comm_interference`` x the hidden time (NCCL runs one CTA per channel on
    its own SMs; Jeaugey, NCCL 2.0, GTC 2017; the slowdown of overlapped
    GEMMs is measured in Rashidi et al. 2021 and Wang et al. 2022). MoE
    token all-to-alls (:func:`autopar_opt.cost.moe.alltoall_comm_time`) are
    exposed: they sit between the router and the experts. With ``pp > 1``
    (``ctx.tie_tier``) an output layer tied to the input embedding keeps its
    own copy (:func:`~autopar_opt.cost.state.held_layer`: memory, ZeRO
    traffic, gradient reduction and optimizer step of the copy), and both
    ends of the tie pay the tied-gradient all-reduce (:func:`tie_sync_time`).
    DeepSpeed's ``BF16_Optimizer`` adds each micro-batch's 16-bit gradients
    into its fp32 accumulator (:func:`grad_accumulate_time`, part of
    ``compute_s``).
    """
    comp = compute_time(layer, s, ctx)
    declared, tie_active = layer, ctx.tie_tier is not None
    layer = held_layer(layer, tie_active)
    rt, k = ctx.training.runtime, ctx.params.comm_interference
    tp_raw = _tp_comm_time(layer, s, ctx)
    tp = exposed(tp_raw, comp.gemm_s) if rt.tp_comm_overlap else tp_raw
    cp_raw = _cp_comm_time(layer, s, ctx)
    cp = exposed(cp_raw, comp.attn_s)
    z3_raw, z3 = _zero3_comm(layer, s, ctx, comp)
    ep = moe.alltoall_comm_time(layer, s, ctx)
    dp, dp_hidden, step = _sync(layer, s, ctx, comp)
    dp += tie_sync_time(layer, s, ctx)
    accum = grad_accumulate_time(layer, s, ctx)
    act = activation_bytes(layer, s, ctx.microbatch_samples, training=ctx.training)
    casts = autocast_saved_cast_bytes(declared, s, ctx.training)
    f_off = offload.offloaded_fraction(layer, ctx.training)
    off_raw, off = offload.transfer_time(f_off * act, ctx.cluster.device, comp.fwd_s, comp.bwd_s)
    hidden = (tp_raw - tp) + (cp_raw - cp) + (z3_raw - z3) + (off_raw - off)
    comm = tp + cp + z3 + ep + off + k * hidden
    return LayerCost(
        time_s=comp.total_s + accum + comm,
        compute_s=comp.total_s + accum,
        comm_s=comm,
        sync_s=dp + k * dp_hidden + step,
        weight_bytes=weight_bytes(declared, s, ctx.training, tie_active),
        act_bytes=act * (1.0 - f_off) + casts,
        flops=comp.flops,
        hw_flops=comp.hw_flops,
        tp_exposed_s=tp, cp_exposed_s=cp, zero_exposed_s=z3 + k * hidden, ep_exposed_s=ep,
        dp_exposed_s=dp + k * dp_hidden, optimizer_s=step, offload_exposed_s=off,
        working_bytes=working_set_bytes(declared, s, ctx.microbatch_samples, ctx.training,
                                        tie_active),
    )
