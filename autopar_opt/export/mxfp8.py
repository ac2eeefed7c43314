"""MXFP8 asked for by an imported launch file: where it runs, and how it is priced.

MXFP8 (OCP Microscaling FP8: E4M3 values, one E8M0 scale per 32 consecutive values) is a
training recipe of Transformer Engine (``MXFP8BlockScaling``; Megatron-LM ``--fp8-recipe
mxfp8``; Megatron-Bridge's ``bf16_with_mxfp8_mixed`` / ``fp16_with_mxfp8_mixed``) and of
torchtitan (the ``quantize.linear.mx`` / ``quantize.grouped_mm.mx`` converters, torchao's
MXLinear). It needs the block-scaled tensor cores of Blackwell (SM 10.0+): Transformer
Engine's MXFP8 page ("native hardware acceleration on Blackwell GPUs (SM 10.0+)",
https://nvidia.github.io/TransformerEngine/features/low_precision_training/mxfp8/mxfp8.html)
and torchtitan's own check (``components/quantization/mx.py`` v0.2.2: ``MXLinearConverter``
asserts "MXFP8 is only supported on CUDA SM100 or later", ``MXGroupedMMConverter`` "MXFP8 is
only supported on SM100 or architectures", both in ``__init__``, whatever the model or the
training dtype); Hopper, Ampere and Volta cannot run it.

The cost model has no MXFP8 term: its FP8 peak, GEMM efficiency and cast traffic are those
of per-tensor-scaled FP8 (``autopar_opt/cost/fp8_casts.py``: delayed scaling), so an MXFP8
file is priced as per-tensor FP8, and :func:`mxfp8_reading` says so; on a catalog device of
an earlier generation it is refused, naming the device and the fix."""

from __future__ import annotations

#: GPU generations (``DeviceType.arch``) whose tensor cores run MXFP8.
MXFP8_ARCHS = ("blackwell",)


def mxfp8_reading(where: str, devices) -> tuple[list[str], list[str]]:
    """What an MXFP8 request ``where`` (the file's words: ``--fp8-recipe mxfp8``,
    ``model.converters quantize.linear.mx``) means on ``devices`` (the cluster's
    :class:`~autopar_opt.ir.hardware.DeviceType` s): ``(problems, notes)``. A catalog device
    of an earlier generation is a problem; on Blackwell, or a spec's own device (generation
    unknown), the note says MXFP8 is priced as per-tensor FP8 (and, unknown, not checked)."""
    problems, notes = [], []
    for dev in {d.name: d for d in devices}.values():
        if dev.arch and dev.arch not in MXFP8_ARCHS:
            problems.append(
                f"{where} asks for MXFP8, which the {dev.name} ({dev.arch}) cannot run: MXFP8 "
                "needs Blackwell's block-scaled tensor cores (SM 10.0+; Transformer Engine's "
                "MXFP8 recipe; torchtitan's MX converters, linear and grouped_mm alike, "
                "assert SM100 when built); use a "
                "per-tensor FP8 recipe (tensorwise or delayed) on this device, or a Blackwell "
                "device (B200, GB200)")
        elif not dev.arch:
            notes.append(f"{where}: MXFP8 needs a Blackwell GPU (SM 10.0+); the {dev.name}'s "
                         "generation is not stated, so this is not checked")
    notes.append(f"{where}: MXFP8 (one E8M0 scale per 32 values) is priced as per-tensor FP8 "
                 "(the cost model's FP8 peak, GEMM efficiency and cast traffic are per-tensor "
                 "scaling's): its block scales' quantisation and storage are not priced")
    return problems, notes
