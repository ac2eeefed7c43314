"""Where a layer runs and what its cost is made of: :class:`StageContext` (a stage of
ranks on the cluster, with the training settings and cost parameters),
:class:`Compute` (one micro-batch's compute split into the windows communication
can hide behind) and :class:`LayerCost` (the priced result). The types the
compute, communication and memory models of :mod:`autopar_opt.cost` share."""

from __future__ import annotations

from dataclasses import dataclass, replace

from autopar_opt.cost import attention
from autopar_opt.cost.params import CostParams
from autopar_opt.ir.hardware import Cluster, GIB, LinkTier
from autopar_opt.ir.training import Training


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
    #: None with one stage (:func:`autopar_opt.ir.pipeline.tie_tier`)
    tie_tier: LinkTier | None = None
    #: parameters one stage holds under an even split of the model (its total over ``pp``),
    #: set where the graph is known (:func:`even_stage_params`); 0 where it is not. Only a
    #: runtime that broadcasts each ZeRO shard in turn reads it
    #: (:func:`autopar_opt.cost.comm.param_broadcast_time`)
    stage_params: float = 0.0

    def __post_init__(self) -> None:
        # A flash runtime on a GPU with no fused attention kernel runs the unfused core,
        # which keeps its scores (memory.activation_bytes reads the runtime's flag). A
        # plain cluster's spec has already said so (spec/attention_rule.py); a fleet's
        # groups may differ, so each stage's context states its own GPU's kernel.
        rt = self.training.runtime
        if rt.flash_attention and attention.runtime_kernel(
                rt, self.cluster.device.arch or attention.UNKNOWN_ARCH) is None:
            object.__setattr__(self, "training", replace(
                self.training, runtime=replace(rt, flash_attention=False)))

    def tier(self, group_span: int) -> LinkTier:
        """Tier binding a group covering ``group_span`` consecutive ranks of the stage."""
        last = self.first_rank + max(group_span, 1) - 1
        return self.cluster.tier_for_span(self.first_rank, last)

    @property
    def pipelined(self) -> bool:
        """Whether the plan has more than one pipeline stage (``tie_tier`` is
        set exactly then: :func:`autopar_opt.ir.pipeline.tie_tier`)."""
        return self.tie_tier is not None

    @property
    def microbatches(self) -> int:
        """Micro-batches per iteration: the global batch over the micro-batch
        (``b = B // c`` where the context is built, :mod:`autopar_opt.cost.tables`)."""
        return max(1, round(self.training.global_batch_size / max(self.microbatch_samples, 1)))

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
    def usable_gib(self) -> float:
        """What a plan's peak memory is held against: HBM less the user's reserve
        (``training.memory_reserve_gib``), as :func:`autopar_opt.cost.evaluate` reports
        ``memory_capacity_gib``."""
        return self.cluster.device.hbm_gib - self.training.memory_reserve_gib

    def peak_gib(self, modelled_bytes: float) -> float:
        """A stage's modelled bytes on the scale of a plan's peak memory: with the
        allocator's fragmentation and the runtime reserve, as ``evaluate`` adds them, so
        that ``peak_gib(x) <= usable_gib`` exactly when ``x <= capacity_bytes``."""
        p = self.params
        return modelled_bytes * (1.0 + p.memory_fragmentation) / GIB + p.memory_reserve_gib

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
    <kind>_total_s, <kind>_hidden_s, <kind>_interference_s (kind tp, cp, zero, ep, offload,
        dp; per micro-batch, dp per iteration like ``dp_exposed_s``): what the kind's
        ``*_exposed_s`` is made of, stated for plan.json and the report and read by no
        solver (:mod:`autopar_opt.cost.comm_split`): the kind's whole transfer time, the
        part of it hidden behind compute, and the compute slowdown its exposed figure
        carries for that overlap (``comm_interference`` x the NCCL traffic hidden on the
        compute's SMs; Transformer Engine's SM margin under TP user buffers), so that
        ``exposed - interference = total - hidden``.
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
    tp_total_s: float = 0.0
    tp_hidden_s: float = 0.0
    tp_interference_s: float = 0.0
    cp_total_s: float = 0.0
    cp_hidden_s: float = 0.0
    cp_interference_s: float = 0.0
    zero_total_s: float = 0.0
    zero_hidden_s: float = 0.0
    zero_interference_s: float = 0.0
    ep_total_s: float = 0.0
    ep_hidden_s: float = 0.0
    ep_interference_s: float = 0.0
    offload_total_s: float = 0.0
    offload_hidden_s: float = 0.0
    offload_interference_s: float = 0.0
    dp_total_s: float = 0.0
    dp_hidden_s: float = 0.0
    dp_interference_s: float = 0.0


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
    gemm_fwd_s: float = 0.0   # GEMM part of the forward pass (overlap pairs, cost.overlap)
    attn_fwd_s: float = 0.0   # attention-core part of the forward pass (context-parallel ring)

    @property
    def total_s(self) -> float:
        return self.fwd_s + self.bwd_s


def even_stage_params(total_params: float, pp: int) -> float:
    """A stage's parameters under an even split of ``total_params`` over ``pp`` stages
    (:attr:`StageContext.stage_params`)."""
    return total_params / max(pp, 1)
