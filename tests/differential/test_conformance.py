"""One conformance suite for every available MIP backend x form it accepts.

Oracles: brute force (tests/support/bruteforce.py), the independent evaluator, and
the result contract (lower_bound <= primal; infeasible -> +inf bound).
"""

from __future__ import annotations

import math

import pytest

from autopar_opt.cost.evaluate import evaluate
from autopar_opt.formulations import build_formulation
from autopar_opt.solvers.base import Feature
from autopar_opt.solvers.registry import backend_names, get_backend
from autopar_opt.core.result import ProblemClass, Termination
from autopar_opt.ir.training import Training
from support.bruteforce import brute_force
from support.mip_instances import random_instance, tables_for


def _cases():
    """Every registered backend x every MIP form it declares (the DP takes cost
    tables, not a MIP, and is checked against brute force in test_dp_bruteforce)."""
    out = []
    for name in backend_names():
        backend = get_backend(name)
        ok, why = backend.available()
        for form, pc in (("milp", ProblemClass.milp), ("miqp", ProblemClass.miqp)):
            if pc not in backend.accepts:
                continue
            marks = [] if ok else [pytest.mark.skip(reason=why)]
            out.append(pytest.param(name, form, id=f"{name}-{form}", marks=marks))
    return out


def _model_for(name, f):
    """The model the backend takes (a matrix where it declares matrix input); skips
    when the model is larger than the backend's licence allows here."""
    backend = get_backend(name)
    limit = backend.size_limit(f.problem_class)
    if limit is not None and (f.model.nvariables() > limit[0] or f.model.nconstraints() > limit[1]):
        pytest.skip(f"the model exceeds {name}'s licence limits {limit} (variables, constraints)")
    return f.matrix() if Feature.matrix_input in backend.features else f.model


def _solve(name, f):
    return get_backend(name).solve_model(_model_for(name, f), f.problem_class, time_limit_s=60,
                                         rel_gap=1e-9)


INSTANCES = [(0, 3, True, 2), (1, 3, False, 2), (3, 4, False, 1), (7, 3, True, 2)]


@pytest.mark.parametrize("name,form", _cases())
@pytest.mark.parametrize("seed,n,dag,pp", INSTANCES)
def test_optimum_matches_brute_force_and_evaluate(name, form, seed, n, dag, pp):
    graph, cluster, training, space = random_instance(seed, n, dag)
    f = build_formulation(tables_for(graph, cluster, training, space, pp, 4), form)
    res = _solve(name, f)
    ref = brute_force(graph, cluster, training, space, pp, 4)
    assert res.termination is Termination.optimal, res.message
    assert res.primal == pytest.approx(ref[0], rel=1e-6)
    metrics = evaluate(f.decode(), graph, cluster, training)
    assert metrics.feasible
    assert metrics.iteration_time_s == pytest.approx(res.primal, rel=1e-6)
    assert res.lower_bound <= res.primal * (1 + 1e-9)
    assert res.solver == name and res.solver_version
    assert set(res.timings) == {"build", "translate", "solve"}


@pytest.mark.parametrize("name,form", _cases())
def test_infeasible_capacity(name, form):
    """Capacity ~0 (reserve = all HBM but 1 MiB): no plan fits."""
    graph, cluster, _, space = random_instance(2, 3, dag=False)
    training = Training(16, 1024, memory_reserve_gib=cluster.device.hbm_gib - 2 ** -10)
    assert brute_force(graph, cluster, training, space, 2, 4) is None
    res = _solve(name, build_formulation(tables_for(graph, cluster, training, space, 2, 4), form))
    assert res.termination is Termination.infeasible
    assert res.lower_bound == math.inf and res.primal is None


@pytest.mark.parametrize("name,form", _cases())
def test_time_limit_returns_result(name, form):
    """A tiny time limit never raises; any incumbent keeps lower_bound <= primal."""
    graph, cluster, training, space = random_instance(4, 5, dag=True)
    f = build_formulation(tables_for(graph, cluster, training, space, 2, 4), form)
    res = get_backend(name).solve_model(_model_for(name, f), f.problem_class, time_limit_s=0.001, rel_gap=1e-9)
    assert res.termination in (Termination.optimal, Termination.feasible,
                               Termination.time_limit_no_solution)
    if res.has_solution:
        assert res.lower_bound <= res.primal * (1 + 1e-9)
