"""Exact dynamic-programming fallback (docs/DESIGN.md §6).

:func:`solve_dp` picks the method from the shape of the problem and returns
the project's one :class:`~autopar_opt.core.result.SolveResult`:

- chain graph, any ``pp``: exact label DP (:mod:`autopar_opt.solvers.dp.chain`);
- DAG, ``pp == 1``: exact PaSE-style DP (:mod:`autopar_opt.solvers.dp.dag`);
- DAG, ``pp > 1``: the chain DP over the fixed topological order, with skip
  edges left out of the search and the plan re-priced exactly: a heuristic
  (``termination=heuristic``, ``lower_bound=-inf``) — unless it proves that
  no plan fits in memory, which it can (memory does not depend on edges).
"""

from __future__ import annotations

import math
import time

from autopar_opt.cost.tables import CostTables
from autopar_opt.solvers.dp.chain import DPTimeout, solve_chain
from autopar_opt.solvers.dp.common import (Assignment, fit_limit, fits, infeasible_message, iteration_time, least_memory,
                                   simple_lower_bound)
from autopar_opt.solvers.dp.dag import solve_dag_single_stage
from autopar_opt.core.result import SolveResult, Termination

SOLVER_NAME = "dp"


def _version() -> str:
    from autopar_opt import __version__
    return f"autopar-dp {__version__}"


def solve_dp(tables: CostTables, time_limit_s: float | None = None,
             rel_gap: float = 0.0, cutoff: float = math.inf, part: str = "all") -> SolveResult:
    """Solve one outer configuration's tables; never raises on infeasible or timeout.
    ``rel_gap`` (under a target's uniformity rule only) lets the key families close
    within that relative gap (:func:`~autopar_opt.solvers.dp.uniform.solve_uniform`);
    ``cutoff`` (the same rule only) is the value of a plan the caller holds: the key
    families close against it too, and a configuration that cannot beat it by more
    than ``rel_gap`` answers with that proven bound (and no plan, or a worse one).
    ``part`` (the same rule only): the key families searched
    (:func:`~autopar_opt.solvers.dp.uniform.searched_families`; ``all``: the target's space)."""
    start = time.monotonic()
    deadline = None if time_limit_s is None else start + time_limit_s
    chain = tables.graph.is_chain()
    method = "chain-label-dp" if chain else ("pase-dp" if tables.pp == 1 else "fixed-order-heuristic-dp")

    def result(term: Termination, asg: Assignment | None, lb: float, msg: str) -> SolveResult:
        primal = None
        if asg is not None:
            primal = iteration_time(tables, asg)
            if term is Termination.optimal:
                lb = primal
        wall = time.monotonic() - start
        return SolveResult(term, primal, lb, wall, SOLVER_NAME, _version(), f"{method}: {msg}",
                           asg, {"dp_s": wall})

    if tables.pp > tables.num_layers:
        return result(Termination.infeasible, None, math.inf, infeasible_message(tables))
    empty = [tables.graph.layers[u].name for u, s in enumerate(tables.strategies) if len(s) == 0]
    if empty:
        return result(Termination.infeasible, None, math.inf,
                      f"no strategy of the search space is valid for layer(s) {empty[:5]} on "
                      f"{tables.devices_per_stage} devices per stage with {tables.microbatch_samples} "
                      f"samples per micro-batch")
    if least_memory(tables) > fit_limit(tables):   # exact proof, O(n²·pp)
        return result(Termination.infeasible, None, math.inf, infeasible_message(tables))
    fallback = decomposition = False
    try:
        if not chain and tables.pp == 1:
            asg, _ = solve_dag_single_stage(tables, deadline)
            exhaustive, bound = True, -math.inf
        elif tables.uniform_keys is not None or tables.fixed_stage is not None:
            from autopar_opt.solvers.dp.uniform import solve_uniform
            method = "chain-label-dp (uniform keys)"
            out = solve_uniform(tables, deadline, rel_gap=rel_gap, cutoff=cutoff, part=part)
            asg, exhaustive, bound = out.assignment, out.exhaustive, out.lower_bound
            fallback = out.fallback
        else:
            out = solve_chain(tables, deadline)
            asg, exhaustive, bound = out.assignment, out.exhaustive, out.lower_bound
            fallback = out.fallback
            decomposition = out.decomposition
    except DPTimeout:       # the PaSE DP (DAG, pp = 1) cut short
        return result(Termination.time_limit_no_solution, None,
                      simple_lower_bound(tables) if (chain or tables.pp == 1) else -math.inf,
                      f"time limit {time_limit_s} s reached before a plan was found")
    if asg is None:
        if exhaustive and (tables.uniform_keys is not None or tables.fixed_stage is not None):
            target = tables.space.runs_on if tables.space is not None else None
            who = target.framework if target is not None else "the target"
            return result(Termination.infeasible, None, math.inf,
                          f"no plan {who} can run fits in memory (one tp/cp/sp/ZeRO/ep/etp/"
                          f"recompute setting for the model{', its fixed stage split' if tables.fixed_stage else ''})")
        if exhaustive:
            return result(Termination.infeasible, None, math.inf, infeasible_message(tables))
        if bound >= cutoff * (1 - rel_gap) * (1 - 1e-12):
            return result(Termination.time_limit_no_solution, None, bound,
                          f"no plan of this configuration beats the incumbent {cutoff:.6g} s by "
                          f"more than the gap (proven bound {bound:.6g} s)")
        return result(Termination.time_limit_no_solution, None,
                      max(simple_lower_bound(tables), bound) if chain else -math.inf,
                      "time limit reached")
    if not fits(tables, asg):   # defensive: the DP only builds plans within capacity
        return result(Termination.error, None, -math.inf, "internal error: decoded plan exceeds memory")
    if not chain and tables.pp > 1:
        return result(Termination.heuristic, asg, -math.inf,
                      "DAG with pp > 1: skip edges not searched, plan re-priced exactly; not proven optimal")
    if not exhaustive and bound >= cutoff * (1 - rel_gap) * (1 - 1e-12):
        return result(Termination.feasible, asg, bound,
                      f"no plan of this configuration beats the incumbent {cutoff:.6g} s by more "
                      f"than the gap (proven bound {bound:.6g} s); its best plan found is kept")
    if not exhaustive:
        source = ("the least-memory plan (no beam pass finished in time)" if fallback
                  else "incumbent from the stage decomposition" if decomposition
                  else "incumbent from the beam passes")
        return result(Termination.feasible, asg, max(simple_lower_bound(tables), bound),
                      f"time limit {time_limit_s} s reached; {source}, bound from the "
                      f"deepening passes")
    return result(Termination.optimal, asg, math.inf, "exact")


__all__ = ["solve_dp"]
