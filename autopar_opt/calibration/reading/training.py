"""How a record trained: precision, recomputation, batches, activation offload.

Each reader turns one ``training`` text or field into the typed value the
cost model prices (:class:`~autopar_opt.ir.training.Training`), writing every
default it takes into the notes.
"""

from __future__ import annotations

import re

from autopar_opt.calibration.reading.errors import Unmodelable
from autopar_opt.calibration.reading.schema import Training as TrainingSection
from autopar_opt.ir.hardware import DEVICE_CATALOG
from autopar_opt.ir.runtime import Runtime
from autopar_opt.ir.training import Recompute


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
    if ("bf16" in p or "bfloat16" in p) and not re.search(r"(?<!b)fp16|(?<!b)float16", p):
        # QA round 11: read as fp16 and priced at the fp16 tensor-core peak; a Volta GPU has
        # no bf16 tensor cores (PyTorch runs bf16 matmuls there without them), like FP8 on A100
        raise Unmodelable(f"training.precision {precision!r} is bf16 but {device} has no bf16 "
                          "tensor cores (Ampere or later): no peak prices it (fix: state fp16 "
                          "if the run used it)")
    if "fp16" in p or re.search(r"(?<!b)float16|\bhalf\b|(?<!bf)16-mixed", p):
        return "fp16"
    if re.search(r"\btf32\b", p) and "tf32" in dev.peak_tflops:
        return "tf32"
    if re.search(r"\b(fp32|float32)\b|full precision", p):
        # QA round 11: the schema lists fp32, and it was priced as bf16 (2-byte weights, the
        # 16-bit peak): fp32 weights, gradients and Adam moments at the fp32 peak (PyTorch
        # runs fp32 matmuls without TF32 unless allow_tf32 is set, since 1.12; a text naming
        # TF32 takes the TF32 peak)
        return "fp32"
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


def read_offload(tr: TrainingSection, layers: int, pp: int, notes: list[str]) -> float:
    """``training.cpu_offloading_num_layers`` N (Megatron-Core: layers of each
    pipeline rank whose activations go to host memory) as the offloaded
    fraction ``N / (layers / pp)`` of :attr:`Training.activation_offload`."""
    n = tr.cpu_offloading_num_layers
    if not n:
        return 0.0
    per_rank = layers / pp
    if n >= per_rank:
        raise Unmodelable(f"training.cpu_offloading_num_layers = {n} is not below the "
                          f"{per_rank:g} layers of a pipeline rank (Megatron-Core requires it)")
    notes.append(f"CPU activation offload: {n} of {per_rank:g} layers per pipeline rank")
    return n / per_rank
