"""Predicted vs measured throughput (and memory) for modeled runs.

``rel_error = predicted / measured - 1`` on samples per second. End-to-end
records are priced by :func:`autopar_opt.evaluate.evaluate` on the record's
manual plan; per-layer records by ``layer_cost`` of one transformer block.
Memory (peak GiB per GPU over the stages) is compared separately and is not
part of the throughput statistics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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


def predict(run: ModeledRun, params: CostParams) -> tuple[float, float | None]:
    """(predicted samples/s, predicted peak memory GiB per GPU or None)."""
    if run.kind == "per_layer":
        ctx = StageContext(run.cluster, run.training, params, run.strategy.devices,
                           run.microbatch_samples)
        cost = layer_cost(run.block, run.strategy, ctx)
        return run.microbatch_samples / cost.time_s, None
    metrics = evaluate(run.plan, run.graph, run.cluster, run.training, params)
    return metrics.samples_per_s, max(metrics.peak_memory_gib)


def compare(run: ModeledRun, params: CostParams) -> Comparison:
    """Price one run; raises :class:`PlanError` when its plan is malformed."""
    pred, mem = predict(run, params)
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


def log_residuals(runs: list[ModeledRun], params: CostParams) -> np.ndarray:
    """``log(predicted / measured)`` per run: the fit's residual vector."""
    out = np.empty(len(runs))
    for i, run in enumerate(runs):
        pred, _ = predict(run, params)
        out[i] = math.log(pred / run.measured_samples_per_s)
    return out


__all__ = ["Comparison", "PlanError", "compare", "log_residuals", "predict", "summarize"]
