"""Measured throughput of a published run on one common basis: samples per second.

Records publish different metrics. In order of preference (measured rates
first, FLOP-derived figures last): ``iteration_time_s``,
``tokens_per_sec_per_gpu``, a total token rate (``tokens_per_sec_total`` /
``tokens_per_sec``, top level or under ``other``: divided by the sequence
length), ``samples_per_sec`` (or ``other.samples_per_sec_from_log`` /
``sequences_per_sec``), ``mfu_pct``, ``tflops_per_gpu`` and
``aggregate_pflops`` (the whole job's rate: ``1000·P / n`` TFLOP/s per GPU).
The FLOP figures are inverted with the FLOP formula the record says it used
(its ``flops_counting`` text):

* Narayanan et al. 2021, Eq. 3 (recompute-inclusive, "96" form):
  ``F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))``.
* Korthikanti et al. 2022, App. A, Eq. 7 (model FLOPs, "72" form), which is
  also Megatron-Core's ``num_floating_point_operations`` for a 4h MLP with
  multi-head attention: ``F = 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h))``.
* llm-foundry (``callbacks/speed_monitor`` / MPT ``flops_per_batch``):
  ``F = B·(6·N·s + 3·4·l·h·s²)`` with ``N`` the parameter count
  (embeddings included); HFU uses 8 and 4 instead of 6 and 3.
* BigScience pre-2022-02-21 estimate: ``F = 8·N·s·B``.
* PaLM (Chowdhery et al. 2022, App. B) / torchtitan ``get_num_flop_per_token``:
  ``F = B·s·(6·N' + 12·l·h·s)``; torchtitan passes
  ``get_num_params(model, exclude_embedding=True)``: ``N' = N − V·h`` (the
  token embedding excluded, the output projection kept).
* Megatron-Core ``num_floating_point_operations`` (``megatron/training/
  training.py``): ``F = 12·B·s·l·h²·((1 + g/a + s/h)·(a·d/h) + (f/h)·k·m +
  V/(2·l·h))`` with ``g`` KV groups, ``a`` heads of width ``d``, MLP width
  ``f``, ``m`` = 3/2 for gated (SwiGLU) MLPs, ``k`` experts per token; the
  causal variant (Megatron-Bridge, Megatron-LM 2025) halves ``s/h``. For
  ``g = a``, ``f = 4h``, ``k = m = 1`` it is Eq. 7.
* ``6·N·D`` (Kaplan et al. 2020, Sec. 2.1: ``C ≈ 6·N`` per token): ``F =
  6·N·B·s`` with ``N`` the parameter count as published (Kaplan's
  non-embedding ``N`` when the text says "non-embedding").

A formula that the text does not name falls back to Eq. 7 and says so.

Which figure a record is compared on, and the rules a stated throughput key
must keep, are its reading's (:mod:`autopar_opt.calibration.reading.measured`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from autopar_opt.calibration.reading.measured import Throughput
from autopar_opt.ir.hardware import DEVICE_CATALOG


@dataclass(frozen=True)
class Dims:
    """What the FLOP formulas need: batch, sequence, layers, hidden, vocab,
    params; for Megatron-Core's generalised count also heads, KV heads, MLP
    width, gated MLP and experts per token (0 = not stated: MHA, ``4h``)."""

    batch: int
    seq: int
    layers: int
    hidden: int
    vocab: int
    params: float
    heads: int = 0
    kv_heads: int = 0
    ffn: int = 0
    gated: bool = False
    topk: int = 1


def eq3_flops(d: Dims) -> float:
    """Narayanan et al. 2021, Eq. 3 (includes one recomputed forward)."""
    b, s, l, h, v = d.batch, d.seq, d.layers, d.hidden, d.vocab
    return 96.0 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))


def eq7_flops(d: Dims) -> float:
    """Korthikanti et al. 2022, App. A, Eq. 7 (model FLOPs, no recomputation)."""
    b, s, l, h, v = d.batch, d.seq, d.layers, d.hidden, d.vocab
    return 72.0 * b * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h))


def foundry_flops(d: Dims) -> float:
    """llm-foundry model FLOPs: ``B·(6·N·s + 12·l·h·s²)``."""
    return d.batch * (6.0 * d.params * d.seq + 12.0 * d.layers * d.hidden * d.seq ** 2)


def bigscience_old_flops(d: Dims) -> float:
    """BigScience estimate before 2022-02-21: ``8·N·s·B``."""
    return 8.0 * d.params * d.seq * d.batch


def palm_flops(d: Dims) -> float:
    """PaLM App. B / torchtitan: ``B·s·(6·(N − V·h) + 12·l·h·s)`` (torchtitan's
    ``get_num_flop_per_token`` with ``get_num_params(exclude_embedding=True)``;
    non-causal attention, no recomputation)."""
    n = d.params - d.vocab * d.hidden
    return d.batch * d.seq * (6.0 * n + 12.0 * d.layers * d.hidden * d.seq)


def mcore_flops(d: Dims, causal: bool = False) -> float:
    """Megatron-Core ``num_floating_point_operations`` (module docstring); the
    query projection is ``a·(h/a) = h`` wide (``kv_channels = h/a``)."""
    b, s, l, h, v = d.batch, d.seq, d.layers, d.hidden, d.vocab
    groups = (d.kv_heads / d.heads) if d.heads and d.kv_heads else 1.0
    ffn = d.ffn or 4 * h
    gate = 1.5 if d.gated else 1.0
    attn = 1 + groups + (s / h) * (0.5 if causal else 1.0)
    return 12.0 * b * s * l * h * h * (attn + ffn / h * d.topk * gate + v / (2 * l * h))


def mcore_causal_flops(d: Dims) -> float:
    """:func:`mcore_flops` with the causal (halved) attention term."""
    return mcore_flops(d, causal=True)


def six_nd_flops(d: Dims, non_embedding: bool = False) -> float:
    """``6·N·D`` (Kaplan et al. 2020, Sec. 2.1) with ``D = B·s`` tokens."""
    n = d.params - (d.vocab * d.hidden if non_embedding else 0.0)
    return 6.0 * n * d.batch * d.seq


_SIX_ND = re.compile(r"6\s*[·*x×]?\s*n\s*[·*x×]?\s*d\b|6\s*[·*x×]\s*(n_?)?params?\s*[·*x×]\s*tokens"
                     r"|kaplan")
_PALM = re.compile(r"palm|torchtitan|12\s*[·*]?\s*l\s*[·*]?\s*h\s*[·*]?\s*q\s*[·*]?\s*t"
                   r"|6\s*[·*]?\s*n\s*\+\s*12")
_MCORE = re.compile(r"num_floating_point_operations|megatron-core|megatron-bridge|mcore")


def flop_formula(counting: str, for_mfu: bool):
    """(function, label) of the FLOP count a record's text names (module
    docstring). A named convention wins wherever the text also says "not
    stated" (e.g. "the paper's formula is not stated; MFU per PaLM App. B"):
    the assumption applies only to a text that names none, which is read as
    Eq. 7 with the assumption in the label."""
    t = counting.replace(" ", "").lower()
    low = counting.lower()
    if "llm-foundry" in t:
        return foundry_flops, "llm-foundry 6·N·s + 12·l·h·s²"
    if "model_size_b*4*2" in t:
        return bigscience_old_flops, "BigScience 8·N·s·B"
    if "96*" in t and not for_mfu:
        return eq3_flops, "Narayanan 2021 Eq. 3 (96·B·s·l·h²…)"
    if "72*" not in t and "eq.7" not in t:
        if _PALM.search(low):
            return palm_flops, "PaLM App. B / torchtitan 6·(N−V·h) + 12·l·h·s per token"
        if _MCORE.search(low):
            if "causal" in low or "halve" in low:
                return mcore_causal_flops, "Megatron-Core num_floating_point_operations (causal)"
            return mcore_flops, "Megatron-Core num_floating_point_operations"
        if _SIX_ND.search(low):
            if "non-embedding" in low or "nonembedding" in t:
                return (lambda d: six_nd_flops(d, True)), "6·N·D (N non-embedding)"
            return six_nd_flops, "6·N·D (N as published)"
    return eq7_flops, "Korthikanti 2022 Eq. 7 (72·B·s·l·h²…)" + (
        "" if "72*" in t or "eq.7" in t else " [formula not stated: assumed]")


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


def measured_samples_per_s(throughput: Throughput, dims: Dims, num_gpus: int, device: str,
                           dtype: str, counting: str,
                           flops: tuple[float, str] | None = None) -> tuple[float, str]:
    """(samples/s, how it was obtained) of the figure a record's reading picked
    (:func:`autopar_opt.calibration.reading.measured.pick_throughput`).

    ``flops``: (FLOPs of one iteration, label) to invert the FLOP-derived
    figures with, in place of the dense :func:`flop_formula` (MoE records:
    ``moe_build.moe_flop_count``)."""
    def count(for_mfu: bool) -> tuple[float, str]:
        if flops is not None:
            return flops
        fn, label = flop_formula(counting, for_mfu=for_mfu)
        return fn(dims), label

    key, v = throughput.key, throughput.value
    name = throughput.name
    if name == "iteration_time_s":
        return dims.batch / v, f"iteration_time_s = {v:g} s"
    if name == "tokens_per_sec_per_gpu":
        return v * num_gpus / dims.seq, f"tokens_per_sec_per_gpu = {v:g}"
    if name in ("tokens_per_sec_total", "tokens_per_sec", "tokens_per_second"):
        return v / dims.seq, f"{key} = {v:g} (all GPUs) / seq {dims.seq}"
    if name in ("samples_per_sec", "samples_per_sec_from_log", "sequences_per_sec"):
        return v, f"{key} = {v:g}"
    if name == "mfu_pct":
        peak_dtype = mfu_peak_dtype(counting, device, dtype)
        peak = DEVICE_CATALOG[device].peak_flops(peak_dtype)
        f, label = count(for_mfu=True)
        t = f / (v / 100.0 * peak * num_gpus)
        return dims.batch / t, (f"mfu_pct = {v:g} inverted with {label}, peak {peak / 1e12:g} "
                                f"TFLOP/s" + (f" ({peak_dtype} peak)" if peak_dtype != dtype else ""))
    if name == "tflops_per_gpu":
        f, label = count(for_mfu=False)
        t = f / (v * 1e12 * num_gpus)
        return dims.batch / t, f"tflops_per_gpu = {v:g} inverted with {label}"
    if name == "aggregate_pflops":
        f, label = count(for_mfu=False)
        t = f / (v * 1e15)
        return dims.batch / t, (f"aggregate_pflops = {v:g} (= {v * 1e3 / num_gpus:.4g} "
                                f"TFLOP/s per GPU) inverted with {label}")
    raise ValueError(f"measured.{key}: not a throughput key")
