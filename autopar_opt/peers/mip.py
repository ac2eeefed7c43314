"""Solve a :class:`MatrixForm` built for a peer problem with any registered MIP backend.

HiGHS takes the matrix directly (numpy arrays into highspy, the fast path of
``shared/TOOLCHAIN.md``); Gurobi and SCIP receive a Pyomo model with one
variable per column and one constraint per row, built from the same matrix,
so every backend solves exactly the same program.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from autopar_opt.core.matrix import MatrixForm
from autopar_opt.solvers.registry import get_backend
from autopar_opt.core.result import ProblemClass, SolveResult


def _pyomo_model(form: MatrixForm) -> tuple[Any, Any]:
    import pyomo.environ as pyo

    m = pyo.ConcreteModel()
    cols = range(form.num_cols)

    def bounds(_m, j):
        lo, hi = form.col_lo[j], form.col_hi[j]
        return (None if math.isinf(lo) else float(lo), None if math.isinf(hi) else float(hi))

    def domain(_m, j):
        return pyo.Integers if form.integrality[j] else pyo.Reals

    m.x = pyo.Var(cols, bounds=bounds, domain=domain)
    csr = form.A.tocsr()
    m.rows = pyo.ConstraintList()
    for r in range(form.num_rows):
        lo, hi = form.row_lo[r], form.row_hi[r]
        sl = slice(csr.indptr[r], csr.indptr[r + 1])
        expr = sum(float(a) * m.x[int(j)] for j, a in zip(csr.indices[sl], csr.data[sl]))
        if lo == hi:
            m.rows.add(expr == float(lo))
        else:
            m.rows.add(pyo.inequality(None if math.isinf(lo) else float(lo), expr,
                                      None if math.isinf(hi) else float(hi)))
    nz = np.flatnonzero(form.c)
    m.obj = pyo.Objective(expr=sum(float(form.c[j]) * m.x[int(j)] for j in nz) + form.offset)
    if form.start is not None:
        for j in cols:
            m.x[j].set_value(float(form.start[j]), skip_validation=True)
    return m, m.x


def solve_matrix(form: MatrixForm, solver: str, time_limit_s: float | None,
                 rel_gap: float) -> tuple[SolveResult, np.ndarray | None]:
    """Solve ``form`` (a MILP) with backend ``solver``; returns the result and the column vector."""
    backend = get_backend(solver)
    if solver == "highs":
        res = backend.solve_model(form, ProblemClass.milp, time_limit_s=time_limit_s, rel_gap=rel_gap,
                                  warm_start=form.start is not None)
        return res, (None if res.solution is None else np.asarray(res.solution, dtype=float))
    model, x = _pyomo_model(form)
    res = backend.solve_model(model, ProblemClass.milp, time_limit_s=time_limit_s, rel_gap=rel_gap,
                              warm_start=form.start is not None)
    if not res.has_solution:
        return res, None
    return res, np.array([float(x[j].value or 0.0) for j in range(form.num_cols)])
