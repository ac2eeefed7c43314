"""The DP as the MIP's warm start and second source of proven bounds (autopar_opt/search/inner.py)."""

from __future__ import annotations

import math

import pytest

from support.mip_instances import random_instance, tables_for

from autopar_opt.solvers.dp import solve_dp
from autopar_opt.core.assignment import Assignment
from autopar_opt.solvers.dp.common import iteration_time
from autopar_opt.search import inner as inner_mod
from autopar_opt.search.engine import SearchOptions
from autopar_opt.search.inner import InnerOutcome, InnerSolver, merge_outcomes
from autopar_opt.search.configs import OuterConfig
from autopar_opt.core.bounds import Status
from autopar_opt.core.result import SolveResult, Termination
from autopar_opt.ir.training import Schedule


def _value(tables, start) -> float:
    """Tables objective of a warm start (an Assignment) or of a Plan."""
    asg = start if isinstance(start, Assignment) else tables.assignment_of(start)
    return iteration_time(tables, asg)


@pytest.mark.parametrize("seed", range(6))
def test_mip_is_warm_started_from_the_dp_optimum(seed, monkeypatch):
    """The start handed to HiGHS is an assignment worth exactly the DP's proven optimum
    (never worse than the uniform plan), on seeded pipelined chains."""
    graph, cluster, training, space = random_instance(seed, 8, dag=False)
    tables = tables_for(graph, cluster, training, space, 2, 4)
    exact = solve_dp(tables)
    assert exact.termination is Termination.optimal
    starts = []
    from autopar_opt.formulations.direct import DirectFormulation
    original = DirectFormulation.set_warm_start

    def spy(self, plan):
        starts.append(plan)
        return original(self, plan)
    monkeypatch.setattr(DirectFormulation, "set_warm_start", spy)
    solver = InnerSolver(SearchOptions(solver="highs", rel_gap=1e-9, dp_check=True))
    out = solver.solve(tables, 60.0, OuterConfig(2, 4, Schedule.one_f_one_b))
    assert len(starts) == 1
    assert _value(tables, starts[0]) == pytest.approx(exact.primal, rel=1e-9)
    assert out.result.termination is Termination.optimal
    assert out.result.primal == pytest.approx(exact.primal, rel=1e-9)
    assert "dp_warm" in out.result.timings


def test_no_warm_start_option_skips_the_dp(monkeypatch):
    graph, cluster, training, space = random_instance(3, 6, dag=False)
    tables = tables_for(graph, cluster, training, space, 2, 2)
    monkeypatch.setattr("autopar_opt.solvers.dp.solve_dp", lambda *a, **k: pytest.fail("DP ran"))
    out = InnerSolver(SearchOptions(solver="highs", warm_start=False, rel_gap=1e-9)).solve(
        tables, 60.0, OuterConfig(2, 2, Schedule.one_f_one_b))
    assert "dp_warm" not in out.result.timings and out.result.termination is Termination.optimal


def test_mip_check_budget_is_short_once_the_dp_proved_optimality(monkeypatch):
    """After an exact DP the MIP runs only as a check: its limit is
    max(CHECK_FACTOR × DP time, CHECK_MIN_S), not the configuration's share."""
    graph, cluster, training, space = random_instance(1, 8, dag=False)
    tables = tables_for(graph, cluster, training, space, 2, 4)
    limits = []
    solver = InnerSolver(SearchOptions(solver="highs", rel_gap=1e-9, dp_check=True))
    real = solver.backend.solve_model

    def spy(model, cls, *, time_limit_s, **kw):
        limits.append(time_limit_s)
        return real(model, cls, time_limit_s=time_limit_s, **kw)
    monkeypatch.setattr(solver.backend, "solve_model", spy)
    out = solver.solve(tables, 500.0, OuterConfig(2, 4, Schedule.one_f_one_b))
    dp_s = out.result.timings["dp_warm"]
    assert limits == [pytest.approx(max(inner_mod.CHECK_FACTOR * dp_s, inner_mod.CHECK_MIN_S))]


def test_exact_dp_closes_the_configuration_without_a_mip(monkeypatch):
    """By default a configuration the DP warm start proved optimal is closed by
    the DP: no MIP is built or run, and the outcome is the DP's optimum."""
    graph, cluster, training, space = random_instance(1, 8, dag=False)
    tables = tables_for(graph, cluster, training, space, 2, 4)
    exact = solve_dp(tables)
    assert exact.termination is Termination.optimal
    solver = InnerSolver(SearchOptions(solver="highs", rel_gap=1e-9))
    monkeypatch.setattr(solver.backend, "solve_model",
                        lambda *a, **k: pytest.fail("the MIP ran after an exact DP"))
    out = solver.solve(tables, 60.0, OuterConfig(2, 4, Schedule.one_f_one_b))
    assert out.status is Status.optimal and out.result.termination is Termination.optimal
    assert out.result.primal == pytest.approx(exact.primal, rel=1e-12)
    assert out.result.lower_bound == pytest.approx(exact.primal, rel=1e-12)
    assert _value(tables, out.assignment) == pytest.approx(exact.primal, rel=1e-12)
    assert set(out.result.timings) == {"dp_warm"} and "no MIP" in out.result.message


def _res(term, primal, lower, msg="") -> SolveResult:
    return SolveResult(term, primal, lower, 1.0, "highs", "x", msg)


def test_merge_takes_the_larger_bound_and_says_who_proved_it():
    """Hand-made results: the MIP stopped at its limit with a weak bound, the
    DP proved 10.0 optimal: the configuration is optimal at 10.0, bound from the DP."""
    mip = InnerOutcome(_res(Termination.feasible, 10.0, 8.0), assignment="mip-plan")
    dp = _res(Termination.optimal, 10.0, 10.0).with_(solution="dp-plan")
    out = merge_outcomes(mip, dp, 1e-3)
    assert out.result.termination is Termination.optimal
    assert out.result.lower_bound == 10.0 and out.result.primal == 10.0
    assert out.assignment == "mip-plan"                  # equal value: the MIP's own plan is kept
    assert "exact DP" in out.result.message and "8" in out.result.message


def test_merge_keeps_the_better_plan_and_a_gap_when_neither_closes():
    mip = InnerOutcome(_res(Termination.feasible, 12.0, 9.0), assignment="mip-plan")
    dp = _res(Termination.feasible, 11.0, 9.5).with_(solution="dp-plan")
    out = merge_outcomes(mip, dp, 1e-3)
    assert out.assignment == "dp-plan" and out.result.primal == 11.0
    assert out.result.lower_bound == 9.5 and out.result.termination is Termination.feasible
    # no MIP solution at all: the DP plan with the MIP's (larger) bound
    mip = InnerOutcome(_res(Termination.time_limit_no_solution, None, 10.5), assignment=None)
    out = merge_outcomes(mip, dp, 1e-3)
    assert out.assignment == "dp-plan" and out.result.lower_bound == 10.5
    assert out.result.termination is Termination.feasible


def test_merge_heuristic_dp_bound_never_makes_a_plan_optimal():
    """A DAG with pp > 1: the DP is a heuristic (bound -inf); only the MIP's bound counts."""
    mip = InnerOutcome(_res(Termination.feasible, 12.0, 9.0), assignment="mip-plan")
    dp = _res(Termination.heuristic, 11.0, -math.inf).with_(solution="dp-plan")
    out = merge_outcomes(mip, dp, 1e-3)
    assert out.result.lower_bound == 9.0 and out.result.termination is Termination.feasible
    assert out.result.primal == 11.0


def test_those_instances_discriminate_dp_from_uniform_starts():
    """Guard for the test above: on some of its seeds the best uniform plan is
    strictly worse than the DP optimum, so a uniform-only warm start would fail it."""
    from autopar_opt.search.baselines import best_uniform_for_config
    worse = 0
    for seed in range(6):
        graph, cluster, training, space = random_instance(seed, 8, dag=False)
        tables = tables_for(graph, cluster, training, space, 2, 4)
        uniform = best_uniform_for_config(tables)
        best = solve_dp(tables).primal
        if uniform is None or _value(tables, uniform) > best * (1 + 1e-9):
            worse += 1
    assert worse >= 1


@pytest.mark.parametrize("loose", [False, True])
def test_gap_close_takes_the_uniform_plan_when_it_beats_the_dp_incumbent(loose, monkeypatch):
    """A time-limited DP whose incumbent is worse than the best uniform plan: the
    configuration closes within the gap with the uniform plan and its value.
    Constructed: the stubbed DP's incumbent is the real best uniform plan (value
    u) with the true optimum as its bound; the stubbed "uniform" plan is the
    DP's true optimum (value opt < u, the seed where they differ). Tight gap:
    only the uniform plan is within it (the old rule ran the MIP); loose gap:
    both are (the old rule returned the DP's worse incumbent)."""
    from autopar_opt.search import baselines
    for seed in range(6):
        graph, cluster, training, space = random_instance(seed, 8, dag=False)
        tables = tables_for(graph, cluster, training, space, 2, 4)
        exact = solve_dp(tables)
        uniform = baselines.best_uniform_assignment(tables)
        if uniform is not None and uniform[1] > exact.primal * (1 + 1e-6):
            break
    else:
        pytest.fail("no seed where the uniform plan is worse than the optimum")
    u_asg, u = uniform
    assert _value(tables, u_asg) == pytest.approx(u, rel=1e-12)
    stub = SolveResult(Termination.feasible, u, exact.primal, 0.1, "dp", "x", solution=u_asg)
    monkeypatch.setattr("autopar_opt.solvers.dp.solve_dp", lambda *a, **k: stub)
    monkeypatch.setattr(baselines, "best_uniform_assignment",
                        lambda t: (exact.solution, exact.primal))
    solver = InnerSolver(SearchOptions(solver="highs", rel_gap=u / exact.primal if loose else 1e-9))
    monkeypatch.setattr(solver.backend, "solve_model",
                        lambda *a, **k: pytest.fail("the MIP ran after the gap closed"))
    out = solver.solve(tables, 60.0, OuterConfig(2, 4, Schedule.one_f_one_b))
    assert out.result.primal == pytest.approx(exact.primal, rel=1e-12)
    assert _value(tables, out.assignment) == pytest.approx(exact.primal, rel=1e-12)
    assert "uniform plan beats" in out.result.message
