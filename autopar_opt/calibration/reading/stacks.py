"""Software stacks a record's framework text names beyond the five the
published-runs file was built from, and the fallback for a text that names
none: map each to a catalog runtime (:mod:`autopar_opt.ir.runtime`) with the
capability overrides its documented defaults call for, and say so in the
record's notes. Nothing here scales throughput; each override switches a
piece of physics (an overlap, a fused kernel, a gradient dtype) with its
source.

Stacks and their documented defaults
------------------------------------
Composer / llm-foundry, 2023 benchmark tables
    The catalog ``pytorch-fsdp`` runtime with ``flash_v2_attention`` off for
    records from the four 2023 sections of llm-foundry's
    ``scripts/train/benchmarking/README.md`` (H100 80GB BF16, H100 80GB FP8,
    A100 80GB and A100 40GB "with 1600 Gbps node-node interconnect (RoCE)"):
    the scripts behind them default to ``attn_impl: triton``, the pre-MLIR
    Triton kernel ``flash_attn_triton`` (FlashAttention-1-class). The H100
    and A100-80GB tables: ``submit_benchmarks.py`` @a7c75677 (PR #543,
    llm-foundry v0.3.0, ``--attn_impl`` default ``triton``; its FP8 runs
    install ``flash-attn==1.0.7`` and Transformer Engine v0.10). The A100-40GB
    table and the A100-80GB 70B rows (``bf16``/``PURE``) predate it: the
    MosaicGPT-era README ("TODO: Update tables with torch 2.0 after next
    Composer release") and its ``submit_benchmarks.py`` (@12a63191: ``--attn_impl``
    default ``triton``, ``--fsdp_config_mixed_precision`` default ``PURE``,
    ``--gpu_types`` default ``a100_40gb``, image ``pytorch:1.13.1_cu117``),
    whose ``triton_flash_attn_fn`` imports ``flash_attn.flash_attn_triton``
    ("Please install flash-attn==1.0.3.post0 and triton==2.0.0.dev20221202").
    A record whose framework text states ``attn_impl: triton`` runs that
    kernel too: the later "Large Scale" table (PR #838, 5e85bd62) was run by
    its ``sweep.py`` with ``attn_impl: triton`` for 13B and 30B and
    ``attn_impl: flash`` (flash-attn 2.4.2 from ``.[gpu-flash2]``) for the
    others, which keep the FlashAttention-2-class kernel.
NeMo before Megatron-Bridge (NeMo 1.x/2.0: NeMo + Megatron-Core + TE)
    The Megatron-Bridge capabilities (TP/DP overlap, distributed optimizer),
    but gradients reduced in fp32 and no FP8 primary weights by default:
    NeMo 1.x ``MegatronBaseModel.setup_mcore_distributed_parallel`` sets
    ``grad_reduce_in_fp32 = (optim.grad_sync_dtype, default 'fp32') ==
    'fp32'``; NeMo 2.0 ``bf16_mixed_plugin`` sets ``grad_reduce_in_fp32=True``
    (``nemo/collections/llm/recipes/precision/mixed_precision.py``); NeMo 1.x
    FP8 configs carry ``fp8_params: false``. A text stating
    ``grad_reduce_in_fp32=False`` / ``fp8_params`` overrides either. NeMo
    releases from 25.09 are taken as Megatron-Bridge (an assumption: the
    calibration file's NeMo 25.11+ runs name Megatron-Bridge), 22.xx and
    earlier as Megatron-LM modules before Transformer Engine.
torchtitan
    The catalog ``torchtitan`` runtime: FSDP2 with prefetch, reduce-scatter in
    fp32 (``training.mixed_precision_reduce = "float32"``), fused AdamW
    (``optimizer.implementation = "fused"``), async TP off unless the text says
    ``async TP`` (``enable_async_tensor_parallel``). Data parallelism is FSDP
    by default (``data_parallel_shard_degree = -1``: every remaining GPU
    shards), and its tensor parallelism always shards the sequence of the
    norms (``SequenceParallel`` in ``parallelize_llama``).
    Its Llama keeps ``wq``/``wk``/``wv`` and ``w1``/``w3`` as separate GEMMs
    (``torchtitan/models/llama/model.py``): ``fused_projections`` off.
PyTorch FSDP / FSDP2 (plain), HF accelerate or Trainer with FSDP
    ``pytorch-fsdp`` without Composer's fused cross-entropy: the loss is the
    user's plain PyTorch ``F.cross_entropy`` (``eager_cross_entropy``, as for
    DDP, DeepSpeed ZeRO and Colossal-AI), reduce-scatter in the parameter
    dtype (``MixedPrecision.reduce_dtype`` defaults to ``param_dtype``;
    torch.distributed.fsdp docs).
KempnerForge (FSDP2 + DTensor tensor parallelism)
    The plain FSDP runtime with gradient sync off on every micro-batch but the
    last (``fsdp_no_sync_accumulation``: ``kempnerforge/training/grad.py``
    ``maybe_no_sync`` calls ``model.set_requires_gradient_sync(False)`` unless
    ``micro_step + 1 == grad_accum_steps``), so every layer's unsharded
    gradient is kept in the reduce dtype across the micro-batches; the output
    head's logits all-gathered to every tensor-parallel rank for the loss
    (``loss_parallel`` off: ``kempnerforge/distributed/tensor_parallel.py``,
    ``ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate())``).
fairscale / metaseq FSDP (+ Megatron tensor parallelism)
    Prefetching FSDP (all-gathers on their own stream, issued as the CPU runs
    ahead: Zhao et al. 2023, Sec. 3.3) with unfused softmax attention (2022
    code, no FlashAttention), Megatron TP without sequence parallelism,
    reduce-scatter in the parameter dtype (fairscale
    ``FullyShardedDataParallel(fp32_reduce_scatter=False)``).
DeepSpeed ZeRO (without Megatron)
    Gradients reduced in the 16-bit dtype (``communication_data_type``
    defaults to the model's fp16/bf16: ``DeepSpeedEngine.
    communication_data_type``; at stages 0/1 in fp16 the ``FP16_Optimizer``
    all-reduces fp16 gradients, ``fp32_allreduce`` default false); no
    ``BF16_Optimizer`` copy with ZeRO on unless the text states an fp32
    ``grad_accum_dtype`` at stage 1 (:func:`bf16_optimizer_runs`: with ZeRO on
    ``grad_accum_dtype`` defaults to the model dtype, and the engine picks
    ``BF16_Optimizer`` only for fp32 accumulation at stage 0/1); ``overlap_comm`` defaults to true for
    stage 3 only (``deepspeed/runtime/zero/config.py``, validator
    ``overlap_comm_valid``); stage-3 parameters are prefetched
    (``stage3_prefetch_bucket_size``). The loss is the host framework's plain
    PyTorch ``F.cross_entropy`` (Hugging Face models, Lightning modules:
    ``eager_cross_entropy``, on the engine's 16-bit logits). Megatron-DeepSpeed
    keeps the catalog ``deepspeed`` runtime (PipelineEngine: gradients reduced
    after the last micro-batch) and Megatron's vocabulary-parallel loss, with
    unfused attention unless its text names a FlashAttention-2 kernel
    (``--use-flash-attn-v2``: :func:`named_flash_attention`).
Colossal-AI
    Bucketed gradient reduction overlapped with the backward
    (``HybridParallelPlugin(overlap_communication=True)``), fused
    ``HybridAdam``, no parameter prefetch for Gemini/ZeRO-3 (``GeminiPlugin
    (max_prefetch=0)``), flash attention only when enabled
    (``enable_flash_attention=False``). The loss is the user's plain PyTorch
    one (``eager_cross_entropy``, from the ``pytorch-ddp`` runtime).
HF transformers Trainer / accelerate (DDP)
    PyTorch DDP with SDPA attention (transformers >= 4.36 default
    ``attn_implementation="sdpa"``) and the unfused ``adamw_torch``
    (``TrainingArguments.optim`` default; ``adamw_torch_fused`` is opt-in).
    With any backend (DDP, FSDP, DeepSpeed) the model is the Transformers
    modeling code: ``fused_projections`` off (Llama's ``q_proj``/``k_proj``/
    ``v_proj`` and ``gate_proj``/``up_proj`` are separate GEMMs,
    ``modeling_llama.py``), and its loss casts the logits to fp32 before
    ``cross_entropy`` (``loss_fp32_upcast``: ``ForCausalLMLoss``,
    ``src/transformers/loss/loss_utils.py``). A text that also names Megatron
    (transformers for the tokenizer) is Megatron's.
Megatron-LM 2023 and later
    Megatron-LM's training loop runs Megatron-Core (Transformer Engine,
    flash attention) since 2023: the ``megatron-core`` runtime with the
    overlap flags the text names (off by default). A text that names a
    FlashAttention-2 kernel ("FlashAttention-2", "flash attention 2",
    ``flash-attn==2.x``, "FA2") and neither FlashAttention-3 nor cuDNN
    attention runs a FlashAttention-2-class kernel, which is not
    Hopper-native (runtime ``hopper_attention`` off: about 35% of H100 peak
    against up to 75% for FlashAttention-3, Shah et al. 2024, Sec. 1) -
    except where the text also names Transformer Engine and the GPU is
    sm90+ (Hopper, Blackwell): TE's ``get_attention_backend`` then prefers
    cuDNN's FusedAttention over FlashAttention ("to give FusedAttention
    preference on Hopper+"), so the kernel is Hopper-native whether or not
    flash-attn 2 is installed. (This rule was added after the FlagPerf
    held-out rows were seen; it is restricted to what TE's source says.)
MaxText / JAX / PaxML / T5X
    Not modelled: XLA's SPMD partitioner and its async-collective and
    collective-matmul overlaps have no documented capability set in the
    catalog (which documents PyTorch/CUDA stacks).
Anything else
    By the record's own fields: ZeRO-3/FSDP stated -> plain PyTorch FSDP
    (prefetch); ZeRO-1/2 -> DeepSpeed ZeRO; tensor or pipeline parallelism ->
    Megatron-Core with its r0.8 defaults (overlap flags off); else PyTorch DDP.
    The choice is written into the notes.
"""

from __future__ import annotations

import re
from dataclasses import replace

from autopar_opt.calibration.reading.schema import RawRecord
from autopar_opt.ir.runtime import Runtime, runtime_named
from autopar_opt.ir.training import BF16_WEIGHT_DTYPES, FP32_DTYPES


class UnmodelledStack(ValueError):
    """A framework the runtime catalog cannot describe; the message says why."""


def _flat(text: str) -> str:
    return re.sub(r"[\s_-]+", "", text.lower())


def _dashed(text: str) -> str:
    """``text`` lower-cased with every run of spaces, underscores and dashes one dash: word
    boundaries kept, so a negation after a key stays a separate word."""
    return re.sub(r"[\s_-]+", "-", text.lower())


def _negated(fw: str, key: str) -> bool:
    """Whether the text turns ``key`` off, read with its word boundaries (:func:`_dashed`):
    ``no``/``without``/``disable(d)`` before it, or ``false``/``off``/``0``/``disabled``/
    ``not set``/``not passed`` after it ("--overlap-grad-reduce off by default", which the
    flattened reading took as the flag passed: QA, session 37)."""
    k = re.escape(_dashed(key).strip("-"))
    return bool(re.search(
        rf"(?<![a-z0-9])(no|without|disabled?|disabling)-(the-)?{k}(?![a-z0-9])"
        rf"|(?<![a-z0-9]){k}-?[=:]?-?(false|off|0|disabled|not-set|not-passed|unset)(?![a-z0-9])",
        _dashed(fw)))


def flag_stated(fw: str, *keys: str) -> bool | None:
    """``True``/``False`` when the framework text sets one of ``keys`` on or
    off (``--key``, ``key=true``, ``key: false``, ``no key``, ``key off by
    default``), else ``None``. The key is found with separators ignored
    (``tp_comm_overlap`` = ``--tp-comm-overlap``); a negation with word
    boundaries too (:func:`_negated`)."""
    flat = _flat(fw)
    for key in keys:
        k = _flat(key)
        if _negated(fw, key) or re.search(
                rf"(no|disable|without)-?{re.escape(k)}|{re.escape(k)}[=:]?(false|off|0)\b", flat):
            return False
        if k in flat:
            return True
    return None


def _zero_field(rec: RawRecord | None) -> tuple[int | None, str]:
    """(ZeRO stage, FSDP text) as the record's ``parallelism`` states them."""
    if rec is None:
        return None, ""
    z = rec.parallelism.zero_stage
    fsdp = str(rec.parallelism.fsdp or "").lower()
    stage = int(z) if isinstance(z, (int, float)) and not isinstance(z, bool) else None
    return stage, fsdp


def _precision(rec: RawRecord | None) -> str:
    """The record's ``training.precision`` text ("" when not stated)."""
    return "" if rec is None else str(rec.training.precision or "")


def shards_weights(rec: RawRecord | None) -> bool:
    """The record states ZeRO-3/FSDP sharding: ``zero_stage`` 3, or, with no
    stage stated, an FSDP text that is not a negation (an explicit field
    beats the text)."""
    stage, fsdp = _zero_field(rec)
    if stage is not None:
        return stage == 3
    return bool(fsdp) and not re.match(r"\s*(none|no\b|false|off|0\b|ddp)", fsdp) \
        and "no_shard" not in fsdp


def zero_stage_of(rec: RawRecord | None) -> int:
    """ZeRO stage the record states (its ``zero_stage``; else 3 for an FSDP
    text that shards; else 0)."""
    stage, _ = _zero_field(rec)
    if stage is not None:
        return stage
    return 3 if shards_weights(rec) else 0


def _tp_or_pp(rec: RawRecord | None) -> bool:
    return rec is not None and any((v or 1) > 1 for v in (rec.parallelism.tp, rec.parallelism.pp))


def nemo(fw: str, notes: list[str]) -> Runtime:
    """NeMo 1.x/2.0 (see the module docstring); a NeMo Megatron release of
    2022 or earlier (``22.xx``) ran Megatron-LM's own modules before Transformer
    Engine: the ``megatron-lm`` runtime."""
    release = re.search(r"\b(\d{2})\.(\d{2})\b", fw)
    if release and (int(release.group(1)), int(release.group(2))) >= (25, 9):
        notes.append(f"NeMo {release.group(0)}: Megatron-Bridge era (the file's NeMo 25.11+ "
                     "records name Megatron-Bridge; taken as from 25.09)")
        return runtime_named("megatron-bridge")
    if release and int(release.group(1)) <= 22:
        notes.append(f"NeMo Megatron {release.group(0)}: Megatron-LM modules before Transformer "
                     "Engine (megatron-lm runtime: no fused attention, no TP overlap)")
        return replace(runtime_named("megatron-lm"), name="nemo-megatron")
    fp32 = flag_stated(fw, "grad_reduce_in_fp32", "grad-reduce-in-fp32")
    if re.search(r"gradsyncdtype[=:]?(bf16|bfloat16|fp16)", _flat(fw)):    # NeMo 1.x optim key
        fp32 = False
    fp8w = flag_stated(fw, "fp8_params", "fp8-param-gather", "fp8_param_gather")
    rt = runtime_named("megatron-bridge", fp32_grad_buffer=fp32 is not False,
                       fp8_primary_weights=bool(fp8w))
    notes.append("NeMo before Megatron-Bridge: Megatron-Core + TE with TP/DP overlap and the "
                 f"distributed optimizer; gradients reduced in {'fp32' if rt.fp32_grad_buffer else 'bf16'} "
                 "(NeMo default grad_reduce_in_fp32 = True unless stated), FP8 primary weights "
                 f"{'on' if rt.fp8_primary_weights else 'off (fp8_params default false)'}")
    return replace(rt, name="nemo")


def torchtitan(fw: str, notes: list[str]) -> Runtime:
    """torchtitan (see the module docstring): async TP when the text says so."""
    async_tp = flag_stated(fw, "async tp", "async-tp", "asynctp", "enable_async_tensor_parallel",
                       "async tensor parallel")
    rt = runtime_named("torchtitan", tp_comm_overlap=bool(async_tp))
    notes.append("torchtitan: FSDP2 prefetch, fp32 gradient reduce-scatter "
                 "(mixed_precision_reduce default float32), fused AdamW, async TP "
                 f"{'on' if async_tp else 'off (default)'}")
    return rt


#: Sections of llm-foundry's benchmarking README whose rows ran attn_impl: triton
#: (module docstring, "Composer / llm-foundry, 2023 benchmark tables").
LLMFOUNDRY_TRITON_SECTIONS = ('"H100 80GB BF16"', '"H100 80GB FP8"', '"A100 80GB with 1600 Gbps',
                              '"A100 40GB with 1600 Gbps')


#: A framework text naming llm-foundry's Triton attention (``attn_config.attn_impl``).
LLMFOUNDRY_TRITON_TEXT = re.compile(r"attn_impl\s*[:=]\s*triton")


def llmfoundry_triton_table(rec: RawRecord | None) -> bool:
    """Whether ``rec`` ran llm-foundry's FlashAttention-1-class Triton kernel:
    it comes from one of the 2023 benchmark tables (module docstring) or its
    framework text states ``attn_impl: triton``."""
    if rec is None:
        return False
    if LLMFOUNDRY_TRITON_TEXT.search(str(rec.training.framework or "").lower()):
        return True
    citation, locator = str(rec.source.citation or ""), str(rec.source.locator or "")
    return ("llm-foundry" in citation and "benchmarking/README.md" in citation
            and any(s in locator for s in LLMFOUNDRY_TRITON_SECTIONS))


def plain_fsdp(label: str, notes: list[str]) -> Runtime:
    """Plain PyTorch FSDP/FSDP2 (also Lightning's and HF's): prefetch, gradients
    reduce-scattered in the parameter dtype, and the user's plain PyTorch loss
    (``eager_cross_entropy``: ``F.cross_entropy`` on the logits, as for every
    non-Megatron stack whose loss is the model's own; Composer's fused one is
    llm-foundry's, not FSDP's)."""
    notes.append(f"{label}: PyTorch FSDP with prefetch, gradients reduce-scattered in the "
                 "parameter dtype (MixedPrecision.reduce_dtype defaults to param_dtype), "
                 "plain PyTorch cross-entropy (no fused loss kernel)")
    return replace(runtime_named("pytorch-fsdp", fused_cross_entropy=False,
                                 eager_cross_entropy=True), name="pytorch-fsdp")


#: A KempnerForge text that says torch.compile was off (the trainer's default is on:
#: ``TrainingConfig.compile_model = True``).
_COMPILE_OFF = re.compile(r"(torch\.)?compile(_model)?\s*(off|[:=]\s*false)|without torch\.compile")


#: A framework text naming PyTorch's per-parameter FSDP (``fully_shard``, FSDP2).
_FSDP2 = re.compile(r"fsdp\s*2|fully_shard")


def fsdp2_if_stated(fw: str, rt: Runtime, notes: list[str]) -> Runtime:
    """``rt`` with FSDP2's copies on (runtime ``fsdp2_copies``) where the text ``fw``
    names FSDP2 or ``fully_shard``; a text that names neither is read as the
    FlatParameter FSDP (FSDP1), which has none, and says so."""
    if _FSDP2.search(fw):
        notes.append("FSDP2 (fully_shard) stated: each gather copied out into the unsharded "
                     "parameters and each gradient copied into the reduce-scatter buffer on the "
                     "compute stream (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py)")
        return replace(rt, fsdp2_copies=True)
    notes.append("FSDP version not stated: the FlatParameter FSDP (FSDP1), gathering into the "
                 "flat parameter in place (state FSDP2 or fully_shard otherwise)")
    return rt


def kempnerforge(notes: list[str], fw: str = "") -> Runtime:
    """KempnerForge (module docstring): plain FSDP2 with gradient sync off until
    the last micro-batch; separate Q, K, V, gate and up projections, each a DTensor
    ``ColwiseParallel`` that redistributes its own input under tensor parallelism
    (``tp_input_per_projection``) where the text ``fw`` says torch.compile was off.
    Compiled (KempnerForge's default), AOTAutograd's common-subexpression pass
    (``torch._functorch.compile_utils.fx_graph_cse``, on by default) merges the
    identical functional all-gathers of one input into one, as a fused plan runs."""
    rt = plain_fsdp("KempnerForge", notes)
    notes.append("KempnerForge: FSDP2 (fully_shard): each gather copied out into the unsharded "
                 "parameters, each gradient kept unsharded or copied into the reduce-scatter "
                 "buffer on the compute stream (cost/fsdp_copies.py)")
    notes.append("KempnerForge: gradient sync off on all but the last micro-batch "
                 "(training/grad.py maybe_no_sync: set_requires_gradient_sync(False)), so each "
                 "layer's unsharded gradient is held in the reduce dtype across the micro-batches "
                 "and reduce-scattered once per iteration; output head ColwiseParallel with "
                 "Replicate output (distributed/tensor_parallel.py): the logits all-gathered to "
                 "every TP rank, the loss on the whole vocabulary (no loss parallelism)")
    eager = bool(_COMPILE_OFF.search(fw.lower()))
    notes.append("KempnerForge: separate q/k/v and gate/up projections, each its own DTensor "
                 "ColwiseParallel (distributed/tensor_parallel.py _build_block_tp_plan, no "
                 "PrepareModuleInput): "
                 + ("torch.compile off, one tensor-parallel input redistribution per projection"
                    if eager else "torch.compile on (stated or its default), the identical "
                    "redistributions of one input merged by AOTAutograd's CSE: one per sub-block"))
    notes.append("KempnerForge: torch SDPA with no backend forced (sdpa_backend 'auto'), on torch "
                 "2.11.0+cu128 with cuDNN 9.19.0.56 (uv.lock at every commit of its published "
                 "benchmarks): PyTorch puts cuDNN attention first on sm90/sm100 when the runtime "
                 "cuDNN is newer than 9.15 (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp "
                 "check_prefer_cudnn_attention), so cuDNN fused attention on Hopper and Blackwell, "
                 "FlashAttention-2 on Ampere; its own H200 profile lists "
                 "aten::_cudnn_attention_backward (benchmarks/profiling/13b_24gpu_profiling.md)")
    notes.append("KempnerForge: the token embedding replicated over the tensor-parallel ranks, "
                 "and in a pipeline stage the output head too (distributed/tensor_parallel.py "
                 "apply_tensor_parallel: 'Token embedding stays replicated'; PP stages run without "
                 "SequenceParallel and shard the output head only with it): each rank holds and "
                 "computes the whole layer; torch.distributed.pipelining reduce-scatters every FSDP "
                 "gradient after the schedule's last backward (stage.py perform_reduce_grad)")
    return replace(rt, fsdp_no_sync_accumulation=True, loss_parallel=False, fsdp2_copies=True,
                   fused_projections=False, tp_input_per_projection=eager, hopper_attention=True,
                   tp_embedding=False, tp_head_in_pipeline=False,
                   pipeline_reduce_after_schedule=True)


def optimizer_of(framework: str, dtype: str, notes: list[str]) -> str:
    """The optimizer key (:data:`~autopar_opt.ir.training.OPTIMIZER_BYTES`) a stack
    trains with: ``adam_bf16`` for KempnerForge in bf16/FP8, which casts the model to
    its ``mixed_precision`` dtype before sharding (``kempnerforge/distributed/parallel.py``
    ``build_parallel_model``: ``model.to(dtype=param_dtype)``;
    ``kempnerforge/config/training.py`` ``param_dtype``: "Resolve mixed_precision to
    the master weight dtype", bf16 for bf16 and for fp8; the same at 01b461a and 3ad9d9a),
    so its weights, gradients and AdamW moments are bf16 with no fp32 master; else
    mixed-precision Adam (``adam_mixed``, 16-bit weights with an fp32 master copy)."""
    if "kempnerforge" in framework.lower() and dtype in BF16_WEIGHT_DTYPES:
        notes.append("KempnerForge: the model is cast to bf16 before FSDP2 shards it "
                     "(distributed/parallel.py model.to(dtype=param_dtype)): bf16 weights and "
                     "AdamW moments, no fp32 master copy (optimizer adam_bf16, 2 + 2 + 4 bytes "
                     "per parameter)")
        return "adam_bf16"
    if dtype in FP32_DTYPES:        # fp32 training keeps no 16-bit copy: fp32 Adam
        return "adam_fp32"
    return "adam_mixed"


def fairscale(notes: list[str]) -> Runtime:
    notes.append("fairscale/metaseq FSDP: prefetching FSDP, unfused softmax attention (no "
                 "FlashAttention), Megatron TP without sequence parallelism, fp16/bf16 "
                 "reduce-scatter (fp32_reduce_scatter=False)")
    return replace(runtime_named("pytorch-fsdp", flash_attention=False, hopper_attention=False,
                                 fused_cross_entropy=False), name="fairscale-fsdp")


#: A ``grad_accum_dtype`` stated in a framework or precision text (DeepSpeed
#: ds_config ``data_types.grad_accum_dtype``).
_GRAD_ACCUM = re.compile(r"gradaccumdtype[=:\"']*(bf16|bfloat16|fp16|float16|fp32|float32)")


def grad_accum_dtype(fw: str, rec: RawRecord | None) -> str | None:
    """``"fp32"``/``"16"`` for the DeepSpeed ``grad_accum_dtype`` the framework
    text or the record's precision text states, else ``None``."""
    precision = _precision(rec)
    m = _GRAD_ACCUM.search(_flat(fw + " " + precision))
    return None if m is None else ("fp32" if "32" in m.group(1) else "16")


def states_ds_config(fw: str, rec: RawRecord | None) -> bool:
    """The framework or precision text states the DeepSpeed config it ran
    (names ``ds_config`` or a ``grad_accum_dtype``)."""
    precision = _precision(rec)
    return "dsconfig" in _flat(fw + " " + precision) or grad_accum_dtype(fw, rec) is not None


def bf16_optimizer_runs(stage: int, accum: str | None) -> bool:
    """Whether DeepSpeed runs ``BF16_Optimizer`` for a bf16 model at ZeRO
    stage ``stage`` with the stated ``grad_accum_dtype`` ``accum`` (``None``:
    not stated), DeepSpeed's rule read literally (``deepspeed/runtime/engine.py``):
    ``get_data_types`` defaults ``grad_accum_dtype`` to fp32 for a bf16 model
    without ZeRO and to the model dtype with ZeRO on (stage >= 1);
    ``_do_optimizer_sanity_check`` returns ``BFLOAT16`` (``BF16_Optimizer``)
    for a bf16 model with fp32 ``grad_accum_dtype`` at stage 1 without offload
    (and without ZeRO), else ``ZERO_OPTIMIZATION`` with ZeRO on
    (``DeepSpeedZeroOptimizer``: autograd accumulates the bf16 ``.grad``, no
    fp32 gradient buffer, reduction in ``communication_data_type``, default
    the model dtype). CPU offload is not read (no record states it). The
    stage-0 default is that of the DeepSpeed releases of the records (0.11:
    fp32 for bf16 without ZeRO); later releases default to the model dtype
    everywhere, which changes nothing at stage >= 1."""
    if accum is None:
        accum = "fp32" if stage == 0 else "16"
    return accum == "fp32" and stage <= 1


def deepspeed_zero(fw: str, rec: RawRecord | None, notes: list[str]) -> Runtime:
    """DeepSpeed ZeRO without Megatron (see the module docstring)."""
    stage = zero_stage_of(rec)
    overlap = flag_stated(fw, "overlap_comm", "overlap-comm")
    overlap = (stage == 3) if overlap is None else overlap
    precision = _precision(rec).lower()
    fp16 = "fp16" in precision and "bf16" not in precision
    if stage <= 1 and fp16:
        rt = runtime_named("deepspeed", grad_reduce_overlap=overlap, lp_grad_copy=False,
                           fp32_grad_buffer=False)
        notes.append(f"DeepSpeed ZeRO-{stage} fp16: FP16_Optimizer, gradients all-reduced in "
                     f"fp16 (fp32_allreduce default false), overlap_comm {overlap}, attention "
                     "unfused unless the arch says flash")
    elif bf16_optimizer_runs(stage, grad_accum_dtype(fw, rec)):
        rt = runtime_named("deepspeed", grad_reduce_overlap=overlap)
        notes.append(f"DeepSpeed ZeRO-{stage}: BF16_Optimizer fp32 gradient buffers (bf16; "
                     "grad_accum_dtype fp32, the default without ZeRO or as stated), "
                     f"overlap_comm {overlap}, attention unfused unless the arch says flash")
    elif stage <= 1:
        rt = runtime_named("deepspeed", grad_reduce_overlap=overlap, lp_grad_copy=False,
                           fp32_grad_buffer=False)
        notes.append(f"DeepSpeed ZeRO-{stage} bf16: ZeRO optimizer, not BF16_Optimizer "
                     "(grad_accum_dtype defaults to the model dtype with ZeRO on; "
                     "DeepSpeedEngine._do_optimizer_sanity_check), gradients accumulated and "
                     f"reduced in bf16, overlap_comm {overlap}, attention unfused unless the "
                     "arch says flash")
    else:
        rt = runtime_named("deepspeed", grad_reduce_overlap=overlap, lp_grad_copy=False,
                           fp32_grad_buffer=False)
        notes.append(f"DeepSpeed ZeRO-{stage}: gradients reduced in the 16-bit dtype "
                     f"(communication_data_type default), overlap_comm {overlap}"
                     + (" (stage-3 default), parameter prefetch" if stage == 3 else "")
                     + ", attention unfused unless the arch says flash")
    return _zero_runtime(rt)


def _zero_runtime(rt: Runtime) -> Runtime:
    """``rt`` as the ``deepspeed-zero`` runtime of a ZeRO optimizer without Megatron: the
    loss is the host framework's plain PyTorch ``F.cross_entropy`` (HF/Lightning) unless a
    Megatron-DeepSpeed caller sets Megatron's back (records.runtime_for)."""
    return replace(rt, name="deepspeed-zero", loss_grad_cast=False, eager_cross_entropy=True)


def internevo(fw: str, rec: RawRecord | None, notes: list[str]) -> Runtime:
    """InternEvo's hybrid ZeRO optimizer (``internlm/solver/optimizer/hybrid_zero_optim.py``,
    read at InternLM/InternEvo c628a8c): every parameter's gradient bucket is reduced with
    ``reduce_rank=None``, i.e. ``reduce_tensor``'s ``dist.all_reduce`` over the data-parallel
    group (each rank keeps its partition: the ``deepspeed`` runtime's
    ``zero_grad_all_reduce``), in the 16-bit model dtype; each rank steps its fp32 partition
    and broadcasts its updated 16-bit parameters (``broadcast_params``: one NCCL broadcast
    per rank of its partition, one after another: runtime ``zero_param_broadcast``).
    ``overlap_sync_grad`` overlaps the reduction with the backward pass and
    ``overlap_sync_param`` the broadcast with the next forward, as the text states them
    (the configs' defaults, ``configs/7B_sft.py``: True and False)."""
    stage = zero_stage_of(rec)
    grad = flag_stated(fw, "overlap_sync_grad")
    param = flag_stated(fw, "overlap_sync_param")
    grad, param = (True if grad is None else grad), (False if param is None else param)
    notes.append(f"InternEvo hybrid ZeRO-{stage} optimizer: gradient buckets all-reduced in the "
                 f"model dtype (hybrid_zero_optim.py, reduce_rank None) overlapped with the backward "
                 f"{grad} (overlap_sync_grad), updated parameters broadcast by each rank in turn "
                 f"(broadcast_params: one NCCL broadcast per rank), overlapped {param} "
                 f"(overlap_sync_param); the DeepSpeed ZeRO runtime "
                 "otherwise (framework family deepspeed in the regimes)")
    return _zero_runtime(runtime_named("deepspeed", grad_reduce_overlap=grad,
                                       param_gather_overlap=param, lp_grad_copy=False,
                                       fp32_grad_buffer=False, zero_param_broadcast=True))


def colossal(fw: str, notes: list[str]) -> Runtime:
    """Colossal-AI's fp16 engine casts the model to 16 bits (no ``torch.autocast``):
    a plain PyTorch softmax, as Hugging Face GPT-2's eager attention runs
    (``nn.functional.softmax(attn_weights, dim=-1)`` in the scores' dtype), keeps a
    16-bit output (``fp32_attention_softmax`` off, :mod:`autopar_opt.cost.scores`)."""
    flash = bool(flag_stated(fw, "flash", "enable_flash_attention"))
    notes.append("Colossal-AI: overlapped gradient reduction, fused HybridAdam, no ZeRO-3 "
                 f"prefetch (GeminiPlugin max_prefetch=0), flash attention {flash}"
                 + ("" if flash else "; a 16-bit softmax in the unfused attention (the fp16 "
                    "engine casts the model; no autocast)"))
    return replace(runtime_named("pytorch-ddp", flash_attention=flash, fused_optimizer=True,
                                 fsdp_prefetch=False, fp32_attention_softmax=False),
                   name="colossalai")


def huggingface(fw: str, rec: RawRecord | None, notes: list[str]) -> Runtime:
    """HF Trainer / accelerate: the backend its fields (or text) name, running
    the Transformers modeling code, whose Llama-family attention and MLP keep
    Q, K, V and gate, up as separate GEMMs (``fused_projections`` off:
    ``modeling_llama.py``; models whose own code fuses them keep their count,
    :mod:`autopar_opt.ir.runtime`). On every backend the loss is plain PyTorch
    cross-entropy on logits the model casts to fp32 first
    (``eager_cross_entropy`` with ``loss_fp32_upcast``): ``ForCausalLMLoss``
    does ``logits = logits.float()`` before ``nn.functional.cross_entropy``
    ("Upcast to float if we need to compute the loss to avoid potential
    precision issues", ``src/transformers/loss/loss_utils.py``, transformers
    4.46 and later), and Llama's ``LlamaForCausalLM.forward`` cast its logits
    with ``.float()`` in the releases before. Approximation: the older
    modeling code of other models (GPT-2's ``GPT2LMHeadModel`` before 4.46)
    computed the loss in the model dtype; the stack is read as the current one."""
    notes.append("HF Transformers modeling code: separate q/k/v (and gate/up) projections "
                 "where the model defines them so (fused_projections off); loss on the "
                 "logits cast to fp32 (ForCausalLMLoss: logits.float())")
    if "deepspeed" in fw or (_zero_field(rec)[0] or 0) > 0:
        notes.append("HF Trainer/accelerate: SDPA attention (transformers default)")
        return replace(deepspeed_zero(fw, rec, notes), flash_attention=True,
                       fused_projections=False, loss_fp32_upcast=True)
    if "fsdp" in fw or shards_weights(rec):
        return replace(fsdp2_if_stated(fw, plain_fsdp("HF Trainer/accelerate with FSDP", notes),
                                       notes), fused_projections=False, loss_fp32_upcast=True)
    fused = "adamw_torch_fused" in fw or "fused adam" in fw
    notes.append("HF Trainer/accelerate with DDP: SDPA attention, "
                 + ("fused AdamW (stated)" if fused else "unfused adamw_torch (Trainer default)"))
    return runtime_named("pytorch-ddp", fused_optimizer=fused, fused_projections=False,
                         loss_fp32_upcast=True)


#: ``--attention-backend unfused`` (Megatron-Core ``AttnBackend.unfused``,
#: ``megatron/training/arguments.py``): the core ``DotProductAttention`` with
#: an unfused softmax that stores the ``a·s²`` scores, not a flash kernel.
_UNFUSED_ATTENTION = re.compile(r"attention[\s_-]*backend[\s=:]*unfused")
#: A FlashAttention-2 kernel named in a framework text ("FlashAttention-2",
#: "flash attention 2", "flash-attn==2.5.8", "FA2"), and the Hopper-native kernels
#: that override it when the text names them too (FlashAttention-3, cuDNN attention).
_FA2 = re.compile(r"flash[\s_-]*att(?:n|ention)[\s_-]*(?:v|version)?[\s_=-]*2(?!\d)|\bfa-?2\b")
_HOPPER_NATIVE_ATTENTION = re.compile(
    r"flash[\s_-]*att(?:n|ention)[\s_-]*(?:v|version)?[\s_=-]*3(?!\d)|\bfa-?3\b"
    r"|cudnn[\w\s-]{0,24}?(?:attention|attn|sdpa)|fusedattention|nvte_fused_attn\s*=\s*1")
#: Transformer Engine named in a framework text (``--transformer-impl
#: transformer_engine``, "Transformer Engine", ``transformer_engine``).
_TRANSFORMER_ENGINE = re.compile(r"transformer[\s_-]*engine")
#: A GPU of compute capability 9.0 or later named in a record's
#: ``hardware.gpu_type`` (Hopper H100/H200/H800/H20/GH200, Blackwell B100/B200/GB200).
_SM90_PLUS = re.compile(r"(?<![a-z0-9])g?(?:h(?:100|200|800|20)|b(?:100|200|300))(?!\d)"
                        r"|hopper|blackwell")


def sm90_plus(rec: RawRecord | None) -> bool:
    """Whether the record's ``hardware.gpu_type`` names a GPU of compute
    capability 9.0 or later (:data:`_SM90_PLUS`)."""
    return rec is not None and bool(_SM90_PLUS.search(str(rec.hardware.gpu_type or "").lower()))


def te_picks_fused_attention(fw: str, rec: RawRecord | None) -> bool:
    """Transformer Engine on an sm90+ GPU runs cuDNN's fused attention, whatever
    flash-attn package is installed: ``get_attention_backend`` turns
    FlashAttention off when the cuDNN ``F16_arbitrary_seqlen`` backend is also
    available and ``device_compute_capability >= (9, 0)`` ("Disabling
    FlashAttention to give FusedAttention preference on Hopper+ for performance
    reasons"; TransformerEngine ``transformer_engine/pytorch/attention/
    dot_product_attention/utils.py``, earlier ``transformer_engine/pytorch/
    attention.py``). So a text naming FlashAttention-2 next to Transformer
    Engine on such a GPU still runs a Hopper-native kernel."""
    return names_transformer_engine(fw) and sm90_plus(rec)


#: A negation just before a name: "no", "not", "without", "w/o" (with an optional "the"
#: or "NVIDIA" between).
_NEGATION_BEFORE = re.compile(r"(?:\bno|\bnot|\bwithout|\bw/o)[\s(]+(?:the\s+)?(?:nvidia\s+)?$")


def names_transformer_engine(fw: str) -> bool:
    """Whether the framework text names Transformer Engine as used: a mention not negated
    just before it ("no Transformer Engine", "without TE's transformer_engine" name no use
    of it; the bare search took them as TE and switched a run to cuDNN attention: QA,
    session 37)."""
    low = fw.lower()
    return any(not _NEGATION_BEFORE.search(low[max(0, m.start() - 24):m.start()])
               for m in _TRANSFORMER_ENGINE.finditer(low))


def arch_flash_attention(arch: str, flash: bool, runtime: Runtime, notes: list[str]) -> Runtime:
    """``runtime`` with fused attention where the record's architecture text names a
    flash kernel (``flash``: the graph is then built without stored scores,
    :func:`~autopar_opt.calibration.reading.model.read_model`) and the runtime's
    default is unfused: the graph and the compute price one kernel. A named
    FlashAttention-2 kernel is FlashAttention-2-class and not Hopper-native
    (:func:`named_flash_attention`); a Hopper-native one (FlashAttention-3, cuDNN,
    :data:`_HOPPER_NATIVE_ATTENTION`) keeps the runtime's Hopper choice; any other
    "flash" the runtime's default kernel class. Unchanged otherwise."""
    if not flash or runtime.flash_attention:
        return runtime
    if _FA2.search(arch) and not _HOPPER_NATIVE_ATTENTION.search(arch):
        return named_flash_attention(arch, runtime, notes)
    notes.append("flash attention named in the architecture: fused attention "
                 f"(the {runtime.name} runtime's default kernel class)")
    return replace(runtime, flash_attention=True)


#: A framework text naming Ulysses-style (all-to-all) or all-gather context parallelism.
_ULYSSES = re.compile(r"ulysses|cp[-_ ]comm[-_ ]type[ =:]*a2a(?!\+)")
_CP_ALLGATHER = re.compile(r"cp[-_ ]comm[-_ ]type[ =:]*all[-_ ]?gather")


def cp_exchange(framework: str, runtime: Runtime, notes: list[str]) -> Runtime:
    """``runtime`` with the context-parallel exchange its text names: ``a2a`` for
    DeepSpeed-Ulysses (or ``--cp-comm-type a2a``), ``all_gather`` for
    ``--cp-comm-type allgather``; unchanged otherwise (the runtime's own, ring
    ``p2p`` for Megatron-Core)."""
    fw = framework.lower()
    if _ULYSSES.search(fw):
        notes.append("Ulysses sequence parallelism named: context parallelism by all-to-all "
                     "of the heads (cp_comm_type a2a)")
        return replace(runtime, cp_comm_type="a2a")
    if _CP_ALLGATHER.search(fw):
        notes.append("all-gather context parallelism named (cp_comm_type all_gather)")
        return replace(runtime, cp_comm_type="all_gather")
    return runtime


def named_flash_attention(fw: str, runtime: Runtime, notes: list[str]) -> Runtime:
    """``runtime`` with the FlashAttention-2 kernel its text names (:data:`_FA2`, e.g.
    Megatron-DeepSpeed's ``--use-flash-attn-v2``) when the runtime's default is
    unfused attention: fused, FlashAttention-2-class, not Hopper-native
    (``autopar_opt.ir.runtime``: ``flash_attention``, ``flash_v2_attention``,
    ``hopper_attention``). Unchanged otherwise."""
    if runtime.flash_attention or not _FA2.search(fw.lower()):
        return runtime
    notes.append("FlashAttention-2 named in the framework text: fused attention, a "
                 "FlashAttention-2-class kernel, not Hopper-native")
    return replace(runtime, flash_attention=True, flash_v2_attention=True, hopper_attention=False)


def megatron_core(fw: str, notes: list[str], rec: RawRecord | None = None) -> Runtime:
    """Megatron-Core with the overlap flags the text names (r0.8: all off by
    default). Two settings a text may turn off: the distributed optimizer
    (``without --use-distributed-optimizer``: Adam state replicated over data
    parallelism, ``megatron/core/optimizer``'s ``Float16OptimizerWithFloat16Params``)
    and fused attention (``--attention-backend unfused``, :data:`_UNFUSED_ATTENTION`).
    A text naming a FlashAttention-2 kernel (:data:`_FA2`, and no Hopper-native
    one) turns ``hopper_attention`` off (module docstring), unless it also names
    Transformer Engine and the record's GPU is sm90+ (``rec``'s
    ``hardware.gpu_type``): TE then picks cuDNN's fused attention
    (:func:`te_picks_fused_attention`)."""
    flags = {"tp_comm_overlap": bool(flag_stated(fw, "tp_comm_overlap")),
             "grad_reduce_overlap": bool(flag_stated(fw, "overlap_grad_reduce")),
             "param_gather_overlap": bool(flag_stated(fw, "overlap_param_gather"))}
    if flag_stated(fw, "use-distributed-optimizer", "distributed optimizer") is False:
        flags["distributed_optimizer"] = False
    if _UNFUSED_ATTENTION.search(fw):
        flags.update(flash_attention=False, hopper_attention=False)
    elif _FA2.search(fw) and te_picks_fused_attention(fw, rec):
        notes.append("FlashAttention-2 named, but Transformer Engine on an sm90+ GPU prefers "
                     "cuDNN fused attention (TE get_attention_backend): Hopper-native kernel")
    elif _FA2.search(fw) and not _HOPPER_NATIVE_ATTENTION.search(fw):
        flags["hopper_attention"] = False
        notes.append("FlashAttention-2 named in the framework text: a FlashAttention-2-class "
                     "kernel, not Hopper-native (hopper_attention off; Shah et al. 2024)")
    notes.append("Megatron-Core: " + ", ".join(f"{k}={v}" for k, v in flags.items())
                 + " (flags named in the framework text; off by default in r0.8)")
    return runtime_named("megatron-core", **flags)


_JAX = re.compile(r"maxtext|\bjax\b|\bpax(ml)?\b|\bt5x\b|\bflax\b|\bxla\b|\bpraxis\b")


def other_stack(framework: str, rec: RawRecord | None, notes: list[str]) -> Runtime:
    """The runtime of a framework text the original five families do not use.

    Raises :class:`UnmodelledStack` for JAX stacks.
    """
    fw = framework.lower()
    if _JAX.search(fw):
        raise UnmodelledStack(
            f"training.framework {framework!r} is a JAX/XLA stack: its SPMD partitioner's "
            "async-collective and collective-matmul overlaps have no documented capability "
            "set in the runtime catalog (autopar_opt/ir/runtime.py documents PyTorch/CUDA stacks)")
    if "torchtitan" in fw:
        return torchtitan(fw, notes)
    if "metaseq" in fw or "fairscale" in fw:
        return fairscale(notes)
    if "colossal" in fw:
        return colossal(fw, notes)
    # A Megatron text that names transformers (e.g. for its tokenizer) is Megatron's.
    if any(k in fw for k in ("hugging", "transformers", "accelerate", "hf trainer")) \
            and "megatron" not in fw:
        return huggingface(fw, rec, notes)
    if "internevo" in fw:
        return internevo(fw, rec, notes)
    if "deepspeed" in fw:
        return deepspeed_zero(fw, rec, notes)
    if "kempnerforge" in fw:
        return kempnerforge(notes, fw)
    if "fsdp" in fw or "fully_shard" in fw or "fully sharded" in fw:
        return fsdp2_if_stated(fw, plain_fsdp("PyTorch FSDP", notes), notes)
    if "megatron" in fw:     # Megatron-LM of 2023 or later (see megatron_lm_is_core)
        return megatron_core(fw, notes, rec)
    return by_fields(framework, rec, notes)


def megatron_lm_is_core(fw: str) -> bool:
    """Megatron-LM text that names a 2023-or-later release, Megatron-Core
    (``mcore``, ``core_r``) or Transformer Engine: its training loop is Megatron-Core."""
    years = [int(y) for y in re.findall(r"\b(20[12]\d)\b", fw)]
    return (bool(years) and max(years) >= 2023) or names_transformer_engine(fw) or any(
        k in fw for k in ("mcore", "core_r", "core r0", "--transformer-impl"))


def by_fields(framework: str, rec: RawRecord | None, notes: list[str]) -> Runtime:
    """Fallback for a text that names no known stack: by the record's fields."""
    what = f"framework {framework or 'not stated'!r} names no catalog stack"
    stage, _ = _zero_field(rec)
    if shards_weights(rec):
        notes.append(f"{what}: ZeRO-3/FSDP stated, taken as PyTorch FSDP with prefetch")
        return plain_fsdp("PyTorch FSDP (by the record's fields)", notes)
    if stage in (1, 2):
        notes.append(f"{what}: ZeRO-{stage} stated, taken as DeepSpeed ZeRO")
        return deepspeed_zero(framework.lower(), rec, notes)
    if _tp_or_pp(rec):
        notes.append(f"{what}: tensor/pipeline parallelism stated, taken as Megatron-Core "
                     "(r0.8 defaults)")
        return megatron_core(framework.lower(), notes, rec)
    notes.append(f"{what}: taken as PyTorch DDP (bucketed overlapped all-reduce, SDPA)")
    return runtime_named("pytorch-ddp")


def counting_of(runtime: Runtime, stated: str, notes: list[str]) -> str:
    """The FLOP convention of a record: its ``flops_counting`` text, or, when
    that is empty, the convention the stack's own logger uses (a text
    :func:`~autopar_opt.calibration.flops.flop_formula` recognises):
    torchtitan ``get_num_flop_per_token``; Megatron-Core / NeMo
    ``num_floating_point_operations`` (Megatron-Bridge: its causal variant);
    Composer/llm-foundry ``flops_per_batch``; other stacks: empty (Eq. 7,
    stated as assumed). torchtitan's MFU divides by the bf16 dense peak
    whatever the precision (``torchtitan/tools/utils.py::get_peak_flops``:
    989e12 for H100 SXM, also in float8 runs); that is appended for
    :func:`~autopar_opt.calibration.flops.mfu_peak_dtype`."""
    text = stated
    if not text:
        text = {"torchtitan": "torchtitan get_num_flop_per_token",
                "megatron-core": "Megatron-Core num_floating_point_operations",
                "nemo": "Megatron-Core num_floating_point_operations",
                "megatron-bridge": "Megatron-Core num_floating_point_operations, causal",
                }.get(runtime.name, "")
        if runtime.name == "pytorch-fsdp" and runtime.fused_cross_entropy:
            text = "llm-foundry flops_per_batch"
        if text:
            notes.append(f"flops_counting not stated: {runtime.name}'s own count ({text})")
    if runtime.name == "torchtitan" and "peak" not in text.lower():
        text += " [MFU vs the bf16 dense peak: torchtitan get_peak_flops]"
    return text
