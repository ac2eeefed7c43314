"""The one matrix path (solvers/matrix.py): every MILP backend solves the same MatrixForm.

Instance (hand-derived): max 5a + 4b + 3c  s.t.  2a + 3b + c <= 5,  a + b <= 1.5 (a, b, c
binary, written as min of the negated objective) -> a = 1, c = 1, b = 0: value -8.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from autopar_opt.core.matrix import MatrixForm
from autopar_opt.core.result import Termination
from autopar_opt.solvers.base import Feature
from autopar_opt.solvers.matrix import matrix_backend, matrix_to_pyomo, solve_matrix
from autopar_opt.solvers.registry import backend_class, backend_names, get_backend


def _knapsack(start: bool = False) -> MatrixForm:
    A = sp.csr_array(np.array([[2.0, 3.0, 1.0], [1.0, 1.0, 0.0]]))
    return MatrixForm(c=np.array([-5.0, -4.0, -3.0]), A=A, row_lo=np.array([-np.inf, -np.inf]),
                      row_hi=np.array([5.0, 1.5]), col_lo=np.zeros(3), col_hi=np.ones(3),
                      integrality=np.ones(3, dtype=bool), offset=0.0, columns=["a", "b", "c"],
                      start=np.array([0.0, 1.0, 0.0]) if start else None)


MILP_BACKENDS = [n for n in backend_names() if "MILP" in {p.value for p in backend_class(n).accepts}]


@pytest.mark.parametrize("name", MILP_BACKENDS)
@pytest.mark.parametrize("start", [False, True])
def test_every_milp_backend_solves_the_same_matrix(name, start):
    backend = get_backend(name)
    ok, why = backend.available()
    if not ok:
        pytest.skip(why)
    res, x = solve_matrix(_knapsack(start), backend, time_limit_s=30, rel_gap=1e-9)
    assert res.termination is Termination.optimal
    assert res.primal == pytest.approx(-8.0)
    assert np.allclose(x, [1.0, 0.0, 1.0])


def test_auto_takes_a_backend_that_declares_matrix_input():
    backend = matrix_backend("auto")
    assert Feature.matrix_input in backend.features and backend.available()[0]
    assert matrix_backend(None).name == backend.name


def test_the_pyomo_writer_keeps_columns_rows_bounds_and_start():
    form = _knapsack(start=True)
    m = matrix_to_pyomo(form)
    assert [v.lb for v in m.cols] == [0, 0, 0] and [v.ub for v in m.cols] == [1, 1, 1]
    assert all(v.is_integer() for v in m.cols) and [v.value for v in m.cols] == [0, 1, 0]
    assert len(m.rows) == form.num_rows
    body = [str(c.body) for c in m.rows.values()]
    assert "2.0*x[0] + 3.0*x[1] + x[2]" in body[0].replace("1.0*x", "x")
