"""Solve one configuration's inner problem with the chosen backend.

The glue between formulations and solver backends lives here, so that
formulations never import backends and backends never import formulations
(docs/DESIGN.md §1). MIP backends get a built formulation; the DP backend gets
the cost tables.

Warm start (:meth:`InnerSolver._warm`): the exact DP runs first on a small
budget (:data:`DP_WARM_FRACTION` of the configuration's time, at most
:data:`DP_WARM_MAX_S`); the MIP starts from the better of its plan and the best
uniform plan of the configuration. Both the DP and the MIP bounds are proven,
so the configuration keeps the larger. When the DP has already proven its plan
optimal, or within the requested relative gap (its bound is proven: a time-limited
DP reports the deepening passes' bound), the configuration is closed and no MIP
is built (issue 18: the MIP
run after an exact DP proved nothing the DP had not, and took 2-3x the DP's
time on the frontier instances); ``SearchOptions.dp_check`` (or
``--export-models``, which needs the MIP) still runs the MIP as an independent
check, on a short budget (:data:`CHECK_FACTOR` × the DP's time, at least
:data:`CHECK_MIN_S`); the record's message says which method proved the bound.
Under a target's uniformity rule the DP also takes the search's incumbent (from
the configurations solved before) as its cutoff (:func:`_dp_cut`): its key families
close against it, and a configuration it proves unable to beat the incumbent by
more than the gap is answered without a MIP (the engine records it as pruned,
"proven by the solver"); Qwen3-235B-A22B's five runner-up configurations took
1.4-3.5 s each to be proven optimal where the cut proves them in a fraction of that.

Backends declaring :attr:`Feature.matrix_input` (HiGHS) get the MILP as a matrix built
directly from the cost tables (:mod:`autopar_opt.formulations.direct`): no
Pyomo model is built unless ``--export-models`` asks for one, and the matrix
structure is cached across configurations that share it, so most
configurations only refill coefficients. Gurobi and SCIP keep the Pyomo path.
Every result records ``timings`` = {build, translate, solve} seconds. Where the Megatron
target's space holds block recomputation (:func:`block_families_searched`), which the
MIP's one-setting rows do not state, the DP solves those families beside the MIP and the
configuration keeps the better plan and the lesser bound (:func:`with_block_families`). The
formulations (and scipy.sparse) are imported on the first MIP a search builds,
inside the search's clock; a search the DP closes never loads them.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from autopar_opt.cost.tables import CostTables
from autopar_opt.core.assignment import Assignment
from autopar_opt.core.bounds import Bounds, Status, clamp_to_primal, strictly_better, within_gap
from autopar_opt.core.result import ProblemClass, SolveResult, Termination
from autopar_opt.solvers.base import Feature


#: Share of a configuration's time the DP warm start may use, and its cap (s).
DP_WARM_FRACTION, DP_WARM_MAX_S = 0.25, 20.0
#: ``auto`` on a chain (where the DP is exact) that is not a chain of identical
#: blocks: the DP goes first with this share (cap in s), the per-layer MILP gets the
#: rest (DeepSeek-V3, pp = 16: the DP proves a configuration in 3.4 s of CPU where
#: the per-layer MILP still has a 1.2 % gap after 40 s).
DP_AUTO_FRACTION, DP_AUTO_MAX_S = 0.6, 60.0
#: ``auto`` on a chain of identical blocks: the first time slice of the DP / block
#: MILP race (:meth:`InnerSolver._race`), doubled every round (s).
RACE_FIRST_S = 0.25
#: The same under a target's uniformity rule (solvers/dp/uniform.py): there the DP's
#: key families are small label searches and the DP is the main method.
DP_TARGET_FRACTION, DP_TARGET_MAX_S = 0.75, 45.0
#: MIP budget after the DP has proven optimality: max(CHECK_FACTOR × DP time, CHECK_MIN_S).
CHECK_FACTOR, CHECK_MIN_S = 2.0, 1.0

#: A MIP without the DP warm start, where the DP solves the block-recomputation families
#: beside it (:func:`with_block_families`): its share of the configuration's time.
BLOCK_MIP_SHARE = 0.75

#: The least time limit handed to a MIP solver (s).
MIN_MIP_S = 0.01



@dataclass
class InnerOutcome:
    """One configuration solved: the backend's result, its typed answer, and the
    bounds and status derived from them (:class:`Bounds`, the one set of rules).
    The search decodes :attr:`assignment` with :meth:`CostTables.plan_of`."""

    result: SolveResult
    assignment: Assignment | None
    model_hash: str | None = None
    bounds: Bounds | None = None
    status: Status | None = None
    #: the method that answered (``dp``, ``block-milp:highs``, ``dp+milp:highs``, ...):
    #: ``certificate.methods`` of plan.json says which method proved what
    method: str = ""

    def by(self, method: str) -> "InnerOutcome":
        self.method = method
        return self

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
        self.auto = options.solver == registry.AUTO
        self.backend = registry.get_backend(self._resolve(options))
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
        features = self.backend.features
        self.symmetry = (options.symmetry if options.symmetry is not None
                         else Feature.symmetry_cuts in features)
        #: the cached HiGHS matrix builder (:meth:`_direct_builder`), made on the first MIP
        self._direct = None
        self._matrix_input = Feature.matrix_input in features and self.form_name == "milp"
        self._fallback: InnerSolver | None = None

    @staticmethod
    def _resolve(options) -> str:
        """The backend of ``options.solver``: ``auto`` takes the one the registry
        picks by features for the form (a matrix MILP backend by default)."""
        from autopar_opt.solvers import registry

        if options.solver != registry.AUTO:
            return options.solver
        form = options.form if options.form != "auto" else "milp"
        return registry.resolve_auto(ProblemClass(form.upper()))

    def fallback(self) -> "InnerSolver | None":
        """The default backend (HiGHS, MILP) for configurations this backend failed on;
        None when this already is the default backend."""
        from dataclasses import replace

        from autopar_opt.solvers.registry import DEFAULT_BACKEND

        if self.name == DEFAULT_BACKEND:
            return None
        if self._fallback is None:
            self._fallback = InnerSolver(replace(self.options, solver=DEFAULT_BACKEND, form="auto"))
        return self._fallback

    def solve(self, tables: CostTables, remaining_s: float, cfg,
              incumbent: float | None = None) -> InnerOutcome:
        """Solve ``tables`` within ``remaining_s`` seconds: one path for every
        backend (formulate, warm-start, solve, :meth:`invert` to an Assignment).

        ``incumbent``: the search's best plan value so far. A backend declaring
        :attr:`Feature.objective_cutoff` gets it as a cutoff, and half the
        requested gap as its own (a MIP prunes within its gap of the cutoff, so
        "nothing below the cutoff" proves the incumbent less half the gap): it
        stops as soon as it proves that this configuration cannot beat the
        incumbent by more than that, which is all the search needs."""
        opts = self.options
        began = time.perf_counter()
        warm = dp = None
        limit = remaining_s
        cutoff = (incumbent if incumbent is not None
                  and Feature.objective_cutoff in self.backend.features
                  and self.form_name == "milp" else None)
        if self.auto and opts.warm_start and self._use_blocks(tables) \
                and not getattr(opts, "dp_check", False):
            return self._race(tables, remaining_s, cutoff)
        if opts.warm_start and self.form_name != "tables":
            warm, warm_value, dp = self._warm(tables, remaining_s, incumbent)
            if _dp_cut(tables, dp, incumbent, opts.rel_gap) and not (
                    getattr(opts, "dp_check", False) or opts.export_dir is not None):
                # the DP proved that this configuration cannot beat the search's incumbent
                # by more than the gap: no MIP (the engine records it as pruned)
                return InnerOutcome(dp, dp.solution).derive(opts.rel_gap).by("dp")
            # the better of the DP's plan and the uniform one closes (warm_value is its value)
            closed = dp.termination is Termination.optimal or (
                dp.termination is Termination.feasible and warm is not None
                and within_gap(warm_value, dp.lower_bound, opts.rel_gap))
            if closed and warm is not None and not (
                    getattr(opts, "dp_check", False) or opts.export_dir is not None):
                return _dp_closed(dp, opts.rel_gap, warm, warm_value).by("dp")
            if dp.termination is Termination.optimal:
                limit = min(limit, max(CHECK_FACTOR * dp.wall_time_s, CHECK_MIN_S))
        _load_mip_modules()        # its import time is taken off the limit below
        if self._use_blocks(tables):
            return self._solve_blocks(tables, warm, dp, limit, remaining_s - (time.perf_counter() - began),
                                      cutoff).by(("dp+" if dp is not None else "") + f"block-milp:{self.name}")
        from autopar_opt.core.memory_budget import OverBudget
        # the DP backend searches the whole space itself; a MIP's rows hold one setting
        blocks = self.form_name != "tables" and block_families_searched(tables)
        if blocks and dp is None:
            limit = min(limit, BLOCK_MIP_SHARE * remaining_s)   # the rest: the block families' DP
        try:
            problem, model_hash = self._formulate(tables, cfg)
        except OverBudget as exc:           # counted, not built: the DP's result stands
            return merge_outcomes(InnerOutcome(self._refused(exc), None), dp,
                                  opts.rel_gap).derive(opts.rel_gap).by(f"milp:{self.name} (refused)")
        if warm is not None and tables.uniform_keys is not None:
            warm = _one_setting_start(tables, warm)     # a block plan breaks the MIP's rows
        if warm is not None:
            problem.set_warm_start(warm)
        # the warm start, the first import of the formulations and building the model
        # spent part of the share (issues 15, 18); the DP may have used all of it
        limit = max(min(limit, remaining_s - (time.perf_counter() - began)), MIN_MIP_S)
        res = self.backend.solve(problem.model, problem.problem_class, time_limit_s=limit,
                                 rel_gap=_mip_gap(opts.rel_gap, cutoff), warm_start=warm is not None,
                                 solver_options=self.backend.cutoff_options(cutoff)
                                 if cutoff is not None else None)
        if problem.build_s and not res.timings.get("build"):
            res = res.with_(timings={**res.timings, "build": problem.build_s})
        outcome = merge_outcomes(InnerOutcome(res, problem.invert(res), model_hash), dp,
                                 opts.rel_gap).derive(opts.rel_gap)
        method = ("dp+" if dp is not None else "") + f"{self.form_name}:{self.name}"
        if blocks:
            # the MIP's rows state one recomputation setting: the block families by DP
            outcome = with_block_families(outcome, tables, dp, remaining_s - (time.perf_counter()
                                                                             - began),
                                          incumbent, opts.rel_gap)
            method += "+block-dp"
        return outcome.by(method)

    def _refused(self, exc) -> SolveResult:
        """The result of a MILP the memory budget refused before it was built
        (:meth:`DirectBuilder.build <autopar_opt.formulations.direct.DirectBuilder.build>`
        counts a new structure's rows, columns and entries first)."""
        return SolveResult(termination=Termination.time_limit_no_solution, primal=None,
                           lower_bound=float("-inf"), wall_time_s=0.0, solver=self.name,
                           solver_version=self.version, message=str(exc))

    def _use_blocks(self, tables: CostTables) -> bool:
        """Whether this configuration takes the block MILP: the HiGHS matrix path on
        a chain of identical blocks, no model export asked (the exported model is
        the per-layer one)."""
        if not (self._matrix_input and getattr(self.options, "blocks", True)
                and self.options.export_dir is None):
            return False
        if tables.uniform_keys is not None or tables.fixed_stage is not None:
            return False        # a target's rules are rows of the per-layer matrix only
        from autopar_opt.formulations.block_solve import block_applicable
        return block_applicable(tables)

    def _race(self, tables: CostTables, remaining_s: float, cutoff: float | None = None) -> InnerOutcome:
        """``auto`` on a chain of identical blocks: the two exact methods race.

        Neither dominates (measured per configuration on the frontier and MoE
        examples: the block MILP proves Qwen3-235B's single-stage configurations
        in 0.2 s where the DP needs over 10 s, the DP proves Llama-3-70B's deep
        pipelines where the block MILP stalls), so they alternate in time slices
        of :data:`RACE_FIRST_S`, doubled every round, until one proves the
        configuration within the gap or its time is spent: at most about four
        times the faster method's time. Each block MILP starts from the best plan
        so far (the DP's, or the best uniform one); the record keeps the best
        plan and the larger proven bound, and says which method proved it. With
        an incumbent from other configurations (``cutoff``), the block MILP goes
        first: stopped at the cutoff it disproves a configuration in a fraction
        of a second (Qwen3-235B-A22B: 0.1-0.4 s of CPU per configuration).
        """
        from autopar_opt.formulations.block_solve import solve_blocks
        from autopar_opt.search.baselines import best_uniform_assignment
        from autopar_opt.solvers.dp import solve_dp

        opts, began = self.options, time.perf_counter()
        deadline = began + remaining_s
        uniform = best_uniform_assignment(tables)
        dp_best: SolveResult | None = None
        mip: InnerOutcome | None = None
        span, rounds = RACE_FIRST_S, 0
        mip_first = cutoff is not None

        def reaches_gap(lower: float) -> bool:
            """The bound proves this configuration cannot beat the incumbent by the gap."""
            return cutoff is not None and lower >= cutoff * (1 - opts.rel_gap)
        while True:
            rounds += 1
            left = deadline - time.perf_counter()
            if mip_first:           # the cutoff may disprove it before any DP runs
                mip_first = False
                _load_mip_modules()
                first = max(4 * span, 0.5 * remaining_s)     # cheap when it disproves
                res, asg = solve_blocks(tables, self.backend, time_limit_s=max(min(first, left),
                                                                               MIN_MIP_S),
                                        rel_gap=_mip_gap(opts.rel_gap, cutoff),
                                        start=uniform[0] if uniform is not None else None,
                                        cutoff=cutoff, budget=getattr(opts, "memory_budget", None))
                mip = InnerOutcome(res, asg, None).derive(opts.rel_gap)
                if mip.status in (Status.optimal, Status.infeasible) or reaches_gap(res.lower_bound) \
                        or deadline - time.perf_counter() <= MIN_MIP_S:
                    dp_best = None
                    break
                if res.primal is not None and res.primal < cutoff:
                    cutoff = None       # this configuration beats the incumbent: the full gap
                left = deadline - time.perf_counter()
            dp = solve_dp(tables, max(min(span, left), 0.01))
            dp_best = dp if dp_best is None else _merge_dp(dp_best, dp)
            plan, value = dp_best.solution, dp_best.primal
            if uniform is not None and (value is None or uniform[1] < value):
                plan, value = uniform
            if dp_best.termination is Termination.infeasible or (
                    plan is not None and (dp_best.termination is Termination.optimal
                                          or within_gap(value, dp_best.lower_bound, opts.rel_gap))):
                if dp_best.termination is Termination.infeasible:
                    return InnerOutcome(dp_best, None).derive(opts.rel_gap).by("dp")
                out = _dp_closed(dp_best, opts.rel_gap, plan, value)
                out.result = out.result.with_(wall_time_s=time.perf_counter() - began)
                if mip is not None:
                    out.result = out.result.with_(message=f"{out.result.message}; after {rounds} "
                                                  "rounds of the DP / block MILP race")
                return out.by("dp" if mip is None else "dp (DP / block-MILP race)")
            left = deadline - time.perf_counter()
            if left <= MIN_MIP_S:
                break
            _load_mip_modules()
            if mip is not None and mip.assignment is not None and mip.result.primal is not None \
                    and (value is None or mip.result.primal < value):
                plan = mip.assignment
            res, asg = solve_blocks(tables, self.backend, time_limit_s=max(min(span, left), MIN_MIP_S),
                                    rel_gap=_mip_gap(opts.rel_gap, cutoff), start=plan, cutoff=cutoff,
                                    budget=getattr(opts, "memory_budget", None))
            new = merge_outcomes(InnerOutcome(res, asg, None), dp_best, opts.rel_gap).derive(opts.rel_gap)
            mip = new if mip is None else _merge_inner(mip, new, opts.rel_gap)
            if mip.status in (Status.optimal, Status.infeasible) or (
                    cutoff is not None and reaches_gap(mip.bounds.lower)):
                break
            if deadline - time.perf_counter() <= MIN_MIP_S:
                break
            if cutoff is not None and mip.result.primal is not None and mip.result.primal < cutoff:
                cutoff = None           # this configuration beats the incumbent: the full gap
            span *= 2
        if mip is None:
            return InnerOutcome(dp_best, dp_best.solution).derive(opts.rel_gap).by("dp")
        mip.result = mip.result.with_(wall_time_s=time.perf_counter() - began, message="; ".join(
            m for m in (mip.result.message, f"DP / block MILP race, {rounds} round(s)") if m))
        return mip.by(f"dp / block-milp:{self.name} race")

    def _solve_blocks(self, tables: CostTables, warm, dp, limit: float, left: float,
                      cutoff: float | None = None) -> InnerOutcome:
        """The block MILP (:func:`~autopar_opt.formulations.block_solve.solve_blocks`),
        warm-started like the direct matrix, merged with the DP's result."""
        from autopar_opt.formulations.block_solve import solve_blocks

        opts = self.options
        res, asg = solve_blocks(tables, self.backend, time_limit_s=max(min(limit, left), MIN_MIP_S),
                                rel_gap=_mip_gap(opts.rel_gap, cutoff), start=warm, cutoff=cutoff,
                                budget=getattr(opts, "memory_budget", None))
        return merge_outcomes(InnerOutcome(res, asg, None), dp, opts.rel_gap).derive(opts.rel_gap)

    def _formulate(self, tables: CostTables, cfg):
        """The problem the backend solves (:class:`TablesProblem` for the DP, the
        direct matrix for HiGHS, the Pyomo model otherwise) and the exported
        model's sha256 when ``--export-models`` asks for it. A matrix past
        ``options.memory_budget`` is counted, not built (:class:`OverBudget`)."""
        from autopar_opt.formulations import TablesProblem, build_formulation
        if self.form_name == "tables":
            return TablesProblem(tables), None
        budget = getattr(self.options, "memory_budget", None)
        if self._matrix_input:
            if self._direct is None:
                from autopar_opt.formulations.direct import DirectBuilder
                self._direct = DirectBuilder(symmetry=self.symmetry)
            problem = self._direct.build(tables, budget)
            exported = (build_formulation(tables, "milp", symmetry=self.symmetry, budget=budget)
                        if self.options.export_dir is not None else None)
            return problem, self._export(exported, cfg) if exported is not None else None
        problem = build_formulation(tables, self.form_name, symmetry=self.symmetry, budget=budget)
        return problem, self._export(problem, cfg)

    def _export(self, form, cfg) -> str | None:
        """Write the Pyomo model when ``--export-models`` is on; its sha256."""
        opts = self.options
        if opts.export_dir is None:
            return None
        opts.export_dir.mkdir(parents=True, exist_ok=True)
        sizes = "" if cfg.stage_devices is None else "_d" + "-".join(map(str, cfg.stage_devices))
        vp = f"_vp{cfg.vp}" if cfg.vp > 1 else ""
        name = f"pp{cfg.pp}{sizes}_c{cfg.microbatches}_{cfg.schedule.value}{vp}.{opts.export_format}"
        return form.export(str(opts.export_dir / name), opts.export_format)

    def _warm(self, tables: CostTables, remaining_s: float, incumbent: float | None = None
              ) -> tuple[Assignment | None, float | None, SolveResult]:
        """The warm start: the better of the DP's assignment (budgeted) and the best
        uniform (Megatron-style) one of this configuration, its tables objective;
        and the DP's result. Under a target's uniformity rule the search's
        ``incumbent`` is the DP's cutoff (:func:`_dp_cut`)."""
        from autopar_opt.solvers.dp import solve_dp
        from autopar_opt.search.baselines import best_uniform_assignment

        keyed = _keyed(tables)
        if keyed:
            share, cap = DP_TARGET_FRACTION, DP_TARGET_MAX_S
        elif self.auto and tables.graph.is_chain():
            share, cap = DP_AUTO_FRACTION, DP_AUTO_MAX_S
        else:
            share, cap = DP_WARM_FRACTION, DP_WARM_MAX_S
        cutoff = incumbent if keyed and incumbent is not None else float("inf")
        dp = solve_dp(tables, min(share * remaining_s, cap),
                      rel_gap=self.options.rel_gap if keyed else 0.0, cutoff=cutoff)
        uniform = best_uniform_assignment(tables)
        if uniform is not None and not tables.runnable(uniform[0]):
            uniform = None          # outside the target's rules: not a start for its space
        if dp.has_solution and (uniform is None or dp.primal <= uniform[1]):
            return dp.solution, dp.primal, dp   # the DP's primal is the same tables objective
        if uniform is None:
            return None, None, dp
        return uniform[0], uniform[1], dp


def _one_setting_start(tables: CostTables, warm: Assignment) -> Assignment | None:
    """``warm``, or the best uniform plan when ``warm`` is a block-recomputation plan of
    the DP (:func:`block_families_searched`), which the MIP's uniformity rows do not hold."""
    from autopar_opt.search.baselines import best_uniform_assignment, runnable_choice

    if runnable_choice(tables, tuple(warm.choice)):
        return warm
    uniform = best_uniform_assignment(tables)
    return uniform[0] if uniform is not None and tables.runnable(uniform[0]) else None


def _load_mip_modules() -> None:
    """Import the formulations (and with them scipy.sparse) when a configuration
    first needs a MIP (a no-op once loaded).

    A search the exact DP closes never builds a MIP, so the command does not
    load them up front (start-up, issue 18). The caller measures its share from
    before this call, so the import time comes off this MIP's time limit: the
    search's clock runs through it.
    """
    import autopar_opt.formulations  # noqa: F401


def _dp_closed(dp: SolveResult, rel_gap: float, plan: Assignment,
               value: float) -> InnerOutcome:
    """The outcome of a configuration the exact DP warm start proved optimal (or
    within ``rel_gap``: its time-limited bound). ``plan`` (worth ``value``) is
    the better of the DP's plan and the best uniform one (:meth:`InnerSolver._warm`):
    a time-limited DP's incumbent can be worse than the uniform plan."""
    how = ("proven optimal by the exact DP warm start" if dp.termination is Termination.optimal
           else f"proven within the relative gap {rel_gap:g} by the exact DP warm start's bound")
    notes = [dp.message, f"{how}; no MIP was run"]
    if plan is not dp.solution:
        notes.append("the best uniform plan beats the DP's incumbent")
    res = dp.with_(primal=value, solution=plan, timings={"dp_warm": dp.wall_time_s},
                   message="; ".join(m for m in notes if m))
    return InnerOutcome(res, plan).derive(rel_gap)


def _keyed(tables: CostTables) -> bool:
    """Whether a target's rules restrict these tables (uniform keys or a fixed split):
    the DP then solves the restricted space, under the gap and the search's cutoff."""
    return tables.uniform_keys is not None or tables.fixed_stage is not None


def _dp_cut(tables: CostTables, dp: SolveResult | None, incumbent: float | None,
            rel_gap: float) -> bool:
    """Whether the DP warm start, cut off at the search's incumbent (a target's
    uniformity rule: :func:`~autopar_opt.solvers.dp.uniform.solve_uniform`), proved that
    this configuration cannot beat the incumbent by more than ``rel_gap``."""
    if dp is None or incumbent is None or not _keyed(tables):
        return False
    return dp.lower_bound >= incumbent * (1 - rel_gap) * (1 - 1e-12) and (
        dp.primal is None or dp.primal >= incumbent * (1 - rel_gap))


def _mip_gap(rel_gap: float, cutoff: float | None) -> float:
    """The MIP's own relative gap: half the requested one under a cutoff (see
    :meth:`InnerSolver.solve`), the requested one otherwise."""
    return rel_gap if cutoff is None else 0.5 * rel_gap


def _merge_dp(a: SolveResult, b: SolveResult) -> SolveResult:
    """Two DP runs on the same configuration: the better plan, the larger proven bound."""
    if b.termination is Termination.infeasible or a.termination is Termination.infeasible:
        return b if b.termination is Termination.infeasible else a
    best = b if strictly_better(b.primal, a.primal) or a.primal is None else a
    merged = Bounds.of(a, "dp").merge(Bounds.of(b, "dp"))
    term = Termination.optimal if (a.termination is Termination.optimal
                                   or b.termination is Termination.optimal) else best.termination
    return best.with_(primal=merged.primal, lower_bound=merged.lower, termination=term,
                      wall_time_s=a.wall_time_s + b.wall_time_s)


def _merge_inner(old: InnerOutcome, new: InnerOutcome, rel_gap: float) -> InnerOutcome:
    """Two rounds of the race: the better plan and the larger proven bound."""
    merged = old.bounds.merge(new.bounds)
    asg = new.assignment if strictly_better(new.result.primal, old.result.primal) else old.assignment
    base = new.result if merged.lower >= new.bounds.lower else old.result
    res = base.with_(primal=merged.primal, lower_bound=merged.lower,
                     wall_time_s=old.result.wall_time_s + new.result.wall_time_s,
                     timings={k: old.result.timings.get(k, 0.0) + new.result.timings.get(k, 0.0)
                              for k in set(old.result.timings) | set(new.result.timings)})
    status = merged.status(rel_gap)
    if merged.primal is not None:
        res = res.with_(termination=Termination.optimal if status is Status.optimal
                        else Termination.feasible)
    return InnerOutcome(res, asg, None, merged, status)


def block_families_searched(tables: CostTables) -> bool:
    """Whether the target's space holds Megatron's block recomputation in this
    configuration (:func:`~autopar_opt.solvers.dp.uniform.block_families`): the MIP's
    rows (``uniform_choice``) state one recomputation setting for the model, so the
    block families are solved by the DP beside it (:func:`with_block_families`)."""
    from autopar_opt.solvers.dp.uniform import block_families
    return bool(block_families(tables))


def with_block_families(outcome: InnerOutcome, tables: CostTables, dp: SolveResult | None,
                        left_s: float, incumbent: float | None, rel_gap: float) -> InnerOutcome:
    """The configuration's outcome over the target's whole space, from ``outcome`` (the
    MIP over the one-setting plans, merged with the DP warm start ``dp``, which searched
    the whole space) and the block-recomputation families: a union of two spaces, so
    the better plan and the *lesser* of the two parts' bounds (the MIP's bound holds for
    the one-setting plans only: merged by the larger, it could pass a block plan's
    value). The block part's bound is the DP warm start's when it searched the whole
    space to the end (optimal or infeasible: its bound holds for both parts), else the
    DP over the block families alone (``solve_dp(part="block")``, ``left_s`` seconds,
    the search's ``incumbent`` its cutoff) raised to the warm start's bound."""
    from autopar_opt.solvers.dp import solve_dp

    if outcome.result.termination is Termination.error:
        return outcome               # the search hands it to the default backend
    uni = outcome.bounds
    asg, res = outcome.assignment, outcome.result
    exhaustive_dp = dp is not None and dp.termination in (Termination.optimal, Termination.infeasible)
    if exhaustive_dp:
        block = Bounds(None, math.inf if dp.termination is Termination.infeasible
                       else dp.lower_bound, True, "dp")
        note = ""
    else:
        found = solve_dp(tables, max(left_s, 0.05), rel_gap=rel_gap,
                         cutoff=incumbent if incumbent is not None else math.inf, part="block")
        block = Bounds.of(found, "dp")
        if dp is not None:
            block = Bounds(block.primal, max(block.lower, dp.lower_bound), block.exhaustive, "dp")
        if strictly_better(found.primal, uni.primal):
            asg = found.solution
        note = (f"block recomputation by the DP: {found.termination.value}, bound "
                f"{block.lower:.6g} s")
        res = res.with_(wall_time_s=res.wall_time_s + found.wall_time_s,
                        timings={**res.timings, "dp_block": found.wall_time_s})
    primal = block.primal if strictly_better(block.primal, uni.primal) else uni.primal
    source = uni.source if uni.lower <= block.lower else block.source
    lower = clamp_to_primal(min(uni.lower, block.lower), primal, source or "")
    merged = Bounds(primal, lower, uni.exhaustive and block.exhaustive, source)
    status = merged.status(rel_gap)
    if primal is None:
        term = Termination.infeasible if merged.is_infeasible else Termination.time_limit_no_solution
    else:
        term = Termination.optimal if status is Status.optimal else Termination.feasible
    res = res.with_(termination=term, primal=primal, lower_bound=lower,
                    message="; ".join(m for m in (res.message, note) if m))
    return InnerOutcome(res, asg if primal is not None else None, outcome.model_hash, merged, status)


def merge_outcomes(outcome: InnerOutcome, dp: SolveResult | None, rel_gap: float) -> InnerOutcome:
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
    asg = dp.solution if strictly_better(dp.primal, res.primal) else outcome.assignment
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
    return InnerOutcome(out, asg, outcome.model_hash, merged, status)
