"""The runtime a record's framework text names (:mod:`autopar_opt.ir.runtime`),
with the capability flags its text and its precision state.

:func:`runtime_of` maps the five stacks the published-runs file was built
from (Megatron-LM, Megatron-Core, Megatron-Bridge/NeMo, Megatron-DeepSpeed,
Composer/llm-foundry) and hands every other text to :mod:`.stacks`;
:func:`fsdp_reduce_dtype` and :func:`fp16_grad_dtype` then read the gradient
dtype the precision text states. Every choice is written into ``notes``.
"""

from __future__ import annotations

import re
from dataclasses import replace

from autopar_opt.calibration.reading import stacks
from autopar_opt.calibration.reading.errors import Unmodelable
from autopar_opt.calibration.reading.schema import RawRecord
from autopar_opt.ir.runtime import Runtime, runtime_named


#: Why a Composer/llm-foundry record's optimizer step is unfused.
COMPOSER_OPTIMIZER_NOTE = (
    "optimizer: decoupled_adamw (llm-foundry's train YAMLs), Composer's DecoupledAdamW: "
    "DecoupledAdamW.adamw loops over the parameters in Python with one in-place op per "
    "tensor (mul_, add_, addcmul_, sqrt, addcdiv_; composer/optim/decoupled_weight_decay.py), "
    "no fused or foreach kernel: fused_optimizer off")


def runtime_of(framework: str, notes: list[str], rec: RawRecord | None = None) -> Runtime:
    """The runtime (:mod:`autopar_opt.ir.runtime`) a record's framework text names,
    with the capability flags the text states (e.g. ``DDP impl=local``,
    ``--tp-comm-overlap``). Stacks beyond the original five (torchtitan, plain
    FSDP, fairscale/metaseq, DeepSpeed ZeRO without Megatron, Colossal-AI,
    HF Trainer, NeMo before Megatron-Bridge, Megatron-LM 2023+) and a text
    naming none (decided by the record ``rec``'s own fields) are mapped by
    :mod:`autopar_opt.calibration.reading.stacks`, which documents each default; a
    JAX stack raises :class:`Unmodelable`."""
    fw = framework.lower()
    flat = fw.replace(" ", "")
    if "megatron-bridge" in fw:
        return runtime_named("megatron-bridge")
    if "nemo" in fw:     # fp8_params / grad_reduce_in_fp32 may be stated with the precision
        return stacks.nemo(fw + " " + stacks._precision(rec).lower(), notes)
    if "megatron-core" in fw:
        return stacks.megatron_core(fw, notes, rec)
    if "llm-foundry" in fw or "composer" in fw:
        notes.append(COMPOSER_OPTIMIZER_NOTE)
        if stacks.llmfoundry_triton_table(rec):
            why = ("as the framework text states"
                   if stacks.LLMFOUNDRY_TRITON_TEXT.search(fw) else
                   "the default of the scripts behind llm-foundry's 2023 benchmark tables "
                   "(submit_benchmarks.py @a7c75677; @12a63191 for the MosaicGPT-era rows)")
            notes.append("attn_impl: triton (pre-MLIR flash_attn_triton, a FlashAttention-1-"
                         "class kernel: flash_v2_attention off, the attention core priced at "
                         "FlashAttention-1's measured speeds, Dao 2023's A100/H100 figures): "
                         + why)
            return runtime_named("pytorch-fsdp", flash_v2_attention=False, fused_optimizer=False)
        # precision text: fsdp_reduce_dtype()
        return runtime_named("pytorch-fsdp", fused_optimizer=False)
    if "deepspeed" in fw and "megatron" in fw:
        if stacks.zero_stage_of(rec) >= 2:      # ZeRO-2/3: no BF16_Optimizer (stages 0/1 only)
            # Megatron's vocab-parallel loss (megatron/mpu/cross_entropy.py)
            return stacks.named_flash_attention(
                fw, replace(stacks.deepspeed_zero(fw, rec, notes), loss_grad_cast=True,
                            eager_cross_entropy=False), notes)
        return stacks.named_flash_attention(fw, megatron_deepspeed_engine(fw, rec, notes), notes)
    if "megatron" in fw and not stacks.megatron_lm_is_core(fw) \
            and not any(k in fw for k in ("metaseq", "fairscale", "fsdp", "torchtitan")):
        # QA round 11: "Megatron-LM" with no release named was priced as the 2020-22 stack
        # (unfused softmax attention: 160 GiB for a 7B model that runs in 80) without a word
        notes.append(f"framework {framework!r} names no 2023+ release, Megatron-Core, mcore or "
                     "Transformer Engine: Megatron-LM 2020-22 taken (torch DDP buckets, Apex "
                     "FusedAdam, unfused softmax attention, no distributed optimizer, no "
                     "asynchronous input-gradient all-reduce); state the release year or "
                     "Megatron-Core for the current stack, and training.runtime_options: "
                     "{async_dgrad: true} for a Megatron-LM from 2021-09 on (commit 3f652469)")
        if "impl=local" in flat:
            notes.append("DDP impl=local: gradient all-reduce after the backward pass "
                         "(grad_reduce_overlap off; Megatron-LM LocalDDP.allreduce_gradients)")
            return runtime_named("megatron-lm", grad_reduce_overlap=False)
        return runtime_named("megatron-lm")
    try:
        return stacks.other_stack(framework, rec, notes)
    except stacks.UnmodelledStack as exc:
        raise Unmodelable(str(exc)) from None


#: A Megatron-DeepSpeed text that turns the pipeline engine off: ``pretrain_gpt.py
#: --no-pipeline-parallel`` builds ``GPTModel`` instead of ``GPTModelPipe``, so
#: ``deepspeed.initialize`` returns a plain ``DeepSpeedEngine``.
_NO_PIPE_ENGINE = re.compile(r"no[-_ ]pipeline[-_ ]parallel|(no|without)( the)? pipeline engine")


def megatron_deepspeed_engine(fw: str, rec: RawRecord | None, notes: list[str]) -> Runtime:
    """The catalog ``deepspeed`` runtime for Megatron-DeepSpeed at ZeRO stage
    0/1, with the engine the framework text ``fw`` (lower case) runs.

    Either engine reduces gradients after the last micro-batch's backward,
    not overlapped with it (``grad_reduce_overlap`` off):

    * ``PipelineEngine`` (the default, ``GPTModelPipe``) turns
      ``enable_backward_allreduce`` off and runs ``ReduceGrads`` after the last
      micro-batch (``deepspeed/runtime/pipe/schedule.py TrainSchedule.steps``);
    * ``DeepSpeedEngine`` (``--no-pipeline-parallel``) calls
      ``allreduce_gradients`` at the end of ``backward``, after
      ``optimizer.backward``, and communicates only at the gradient-accumulation
      boundary below ZeRO-2 ("Communicate only at gradient accumulation
      boundaries": ZeRO-1 ``reduce_gradients``, else
      ``buffered_allreduce_fallback``; ``deepspeed/runtime/engine.py``). The
      ZeRO-1 optimizer reduces from backward hooks only with
      ``zero_optimization.overlap_comm``, which defaults to false below stage 3
      (``stage_1_and_2.py``: hooks ``if self.partition_gradients or
      self.overlap_comm``; ``deepspeed/runtime/zero/config.py``).

    The capabilities are the same; the note and the runtime's source name the
    engine the text runs.

    The optimizer: ``BF16_Optimizer`` (the catalog runtime) unless the record
    states the ds_config it ran (:func:`~autopar_opt.calibration.reading.stacks.states_ds_config`)
    and DeepSpeed's rule (:func:`~autopar_opt.calibration.reading.stacks.bf16_optimizer_runs`)
    then picks the ZeRO optimizer: a ZeRO stage >= 1 in the ds_config with
    ``grad_accum_dtype`` unset (it defaults to the model dtype with ZeRO on) or
    16-bit. That runs ``DeepSpeedZeroOptimizer``: no 16-bit gradient copy
    beside an fp32 buffer, bf16 reduction (``lp_grad_copy`` and
    ``fp32_grad_buffer`` off). A record that states only a ZeRO stage keeps
    ``BF16_Optimizer``: BLOOM's Megatron-DeepSpeed states ZeRO-1 and ran stage
    0, "bf16 must use z0! it implements its own zero stage 1 equivalent"
    (bigscience ``tr11-176B-ml.slurm``)."""
    rt = _megatron_deepspeed_engine(fw, notes)
    if stacks.states_ds_config(fw, rec) and not stacks.bf16_optimizer_runs(
            stacks.zero_stage_of(rec), stacks.grad_accum_dtype(fw, rec)):
        notes.append("ds_config stated: ZeRO optimizer, not BF16_Optimizer (ZeRO on with a "
                     "16-bit grad_accum_dtype, the default with ZeRO on; DeepSpeedEngine."
                     "_do_optimizer_sanity_check), gradients accumulated and reduced in bf16")
        rt = replace(rt, lp_grad_copy=False, fp32_grad_buffer=False,
                     source=rt.source + ". Optimizer: the stated ds_config runs ZeRO with a "
                     "16-bit grad_accum_dtype, so DeepSpeedEngine._do_optimizer_sanity_check "
                     "picks ZERO_OPTIMIZATION (DeepSpeedZeroOptimizer), not BF16_Optimizer "
                     "(deepspeed/runtime/engine.py)")
    return rt


def _megatron_deepspeed_engine(fw: str, notes: list[str]) -> Runtime:
    """The engine half of :func:`megatron_deepspeed_engine`."""
    if not _NO_PIPE_ENGINE.search(fw):
        notes.append("Megatron-DeepSpeed: DeepSpeed PipelineEngine, gradients all-reduced after "
                     "the last micro-batch (ReduceGrads; grad_reduce_overlap off)")
        return runtime_named("deepspeed")
    notes.append("Megatron-DeepSpeed without the pipeline engine (--no-pipeline-parallel): "
                 "DeepSpeedEngine, gradients reduced at the gradient-accumulation boundary "
                 "after the last micro-batch's backward (engine.backward -> "
                 "allreduce_gradients; overlap_comm off below ZeRO-3: grad_reduce_overlap off)")
    rt = runtime_named("deepspeed")
    return replace(rt, source=rt.source.split(" Gradient reduction after")[0]
                   + " Gradient reduction after the backward pass: --no-pipeline-parallel runs "
                   "DeepSpeedEngine, whose backward calls allreduce_gradients after "
                   "optimizer.backward and reduces only at the gradient-accumulation boundary "
                   "below ZeRO-2 (deepspeed/runtime/engine.py), and "
                   "zero_optimization.overlap_comm defaults to false below stage 3 "
                   "(deepspeed/runtime/zero/config.py)")


def fsdp_reduce_dtype(runtime: Runtime, precision: str, notes: list[str]) -> Runtime:
    """The FSDP gradient reduce dtype named in the precision text (runtime
    capability ``fp32_grad_reduce``): Composer's ``mixed_precision`` DEFAULT
    reduce-scatters in fp32, PURE in 16 bits (``get_mixed_precision``);
    PyTorch ``MixedPrecision(reduce_dtype=...)`` / torchtitan
    ``mixed_precision_reduce=...`` stated as fp32 or a 16-bit dtype."""
    flat = precision.replace(" ", "").lower()
    if "mixed_precision=default" in flat:
        notes.append("FSDP mixed_precision=DEFAULT: gradients reduce-scattered in fp32 "
                     "(Composer get_mixed_precision: reduce_dtype float32)")
        return replace(runtime, fp32_grad_reduce=True)
    m = re.search(r"reduce_?dtype[=:]\W*(\w+)|mixed_precision_reduce[=:]\W*(\w+)"
                  r"|(fp32|float32|bf16|bfloat16|fp16)(gradient|grad)?reduc", flat)
    if m:
        word = next(g for g in m.groups() if g and g not in ("gradient", "grad"))
        fp32 = word in ("fp32", "float32", "torch.float32")
        notes.append(f"gradient reduce dtype {word} (stated): fp32_grad_reduce={fp32}")
        return replace(runtime, fp32_grad_reduce=fp32)
    return runtime


def fp16_grad_dtype(runtime: Runtime, dtype: str, framework: str, precision: str,
                    notes: list[str]) -> Runtime:
    """An fp16 run's gradient dtype (runtime capability ``fp16_fp32_grads``):
    fp32 accumulation and all-reduce only where the framework or precision
    text names Megatron-LM's ``--accumulate-allreduce-grads-in-fp32``
    (``arguments.py`` forces it for bf16 only); else the gradients and their
    reduction stay fp16 (:func:`autopar_opt.cost.state.reduced_grad_bytes`)."""
    if dtype != "fp16" or not runtime.fp32_grad_buffer:
        return runtime
    if stacks.flag_stated(framework + " " + precision, "accumulate-allreduce-grads-in-fp32"):
        notes.append("fp16 with --accumulate-allreduce-grads-in-fp32 (stated): gradients "
                     "accumulated and all-reduced in fp32")
        return replace(runtime, fp16_fp32_grads=True)
    notes.append("fp16: gradients accumulated and reduced in fp16 (Megatron-LM forces fp32 "
                 "accumulation only for bf16; DeepSpeed communication_data_type defaults to fp16)")
    return runtime
