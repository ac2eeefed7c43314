"""Known-answer instances, warm start, decode and export of the formulations."""

from __future__ import annotations

import math

import pytest

from autopar_opt.cost.context import StageContext
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.params import default_params
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.formulations import FormulationError, build_formulation
from autopar_opt.formulations.base import price_assignment
from autopar_opt.solvers.registry import get_backend
from autopar_opt.ir.strategies import Strategy
from autopar_opt.model_zoo.synthetic import small_cluster
from autopar_opt.ir.training import Schedule, SearchSpace, Training
from support.mip_instances import SPACE, random_instance, tables_for, two_identical_layers


def _solve_highs(f):
    return get_backend("highs").solve_model(f.matrix(), f.problem_class, time_limit_s=30, rel_gap=1e-9)


@pytest.mark.parametrize("form", ["milp", "miqp"])
def test_two_identical_layers_two_devices(form):
    """Two compute-only layers (no params, no tp, no output), 2 GPUs, c = 4.

    pp=1 (d=2): the only strategy is dp2; T1 = c·(2·A2) (no sync, no transfer).
    pp=2 (d=1): dp1 per stage, o = 0; T2 = 2·A1 + (c-1)·A1 = (c+1)·A1.
    With A1 = 2·A2 (dp halves the samples per device at a constant efficiency)
    T1 = c·A1 < T2 = (c+1)·A1: no pipeline wins by the bubble (c+1)/c.
    The solver must reproduce both formulas and thus the winner.
    """
    graph, cluster, training = two_identical_layers(), small_cluster(1, 2), Training(8, 1024)
    c, params = 4, default_params()
    a = {d: layer_cost(graph.layers[0], Strategy(d, 1), StageContext(cluster, training, params, d, 8 // c)).time_s
         for d in (1, 2)}
    expected = {1: c * 2 * a[2], 2: (c + 1) * a[1]}
    got = {}
    for pp in (1, 2):
        f = build_formulation(tables_for(graph, cluster, training, SPACE, pp, c), form)
        res = (_solve_highs(f) if form == "milp" else
               get_backend("scip").solve_model(f.model, f.problem_class, time_limit_s=30, rel_gap=1e-9))
        got[pp] = res.primal - params.iteration_overhead_s
        assert f.decode().pp == pp
    assert got[1] == pytest.approx(expected[1], rel=1e-9)
    assert got[2] == pytest.approx(expected[2], rel=1e-9)
    assert min(got, key=got.get) == min(expected, key=expected.get)


def test_memory_forces_pipeline():
    """Two layers of P parameters, 2 GPUs, ZeRO off, no activations.

    pp=1 (dp2): each device holds both layers, 16·P·2 = 32P bytes;
    pp=2: 16P per device. With capacity between 16P and 32P, pp=1 is
    infeasible (bound +inf) and pp=2 is feasible.
    """
    cluster, training = small_cluster(1, 2), Training(8, 1024)
    cap = StageContext(cluster, training, default_params(), 1, 1).capacity_bytes
    params = int(cap / 24)               # 16P < cap < 32P
    assert 16 * params < cap < 32 * params
    graph, space = two_identical_layers(params), SearchSpace(zero_levels=(0,))
    res1 = _solve_highs(build_formulation(tables_for(graph, cluster, training, space, 1, 4), "milp"))
    assert res1.termination.value == "infeasible" and res1.lower_bound == math.inf
    f2 = build_formulation(tables_for(graph, cluster, training, space, 2, 4), "milp")
    res2 = _solve_highs(f2)
    assert res2.termination.value == "optimal"
    assert evaluate(f2.decode(), graph, cluster, training).feasible


@pytest.mark.parametrize("form", ["milp", "miqp"])
def test_warm_start_sets_consistent_values(form):
    """Setting a plan's values gives an objective equal to evaluate(plan) and
    satisfies every constraint (checked on the Pyomo model)."""
    import pyomo.environ as pyo
    graph, cluster, training, space = random_instance(3, 4, dag=True)
    t = tables_for(graph, cluster, training, space, 2, 4)
    f = build_formulation(t, form)
    ref = build_formulation(t, "milp")
    _solve_highs(ref)
    f.set_warm_start(ref.decode())
    assert pyo.value(f.model.obj) == pytest.approx(
        evaluate(ref.decode(), graph, cluster, training).iteration_time_s, rel=1e-9)
    for con in f.model.component_data_objects(pyo.Constraint, active=True):
        body = pyo.value(con.body)
        assert con.lower is None or body >= pyo.value(con.lower) - 1e-7, con.name
        assert con.upper is None or body <= pyo.value(con.upper) + 1e-7, con.name
    assert f.decode().to_dict() == ref.decode().to_dict()


def test_price_assignment_matches_evaluate():
    graph, cluster, training, space = random_instance(5, 5, dag=True)
    t = tables_for(graph, cluster, training, space, 2, 2, Schedule.gpipe)
    f = build_formulation(t, "milp")
    _solve_highs(f)
    p, o, g, _, _ = price_assignment(t, f.stage_assignment(), f.strategy_choice())
    total = sum(p) + sum(o) + (t.microbatches - 1) * max(p + o) + max(g)
    assert total + default_params().iteration_overhead_s == pytest.approx(
        evaluate(f.decode(), graph, cluster, training).iteration_time_s, rel=1e-9)


@pytest.mark.parametrize("form,fmt", [("milp", "mps"), ("milp", "lp"), ("miqp", "lp")])
def test_export_hash_stable(tmp_path, form, fmt):
    graph, cluster, training, space = random_instance(1, 3, dag=False)
    t = tables_for(graph, cluster, training, space, 2, 4)
    h1 = build_formulation(t, form).export(str(tmp_path / f"a.{fmt}"), fmt)
    h2 = build_formulation(t, form).export(str(tmp_path / f"b.{fmt}"), fmt)
    assert h1 == h2 and len(h1) == 64
    assert (tmp_path / f"a.{fmt}").stat().st_size > 0


def test_errors_are_clear():
    graph, cluster, training, space = random_instance(1, 3, dag=False)
    t = tables_for(graph, cluster, training, space, 2, 4)
    with pytest.raises(FormulationError, match="form must be one of"):
        build_formulation(t, "qp")
    with pytest.raises(FormulationError, match="needs the linear form"):
        build_formulation(t, "miqp").matrix()
    with pytest.raises(FormulationError, match="no solution to decode"):
        build_formulation(t, "milp").decode()
    with pytest.raises(FormulationError, match="export format"):
        build_formulation(t, "milp").export("/tmp/x.txt", "txt")
