"""The max-load MILP's valid inequalities never cut off a brute-force optimum.

Oracle: exhaustive enumeration of every assignment on seeded small DAGs
(:mod:`placement_cases`); the optimal placement is written as a column vector
(:func:`~autopar_opt.placement.exact.milp.start_vector`) with ``L`` set to its
evaluated max-load, and every row and column bound of the MILP, the load floor
and the used-slots-first rows included, must hold at that vector.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from support.placement_cases import random_problem
from autopar_opt.placement import evaluate_placement
from autopar_opt.placement.condense import condense
from autopar_opt.placement.exact.milp import build_maxload_milp, load_floor, start_vector

CASES = [(s, s % 3 == 0, s % 2 == 1) for s in range(8)]


def _optimum(p, contiguous: bool) -> tuple[float, np.ndarray | None]:
    """Brute force: the best feasible value and one assignment reaching it."""
    classes = sorted(set(p.color.tolist()))
    best, best_a = np.inf, None
    for choice in itertools.product(range(p.num_devices), repeat=len(classes)):
        dev = dict(zip(classes, choice))
        a = np.array([dev[int(c)] for c in p.color])
        m = evaluate_placement(p, a, contiguous=contiguous)
        if m.feasible and m.value < best - 1e-12:
            best, best_a = m.value, a
    return best, best_a


@pytest.mark.parametrize("seed,training,hetero", CASES)
@pytest.mark.parametrize("contiguous", [True, False])
def test_optimum_satisfies_every_row(seed: int, training: bool, hetero: bool,
                                     contiguous: bool) -> None:
    p = random_problem(seed, training=training, hetero=hetero, n=4 if training else None)
    best, assign = _optimum(p, contiguous)
    if assign is None:
        pytest.skip("infeasible seeded instance: no optimum to keep")
    cond = condense(p, fuse_cycles=contiguous)
    assert load_floor(cond, contiguous=contiguous) <= best * (1 + 1e-9)
    milp = build_maxload_milp(cond, contiguous=contiguous)
    sol = start_vector(milp, cond, assign[np.array([m[0] for m in cond.members])])
    sol[milp.load] = best
    f = milp.form
    assert np.all(sol >= f.col_lo - 1e-9) and np.all(sol <= f.col_hi + 1e-9)
    act = f.A @ sol
    tol = 1e-7 * (1 + np.abs(act))
    assert np.all(act >= f.row_lo - tol), np.flatnonzero(act < f.row_lo - tol)
    assert np.all(act <= f.row_hi + tol), np.flatnonzero(act > f.row_hi + tol)
