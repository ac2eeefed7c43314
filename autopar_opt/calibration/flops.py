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

from dataclasses import dataclass
from typing import TYPE_CHECKING

from autopar_opt.ir.hardware import DEVICE_CATALOG

if TYPE_CHECKING:     # the reading imports this module (its FORMULAS): no import back
    from autopar_opt.calibration.reading.counting import FlopCount
    from autopar_opt.calibration.reading.measured import Throughput


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


#: Every convention by key (:func:`autopar_opt.calibration.reading.counting.convention`).
FORMULAS = {"eq3": eq3_flops, "eq7": eq7_flops, "foundry": foundry_flops,
            "bigscience_old": bigscience_old_flops, "palm": palm_flops, "mcore": mcore_flops,
            "mcore_causal": mcore_causal_flops, "six_nd": six_nd_flops,
            "six_nd_non_embedding": lambda d: six_nd_flops(d, True)}


def measured_samples_per_s(throughput: Throughput, dims: Dims, num_gpus: int, device: str,
                           dtype: str, count: FlopCount,
                           flops: tuple[float, str] | None = None) -> tuple[float, str]:
    """(samples/s, how it was obtained) of the figure a record's reading picked
    (:func:`autopar_opt.calibration.reading.measured.pick_throughput`), its
    FLOP figures inverted with the convention ``count`` (a
    :class:`~autopar_opt.calibration.reading.counting.FlopCount`).

    ``flops``: (FLOPs of one iteration, label) to invert the FLOP-derived
    figures with, in place of the dense convention (MoE records:
    ``moe_build.moe_flop_count``)."""
    def count_for(for_mfu: bool) -> tuple[float, str]:
        if flops is not None:
            return flops
        key, label = count.mfu if for_mfu else count.rate
        return FORMULAS[key](dims), label

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
        peak_dtype = count.mfu_peak_dtype
        peak = DEVICE_CATALOG[device].datasheet_flops(peak_dtype)
        f, label = count_for(for_mfu=True)
        t = f / (v / 100.0 * peak * num_gpus)
        return dims.batch / t, (f"mfu_pct = {v:g} inverted with {label}, peak {peak / 1e12:g} "
                                f"TFLOP/s" + (f" ({peak_dtype} peak)" if peak_dtype != dtype else ""))
    if name == "tflops_per_gpu":
        f, label = count_for(for_mfu=False)
        t = f / (v * 1e12 * num_gpus)
        return dims.batch / t, f"tflops_per_gpu = {v:g} inverted with {label}"
    if name == "aggregate_pflops":
        f, label = count_for(for_mfu=False)
        t = f / (v * 1e15)
        return dims.batch / t, (f"aggregate_pflops = {v:g} (= {v * 1e3 / num_gpus:.4g} "
                                f"TFLOP/s per GPU) inverted with {label}")
    raise ValueError(f"measured.{key}: not a throughput key")
