"""Solve one configuration's inner problem with the chosen backend.

The glue between formulations and solver backends lives here, so that
formulations never import backends and backends never import formulations
(DESIGN.md §1). MIP backends get a built formulation, warm-started from the
DP's plan where the backend and the graph allow it; the DP backend gets the
cost tables.
"""

from __future__ import annotations

from dataclasses import dataclass

from autopar_opt.cost.tables import CostTables
from autopar_opt.plan import Plan
from autopar_opt.solvers.result import ProblemClass, SolveResult, Termination


#: Backends that take the solver-neutral matrix form directly (no Pyomo translation).
MATRIX_BACKENDS = frozenset({"highs"})


@dataclass
class InnerOutcome:
    result: SolveResult
    plan: Plan | None
    model_hash: str | None = None


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

    def solve(self, tables: CostTables, remaining_s: float, cfg) -> InnerOutcome:
        """Solve ``tables`` within ``remaining_s`` seconds."""
        opts = self.options
        if self.form_name == "tables":
            res = self.backend.solve_tables(tables, time_limit_s=remaining_s, rel_gap=opts.rel_gap)
            return InnerOutcome(res, res.solution if res.has_solution else None)
        from autopar_opt.formulations import build_formulation

        warm = self._warm_plan(tables) if opts.warm_start else None
        form = build_formulation(tables, self.form_name)
        model_hash = None
        if opts.export_dir is not None:
            opts.export_dir.mkdir(parents=True, exist_ok=True)
            name = f"pp{cfg.pp}_c{cfg.microbatches}_{cfg.schedule.value}.{opts.export_format}"
            model_hash = form.export(str(opts.export_dir / name), opts.export_format)
        if warm is not None:
            form.set_warm_start(warm)
        model = form.matrix() if self.name in MATRIX_BACKENDS else form.model
        res = self.backend.solve_model(model, form.problem_class, time_limit_s=remaining_s,
                                       rel_gap=opts.rel_gap, warm_start=warm is not None)
        plan = form.decode() if res.has_solution else None
        return InnerOutcome(res, plan, model_hash)

    def _warm_plan(self, tables: CostTables) -> Plan | None:
        """A warm start: the best uniform (Megatron-style) plan of this configuration.

        Cheap (one evaluate() per uniform strategy) and always inside the
        configuration's space, so the solver starts from an incumbent at least
        as good as the uniform baseline.
        """
        from autopar_opt.search.baselines import best_uniform_for_config

        return best_uniform_for_config(tables)
