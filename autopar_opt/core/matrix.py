"""Solver-neutral matrix form of a linear (MI)LP: data only, no solver import.

``min c·x + offset  s.t.  row_lo <= A x <= row_hi,  col_lo <= x <= col_hi,
x_j integer where integrality[j]``. ``columns`` names each column (the Pyomo
variable's name) and ``var_refs`` holds the Pyomo variables in column order
(``None`` when the matrix was built without a model), so a backend can load
a solution back with :func:`load_values` or a formulation can decode the raw
vector directly. ``start`` is an explicit warm-start vector in column order
(a backend prefers it to the values held by ``var_refs``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import time

import numpy as np
import scipy.sparse as sp


@dataclass
class MatrixForm:
    """A linear model in numpy/scipy arrays (see module docstring)."""

    c: np.ndarray
    A: sp.csr_array
    row_lo: np.ndarray
    row_hi: np.ndarray
    col_lo: np.ndarray
    col_hi: np.ndarray
    integrality: np.ndarray          # bool per column
    offset: float
    columns: list[str]
    var_refs: list[Any] | None = None
    row_names: list[str] = field(default_factory=list)
    compile_s: float = 0.0           # seconds spent producing this form
    start: np.ndarray | None = None  # a warm-start column vector (feasible), if any

    @property
    def num_rows(self) -> int:
        return int(self.A.shape[0])

    @property
    def num_cols(self) -> int:
        return int(self.A.shape[1])

    @property
    def num_integer(self) -> int:
        return int(np.count_nonzero(self.integrality))

    def objective(self, x: np.ndarray) -> float:
        """``c·x + offset`` for a column vector ``x``."""
        return float(self.c @ x + self.offset)


def load_values(form: MatrixForm, x: np.ndarray) -> None:
    """Write a solution vector into the Pyomo variables of ``form``."""
    if form.var_refs is None:
        raise ValueError("this matrix form has no model variables to load values into")
    for var, val in zip(form.var_refs, x):
        if var.is_integer():
            val = round(float(val))
        var.set_value(float(val), skip_validation=True)


def compile_matrix(model: Any) -> MatrixForm:
    """Compile a linear Pyomo model to :class:`MatrixForm` (Pyomo's standard-form
    compiler in mixed form; fixed variables folded into bounds and offset)."""
    from pyomo.repn.plugins.standard_form import LinearStandardFormCompiler  # lazy: data module
    start = time.perf_counter()
    info = LinearStandardFormCompiler().write(model, mixed_form=True)
    rhs = np.asarray(info.rhs, dtype=float)
    sense = np.array([mult for _, mult in info.rows], dtype=int)
    row_lo = np.where(sense == 1, -np.inf, rhs)
    row_hi = np.where(sense == -1, np.inf, rhs)
    cols = list(info.columns)
    lo = np.array([-np.inf if v.lb is None else v.lb for v in cols], dtype=float)
    hi = np.array([np.inf if v.ub is None else v.ub for v in cols], dtype=float)
    c = np.asarray(info.c.toarray()[0] if info.c.shape[0] else np.zeros(len(cols)), dtype=float)
    return MatrixForm(c=c, A=info.A.tocsr(), row_lo=row_lo, row_hi=row_hi, col_lo=lo, col_hi=hi,
                      integrality=np.array([v.is_integer() for v in cols], dtype=bool),
                      offset=float(np.asarray(info.c_offset).ravel()[0]) if len(info.c_offset) else 0.0,
                      columns=[v.name for v in cols], var_refs=cols,
                      row_names=[f"{con.name}{'' if k == 0 else ('_ub' if k == 1 else '_lb')}"
                                 for con, k in info.rows],
                      compile_s=time.perf_counter() - start)
