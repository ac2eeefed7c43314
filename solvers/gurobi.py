"""Gurobi backend (gurobipy via Pyomo's ``gurobi_persistent``): LP, MILP, MIQP.

The pip wheel's size-limited licence solves at most 2,000 variables and
2,000 constraints for linear models and 200 variables once a quadratic term
appears (docs/DESIGN.md §5); a larger model gives GurobiError 10010, which
is returned as a ``Termination.error`` result naming the limit and the
fallback, never raised.
"""

from __future__ import annotations

from typing import Any, ClassVar

from autopar_opt.solvers.base import Backend, Feature, SolverMismatch, SolverUnavailable
from autopar_opt.solvers.pyomo_contrib import solve_contrib
from autopar_opt.core.result import ProblemClass, SolveResult, Termination

#: Gurobi error code for "Model too large for size-limited license".
SIZE_LIMITED_LICENSE = 10010

LICENCE_MESSAGE = ("Gurobi: model too large for the size-limited licence (GurobiError 10010: "
                   "at most 2000 variables/constraints for linear models, 200 variables once "
                   "the model is quadratic); install a full licence, or use --solver highs "
                   "(with --form milp) or --solver scip")


class GurobiBackend(Backend):
    """Gurobi through gurobipy."""

    name: ClassVar[str] = "gurobi"
    accepts: ClassVar[frozenset[ProblemClass]] = frozenset(
        {ProblemClass.lp, ProblemClass.milp, ProblemClass.miqp})
    features: ClassVar[frozenset[Feature]] = frozenset({Feature.symmetry_cuts, Feature.warm_start})

    def size_limit(self, problem_class: ProblemClass) -> tuple[int, int] | None:
        """The size-limited licence gurobipy ships with (no licence file): 2,000
        variables and constraints, 200 variables once a quadratic term appears
        (Gurobi's "Restricted license"; error 10010 past it). None with a licence
        file (``GRB_LICENSE_FILE`` or ``~/gurobi.lic``)."""
        import os
        from pathlib import Path

        if os.environ.get("GRB_LICENSE_FILE") or (Path.home() / "gurobi.lic").exists():
            return None
        return (200 if problem_class is ProblemClass.miqp else 2000), 2000

    def available(self) -> tuple[bool, str]:
        try:
            import gurobipy  # noqa: F401
        except ImportError:
            return False, "gurobipy is not installed (pip install gurobipy); use --solver highs or scip"
        return True, ""

    def version(self) -> str:
        import gurobipy
        return "Gurobi " + ".".join(str(x) for x in gurobipy.gurobi.version())

    def solve_model(self, model: Any, problem_class: ProblemClass, *, time_limit_s: float | None,
                    rel_gap: float, warm_start: bool = False,
                    solver_options: dict[str, Any] | None = None) -> SolveResult:
        if problem_class not in self.accepts:
            raise SolverMismatch(f"Gurobi does not accept {problem_class.value} problems")
        ok, why = self.available()
        if not ok:
            raise SolverUnavailable(why)
        import gurobipy
        try:
            return solve_contrib("gurobi_persistent", self.name, self.version(), model, time_limit_s,
                                 rel_gap, warm_start,
                                 options={"Threads": 1, "OutputFlag": 0, **(solver_options or {})})
        except gurobipy.GurobiError as exc:
            if getattr(exc, "errno", None) == SIZE_LIMITED_LICENSE:
                msg = LICENCE_MESSAGE
            else:
                msg = f"Gurobi error {getattr(exc, 'errno', '?')}: {exc}; try --solver highs or scip"
            return SolveResult(termination=Termination.error, primal=None, lower_bound=float("-inf"),
                               wall_time_s=0.0, solver=self.name, solver_version=self.version(),
                               message=msg)
