"""Predicted vs measured throughput (and memory) for modeled runs.

``rel_error = predicted / measured - 1`` on samples per second. End-to-end
records are priced by :func:`autopar_opt.cost.evaluate.evaluate` on the record's
manual plan; per-layer records by ``layer_cost`` of one transformer block.
Memory (per GPU, on the measure the record states:
:mod:`autopar_opt.calibration.memory`) is compared separately and is not
part of the throughput statistics; a memory-only record (memory published,
no throughput) enters the memory statistics alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from autopar_opt.calibration.memory import MemoryComparison, modelled_gib, on_measure
from autopar_opt.calibration.modeled import ModeledRun
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.params import CostParams
from autopar_opt.cost.evaluate import PlanError, evaluate


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
    #: ``fits`` / ``tight`` / ``over`` of the priced plan's busiest stage on the
    #: whole device (``evaluate.StageMetrics.memory_status``: modelled bytes x
    #: (1 + fragmentation) + reserve against the device's memory), None for a
    #: per-layer record. ``over``: the model says the published plan, which ran,
    #: does not fit its GPU.
    memory_status: str | None = None
    #: That stage's device peak and capacity, GiB (None for a per-layer record).
    device_peak_gib: float | None = None
    capacity_gib: float | None = None
    #: The built model's parameters (all of them; those a token uses) and the
    #: architecture facts no field, known family or text stated (assumed).
    params_total: int = 0
    params_active: int = 0
    architecture_assumed: tuple[str, ...] = ()

    @property
    def rel_error(self) -> float:
        return self.predicted / self.measured - 1.0

    @property
    def over_capacity(self) -> bool:
        """Whether the priced plan needs more memory than its device has."""
        return self.memory_status == "over"

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
                "memory_rel_error": mem_err, "assumptions": list(self.assumptions),
                "memory_status": self.memory_status, "device_peak_gib": self.device_peak_gib,
                "capacity_gib": self.capacity_gib, "params_total": self.params_total,
                "params_active": self.params_active,
                "architecture_assumed": list(self.architecture_assumed)}


#: Worst first: the status a plan reports is its worst stage's.
_STATUS_ORDER = {"over": 0, "tight": 1, "fits": 2}


def _priced(run: ModeledRun, params: CostParams):
    """(samples/s, memory GiB on the record's measure or None, the busiest stage's
    StageMetrics or None): one evaluation for both :func:`predict` and :func:`compare`."""
    if run.kind == "per_layer":
        ctx = StageContext(run.cluster, run.training, params, run.strategy.devices,
                           run.microbatch_samples)
        cost = layer_cost(run.block, run.strategy, ctx)
        return run.microbatch_samples / cost.time_s, None, None
    metrics = evaluate(run.plan, run.graph, run.cluster, run.training, params)
    modelled = modelled_gib(metrics.stages, run.memory_rank)
    worst = min(metrics.stages, key=lambda st: (_STATUS_ORDER[st.memory_status],
                                                -st.peak_memory_gib))
    return metrics.samples_per_s, on_measure(modelled, run.memory_measure,
                                             params.memory_reserve_gib,
                                             params.memory_fragmentation), worst


def predict(run: ModeledRun, params: CostParams) -> tuple[float, float | None]:
    """(predicted samples/s, predicted peak memory GiB per GPU or None)."""
    pred, mem, _ = _priced(run, params)
    return pred, mem


def compare(run: ModeledRun, params: CostParams) -> Comparison:
    """Price one run; raises :class:`PlanError` when its plan is malformed and
    ValueError for a memory-only run (:func:`compare_memory`)."""
    if run.memory_only:
        raise ValueError(f"{run.id}: memory-only record has no throughput to compare")
    pred, mem, st = _priced(run, params)
    return Comparison(run.id, run.family, run.kind, pred, run.measured_samples_per_s,
                      run.measured_basis, mem, run.measured_memory_gib, run.assumptions,
                      memory_status=st.memory_status if st else None,
                      device_peak_gib=st.peak_memory_gib if st else None,
                      capacity_gib=st.capacity_gib if st else None,
                      params_total=run.params_total, params_active=run.params_active,
                      architecture_assumed=run.architecture_assumed)


def compare_memory(run: ModeledRun, params: CostParams) -> MemoryComparison:
    """Predicted vs published memory of a memory-only run, on its measure."""
    _, mem = predict(run, params)
    return MemoryComparison(run.id, run.family, run.memory_measure, run.memory_rank, mem,
                            run.measured_memory_gib, run.assumptions, run.params_total,
                            run.params_active, run.architecture_assumed)


def summarize(comparisons: list[Comparison], total: int,
              memory_only: list[MemoryComparison] = ()) -> dict:
    """Median / 90th percentile / max of |rel error| over the throughput
    records, modeled count, memory statistics over every record that states
    memory (throughput records and ``memory_only`` ones)."""
    errs = np.array([abs(c.rel_error) for c in comparisons], dtype=float)
    mem = np.array([abs(c.predicted_memory_gib / c.measured_memory_gib - 1.0) for c in comparisons
                    if c.predicted_memory_gib is not None and c.measured_memory_gib]
                   + [abs(m.memory_rel_error) for m in memory_only], dtype=float)

    def stat(a: np.ndarray, q: float) -> float | None:
        return float(np.percentile(a, q)) if a.size else None

    modeled = len(comparisons) + len(memory_only)
    return {"total": total, "modeled": modeled,
            "modeled_fraction": modeled / total if total else 0.0,
            "throughput_compared": len(comparisons), "memory_only": len(memory_only),
            "median_abs_rel_error": stat(errs, 50), "p90_abs_rel_error": stat(errs, 90),
            "max_abs_rel_error": float(errs.max()) if errs.size else None,
            "mean_signed_rel_error": float(np.mean([c.rel_error for c in comparisons]))
            if comparisons else None,
            "memory_compared": int(mem.size), "memory_median_abs_rel_error": stat(mem, 50),
            "memory_max_abs_rel_error": float(mem.max()) if mem.size else None}


def params_text(total: int, active: int) -> str:
    """Built parameters in billions, ``total (active)`` when an MoE's differ."""
    text = f"{total / 1e9:.3g}"
    return text if active == total else f"{text} ({active / 1e9:.3g} active)"


def device_fit(c: Comparison) -> str:
    """The priced plan against its device's memory (``Comparison.memory_status``):
    ``fits``, ``tight`` (headroom below 5%), or ``**over**`` with its device peak
    and capacity (the model says a plan that ran does not fit)."""
    if c.memory_status is None:
        return "-"
    if c.memory_status == "over":
        return f"**over** ({c.device_peak_gib:.1f} > {c.capacity_gib:g} GiB)"
    return c.memory_status


def over_capacity_line(comparisons: list[Comparison]) -> str:
    """One summary sentence naming the records whose priced plan does not fit."""
    over = [c for c in comparisons if c.over_capacity]
    if not over:
        return "Every priced plan fits its device's memory under the model.\n"
    return (f"**{len(over)} priced plan(s) need more memory than their device has** (they ran: "
            "the model or the record's stated layout is wrong for them; column `device fit`): "
            + ", ".join(f"`{c.id}` {c.device_peak_gib:.1f} GiB on {c.capacity_gib:g} GiB"
                        for c in over) + ".\n")


def log_residuals(runs: list[ModeledRun], params: CostParams) -> np.ndarray:
    """``log(predicted / measured)`` per run with a measured throughput (the
    fit's residual vector; memory-only runs have none)."""
    runs = [r for r in runs if not r.memory_only]
    out = np.empty(len(runs))
    for i, run in enumerate(runs):
        pred, _ = predict(run, params)
        out[i] = math.log(pred / run.measured_samples_per_s)
    return out


__all__ = ["Comparison", "MemoryComparison", "PlanError", "compare", "compare_memory",
           "device_fit", "log_residuals", "over_capacity_line", "params_text", "predict",
           "summarize"]
