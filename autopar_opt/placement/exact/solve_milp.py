"""Run the placement MILP through the solver registry (HiGHS default, Gurobi/SCIP by name).

HiGHS takes the :class:`~autopar_opt.core.matrix.MatrixForm` directly;
Gurobi and SCIP backends solve Pyomo models, so the matrix is wrapped in one
(:func:`matrix_to_pyomo`, a plain ``Var``/``Constraint`` copy of the rows).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autopar_opt.placement.condense import Condensed
from autopar_opt.placement.evaluate import evaluate_placement
from autopar_opt.placement.problem import PlacementProblem
from autopar_opt.core.matrix import MatrixForm
from autopar_opt.solvers.registry import check_accepts, get_backend
from autopar_opt.core.result import ProblemClass


def matrix_to_pyomo(form: MatrixForm) -> Any:
    """A Pyomo model with the same columns (in order) and rows as ``form``."""
    import pyomo.environ as pyo
    m = pyo.ConcreteModel()
    n = form.num_cols
    m.x = pyo.Var(range(n))
    for j in range(n):
        v = m.x[j]
        v.domain = pyo.Integers if form.integrality[j] else pyo.Reals
        v.setlb(None if np.isinf(form.col_lo[j]) else float(form.col_lo[j]))
        v.setub(None if np.isinf(form.col_hi[j]) else float(form.col_hi[j]))
        if form.start is not None:
            v.set_value(float(form.start[j]), skip_validation=True)
    a = form.A.tocsr()
    m.c = pyo.ConstraintList()
    for i in range(form.num_rows):
        cols = a.indices[a.indptr[i]:a.indptr[i + 1]]
        vals = a.data[a.indptr[i]:a.indptr[i + 1]]
        expr = sum(float(c) * m.x[int(j)] for j, c in zip(cols, vals))
        lo = None if np.isinf(form.row_lo[i]) else float(form.row_lo[i])
        hi = None if np.isinf(form.row_hi[i]) else float(form.row_hi[i])
        m.c.add(pyo.inequality(lo, expr, hi) if lo is not None and hi is not None and lo != hi
                else (expr == lo if lo is not None and lo == hi
                      else (expr >= lo if lo is not None else expr <= hi)))
    m.obj = pyo.Objective(expr=sum(float(form.c[j]) * m.x[j] for j in np.flatnonzero(form.c))
                          + form.offset)
    m.cols = [m.x[j] for j in range(n)]
    return m


def run_milp(problem: PlacementProblem, cond: Condensed, objective: str, contiguous: bool,
             solver: str, time_limit_s: float | None, rel_gap: float,
             start_assign: np.ndarray | None) -> tuple[float, np.ndarray | None, float, dict]:
    """Solve; returns (value of the evaluated placement, assignment, proven bound, info)."""
    from autopar_opt.placement.exact.milp import build_maxload_milp, start_vector
    if objective == "latency":
        from autopar_opt.placement.exact.latency_milp import build_latency_milp as build
    else:
        build = build_maxload_milp
    backend = get_backend(solver)
    check_accepts(backend, ProblemClass.milp)
    if objective == "latency":
        big = None
        if start_assign is not None:
            big = evaluate_placement(problem, start_assign, objective="latency").latency
        milp = build(cond, contiguous=contiguous, big_m=big if big and np.isfinite(big) else None)
    else:
        milp = build(cond, contiguous=contiguous)
    if start_assign is not None and objective == "max-load":
        unit_dev = start_assign[np.array([mem[0] for mem in cond.members])]
        milp.form.start = start_vector(milp, cond, unit_dev)
    elif start_assign is not None and big is not None and np.isfinite(big):
        from autopar_opt.placement.exact.latency_milp import latency_start
        milp.form.start = latency_start(milp, problem, start_assign)
    info: dict = {"milp_solver": backend.name, "milp_columns": milp.form.num_cols,
                  "milp_rows": milp.form.num_rows}
    if backend.name == "highs":
        res = backend.solve_model(milp.form, ProblemClass.milp, time_limit_s=time_limit_s,
                                  rel_gap=rel_gap, warm_start=start_assign is not None)
        sol = res.solution
    else:
        model = matrix_to_pyomo(milp.form)
        res = backend.solve_model(model, ProblemClass.milp, time_limit_s=time_limit_s,
                                  rel_gap=rel_gap, warm_start=start_assign is not None)
        sol = (np.array([v.value if v.value is not None else 0.0 for v in model.cols])
               if res.has_solution else None)
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
