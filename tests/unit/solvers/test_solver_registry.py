"""Registry, declared problem classes, refusals with the fix, Gurobi licence limit."""

from __future__ import annotations

import pytest

from autopar_opt.formulations import build_formulation
from autopar_opt.solvers.base import SolverMismatch
from autopar_opt.solvers.registry import backend_names, check_accepts, default_form, get_backend
from autopar_opt.core.result import ProblemClass, Termination
from support.mip_instances import random_instance, tables_for


def test_names_and_accepts_are_data():
    assert backend_names()[0] == "highs"
    assert set(backend_names()) == {"highs", "gurobi", "scip", "dp"}
    assert get_backend("highs").accepts == {ProblemClass.lp, ProblemClass.milp}
    assert ProblemClass.miqp in get_backend("scip").accepts
    assert ProblemClass.miqp in get_backend("gurobi").accepts
    assert default_form(get_backend("highs")) == "milp"


def test_unknown_solver():
    with pytest.raises(ValueError, match="unknown solver 'cplex'; choose one of highs"):
        get_backend("cplex")


def test_highs_refuses_miqp_before_building():
    with pytest.raises(SolverMismatch, match="use --form milp .* or --solver gurobi\\|scip"):
        check_accepts(get_backend("highs"), ProblemClass.miqp)
    check_accepts(get_backend("highs"), ProblemClass.milp)


def test_highs_solve_model_refuses_miqp():
    graph, cluster, training, space = random_instance(1, 3, dag=False)
    f = build_formulation(tables_for(graph, cluster, training, space, 2, 4), "miqp")
    with pytest.raises(SolverMismatch, match="HiGHS cannot solve integer problems with quadratic"):
        get_backend("highs").solve_model(f.model, f.problem_class, time_limit_s=1, rel_gap=0.0)


def test_highs_accepts_pyomo_model_too():
    """The Pyomo-model path (compiled inside the backend) gives the matrix path's optimum."""
    graph, cluster, training, space = random_instance(2, 4, dag=True)
    t = tables_for(graph, cluster, training, space, 2, 4)
    f1, f2 = build_formulation(t, "milp"), build_formulation(t, "milp")
    r1 = get_backend("highs").solve_model(f1.model, f1.problem_class, time_limit_s=30, rel_gap=1e-9)
    r2 = get_backend("highs").solve_model(f2.matrix(), f2.problem_class, time_limit_s=30, rel_gap=1e-9)
    assert r1.primal == pytest.approx(r2.primal, rel=1e-9)
    assert r1.timings["translate"] > 0


def test_gurobi_size_limited_licence_is_a_result():
    """A MIQP over 200 variables hits GurobiError 10010 with the restricted
    pip licence: an error *result* naming the limit and the fallbacks."""
    backend = get_backend("gurobi")
    ok, why = backend.available()
    if not ok:
        pytest.skip(why)
    graph, cluster, training, space = random_instance(5, 30, dag=False)
    f = build_formulation(tables_for(graph, cluster, training, space, 2, 4), "miqp")
    assert f.model.nvariables() > 200
    res = backend.solve_model(f.model, f.problem_class, time_limit_s=5, rel_gap=1e-6)
    if res.termination is not Termination.error:
        pytest.skip("a full Gurobi licence is installed here")
    assert "size-limited" in res.message and "--solver highs" in res.message
    assert "--solver scip" in res.message
