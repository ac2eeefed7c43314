"""Measured throughput of a published run on one common basis: samples per second.

Records publish different metrics. In order of preference (the most direct
first): ``iteration_time_s``, ``tokens_per_sec_per_gpu``, ``samples_per_sec``,
``mfu_pct`` and ``tflops_per_gpu``. The last two are inverted with the FLOP
formula the record says it used (its ``flops_counting`` text):

* Narayanan et al. 2021, Eq. 3 (recompute-inclusive, "96" form):
  ``F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))``.
* Korthikanti et al. 2022, App. A, Eq. 7 (model FLOPs, "72" form), which is
  also Megatron-Core's ``num_floating_point_operations`` for a 4h MLP with
  multi-head attention: ``F = 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h))``.
* llm-foundry (``callbacks/speed_monitor`` / MPT ``flops_per_batch``):
  ``F = B·(6·N·s + 3·4·l·h·s²)`` with ``N`` the parameter count
  (embeddings included); HFU uses 8 and 4 instead of 6 and 3.
* BigScience pre-2022-02-21 estimate: ``F = 8·N·s·B``.

A formula that the text does not name falls back to Eq. 7 and says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from autopar_opt.hardware import DEVICE_CATALOG


@dataclass(frozen=True)
class Dims:
    """What the FLOP formulas need: batch, sequence, layers, hidden, vocab, params."""

    batch: int
    seq: int
    layers: int
    hidden: int
    vocab: int
    params: float


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


def flop_formula(counting: str, for_mfu: bool):
    """(function, label) of the FLOP count a record's text names."""
    t = counting.replace(" ", "").lower()
    if "llm-foundry" in t:
        return foundry_flops, "llm-foundry 6·N·s + 12·l·h·s²"
    if "model_size_b*4*2" in t:
        return bigscience_old_flops, "BigScience 8·N·s·B"
    if "96*" in t and not for_mfu:
        return eq3_flops, "Narayanan 2021 Eq. 3 (96·B·s·l·h²…)"
    return eq7_flops, "Korthikanti 2022 Eq. 7 (72·B·s·l·h²…)" + (
        "" if "72*" in t or "eq.7" in t else " [formula not stated: assumed]")


def measured_samples_per_s(measured: dict, dims: Dims, num_gpus: int, device: str,
                           dtype: str, counting: str) -> tuple[float, str]:
    """(samples/s, how it was obtained); raises ValueError when nothing is usable."""
    def get(key: str) -> float | None:
        v = measured.get(key)
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
        return float(v) if ok else None

    if (t := get("iteration_time_s")) is not None:
        return dims.batch / t, f"iteration_time_s = {t:g} s"
    if (tok := get("tokens_per_sec_per_gpu")) is not None:
        return tok * num_gpus / dims.seq, f"tokens_per_sec_per_gpu = {tok:g}"
    if (sps := get("samples_per_sec")) is not None:
        return sps, f"samples_per_sec = {sps:g}"
    peak = DEVICE_CATALOG[device].peak_flops(dtype)
    if (mfu := get("mfu_pct")) is not None:
        fn, label = flop_formula(counting, for_mfu=True)
        t = fn(dims) / (mfu / 100.0 * peak * num_gpus)
        return dims.batch / t, f"mfu_pct = {mfu:g} inverted with {label}, peak {peak / 1e12:g} TFLOP/s"
    if (tf := get("tflops_per_gpu")) is not None:
        fn, label = flop_formula(counting, for_mfu=False)
        t = fn(dims) / (tf * 1e12 * num_gpus)
        return dims.batch / t, f"tflops_per_gpu = {tf:g} inverted with {label}"
    raise ValueError("no usable measured throughput (iteration_time_s, tokens_per_sec_per_gpu, "
                     "samples_per_sec, mfu_pct, tflops_per_gpu all null)")
