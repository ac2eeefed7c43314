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
    #: the method that answered this configuration (``dp``, ``block-milp:highs``, ...; empty
    #: when none ran: pruned by its analytic bound, or no time left)
    method: str = ""
    #: why no method ran on a configuration left ``not_solved`` with its bound (the
    #: ``certificate.methods`` label): :data:`WITHIN_GAP`, else the time ran out
    unsolved_because: str = ""

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
        return bool(self.primal is not None and not math.isinf(lb) and lb <= self.primal * (1 + 1e-9))

    @property
    def infeasible(self) -> bool:
        """Every configuration proven infeasible (and there was at least one)."""
        return bool(self.configurations) and all(
            r.status is Status.infeasible and r.bounds.is_infeasible for r in self.configurations)

    def to_dict(self) -> dict:
        return {"primal": json_float(self.primal), "lower_bound": json_float(self.lower_bound),
                "gap": json_float(self.gap), "exact": self.exact,
                "methods": method_records(self.configurations),
                "configurations": [r.to_dict() for r in self.configurations]}


#: how a configuration no method solved is recorded in ``certificate.methods``
_NO_METHOD = {Status.pruned: "analytic bound", Status.infeasible: "memory bound"}
#: :attr:`ConfigRecord.unsolved_because` of a configuration not solved because its bound is
#: within the target gap of the incumbent (the search needs nothing more from it)
WITHIN_GAP = "bound within the target gap"


#: How a configuration's message says its solver model was counted and not built (over the
#: ``--memory-limit`` budget: :class:`autopar_opt.core.memory_budget.OverBudget`).
NOT_BUILT = "not built: "


def not_built(message: str | None) -> str | None:
    """The refusal a configuration's ``message`` carries, after ``not built: `` (at its start
    or after an earlier ``; ``), or None when its model was built."""
    text = message or ""
    if text.startswith(NOT_BUILT):
        return text[len(NOT_BUILT):]
    at = text.find("; " + NOT_BUILT)
    return text[at + 2 + len(NOT_BUILT):] if at >= 0 else None


def method_records(configurations: list[ConfigRecord]) -> list[dict]:
    """``certificate.methods``: which method proved what (issue 35), one record per method
    in the order the methods first answered (:class:`~autopar_opt.core.portfolio.MethodRecord`):
    the configurations it answered (``stats``), the best plan it found, the least bound
    it proved over them, its total time; ``status`` is ``optimal`` when it closed all of
    them (optimal, infeasible or pruned at the incumbent), ``refused`` when the memory
    budget refused its model, else ``feasible`` with a plan and ``no_plan`` without.
    The message says whether it found the search's incumbent and proved its bound."""
    from autopar_opt.core.portfolio import MethodRecord

    groups: dict[str, list[ConfigRecord]] = {}
    for r in configurations:
        name = r.method or _NO_METHOD.get(
            r.status, f"none ({r.unsolved_because or 'no time left'})")
        groups.setdefault(name, []).append(r)
    primal = min((r.primal for r in configurations if r.primal is not None), default=None)
    least = min((r.lower_bound for r in configurations), default=math.inf)
    out = []
    for name, rs in groups.items():
        counts: dict[str, int] = {}
        for r in rs:
            counts[r.status.value] = counts.get(r.status.value, 0) + 1
        plans = [r.primal for r in rs if r.primal is not None]
        closed = all(r.status in (Status.optimal, Status.infeasible, Status.pruned) for r in rs)
        refused = any(not_built(r.message) is not None for r in rs)
        status = ("optimal" if closed else "refused" if refused and not plans
                  else "feasible" if plans else "no_plan")
        if not rs[0].method and all(r.status is Status.pruned for r in rs):
            status = "skipped"          # no method ran: the bound reaches the incumbent
        elif not rs[0].method and all(r.status is Status.infeasible for r in rs):
            status = "infeasible"
        lower = min(r.lower_bound for r in rs)
        notes = []
        if primal is not None and plans and min(plans) == primal:
            notes.append("found the incumbent")
        if lower == least:
            notes.append("proved the global lower bound" if math.isfinite(least) else
                         "left the global lower bound unproven (-inf: the time limit came first)")
        if refused:
            notes.append(next(r.message for r in rs if not_built(r.message) is not None))
        out.append(MethodRecord(name, status, min(plans) if plans else None, lower,
                                sum(r.time_s for r in rs), "; ".join(notes),
                                {"configurations": len(rs), **counts}).to_dict())
    return out
