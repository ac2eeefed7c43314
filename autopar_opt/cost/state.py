"""Training state per device: weights, gradients and optimizer state after
sharding, and the copies some runtimes and precision modes keep beside them.

Split out of :mod:`autopar_opt.cost.layer_cost` (which prices time) so that
the memory of a (layer, strategy) has one definition, read by the cost
tables (``W`` of docs/DESIGN.md §3) and by the evaluator's per-stage
breakdown alike.

Per parameter, before sharding (:func:`state_bytes`): the optimizer's
entry of :data:`~autopar_opt.training.OPTIMIZER_BYTES` (16-bit weights, fp32
master in the optimizer state) or, under PyTorch AMP, of
:data:`~autopar_opt.training.AUTOCAST_OPTIMIZER_BYTES` (fp32 weights and
gradients), with the runtime's gradient buffers. After sharding
(:func:`weight_parts`), per device: ZeRO divides what it shards; the FP8
weight copy, autocast's cache of 16-bit weight casts and DDP's gradient
buckets are added where they exist.
"""

from __future__ import annotations

from dataclasses import replace

from autopar_opt.cost import moe
from autopar_opt.graph import Layer, LayerKind
from autopar_opt.strategies import Strategy
from autopar_opt.training import AUTOCAST_CACHE_BYTES, Training, param_state_bytes

#: Layer kinds whose GEMMs run in FP8 under ``dtype: fp8`` (Transformer Engine
#: modules of Megatron-Core; the output layer stays 16-bit: it is a plain
#: ``ColumnParallelLinear``, NVIDIA TE/Megatron-Core FP8 recipes). MoE blocks
#: too: Megatron-Core's grouped experts are Transformer Engine
#: ``TEGroupedLinear`` modules, which run under the same FP8 autocast as the
#: dense layers (``megatron/core/transformer/moe/experts.py``, ``TEGroupedMLP``;
#: DeepSeek-V3, arXiv 2412.19437, Sec. 3.3.1: the expert GEMMs in FP8).
FP8_KINDS = frozenset({LayerKind.transformer_block, LayerKind.attention, LayerKind.mlp,
                       LayerKind.linear, LayerKind.moe_block})
#: Extra bytes per FP8 parameter: the cached FP8 weight copy and its transpose
#: (Transformer Engine keeps both on Hopper; Micikevicius et al. 2022, FP8
#: formats for deep learning, Sec. 4), plus per-tensor scaling state (amax
#: history, scale), negligible per parameter.
FP8_WEIGHT_COPY_BYTES = 2.0


def state_bytes(training: Training) -> tuple[float, float, float]:
    """(weight, gradient, optimizer-state) bytes per parameter before sharding:
    :func:`~autopar_opt.training.param_state_bytes` (Rajbhandari et al. 2020,
    Sec. 3.1: 2 + 2 + 12 for mixed-precision Adam; 4 + 4 + 8 under PyTorch
    AMP) with 4-byte gradients when the runtime keeps an fp32 gradient buffer
    in 16-bit/FP8 training (Megatron-LM ``distrib_optimizer.md``: 2 + 4 + 12 =
    18 bytes), plus the 16-bit ``.grad`` beside it when the runtime keeps both
    (``lp_grad_copy``: DeepSpeed's ``BF16_Optimizer``, 2 + 6 + 12 = 20 bytes)."""
    w, g, o = param_state_bytes(training)
    reduced = reduced_grad_bytes(training)
    if reduced > g and training.runtime.lp_grad_copy and training.dtype == "bf16":
        return w, reduced + g, o
    return w, reduced, o


def reduced_grad_bytes(training: Training) -> float:
    """Bytes per parameter of the gradient that the data-parallel reduction
    moves: the fp32 buffer when the runtime keeps one in 16-bit/FP8 training
    (Megatron-LM forces fp32 all-reduce for bf16; DeepSpeed's BF16_Optimizer
    reduces ``fp32_groups_gradients_flat``), else the optimizer's gradient
    (fp32 under PyTorch AMP: the parameters are fp32)."""
    g = param_state_bytes(training)[1]
    if training.runtime.fp32_grad_buffer and training.dtype in ("bf16", "fp16", "fp8") and g < 4:
        return 4.0
    return g


def held_layer(layer: Layer, tie_active: bool) -> Layer:
    """``layer`` with the parameters its device keeps: with ``tie_active``
    (its tie partner on another pipeline stage, i.e. ``pp > 1``) a copy
    holder adds its own copy of the tied parameters, which then have a
    gradient and optimizer state like any other and are reduced and stepped
    with the layer (Megatron-Core ``setup_embeddings_and_output_layer``: the
    last stage's output layer owns a full ``word_embeddings`` copy; see
    :attr:`autopar_opt.graph.Layer.tied_params`)."""
    if tie_active and layer.holds_tied_copy:
        return replace(layer, params=layer.params + layer.tied_params)
    return layer


def weight_parts(layer: Layer, s: Strategy, training: Training) -> tuple[float, float, float]:
    """(weights, gradients, optimizer state) bytes per device after sharding.

    ZeRO-1 (= a distributed optimizer) shards optimizer state, ZeRO-2 also
    gradients, ZeRO-3 also weights, over the data-parallel group
    (Rajbhandari et al. 2020, Sec. 5, Fig. 1); MoE layers shard their routed
    experts over the expert-data-parallel group
    (:func:`autopar_opt.cost.moe.split_params`). Added to the weights: FP8
    training's weight copy and transpose per GEMM weight
    (:data:`FP8_WEIGHT_COPY_BYTES`, sharded like the weights under ZeRO-3; a
    runtime with FP8 primary weights, ``fp8_primary_weights``: Megatron-Core
    ``--fp8-param-gather``, keeps only the FP8 weight and its transpose, 1 + 1
    bytes, in place of the 16-bit weight) and, under PyTorch AMP, autocast's
    cached 16-bit weight casts (:data:`~autopar_opt.training.AUTOCAST_CACHE_BYTES`
    per local parameter; below ZeRO-3 only: FSDP's unsharded parameters are
    views of its flat parameter, and autocast caches casts of leaves that are
    not views, ``cached_cast`` in ``aten/src/ATen/autocast_mode.cpp``). Every
    parameter is counted as cast (approximation: the norm scales and a learned
    position table are not GEMM inputs; under 0.2% of GPT-2 XL's parameters).
    Added to the gradients: PyTorch DDP's bucket copy (runtime
    ``ddp_bucket_copy``: one unsharded gradient per local parameter where DDP
    reduces, data-parallel group > 1 and ZeRO-0/1).
    """
    w, g, o = state_bytes(training)
    if training.dtype == "fp8" and layer.kind in FP8_KINDS \
            and not training.runtime.fp8_primary_weights:
        w += FP8_WEIGHT_COPY_BYTES
    cache = AUTOCAST_CACHE_BYTES if training.autocast and s.zero < 3 else 0.0
    bucket = reduced_grad_bytes(training) if training.runtime.ddp_bucket_copy and s.zero <= 1 else 0.0
    dense, expert = moe.split_params(layer, s)
    parts = [0.0, 0.0, 0.0]
    for count, group in ((dense, s.dp * s.cp), (expert, s.edp)):
        if count <= 0:
            continue
        dw, dg, do = s.zero_divisors(group)
        parts[0] += count * (w / dw + cache)
        parts[1] += count * (g / dg + (bucket if group > 1 else 0.0))
        parts[2] += count * o / do
    return parts[0], parts[1], parts[2]


def weight_bytes(layer: Layer, s: Strategy, training: Training) -> float:
    """Weights + gradients + optimizer state per device after sharding
    (the sum of :func:`weight_parts`)."""
    return sum(weight_parts(layer, s, training))
