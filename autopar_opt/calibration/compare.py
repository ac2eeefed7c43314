"""Predicted vs measured throughput (and memory) for modeled runs.

``rel_error = predicted / measured - 1`` on samples per second. End-to-end
records are priced by :func:`autopar_opt.evaluate.evaluate` on the record's
manual plan; per-layer records by ``layer_cost`` of one transformer block.
Memory (peak GiB per GPU over the stages) is compared separately and is not
part of the throughput statistics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from autopar_opt.calibration.records import ModeledRun
from autopar_opt.cost.layer_cost import StageContext, layer_cost
from autopar_opt.cost.params import CostParams
from autopar_opt.evaluate import PlanError, evaluate


@dataclass
class Comparison:
    """One modeled record: predicted vs measured samples/s."""

    id: str
    family: str
    kind: str
    predicted: float
    measured: float
    measured_basis: str
    predicted_memory_gib: float | None
    measured_memory_gib: float | None
    assumptions: list[str]

    @property
    def rel_error(self) -> float:
        return self.predicted / self.measured - 1.0

    def to_dict(self) -> dict:
        mem_err = None
        if self.predicted_memory_gib is not None and self.measured_memory_gib:
            mem_err = self.predicted_memory_gib / self.measured_memory_gib - 1.0
        return {"id": self.id, "family": self.family, "kind": self.kind,
                "predicted": self.predicted, "measured": self.measured,
                "rel_error": self.rel_error, "unit": "samples/s",
                "measured_basis": self.measured_basis,
                "predicted_memory_gib": self.predicted_memory_gib,
                "measured_memory_gib": self.measured_memory_gib,
                "memory_rel_error": mem_err, "assumptions": list(self.assumptions)}


def params_for(run: ModeledRun, params: CostParams, factors: dict[str, float]) -> CostParams:
    """``params`` with the run's own overrides and its software-stack factor
    applied to GEMM efficiency.

    The factor models kernel quality of the framework (fused kernels,
    FlashAttention: Dao et al. 2022 report 15% end-to-end speed-up of BERT and
    3x of GPT-2 training over the Megatron/HF baselines); efficiencies stay ≤ 1.
    """
    if run.overrides:
        params = replace(params, **run.overrides)
    f = factors.get(run.family, 1.0)
    if f == 1.0:
        return params
    eff = {k: min(1.0, v * f) for k, v in params.gemm_efficiency.items()}
    return replace(params, gemm_efficiency=eff,
                   gemm_efficiency_default=min(1.0, params.gemm_efficiency_default * f))


def predict(run: ModeledRun, params: CostParams, factors: dict[str, float] | None = None
            ) -> tuple[float, float | None]:
    """(predicted samples/s, predicted peak memory GiB per GPU or None)."""
    p = params_for(run, params, factors or {})
    if run.kind == "per_layer":
        ctx = StageContext(run.cluster, run.training, p, run.strategy.devices,
                           run.microbatch_samples)
        cost = layer_cost(run.block, run.strategy, ctx)
        return run.microbatch_samples / cost.time_s, None
    metrics = evaluate(run.plan, run.graph, run.cluster, run.training, p)
    return metrics.samples_per_s, max(metrics.peak_memory_gib)


def compare(run: ModeledRun, params: CostParams, factors: dict[str, float] | None = None
            ) -> Comparison:
    """Price one run; raises :class:`PlanError` when its plan is malformed."""
    pred, mem = predict(run, params, factors)
    return Comparison(run.id, run.family, run.kind, pred, run.measured_samples_per_s,
                      run.measured_basis, mem, run.measured_memory_gib, run.assumptions)


def summarize(comparisons: list[Comparison], total: int) -> dict:
    """Median / 90th percentile / max of |rel error|, modeled count, memory stats."""
    errs = np.array([abs(c.rel_error) for c in comparisons], dtype=float)
    mem = np.array([abs(c.predicted_memory_gib / c.measured_memory_gib - 1.0) for c in comparisons
                    if c.predicted_memory_gib is not None and c.measured_memory_gib], dtype=float)

    def stat(a: np.ndarray, q: float) -> float | None:
        return float(np.percentile(a, q)) if a.size else None

    return {"total": total, "modeled": len(comparisons),
            "modeled_fraction": len(comparisons) / total if total else 0.0,
            "median_abs_rel_error": stat(errs, 50), "p90_abs_rel_error": stat(errs, 90),
            "max_abs_rel_error": float(errs.max()) if errs.size else None,
            "mean_signed_rel_error": float(np.mean([c.rel_error for c in comparisons]))
            if comparisons else None,
            "memory_compared": int(mem.size), "memory_median_abs_rel_error": stat(mem, 50),
            "memory_max_abs_rel_error": float(mem.max()) if mem.size else None}


def log_residuals(runs: list[ModeledRun], params: CostParams, factors: dict[str, float]
                  ) -> np.ndarray:
    """``log(predicted / measured)`` per run: the fit's residual vector."""
    out = np.empty(len(runs))
    for i, run in enumerate(runs):
        pred, _ = predict(run, params, factors)
        out[i] = math.log(pred / run.measured_samples_per_s)
    return out


__all__ = ["Comparison", "PlanError", "compare", "log_residuals", "params_for", "predict",
           "summarize"]
