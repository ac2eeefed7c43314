"""The optimality certificate of one search (docs/DESIGN.md §4).

Per outer configuration: status, best value found (primal), proven lower
bound, time, or the pruning reason. The global lower bound is the minimum of
the per-configuration bounds (a proven-infeasible configuration contributes
+inf); the global gap is ``(best primal − global bound) / best primal``,
computed by :func:`autopar_opt.core.result.relative_gap`, the one gap
function of the project.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from autopar_opt.core.bounds import Bounds, Status, clamp_to_primal
from autopar_opt.core.result import json_float, relative_gap  # noqa: F401 (json_float: this module's name for it)
from autopar_opt.search.configs import OuterConfig




@dataclass
class ConfigRecord:
    """What the search knows about one outer configuration."""

    config: OuterConfig
    status: Status            # derived by :meth:`Bounds.status` (or pruned / error by the search)
    primal: float | None
    lower_bound: float
    time_s: float
    pruned_by: str | None = None
    model_hash: str | None = None
    message: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    exhaustive: bool = False  # the method behind ``lower_bound`` finished its search

    def __post_init__(self) -> None:
        self.status = Status(self.status)

    @property
    def gap(self) -> float:
        return relative_gap(self.primal, self.lower_bound)

    @property
    def bounds(self) -> Bounds:
        """The record's bounds as a value (see :class:`Bounds`)."""
        return Bounds(self.primal, self.lower_bound, self.exhaustive)

    def to_dict(self) -> dict:
        return {**self.config.to_dict(), "status": self.status.value,
                "primal": json_float(self.primal), "lower_bound": json_float(self.lower_bound),
                "gap": json_float(self.gap), "time_s": round(self.time_s, 6),
                "pruned_by": self.pruned_by, "model_hash": self.model_hash,
                "message": self.message,
                "timings": {k: round(v, 6) for k, v in self.timings.items()}}


@dataclass
class Certificate:
    """Global primal, global lower bound and the per-configuration table."""

    configurations: list[ConfigRecord]

    @property
    def primal(self) -> float | None:
        values = [r.primal for r in self.configurations if r.primal is not None]
        return min(values) if values else None

    @property
    def lower_bound(self) -> float:
        """The smallest configuration bound, never above the best plan: every
        proven bound is at most the optimum, which is at most any plan's value,
        so a bound above the primal by round-off is the same number computed
        along another path; by more, it raises (:func:`clamp_to_primal`)."""
        if not self.configurations:
            return -math.inf
        lb = min(r.lower_bound for r in self.configurations)
        return clamp_to_primal(lb, self.primal, "the certificate")

    @property
    def gap(self) -> float:
        return relative_gap(self.primal, self.lower_bound)

    @property
    def exact(self) -> bool:
        """True when the global bound is a proof: finite and ≤ primal, or, with
        no plan, every configuration proven infeasible (bound ``+inf``)."""
        if self.infeasible:
            return True
        lb = self.lower_bound
        return self.primal is not None and not math.isinf(lb) and lb <= self.primal * (1 + 1e-9)

    @property
    def infeasible(self) -> bool:
        """Every configuration proven infeasible (and there was at least one)."""
        return bool(self.configurations) and all(
            r.status is Status.infeasible and r.bounds.is_infeasible for r in self.configurations)

    def to_dict(self) -> dict:
        return {"primal": json_float(self.primal), "lower_bound": json_float(self.lower_bound),
                "gap": json_float(self.gap), "exact": self.exact,
                "configurations": [r.to_dict() for r in self.configurations]}
