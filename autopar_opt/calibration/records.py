"""Published training runs: read the record file, turn each record into a model.

The file format is the one of ``tests/data/published_runs.yaml`` (a copy of the shared calibration data, shipped with the repository): a
YAML (or JSON) list of mappings with ``id``, ``record_type``, ``model``,
``hardware``, ``parallelism``, ``training``, ``measured`` and
``flops_counting`` sections. Reading is tolerant: a record that lacks what the
cost model needs becomes :class:`Unmodelable` with the reason, and every
default taken for an unstated field is written into
:attr:`ModeledRun.assumptions`, so nothing is dropped or guessed silently.
Only a file that is not such a list (or a record without an ``id``) is an
error (:class:`RunFileError`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from autopar_opt.graph import Layer, LayerGraph
from autopar_opt.hardware import DEVICE_CATALOG, Cluster
from autopar_opt.plan import Plan
from autopar_opt.runtime import Runtime, runtime_named
from autopar_opt.strategies import Strategy
from autopar_opt.training import Recompute, Training

#: GPUs per node when a record does not say (DGX A100/H100 design).
DEFAULT_GPUS_PER_NODE = 8


class RunFileError(ValueError):
    """The run file cannot be read as a list of records (names file, record, key)."""


class Unmodelable(ValueError):
    """A record the cost model cannot price; the message is the reason."""


@dataclass
class ModeledRun:
    """One record turned into the objects the cost model prices.

    kind : ``"end_to_end"`` (priced by :func:`autopar_opt.evaluate.evaluate`)
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
    if not isinstance(data, list):
        kind = type(data).__name__ if data is not None else "an empty file"
        raise RunFileError(f"{p}: expected a list of run records at the top level, got {kind}")
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


def integer(sec: dict, key: str, where: str, required: bool = False) -> int | None:
    value = number(sec, key, where, required)
    if value is None:
        return None
    if value != int(value) or value <= 0:
        raise Unmodelable(f"{where}.{key} = {value!r} must be a positive integer")
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


def runtime_of(framework: str, notes: list[str]) -> Runtime:
    """The runtime (:mod:`autopar_opt.runtime`) a record's framework text names,
    with the capability flags the text states (e.g. ``DDP impl=local``,
    ``--tp-comm-overlap``)."""
    fw = framework.lower()
    flat = fw.replace(" ", "")
    if "megatron-bridge" in fw or "nemo" in fw:
        return runtime_named("megatron-bridge")
    if "megatron-core" in fw:
        flags = {"tp_comm_overlap": "--tp-comm-overlap" in fw,
                 "grad_reduce_overlap": "--overlap-grad-reduce" in fw,
                 "param_gather_overlap": "--overlap-param-gather" in fw}
        notes.append("Megatron-Core: " + ", ".join(f"{k}={v}" for k, v in flags.items())
                     + " (flags named in the framework text; off by default in r0.8)")
        return runtime_named("megatron-core", **flags)
    if "llm-foundry" in fw or "composer" in fw:
        return runtime_named("pytorch-fsdp")     # precision text: fsdp_reduce_dtype()
    if "deepspeed" in fw:
        return runtime_named("deepspeed")
    if "megatron" in fw:
        if "impl=local" in flat:
            notes.append("DDP impl=local: gradient all-reduce after the backward pass "
                         "(grad_reduce_overlap off; Megatron-LM LocalDDP.allreduce_gradients)")
            return runtime_named("megatron-lm", grad_reduce_overlap=False)
        return runtime_named("megatron-lm")
    notes.append(f"framework {framework or 'not stated'!r}: runtime taken as pytorch-ddp")
    return runtime_named("pytorch-ddp")


def fsdp_reduce_dtype(runtime: Runtime, precision: str, notes: list[str]) -> Runtime:
    """Composer's FSDP ``mixed_precision`` named in the precision text: DEFAULT
    reduce-scatters in fp32, PURE in 16 bits (``get_mixed_precision``; runtime
    capability ``fp32_grad_reduce``)."""
    flat = precision.replace(" ", "").lower()
    if "mixed_precision=default" in flat:
        notes.append("FSDP mixed_precision=DEFAULT: gradients reduce-scattered in fp32 "
                     "(Composer get_mixed_precision: reduce_dtype float32)")
        return replace(runtime, fp32_grad_reduce=True)
    return runtime


def map_device(gpu_type: str, memory_gb: float | None, notes: list[str]) -> str:
    """Catalog device for a free-text ``gpu_type`` (A100 40/80 by memory)."""
    t = gpu_type.lower().replace(" ", "")
    if not t:
        raise Unmodelable("hardware.gpu_type is not stated")
    for key, name in (("h200", "H200-141GB"), ("h100", "H100-SXM-80GB"), ("gb200", "GB200"),
                      ("b200", "B200"), ("v100", "V100-32GB")):
        if key in t:
            return name
    if "a100" in t:
        mem = memory_gb or (80.0 if "80gb" in t else 40.0 if "40gb" in t else None)
        if mem is None:
            notes.append("gpu memory not stated: A100 taken as the 40 GB part (the only DGX A100 "
                         "model in 2020)")
            mem = 40.0
        return "A100-80GB" if mem >= 60 else "A100-40GB"
    raise Unmodelable(f"hardware.gpu_type {gpu_type!r} matches no catalog device "
                      f"({', '.join(DEVICE_CATALOG)})")


def map_precision(precision: str, device: str, notes: list[str]) -> str:
    p = precision.lower()
    has_bf16 = "bf16" in DEVICE_CATALOG[device].peak_tflops
    if "fp8" in p:
        return "fp8"
    if "bf16" in p and has_bf16:
        return "bf16"
    if "fp16" in p:
        return "fp16"
    dtype = "bf16" if has_bf16 else "fp16"
    notes.append(f"precision {precision or 'not stated'!r}: taken as {dtype} (16-bit peak)")
    return dtype


def map_recompute(value: str, flops_counting: str, notes: list[str]) -> Recompute:
    v = value.strip().lower()
    if v.startswith("none") or v in ("no", "false", "off"):
        return Recompute.none
    if "selective" in v:
        return Recompute.selective
    if v.startswith("full") or "checkpoint" in v or "recompute" in v:
        return Recompute.full
    if v:
        raise Unmodelable(f"training.recompute {value!r} is not none/selective/full")
    if "96*" in flops_counting.replace(" ", ""):
        notes.append("recompute not stated: full (the record's 96·B·s·l·h² FLOP count "
                     "includes the recomputed forward)")
        return Recompute.full
    notes.append("recompute not stated: none")
    return Recompute.none


def map_zero(par: dict) -> int:
    """ZeRO stage of a record's ``parallelism`` section.

    PyTorch FSDP ``FULL_SHARD`` and Megatron-FSDP (Megatron-Bridge tables:
    "FSDP (sharding group N)") shard weights, gradients and optimizer state:
    stage 3. Megatron-Bridge turns ``use_megatron_fsdp`` into
    ``ddp.data_parallel_sharding_strategy = "optim_grads_params"``
    (``scripts/performance/utils/helpers.py::set_mcore_fsdp_configs``);
    ``SHARD_GRAD_OP``: stage 2.
    """
    fsdp = text(par, "fsdp").lower()
    if "full_shard" in fsdp or "zero-3" in fsdp or "optim_grads_params" in fsdp \
            or fsdp.startswith("fsdp (sharding group"):
        return 3
    if "shard_grad_op" in fsdp:
        return 2
    z = integer(par, "zero_stage", "parallelism") if par.get("zero_stage") not in (0, None) else 0
    if z is None or z == 0:
        return 0
    if z > 3:
        raise Unmodelable(f"parallelism.zero_stage = {z} (0-3 expected)")
    return z
