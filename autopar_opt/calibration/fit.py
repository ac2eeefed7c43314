"""Fit the free cost-model parameters to published runs.

Objective: robust least squares on ``r_j = log(predicted_j / measured_j)``
(scipy ``least_squares``, ``soft_l1`` loss with scale 0.1: quadratic for
errors below ~10%, linear above, so a few runs the model cannot explain, e.g.
FP8 or 64k-token sequences, do not drag the rest). Parameters stay
physically meaningful: efficiencies and overlaps in (0, 1], overheads ≥ 0.

The parameters (13 at most, for 80+ runs):

* ``eff:<chip>`` – peak GEMM efficiency per compute chip (A100 40/80 GB
  share one; H200 shares the H100's GH100 die and dense peak).
* ``factor:<stack>`` – kernel quality of a software stack relative to
  Megatron-LM 2020-22 (FlashAttention: Dao et al. 2022; Transformer Engine
  fused kernels in Megatron-Core: NVIDIA 2023). Megatron-LM is the reference
  (factor 1) and ``calibrated.yaml`` stores its efficiencies.
* ``efficiency_half_us``, ``comm_efficiency``, ``attention_efficiency``, ``dp_overlap``,
  ``zero3_overlap``, ``layer_overhead_us``, ``iteration_overhead_s`` (see
  :class:`~autopar_opt.cost.params.CostParams`).

A parameter no training run depends on stays at its prior, which is how
leave-one-family-out validation treats the held-out stack.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from autopar_opt.calibration.compare import log_residuals
from autopar_opt.calibration.records import ModeledRun
from autopar_opt.cost.params import CostParams

#: Chips whose devices share one efficiency (same compute die and dense peak).
CHIP_GROUPS: dict[str, tuple[str, ...]] = {
    "V100": ("V100-32GB",),
    "A100": ("A100-40GB", "A100-80GB"),
    "H100": ("H100-SXM-80GB", "H200-141GB"),
}
#: Software stacks with a fitted factor (Megatron-LM is the reference, 1.0).
STACKS = ("megatron_core", "llm_foundry", "megatron_deepspeed")
REFERENCE_STACK = "megatron_lm"

#: name -> (lower, upper) bounds of the scalar parameters.
SCALARS: dict[str, tuple[float, float]] = {
    "efficiency_half_us": (0.01, 2000.0),
    "comm_efficiency": (0.05, 1.0),
    "attention_efficiency": (0.1, 1.0),
    "dp_overlap": (0.0, 1.0),
    "zero3_overlap": (0.0, 1.0),
    "layer_overhead_us": (0.0, 2000.0),
    "iteration_overhead_s": (0.0, 5.0),
}


@dataclass
class FitResult:
    """Fitted parameters, stack factors, and what the fit saw."""

    params: CostParams
    factors: dict[str, float]
    free: list[str]
    sum_sq_log_error: float
    robust_cost: float
    nfev: int
    message: str


def _used(name: str, runs: list[ModeledRun]) -> bool:
    if name.startswith("eff:"):
        devices = CHIP_GROUPS[name[4:]]
        return any(r.cluster.device.name in devices for r in runs)
    if name.startswith("factor:"):
        return any(r.family == name[7:] for r in runs)
    if name == "zero3_overlap":
        return any(r.strategy.zero >= 3 and r.strategy.dp > 1 for r in runs)
    if name == "dp_overlap":
        return any(r.strategy.zero < 3 and r.strategy.dp > 1 and "dp_overlap" not in r.overrides
                   for r in runs)
    return True


def _start(prior: CostParams) -> dict[str, float]:
    theta = {f"eff:{chip}": prior.efficiency_for(devs[0]) for chip, devs in CHIP_GROUPS.items()}
    theta.update({f"factor:{s}": 1.0 for s in STACKS})
    theta.update({k: float(getattr(prior, k)) for k in SCALARS})
    return theta


def _bounds(name: str) -> tuple[float, float]:
    if name.startswith("eff:"):
        return 0.05, 1.0
    if name.startswith("factor:"):
        return 0.5, 2.0
    return SCALARS[name]


def assemble(prior: CostParams, theta: dict[str, float]) -> tuple[CostParams, dict[str, float]]:
    """CostParams and stack factors from a parameter dictionary."""
    eff = dict(prior.gemm_efficiency)
    for chip, devices in CHIP_GROUPS.items():
        for dev in devices:
            eff[dev] = theta[f"eff:{chip}"]
    scalars = {k: theta[k] for k in SCALARS}
    params = replace(prior, gemm_efficiency=eff, **scalars)
    factors = {s: theta[f"factor:{s}"] for s in STACKS}
    factors[REFERENCE_STACK] = 1.0
    return params, factors


def fit(runs: list[ModeledRun], prior: CostParams | None = None, max_nfev: int = 400
        ) -> FitResult:
    """Fit the parameters the ``runs`` depend on; the others keep ``prior``'s values."""
    from scipy.optimize import least_squares   # runtime dependency of --fit only

    if not runs:
        raise ValueError("no modeled runs to fit")
    prior = prior or CostParams()
    theta0 = _start(prior)
    free = [k for k in theta0 if _used(k, runs)]
    lo = np.array([_bounds(k)[0] for k in free])
    hi = np.array([_bounds(k)[1] for k in free])
    x0 = np.clip(np.array([theta0[k] for k in free]), lo, hi)

    def residuals(x: np.ndarray) -> np.ndarray:
        theta = dict(theta0)
        theta.update(zip(free, x))
        return log_residuals(runs, *assemble(prior, theta))

    sol = least_squares(residuals, x0, bounds=(lo, hi), loss="soft_l1", f_scale=0.1,
                        x_scale=np.maximum(hi - lo, 1e-3) * 0.1, max_nfev=max_nfev)
    theta = dict(theta0)
    theta.update(zip(free, (float(v) for v in sol.x)))
    params, factors = assemble(prior, theta)
    r = residuals(sol.x)
    return FitResult(params, factors, free, float(np.sum(r * r)), float(sol.cost),
                     int(sol.nfev), str(sol.message))
