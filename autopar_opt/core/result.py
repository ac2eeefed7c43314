"""One result type for every backend (MIP solvers and the DP).

Bounds follow Pyomo's ``incumbent_objective`` / ``objective_bound`` and
OR-Tools MathOpt's ``ObjectiveBounds``: ``primal`` is the value of the best
solution found (``None`` when there is none), ``lower_bound`` a proven lower
bound on the optimum of *this* problem (``-inf`` when nothing is proven,
``+inf`` when infeasibility is proven). The gap is computed here and only here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any


def json_float(x: float | None) -> float | str | None:
    """JSON has no infinity: write ±inf as the strings ``"inf"``/``"-inf"`` (and NaN
    as ``"nan"``); the one encoding of every JSON document the tool writes
    (plan.json, placement.json, peer and operator-sharding documents; docs/DESIGN.md §4)."""
    if x is None:
        return None
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if math.isnan(x):
        return "nan"
    return float(x)


class ProblemClass(str, Enum):
    """What a backend accepts (declared as data; the registry checks it)."""

    lp = "LP"
    milp = "MILP"
    miqp = "MIQP"
    tables = "TABLES"   # the DP works on cost tables directly, no algebraic model


class Termination(str, Enum):
    """Why a solve stopped. Infeasible and time-limited are results, not errors."""

    optimal = "optimal"              # gap within the requested tolerance
    feasible = "feasible"            # a solution, stopped early (limit) with a bound
    infeasible = "infeasible"        # proven: no solution exists
    time_limit_no_solution = "time_limit_no_solution"
    heuristic = "heuristic"          # a solution with no proven bound
    error = "error"                  # the solver failed; ``message`` says why


#: Below this relative gap an ``optimal`` is a proof (round-off); above it, "optimal"
#: means within the gap the user asked for (``--gap``), and outputs say so.
PROOF_GAP = 1e-6


def status_words(status: str, gap: float | None) -> str:
    """The status as a headline says it: ``optimal within the requested gap (gap 2.94%:
    3.03% above the proven bound)`` for an ``optimal`` whose gap is above :data:`PROOF_GAP` (the
    status field stays ``optimal``: the solve met the gap it was given), the status
    itself otherwise."""
    if status == "optimal" and isinstance(gap, (int, float)) and math.isfinite(gap) \
            and gap > PROOF_GAP:
        return (f"optimal within the requested gap (gap {100 * gap:.3g}%: "
                f"{above_bound_text(gap)} above the proven bound)")
    return status


def bound_above(bound: float | None, value: float | None) -> bool:
    """A proven lower bound above the finite value it bounds, beyond round-off: no document
    a search writes holds one (the plan is one of the plans the bound holds for), so a
    report refuses it as edited (QA round 9)."""
    return (value is not None and bound is not None and math.isfinite(value)
            and bound > value + 1e-6 * max(1.0, abs(value)))


def above_bound(gap: float) -> float:
    """How far a value is above the proven bound, ``(T - L)/L``, from the gap
    ``(T - L)/T`` (:func:`relative_gap`): ``gap/(1 - gap)``; inf at a gap of 1 (QA round 9:
    the gap itself was called "% above the bound", 4.72% for 4.96%)."""
    return gap / (1.0 - gap) if gap < 1.0 else math.inf


def above_bound_text(gap: float) -> str:
    """:func:`above_bound` in percent, e.g. ``4.96%``."""
    above = above_bound(gap)
    return f"{100 * above:.3g}%" if math.isfinite(above) else "unboundedly"


def relative_gap(primal: float | None, lower_bound: float) -> float:
    """``(primal - lower_bound) / |primal|``; inf without a primal or a bound.

    The single definition of the gap (docs/DESIGN.md §4) used by every backend,
    the search and the certificate.
    """
    if primal is None or math.isinf(lower_bound) or math.isnan(lower_bound):
        return math.inf
    if primal == 0:
        return 0.0 if lower_bound >= 0 else math.inf
    return max(0.0, (primal - lower_bound) / abs(primal))


@dataclass
class SolveResult:
    """What a backend returns for one sub-problem."""

    termination: Termination
    primal: float | None
    lower_bound: float
    wall_time_s: float
    solver: str
    solver_version: str
    message: str = ""
    #: the raw answer: an Assignment from the DP, the column vector from HiGHS,
    #: None from the Pyomo backends (values loaded into the model); the
    #: formulation's ``invert`` maps each to an Assignment
    solution: Any = None
    timings: dict[str, float] = field(default_factory=dict)
    log: str = ""

    @property
    def gap(self) -> float:
        return relative_gap(self.primal, self.lower_bound)

    @property
    def has_solution(self) -> bool:
        return self.primal is not None

    def with_(self, **changes) -> "SolveResult":
        return replace(self, **changes)


def recomputed_share(mfu: float | None, hfu: float | None) -> float:
    """The share of a plan's compute time that recomputes: ``1 - MFU/HFU`` (MFU counts the
    model's FLOPs, HFU the hardware's, the recomputed forward included); 0 without an HFU.
    One reading for solve's comparison, estimate's breakdown and the report's."""
    if mfu is None or not hfu or hfu <= 0:
        return 0.0
    return max(1.0 - mfu / hfu, 0.0)
