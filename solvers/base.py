"""The backend contract: one small class per solver, registered by name.

A backend declares the problem classes it accepts as data (``accepts``), so
the registry can refuse a mismatch before anything is built and the test
matrix can be generated from the same declaration (linopy ``SolverFeature``,
Pyomo ``contrib/solver/plugins.py``).

MIP backends solve an algebraic model built by ``autopar_opt.formulations``
(they never import formulations: the model arrives as an argument); the DP
backend solves :class:`~autopar_opt.cost.tables.CostTables` directly.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from enum import Enum
from typing import Any, ClassVar

from autopar_opt.core.bounds import ROUND_OFF, within_gap
from autopar_opt.core.result import ProblemClass, SolveResult, Termination


class SolverUnavailable(RuntimeError):
    """The backend's library or licence is missing; the message names the fallback."""


class SolverMismatch(ValueError):
    """The backend does not accept this problem class; the message names the fix."""


class Feature(str, Enum):
    """Capabilities a backend declares as data (linopy ``SolverFeature``); the
    search, the CLI and the spec read these instead of checking names."""

    #: solves a :class:`~autopar_opt.core.matrix.MatrixForm` directly: the search
    #: builds the MILP as a cached matrix (``formulations/direct.py``), no Pyomo model
    matrix_input = "matrix_input"
    #: the exact symmetry cuts pay off on this backend, so the search turns them
    #: on by default (measured: ``benchmarks/symmetry_cuts.md``)
    symmetry_cuts = "symmetry_cuts"
    #: accepts a warm start (a complete feasible assignment)
    warm_start = "warm_start"
    #: takes an objective cutoff (:meth:`Backend.cutoff_options`): the MIP stops once
    #: its bound reaches the cutoff, and reports the cutoff as its bound when no plan
    #: below it exists (how the search disproves a configuration against its incumbent)
    objective_cutoff = "objective_cutoff"


class Backend(ABC):
    """Base class of every solver backend."""

    name: ClassVar[str]
    accepts: ClassVar[frozenset[ProblemClass]]
    features: ClassVar[frozenset[Feature]] = frozenset()

    def refusal(self, problem_class: ProblemClass) -> str:
        """Why this backend does not take ``problem_class``, with the fix."""
        if problem_class is ProblemClass.tables:
            return (f"solver {self.name!r} solves algebraic models, not cost tables; "
                    f"use --solver dp for the table DP")
        if ProblemClass.tables in self.accepts:
            return (f"solver {self.name!r} works on cost tables directly and does not "
                    f"take a {problem_class.value} model; use --solver highs|gurobi|scip")
        return (f"solver {self.name!r} does not accept {problem_class.value}; "
                f"it accepts {sorted(p.value for p in self.accepts)}")

    def size_limit(self, problem_class: ProblemClass) -> tuple[int, int] | None:
        """(most variables, most constraints) a model of ``problem_class`` may have
        under this backend's licence here, or None when unlimited."""
        return None

    def cutoff_options(self, cutoff: float) -> dict[str, Any]:
        """The native options that make this backend stop at an objective cutoff
        (declared by :attr:`Feature.objective_cutoff`); none by default."""
        del cutoff
        return {}

    @abstractmethod
    def available(self) -> tuple[bool, str]:
        """(usable here, reason when not)."""

    @abstractmethod
    def version(self) -> str:
        """Solver name and version string for reports."""

    def solve(self, model: Any, problem_class: ProblemClass, *, time_limit_s: float | None,
              rel_gap: float, warm_start: bool = False,
              solver_options: dict[str, Any] | None = None) -> SolveResult:
        """The one entry point: ``model`` is what a formulation built for this
        backend (cost tables for :attr:`ProblemClass.tables`, an algebraic model or
        a :class:`~autopar_opt.core.matrix.MatrixForm` otherwise). The answer is
        mapped back to an :class:`~autopar_opt.core.assignment.Assignment` by the
        formulation's ``invert``."""
        if problem_class is ProblemClass.tables:
            return self.solve_tables(model, time_limit_s=time_limit_s, rel_gap=rel_gap)
        return self.solve_model(model, problem_class, time_limit_s=time_limit_s, rel_gap=rel_gap,
                                warm_start=warm_start, solver_options=solver_options)

    def solve_model(self, model: Any, problem_class: ProblemClass, *, time_limit_s: float | None,
                    rel_gap: float, warm_start: bool = False,
                    solver_options: dict[str, Any] | None = None) -> SolveResult:
        """Solve a built algebraic model; load the solution into it.

        ``solver_options`` are native options of the solver, set last."""
        raise SolverMismatch(f"solver {self.name!r} does not solve algebraic models")

    def solve_tables(self, tables: Any, *, time_limit_s: float | None, rel_gap: float) -> SolveResult:
        """Solve cost tables directly (DP); ``solution`` is an Assignment."""
        raise SolverMismatch(f"solver {self.name!r} does not solve cost tables directly")


def within_requested_gap(result: SolveResult, rel_gap: float) -> SolveResult:
    """``result``, or the same with ``feasible`` in place of ``optimal`` when the
    solver's own incumbent and bound are further apart than ``rel_gap``.

    Why: a MIP solver's "optimal" means optimal to *its* tolerances, not to the
    gap we asked for. HiGHS 1.x returned model status ``kOptimal`` on the block
    MILP of ``tests/unit/formulations/test_block_milp.py`` (decoder of 9 blocks, pp=2) with its
    objective 4.5e-6 (relative) above its own dual bound at ``mip_rel_gap`` 1e-9
    (its feasibility tolerances close nodes early), and ``Bounds.of`` reads an
    optimal termination as an exhaustive search: the certificate then claimed
    optimality far beyond the stated gap. The gap is
    :func:`~autopar_opt.core.result.relative_gap`, the one definition
    (``(primal - bound) / |primal|``), tested by
    :func:`~autopar_opt.core.bounds.within_gap`, i.e. with the one floating
    allowance :data:`~autopar_opt.core.bounds.ROUND_OFF` (1e-12 relative) for
    the incumbent and the bound being sums taken in different orders. The bound
    is kept, so the result still proves what the solver proved. A solver that
    states no finite bound with an optimal status (Gurobi has no ``ObjBound``
    for a continuous model, where optimality is the LP's duality proof) is left
    as it reported.
    """
    if result.termination is not Termination.optimal or result.primal is None \
            or not math.isfinite(result.lower_bound) \
            or within_gap(result.primal, result.lower_bound, rel_gap):
        return result
    note = (f"{result.solver} reported optimal with incumbent {result.primal:.12g} and bound "
            f"{result.lower_bound:.12g}: relative gap {result.gap:.3g} is above the requested "
            f"{rel_gap:g} (+{ROUND_OFF:g} round-off), so the result is feasible, not optimal")
    return result.with_(termination=Termination.feasible,
                        message="; ".join(m for m in (result.message, note) if m))
