"""Published training runs: read the record file, turn each record into a model.

The file format is the one of ``tests/data/published_runs.yaml`` (a copy of the shared calibration data, shipped with the repository): a
YAML (or JSON) list of mappings with ``id``, ``record_type``, ``model``,
``hardware``, ``parallelism``, ``training``, ``measured`` and
``flops_counting`` sections. Reading is tolerant: a record that lacks what the
cost model needs becomes :class:`Unmodelable` with the reason, and every
default taken for an unstated field is written into
:attr:`ModeledRun.assumptions`, so nothing is dropped or guessed silently.
Only a file that is not such a list (or a record without an ``id``) is an
error (:class:`RunFileError`). Framework texts beyond the stacks the shipped
file uses are mapped by :mod:`autopar_opt.calibration.reading.stacks`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from autopar_opt.calibration.reading import stacks
from autopar_opt.ir.graph import Layer, LayerGraph
from autopar_opt.ir.hardware import DEVICE_CATALOG, Cluster, DeviceType, resolve_device
from autopar_opt.ir.plan import Plan
from autopar_opt.ir.runtime import Runtime, runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Recompute, Training

#: GPUs per node when a record does not say (DGX A100/H100 design).
DEFAULT_GPUS_PER_NODE = 8


class RunFileError(ValueError):
    """The run file cannot be read as a list of records (names file, record, key)."""


class Unmodelable(ValueError):
    """A record the cost model cannot price; the message is the reason."""


@dataclass
class ModeledRun:
    """One record turned into the objects the cost model prices.

    kind : ``"end_to_end"`` (priced by :func:`autopar_opt.cost.evaluate.evaluate`)
        or ``"per_layer"`` (one transformer block priced by ``layer_cost``).
    measured_samples_per_s : measured throughput on the common basis;
        ``None`` for a memory-only record (memory published, no throughput).
    measured_basis : which measured field it came from and how.
    measured_memory_gib : published peak memory per GPU, if any.
    assumptions : every default taken for a field the record does not state.
    memory_measure, memory_rank : what the published memory measures and on
        which GPU (:mod:`autopar_opt.calibration.memory`).
    """

    id: str
    family: str
    framework: str
    kind: str
    graph: LayerGraph
    cluster: Cluster
    training: Training
    plan: Plan | None
    strategy: Strategy
    microbatch_samples: int
    measured_samples_per_s: float | None
    measured_basis: str
    measured_memory_gib: float | None
    assumptions: list[str] = field(default_factory=list)
    memory_measure: str = "device"
    memory_rank: str = "max"

    @property
    def memory_only(self) -> bool:
        """Memory published, throughput not: memory statistics and fit only."""
        return self.measured_samples_per_s is None

    @property
    def block(self) -> Layer:
        """The (first) transformer block: what a per-layer record measures."""
        return next(layer for layer in self.graph.layers if layer.name.startswith("block"))


# ----------------------------------------------------------------------------- file


def load_run_file(path: str | Path) -> list[dict]:
    """Read a run file into a list of record mappings.

    Raises :class:`RunFileError` naming the file and, where it applies, the
    record index and key: missing file, YAML error, not a list, an entry that
    is not a mapping, a missing or repeated ``id``.
    """
    from autopar_opt.spec import SpecError
    from autopar_opt.spec.loader import read_document

    p = Path(path)
    try:
        data = read_document(p)     # size, nesting, duplicate keys, numbers: spec limits
    except SpecError as exc:
        raise RunFileError("; ".join(q.format() for q in exc.problems)) from None
    from autopar_opt.spec.doc_kinds import wrong_input

    wrong = wrong_input(data, p, "a list of run records (as in tests/data/published_runs.yaml)",
                        ())
    if wrong:
        raise RunFileError(wrong.format())
    if not isinstance(data, list):
        kind = type(data).__name__ if data is not None else "an empty file"
        raise RunFileError(f"{p}: expected a list of run records at the top level, got {kind}")
    if not data:          # else a table of nothing and exit 0
        raise RunFileError(f"{p}: the list of run records is empty; add records (see "
                           "tests/data/published_runs.yaml for the format)")
    seen: set[str] = set()
    for i, rec in enumerate(data):
        if not isinstance(rec, dict):
            raise RunFileError(f"{p}: record #{i} is a {type(rec).__name__}, expected a mapping")
        rid = rec.get("id")
        if rid is None or str(rid).strip() == "":
            raise RunFileError(f"{p}: record #{i} has no 'id' key (every record needs a unique id)")
        if str(rid) in seen:
            raise RunFileError(f"{p}: record #{i}: id {rid!r} is repeated")
        seen.add(str(rid))
    return data


# ----------------------------------------------------------------------------- fields


def section(rec: dict, name: str) -> dict:
    """A record's sub-mapping (empty when absent); a non-mapping is unmodelable."""
    value = rec.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Unmodelable(f"'{name}' is a {type(value).__name__}, expected a mapping")
    return value


def number(sec: dict, key: str, where: str, required: bool = False) -> float | None:
    """A numeric field, ``None`` when null; a non-number is unmodelable."""
    value = sec.get(key)
    if value is None:
        if required:
            raise Unmodelable(f"{where}.{key} is not stated (null)")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise Unmodelable(f"{where}.{key} = {value!r} is not a number")
    return float(value)


#: Upper bounds of a record's integers (:mod:`autopar_opt.core.limits`, the spec's own
#: limits); any other integer is a model dimension, at most ``MAX_SEQ_LEN``. A
#: record with ``num_layers: 1e9`` hung the calibration building a billion layers.
_INT_LIMITS = {"num_layers": "MAX_LAYERS", "cpu_offloading_num_layers": "MAX_LAYERS",
               "global_batch_size": "MAX_GLOBAL_BATCH", "micro_batch_size": "MAX_GLOBAL_BATCH",
               "gpus_per_node": "MAX_GPUS_PER_NODE", "num_gpus": "MAX_DEVICES",
               "tp": "MAX_DEGREE", "pp": "MAX_DEGREE", "dp": "MAX_DEGREE", "cp": "MAX_DEGREE",
               "vp_chunks": "MAX_DEGREE", "dp_replicate": "MAX_DEGREE"}


def integer(sec: dict, key: str, where: str, required: bool = False) -> int | None:
    from autopar_opt.core import limits

    value = number(sec, key, where, required)
    if value is None:
        return None
    if value != int(value) or value <= 0:
        raise Unmodelable(f"{where}.{key} = {value!r} must be a positive integer")
    name = _INT_LIMITS.get(key, "MAX_SEQ_LEN")
    cap = getattr(limits, name)
    if value > cap:
        raise Unmodelable(f"{where}.{key} = {int(value)} exceeds the limit of {cap:,} "
                          f"(autopar_opt.core.limits.{name}); state the run's real value")
    return int(value)


def text(sec: dict, key: str) -> str:
    value = sec.get(key)
    return "" if value is None else str(value)


# ----------------------------------------------------------------------------- mapping


def family_of(rec_id: str, framework: str) -> str:
    """Source family of a run (the unit of leave-one-family-out validation):
    one publication or published table series (first id token; two for the
    Megatron READMEs and Megatron-Bridge)."""
    parts = rec_id.split("_")
    if parts[0].startswith("bloom"):
        return "bloom"
    if parts[0] == "megatron":
        return "_".join(parts[:2])
    return parts[0]


#: Why a Composer/llm-foundry record's optimizer step is unfused.
COMPOSER_OPTIMIZER_NOTE = (
    "optimizer: decoupled_adamw (llm-foundry's train YAMLs), Composer's DecoupledAdamW: "
    "DecoupledAdamW.adamw loops over the parameters in Python with one in-place op per "
    "tensor (mul_, add_, addcmul_, sqrt, addcdiv_; composer/optim/decoupled_weight_decay.py), "
    "no fused or foreach kernel: fused_optimizer off")


def runtime_of(framework: str, notes: list[str], rec: dict | None = None) -> Runtime:
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
        return stacks.nemo(fw + " " + text(section(rec or {}, "training"), "precision").lower(),
                           notes)
    if "megatron-core" in fw:
        return stacks.megatron_core(fw, notes, rec)
    if "llm-foundry" in fw or "composer" in fw:
        notes.append(COMPOSER_OPTIMIZER_NOTE)
        if stacks.llmfoundry_triton_table(rec):
            notes.append("attn_impl: triton (pre-MLIR flash_attn_triton, a FlashAttention-1-"
                         "class kernel: flash_v2_attention off, attention core at 1/2 of "
                         "FlashAttention-2, Dao 2023): the default of the scripts behind "
                         "llm-foundry's 2023 benchmark tables (submit_benchmarks.py "
                         "@a7c75677; @12a63191 for the MosaicGPT-era rows)")
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


def megatron_deepspeed_engine(fw: str, rec: dict | None, notes: list[str]) -> Runtime:
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


def record_device(gpu_type: str, memory_gb: float | None, notes: list[str],
                  power_limit_w: float | None = None) -> DeviceType:
    """The device a record's ``hardware`` section states: the catalog variant its
    ``gpu_type`` text and ``gpu_memory_gb`` pick, with a stated memory and power
    cap applied (:func:`autopar_opt.ir.hardware.resolve_device`; what it assumed
    goes to ``notes``). Raises :class:`Unmodelable` when no catalog chip matches."""
    try:
        dev, said = resolve_device(gpu_type, memory_gb, power_limit_w)
    except ValueError as exc:
        raise Unmodelable(f"hardware.gpu_type {gpu_type!r}: {exc}") from None
    notes.extend(said)
    return dev


def map_device(gpu_type: str, memory_gb: float | None, notes: list[str]) -> str:
    """Catalog name of :func:`record_device`'s device."""
    return record_device(gpu_type, memory_gb, notes).name


#: FP8 training named in a precision text: ``fp8``, ``float8`` (torchao /
#: torchtitan ``Float8Linear``), its element formats ``e4m3``/``e5m2`` (TE
#: ``Format.HYBRID``), block-scaled ``MXFP8`` (OCP Microscaling spec v1.0).
_FP8 = re.compile(r"fp8|float8|e4m3|e5m2|8-bit float")
#: ... unless the text negates it ("no FP8", "FP8 disabled", "fp8: false").
_NO_FP8 = re.compile(r"(\bno|without|non|disabled?)[\s_-]*(fp8|float8)"
                     r"|(fp8|float8)[\s_:=-]*(off|disabled|false|none)\b")
_FP4 = re.compile(r"fp4|float4|e2m1")


def map_precision(precision: str, device: str, notes: list[str]) -> str:
    """Compute dtype of a free-text precision.

    FP8 in any spelling of :data:`_FP8` (``"FP8 (delayed scaling)"``,
    ``"bf16 + FP8 linear layers"``, ``"MXFP8"``, ``"float8 rowwise"``) is FP8
    training: the linear layers at the FP8 peak, the rest in bf16 (what the
    cost model prices for ``fp8``). A device without FP8 tensor cores or an
    FP4 recipe is unmodelable (no such peak in the device catalog).
    ``bfloat16``/``float16``/``half`` are read as bf16/fp16, and so are
    PyTorch Lightning's ``bf16-mixed``/``16-mixed`` (``Trainer(precision=)``).
    """
    p = precision.lower()
    dev = DEVICE_CATALOG[device]
    has_bf16 = "bf16" in dev.peak_tflops
    if _FP4.search(p):
        raise Unmodelable(f"training.precision {precision!r} is an FP4 recipe: the device "
                          f"catalog has no FP4 peak for {device}")
    if _FP8.search(p) and not _NO_FP8.search(p):
        if "fp8" not in dev.peak_tflops:
            raise Unmodelable(f"training.precision {precision!r} is FP8 but {device} has no "
                              "FP8 tensor cores (Hopper or later)")
        return "fp8"
    if ("bf16" in p or "bfloat16" in p) and has_bf16:
        return "bf16"
    if "fp16" in p or re.search(r"(?<!b)float16|\bhalf\b|(?<!bf)16-mixed", p):
        return "fp16"
    dtype = "bf16" if has_bf16 else "fp16"
    notes.append(f"precision {precision or 'not stated'!r}: taken as {dtype} (16-bit peak)")
    return dtype


_AUTOCAST = re.compile(r"torch\.autocast|\bamp\b|native amp")
#: Apex AMP (``apex.amp``, opt levels O1-O3): O2/O3 keep 16-bit model weights
#: (O2 with fp32 masters), not torch.autocast over fp32 parameters
#: (NVIDIA Apex docs, "apex.amp" opt levels), so these spellings are rejected
_APEX_AMP = re.compile(r"\bapex\b|\bo[0-3]\b")


def autocast_of(precision: str, runtime: Runtime, notes: list[str]) -> bool:
    """Whether a precision text is PyTorch AMP over fp32 parameters
    (:attr:`Training.autocast`): "AMP" as a word or "torch.autocast", on the
    plain PyTorch DDP stack, whose module keeps the fp32 parameters the
    optimizer steps. Sharded stacks cast their own parameters (FSDP's
    ``MixedPrecision(param_dtype=...)``, as in Composer's ``amp_bf16``;
    DeepSpeed's fp16 engine keeps 16-bit weights with fp32 masters), so the
    same words there do not mean fp32 module weights. Apex AMP spellings
    ("apex", opt levels "O1"-"O3") are not torch autocast (:data:`_APEX_AMP`)."""
    text = precision.lower()
    if runtime.name != "pytorch-ddp" or not _AUTOCAST.search(text) or _APEX_AMP.search(text):
        return False
    notes.append("PyTorch AMP (torch.autocast over fp32 parameters): fp32 weights, gradients and "
                 "optimizer moments, cached 16-bit weight casts")
    return True


def map_recompute(value: str, flops_counting: str, notes: list[str]) -> Recompute:
    v = value.strip().lower()
    if v.startswith("none") or v in ("no", "false", "off"):
        return Recompute.none
    if re.search(r"\bop\b|op-level", v):
        return Recompute.op          # torchtitan selective_ac_option = "op"
    if "selective" in v:
        return Recompute.selective
    if v.startswith("full") or "checkpoint" in v or "recompute" in v:
        return Recompute.full
    if v:
        raise Unmodelable(f"training.recompute {value!r} is not none/selective/op/full")
    if "96*" in flops_counting.replace(" ", ""):
        notes.append("recompute not stated: full (the record's 96·B·s·l·h² FLOP count "
                     "includes the recomputed forward)")
        return Recompute.full
    notes.append("recompute not stated: none")
    return Recompute.none


#: Runtimes whose data parallelism shards everything unless told otherwise.
_SHARDING_BY_DEFAULT = {
    "torchtitan": "torchtitan shards data parallelism with FSDP2 by default "
                  "(data_parallel_shard_degree = -1)",
    "pytorch-fsdp": "FSDP's default sharding strategy is FULL_SHARD",
    "fairscale-fsdp": "fairscale FullyShardedDataParallel reshards after forward by default "
                      "(reshard_after_forward=True)",
}


def map_zero(par: dict, runtime: Runtime | None = None, notes: list[str] | None = None) -> int:
    """ZeRO stage of a record's ``parallelism`` section.

    PyTorch FSDP ``FULL_SHARD`` and Megatron-FSDP (Megatron-Bridge tables:
    "FSDP (sharding group N)") shard weights, gradients and optimizer state:
    stage 3. Megatron-Bridge turns ``use_megatron_fsdp`` into
    ``ddp.data_parallel_sharding_strategy = "optim_grads_params"``
    (``scripts/performance/utils/helpers.py::set_mcore_fsdp_configs``);
    ``SHARD_GRAD_OP``: stage 2. Any other FSDP text that is not a negation
    (``FSDP2``, ``fully_shard``, ``yes``) is full sharding, FSDP's default
    (``ShardingStrategy.FULL_SHARD``; FSDP2 ``fully_shard``). Hybrid sharding
    (``HYBRID_SHARD``, HSDP, torchtitan ``dp_replicate`` > 1: ZeRO-3 inside a
    group, replicas across groups) is unmodelable: a strategy shards over its
    whole data-parallel group. With nothing stated, a runtime whose data
    parallelism is FSDP by default (torchtitan: ``data_parallel_shard_degree
    = -1``; PyTorch FSDP: ``FULL_SHARD``; fairscale: ``reshard_after_forward``)
    gives stage 3.
    """
    notes = [] if notes is None else notes
    fsdp = text(par, "fsdp").lower()
    if "hybrid" in fsdp or "hsdp" in fsdp or (integer(par, "dp_replicate", "parallelism") or 1) > 1:
        raise Unmodelable(f"parallelism.fsdp = {text(par, 'fsdp')!r} / dp_replicate: hybrid "
                          "sharding (ZeRO-3 within a group, replicated across groups) is not in "
                          "the strategy space (ZeRO shards over the whole data-parallel group)")
    if "full_shard" in fsdp or "zero-3" in fsdp or "optim_grads_params" in fsdp \
            or fsdp.startswith("fsdp (sharding group"):
        return 3
    if "shard_grad_op" in fsdp or "zero-2" in fsdp or "zero2" in fsdp:
        return 2
    if "zero-1" in fsdp or "zero1" in fsdp:
        return 1
    if fsdp and "no_shard" not in fsdp and not re.match(r"\s*(none|no\b|false|off|0\b|ddp)", fsdp):
        notes.append(f"parallelism.fsdp = {text(par, 'fsdp')!r}: full sharding (ZeRO-3, FSDP's "
                     "default FULL_SHARD / FSDP2 fully_shard)")
        return 3
    z = integer(par, "zero_stage", "parallelism") if par.get("zero_stage") not in (0, None) else 0
    if z is None or z == 0:
        if runtime is not None and runtime.name in _SHARDING_BY_DEFAULT and not fsdp \
                and par.get("zero_stage") is None:
            notes.append(f"ZeRO/FSDP not stated: {_SHARDING_BY_DEFAULT[runtime.name]}: ZeRO-3")
            return 3
        return 0
    if z > 3:
        raise Unmodelable(f"parallelism.zero_stage = {z} (0-3 expected)")
    return z


def default_sequence_parallel(runtime: Runtime) -> bool:
    """Sequence parallelism of a TP run whose record does not say: on where the
    runtime's TP requires it (Megatron-Core TP communication overlap works on
    sequence-parallel activations; torchtitan's TP plan always shards the
    norms' sequence, ``SequenceParallel`` in ``parallelize_llama``)."""
    return runtime.tp_comm_overlap or runtime.name == "torchtitan"


def tied_embeddings(m: dict, arch: str, stated: float | None, tied_total: int, head: int,
                    notes: list[str]) -> bool:
    """Whether the output layer shares the input embedding's matrix, for the
    dense and the MoE builders alike: a stated boolean field
    (``tie_word_embeddings``, Hugging Face; ``share_embeddings_and_output_weights``,
    Megatron-Core; ``untie_embeddings_and_output_weights``, Megatron-LM's flag),
    else the text of ``arch`` ("untied"/"tied"), else the reading whose
    parameter count (``tied_total`` or ``tied_total + head``) is closer to
    ``stated`` (``param_count_b`` in parameters), else tied (Megatron's
    default)."""
    for key, tied_if in (("tie_word_embeddings", True), ("share_embeddings_and_output_weights", True),
                         ("untie_embeddings_and_output_weights", False)):
        if isinstance(m.get(key), bool):
            return m[key] is tied_if
    if "untied" in arch:
        return False
    if "tied" in arch:
        return True
    if stated:
        tied = abs(tied_total - stated) <= abs(tied_total + head - stated)
        notes.append(f"embedding tying not stated: {'tied' if tied else 'untied'} (closer to "
                     f"param_count_b {stated / 1e9:g})")
        return tied
    notes.append("embedding tying not stated: tied (Megatron default)")
    return True
