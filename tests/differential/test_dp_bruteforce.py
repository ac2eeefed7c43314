"""Differential tests: DP == brute force (tests/support/bruteforce.py) on seeded tiny instances.

Each seed draws a chain or a small DAG (2–6 layers), a cluster, pp ∈ {1,2,3},
c ∈ {1,2,4}, GPipe or 1F1B and a memory capacity placed around the least
memory any plan needs (so some instances are memory-bound, some infeasible,
some unconstrained). Oracles:

- exact cases (chains; DAGs with pp == 1): DP primal == brute-force optimum,
  lower bound == primal, both agree on infeasibility;
- DAG with pp > 1: DP is a heuristic: primal ≥ optimum, lower bound = -inf;
- always: ``evaluate(plan).iteration_time_s == primal`` and the plan fits.
"""

from __future__ import annotations

import math
import random

import pytest

from support.bruteforce import brute_force
from autopar_opt.cost.context import user_reserve_for
from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import build_cost_tables
from autopar_opt.solvers.dp.common import least_memory
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.hardware import GIB
from autopar_opt.solvers.dp.backend import DPBackend
from autopar_opt.core.result import Termination
from autopar_opt.model_zoo.synthetic import small_cluster
from autopar_opt.ir.training import Schedule, Training

from support.dp_cases import CLUSTERS, MAX_PLANS, NUM_SEEDS, SPACE, Instance, make_instance  # noqa: F401


def solve_both(inst: Instance):
    tables = build_cost_tables(inst.graph, inst.cluster, inst.training, SPACE, default_params(),
                               inst.pp, inst.c, inst.schedule)
    res = DPBackend().solve_tables(tables, time_limit_s=None, rel_gap=0.0)
    ref = brute_force(inst.graph, inst.cluster, inst.training, SPACE, inst.pp, inst.c, inst.schedule)
    return tables, res, ref


@pytest.mark.parametrize("seed", range(NUM_SEEDS))
def test_dp_equals_brute_force(seed: int) -> None:
    inst = make_instance(seed)
    tables, res, ref = solve_both(inst)
    exact = inst.graph.is_chain() or inst.pp == 1
    if ref is None:
        assert res.termination is Termination.infeasible
        assert res.lower_bound == math.inf and res.primal is None
        return
    assert res.has_solution
    metrics = evaluate(tables.plan_of(res.solution), inst.graph, inst.cluster, inst.training)
    assert metrics.feasible
    assert metrics.iteration_time_s == pytest.approx(res.primal, rel=1e-9)
    assert tables.plan_of(res.solution).pp == inst.pp
    if exact:
        assert res.termination is Termination.optimal
        assert res.primal == pytest.approx(ref[0], rel=1e-9)
        assert res.lower_bound == res.primal and res.gap == 0.0
    else:
        assert res.termination is Termination.heuristic
        assert res.lower_bound == -math.inf
        assert res.primal >= ref[0] * (1 - 1e-9)


def test_instance_mix_covers_the_brief() -> None:
    """The seeded set really contains ≥ 200 exact comparisons, memory-bound and infeasible cases.

    "Memory-bound" = the DP optimum with the instance's capacity is worse than
    with a huge capacity (checked with the DP, which the test above ties to
    brute force).
    """
    exact = bound = infeasible = dag_exact = 0
    pps, cs, scheds = set(), set(), set()
    for seed in range(NUM_SEEDS):
        inst = make_instance(seed)
        is_exact = inst.graph.is_chain() or inst.pp == 1
        exact += is_exact
        dag_exact += is_exact and not inst.graph.is_chain()
        pps.add(inst.pp)
        cs.add(inst.c)
        scheds.add(inst.schedule)
        tables = build_cost_tables(inst.graph, inst.cluster, inst.training, SPACE, default_params(),
                                   inst.pp, inst.c, inst.schedule)
        res = DPBackend().solve_tables(tables)
        if res.termination is Termination.infeasible:
            infeasible += 1
            continue
        tables.capacity_bytes = 1e30
        free = DPBackend().solve_tables(tables)
        bound += free.primal < res.primal * (1 - 1e-9)
    assert exact >= 200 and dag_exact >= 30
    assert bound >= 20 and infeasible >= 20
    assert pps == {1, 2, 3} and cs == {1, 2, 4} and len(scheds) == 2


def _repeated_chain(seed: int) -> LayerGraph:
    """A chain with runs of identical layers (same signature, so one layer class):
    where the DP's symmetry rule and its cross-strategy dominance act."""
    from autopar_opt.model_zoo.synthetic import random_layer
    rng = random.Random(1000 + seed)
    kinds = [random_layer(rng, "proto0"), random_layer(rng, "proto1")]
    pattern = rng.choice([[0, 1, 1, 1, 0], [1, 1, 1, 1], [0, 0, 1, 1, 1], [1, 1, 0, 1, 1]])
    from dataclasses import replace
    layers = [replace(kinds[p], name=f"l{i}") for i, p in enumerate(pattern)]
    return LayerGraph.chain(f"rep{seed}", layers, seq_len=1024, source="synthetic")


@pytest.mark.parametrize("seed", range(60))
def test_dp_equals_brute_force_on_identical_layers(seed: int) -> None:
    rng = random.Random(seed)
    graph = _repeated_chain(seed)
    pp = rng.choice([1, 2, 2, 3])
    nodes, gpn = rng.choice(CLUSTERS[pp])
    cluster = small_cluster(nodes, gpn)
    c = rng.choice([1, 2, 4])
    schedule = rng.choice([Schedule.gpipe, Schedule.one_f_one_b])
    training = Training(global_batch_size=8 * c, seq_len=1024)
    tables = build_cost_tables(graph, cluster, training, SPACE, default_params(), pp, c, schedule)
    if any(len(s) == 0 for s in tables.strategies):
        pytest.skip("no strategy for some layer on this cluster")
    assert len(set(tables.layer_class)) < len(tables.layer_class)
    cap_gib = least_memory(tables) / GIB * rng.choice([1.0001, 1.1, 1.3, 50.0])
    reserve = user_reserve_for(cap_gib, cluster.device.hbm_gib, default_params())
    training = Training(global_batch_size=8 * c, seq_len=1024, memory_reserve_gib=reserve)
    inst = Instance(graph, cluster, training, pp, c, schedule)
    tables, res, ref = solve_both(inst)
    assert ref is not None and res.termination is Termination.optimal
    assert res.primal == pytest.approx(ref[0], rel=1e-9)
    assert evaluate(tables.plan_of(res.solution), graph, cluster, training).iteration_time_s == pytest.approx(res.primal, rel=1e-9)
