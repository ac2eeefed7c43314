"""Mixed fleets (issue 34): DP = MILP (= MIQP when SCIP is installed) = brute force.

Instances: two groups (A100 and H100 nodes, at most 8 GPUs together), chains of
2-5 layers, some with a memory reserve that makes the A100 group tight or full.
The brute force (tests/support/fleet_bruteforce.py) enumerates every stage
split and every per-layer strategy on each stage's own group, priced from the
cost functions without the tables, and re-priced by evaluate.

- per configuration (stage groups, devices, micro-batches, schedule): the DP's,
  the HiGHS MILP's and the SCIP MIQP's optima equal the brute force, or all
  prove infeasibility; evaluate equals the objective;
- whole searches: the certified optimum equals the brute force over pipelines
  and replica classes; a case where using both groups strictly beats each group
  alone, and one where a slow group behind a slow link cannot help, proven.
"""

from __future__ import annotations

import random

import pytest

from autopar_opt.core.result import Termination
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.cost.fleet_tables import build_fleet_tables
from autopar_opt.cost.params import default_params
from autopar_opt.formulations import build_formulation
from autopar_opt.ir.replicas import ReplicaPlan
from autopar_opt.ir.training import Recompute, SearchSpace, Training
from autopar_opt.model_zoo.synthetic import random_chain
from autopar_opt.search.engine import SearchOptions
from autopar_opt.search.fleet import fleet_outer_configs
from autopar_opt.search.mixed import run_fleet_search
from autopar_opt.search.replicas import batch_quantum
from autopar_opt.solvers.dp import solve_dp
from autopar_opt.solvers.registry import get_backend
from support.fleet_bruteforce import pipeline_optimum, replica_optimum, shape_optimum
from support.fleets import NO_OVERHEAD, SPACE, two_groups

SEEDS = range(10)


def _instance(seed: int):
    rng = random.Random(seed)
    fleet = two_groups(slow=rng.choice([(1, 2), (1, 4), (2, 2)]), fast=rng.choice([(1, 2), (1, 4)]),
                       slow_device="A100-40GB", link_gb_per_s=rng.choice([1.0, 12.5]),
                       slow_inter_gb_per_s=12.5)
    graph = random_chain(seed, rng.randint(2, 5))
    training = Training(global_batch_size=8, seq_len=1024,
                        memory_reserve_gib=rng.choice([0.0, 20.0, 32.0, 36.0]))
    configs = fleet_outer_configs(graph, fleet, training, SPACE, mixed=True)
    rng.shuffle(configs)
    return fleet, graph, training, configs[:3]


@pytest.mark.parametrize("seed", SEEDS)
def test_every_exact_method_equals_brute_force_per_configuration(seed: int) -> None:
    fleet, graph, training, configs = _instance(seed)
    params = default_params()
    scip = get_backend("scip").available()[0]
    for cfg in configs:
        t = build_fleet_tables(graph, fleet, training, SPACE, params, cfg.microbatches, cfg.schedule,
                               cfg.stage_groups, cfg.stage_devices)
        ref = shape_optimum(graph, fleet, training, SPACE, params, cfg.stage_groups,
                            cfg.stage_devices, cfg.microbatches, cfg.schedule)
        if any(not s for s in t.strategies):
            assert ref is None
            continue
        results = {"dp": solve_dp(t)}
        milp = build_formulation(t, "milp")
        results["milp"] = get_backend("highs").solve_model(milp.matrix(), milp.problem_class,
                                                           time_limit_s=60, rel_gap=1e-9)
        if scip:
            miqp = build_formulation(t, "miqp")
            results["miqp"] = get_backend("scip").solve_model(miqp.model, miqp.problem_class,
                                                              time_limit_s=60, rel_gap=1e-9)
        for name, res in results.items():
            if ref is None:
                assert res.termination is Termination.infeasible, (cfg.label(), name)
                continue
            assert res.termination is Termination.optimal, (cfg.label(), name, res.message)
            assert res.primal == pytest.approx(ref[0], rel=1e-6), (cfg.label(), name)
        if ref is not None:
            plan = t.plan_of(results["dp"].solution)
            assert evaluate(plan, graph, fleet, training, params).iteration_time_s == \
                pytest.approx(ref[0], rel=1e-9)
            assert evaluate(milp.decode(), graph, fleet, training, params).iteration_time_s == \
                pytest.approx(ref[0], rel=1e-6)


def _search(graph, fleet, training, space, params, solver: str):
    return run_fleet_search(graph, fleet, training, space, params,
                            SearchOptions(solver=solver, rel_gap=0.0, time_limit_s=120), split_parts=8)


@pytest.mark.parametrize("seed", [0, 3, 7])
def test_whole_search_equals_brute_force(seed: int) -> None:
    fleet, graph, training, _ = _instance(seed)
    space = SearchSpace(zero_levels=(0, 3), recompute=(Recompute.none, Recompute.full),
                        microbatches=(1, 2))
    pipe = pipeline_optimum(graph, fleet, training, space, NO_OVERHEAD)
    rep = replica_optimum(graph, fleet, training, space, batch_quantum(8, 8), NO_OVERHEAD)
    best = min([v for v in (pipe and pipe[0], rep) if v is not None], default=None)
    for solver in ("dp", "highs"):
        r = _search(graph, fleet, training, space, NO_OVERHEAD, solver)
        if best is None:
            assert r.plan is None and r.certificate.infeasible
            continue
        assert r.certificate.primal == pytest.approx(best, rel=1e-9)
        assert r.certificate.exact and r.certificate.gap <= 1e-9


# The two hand-made cases: a 3-layer chain (seed 2), batch 128 in 4 or 8 micro-batches,
# group 0 one node of 2 slower GPUs, group 1 one node of 2 H100s.
CASE_SPACE = SearchSpace(zero_levels=(0, 3), recompute=(Recompute.none, Recompute.full),
                         microbatches=(4, 8))


def test_both_groups_strictly_beat_either_group_alone() -> None:
    """A100s beside H100s over a 25 GB/s link: each group alone is slower than replicas
    on both with the batch split 32 + 96 (the A100s add a third of the H100s' speed)."""
    fleet = two_groups(slow=(1, 2), fast=(1, 2), link_gb_per_s=25.0)
    graph = random_chain(2, 3)
    training = Training(global_batch_size=128, seq_len=1024)
    alone = [pipeline_optimum(graph, fleet, training, CASE_SPACE, NO_OVERHEAD, groups=(g,))[0]
             for g in (0, 1)]
    rep = replica_optimum(graph, fleet, training, CASE_SPACE, batch_quantum(128, 8), NO_OVERHEAD)
    assert rep < min(alone) * 0.9
    for solver in ("dp", "highs"):
        r = _search(graph, fleet, training, CASE_SPACE, NO_OVERHEAD, solver)
        assert isinstance(r.plan, ReplicaPlan) and r.plan.batches == (32, 96)
        assert r.certificate.primal == pytest.approx(rep, rel=1e-9)
        assert r.certificate.exact and r.certificate.gap <= 1e-9
        assert r.metrics.iteration_time_s < min(alone)


def test_a_slow_group_behind_a_slow_link_cannot_help_and_the_search_proves_it() -> None:
    """A100-40GB behind a 0.5 GB/s link: every plan using it is slower than the H100s
    alone (replicas pay the gradient all-reduce over the link, pipelines their
    activations); the certificate proves the H100-only optimum with gap 0, every
    configuration that uses the A100s bounded at or above it."""
    fleet = two_groups(slow=(1, 2), fast=(1, 2), slow_device="A100-40GB", link_gb_per_s=0.5)
    graph = random_chain(2, 3)
    training = Training(global_batch_size=128, seq_len=1024)
    fast_alone = pipeline_optimum(graph, fleet, training, CASE_SPACE, NO_OVERHEAD, groups=(1,))[0]
    for solver in ("dp", "highs"):
        r = _search(graph, fleet, training, CASE_SPACE, NO_OVERHEAD, solver)
        assert r.plan.stage_groups and set(r.plan.stage_groups) == {1}
        assert r.certificate.primal == pytest.approx(fast_alone, rel=1e-9)
        assert r.certificate.exact and r.certificate.gap <= 1e-9
        using_slow = [rec for rec in r.certificate.configurations
                      if 0 in (getattr(rec.config, "stage_groups", None) or ())
                      or hasattr(rec.config, "batches")]
        assert using_slow and all(rec.lower_bound >= fast_alone * (1 - 1e-9) for rec in using_slow)


def _own_fabrics(seed: int):
    """QA round 36: two groups of different generations, each with its own NVLink and NIC
    rates (A100-80GB 100 GB/s NVLink + 12.5 GB/s NIC, H200 450 + 50), a 12.5 GB/s link;
    one node of 2 GPUs each."""
    from autopar_opt.ir.fleet import Fleet, GroupLink
    from autopar_opt.ir.hardware import LinkTier, make_cluster
    a = make_cluster("a", 1, 2, "A100-80GB", intra_node=LinkTier("nvl", 100.0, 5.0),
                     inter_node=LinkTier("ib", 12.5, 10.0))
    b = make_cluster("b", 1, 2, "H200-141GB", intra_node=LinkTier("nvl", 450.0, 5.0),
                     inter_node=LinkTier("ib", 50.0, 10.0))
    return Fleet("mix", (a, b), (GroupLink("a", "b", LinkTier("dc", 12.5, 20.0)),)), random_chain(seed, 4)


@pytest.mark.parametrize("batch, microbatches, used", [(8, (1, 2), {1}), (128, (4, 8), {0, 1})])
def test_every_route_of_the_whole_search_equals_brute_force_on_groups_of_their_own_fabrics(
        batch: int, microbatches: tuple[int, ...], used: set[int]) -> None:
    """The default route (auto) and every installed solver route (dp, highs, scip; gurobi
    when licensed) prove the brute-force optimum over pipelines and replica classes, the
    bound equal to it (QA round 36: 22 random instances agreed, this one kept): batch 8 on
    the H200s with the A100s idle, batch 128 one pipeline over both groups."""
    fleet, graph = _own_fabrics(1)
    training = Training(global_batch_size=batch, seq_len=1024)
    space = SearchSpace(zero_levels=(0, 3), recompute=(Recompute.none, Recompute.full),
                        microbatches=microbatches)
    pipe = pipeline_optimum(graph, fleet, training, space, NO_OVERHEAD)
    rep = replica_optimum(graph, fleet, training, space, batch_quantum(batch, 8), NO_OVERHEAD)
    best = min(v for v in (pipe and pipe[0], rep) if v is not None)
    routes = ["auto", "dp", "highs"] + [s for s in ("scip", "gurobi") if get_backend(s).available()[0]]
    for solver in routes:
        r = _search(graph, fleet, training, space, NO_OVERHEAD, solver)
        assert r.certificate.primal == pytest.approx(best, rel=1e-9), solver
        assert r.certificate.lower_bound <= best * (1 + 1e-9), solver
        assert r.certificate.exact and r.certificate.gap <= 1e-9, solver
        assert set(r.plan.stage_groups) == used, solver
