"""Solving the block MILP (:mod:`.blocks`) with relaxed patterns, refined on demand.

Listing every in-stage layout pattern costs ``n(n+1)·2^(n-2)`` binaries per
stage (1,792 for 7 layouts), and HiGHS spends most of its time on them. So the
model is first built with exact patterns of at most ``EXACT_START`` layouts
and one relaxed pattern per end pair for all larger sets
(:func:`~.chain_blocks.layout_patterns`): a relaxation, so its dual bound is a
valid lower bound for every plan of the configuration. Every incumbent is
decoded and priced exactly from the tables (:func:`plan_time`, the semantics
of ``evaluate``), so the reported primal is a real plan's time. HiGHS starts
from the better of the caller's plan (the DP's, in the search) and the block
model's own split plan (:func:`~.block_floors.split_plan`, from the same stage
floors as its cuts: part of the MILP, no DP involved), and every model is
built with that plan's time as ``ub``: stage sizes that cannot beat it are
left out (:meth:`~.blocks._Builder._size_bound`), so the model's bound is
valid for ``min(optimum, ub)``, which is the optimum's bound since the plan
is kept. When the gap
is not closed and the solution leans on a relaxed pattern, the model is
rebuilt with one more exact layout per stage (warm-started from the best plan)
until the gap closes, every pattern is exact, or the time runs out. With
every pattern exact the model is the exact one of :mod:`.blocks`.
"""

from __future__ import annotations

import time
from typing import Any

from autopar_opt.core.assignment import Assignment
from autopar_opt.core.bounds import clamp_to_primal
from autopar_opt.core.memory_budget import OverBudget
from autopar_opt.core.result import ProblemClass, SolveResult, Termination
from autopar_opt.cost.tables import CostTables, fits
from autopar_opt.formulations.base import FormulationError, price_assignment, start_assignment
from autopar_opt.formulations.block_floors import split_plan, stage_floors
from autopar_opt.formulations.blocks import build_blocks
from autopar_opt.formulations.chain_blocks import block_chain
from autopar_opt.ir.plan import Plan

#: exact patterns up to this many layouts in the first model
EXACT_START = 2


def plan_time(tables: CostTables, asg: Assignment) -> float:
    """The iteration time of an assignment from the tables (``evaluate``'s semantics)."""
    p, o, g, _, _ = price_assignment(tables, asg.stage, asg.choice)
    return (sum(p) + sum(o) + (tables.rounds - 1) * max(p + o) + max(g)
            + float(tables.params.iteration_overhead_s))


def block_applicable(tables: CostTables) -> bool:
    """Whether ``tables`` is a chain of identical blocks the block MILP handles."""
    return block_chain(tables)[0] is not None


def solve_blocks(tables: CostTables, backend, *, time_limit_s: float | None, rel_gap: float,
                 start: "Assignment | Plan | None" = None, exact_start: int = EXACT_START,
                 solver_options: dict[str, Any] | None = None,
                 cutoff: float | None = None, budget=None) -> tuple[SolveResult, Assignment | None]:
    """The block MILP of ``tables`` on ``backend`` (a matrix-input MILP backend):
    the best plan found with its exact time, and the best proven bound.

    ``cutoff``: only plans below it matter (the search's incumbent); a backend
    that declares an objective cutoff stops once its bound reaches it, and the
    rounds stop there too (the configuration is disproved). ``budget`` (a
    :class:`~autopar_opt.core.memory_budget.MemoryBudget`): a model past it is not made
    (:class:`~autopar_opt.core.memory_budget.OverBudget`); the rounds stop there with the
    best plan and bound so far, and the message says why."""
    if cutoff is not None:
        solver_options = {**backend.cutoff_options(cutoff), **(solver_options or {})}
    t0 = time.perf_counter()
    chain = block_chain(tables)[0]
    layouts = chain.num_layouts
    if start is not None and not isinstance(start, Assignment):
        try:
            start = start_assignment(tables, start)
        except FormulationError:
            start = None
    floors = stage_floors(tables, chain)
    exact = min(exact_start, layouts)
    best, best_t, bound, res, rounds = None, float("inf"), float("-inf"), None, 0
    timings: dict[str, float] = {"floors": time.perf_counter() - t0}
    for cand in (start, split_plan(tables, chain, floors)):
        # the split heuristic packs stored memory only: keep it if it fits with its working sets
        if cand is not None and fits(tables, cand) and plan_time(tables, cand) < best_t:
            best, best_t = cand, plan_time(tables, cand)
    if time_limit_s is not None and time.perf_counter() - t0 >= time_limit_s:
        # the floors took the whole share: the best plan so far, no bound
        term = Termination.feasible if best is not None else Termination.time_limit_no_solution
        return SolveResult(termination=term, primal=None if best is None else best_t,
                           lower_bound=float("-inf"), wall_time_s=time.perf_counter() - t0,
                           solver=backend.name, solver_version=backend.version(),
                           message="block MILP: time limit reached before the model was solved",
                           timings=timings), best
    proven = False
    refused = ""
    while True:
        rounds += 1
        try:
            form = build_blocks(tables, exact_upto=exact, floors=floors, ub=best_t, budget=budget)
        except OverBudget as exc:
            if res is None:            # not even the first model: the best plan, no bound
                term = Termination.feasible if best is not None else Termination.time_limit_no_solution
                return SolveResult(termination=term, primal=None if best is None else best_t,
                                   lower_bound=float("-inf"), wall_time_s=time.perf_counter() - t0,
                                   solver=backend.name, solver_version=backend.version(),
                                   message=str(exc), timings=timings), best
            refused = str(exc)
            break
        if best is not None:
            form.set_warm_start(best)
        left = None if time_limit_s is None else max(time_limit_s - (time.perf_counter() - t0), 0.05)
        res = backend.solve_model(form.matrix, ProblemClass.milp, time_limit_s=left, rel_gap=rel_gap,
                                  warm_start=form.matrix.start is not None, solver_options=solver_options)
        for key, val in res.timings.items():
            timings[key] = timings.get(key, 0.0) + val
        if res.termination is Termination.infeasible:
            if best is None:   # the relaxation, unrestricted, has no plan: none has
                return res.with_(wall_time_s=time.perf_counter() - t0), None
            # the incumbent fits the restricted model, so this is round-off or a
            # solver failure: keep the plan and the bounds proven so far, claim nothing
            break
        bound = max(bound, res.lower_bound)
        asg = form.invert(res)
        got = plan_time(tables, asg) if asg is not None else float("inf")
        if got < best_t:
            best, best_t = asg, got
        relaxed = res.has_solution and form.uses_relaxed(res.solution)
        # HiGHS proved this model optimal (to its gap tolerances) and the model was
        # exact where the plan lies: the plan's time is the model's optimum
        proven = (res.termination is Termination.optimal and not relaxed
                  and res.primal is not None and got <= min(best_t, res.primal * (1 + 1e-9)))
        out_of_time = time_limit_s is not None and time.perf_counter() - t0 >= time_limit_s
        beyond = cutoff is not None and bound >= cutoff - rel_gap * abs(cutoff)
        if proven or beyond or _closed(best_t, bound, rel_gap) or exact >= layouts or out_of_time:
            break
        exact += 1
    bound = clamp_to_primal(bound, None if best is None else best_t, "the block MILP")
    if best is None:
        term = res.termination
    else:
        term = Termination.optimal if proven or _closed(best_t, bound, rel_gap) else Termination.feasible
    msg = "; ".join(m for m in (f"block MILP: {rounds} model(s), exact patterns up to {exact} "
                                f"layouts", res.message, refused) if m)
    return res.with_(termination=term, primal=None if best is None else best_t, lower_bound=bound,
                     wall_time_s=time.perf_counter() - t0, message=msg, solution=None,
                     timings=timings), best


def _closed(primal: float, bound: float, rel_gap: float) -> bool:
    return primal < float("inf") and primal - bound <= (rel_gap + 1e-12) * abs(primal)
