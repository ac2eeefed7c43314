"""Micro-batching of a published run: the global batch, the micro-batch and
the number of micro-batches per iteration, from what the record states and,
where it states too little, from the framework's documented default.

The three quantities are tied by ``B = b · c · dp`` (global batch ``B``,
micro-batch ``b`` samples, ``c`` micro-batches per data-parallel rank and
iteration: gradient-accumulation steps, or pipeline micro-batches). Any two
stated fix the third (Megatron-LM ``ConstantNumMicroBatchesCalculator``:
``num_micro_batches = global_batch_size // (micro_batch_size ·
data_parallel_size)``, ``megatron/core/num_microbatches_calculator.py``;
DeepSpeed ``DeepSpeedConfig._set_batch_related_parameters``,
``deepspeed/runtime/config.py``). Three stated must agree.

Only the global batch stated: the framework's default for what is missing
(each cited where it is read):

* DeepSpeed (its own engine, not Megatron-DeepSpeed, whose Megatron arguments
  set the micro-batch): ``train_batch_size`` alone sets
  ``gradient_accumulation_steps = 1`` and ``train_micro_batch_size_per_gpu =
  train_batch_size // world_size`` (``_set_batch_related_parameters``), so
  ``c = 1``, ``b = B / dp``.
* torchtitan (0.3.0, ``torchtitan/config/configs.py``): with pipeline
  parallelism each rank's batch is split into micro-batches of
  ``pipeline_parallel_microbatch_size``, default 1: ``b = 1``, ``c = B / dp``.
  Without it ``local_batch_size`` defaults to 8 and the gradient-accumulation
  steps are ``global_batch_size // (local_batch_size · dp)``
  (``torchtitan/trainer.py``): ``b = 8``, ``c = B / (8 · dp)`` when that is a
  whole number (otherwise the default cannot have run and ``b`` is assumed).
* Megatron-LM / Megatron-Core / NeMo: no default: ``--micro-batch-size`` is
  ``None`` unless given (``_add_training_args`` in ``megatron/training/
  arguments.py``), so an unstated micro-batch is an assumption (``b = 1``),
  said as such. Other stacks: the same assumption.
"""

from __future__ import annotations

from dataclasses import dataclass

from autopar_opt.calibration.reading.errors import Unmodelable
from autopar_opt.calibration.reading.schema import Training as TrainingSection
from autopar_opt.ir.runtime import Runtime

#: torchtitan 0.3.0 ``JobConfig.training.local_batch_size`` default.
TORCHTITAN_LOCAL_BATCH = 8
#: torchtitan 0.3.0 ``parallelism.pipeline_parallel_microbatch_size`` default.
TORCHTITAN_PP_MICROBATCH = 1


@dataclass(frozen=True)
class Batches:
    """Global batch, micro-batch (samples) and micro-batches per iteration."""

    global_batch: int
    micro_batch: int
    microbatches: int


def plain_deepspeed(runtime: Runtime, framework: str) -> bool:
    """DeepSpeed's own engine sets the batch (not Megatron-DeepSpeed, where
    Megatron's ``--micro-batch-size`` does)."""
    return runtime.name == "deepspeed" and "megatron" not in framework.lower()


def _default_micro_batch(gbs: int, dp: int, pp: int, runtime: Runtime, framework: str,
                         notes: list[str]) -> int:
    """The micro-batch of a run stating only its global batch (module docstring)."""
    if plain_deepspeed(runtime, framework):
        if gbs % dp == 0:
            notes.append(f"micro_batch_size not stated: DeepSpeed default with only "
                         f"train_batch_size: gradient_accumulation_steps 1, micro-batch "
                         f"{gbs}/{dp} = {gbs // dp} (deepspeed/runtime/config.py "
                         f"_set_batch_related_parameters)")
            return gbs // dp
    elif runtime.name == "torchtitan":
        if pp > 1:
            notes.append(f"micro_batch_size not stated: torchtitan default "
                         f"pipeline_parallel_microbatch_size {TORCHTITAN_PP_MICROBATCH} "
                         f"(torchtitan/config/configs.py)")
            return TORCHTITAN_PP_MICROBATCH
        if gbs % (TORCHTITAN_LOCAL_BATCH * dp) == 0:
            notes.append(f"micro_batch_size not stated: torchtitan default local_batch_size "
                         f"{TORCHTITAN_LOCAL_BATCH}, gradient accumulation "
                         f"{gbs}/({TORCHTITAN_LOCAL_BATCH}·{dp}) steps "
                         f"(torchtitan/config/configs.py, trainer.py)")
            return TORCHTITAN_LOCAL_BATCH
    elif runtime.name.startswith("megatron"):
        notes.append("micro_batch_size not stated: 1 (assumed: Megatron-LM's --micro-batch-size "
                     "has no default, megatron/training/arguments.py)")
        return 1
    notes.append(f"micro_batch_size not stated: 1 (assumed: no documented default of "
                 f"{runtime.name} applies)")
    return 1


def read_batches(tr: TrainingSection, dp: int, notes: list[str], *, pp: int,
                 runtime: Runtime, framework: str) -> Batches:
    """``c = B / (b·dp)`` micro-batches (gradient accumulation), with ``B``,
    ``b`` and ``c`` from the stated fields (any two fix the third) or the
    framework's default (module docstring); a global batch that is not a
    multiple of ``b·dp`` is priced as the nearest whole count."""
    gbs, mbs, ga = tr.global_batch_size, tr.micro_batch_size, tr.grad_accum_steps
    if gbs is None:
        if mbs is None or ga is None:
            raise Unmodelable("training.global_batch_size is not stated (null), nor both "
                              "micro_batch_size and grad_accum_steps")
        gbs = mbs * ga * dp
        notes.append(f"global batch not stated: micro_batch_size·grad_accum_steps·dp = "
                     f"{mbs}·{ga}·{dp} = {gbs}")
        return Batches(gbs, mbs, ga)
    if mbs is None and ga is not None:
        if gbs % (ga * dp):
            raise Unmodelable(f"training.global_batch_size {gbs} is not a multiple of "
                              f"grad_accum_steps·dp = {ga}·{dp}: the micro-batch is not whole")
        mbs = gbs // (ga * dp)
        notes.append(f"micro_batch_size not stated: global_batch_size/(grad_accum_steps·dp) "
                     f"= {gbs}/({ga}·{dp}) = {mbs}")
    elif mbs is None:
        mbs = _default_micro_batch(gbs, dp, pp, runtime, framework, notes)
    per = mbs * dp
    c = max(1, round(gbs / per))
    if ga is not None and ga != c:
        raise Unmodelable(f"training.grad_accum_steps = {ga} disagrees with global_batch_size/"
                          f"(micro_batch_size·dp) = {gbs}/({mbs}·{dp}); fix one of them")
    if c * per != gbs:
        notes.append(f"global batch {gbs} is not a multiple of mbs·dp = {per}: priced as "
                     f"{c} micro-batch{'' if c == 1 else 'es'} ({c * per} samples), throughput "
                     "compared per sample")
    return Batches(gbs, mbs, c)
