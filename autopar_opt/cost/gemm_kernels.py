"""Measured GEMM speeds by shape and dtype, and the cost model's GEMM curve fitted to them.

:func:`autopar_opt.cost.compute.kernel_time` prices a GEMM whose time at peak is ``τ`` as
``(τ + τ_half) / eff_max``: linear in ``τ``. Fitted to a microbenchmark's rows (one
GEMM per row, its measured time ``t_i``), the two constants are a linear least-squares
problem on the relative error, ``min Σ ((a·τ_i + b) / t_i − 1)²`` with ``eff_max = 1/a``
and ``τ_half = b/a`` (closed form: ``numpy.linalg.lstsq``). That is a fit to kernel
measurements, not to training runs: issue 28, point 1, "pin what a microbenchmark can
pin".

The rows are ``data/gemm_kernels.yaml`` (written by ``benchmarks/kernels/gemm_table.py``):
this project's H100 measurement (isolated ``torch.matmul`` / ``torch._scaled_mm`` calls,
launch latency included) and OpenXLA's default matmul tables for H100 and B200 (kernel
time only). Each source is fitted on its own (:func:`source_fits`, :func:`die_curves`).

Which constants the shipped model takes from here (:mod:`autopar_opt.calibration.fit`):

* a die measured **back to back at its power limit** (source ``time: back-to-back calls``:
  the GEMMs training runs, queued one after another for as long as a step lasts, at the
  clock the power limit allows under that load) takes that measurement's 16-bit ``eff_max``,
  not a fit: the H100 die from the project's own H200 run (``own_h200``, 0.699; the
  GH100 die at 700 W, as on H100 SXM). An isolated call or a traced kernel runs at the
  boost clock, which a sustained load does not keep (``benchmarks/kernels/H200.md``:
  1,440-1,590 MHz of 1,980 under 8192³ GEMMs, throttle reason SW power cap);
* a chip no published training run identifies (Blackwell) takes its die's measured
  ``eff_max`` (the median over its sources) instead of a transfer from other chips;
* every other chip keeps its fitted efficiency. ``benchmarks/kernels/GEMM.md`` sets the
  fitted values beside these curves.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np

from autopar_opt.ir.hardware import DEVICE_CATALOG

#: A source timed as training runs its GEMMs: back to back, at the power-limited clock.
SUSTAINED = "back-to-back calls"
#: Dies whose devices share a measured curve (same compute die; the fit's chip groups).
DIE_OF_DEVICE = {"H100-SXM-80GB": "H100", "H200-141GB": "H100", "B200": "Blackwell"}


@dataclass(frozen=True)
class Curve:
    """``eff(τ) = eff_max · τ / (τ + τ_half)`` fitted to ``n`` measured GEMMs, with the
    median and largest relative error of the fitted times against the measured ones."""

    eff_max: float
    half_us: float
    n: int
    median_rel_error: float
    max_rel_error: float


@dataclass(frozen=True)
class Row:
    """One measured GEMM: FLOPs, seconds, at the device's dense peak of its dtype."""

    source: str
    device: str
    dtype: str
    flops: float
    seconds: float
    peak: float
    #: how the source timed it (its ``time`` entry in the data file, e.g. :data:`SUSTAINED`)
    timing: str = ""

    @property
    def efficiency(self) -> float:
        return self.flops / self.seconds / self.peak


def _data_text() -> str:
    return resources.files("autopar_opt.cost").joinpath("data", "gemm_kernels.yaml").read_text()


@lru_cache(maxsize=1)
def rows() -> tuple[Row, ...]:
    """Every row of ``data/gemm_kernels.yaml``, priced against its device's datasheet peak
    (:data:`~autopar_opt.ir.hardware.DEVICE_CATALOG`). A row faster than that peak is an
    error of the table, never silently kept."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data = yaml.load(_data_text(), Loader=loader)
    out = []
    for r in data["rows"]:
        source = data["sources"][r["source"]]
        device = source["device"]
        flops = 2.0 * r["b"] * r["m"] * r["n"] * r["k"]
        row = Row(r["source"], device, r["dtype"], flops, flops / (r["tflops"] * 1e12),
                  DEVICE_CATALOG[device].peak_tflops[r["dtype"]] * 1e12, source.get("time", ""))
        if row.efficiency > 1.0:
            raise ValueError(f"gemm_kernels.yaml: {r} runs at {row.efficiency:.2f}x the "
                             f"{device} {r['dtype']} dense peak")
        out.append(row)
    return tuple(out)


def fit_curve(measured: list[Row]) -> Curve:
    """Least-squares ``(eff_max, τ_half)`` on the rows' relative time error (module
    docstring)."""
    if len(measured) < 2:
        raise ValueError("a GEMM curve needs at least two measured shapes")
    t = np.array([r.seconds for r in measured])
    tau = np.array([r.flops / r.peak for r in measured])
    design = np.stack([tau / t, 1.0 / t], axis=1)
    a, b = np.linalg.lstsq(design, np.ones_like(t), rcond=None)[0]
    rel = np.abs((a * tau + b) / t - 1.0)
    return Curve(float(1.0 / a), float(b / a * 1e6), len(measured), float(np.median(rel)),
                 float(rel.max()))


@lru_cache(maxsize=None)
def source_fits() -> dict[tuple[str, str], Curve]:
    """(source, dtype) -> the curve fitted to that source's rows alone."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in rows():
        groups.setdefault((r.source, r.dtype), []).append(r)
    return {k: fit_curve(v) for k, v in sorted(groups.items())}


@lru_cache(maxsize=1)
def _die_of_source() -> dict[str, str | None]:
    """source -> the die its device belongs to (:data:`DIE_OF_DEVICE`; None if none)."""
    return {r.source: DIE_OF_DEVICE.get(r.device) for r in rows()}


def die_curves(die: str, dtype: str) -> dict[str, Curve]:
    """source -> its curve, for every source measuring ``die`` (:data:`DIE_OF_DEVICE`) in
    ``dtype`` (``bf16``/``fp8``). Sources are never pooled into one fit: they time
    different things (an isolated call with its launch latency, or the kernel alone), so
    their ``τ_half`` differ by design (H100 bf16: 23 µs and 4.8 µs)."""
    dies = _die_of_source()
    return {src: c for (src, dt), c in source_fits().items() if dt == dtype and dies[src] == die}


@lru_cache(maxsize=None)
def sustained_efficiency(die: str, dtype: str) -> float | None:
    """The large-GEMM efficiency (``eff_max``) of a die's microbenchmarks timed back to back
    at the power-limited clock (:data:`SUSTAINED`), the median over such sources; None
    where none measures the die so."""
    curves = die_curves(die, dtype)
    sources = sustained_sources(die, dtype)
    return float(np.median([curves[src].eff_max for src in sources])) if sources else None


def sustained_sources(die: str, dtype: str) -> list[str]:
    """The names of the sources :func:`sustained_efficiency` reads."""
    timed_so = {r.source for r in rows() if r.timing == SUSTAINED}
    return sorted(src for src in die_curves(die, dtype) if src in timed_so)


@lru_cache(maxsize=None)
def measured_efficiency(die: str, dtype: str) -> float | None:
    """The large-GEMM efficiency (``eff_max``) a die's microbenchmarks give: the sustained
    one where the die has one (:func:`sustained_efficiency`), else the median over its
    sources; None where none measures it. Cached: the calibration fit asks for it in
    every evaluation of its residuals."""
    sustained = sustained_efficiency(die, dtype)
    if sustained is not None:
        return sustained
    curves = die_curves(die, dtype)
    return float(np.median([c.eff_max for c in curves.values()])) if curves else None
