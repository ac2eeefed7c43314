"""One path from a :class:`MatrixForm` to any MILP backend (issue 30: one optimisation path).

Every problem kind that builds its MILP as a matrix (placement, the peers'
Piper and PaSE programs) hands it to :func:`solve_matrix`. The backend is
chosen by what it declares, never by its name: a backend with
:attr:`Feature.matrix_input` (HiGHS) takes the numpy arrays directly, any
other one gets a Pyomo model written by :func:`matrix_to_pyomo`, one
variable per column and one constraint per row, so every backend solves the
same program. :func:`matrix_backend` resolves ``auto`` (or None) to the
first available backend of the registry that takes a matrix.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from autopar_opt.core.matrix import MatrixForm
from autopar_opt.core.result import ProblemClass, SolveResult
from autopar_opt.solvers.base import Backend, Feature, SolverUnavailable
from autopar_opt.solvers.registry import backend_names, check_accepts, get_backend


def matrix_backend(name: str | None = None) -> Backend:
    """Backend ``name``, or for ``auto``/None the first available one (registry
    order, default first) that solves MILPs from a matrix; SolverUnavailable
    when there is none."""
    if name is not None and name.strip().lower() != "auto":
        backend = get_backend(name)
        check_accepts(backend, ProblemClass.milp)
        return backend
    for candidate in backend_names():
        backend = get_backend(candidate)
        if ProblemClass.milp in backend.accepts and Feature.matrix_input in backend.features \
                and backend.available()[0]:
            return backend
    raise SolverUnavailable("no MILP backend that takes a matrix is installed (pip install highspy)")


def matrix_to_pyomo(form: MatrixForm) -> Any:
    """A Pyomo model with the columns of ``form`` in order (``model.x[j]``, also listed in
    ``model.cols``) and one constraint per row; the warm start, when set, as initial values."""
    import pyomo.environ as pyo

    m = pyo.ConcreteModel()
    n = form.num_cols

    def bounds(_m: Any, j: int) -> tuple[float | None, float | None]:
        lo, hi = form.col_lo[j], form.col_hi[j]
        return (None if math.isinf(lo) else float(lo), None if math.isinf(hi) else float(hi))

    def domain(_m: Any, j: int) -> Any:
        return pyo.Integers if form.integrality[j] else pyo.Reals

    m.x = pyo.Var(range(n), bounds=bounds, domain=domain)
    csr = form.A.tocsr()
    m.rows = pyo.ConstraintList()
    for r in range(form.num_rows):
        sl = slice(csr.indptr[r], csr.indptr[r + 1])
        expr = sum(float(a) * m.x[int(j)] for j, a in zip(csr.indices[sl], csr.data[sl]))
        lo, hi = form.row_lo[r], form.row_hi[r]
        if lo == hi:
            m.rows.add(expr == float(lo))
        else:
            m.rows.add(pyo.inequality(None if math.isinf(lo) else float(lo), expr,
                                      None if math.isinf(hi) else float(hi)))
    nz = np.flatnonzero(form.c)
    m.obj = pyo.Objective(expr=sum(float(form.c[j]) * m.x[int(j)] for j in nz) + form.offset)
    if form.start is not None:
        for j in range(n):
            m.x[j].set_value(float(form.start[j]), skip_validation=True)
    m.cols = [m.x[j] for j in range(n)]
    return m


def solve_matrix(form: MatrixForm, backend: Backend, *, time_limit_s: float | None,
                 rel_gap: float, cutoff: float | None = None) -> tuple[SolveResult, np.ndarray | None]:
    """Solve ``form`` (a MILP) with ``backend``; the result and the column vector (None
    without a solution). ``form.start``, when set, is the warm start; ``cutoff`` (the
    value of a plan known elsewhere) is handed to a backend declaring
    :attr:`Feature.objective_cutoff` (plans at or above it do not matter)."""
    check_accepts(backend, ProblemClass.milp)
    ok, why = backend.available()
    if not ok:
        raise SolverUnavailable(why)
    warm = form.start is not None
    options = (backend.cutoff_options(cutoff)
               if cutoff is not None and Feature.objective_cutoff in backend.features else None)
    if Feature.matrix_input in backend.features:
        res = backend.solve_model(form, ProblemClass.milp, time_limit_s=time_limit_s,
                                  rel_gap=rel_gap, warm_start=warm, solver_options=options)
        return res, (None if res.solution is None else np.asarray(res.solution, dtype=float))
    model = matrix_to_pyomo(form)
    res = backend.solve_model(model, ProblemClass.milp, time_limit_s=time_limit_s,
                              rel_gap=rel_gap, warm_start=warm, solver_options=options)
    if not res.has_solution:
        return res, None
    return res, np.array([float(v.value) if v.value is not None else 0.0 for v in model.cols])
