"""Run the placement MILP through the one matrix path of the solvers
(:func:`autopar_opt.solvers.matrix.solve_matrix`): the backend is chosen by its
declared features (``auto``: the first installed backend that takes a matrix),
a backend without :attr:`~autopar_opt.solvers.base.Feature.matrix_input` gets
the Pyomo model of the same rows.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from autopar_opt.placement.condense import Condensed
from autopar_opt.placement.evaluate import evaluate_placement
from autopar_opt.placement.problem import PlacementProblem
from autopar_opt.core.deadline import PhaseDeadline, deadline_check
from autopar_opt.core.matrix_builder import MatrixCounter
from autopar_opt.core.memory_budget import MemoryBudget, ModelSize
from autopar_opt.solvers.matrix import matrix_backend, solve_matrix


def milp_size(cond: Condensed, objective: str, contiguous: bool, big_m: float | None = None,
              check: Callable[[], None] | None = None) -> ModelSize:
    """Rows, columns and non-zeros of the MILP :func:`run_milp` would build, counted by
    running the same build function on a :class:`MatrixCounter` (nothing is stored);
    ``check`` is called at every block of rows (it raises to stop the count)."""
    from autopar_opt.placement.exact.milp import build_maxload_milp

    counter = MatrixCounter(check)
    if objective == "latency":
        from autopar_opt.placement.exact.latency_milp import build_latency_milp
        build_latency_milp(cond, contiguous=contiguous, big_m=big_m, builder=counter)
    else:
        build_maxload_milp(cond, contiguous=contiguous, builder=counter)
    return counter.size()


def run_milp(problem: PlacementProblem, cond: Condensed, objective: str, contiguous: bool,
             solver: str, time_limit_s: float | None, rel_gap: float,
             start_assign: np.ndarray | None, memory_budget: MemoryBudget | None = None
             ) -> tuple[float, np.ndarray | None, float, dict]:
    """Solve; returns (value of the evaluated placement, assignment, proven bound, info).
    The model's size is counted before it is built (:func:`milp_size`); past
    ``memory_budget`` (default: :meth:`MemoryBudget.default`) it is not built
    (``info["milp_refused"]`` says why).

    ``time_limit_s`` covers counting and building the model too: both check the
    deadline at every block of rows (:class:`~autopar_opt.core.matrix_builder.MatrixBuilder`'s
    ``check``), and one that runs out stops there with ``info["milp_refused"]`` saying
    the MILP was not built in time (the caller keeps its best placement so far)."""
    from autopar_opt.placement.exact.milp import build_maxload_milp
    began = time.perf_counter()
    if objective == "latency":
        from autopar_opt.placement.exact.latency_milp import build_latency_milp as build
    else:
        build = build_maxload_milp
    backend = matrix_backend(solver)
    big = None
    if objective == "latency" and start_assign is not None:
        big = evaluate_placement(problem, start_assign, objective="latency").latency
    big = big if big and np.isfinite(big) else None
    budget = MemoryBudget.default() if memory_budget is None else memory_budget
    check = deadline_check(None if time_limit_s is None else began + time_limit_s)
    try:
        return _build_and_solve(problem, cond, objective, contiguous, backend, time_limit_s,
                                rel_gap, start_assign, budget, big, build, check, began)
    except PhaseDeadline:
        built_s = time.perf_counter() - began
        return np.inf, None, -np.inf, {
            "milp_solver": backend.name,
            "milp_refused": (f"the time limit ran out while building the MILP ({built_s:.2f} s "
                             f"of {time_limit_s:.2f} s); not built, the placement is the best "
                             "found before it")}


def _build_and_solve(problem, cond, objective, contiguous, backend, time_limit_s, rel_gap,
                     start_assign, budget, big, build, check, began):
    """:func:`run_milp`'s count, build and solve; ``check`` raises PhaseDeadline."""
    from autopar_opt.core.matrix_builder import MatrixBuilder
    from autopar_opt.placement.exact.milp import start_vector

    size = milp_size(cond, objective, contiguous, big, check)
    info: dict = {"milp_solver": backend.name, "milp_columns": size.cols, "milp_rows": size.rows,
                  "milp_nonzeros": size.nonzeros}
    refusal = budget.refuses(size, "the MILP")
    if refusal:                              # counted, nothing built
        info["milp_refused"] = refusal
        return np.inf, None, -np.inf, info
    if objective == "latency":
        milp = build(cond, contiguous=contiguous, big_m=big, builder=MatrixBuilder(check))
    else:
        milp = build(cond, contiguous=contiguous, builder=MatrixBuilder(check))
    if start_assign is not None and objective == "max-load":
        unit_dev = start_assign[np.array([mem[0] for mem in cond.members])]
        milp.form.start = start_vector(milp, cond, unit_dev)
    elif start_assign is not None and big is not None:
        from autopar_opt.placement.exact.latency_milp import latency_start
        milp.form.start = latency_start(milp, problem, start_assign)
    info.update(milp_columns=milp.form.num_cols, milp_rows=milp.form.num_rows,
                milp_nonzeros=int(milp.form.A.nnz))
    if time_limit_s is not None:
        # the limit is the MILP's whole part: counting and building it took some of it
        # (QA round 12: 5.5 s of building on 2 x 8,192 devices came on top of the limit)
        built_s = time.perf_counter() - began
        if built_s >= time_limit_s:
            info["milp_refused"] = (f"the time limit ran out while building the MILP "
                                    f"({built_s:.2f} s of {time_limit_s:.2f} s)")
            return np.inf, None, -np.inf, info
        time_limit_s -= built_s
    res, sol = solve_matrix(milp.form, backend, time_limit_s=time_limit_s, rel_gap=rel_gap)
    info.update(milp_status=res.termination.value, milp_primal=res.primal,
                milp_bound=res.lower_bound, milp_time_s=res.wall_time_s, milp_message=res.message)
    if sol is None:
        return np.inf, None, res.lower_bound, info
    decoded = milp.decode(np.asarray(sol), cond)
    assign = decoded if getattr(milp, "node_level", False) else cond.expand(decoded)
    m = evaluate_placement(problem, assign, objective=objective, contiguous=contiguous)
    if not m.feasible:
        info["milp_decode_violations"] = m.violations
        return np.inf, None, res.lower_bound, info
    return m.value, assign, res.lower_bound, info
