"""Solve one configuration's inner problem with the chosen backend.

The glue between formulations and solver backends lives here, so that
formulations never import backends and backends never import formulations
(DESIGN.md §1). MIP backends get a built formulation, warm-started from the
best uniform plan of the configuration; the DP backend gets the cost tables.

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
from autopar_opt.solvers.result import ProblemClass, SolveResult, Termination


#: Backends that take the solver-neutral matrix form directly (no Pyomo translation).
MATRIX_BACKENDS = frozenset({"highs"})

#: Backends whose search default leaves the symmetry cuts out: HiGHS 1.15 solved
#: llama-7b (2x8 A100, 1x8 V100) slower with them (benchmarks/symmetry_cuts.py).
SYMMETRY_OFF_BY_DEFAULT = frozenset({"highs"})


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
            return InnerOutcome(res, res.solution if res.has_solution else None)
        warm = self._warm_plan(tables) if opts.warm_start else None
        if self._direct is not None:
            return self._solve_direct(tables, remaining_s, cfg, warm)
        from autopar_opt.formulations import build_formulation

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

    def _warm_plan(self, tables: CostTables) -> Plan | None:
        """A warm start: the best uniform (Megatron-style) plan of this configuration.

        Cheap (one evaluate() per uniform strategy) and always inside the
        configuration's space, so the solver starts from an incumbent at least
        as good as the uniform baseline.
        """
        from autopar_opt.search.baselines import best_uniform_for_config

        return best_uniform_for_config(tables)
