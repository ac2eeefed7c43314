"""Training state per device: weights, gradients and optimizer state after
sharding, and the copies some runtimes and precision modes keep beside them.

Split out of :mod:`autopar_opt.cost.layer_cost` (which prices time) so that
the memory of a (layer, strategy) has one definition, read by the cost
tables (``W`` of docs/DESIGN.md §3) and by the evaluator's per-stage
breakdown alike.

Per parameter, before sharding (:func:`state_bytes`): the optimizer's
entry of :data:`~autopar_opt.ir.training.OPTIMIZER_BYTES` (16-bit weights, fp32
master in the optimizer state) or, under PyTorch AMP, of
:data:`~autopar_opt.ir.training.AUTOCAST_OPTIMIZER_BYTES` (fp32 weights and
gradients), with the runtime's gradient buffers. After sharding
(:func:`weight_parts`), per device: ZeRO divides what it shards; the FP8
weight copy, autocast's cache of 16-bit weight casts and DDP's gradient
buckets are added where they exist. Under ZeRO-3/FSDP the 16-bit casts are
not a standing cache but a per-micro-batch term
(:func:`autocast_saved_cast_bytes`), counted with the activations.
"""

from __future__ import annotations

from dataclasses import replace

from autopar_opt.cost import moe
from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import (
    AUTOCAST_CACHE_BYTES, Recompute, Training, autocast_casts_weights, param_state_bytes)

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


def bf16_optimizer_active(training: Training, zero: int) -> bool:
    """Whether DeepSpeed's ``BF16_Optimizer`` (16-bit ``.grad`` beside an fp32
    gradient accumulator, fp32 reduction) runs a strategy at ZeRO stage
    ``zero``: the runtime says it keeps both gradients (``lp_grad_copy``, the
    catalog ``deepspeed`` runtime read as BF16_Optimizer), the model is bf16
    and the stage is below 2. DeepSpeed hands a bf16 model with fp32 gradient
    accumulation to ``BF16_Optimizer`` only without ZeRO or at stage 1, and to
    its ZeRO optimizer (``DeepSpeedZeroOptimizer`` / stage 3) at stages 2 and
    3 (``deepspeed/runtime/engine.py``, ``DeepSpeedEngine._do_optimizer_sanity_check``:
    ``BFLOAT16`` if ``model_dtype == bfloat16 and grad_accum_dtype == float32
    and zero_optimization_stage() == 1`` and no offload, else
    ``ZERO_OPTIMIZATION``). The one predicate of :func:`state_bytes`,
    :func:`reduced_grad_bytes` and :func:`hp_grad_accumulate_bytes`, so memory,
    data-parallel reduce bytes and the accumulation pass agree per strategy."""
    return training.runtime.lp_grad_copy and training.dtype == "bf16" and zero < 2


def state_bytes(training: Training, zero: int) -> tuple[float, float, float]:
    """(weight, gradient, optimizer-state) bytes per parameter before sharding
    for a strategy at ZeRO stage ``zero``:
    :func:`~autopar_opt.ir.training.param_state_bytes` (Rajbhandari et al. 2020,
    Sec. 3.1: 2 + 2 + 12 for mixed-precision Adam; 4 + 4 + 8 under PyTorch
    AMP) with 4-byte gradients when the runtime keeps an fp32 gradient buffer
    in 16-bit/FP8 training (Megatron-LM ``distrib_optimizer.md``: 2 + 4 + 12 =
    18 bytes), plus the 16-bit ``.grad`` beside it where DeepSpeed's
    ``BF16_Optimizer`` runs (:func:`bf16_optimizer_active`: 2 + 6 + 12 = 20
    bytes). At ZeRO-2/3 the same runtime runs DeepSpeed's ZeRO optimizer:
    16-bit gradients only (2 + 2 + 12).

    fp16 without fp32 accumulation (:func:`reduced_grad_bytes`): 2 + 2 + 12 =
    16 bytes resident at the memory peak, 4 fewer than the 20 of
    ``distrib_optimizer.md``'s "fp16 param, fp16 grads" row (4 + 16/d with
    the distributed optimizer, here 4 + 12/d). The missing 4 bytes are the
    optimizer's fp32 copy of the gradient, which exists only from the
    optimizer step to the next iteration's ``zero_grad``: Megatron-LM's
    ``Float16OptimizerWithFloat16Params._copy_model_grads_to_main_grads``
    (``megatron/core/optimizer/optimizer.py``, called in ``step()`` via
    ``prepare_grads``) sets ``main_param.grad = model_param.main_grad.float()``,
    and ``zero_grad(set_to_none=True)`` at the start of the next ``train_step``
    drops it before the first forward; the distributed optimizer's shard does
    the same (``shard_main_param.grad = ...float()``); DeepSpeed's
    ``FP16_Optimizer.step`` builds its fp32 flat gradient in the step too
    (``deepspeed/runtime/fp16/fused_optimizer.py``). The activations are freed
    by then, so this model's peak (state + activations during the backward)
    does not hold it; a step-time peak (state + 4 B/parameter, no
    activations) above that is not modelled."""
    w, g, o = param_state_bytes(training)
    reduced = reduced_grad_bytes(training, zero)
    if reduced > g and bf16_optimizer_active(training, zero):
        return w, reduced + g, o
    return w, reduced, o


#: HBM bytes per local parameter of DeepSpeed ``BF16_Optimizer.update_hp_grads``,
#: which runs after EVERY micro-batch's backward pass:
#: ``hp_grad.data.add_(lp.grad.data.to(hp_grad.dtype).view(hp_grad.shape))``
#: (``deepspeed/runtime/bf16_optimizer.py``). ``.to(float32)`` materialises an
#: fp32 copy of the bf16 gradient (read 2, write 4 bytes); ``add_`` reads that
#: copy and the fp32 accumulator and writes the accumulator (4 + 4 + 4 bytes):
#: 2 + 4 + 4 + 4 + 4 = 18 bytes. Megatron-LM/Core's gradient-accumulation
#: fusion writes the weight-gradient GEMM's output straight into the fp32
#: ``main_grad`` (``fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32``):
#: no such pass.
HP_GRAD_ACCUMULATE_BYTES = 18.0


def hp_grad_accumulate_bytes(training: Training, s: Strategy) -> float:
    """HBM bytes per local parameter that the runtime's per-micro-batch
    gradient accumulation moves outside the GEMMs: :data:`HP_GRAD_ACCUMULATE_BYTES`
    where DeepSpeed's ``BF16_Optimizer`` keeps a 16-bit ``.grad`` beside its
    fp32 accumulator (:func:`bf16_optimizer_active`, the predicate of
    :func:`state_bytes` and :func:`reduced_grad_bytes`: ``lp_grad_copy``,
    bf16, the strategy below ZeRO-2), else 0.
    DeepSpeed hands a bf16 model with fp32 gradient accumulation to
    ``BF16_Optimizer`` without ZeRO and at ZeRO stage 1, to its ZeRO optimizer
    at stages 2 and 3 (``DeepSpeedEngine._do_optimizer_sanity_check``; BLOOM's
    Megatron-DeepSpeed ran stage 0, "bf16 must use z0! it implements its own
    zero stage 1 equivalent", tr11-176B-ml.slurm); the ZeRO optimizer's own
    per-micro-batch accumulation is not modelled.

    Called per micro-batch on every stage: the ``PipelineEngine``'s
    ``_exec_backward_pass`` calls ``optimizer.clear_lp_grads()`` before and
    ``optimizer.update_hp_grads(clear_lp_grads=False)`` after each
    ``torch.autograd.backward`` of a non-last stage; the last stage goes
    through ``DeepSpeedEngine.backward`` -> ``BF16_Optimizer.backward``, which
    calls ``update_hp_grads`` after ``loss.backward()``
    (``deepspeed/runtime/pipe/engine.py``, ``deepspeed/runtime/engine.py``).
    """
    reduced = reduced_grad_bytes(training, s.zero)
    g = param_state_bytes(training)[1]
    if reduced > g and bf16_optimizer_active(training, s.zero):
        return HP_GRAD_ACCUMULATE_BYTES
    return 0.0


def reduced_grad_bytes(training: Training, zero: int) -> float:
    """Bytes per parameter of the gradient that the data-parallel reduction
    moves, for a strategy at ZeRO stage ``zero``: the fp32 buffer when the
    runtime keeps one (``fp32_grad_buffer``) in bf16/FP8 training (Megatron-LM
    ``arguments.py`` forces ``accumulate_allreduce_grads_in_fp32`` for bf16;
    DeepSpeed's BF16_Optimizer reduces ``fp32_groups_gradients_flat``) or in
    fp16 training that states it (``fp16_fp32_grads``:
    ``--accumulate-allreduce-grads-in-fp32``), else the optimizer's gradient:
    2 bytes in fp16 (Megatron-LM's ``main_grad`` has the parameters' dtype
    without that flag, ``docs/source/distrib_optimizer.md`` "fp16 param, fp16
    grads"), 4 under PyTorch AMP (the parameters are fp32). A ``lp_grad_copy``
    runtime (DeepSpeed read as ``BF16_Optimizer``) at ZeRO-2/3 runs the ZeRO
    optimizer instead (:func:`bf16_optimizer_active`), which reduces the 16-bit
    gradients; DeepSpeed's fp16 engine does too: ``communication_data_type``
    defaults to the model dtype (``deepspeed/runtime/engine.py``,
    ``DeepSpeedEngine.communication_data_type``: the configured value, else
    float16 under fp16, bfloat16 under bf16)."""
    g = param_state_bytes(training)[1]
    rt = training.runtime
    if rt.lp_grad_copy and zero >= 2:
        return g
    if zero == 2 and rt.zero2_forward_gather and rt.fp32_grad_reduce:
        # FSDP's SHARD_GRAD_OP reducing in fp32 onto fp32 sharded parameters (torchtitan's
        # FSDP2, Composer's DEFAULT): the reduce-scatter moves fp32 and the sharded gradient
        # has the sharded parameter's dtype, fp32, beside the 16-bit parameters gathered
        # from forward to backward (the full 2 bytes counted as weights) and the fp32
        # parameter and Adam moments (the 12 of the optimizer state): 2 + (4 + 4 + 8)/dp.
        # (At ZeRO-3 the 16-bit copy is gathered unit by unit, and 2 + 2 + 12 per dp
        # already totals the (4 + 4 + 8)/dp FSDP holds; zero3_comm prices its fp32
        # reduce-scatter itself.)
        return 4.0
    fp32 = training.dtype in ("bf16", "fp8") or (training.dtype == "fp16" and rt.fp16_fp32_grads)
    if rt.fp32_grad_buffer and fp32 and g < 4:
        return 4.0
    return g


def held_layer(layer: Layer, tie_active: bool) -> Layer:
    """``layer`` with the parameters its device keeps: with ``tie_active``
    (its tie partner on another pipeline stage, i.e. ``pp > 1``) a copy
    holder adds its own copy of the tied parameters, which then have a
    gradient and optimizer state like any other and are reduced and stepped
    with the layer (Megatron-Core ``setup_embeddings_and_output_layer``: the
    last stage's output layer owns a full ``word_embeddings`` copy; see
    :attr:`autopar_opt.ir.graph.Layer.tied_params`)."""
    if tie_active and layer.holds_tied_copy:
        return replace(layer, params=layer.params + layer.tied_params)
    return layer


def autocast_cast_params(layer: Layer, s: Strategy) -> float:
    """Parameters per device (after tensor/expert parallelism, before ZeRO)
    whose 16-bit casts ``torch.autocast`` makes in ``layer``'s forward pass:
    0 for a layer :func:`~autopar_opt.ir.training.autocast_casts_weights` says
    autocast does not cast;
    else its own parameters, plus, on an output layer tied to the input
    embedding (:attr:`~autopar_opt.ir.graph.Layer.holds_tied_copy`), the tied
    matrix, over ``tp`` as the vocab-parallel output GEMM splits it.

    ``layer`` is the layer as declared, not :func:`held_layer`'s copy: the tied
    matrix is cast by the output layer's GEMM whether that layer holds its own
    copy (``pp > 1``) or reads the embedding's (``pp = 1``), so the count is the
    same at any ``pp``; with ``pp = 1`` it is priced with the output layer's
    strategy (its ``tp`` and ZeRO stage), the layer whose GEMM makes the cast.

    Approximations: the parameters of a casting layer are all counted as cast,
    though a transformer block's norm scales (``2h`` of ``~12h^2`` per block)
    are not, and a GEMM's bias is cast but not saved for the backward (its
    gradient is a sum of the output gradient); both under 0.2% of GPT-2 XL's
    parameters. A convolutional patch embedding's position and class
    embeddings, counted in its ``params``, are counted as cast too (0.05% of
    ViT-H/14's parameters).
    """
    if not autocast_casts_weights(layer):
        return 0.0
    dense, expert = moe.split_params(layer, s)
    tied = layer.tied_params / s.tp if layer.holds_tied_copy else 0.0
    return dense + expert + tied


def weight_parts(layer: Layer, s: Strategy, training: Training,
                 tie_active: bool = False) -> tuple[float, float, float]:
    """(weights, gradients, optimizer state) bytes per device after sharding.

    ``layer`` is the layer as declared; ``tie_active`` (its tie partner on
    another pipeline stage, ``pp > 1``) adds the copy a tied output layer keeps
    (:func:`held_layer`).

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
    cached 16-bit weight casts (:data:`~autopar_opt.ir.training.AUTOCAST_CACHE_BYTES`
    per parameter autocast casts, :func:`autocast_cast_params`: none for a
    lookup embedding or a norm, the tied matrix on the output layer; below
    ZeRO-3 only: under ZeRO-3 the fp32 parameters are resharded after each
    layer's forward, and the 16-bit casts autograd keeps for the backward are
    counted per in-flight micro-batch with the activations instead,
    :func:`autocast_saved_cast_bytes`).
    Added to the gradients: PyTorch DDP's bucket copy (runtime
    ``ddp_bucket_copy``: one unsharded gradient per local parameter where DDP
    reduces, data-parallel group > 1 and ZeRO-0/1).
    """
    cache = AUTOCAST_CACHE_BYTES * autocast_cast_params(layer, s) \
        if training.autocast and s.zero < 3 else 0.0
    layer = held_layer(layer, tie_active)
    w, g, o = state_bytes(training, s.zero)
    if training.dtype == "fp8" and layer.kind in FP8_KINDS \
            and not training.runtime.fp8_primary_weights:
        w += FP8_WEIGHT_COPY_BYTES
    bucket = reduced_grad_bytes(training, s.zero) if training.runtime.ddp_bucket_copy and s.zero <= 1 else 0.0
    dense, expert = moe.split_params(layer, s)
    parts = [cache, 0.0, 0.0]
    for count, group in ((dense, s.dp * s.cp), (expert, s.edp)):
        if count <= 0:
            continue
        dw, dg, do = s.zero_divisors(group)
        parts[0] += count * w / dw
        parts[1] += count * (g / dg + (bucket if group > 1 else 0.0))
        parts[2] += count * o / do
    return parts[0], parts[1], parts[2]


def weight_bytes(layer: Layer, s: Strategy, training: Training,
                 tie_active: bool = False) -> float:
    """Weights + gradients + optimizer state per device after sharding
    (the sum of :func:`weight_parts`; ``layer`` as declared)."""
    return sum(weight_parts(layer, s, training, tie_active))


def autocast_saved_cast_bytes(layer: Layer, s: Strategy, training: Training) -> float:
    """16-bit weight casts autograd keeps for the backward pass of one
    micro-batch under ZeRO-3/FSDP with PyTorch AMP (fp32 parameters cast by
    ``torch.autocast``): :data:`~autopar_opt.ir.training.AUTOCAST_CACHE_BYTES`
    (2 B) per unsharded local parameter autocast casts
    (:func:`autocast_cast_params`, after tensor/expert parallelism, before
    ZeRO: none for a lookup embedding or a norm; an output layer tied to the
    input embedding casts the tied matrix, at ``pp = 1`` as at ``pp > 1``;
    ``layer`` as declared, not :func:`held_layer`'s copy), held from the
    layer's forward until its backward, so once per micro-batch in flight; 0
    otherwise.

    Why, with sources:

    * A GEMM saves its weight operand for the input gradient
      (``tools/autograd/derivatives.yaml``, ``mm``: ``self:
      mm_mat1_backward(grad, mat2, ...)``). Under autocast that operand is the
      16-bit cast, a new tensor (``aten/src/ATen/autocast_mode.cpp``,
      ``cached_cast``: ``arg.to(to_type)``), not the fp32 parameter.
    * FSDP's reshard after forward frees only its own unsharded fp32 storage
      (``torch/distributed/fsdp/_flat_param.py``,
      ``FlatParamHandle._free_unsharded_flat_param``: ``_free_storage``); the
      cast lives on in the autograd graph. The same mechanism for FP8 casts:
      pytorch-labs float8_experimental issue #185 ("the existing fsdp
      mechanism for removing the un-sharded weight will not work and we will
      end up saving the un-sharded tensor for backwards on each device");
      TransformerEngine issue #2681 (FSDP2 + ``te.autocast()``: "quantized
      weights are created during the forward pass and not de-allocated until
      the backwards pass").
    * Cached or not, the bytes are the same: FSDP1's unsharded parameters are
      views of the flat parameter (``_use_unsharded_views``: "the original
      parameters only as ``Tensor`` s ... during forward/backward
      computation", ``torch.split`` + ``.view``), which ``cached_cast`` does
      not cache (``arg.is_leaf() && !arg.is_view()``), so each use is cast
      anew; FSDP2's unsharded parameters are leaf ``nn.Parameter`` s whose
      casts are cached until the autocast region exits (``clear_cache`` "at
      the end of each forward pass"). The PyTorch AMP pattern opens one
      region per micro-batch's forward (``docs/source/notes/amp_examples.rst``:
      "autocast should wrap only the forward pass(es)"), so each micro-batch
      in flight holds its own casts.
    * FSDP's own mixed precision (``MixedPrecision(param_dtype=bf16)``;
      FSDP2 ``MixedPrecisionPolicy``: "the dtype for the unsharded parameter
      and hence the dtype for forward/backward computation") gathers 16-bit
      parameters, autocast casts nothing and the saved weight is the
      unsharded parameter FSDP frees: no term. That is not
      ``training.autocast`` (fp32 parameters) in this model; nor is
      DeepSpeed's own fp16/bf16 engine (16-bit parameters).

    Checked on CPU (torch 2.13, gloo, 2 ranks, two 64x64 bias-free linears
    under ``torch.autocast("cpu", bfloat16)``;
    ``benchmarks/autocast/probe.py``, output in its RESULTS.md): after the forward, FSDP1 (with and without
    ``use_orig_params``) and FSDP2 keep a live 8,192-byte bf16 64x64 tensor
    among the saved tensors (2 B x 4,096 parameters) while the fp32 unsharded
    storage is freed; with ``param_dtype=bf16`` the saved weight's storage is
    0 bytes after the forward (freed, regathered for the backward).

    Full recomputation keeps none of them (the checkpointed forward saves only
    the layer input; the recomputed casts are the layer's transient,
    :func:`autopar_opt.cost.memory.working_set_bytes`). Approximations:
    those of :func:`autocast_cast_params` (norm scales and biases inside a
    casting layer counted as cast; a layer whose input needs no gradient, the
    first GEMM on raw data, keeps no weight; a weight used twice in one
    forward is cast twice under FSDP1); under
    FSDP2 with full recomputation the cached casts of the whole stage live
    until the autocast region exits at the end of the forward, a peak not
    modelled here (see ``working_set_bytes``).
    """
    if not training.autocast or s.zero < 3 or s.recompute is Recompute.full:
        return 0.0
    return AUTOCAST_CACHE_BYTES * autocast_cast_params(layer, s)
