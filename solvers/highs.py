"""HiGHS backend: LP and MILP only (HiGHS has no MIQP), via highspy from numpy.

The model is passed as numpy arrays (:class:`MatrixForm`), not through
Pyomo's HiGHS translation: at 100k binaries the direct path is 50-100x
faster (docs/DESIGN.md §5). ``solve_model`` accepts a ``MatrixForm`` (the
fast path: built directly from the cost tables by
``autopar_opt.formulations.direct``, or ``Formulation.matrix()``) or a linear
Pyomo model, which is compiled to one first (counted as ``translate``). A
warm start comes from ``MatrixForm.start`` when set, else from the values of
the Pyomo variables in ``var_refs``.

Each solve runs in a forked child (:mod:`autopar_opt.solvers.isolate`): a crash
inside HiGHS's C++ code fails that solve (retried once without presolve) instead
of killing the command, and a child still running :func:`deadline_s` after it
started (its time limit and a grace) is stopped, so the caller's time limit holds
where HiGHS does not check its own (root cut separation).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from autopar_opt.solvers.base import Backend, Feature, SolverMismatch, within_requested_gap
from autopar_opt.solvers.isolate import SolverCrashed, SolverTimedOut, isolation_enabled, run_forked
from autopar_opt.core.result import ProblemClass, SolveResult, Termination

if TYPE_CHECKING:   # the matrix module imports scipy.sparse: loaded when a model is solved
    from autopar_opt.core.matrix import MatrixForm

#: A solve's child is stopped this long after its time limit (s, and as a fraction of
#: the limit, whichever is larger): HiGHS returns within a fraction of a second of its
#: limit where it checks it, and loading the model in the child precedes its clock.
DEADLINE_GRACE_S, DEADLINE_GRACE_FRACTION = 1.5, 0.05


def deadline_s(time_limit_s: float | None) -> float | None:
    """When a solve's child is stopped: its time limit plus the grace (None: no limit)."""
    if time_limit_s is None:
        return None
    return time_limit_s + max(DEADLINE_GRACE_S, DEADLINE_GRACE_FRACTION * time_limit_s)


#: HighsModelStatus name -> Termination (limits resolved by incumbent presence).
_STATUS: dict[str, Termination] = {
    "kOptimal": Termination.optimal,
    "kInfeasible": Termination.infeasible,
    # the objective is bounded below by 0 (all costs >= 0), so "unbounded or
    # infeasible" after presolve can only mean infeasible
    "kUnboundedOrInfeasible": Termination.infeasible,
    "kTimeLimit": Termination.feasible,
    "kIterationLimit": Termination.feasible,
    "kSolutionLimit": Termination.feasible,
    "kInterrupt": Termination.feasible,
    "kObjectiveBound": Termination.feasible,
    "kObjectiveTarget": Termination.feasible,
}


class HighsBackend(Backend):
    """HiGHS MILP/LP through highspy (see module docstring)."""

    name: ClassVar[str] = "highs"
    accepts: ClassVar[frozenset[ProblemClass]] = frozenset({ProblemClass.lp, ProblemClass.milp})
    #: no symmetry_cuts: HiGHS 1.15 solved llama-7b (2x8 A100, 1x8 V100) slower
    #: with them (benchmarks/symmetry_cuts.md)
    features: ClassVar[frozenset[Feature]] = frozenset({Feature.matrix_input, Feature.warm_start,
                                                        Feature.objective_cutoff})

    def cutoff_options(self, cutoff: float) -> dict[str, Any]:
        """HiGHS's ``objective_bound``: the MIP stops when its dual bound reaches it."""
        return {"objective_bound": float(cutoff)}

    def refusal(self, problem_class: ProblemClass) -> str:
        return mismatch_message(self.name, problem_class) if problem_class is ProblemClass.miqp \
            else super().refusal(problem_class)

    def available(self) -> tuple[bool, str]:
        """Whether highspy is installed, found without importing it: a search
        the exact DP closes never loads it (start-up, issue 18)."""
        import importlib.util

        if importlib.util.find_spec("highspy") is None:
            return False, "highspy is not installed (pip install highspy)"
        return True, ""

    def version(self) -> str:
        """``HiGHS X.Y.Z``: highspy's distribution version, which is the HiGHS
        release it wraps (``tests/cli/test_startup.py`` checks it against
        ``highspy.Highs().version()``), read without importing highspy."""
        from importlib.metadata import version

        return f"HiGHS {version('highspy')}"

    def solve_model(self, model: Any, problem_class: ProblemClass, *, time_limit_s: float | None,
                    rel_gap: float, warm_start: bool = False,
                    solver_options: dict[str, Any] | None = None) -> SolveResult:
        """Solve; load values into the Pyomo variables when there are any.

        The raw column vector is returned in ``solution`` (column order of the
        matrix form) so a caller can decode without touching the model.
        ``solver_options`` are HiGHS options set last (e.g. ``mip_max_nodes``).
        """
        if problem_class not in self.accepts:
            raise SolverMismatch(mismatch_message(self.name, problem_class))
        from autopar_opt.core.matrix import MatrixForm, compile_matrix, load_values

        start = time.perf_counter()
        form = model if isinstance(model, MatrixForm) else compile_matrix(model)
        translate = time.perf_counter() - start if form is not model else 0.0
        version, options = self.version(), dict(solver_options or {})
        retried = ""
        if isolation_enabled():
            import highspy  # noqa: F401 - loaded once here; every forked solve inherits it

            try:
                (result, pass_s, solve_s), interrupted = _solve_forked(
                    form, time_limit_s, rel_gap, warm_start, options, version)
            except SolverCrashed as crash:
                # HiGHS's crashes are path-dependent (any option or coefficient change moves
                # them): once more without presolve on the time left, then give up
                left = None if time_limit_s is None else \
                    max(time_limit_s - (time.perf_counter() - start), 0.1)
                (result, pass_s, solve_s), interrupted = _solve_forked(
                    form, left, rel_gap, warm_start, {**options, "presolve": "off"}, version)
                retried = f"{crash}; solved again without presolve"
        else:
            h, pass_s = _load(form, time_limit_s, rel_gap, warm_start, options)
            t0 = time.perf_counter()
            interrupted = _run_interruptible(h)
            solve_s = time.perf_counter() - t0
            result = highs_result(h, form, version, rel_gap)
        if retried:
            result = result.with_(message="; ".join(m for m in (retried, result.message) if m))
        cutoff = options.get("objective_bound")
        if cutoff is not None and result.termination is Termination.infeasible:
            # HiGHS reports "infeasible" when no plan lies below the cutoff; it prunes
            # nodes within its relative gap of the cutoff, so what is proven is
            # cutoff - rel_gap·|cutoff| as a bound, not infeasibility
            bound = float(cutoff) - float(rel_gap) * abs(float(cutoff))
            result = result.with_(termination=Termination.time_limit_no_solution,
                                  lower_bound=bound, message=f"no plan below the cutoff "
                                  f"{float(cutoff):.9g} less the relative gap {rel_gap:g}: "
                                  f"bound {bound:.9g}")
        elif cutoff is not None and not (result.primal is not None
                                         and result.primal < float(cutoff)):
            # no plan below the cutoff either, but a start plan at or above it: HiGHS reports
            # "optimal" with that plan's value as its bound, while every node at or above
            # the cutoff less its gap was pruned unexplored, so only that much is proven (QA
            # round 5: a configuration printed optimal at 0.4913 s held a 0.4869 s plan)
            bound = float(cutoff) - float(rel_gap) * abs(float(cutoff))
            if result.lower_bound > bound:
                term = Termination.feasible if result.has_solution else \
                    Termination.time_limit_no_solution
                result = result.with_(termination=term, lower_bound=bound, message="; ".join(
                    m for m in (result.message, f"no plan below the cutoff {float(cutoff):.9g}: "
                                f"bound {bound:.9g} (the start plan's value is not one)") if m))
        if interrupted:
            result = result.with_(message="; ".join(m for m in (result.message, "interrupted by "
                                                                 "a stop signal") if m))
        if result.has_solution and form.var_refs is not None:
            load_values(form, result.solution)
        return result.with_(wall_time_s=time.perf_counter() - start,
                            timings={"build": form.compile_s if form is model else 0.0,
                                     "translate": translate + pass_s, "solve": solve_s})


def _solve_forked(form: "MatrixForm", time_limit_s: float | None, rel_gap: float,
                  warm_start: bool, options: dict[str, Any], version: str
                  ) -> tuple[tuple[SolveResult, float, float], bool]:
    """:func:`_solve` in a forked child (:func:`run_forked`), stopped at
    :func:`deadline_s`: ((the result, seconds passing the model, seconds solving),
    whether a stop was requested). A child stopped at its deadline answers "time
    limit, no solution", no plan or bound from it, and says why."""
    began = time.perf_counter()
    try:
        return run_forked(lambda stop: _solve(form, time_limit_s, rel_gap, warm_start, options,
                                              version, stop), "HiGHS", deadline_s(time_limit_s))
    except SolverTimedOut as late:
        import math
        result = SolveResult(
            termination=Termination.time_limit_no_solution, primal=None, lower_bound=-math.inf,
            wall_time_s=0.0, solver=HighsBackend.name, solver_version=version,
            message=f"{late}: HiGHS ran past its time limit of {time_limit_s:.3g} s (its root "
                    "cut separation does not check it); no plan or bound from this solve")
        return (result, 0.0, time.perf_counter() - began), False


def _solve(form: "MatrixForm", time_limit_s: float | None, rel_gap: float, warm_start: bool,
           options: dict[str, Any], version: str, stop_requested) -> tuple[SolveResult, float, float]:
    """Load and solve in this process (the forked child of :func:`run_forked`): HiGHS
    runs in this thread and its MIP interrupt callback polls ``stop_requested``.
    Returns (the result, the seconds passing the model, the seconds solving)."""
    h, pass_s = _load(form, time_limit_s, rel_gap, warm_start, options)

    def poll(event) -> None:
        if stop_requested():
            event.interrupt()
    h.cbMipInterrupt.subscribe(poll)
    t0 = time.perf_counter()
    h.run()
    return highs_result(h, form, version, rel_gap), pass_s, time.perf_counter() - t0


def _run_interruptible(h) -> bool:
    """Run HiGHS in a worker thread while the main thread waits in Python, so a
    stop signal (:class:`~autopar_opt.core.interrupts.SearchInterrupted`) is raised
    here promptly; HiGHS is then asked to stop through its MIP interrupt
    callback (a root LP runs to its end) and returns its incumbent and bound (model status ``kInterrupt``).
    Returns True when the solve was interrupted."""
    from autopar_opt.core.interrupts import SearchInterrupted

    stop = [False]

    def poll(event) -> None:
        if stop[0]:
            event.interrupt()
    h.cbMipInterrupt.subscribe(poll)    # the MIP loop only: simplex callbacks cost ~10%
    thread = h.startSolve()
    while True:
        try:
            while not h.wait(0.05)[0]:
                pass
            break
        except SearchInterrupted:
            stop[0] = True
    thread.join()
    return stop[0]


def mismatch_message(name: str, problem_class: ProblemClass) -> str:
    """The refusal text with its fix (used by the registry too)."""
    if problem_class is ProblemClass.miqp:
        return ("HiGHS cannot solve integer problems with quadratic terms; use --form milp "
                "(exact linearisation) or --solver gurobi|scip")
    return f"solver {name!r} does not accept {problem_class.value} problems"


def _start_vector(form: MatrixForm) -> np.ndarray | None:
    """The warm start: ``form.start``, else the Pyomo variables' values (all set)."""
    if form.start is not None:
        return np.asarray(form.start, dtype=float)
    if form.var_refs is not None and all(v.value is not None for v in form.var_refs):
        return np.array([float(v.value) for v in form.var_refs])
    return None


def _load(form: MatrixForm, time_limit_s: float | None, rel_gap: float, warm_start: bool,
          options: dict[str, Any]):
    import highspy
    t0 = time.perf_counter()
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("mip_rel_gap", float(rel_gap))
    # No absolute gap: HiGHS's default mip_abs_gap 1e-6 stops at 1e-6 of objective, and the
    # objectives are seconds (0.05 s for the small test instances: 2e-5 relative, far above a
    # requested 1e-9); within_requested_gap then reported such runs feasible, not optimal.
    h.setOptionValue("mip_abs_gap", 0.0)
    h.setOptionValue("threads", 1)
    # Feasibility tolerances 1e-9 (HiGHS defaults: mip 1e-6, primal 1e-7). Memory rows are in
    # GiB, so the defaults let an "optimal" plan overflow a stage by ~1 KB and, on small
    # capacities, gave a bound 1.4e-5 above a plan that fits (tests/unit/solvers/test_highs_tolerance.py).
    h.setOptionValue("mip_feasibility_tolerance", 1e-9)
    h.setOptionValue("primal_feasibility_tolerance", 1e-9)
    if time_limit_s is not None:
        h.setOptionValue("time_limit", float(time_limit_s))
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = form.num_cols, form.num_rows
    lp.col_cost_, lp.offset_ = form.c, form.offset
    lp.col_lower_, lp.col_upper_ = form.col_lo, form.col_hi
    lp.row_lower_, lp.row_upper_ = form.row_lo, form.row_hi
    csc = form.A.tocsc()
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = csc.indptr, csc.indices, csc.data
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = form.num_cols, form.num_rows
    if form.num_integer:
        lp.integrality_ = [highspy.HighsVarType.kInteger if f else highspy.HighsVarType.kContinuous
                           for f in form.integrality]
    for key, value in options.items():
        h.setOptionValue(key, value)
    h.passModel(lp)
    start = _start_vector(form) if warm_start else None
    if start is not None:
        sol = highspy.HighsSolution()
        sol.col_value = start.tolist()
        sol.value_valid = True
        h.setSolution(sol)
    return h, time.perf_counter() - t0


def highs_result(h, form: MatrixForm, version: str, rel_gap: float) -> SolveResult:
    """The :class:`SolveResult` of a finished HiGHS run: model status mapped by
    :data:`_STATUS`, incumbent and dual bound read from its info; an "optimal"
    whose incumbent and bound are further apart than ``rel_gap`` is reported as
    feasible with that bound (:func:`~autopar_opt.solvers.base.within_requested_gap`)."""
    status = h.getModelStatus()
    name = getattr(status, "name", str(status)).split(".")[-1]
    info = h.getInfo()
    has_sol = int(info.primal_solution_status) == 2  # kSolutionStatusFeasible
    term = _STATUS.get(name, Termination.error)
    if term is Termination.feasible and not has_sol:
        term = Termination.time_limit_no_solution
    if term is Termination.optimal and not has_sol:
        term = Termination.error
    primal = float(info.objective_function_value) if has_sol and term is not Termination.infeasible else None
    if term is Termination.infeasible:
        bound = float("inf")
    elif form.num_integer:
        bound = float(info.mip_dual_bound)
        if not np.isfinite(bound) and term is Termination.optimal:
            bound = primal
    else:
        bound = primal if term is Termination.optimal else float("-inf")
    if primal is not None and bound is not None and bound > primal:
        bound = primal   # round-off: a bound never exceeds the incumbent
    x = np.asarray(h.getSolution().col_value, dtype=float) if primal is not None else None
    msg = "" if term is not Termination.error else f"HiGHS model status {name}"
    return within_requested_gap(
        SolveResult(termination=term, primal=primal, lower_bound=float(bound), wall_time_s=0.0,
                    solver="highs", solver_version=version, message=msg, solution=x), rel_gap)
