"""The one set of rules for bounds and status (autopar_opt.core.bounds), hand-made cases."""

from __future__ import annotations

import math

import pytest

from autopar_opt.core.bounds import (Bounds, SearchStatus, Status, reaches, search_status,
                                      strictly_better, within_gap)
from autopar_opt.core.result import SolveResult, Termination


def _res(term, primal, lower) -> SolveResult:
    return SolveResult(term, primal, lower, 1.0, "highs", "x")


def test_merge_keeps_the_better_plan_and_the_larger_bound_with_its_source():
    mip = Bounds(12.0, 9.0, False, "highs")
    dp = Bounds(11.0, 9.5, False, "dp")
    m = mip.merge(dp)
    assert (m.primal, m.lower, m.source) == (11.0, 9.5, "dp")
    assert dp.merge(mip) == m                      # symmetric on distinct values
    # a bound never exceeds the plan (round-off from two methods)
    assert Bounds(10.0, 9.0).merge(Bounds(None, 10.0 + 1e-9, True, "dp")).lower == 10.0
    # equal plans: self's plan value is kept; ties on the bound keep self's source
    assert Bounds(10.0, 9.0, source="a").merge(Bounds(10.0, 9.0, source="b")).source == "a"


def test_bounds_of_a_result():
    assert Bounds.of(_res(Termination.infeasible, None, -math.inf)).is_infeasible
    opt = Bounds.of(_res(Termination.optimal, 10.0, 9.995))
    assert opt.exhaustive and opt.status(1e-9) is Status.optimal   # optimal at the solver's tolerance
    tl = Bounds.of(_res(Termination.feasible, 10.0, 9.0))
    assert not tl.exhaustive and tl.status(1e-3) is Status.feasible
    assert tl.status(0.2) is Status.optimal                        # gap 10% within 20%


@pytest.mark.parametrize("bounds, solver, status", [
    (Bounds(None, math.inf, True), None, Status.infeasible),
    (Bounds(None, 5.0), None, Status.not_solved),
    (Bounds(None, -math.inf), None, Status.not_solved),
    (Bounds(10.0, -math.inf), None, Status.heuristic),
    (Bounds(10.0, 9.0), Termination.heuristic, Status.heuristic),   # a weak analytic bound
    (Bounds(10.0, 9.0), None, Status.feasible),
    (Bounds(10.0, 10.0 * (1 - 1e-3)), None, Status.optimal),        # exactly the target gap
    (Bounds(10.0, 10.0), Termination.error, Status.error),
])
def test_configuration_status_is_derived(bounds, solver, status):
    assert bounds.status(1e-3, solver) is status


def test_round_off_rules():
    assert within_gap(1.0, 1.0 - 1e-3 - 1e-13, 1e-3) and not within_gap(1.0, 0.99, 1e-3)
    assert not within_gap(None, 0.0, 1.0)
    assert strictly_better(1.0, None) and not strictly_better(None, 1.0)
    assert strictly_better(0.9, 1.0) and not strictly_better(1.0 - 1e-14, 1.0)
    assert reaches(1.0 - 1e-14, 1.0) and not reaches(0.99, 1.0) and not reaches(5.0, None)


def test_search_status_is_derived():
    assert search_status(True, 10.0, 9.999, True, False, 1e-3) is SearchStatus.optimal
    assert search_status(True, 10.0, 9.0, True, False, 1e-3) is SearchStatus.feasible
    assert search_status(True, 10.0, 10.0, False, False, 1e-3) is SearchStatus.feasible
    assert search_status(False, None, math.inf, True, True, 1e-3) is SearchStatus.infeasible
    assert search_status(False, None, 3.0, False, False, 1e-3) is SearchStatus.no_plan


def test_status_prints_as_its_plan_json_value():
    assert f"{Status.not_solved}" == str(Status.not_solved) == "not_solved"
    assert f"{SearchStatus.infeasible:>12}" == "  infeasible"
