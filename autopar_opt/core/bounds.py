"""Bounds and status: what is known about one problem, and the rules that name it.

:class:`Bounds` is an immutable value (OR-Tools MathOpt ``ObjectiveBounds``
plus provenance): the best value found (``primal``, ``None`` when there is
none), a proven lower bound (``lower``: ``-inf`` when nothing is proven,
``+inf`` when infeasibility is proven), whether the method behind the bound
searched its whole space (``exhaustive``) and which method proved it
(``source``). Two bounds on the same problem combine with :meth:`Bounds.merge`
(best primal, larger proven bound).

The status of one configuration (:class:`Status`) and of a whole search
(:class:`SearchStatus`) are *derived* from bounds by :meth:`Bounds.status`
and :func:`search_status`, here and nowhere else; :data:`ROUND_OFF` is the
one relative allowance for round-off in every gap and incumbent comparison.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import Enum

from autopar_opt.core.result import SolveResult, Termination, relative_gap

#: Relative round-off allowance of every gap test and incumbent comparison.
ROUND_OFF = 1e-12

#: Relative excess of a proven bound over a plan's value that is still read as
#: round-off of the same number (a MIP's bound against ``evaluate``'s re-pricing
#: of its plan differ by up to the solver's feasibility tolerances, 1e-7 to 1e-6
#: in HiGHS, Gurobi and SCIP); a larger excess is a wrong bound, never clamped.
BOUND_SLACK = 1e-6


class UnsoundBoundError(RuntimeError):
    """A "proven" lower bound above a feasible plan's value by more than round-off."""


def clamp_to_primal(lower: float, primal: float | None, source: str = "") -> float:
    """``lower``, or ``primal`` when the bound exceeds it by round-off only.

    Every proven bound is at most the optimum, which is at most any plan's
    value, so an excess within :data:`BOUND_SLACK` is the same number computed
    along two paths; a larger one means the bound is wrong, and certifying it
    (as a clamp would, silently) is worse than stopping: it raises.
    """
    if primal is None or lower <= primal:
        return lower
    if lower - primal <= BOUND_SLACK * max(1.0, abs(primal)):
        return primal
    raise UnsoundBoundError(f"lower bound {lower!r}{' from ' + source if source else ''} exceeds "
                            f"the value {primal!r} of a feasible plan: the bound is not valid")


class _Text(str, Enum):
    """A string enum that prints as its value (in f-strings and tables too)."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class Status(_Text):
    """What the search knows about one outer configuration (``plan.json`` values)."""

    optimal = "optimal"          # a plan whose gap is within the target
    feasible = "feasible"        # a plan and a proven bound, gap above the target
    heuristic = "heuristic"      # a plan; the method that found it proved no bound
    infeasible = "infeasible"    # proven: no plan of this configuration fits
    pruned = "pruned"            # not solved: its proven bound reaches the incumbent
    not_solved = "not_solved"    # no plan, infeasibility not proven (time ran out)
    error = "error"              # the solver failed, or its plan failed evaluate()


class SearchStatus(_Text):
    """The outcome of a whole search (exit codes 0, 0, 3, 4)."""

    optimal = "optimal"          # a plan, and the global bound proves it within the target gap
    feasible = "feasible"        # a plan without such a proof
    infeasible = "infeasible"    # every configuration proven infeasible
    no_plan = "no_plan"          # no plan, infeasibility not proven
    interrupted = "interrupted"  # a stop signal ended the search (its incumbent and bound are kept)


#: Termination of a backend -> configuration status (no plan: nothing proven yet).
_FROM_TERMINATION: dict[Termination, Status] = {
    Termination.optimal: Status.optimal, Termination.feasible: Status.feasible,
    Termination.infeasible: Status.infeasible, Termination.heuristic: Status.heuristic,
    Termination.time_limit_no_solution: Status.not_solved, Termination.error: Status.error,
}


def within_gap(primal: float | None, lower: float, rel_gap: float) -> bool:
    """``relative_gap(primal, lower) <= rel_gap`` up to :data:`ROUND_OFF`."""
    return primal is not None and relative_gap(primal, lower) <= rel_gap + ROUND_OFF


def strictly_better(value: float | None, than: float | None) -> bool:
    """``value`` beats ``than`` by more than round-off (``None`` is no value)."""
    if value is None:
        return False
    return than is None or value < than * (1 - ROUND_OFF)


def reaches(lower: float, incumbent: float | None) -> bool:
    """A proven bound ``lower`` reaches ``incumbent``: no plan here can beat it."""
    return incumbent is not None and lower >= incumbent * (1 - ROUND_OFF)


@dataclass(frozen=True)
class Bounds:
    """What is proven about one problem (see module docstring)."""

    primal: float | None = None
    lower: float = -math.inf
    exhaustive: bool = False
    source: str = ""

    @classmethod
    def of(cls, result: SolveResult, source: str | None = None) -> "Bounds":
        """The bounds a backend's result proves (``exhaustive`` when it proved
        optimality or infeasibility)."""
        lower = result.lower_bound
        if result.termination is Termination.infeasible:
            lower = math.inf
        exhaustive = result.termination in (Termination.optimal, Termination.infeasible)
        return cls(result.primal, lower, exhaustive, source or result.solver)

    @classmethod
    def proven_infeasible(cls, source: str) -> "Bounds":
        return cls(None, math.inf, True, source)

    @property
    def gap(self) -> float:
        return relative_gap(self.primal, self.lower)

    @property
    def is_infeasible(self) -> bool:
        """Infeasibility is proven (no plan, bound ``+inf``)."""
        return self.primal is None and math.isinf(self.lower) and self.lower > 0

    @property
    def proves_anything(self) -> bool:
        return not (math.isinf(self.lower) and self.lower < 0)

    def merge(self, other: "Bounds") -> "Bounds":
        """Both describe the same problem: the better plan, the larger proven bound
        (kept with its source; ties keep ``self``'s). A bound never exceeds the plan."""
        primal = other.primal if strictly_better(other.primal, self.primal) else self.primal
        prover = other if other.lower > self.lower else self
        lower = clamp_to_primal(prover.lower, primal, prover.source or "")
        return Bounds(primal, lower, prover.exhaustive, prover.source)

    def with_primal(self, primal: float | None) -> "Bounds":
        """The same proof for a re-priced plan value (``evaluate``'s)."""
        return replace(self, primal=primal, lower=clamp_to_primal(self.lower, primal, self.source or ""))

    def status(self, rel_gap: float, solver: Termination | None = None) -> Status:
        """The configuration status these bounds justify.

        Optimal when the gap is within ``rel_gap`` or the method behind the
        bound finished its search (``exhaustive``: optimal at the solver's own
        tolerance). ``solver``: the termination of the method that produced the plan; a
        plan found by a method that proves no bound stays ``heuristic`` even
        when a weaker bound from elsewhere is known, and an error stays one.
        """
        if solver is Termination.error:
            return Status.error
        if self.primal is None:
            return Status.infeasible if self.is_infeasible else Status.not_solved
        if self.exhaustive or within_gap(self.primal, self.lower, rel_gap):
            return Status.optimal
        if solver is Termination.heuristic or not self.proves_anything:
            return Status.heuristic
        return Status.feasible


def status_of(termination: Termination) -> Status:
    """The configuration status a backend's termination reports by itself."""
    return _FROM_TERMINATION[termination]


def search_status(has_plan: bool, primal: float | None, lower: float, proven: bool,
                  infeasible: bool, rel_gap: float) -> SearchStatus:
    """The status of a whole search from its global bounds (one rule, used by
    the engine, the CLI and the report through ``plan.json``)."""
    if has_plan:
        return SearchStatus.optimal if proven and within_gap(primal, lower, rel_gap) \
            else SearchStatus.feasible
    return SearchStatus.infeasible if infeasible else SearchStatus.no_plan
