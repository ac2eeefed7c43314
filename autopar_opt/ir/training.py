"""Training settings and the search space a plan is chosen from."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.runtime import RUNTIMES, Runtime
from autopar_opt.ir.target import Target


class Schedule(str, Enum):
    """Pipeline schedules. Latency model: docs/DESIGN.md §3; memory: in-flight micro-batches."""

    gpipe = "gpipe"          # Huang et al. 2019: all forwards, then all backwards
    one_f_one_b = "1f1b"     # Narayanan et al. 2019 (PipeDream-Flush), Megatron default
    interleaved = "interleaved"  # Narayanan et al. 2021 Sec. 2.2.2 (Megatron's virtual pipeline)


def schedule_text(schedule: str, vp_chunks: int | None = 1) -> str:
    """A plan's or configuration's schedule as the outputs print it: ``interleaved vp=3``
    with virtual stages; ``interleaved vp=1 (no virtual stages: 1F1B)`` for the one-chunk
    configuration the search adds when a spec lists the interleaved schedule without 1F1B
    (:func:`autopar_opt.search.configs.outer_configs`), which Megatron runs, and the
    exporters write, as plain 1F1B; else the schedule's name."""
    name = getattr(schedule, "value", schedule)
    if name != Schedule.interleaved.value:
        return str(name)
    vp = vp_chunks or 1
    return f"{name} vp={vp}" if vp > 1 else f"{name} vp=1 (no virtual stages: 1F1B)"


class Recompute(str, Enum):
    """Activation recomputation (Korthikanti et al. 2022)."""

    none = "none"
    selective = "selective"  # recompute the attention core only (Sec. 5)
    full = "full"            # keep the layer input, recompute the whole layer (Sec. 4.1)
    #: op-level selective checkpointing (torchtitan ``activation_checkpoint.mode =
    #: "selective"``, ``selective_ac_option = "op"``): keep the attention kernel's
    #: and every other GEMM's outputs, re-run the rest (``Layer.act_op_saved_bytes``)
    op = "op"


#: Bytes per parameter for (weights, gradients, optimizer state) by optimizer.
#: Mixed-precision Adam: 2 + 2 + 12 = 16 bytes (Rajbhandari et al. 2020, ZeRO Sec. 3.1).
#: ``adam_bf16``: Adam on bf16 weights with no fp32 master copy, its moments in the
#: weights' dtype (``torch.optim.AdamW`` keeps ``exp_avg``/``exp_avg_sq`` as
#: ``zeros_like(param)``): 2 + 2 + 4 = 8 bytes. KempnerForge trains so: it casts the
#: model to its ``mixed_precision`` dtype (``kempnerforge/distributed/parallel.py``
#: ``model.to(dtype=param_dtype)``; ``TrainingConfig.param_dtype``, "the master weight
#: dtype", bf16 for ``mixed_precision = "bf16"``) before FSDP2 shards it.
OPTIMIZER_BYTES: dict[str, tuple[float, float, float]] = {
    "adam_mixed": (2.0, 2.0, 12.0),
    "adam_fp32": (4.0, 4.0, 8.0),
    "adam_bf16": (2.0, 2.0, 4.0),
    "sgd_momentum_mixed": (2.0, 2.0, 8.0),
    "sgd_fp32": (4.0, 4.0, 4.0),
}

#: HBM bytes one fused optimizer step reads and writes per parameter, by optimizer
#: (the elements each kernel touches, counted from its update rule): mixed-precision
#: Adam reads the fp32 master, m, v (4 each) and the 16-bit gradient (2) and writes
#: master, m, v and the 16-bit weight: 28 (``apex.optimizers.FusedAdam`` /
#: Megatron-LM's fp32 step and copy back); fp32 Adam reads weight, gradient, m, v and
#: writes weight, m, v, 4 bytes each: 28; ``adam_bf16`` the same seven tensors in 2
#: bytes: 14 (``torch._fused_adamw_``); SGD with momentum reads the weight (the master
#: in mixed precision), the gradient and the momentum and writes weight and momentum:
#: 4 + 2 + 4 + 4 + 4 + 2 (16-bit copy) = 20 mixed, 4 x 5 = 20 in fp32. The cost
#: model's measured per-parameter figure (``CostParams.optimizer_bytes_per_param``, fused
#: Adam's 28 at the measured 0.76 of datasheet bandwidth) scales by the ratio to
#: ``adam_mixed``'s 28 (:func:`optimizer_step_ratio`).
OPTIMIZER_STEP_BYTES: dict[str, float] = {
    "adam_mixed": 28.0, "adam_fp32": 28.0, "adam_bf16": 14.0,
    "sgd_momentum_mixed": 20.0, "sgd_fp32": 20.0,
}

#: What each optimizer key keeps, in words (the ``estimate``/report assumption line).
OPTIMIZER_WORDS: dict[str, str] = {
    "adam_mixed": "16-bit weights with an fp32 master copy and fp32 Adam moments",
    "adam_fp32": "fp32 weights, gradients and Adam moments",
    "adam_bf16": "bf16 weights and Adam moments, no fp32 master copy",
    "sgd_momentum_mixed": "16-bit weights with an fp32 master copy and fp32 momentum",
    "sgd_fp32": "fp32 weights, gradients and momentum",
}

#: Optimizers with no fp32 master copy that keep their state in the 16-bit weights'
#: dtype: torch.autocast (fp32 parameters) cannot go with them.
SIXTEEN_BIT_OPTIMIZERS = ("adam_bf16",)
#: Dtypes whose weights are fp32 (the compute dtype of the whole step), and the fp32
#: counterpart of each mixed-precision optimizer: fp32 training keeps no 16-bit weight
#: copy beside an fp32 master (the mixed optimizers' 2 + 2 bytes of 16-bit weight and
#: gradient would price fp32 weights and gradients at half their bytes).
FP32_DTYPES = ("fp32", "tf32")
FP32_OPTIMIZERS = {"adam_mixed": "adam_fp32", "sgd_momentum_mixed": "sgd_fp32"}
#: Compute dtypes such an optimizer's bf16 weights train in (FP8 GEMMs keep bf16 weights).
BF16_WEIGHT_DTYPES = ("bf16", "fp8")

#: Bytes per parameter for (weights, gradients, optimizer state) under PyTorch
#: AMP, ``torch.autocast`` over fp32 parameters (Lightning ``precision=16``
#: with DDP): the module's own fp32 weights are the master copy and their
#: ``.grad`` is fp32, so the optimizer keeps only its moments: Adam's m and v,
#: 4 + 4 + 8 = 16 bytes; SGD's momentum, 4 + 4 + 4 (PyTorch "Automatic Mixed
#: Precision examples", ``docs/source/notes/amp_examples.rst``: "Creates model
#: and optimizer in default precision"; autocast casts op inputs, not the
#: parameters, so the optimizer steps the fp32 parameters directly).
AUTOCAST_OPTIMIZER_BYTES: dict[str, tuple[float, float, float]] = {
    "adam_mixed": (4.0, 4.0, 8.0),
    "adam_fp32": (4.0, 4.0, 8.0),
    "sgd_momentum_mixed": (4.0, 4.0, 4.0),
    "sgd_fp32": (4.0, 4.0, 4.0),
}

#: Bytes per parameter of autocast's cache of 16-bit weight casts: with
#: ``torch.autocast(cache_enabled=True)`` (the default) the 16-bit cast of
#: every fp32 leaf parameter that requires grad is cached for reuse inside the
#: autocast region (``aten/src/ATen/autocast_mode.cpp``, ``cached_cast``:
#: "cache lower_precision_fp casts of fp32 model weights (leaves)"), and
#: autograd saves those casts for the input-gradient GEMMs, so they live from
#: the forward through the backward pass. Under ZeRO-3/FSDP the same 2 bytes
#: are held per micro-batch in flight instead
#: (:func:`autopar_opt.cost.state.autocast_saved_cast_bytes`).
AUTOCAST_CACHE_BYTES = 2.0

#: Compute dtypes torch.autocast casts to (its ``dtype`` argument).
AUTOCAST_DTYPES = ("fp16", "bf16")

#: Bytes per activation element by dtype.
DTYPE_BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp8": 1, "tf32": 4, "fp32": 4}


@dataclass(frozen=True)
class Training:
    """What one training iteration is.

    global_batch_size : samples per optimizer step (all data-parallel replicas).
    seq_len : tokens per sample (None for models without a sequence, e.g. CNNs).
    dtype : compute dtype; picks the device peak and activation element size.
    optimizer : key of :data:`OPTIMIZER_BYTES`.
    memory_reserve_gib : device memory held back by the user on top of what
        the cost model accounts (its calibrated runtime reserve and allocator
        fragmentation, :class:`~autopar_opt.cost.params.CostParams`).
    runtime : the software stack (:mod:`autopar_opt.ir.runtime`): which
        communications overlap, fused attention, sharded optimizer.
    autocast : 16-bit compute by ``torch.autocast`` over fp32 parameters
        (PyTorch AMP; ``dtype`` fp16 or bf16): per parameter the
        :data:`AUTOCAST_OPTIMIZER_BYTES` of the optimizer plus the
        :data:`AUTOCAST_CACHE_BYTES` of cached 16-bit weight casts (under
        ZeRO-3 once per micro-batch in flight), instead
        of 16-bit weights with an fp32 master copy in the optimizer state
        (:data:`OPTIMIZER_BYTES`, Megatron/DeepSpeed/Apex O2 mixed precision).
    activation_offload : fraction (0 <= f < 1) of the activations each
        transformer layer keeps for backward that live in host memory between
        its forward and backward pass (CPU activation offload: Transformer
        Engine ``get_cpu_offload_context``, Megatron-Core
        ``--cpu-offloading-num-layers N``: the activations of N of the L
        layers a pipeline rank holds, ``f = N / L`` for a stack of equal
        layers). Priced in :func:`autopar_opt.cost.offload.transfer_time`.
    optimizer_stated : whether the spec named the optimizer; False: its default for the
        dtype (:data:`FP32_OPTIMIZERS`), said in the plan's assumptions.
    """

    global_batch_size: int
    seq_len: int | None = None
    dtype: str = "bf16"
    optimizer: str = "adam_mixed"
    memory_reserve_gib: float = 0.0
    runtime: Runtime = RUNTIMES["megatron-core"]
    activation_offload: float = 0.0
    autocast: bool = False
    optimizer_stated: bool = True

    @property
    def tokens_per_sample(self) -> int:
        return self.seq_len or 1


def param_state_bytes(training: Training) -> tuple[float, float, float]:
    """(weight, gradient, optimizer-state) bytes per parameter of the
    optimizer and precision mode, before runtime buffers and sharding:
    :data:`AUTOCAST_OPTIMIZER_BYTES` under ``autocast``, else
    :data:`OPTIMIZER_BYTES`."""
    table = AUTOCAST_OPTIMIZER_BYTES if training.autocast else OPTIMIZER_BYTES
    return table[training.optimizer]


def optimizer_step_ratio(optimizer: str) -> float:
    """HBM traffic of one step of ``optimizer`` over mixed-precision Adam's
    (:data:`OPTIMIZER_STEP_BYTES`): the factor on the measured per-parameter step
    bytes (``CostParams.optimizer_bytes_per_param``)."""
    return OPTIMIZER_STEP_BYTES[optimizer] / OPTIMIZER_STEP_BYTES["adam_mixed"]


def autocast_problem(dtype: str, autocast: bool, optimizer: str = "adam_mixed") -> str | None:
    """Why ``autocast`` cannot go with compute dtype ``dtype`` and ``optimizer``
    (None: it can): torch.autocast casts to a 16-bit dtype only, and it casts fp32
    parameters, which an optimizer of 16-bit weights (:data:`SIXTEEN_BIT_OPTIMIZERS`)
    does not have."""
    if autocast and dtype not in AUTOCAST_DTYPES:
        return (f"autocast (PyTorch AMP) computes in a 16-bit dtype ({' or '.join(AUTOCAST_DTYPES)}), "
                f"not {dtype}")
    if autocast and optimizer in SIXTEEN_BIT_OPTIMIZERS:
        return (f"autocast (PyTorch AMP) runs over fp32 parameters; optimizer {optimizer} "
                "keeps 16-bit weights")
    return None


@dataclass(frozen=True)
class SearchSpace:
    """The space a plan is chosen from; every optimality claim is relative to it.

    ``None`` for a degree list means "every value that divides the devices"
    (for ``ep_degrees``: every expert-parallel degree Megatron-Core accepts,
    see :func:`autopar_opt.ir.strategies.ep_degree_ok`).
    """

    pp_degrees: tuple[int, ...] | None = None
    tp_degrees: tuple[int, ...] | None = None
    cp_degrees: tuple[int, ...] = (1,)
    sequence_parallel: tuple[bool, ...] = (False, True)
    zero_levels: tuple[int, ...] = (0, 1, 2, 3)
    #: ZeRO over the whole ``dp·cp`` group (False) and/or hybrid sharding inside a
    #: node, replicated across nodes (True; :mod:`autopar_opt.ir.strategies`)
    hybrid_sharding: tuple[bool, ...] = (False, True)
    #: the ZeRO levels hybrid sharding is offered at: ZeRO-3 by default, where each
    #: micro-batch's gathers stay inside the node (HSDP); at ZeRO-1/2 (Megatron's
    #: distributed-optimizer instances) the once-per-iteration reduction crosses the
    #: network with the same bytes per NIC either way, so it rarely wins and only
    #: enlarges the tables (benchmarks/runnable: Qwen3-235B's search 2x slower)
    hybrid_zero_levels: tuple[int, ...] = (3,)
    #: the nodes one hybrid shard group spans (its ranks: that many nodes' ``dp·cp``
    #: ranks): one by default, where each micro-batch's gathers stay on NVLink; more
    #: trade a shard's memory for gathers across the network
    hybrid_shard_nodes: tuple[int, ...] = (1,)
    recompute: tuple[Recompute, ...] = (Recompute.none, Recompute.full)
    schedules: tuple[Schedule, ...] = (Schedule.one_f_one_b,)
    microbatches: tuple[int, ...] | None = None
    max_microbatches: int = 64
    tp_within_node: bool = True
    ep_degrees: tuple[int, ...] | None = None
    #: "congruent": every stage N/pp devices; "free": each stage its own count
    #: (whole nodes or a divisor of a node's GPUs, summing to at most the cluster)
    stage_devices: str = "congruent"
    #: expert tensor-parallel degrees of MoE layers (None: ``tp`` and 1; a 0 stands
    #: for ``tp``; :func:`autopar_opt.ir.strategies.enumerate_strategies`)
    etp_degrees: tuple[int, ...] | None = None
    #: virtual stages per rank of the interleaved schedule (None: every ``v >= 2``
    #: dividing the transformer layers per stage, :func:`autopar_opt.ir.target.vp_degrees`)
    vp_chunks: tuple[int, ...] | None = None
    #: the framework that will run the plan (:mod:`autopar_opt.ir.target`); None or
    #: ``Target("none")``: the free per-layer space
    target: "Target | None" = None
    #: where ``schedules`` came from, for the outputs: ``search.schedules`` (stated),
    #: or ``default of target megatron (from training.runtime)`` when the spec states none
    #: (:meth:`autopar_opt.ir.target.Target.default_schedules`)
    schedules_source: str = "search.schedules"

    @property
    def runs_on(self) -> "Target | None":
        """The target whose rules restrict the space (None: the free space)."""
        return None if self.target is None or self.target.free else self.target


def autocast_casts_weights(layer: Layer) -> bool:
    """Whether ``torch.autocast`` casts this layer's parameters to 16 bits.

    Autocast casts the inputs of the ops on its lower-precision list only
    (PyTorch ``docs/source/amp.rst``, "Autocast Op Reference": "CUDA Ops that
    can autocast to float16": ``matmul``, ``mm``, ``linear``, ``conv1d/2d/3d``,
    ... ; the same GEMM/convolution ops on the CPU bfloat16 list). Two kinds of
    layer hold parameters that no such op reads:

    * a lookup embedding (kind ``embedding`` with no forward FLOPs, what
      :func:`autopar_opt.model_zoo.transformer.embedding` builds):
      ``F.embedding`` is on none of autocast's lists, so the table is read in
      fp32 and ``EmbeddingBackward0`` saves only the int64 indices (checked on
      CPU, torch 2.13: ``benchmarks/autocast/probe_embedding.py``, its output in
      ``benchmarks/autocast/RESULTS.md``). A convolutional patch embedding
      (``embedding`` with FLOPs, :func:`autopar_opt.model_zoo.vision.patch_embed`)
      is a ``conv2d``, on the list, and is cast;
    * a normalisation layer (kind ``norm``): ``layer_norm`` and ``group_norm``
      are on the float32 list ("CUDA Ops that can autocast to float32"), so an
      fp32 weight is used as is (the probe: ``NativeLayerNormBackward0`` saves
      the fp32 parameter itself), and an RMSNorm written elementwise multiplies
      by its fp32 weight with type promotion, casting nothing.

    A tied word-embedding matrix is cast where a GEMM reads it: by the output
    layer (``logits = h @ E^T``), on whichever stage holds it
    (:func:`autopar_opt.cost.state.autocast_cast_params`).
    """
    if layer.kind is LayerKind.norm:
        return False
    return not (layer.kind is LayerKind.embedding and layer.flops_fwd <= 0)
