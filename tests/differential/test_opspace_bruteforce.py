"""Operator-level sharding: DP = MILP = brute force on tiny graphs, evaluate = objective.

Random DAGs of 2-6 small operators (GEMMs, element-wise, norms; tests/support/opspace_cases.py)
on 2-4 devices, every logical mesh, both configuration rules. The brute force enumerates
the whole product of configurations from the tables; the DP (variable elimination, and
its Pareto-label form under a memory limit) and the MILP (HiGHS, Alpa's edge variables)
must find its optimum; the independent evaluator (scalar redistribution, fresh pricing)
must price every optimum plan at the solvers' objective.
"""

from __future__ import annotations

import numpy as np
import pytest

from autopar_opt.cost.operators.evaluate import OpPlan, evaluate_plan
from autopar_opt.cost.operators.tables import build_tables
from autopar_opt.ir.mesh import Mesh
from autopar_opt.opspace.solve import solve_tables
from support.opspace_cases import brute_force, context, random_graph, space_size

CASES = [(seed, n_ops, mesh, rule, rs)
         for seed, n_ops in enumerate([2, 3, 4, 5, 6, 3, 4])
         for mesh, rule, rs in [((1, 2), "alpa", True), ((1, 4), "alpa", True), ((2, 2), "alpa", False),
                                ((1, 4), "pase", False)]]
LIMIT = 300_000     # largest product space enumerated


def _tables(seed, n_ops, mesh, rule, rs, capacity_gib=None):
    rng = np.random.default_rng(seed)
    g = random_graph(rng, n_ops)
    devices = mesh[0] * mesh[1]
    ctx = context(devices, gpus_per_node=2 if devices == 4 and seed % 2 else None, capacity_gib=capacity_gib)
    return g, ctx, build_tables(g, ctx, Mesh(mesh, ctx.cluster.gpus_per_node), rule, rs)


@pytest.mark.parametrize("seed, n_ops, mesh, rule, rs", CASES)
def test_dp_milp_and_brute_force_agree(seed, n_ops, mesh, rule, rs):
    g, ctx, t = _tables(seed, n_ops, mesh, rule, rs)
    if space_size(t) > LIMIT:
        pytest.skip(f"{space_size(t):,} plans: too many to enumerate")
    best, _ = brute_force(t)
    dp = solve_tables(t, "dp")
    mip = solve_tables(t, "highs")
    assert dp.status == "optimal" and mip.status == "optimal"
    assert dp.value == pytest.approx(best, rel=1e-9)
    assert mip.value == pytest.approx(best, rel=1e-7)
    assert dp.lower_bound == pytest.approx(best, rel=1e-9)
    for out in (dp, mip):
        plan = OpPlan(t.mesh, [t.configs[v][k] for v, k in enumerate(out.choice)])
        m = evaluate_plan(g, ctx, plan)
        assert m.time_s == pytest.approx(out.value, rel=1e-12)
        assert m.memory_bytes == pytest.approx(t.memory_of(out.choice), rel=1e-12)


@pytest.mark.parametrize("seed, n_ops, mesh, rule, rs", CASES[::3])
def test_memory_limit_pareto_dp_milp_and_brute_force_agree(seed, n_ops, mesh, rule, rs):
    """A capacity between the least and the unconstrained optimum's memory binds: the
    Pareto-label DP and the MILP's memory row find the constrained optimum."""
    g, ctx, t = _tables(seed, n_ops, mesh, rule, rs)
    if space_size(t) > LIMIT:
        pytest.skip(f"{space_size(t):,} plans: too many to enumerate")
    _, free = brute_force(t)
    least = sum(float(m.min()) for m in t.memory)
    cap_bytes = least + 0.5 * (t.memory_of(free) - least)
    _, _, t = _tables(seed, n_ops, mesh, rule, rs, capacity_gib=cap_bytes / 2**30)
    best, arg = brute_force(t, t.capacity_bytes)
    dp = solve_tables(t, "dp")
    mip = solve_tables(t, "highs")
    if arg is None:
        assert dp.status == "infeasible" and mip.status == "infeasible"
        return
    assert dp.value == pytest.approx(best, rel=1e-9) and mip.value == pytest.approx(best, rel=1e-7)
    if t.memory_of(free) > t.capacity_bytes * (1 + 1e-9):     # the limit binds: the label DP ran
        assert dp.method == "dp-pareto"
    for out in (dp, mip):
        assert t.memory_of(out.choice) <= t.capacity_bytes * (1 + 1e-9)


@pytest.mark.parametrize("seed, n_ops, mesh, rule, rs", CASES[1::2])
def test_exact_reduction_before_the_dp_keeps_the_optimum(seed, n_ops, mesh, rule, rs, monkeypatch):
    """With the reduction forced on every table (solvers/dp/min_sum_reduction.py: forest
    min-marginal fixing and dominance), the DP on what is left finds the brute-force optimum
    and the plan maps back to the full tables."""
    import autopar_opt.opspace.solve as opsolve

    g, ctx, t = _tables(seed, n_ops, mesh, rule, rs)
    if space_size(t) > LIMIT:
        pytest.skip(f"{space_size(t):,} plans: too many to enumerate")
    best, _ = brute_force(t)
    monkeypatch.setattr(opsolve, "REDUCE_WIDEST", 0)
    out = solve_tables(t, "auto")
    assert out.status == "optimal" and out.value == pytest.approx(best, rel=1e-9)
    assert t.objective(out.choice) == pytest.approx(best, rel=1e-9)
    if sum(t.sizes) > len(t.sizes):                      # something to choose: it reduced
        assert out.method.startswith("reduce+") and out.stats["configs_removed"] > 0


@pytest.mark.parametrize("seed, n_ops, mesh, rule, rs", CASES[::3])
def test_exact_reduction_keeps_the_memory_constrained_optimum(seed, n_ops, mesh, rule, rs, monkeypatch):
    """The same under a binding memory limit (dominance then also compares memory; fixing
    only against a plan that fits)."""
    import autopar_opt.opspace.solve as opsolve

    g, ctx, t = _tables(seed, n_ops, mesh, rule, rs)
    if space_size(t) > LIMIT:
        pytest.skip(f"{space_size(t):,} plans: too many to enumerate")
    _, free = brute_force(t)
    least = sum(float(m.min()) for m in t.memory)
    _, _, t = _tables(seed, n_ops, mesh, rule, rs,
                      capacity_gib=(least + 0.5 * (t.memory_of(free) - least)) / 2**30)
    best, arg = brute_force(t, t.capacity_bytes)
    monkeypatch.setattr(opsolve, "REDUCE_WIDEST", 0)
    out = solve_tables(t, "auto")
    if arg is None:
        assert out.status == "infeasible"
        return
    assert out.value == pytest.approx(best, rel=1e-9)
    assert t.memory_of(out.choice) <= t.capacity_bytes * (1 + 1e-9)
