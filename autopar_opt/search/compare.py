"""Why two plans differ: a comparison generated from their cost breakdowns (issue 29).

The search's optimum and a reference plan (the spec's ``plan:``, e.g. a
published recipe) are both priced by :func:`~autopar_opt.cost.evaluate.evaluate`;
their iteration times split along the critical path into the same terms
(:func:`~autopar_opt.cost.evaluate.iteration_breakdown`: compute, exposed
TP/CP/MoE/ZeRO-3 communication, resharding, offload, gradient reduction,
optimizer step, fixed cost, pipeline bubble). Recomputation is inside
``compute_s``; its share is ``1 - MFU/HFU`` (model FLOPs against hardware
FLOPs, the recomputed forward included: :class:`~autopar_opt.cost.evaluate.PlanMetrics`),
so compute is shown as compute without it plus recomputation. Memory: each
plan's least headroom over its stages.

Where the two iteration times differ by more than :data:`EXPLAIN_ABOVE`, the
explanation names the terms that differ most (in seconds per iteration), so a
reader sees *why* (e.g. "pipeline bubble 1.10 s vs 0.41 s") instead of a ratio
alone. Nothing here is written by hand per model: every figure is read from the
two breakdowns.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autopar_opt.core.result import recomputed_share
from autopar_opt.cost.evaluate import PlanMetrics

#: Relative difference of the iteration times above which the comparison is explained.
EXPLAIN_ABOVE = 0.05
#: Terms named in the explanation (the largest differences), at most.
MAX_TERMS = 3

#: Breakdown keys (``iteration_breakdown``) and their names, in a stable order.
TERMS: tuple[tuple[str, str], ...] = (
    ("pipeline_bubble_s", "pipeline bubble (fill/drain, stage sends)"),
    ("compute_s", "compute"),
    ("recompute_s", "recomputation"),
    ("tp_comm_s", "exposed TP communication"),
    ("cp_comm_s", "exposed CP communication"),
    ("ep_comm_s", "exposed MoE all-to-all"),
    ("zero_comm_s", "exposed ZeRO-3 gathers, ZeRO-2 reductions"),
    ("dp_comm_s", "exposed DP/ZeRO gradient reduction"),
    ("optimizer_s", "optimizer step"),
    ("reshard_s", "resharding between layers"),
    ("offload_comm_s", "activation offload"),
    ("fixed_s", "fixed per-iteration cost"),
)


def terms(metrics: PlanMetrics) -> dict[str, float]:
    """The breakdown with compute split into compute without recomputation and
    recomputation (``compute · (1 - MFU/HFU)``); seconds per iteration."""
    out = {k: float(metrics.breakdown.get(k, 0.0)) for k, _ in TERMS if k != "recompute_s"}
    out["recompute_s"] = out["compute_s"] * recomputed_share(metrics.mfu, metrics.hfu)
    out["compute_s"] -= out["recompute_s"]
    return out


def least_headroom(metrics: PlanMetrics) -> float:
    """The smallest free-memory fraction over the plan's stages."""
    return min((st.headroom_fraction for st in metrics.stages), default=0.0)


@dataclass
class Comparison:
    """A plan (``other``) against the optimum (``best``)."""

    best_s: float
    other_s: float
    #: per term (TERMS key): (optimum s, other s)
    terms: dict[str, tuple[float, float]] = field(default_factory=dict)
    best_headroom: float = 0.0
    other_headroom: float = 0.0

    @property
    def relative(self) -> float:
        """``other / best - 1`` (positive: the other plan is slower)."""
        return self.other_s / self.best_s - 1.0 if self.best_s > 0 else float("nan")

    @property
    def explained(self) -> bool:
        return abs(self.relative) > EXPLAIN_ABOVE

    def largest(self) -> list[tuple[str, float, float]]:
        """The terms that differ most, ``(name, optimum s, other s)``, largest first."""
        names = dict(TERMS)
        rows = sorted(self.terms.items(), key=lambda kv: -abs(kv[1][1] - kv[1][0]))
        return [(names[k], a, b) for k, (a, b) in rows[:MAX_TERMS] if abs(b - a) > 0.0]

    def text(self, other_name: str = "the plan", best_name: str = "the optimum") -> str:
        """One sentence: the difference and, above :data:`EXPLAIN_ABOVE`, why."""
        pct = 100.0 * self.relative
        head = (f"{other_name} takes {self.other_s:.4g} s against {best_name}'s {self.best_s:.4g} s "
                f"({pct:+.1f}%)")
        if not self.explained:
            return head + f", within {100 * EXPLAIN_ABOVE:.0f}%"
        parts = [f"{name} {b:.3g} s vs {a:.3g} s ({b - a:+.3g} s)" for name, a, b in self.largest()]
        mem = (f"least memory headroom {100 * self.other_headroom:.0f}% vs "
               f"{100 * self.best_headroom:.0f}%")
        return head + f"; {other_name} vs {best_name}: " + "; ".join(parts + [mem])

    def to_dict(self) -> dict:
        return {"optimum_s": self.best_s, "other_s": self.other_s,
                "relative": self.relative, "explained": self.explained,
                "terms": {k: {"optimum_s": a, "other_s": b} for k, (a, b) in self.terms.items()},
                "optimum_least_headroom": self.best_headroom,
                "other_least_headroom": self.other_headroom}


def compare(best: PlanMetrics, other: PlanMetrics) -> Comparison:
    """``other`` against ``best`` term by term (module docstring)."""
    a, b = terms(best), terms(other)
    return Comparison(best.iteration_time_s, other.iteration_time_s,
                      {k: (a[k], b[k]) for k, _ in TERMS},
                      least_headroom(best), least_headroom(other))


__all__ = ["EXPLAIN_ABOVE", "Comparison", "compare", "least_headroom", "terms"]
