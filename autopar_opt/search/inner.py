"""Solve one configuration's inner problem with the chosen backend.

The glue between formulations and solver backends lives here, so that
formulations never import backends and backends never import formulations
(DESIGN.md §1). MIP backends get a built formulation; the DP backend gets
the cost tables.

Warm start (:meth:`InnerSolver._warm`): the exact DP runs first on a small
budget (:data:`DP_WARM_FRACTION` of the configuration's time, at most
:data:`DP_WARM_MAX_S`); the MIP starts from the better of its plan and the best
uniform plan of the configuration. Both the DP and the MIP bounds are proven,
so the configuration keeps the larger. When the DP has already proven its plan
optimal, the MIP still runs, as an independent check, on a short budget
(:data:`CHECK_FACTOR` × the DP's time, at least :data:`CHECK_MIN_S`); the
record's message says which method proved the bound.

Backends in :data:`MATRIX_BACKENDS` (HiGHS) get the MILP as a matrix built
directly from the cost tables (:mod:`autopar_opt.formulations.direct`): no
Pyomo model is built unless ``--export-models`` asks for one, and the matrix
structure is cached across configurations that share it, so most
configurations only refill coefficients. Gurobi and SCIP keep the Pyomo path.
Every result records ``timings`` = {build, translate, solve} seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from autopar_opt.cost.tables import CostTables
from autopar_opt.plan import Plan
from autopar_opt.core.bounds import Bounds, Status, strictly_better
from autopar_opt.core.result import ProblemClass, SolveResult, Termination


#: Backends that take the solver-neutral matrix form directly (no Pyomo translation).
MATRIX_BACKENDS = frozenset({"highs"})

#: Share of a configuration's time the DP warm start may use, and its cap (s).
DP_WARM_FRACTION, DP_WARM_MAX_S = 0.25, 20.0
#: MIP budget after the DP has proven optimality: max(CHECK_FACTOR × DP time, CHECK_MIN_S).
CHECK_FACTOR, CHECK_MIN_S = 2.0, 1.0

#: The least time limit handed to a MIP solver (s).
MIN_MIP_S = 0.01

#: Backends whose search default leaves the symmetry cuts out: HiGHS 1.15 solved
#: llama-7b (2x8 A100, 1x8 V100) slower with them (benchmarks/symmetry_cuts.py).
SYMMETRY_OFF_BY_DEFAULT = frozenset({"highs"})


@dataclass
class InnerOutcome:
    """One configuration solved: the backend's result, the decoded plan, and the
    bounds and status derived from them (:class:`Bounds`, the one set of rules)."""

    result: SolveResult
    plan: Plan | None
    model_hash: str | None = None
    bounds: Bounds | None = None
    status: Status | None = None

    def derive(self, rel_gap: float) -> "InnerOutcome":
        """Fill :attr:`bounds` (from the result) and :attr:`status` when unset."""
        if self.bounds is None:
            self.bounds = Bounds.of(self.result)
        if self.status is None:
            self.status = self.bounds.status(rel_gap, self.result.termination)
        return self


class InnerSolver:
    """Resolves the backend and form once, then solves configurations."""

    def __init__(self, options) -> None:
        from autopar_opt.solvers import registry

        self.options = options
        self.backend = registry.get_backend(options.solver)
        ok, why = self.backend.available()
        if not ok:
            from autopar_opt.solvers.base import SolverUnavailable
            raise SolverUnavailable(why)
        if ProblemClass.tables in self.backend.accepts:
            self.form_name = "tables"
        else:
            self.form_name = options.form if options.form != "auto" else registry.default_form(self.backend)
            registry.check_accepts(self.backend, ProblemClass(self.form_name.upper()))
        self.name = self.backend.name
        self.version = self.backend.version()
        self.symmetry = (options.symmetry if options.symmetry is not None
                         else self.name not in SYMMETRY_OFF_BY_DEFAULT)
        self._direct = None
        if self.name in MATRIX_BACKENDS and self.form_name == "milp":
            from autopar_opt.formulations.direct import DirectBuilder
            self._direct = DirectBuilder(symmetry=self.symmetry)

    def solve(self, tables: CostTables, remaining_s: float, cfg) -> InnerOutcome:
        """Solve ``tables`` within ``remaining_s`` seconds."""
        opts = self.options
        if self.form_name == "tables":
            res = self.backend.solve_tables(tables, time_limit_s=remaining_s, rel_gap=opts.rel_gap)
            return InnerOutcome(res, res.solution if res.has_solution else None).derive(opts.rel_gap)
        warm, dp = self._warm(tables, remaining_s) if opts.warm_start else (None, None)
        limit = remaining_s - (dp.wall_time_s if dp is not None else 0.0)
        if dp is not None and dp.termination is Termination.optimal:
            limit = min(limit, max(CHECK_FACTOR * dp.wall_time_s, CHECK_MIN_S))
        limit = max(limit, MIN_MIP_S)   # the DP may have used the whole share
        outcome = (self._solve_direct(tables, limit, cfg, warm) if self._direct is not None
                   else self._solve_pyomo(tables, limit, cfg, warm))
        return _merge(outcome, dp, opts.rel_gap).derive(opts.rel_gap)

    def _solve_pyomo(self, tables: CostTables, remaining_s: float, cfg,
                     warm: Plan | None) -> InnerOutcome:
        """Gurobi/SCIP (or HiGHS through Pyomo) on the built formulation."""
        from autopar_opt.formulations import build_formulation

        opts = self.options
        form = build_formulation(tables, self.form_name, symmetry=self.symmetry)
        model_hash = self._export(form, cfg)
        if warm is not None:
            form.set_warm_start(warm)
        res = self.backend.solve_model(form.model, form.problem_class, time_limit_s=remaining_s,
                                       rel_gap=opts.rel_gap, warm_start=warm is not None)
        timings = dict(res.timings)
        timings["build"] = timings.get("build", 0.0) + form.build_s
        plan = form.decode() if res.has_solution else None
        return InnerOutcome(res.with_(timings=timings), plan, model_hash)

    def _solve_direct(self, tables: CostTables, remaining_s: float, cfg,
                      warm: Plan | None) -> InnerOutcome:
        """HiGHS on the direct matrix; a Pyomo model only to export it."""
        form = self._direct.build(tables)
        model_hash = None
        if self.options.export_dir is not None:
            from autopar_opt.formulations import build_formulation
            model_hash = self._export(build_formulation(tables, "milp", symmetry=self.symmetry), cfg)
        if warm is not None:
            form.set_warm_start(warm)
        res = self.backend.solve_model(form.matrix, form.problem_class, time_limit_s=remaining_s,
                                       rel_gap=self.options.rel_gap, warm_start=warm is not None)
        plan = form.decode_values(res.solution) if res.has_solution else None
        return InnerOutcome(res, plan, model_hash)

    def _export(self, form, cfg) -> str | None:
        """Write the Pyomo model when ``--export-models`` is on; its sha256."""
        opts = self.options
        if opts.export_dir is None:
            return None
        opts.export_dir.mkdir(parents=True, exist_ok=True)
        name = f"pp{cfg.pp}_c{cfg.microbatches}_{cfg.schedule.value}.{opts.export_format}"
        return form.export(str(opts.export_dir / name), opts.export_format)

    def _warm(self, tables: CostTables, remaining_s: float) -> tuple[Plan | None, SolveResult | None]:
        """The warm start: the better of the DP's plan (budgeted) and the best
        uniform (Megatron-style) plan of this configuration; and the DP's result."""
        from autopar_opt.solvers.dp import solve_dp
        from autopar_opt.solvers.dp.common import to_plan
        from autopar_opt.search.baselines import best_uniform_assignment

        dp = solve_dp(tables, min(DP_WARM_FRACTION * remaining_s, DP_WARM_MAX_S))
        uniform = best_uniform_assignment(tables)
        if dp.has_solution and (uniform is None or dp.primal <= uniform[1]):
            return dp.solution, dp      # the DP's primal is the same tables objective
        return (None if uniform is None else to_plan(tables, uniform[0])), dp


def _merge(outcome: InnerOutcome, dp: SolveResult | None, rel_gap: float) -> InnerOutcome:
    """Combine the MIP's result with the DP warm start's: best plan, larger proven
    bound (:meth:`Bounds.merge`); the status derived from the merged bounds."""
    res = outcome.result
    if dp is None or res.termination is Termination.error:
        return outcome
    timings = {**res.timings, "dp_warm": dp.wall_time_s}
    wall = res.wall_time_s + dp.wall_time_s
    if res.termination is Termination.infeasible or dp.termination is Termination.infeasible:
        proof = res if res.termination is Termination.infeasible else dp
        return InnerOutcome(proof.with_(wall_time_s=wall, timings=timings), None, outcome.model_hash)
    merged = Bounds.of(res).merge(Bounds.of(dp, "dp"))
    plan = dp.solution if strictly_better(dp.primal, res.primal) else outcome.plan
    notes = [res.message] if res.message else []
    if dp.lower_bound > res.lower_bound:
        notes.append(f"bound {dp.lower_bound:.6g} s proven by the exact DP warm start "
                     f"({dp.termination.value}); the MIP's own bound is {res.lower_bound:.6g} s")
    status = merged.status(rel_gap)
    term = res.termination if merged.primal is None else {
        Status.optimal: Termination.optimal, Status.heuristic: Termination.heuristic}.get(
            status, Termination.feasible)
    out = res.with_(termination=term, primal=merged.primal, lower_bound=merged.lower,
                    wall_time_s=wall, timings=timings, message="; ".join(notes))
    return InnerOutcome(out, plan, outcome.model_hash, merged, status)
