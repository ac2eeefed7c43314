"""Every backend that takes a warm start really uses it.

With no branch-and-bound node, no presolve and no primal heuristic (SCIP
keeps ``completesol``, which completes the partial start Pyomo passes it),
a solver cannot find a solution on these instances by itself: the run
without a start returns none (asserted, so the test cannot pass vacuously).
With the start (the configuration's best uniform plan, as in the search) it
returns a solution no worse than the start. Node limits, not time limits:
deterministic.
"""

from __future__ import annotations

import pyomo.environ as pyo
import pytest

from autopar_opt.formulations import build_formulation
from autopar_opt.formulations.direct import build_direct
from autopar_opt.search.baselines import best_uniform_for_config
from autopar_opt.solvers.registry import get_backend
from autopar_opt.core.result import Termination
from support.mip_instances import random_instance, tables_for

#: Gurobi's size-limited pip licence: linear models up to 2000 variables/constraints.
GUROBI_LINEAR_LIMIT = 2000
HIGHS_NO_SEARCH = {"mip_max_nodes": 0, "mip_heuristic_effort": 0.0, "presolve": "off"}
GUROBI_NO_SEARCH = {"NodeLimit": 0, "Heuristics": 0, "Presolve": 0, "Cuts": 0}
SEEDS = [0, 1, 2, 3]


def _scip_no_search() -> dict:
    import pyscipopt
    heuristics = {name: -1 for name in pyscipopt.Model().getParams()
                  if name.startswith("heuristics/") and name.endswith("/freq")
                  and "completesol" not in name}
    return {"limits/nodes": 0, "presolving/maxrounds": 0, **heuristics}


def _instance(seed: int):
    graph, cluster, training, space = random_instance(seed, 4, dag=seed % 2 == 0)
    t = tables_for(graph, cluster, training, space, 2, 4)
    warm = best_uniform_for_config(t)
    assert warm is not None
    return t, warm


def _optimum(t) -> float:
    res = get_backend("highs").solve_model(build_direct(t).matrix, build_direct(t).problem_class,
                                           time_limit_s=30, rel_gap=1e-9)
    assert res.termination is Termination.optimal
    return res.primal


def _check(without, with_start, start_value: float, optimum: float) -> None:
    assert without.termination is Termination.time_limit_no_solution, without.termination
    assert with_start.has_solution, with_start.message
    # 1e-7: SCIP completes the continuous part of a partial start within its tolerances
    assert optimum * (1 - 1e-7) <= with_start.primal <= start_value * (1 + 1e-7)


@pytest.mark.parametrize("seed", SEEDS)
def test_highs_direct_path_uses_the_start(seed):
    t, warm = _instance(seed)
    backend = get_backend("highs")
    form = build_direct(t)
    without = backend.solve_model(form.matrix, form.problem_class, time_limit_s=30, rel_gap=1e-9,
                                  solver_options=HIGHS_NO_SEARCH)
    form.set_warm_start(warm)
    with_start = backend.solve_model(form.matrix, form.problem_class, time_limit_s=30, rel_gap=1e-9,
                                     warm_start=True, solver_options=HIGHS_NO_SEARCH)
    _check(without, with_start, form.matrix.objective(form.matrix.start), _optimum(t))
    assert with_start.primal == pytest.approx(form.matrix.objective(form.matrix.start), rel=1e-9)


@pytest.mark.parametrize("seed", SEEDS[:2])
def test_highs_pyomo_matrix_path_uses_the_start(seed):
    """The compiled Pyomo matrix reads the start from the model's variables."""
    t, warm = _instance(seed)
    f = build_formulation(t, "milp")
    backend = get_backend("highs")
    without = backend.solve_model(f.matrix(), f.problem_class, time_limit_s=30, rel_gap=1e-9,
                                  solver_options=HIGHS_NO_SEARCH)
    f.set_warm_start(warm)
    start_value = pyo.value(f.model.obj)
    with_start = backend.solve_model(f.matrix(), f.problem_class, time_limit_s=30, rel_gap=1e-9,
                                     warm_start=True, solver_options=HIGHS_NO_SEARCH)
    _check(without, with_start, start_value, _optimum(t))


def _pyomo_backend_case(name: str, form: str, seed: int, options: dict) -> None:
    backend = get_backend(name)
    ok, why = backend.available()
    if not ok:
        pytest.skip(why)
    t, warm = _instance(seed)
    f = build_formulation(t, form)
    if name == "gurobi" and max(f.model.nvariables(), f.model.nconstraints()) > GUROBI_LINEAR_LIMIT:
        pytest.skip("larger than the size-limited Gurobi licence")
    without = backend.solve_model(f.model, f.problem_class, time_limit_s=30, rel_gap=1e-9,
                                  solver_options=options)
    if without.termination is Termination.error and name == "gurobi":
        pytest.skip(f"Gurobi unusable here: {without.message}")
    f = build_formulation(t, form)
    f.set_warm_start(warm)
    start_value = pyo.value(f.model.obj)
    with_start = backend.solve_model(f.model, f.problem_class, time_limit_s=30, rel_gap=1e-9,
                                     warm_start=True, solver_options=options)
    _check(without, with_start, start_value, _optimum(t))


@pytest.mark.parametrize("seed", SEEDS)
def test_gurobi_uses_the_start(seed):
    _pyomo_backend_case("gurobi", "milp", seed, GUROBI_NO_SEARCH)


@pytest.mark.parametrize("form", ["milp", "miqp"])
@pytest.mark.parametrize("seed", SEEDS[:2])
def test_scip_uses_the_start(form, seed):
    ok, why = get_backend("scip").available()
    if not ok:
        pytest.skip(why)
    _pyomo_backend_case("scip", form, seed, _scip_no_search())
