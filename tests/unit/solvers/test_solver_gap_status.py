"""A solver's "optimal" is optimal only within the gap we asked for (review finding:
HiGHS returned model status optimal 4.5e-6 above its own dual bound at
``mip_rel_gap`` 1e-9).

The mapping of HiGHS (``solvers/highs.py::highs_result``) and of the Pyomo contrib
backends, SCIP and Gurobi (``solvers/pyomo_contrib.py::map_result``), is fed
hand-made solver answers (status, incumbent, bound); the oracle is the gap by
hand, ``(primal - bound) / |primal|``, against the requested gap plus the one
round-off allowance ``ROUND_OFF`` (1e-12). The end-to-end case (the real HiGHS
run) is ``tests/unit/formulations/test_block_milp.py::test_block_milp_equals_the_direct_milp``.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from autopar_opt.core.bounds import Bounds, Status
from autopar_opt.core.result import Termination
from autopar_opt.solvers.highs import highs_result
from autopar_opt.solvers.pyomo_contrib import map_result


class _Highs:
    """What ``highs_result`` reads from a ``highspy.Highs`` after a run."""

    def __init__(self, status: str, obj: float, bound: float, has_solution: bool = True) -> None:
        self.status, self.obj, self.bound, self.has_solution = status, obj, bound, has_solution

    def getModelStatus(self):
        return SimpleNamespace(name=self.status)

    def getInfo(self):
        return SimpleNamespace(primal_solution_status=2 if self.has_solution else 0,
                               objective_function_value=self.obj, mip_dual_bound=self.bound)

    def getSolution(self):
        return SimpleNamespace(col_value=[1.0, 0.0])


MIP = SimpleNamespace(num_integer=2)


def test_highs_optimal_beyond_the_requested_gap_is_feasible_with_its_bound():
    """incumbent 1.0, bound 1 - 4.5e-6: gap 4.5e-6 > 1e-9 asked -> feasible, bound kept;
    the configuration's status is then feasible, not optimal."""
    res = highs_result(_Highs("kOptimal", 1.0, 1.0 - 4.5e-6), MIP, "HiGHS test", 1e-9)
    assert res.termination is Termination.feasible
    assert res.primal == 1.0 and res.lower_bound == 1.0 - 4.5e-6
    assert res.gap == pytest.approx(4.5e-6, rel=1e-9)
    assert "relative gap 4.5e-06 is above the requested 1e-09" in res.message
    assert np.array_equal(res.solution, [1.0, 0.0])
    assert Bounds.of(res).status(1e-9, res.termination) is Status.feasible
    # the same answer at a requested gap of 1e-5 is optimal (4.5e-6 <= 1e-5)
    assert highs_result(_Highs("kOptimal", 1.0, 1.0 - 4.5e-6), MIP, "t", 1e-5).termination \
        is Termination.optimal


@pytest.mark.parametrize("obj,bound,rel_gap,want", [
    (2.0, 2.0, 0.0, Termination.optimal),                  # closed
    (2.0, 2.0 * (1 - 0.5e-12), 0.0, Termination.optimal),  # round-off: gap 5e-13 <= 1e-12
    (2.0, 2.0 * (1 - 3e-12), 0.0, Termination.feasible),   # gap 3e-12 > 0 + 1e-12
    (2.0, 2.0 * (1 - 1e-3), 1e-3, Termination.optimal),    # exactly the asked gap
    (2.0, 2.0 * (1 - 1.01e-3), 1e-3, Termination.feasible),
    (0.0, 0.0, 0.0, Termination.optimal),                  # zero objective, zero bound
])
def test_highs_gap_rule_by_hand(obj, bound, rel_gap, want):
    res = highs_result(_Highs("kOptimal", obj, bound), MIP, "t", rel_gap)
    assert res.termination is want and res.lower_bound == bound


def test_highs_other_statuses_are_unchanged():
    """A time limit stays feasible with its bound; an LP's optimum is its own bound;
    a MIP bound HiGHS leaves infinite with status optimal is the incumbent (unchanged
    rule of ``highs_result``)."""
    res = highs_result(_Highs("kTimeLimit", 1.0, 0.5), MIP, "t", 1e-9)
    assert res.termination is Termination.feasible and res.lower_bound == 0.5 and not res.message
    lp = highs_result(_Highs("kOptimal", 3.0, -math.inf), SimpleNamespace(num_integer=0), "t", 0.0)
    assert lp.termination is Termination.optimal and lp.lower_bound == 3.0
    mip = highs_result(_Highs("kOptimal", 3.0, math.inf), MIP, "t", 0.0)
    assert mip.termination is Termination.optimal and mip.lower_bound == 3.0


def _contrib(condition: str, obj: float | None, bound: float | None):
    """A Pyomo contrib ``Results`` as ``map_result`` reads it."""
    from pyomo.contrib.solver.common.results import TerminationCondition as TC

    loaded = []
    return SimpleNamespace(termination_condition=getattr(TC, condition), incumbent_objective=obj,
                           objective_bound=bound, timing_info=SimpleNamespace(wall_time=0.25),
                           solution_loader=SimpleNamespace(load_vars=lambda: loaded.append(1)),
                           loaded=loaded)


@pytest.mark.parametrize("label", ["scip", "gurobi"])
def test_contrib_backends_apply_the_same_rule(label):
    """SCIP and Gurobi through Pyomo: convergenceCriteriaSatisfied with incumbent 10
    and bound 9.99 (gap 1e-3) at an asked 1e-4 -> feasible with bound 9.99 (the
    incumbent still loaded); at 1e-3 -> optimal. No bound stated (Gurobi on an LP,
    ``ObjBound`` undefined) leaves the optimal status as reported."""
    raw = _contrib("convergenceCriteriaSatisfied", 10.0, 9.99)
    res = map_result(raw, label, "v", 1e-4, 1.0)
    assert res.termination is Termination.feasible and res.lower_bound == 9.99
    assert res.gap == pytest.approx(1e-3) and raw.loaded == [1]
    assert f"{label} reported optimal" in res.message
    assert map_result(_contrib("convergenceCriteriaSatisfied", 10.0, 9.99), label, "v", 1e-3,
                      1.0).termination is Termination.optimal
    nobound = map_result(_contrib("convergenceCriteriaSatisfied", 10.0, None), label, "v", 0.0, 1.0)
    assert nobound.termination is Termination.optimal
    limit = map_result(_contrib("maxTimeLimit", 10.0, 9.0), label, "v", 1e-4, 1.0)
    assert limit.termination is Termination.feasible and limit.lower_bound == 9.0


@pytest.mark.parametrize("label", ["scip", "gurobi"])
def test_a_bound_above_the_incumbent_is_discarded_not_clipped(label):
    """SCIP once reported a fleet MIQP "optimal" with incumbent 0.0934758 and dual bound
    0.0960585 (the optimum is 0.0892): clipping the bound to the incumbent certified a
    plan 4.8% above the optimum. Such a result is feasible with no bound from the solver;
    a bound above the incumbent by round-off (1e-9) is still clipped to it."""
    bad = map_result(_contrib("convergenceCriteriaSatisfied", 0.0934758, 0.0960585), label,
                     "v", 1e-9, 1.0)
    assert bad.termination is Termination.feasible
    assert bad.lower_bound == -math.inf and bad.primal == 0.0934758
    assert "exceeds its own incumbent" in bad.message
    ok = map_result(_contrib("convergenceCriteriaSatisfied", 0.0934758, 0.0934758 + 1e-9), label,
                    "v", 1e-9, 1.0)
    assert ok.termination is Termination.optimal and ok.lower_bound == 0.0934758
