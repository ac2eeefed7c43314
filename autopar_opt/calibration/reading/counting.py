"""The FLOP convention a record's ``flops_counting`` text names.

A published MFU or TFLOP/s figure is only a throughput once it is inverted
with the FLOP count its authors used. :func:`read_counting` reads the text
once into :class:`FlopCount`: the convention (a key of
:data:`autopar_opt.calibration.flops.FORMULAS`) for TFLOP/s figures and for
MFU figures, the peak an MFU divides by, and the MoE form of the count. The
conventions (their formulas are in :mod:`autopar_opt.calibration.flops`):

* Narayanan et al. 2021, Eq. 3 ("96*", recompute-inclusive; not for MFU);
* Korthikanti et al. 2022, App. A, Eq. 7 ("72*", "Eq. 7"; also what a text
  naming no convention is read as, with the assumption in the label);
* llm-foundry ``flops_per_batch``; the BigScience pre-2022-02-21 estimate
  (``model_size_B*4*2``);
* PaLM App. B / torchtitan ``get_num_flop_per_token``;
* Megatron-Core ``num_floating_point_operations`` (its causal variant when
  the text says so);
* ``6·N·D`` (Kaplan et al. 2020), with ``N`` non-embedding when the text says.

A named convention wins wherever the text also says "not stated" (e.g. "the
paper's formula is not stated; MFU per PaLM App. B").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from autopar_opt.calibration.flops import FORMULAS, Dims
from autopar_opt.ir.hardware import DEVICE_CATALOG

_SIX_ND = re.compile(r"6\s*[·*x×]?\s*n\s*[·*x×]?\s*d\b|6\s*[·*x×]\s*(n_?)?params?\s*[·*x×]\s*tokens"
                     r"|kaplan")
_PALM = re.compile(r"palm|torchtitan|12\s*[·*]?\s*l\s*[·*]?\s*h\s*[·*]?\s*q\s*[·*]?\s*t"
                   r"|6\s*[·*]?\s*n\s*\+\s*12")
_MCORE = re.compile(r"num_floating_point_operations|megatron-core|megatron-bridge|mcore")


@dataclass(frozen=True)
class FlopCount:
    """What a record's FLOP figures were computed with: ``(key, label)`` of
    the convention for TFLOP/s figures (``rate``) and for MFU (``mfu``), the
    dtype whose peak an MFU divides by (``mfu_peak_dtype``) and ``(key,
    label)`` of the MoE count (``moe``; keys of
    :data:`autopar_opt.calibration.moe_build.MOE_COUNTS`)."""

    rate: tuple[str, str]
    mfu: tuple[str, str]
    mfu_peak_dtype: str
    moe: tuple[str, str]


def convention(counting: str, for_mfu: bool) -> tuple[str, str]:
    """(key, label) of the FLOP count a text names (module docstring)."""
    t = counting.replace(" ", "").lower()
    low = counting.lower()
    if "llm-foundry" in t:
        return "foundry", "llm-foundry 6·N·s + 12·l·h·s²"
    if "model_size_b*4*2" in t:
        return "bigscience_old", "BigScience 8·N·s·B"
    if "96*" in t and not for_mfu:
        return "eq3", "Narayanan 2021 Eq. 3 (96·B·s·l·h²…)"
    if "72*" not in t and "eq.7" not in t:
        if _PALM.search(low):
            return "palm", "PaLM App. B / torchtitan 6·(N−V·h) + 12·l·h·s per token"
        if _MCORE.search(low):
            if "causal" in low or "halve" in low:
                return "mcore_causal", "Megatron-Core num_floating_point_operations (causal)"
            return "mcore", "Megatron-Core num_floating_point_operations"
        if _SIX_ND.search(low):
            if "non-embedding" in low or "nonembedding" in t:
                return "six_nd_non_embedding", "6·N·D (N non-embedding)"
            return "six_nd", "6·N·D (N as published)"
    return "eq7", "Korthikanti 2022 Eq. 7 (72·B·s·l·h²…)" + (
        "" if "72*" in t or "eq.7" in t else " [formula not stated: assumed]")


def flop_formula(counting: str, for_mfu: bool):
    """(function of :class:`~autopar_opt.calibration.flops.Dims`, label) of
    the convention a text names."""
    key, label = convention(counting, for_mfu)
    return FORMULAS[key], label


def mfu_peak_dtype(counting: str, device: str, dtype: str) -> str:
    """The peak an MFU figure divides by: the one the text names ("FP8
    peak", "bf16 (dense) peak"; torchtitan's ``get_peak_flops`` is the bf16
    dense peak in float8 runs too), else the compute dtype's."""
    low = counting.lower()
    has = DEVICE_CATALOG[device].peak_tflops
    if re.search(r"fp8 (dense )?peak|vs\.? (the )?fp8", low) and "fp8" in has:
        return "fp8"
    if re.search(r"(bf16|16-bit)[ -](dense )?peak|bf16 dense\)? peak", low) and "bf16" in has:
        return "bf16"
    return dtype


def moe_convention(counting: str) -> tuple[str, str]:
    """(key, label) of an MoE record's FLOP count: PaLM / torchtitan and
    ``6·N·D`` count the parameters a token uses (top-k experts); Megatron-Core
    otherwise (causal when the text says so; assumed when it names none)."""
    flat, low = counting.replace(" ", "").lower(), counting.lower()
    if _PALM.search(low):
        return "palm", "PaLM / torchtitan 6·N_active' + 12·l·h·s (MoE: top-k experts)"
    if not _MCORE.search(low) and _SIX_ND.search(low):
        non_embed = "non-embedding" in low or "nonembedding" in flat
        return ("six_nd_non_embedding" if non_embed else "six_nd"), (
            "6·N_active·D (MoE: top-k experts" + (", non-embedding)" if non_embed else ")"))
    causal = "causal" in low or "halv" in low
    label = "Megatron-Core num_floating_point_operations (MoE: top-k routed experts" + (
        ", causal)" if causal else ")")
    named = _MCORE.search(low) or "72*" in flat or "eq.7" in flat
    return ("mcore_causal" if causal else "mcore"), label + (
        "" if named else " [formula not stated: assumed]")


def read_counting(counting: str, device: str, dtype: str) -> FlopCount:
    """The record's FLOP convention (module docstring)."""
    return FlopCount(convention(counting, False), convention(counting, True),
                     mfu_peak_dtype(counting, device, dtype), moe_convention(counting))


__all__ = ["Dims", "FlopCount", "convention", "flop_formula", "mfu_peak_dtype", "moe_convention",
           "read_counting"]
