"""Known-answer, contract and property tests of the DP fallback (solvers/dp/: autopar_opt.solvers.dp)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from support.bruteforce import brute_force
from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import CostTables, build_cost_tables
from autopar_opt.solvers.dp.common import simple_lower_bound
from autopar_opt.solvers.dp.dag import generate_seq, solve_dag_single_stage
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.hardware import GIB
from autopar_opt.solvers.base import SolverMismatch
from autopar_opt.solvers.dp.backend import DPBackend
from autopar_opt.core.result import ProblemClass, Termination
from autopar_opt.ir.strategies import Strategy
from autopar_opt.model_zoo.synthetic import random_chain, random_dag, random_layer, small_cluster
from autopar_opt.ir.training import Schedule, SearchSpace, Training

S0, S1 = Strategy(1, 1), Strategy(1, 1, zero=1)   # labels only: hand tables set the costs


def hand_tables(times, syncs, weights, cross, pp: int, c: int, cap_gib: float = 100.0) -> CostTables:
    """Chain tables with hand-set costs (1 device per stage, inflight = 1, times in s, memory in GiB)."""
    n = len(times)
    graph = random_chain(0, n)
    base = build_cost_tables(graph, small_cluster(1, pp), Training(global_batch_size=c), SearchSpace(),
                             default_params(), pp, c, Schedule.one_f_one_b)
    arr = lambda rows, scale=1.0: [np.array(r, dtype=float) * scale for r in rows]  # noqa: E731
    k = [len(t) for t in times]
    return replace(base, strategies=[[S0, S1][:kk] for kk in k], time=arr(times), sync=arr(syncs),
                   weight_bytes=arr(weights, GIB), act_bytes=[np.zeros(kk) for kk in k],
                   working_bytes=[np.zeros(kk) for kk in k],
                   reshard=[np.zeros((k[u], k[u + 1])) for u in range(n - 1)],
                   cross_intra=[np.array(x, dtype=float) for x in cross],
                   cross_inter=[np.array(x, dtype=float) for x in cross],
                   inflight=[1] * pp, capacity_bytes=cap_gib * GIB, layer_class=list(range(n)))


def solve(tables: CostTables, limit: float | None = None):
    return DPBackend().solve_tables(tables, time_limit_s=limit, rel_gap=0.0)


def test_known_answer_sync_max_beats_min_sum() -> None:
    """Two layers, pp = 2 (one per stage), c = 3, no transfer cost.

    A_0 = [1, 1.5], G_0 = [2, 0]; A_1 = [3, 4], G_1 = [0, 0].
    T = p0 + p1 + 2·max(p0, p1) + max(g0, g1):
    (0,0) → 1+3+6+2 = 12; (1,0) → 1.5+3+6+0 = 10.5; (0,1) → 1+4+8+2 = 15; (1,1) → 13.5.
    Optimum 10.5 with strategies (1, 0), although (0, 0) has the least Σp.
    With W_1 = [10, 0] GiB and 8 GiB capacity, layer 1 must take strategy 1: optimum 13.5 (1, 1).
    """
    z = [[[0, 0], [0, 0]]]
    t = hand_tables([[1, 1.5], [3, 4]], [[2, 0], [0, 0]], [[0, 0], [0, 0]], z, pp=2, c=3, cap_gib=8)
    res = solve(t)
    overhead = t.params.iteration_overhead_s
    assert res.termination is Termination.optimal
    assert res.primal == pytest.approx(10.5 + overhead)
    assert [st.strategies for st in t.plan_of(res.solution).stages] == [[S1], [S0]]
    t = replace(t, weight_bytes=[np.zeros(2), np.array([10.0, 0.0]) * GIB])
    res = solve(t)
    assert res.primal == pytest.approx(13.5 + overhead)
    assert [st.strategies for st in t.plan_of(res.solution).stages] == [[S1], [S1]]


def test_known_answer_bottleneck_moves_the_cut() -> None:
    """Three layers, one strategy each, A = [1, 1, 4], pp = 2; transfer 0 on edge 0→1, 3 on edge 1→2.

    Cut after layer 0: p = (1, 5), o = 0 → T = 6 + (c−1)·5.
    Cut after layer 1: p = (2, 4), o = 3 → T = 9 + (c−1)·4.
    c = 1: 6 vs 9 → cut after layer 0. c = 5: 26 vs 25 → cut after layer 1.
    """
    for c, value, first_stage in ((1, 6.0, 1), (5, 25.0, 2)):
        t = hand_tables([[1], [1], [4]], [[0], [0], [0]], [[0], [0], [0]], [[[0.0]], [[3.0]]], pp=2, c=c)
        res = solve(t)
        assert res.primal == pytest.approx(value + t.params.iteration_overhead_s)
        assert len(t.plan_of(res.solution).stages[0].layers) == first_stage


def test_infeasible_reports_least_memory() -> None:
    """W = 9 GiB per layer, one layer per stage, capacity 8 GiB: no plan fits; least need 9 GiB."""
    t = hand_tables([[1], [1]], [[0], [0]], [[9], [9]], [[[0.0]]], pp=2, c=1, cap_gib=8)
    res = solve(t)
    assert res.termination is Termination.infeasible
    assert res.lower_bound == math.inf and res.primal is None and res.solution is None
    # on the scale of a plan's peak memory (QA round 12): 9 and 8 GiB of modelled bytes
    assert f"{t.peak_gib(9 * 2**30):.3f} GiB per device" in res.message
    assert f"against {t.usable_gib:.3f} GiB usable" in res.message
    assert t.usable_gib == pytest.approx(t.peak_gib(8 * 2**30))


def test_more_stages_than_layers_is_infeasible() -> None:
    t = build_cost_tables(random_chain(1, 2), small_cluster(1, 4), Training(global_batch_size=8, seq_len=1024),
                          SearchSpace(), default_params(), 4, 2, Schedule.one_f_one_b)
    res = solve(t)
    assert res.termination is Termination.infeasible
    assert "cannot each hold a layer" in res.message


def test_backend_contract() -> None:
    b = DPBackend()
    assert b.name == "dp" and b.accepts == frozenset({ProblemClass.tables})
    assert b.available() == (True, "")
    assert b.version().startswith("autopar-dp ")
    with pytest.raises(SolverMismatch, match="needs CostTables"):
        b.solve_tables({"not": "tables"}, time_limit_s=None, rel_gap=0.0)
    with pytest.raises(SolverMismatch, match="algebraic"):
        b.solve_model(None, ProblemClass.milp, time_limit_s=None, rel_gap=0.0)


def _chain_tables(n: int, pp: int, c: int) -> tuple:
    graph, cluster = random_chain(7, n), small_cluster(2, 4)
    training = Training(global_batch_size=8 * c, seq_len=1024)
    return graph, cluster, training, build_cost_tables(graph, cluster, training, SearchSpace(),
                                                       default_params(), pp, c, Schedule.one_f_one_b)


def test_time_limit_returns_incumbent_never_optimal() -> None:
    """A limit too short for the exact pass: beam incumbent, a valid bound ≤ the true optimum,
    at least the analytic bound (the deepening's root bound can only be stronger)."""
    graph, cluster, training, t = _chain_tables(24, 4, 8)
    cut = solve(t, limit=1e-6)
    full = solve(t)
    assert full.termination is Termination.optimal
    assert cut.termination is Termination.feasible
    assert cut.lower_bound >= simple_lower_bound(t) * (1 - 1e-12)
    assert cut.lower_bound <= full.primal <= cut.primal * (1 + 1e-12)
    assert evaluate(t.plan_of(cut.solution), graph, cluster, training).iteration_time_s == pytest.approx(cut.primal, rel=1e-9)


def test_chain_dp_equals_pase_dp_on_single_stage_chain() -> None:
    """Cross-method equality: for pp = 1 both DPs solve the same problem exactly."""
    graph, cluster, training, t = _chain_tables(12, 1, 4)
    res = solve(t)
    _, value = solve_dag_single_stage(t)
    assert res.primal == pytest.approx(value + t.params.iteration_overhead_s, rel=1e-9)
    assert evaluate(t.plan_of(res.solution), graph, cluster, training).iteration_time_s == pytest.approx(res.primal, rel=1e-9)


def branchy_dag(seed: int, branches: int, depth: int) -> LayerGraph:
    """src → ``branches`` parallel paths of ``depth`` layers → concat (an Inception-like block)."""
    import random
    rng = random.Random(seed)
    names = ["src"] + [f"b{i}_{j}" for i in range(branches) for j in range(depth)] + ["cat"]
    layers = [random_layer(rng, nm) for nm in names]
    edges = []
    for i in range(branches):
        path = ["src"] + [f"b{i}_{j}" for j in range(depth)] + ["cat"]
        edges += list(zip(path, path[1:]))
    return LayerGraph(f"branchy{seed}", layers, edges, seq_len=1024, source="test")


@pytest.mark.parametrize("seed", range(6))
def test_parallel_branches_dag_equals_brute_force(seed: int) -> None:
    graph = branchy_dag(seed, branches=3, depth=1 + seed % 2)
    cluster, training = small_cluster(1, 2), Training(global_batch_size=8, seq_len=1024)
    space = SearchSpace(zero_levels=(0, 3))
    t = build_cost_tables(graph, cluster, training, space, default_params(), 1, 2, Schedule.gpipe)
    res = solve(t)
    ref = brute_force(graph, cluster, training, space, 1, 2, Schedule.gpipe)
    assert res.termination is Termination.optimal
    assert res.primal == pytest.approx(ref[0], rel=1e-9)


def test_generate_seq_keeps_dependent_sets_small() -> None:
    """Chain: width 1. Branchy block with b branches: width ≤ b (the open branch heads)."""
    chain = random_chain(0, 10)
    assert generate_seq(10, chain.edge_indices())[1] == 1
    g = branchy_dag(0, branches=4, depth=3)
    order, width = generate_seq(len(g.layers), g.edge_indices())
    assert sorted(order) == list(range(len(g.layers)))
    assert width <= 4


def test_dag_timeout_has_no_solution_but_a_valid_bound() -> None:
    graph = random_dag(3, 6)
    cluster, training = small_cluster(1, 4), Training(global_batch_size=16, seq_len=1024)
    t = build_cost_tables(graph, cluster, training, SearchSpace(), default_params(), 1, 4, Schedule.one_f_one_b)
    cut, full = solve(t, limit=1e-9), solve(t)
    assert cut.termination is Termination.time_limit_no_solution and cut.primal is None
    assert cut.lower_bound <= full.primal


def test_inception_v3_single_stage_is_exact() -> None:
    from autopar_opt.model_zoo import registry

    graph = registry.build_model("inception-v3")
    cluster, training = small_cluster(1, 8), Training(global_batch_size=256)
    t = build_cost_tables(graph, cluster, training, SearchSpace(), default_params(), 1, 4, Schedule.one_f_one_b)
    res = solve(t, limit=60)
    assert res.termination is Termination.optimal
    assert evaluate(t.plan_of(res.solution), graph, cluster, training).iteration_time_s == pytest.approx(res.primal, rel=1e-9)
