"""Shared driver for backends reached through Pyomo's new solver interface
(``pyomo.contrib.solver``): SCIP (``scip_direct``) and Gurobi
(``gurobi_persistent``). Their results already carry Pyomo's
``incumbent_objective`` / ``objective_bound`` (the meaning SolveResult uses).
"""

from __future__ import annotations

import math
import time
from typing import Any

from autopar_opt.core.result import SolveResult, Termination
from autopar_opt.solvers.base import within_requested_gap


def _termination_map() -> dict:
    from pyomo.contrib.solver.common.results import TerminationCondition as TC
    return {
        TC.convergenceCriteriaSatisfied: Termination.optimal,
        TC.provenInfeasible: Termination.infeasible,
        TC.locallyInfeasible: Termination.infeasible,
        # every cost is >= 0, so the objective is bounded below: "infeasible or
        # unbounded" can only be infeasible
        TC.infeasibleOrUnbounded: Termination.infeasible,
        TC.maxTimeLimit: Termination.feasible,
        TC.iterationLimit: Termination.feasible,
        TC.objectiveLimit: Termination.feasible,
        TC.interrupted: Termination.feasible,
        TC.error: Termination.error,
        TC.licensingProblems: Termination.error,
        TC.unknown: Termination.error,
    }


def solve_contrib(solver_name: str, label: str, version: str, model: Any,
                  time_limit_s: float | None, rel_gap: float, warm_start: bool,
                  options: dict | None = None) -> SolveResult:
    """Solve ``model`` with contrib solver ``solver_name``; load the incumbent."""
    from pyomo.contrib.solver.common.factory import SolverFactory
    start = time.perf_counter()
    opt = SolverFactory(solver_name)
    kwargs: dict[str, Any] = dict(rel_gap=float(rel_gap), load_solutions=False,
                                  raise_exception_on_nonoptimal_result=False)
    if time_limit_s is not None:
        kwargs["time_limit"] = float(time_limit_s)
    if options:
        kwargs["solver_options"] = options
    if warm_start:
        kwargs["warmstart_discrete_vars"] = True
    res = opt.solve(model, **kwargs)
    return map_result(res, label, version, rel_gap, time.perf_counter() - start)


#: How far (relative, at least absolute for objectives below 1) a reported bound may exceed
#: the incumbent and still be round-off: the solvers' own tolerances are 1e-6 and below.
BOUND_ROUNDOFF = 1e-6


def map_result(res: Any, label: str, version: str, rel_gap: float, wall: float) -> SolveResult:
    """The :class:`SolveResult` of a contrib solver's results object ``res``
    (termination by :func:`_termination_map`, incumbent loaded into the model);
    an "optimal" whose incumbent and bound are further apart than ``rel_gap`` is
    reported as feasible with that bound
    (:func:`~autopar_opt.solvers.base.within_requested_gap`), as for HiGHS; a bound above
    the incumbent by more than round-off (:data:`BOUND_ROUNDOFF`) is discarded and the
    result is feasible, never optimal."""
    term = _termination_map().get(res.termination_condition, Termination.error)
    primal = res.incumbent_objective
    if term is Termination.infeasible:
        primal, bound = None, math.inf
    else:
        bound = res.objective_bound if res.objective_bound is not None else -math.inf
    if term is Termination.feasible and primal is None:
        term = Termination.time_limit_no_solution
    if term is Termination.optimal and primal is None:
        term = Termination.error
    msg = ""
    if primal is not None:
        res.solution_loader.load_vars()
        if bound > primal + BOUND_ROUNDOFF * max(1.0, abs(primal)):
            # a bound above the solver's own incumbent is no bound: its numerics failed
            # (SCIP 10 on a fleet MIQP: "Dual bound 0.0960585 is larger than the objective
            # of the primal solution 0.0934758", the optimum being 0.0892). Clipping it to
            # the incumbent would certify a plan 4.8% above the optimum as optimal.
            msg = (f"{label}'s bound {bound:.9g} exceeds its own incumbent {primal:.9g}: "
                   "numerical trouble; the bound is discarded and the plan kept as feasible")
            term, bound = Termination.feasible, -math.inf
        bound = min(bound, primal)   # round-off: a bound never exceeds the incumbent
    solve_s = float(getattr(res.timing_info, "wall_time", None) or wall)
    if term is Termination.error:
        msg = f"{label} stopped: {res.termination_condition.name}"
    return within_requested_gap(SolveResult(
        termination=term, primal=None if primal is None else float(primal),
        lower_bound=float(bound), wall_time_s=wall, solver=label, solver_version=version,
        message=msg, timings={"build": 0.0, "translate": max(wall - solve_s, 0.0), "solve": solve_s}),
        rel_gap)
