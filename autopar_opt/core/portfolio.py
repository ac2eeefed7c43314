"""One portfolio runner for every kind of problem (issue 35).

A problem kind (a Piper or PaSE instance, a placement, a configuration of
the hybrid-parallel search, ...) lists its exact methods as
:class:`Method` objects, the one that is exact and fastest for the
instance's structure first: the DP where it is exact, then a block or
aggregated MILP where the structure allows, the per-element MILP last.
:func:`run_portfolio` runs them in that order and shares what they prove:

- every method sees the best plan and the largest proven bound so far
  (:class:`Shared`); a method may offer a plan or a bound while it runs
  (:meth:`Shared.offer`), so a stop signal in the middle of a method still
  leaves what it proved;
- a method is skipped once the gap is closed (``gap <= rel_gap``) or
  infeasibility is proven, and when the time is spent;
- before a method builds a model, its :attr:`Method.size` (the bytes its
  model would take, from its row, column and non-zero counts, see
  :class:`~autopar_opt.core.memory_budget.ModelSize`) is checked against the
  :class:`~autopar_opt.core.memory_budget.MemoryBudget`: past the budget it is
  refused and the next method runs; a :class:`MemoryError` inside a method is
  recorded the same way, never raised;
- every method's part is recorded (:class:`MethodRecord`): the document says
  which method proved what.

The module imports no solver and no problem type: it is the neutral driver
the problem kinds plug into (``peers``, ``placement``, ``search``; issue 31's
operator sharding and issue 34's mixed fleets add their methods the same way).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from autopar_opt.core.bounds import ROUND_OFF
from autopar_opt.core.memory_budget import MemoryBudget
from autopar_opt.core.result import Termination, relative_gap


class Outcome(Protocol):
    """What a method returns (``SolveResult`` and the peers' outcome both fit)."""

    termination: Termination
    primal: float | None
    lower_bound: float
    solution: Any
    message: str


@dataclass
class Method:
    """One exact method of a portfolio.

    ``run(shared, limit_s)`` solves with at most ``limit_s`` seconds (None: no
    limit) and returns an :class:`Outcome`; it may read ``shared`` (the
    incumbent to start from, the bound) and offer plans and bounds to it as it
    goes. ``size()`` is the memory its model would take, in bytes, computed
    before anything is built (None: no model to build, e.g. a DP that checks
    its own tables). ``exact``: whether the method can prove optimality here
    (a heuristic method gives plans only).
    """

    name: str
    run: Callable[["Shared", float | None], Outcome]
    size: Callable[[], float | None] | None = None
    exact: bool = True
    #: what the size check reports when the method is refused (rows, columns, ...)
    describe_size: Callable[[], str] | None = None


@dataclass
class MethodRecord:
    """What one method did: ``status`` is ``optimal``, ``infeasible``, ``feasible``,
    ``no_plan``, ``refused`` (memory budget), ``skipped`` (gap already closed or
    no time left), ``out_of_memory``, ``interrupted`` or ``error``."""

    method: str
    status: str
    primal: float | None = None
    lower_bound: float = -math.inf
    time_s: float = 0.0
    message: str = ""
    #: the method's own figures (sizes, counts) and its solver's version, when it reports them
    stats: dict[str, Any] = field(default_factory=dict)
    version: str = ""

    def to_dict(self) -> dict[str, Any]:
        def num(x: float | None) -> float | str | None:
            if x is None:
                return None
            return ("inf" if x > 0 else "-inf") if math.isinf(x) else float(x)
        return {"method": self.method, "status": self.status, "primal": num(self.primal),
                "lower_bound": num(self.lower_bound), "time_s": round(self.time_s, 4),
                "message": self.message, **({"stats": self.stats} if self.stats else {}),
                **({"version": self.version} if self.version else {})}


@dataclass
class Shared:
    """The incumbent and the bound every method of one portfolio shares."""

    rel_gap: float
    primal: float | None = None
    solution: Any = None
    lower_bound: float = -math.inf
    #: the method that found the incumbent and the one that proved the bound
    primal_by: str = ""
    bound_by: str = ""
    records: list[MethodRecord] = field(default_factory=list)

    @property
    def infeasible(self) -> bool:
        """Infeasibility is proven (bound +inf and no plan)."""
        return self.primal is None and self.lower_bound == math.inf

    @property
    def gap(self) -> float:
        return relative_gap(self.primal, self.lower_bound)

    def closed(self) -> bool:
        """Nothing is left to prove: infeasible, or the gap is within ``rel_gap``."""
        return self.infeasible or (self.primal is not None
                                   and self.gap <= self.rel_gap * (1 + ROUND_OFF) + ROUND_OFF)

    def offer(self, method: str, primal: float | None = None, solution: Any = None,
              lower_bound: float | None = None) -> None:
        """Keep a better plan (``primal`` with its ``solution``) and a larger bound."""
        if primal is not None and solution is not None and (
                self.primal is None or primal < self.primal):
            self.primal, self.solution, self.primal_by = primal, solution, method
        if lower_bound is not None and lower_bound > self.lower_bound:
            self.lower_bound, self.bound_by = lower_bound, method
        if self.primal is not None and self.lower_bound > self.primal:
            self.lower_bound = self.primal      # round-off: a bound never exceeds a plan

    def methods(self) -> list[dict[str, Any]]:
        """The records as JSON-able dicts (``certificate.methods`` of the document)."""
        return [r.to_dict() for r in self.records]


def _status(outcome: Outcome) -> str:
    term = outcome.termination
    if term is Termination.infeasible:
        return "infeasible"
    if term is Termination.error:
        return "error"
    if outcome.primal is None:
        return "no_plan"
    if term is Termination.optimal:
        return "optimal"
    return "feasible"


def run_portfolio(methods: list[Method], *, rel_gap: float, deadline: float | None,
                  budget: MemoryBudget, shared: Shared | None = None,
                  clock: Callable[[], float] = time.perf_counter) -> Shared:
    """Run ``methods`` in order until the gap is closed (see the module docstring).

    ``deadline`` is a ``clock()`` value (None: no limit). A stop signal raised
    inside a method (``SearchInterrupted``) is recorded and re-raised: the
    caller writes its document from ``shared``, which holds everything proven.
    """
    shared = shared if shared is not None else Shared(rel_gap)
    for method in methods:
        if shared.closed():
            shared.records.append(MethodRecord(method.name, "skipped", message=(
                "infeasibility already proven" if shared.infeasible else
                f"the gap is already closed by {shared.bound_by or shared.primal_by}")))
            continue
        left = None if deadline is None else deadline - clock()
        if left is not None and left <= 0:
            shared.records.append(MethodRecord(method.name, "skipped", message="no time left"))
            continue
        need = method.size() if method.size is not None else None
        if need is not None and not budget.admits(need):
            what = method.describe_size() if method.describe_size is not None else "its model"
            shared.records.append(MethodRecord(method.name, "refused", message=budget.refusal(
                what, need)))
            continue
        began = clock()
        try:
            outcome = method.run(shared, left)
        except MemoryError:
            shared.records.append(MethodRecord(
                method.name, "out_of_memory", time_s=clock() - began,
                message="ran out of memory; its part is dropped and the next method runs "
                        f"(memory budget {budget.describe()})"))
            continue
        except BaseException as exc:
            if type(exc).__name__ == "SearchInterrupted":
                shared.records.append(MethodRecord(method.name, "interrupted",
                                                   time_s=clock() - began,
                                                   message="stopped by a signal"))
            raise
        if outcome.termination is Termination.infeasible:
            shared.offer(method.name, lower_bound=math.inf)
        elif method.exact or outcome.primal is not None:
            shared.offer(method.name, outcome.primal, outcome.solution,
                         outcome.lower_bound if method.exact else None)
        shared.records.append(MethodRecord(method.name, _status(outcome), outcome.primal,
                                           outcome.lower_bound, clock() - began,
                                           outcome.message, dict(getattr(outcome, "stats", {}) or {}),
                                           str(getattr(outcome, "solver_version", "") or "")))
    return shared
