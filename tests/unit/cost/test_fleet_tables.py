"""Cost tables and evaluate on a mixed fleet (issue 34; docs/DESIGN.md §3, fleets).

Oracles: a one-group fleet gives exactly the homogeneous tables; the
reference-byte scaling accepts exactly the assignments whose true stage memory
fits its own group (checked against evaluate on random assignments); the DP's
objective equals evaluate; a homogeneous plan priced on the one-group fleet
equals today's evaluate; the cross-group all-reduce is the ring formula by hand.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from autopar_opt.core.assignment import Assignment
from autopar_opt.cost.collectives import allreduce_time
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.cost.fleet_tables import build_fleet_tables
from autopar_opt.cost.params import default_params
from autopar_opt.cost.replicas import cross_class_sync, evaluate_replicas
from autopar_opt.cost.state import reduced_grad_bytes
from autopar_opt.cost.tables import build_cost_tables, fits
from autopar_opt.ir.fleet import Fleet
from autopar_opt.ir.pipeline import PlanError
from autopar_opt.ir.replicas import ReplicaClass, ReplicaPlan
from autopar_opt.ir.training import Schedule, Training
from autopar_opt.model_zoo.synthetic import random_chain
from autopar_opt.solvers.dp import solve_dp
from support.fleets import SPACE, two_groups

ARRAYS = ("time", "sync", "weight_bytes", "act_bytes", "working_bytes", "reshard", "cross_intra",
          "cross_inter")


@pytest.mark.parametrize("pp,c", [(1, 2), (2, 4), (4, 1)])
def test_one_group_fleet_tables_equal_the_homogeneous_tables(pp: int, c: int) -> None:
    fleet = two_groups(slow=(2, 2), fast=(1, 4))
    graph, params = random_chain(3, 5), default_params()
    training = Training(global_batch_size=16, seq_len=1024)
    ref = build_cost_tables(graph, fleet.groups[0], training, SPACE, params, pp, c, Schedule.one_f_one_b)
    got = build_fleet_tables(graph, fleet, training, SPACE, params, c, Schedule.one_f_one_b,
                             (0,) * pp, (4 // pp,) * pp)
    for name in ARRAYS:
        for x, y in zip(getattr(ref, name), getattr(got, name)):
            assert np.array_equal(x, y), name
    assert [s.layout for s in ref.strategies[0]] == [s.layout for s in got.strategies[0]]
    assert got.boundary_intra == ref.boundary_intra and got.capacity_bytes == ref.capacity_bytes
    assert got.allowed_in_stage(0) is None


def test_reference_bytes_accept_exactly_what_fits_each_group() -> None:
    """A100-40GB beside H100-80GB with a large reserve: the two capacities differ
    several times, so the scaling decides; every random assignment is feasible in the
    tables iff evaluate says every stage fits its own device. The reserve is the first
    of a ladder at which both outcomes occur (the calibrated runtime reserve moves it)."""
    fleet = two_groups(slow=(1, 2), fast=(1, 2), slow_device="A100-40GB")
    graph, params = random_chain(5, 4), default_params()
    both = False
    for reserve in (30.0, 31.0, 32.0, 33.0, 34.0, 35.0, 36.0):
        training = Training(global_batch_size=16, seq_len=1024, memory_reserve_gib=reserve)
        t = build_fleet_tables(graph, fleet, training, SPACE, params, 2, Schedule.one_f_one_b,
                               (0, 1), (2, 2))
        assert t.memory_scale[1] < 0.5 and t.memory_scale[0] == 1.0      # C_ref / C_g, ref = stage 0
        rng = random.Random(0)
        seen = set()
        for _ in range(150):
            cut = rng.randint(1, 3)
            stage = [0] * cut + [1] * (4 - cut)
            choice = [int(rng.choice(list(np.flatnonzero(t.allowed_in_stage(i)[u]))))
                      for u, i in enumerate(stage)]
            a = Assignment(stage, choice)
            metrics = evaluate(t.plan_of(a), graph, fleet, training, params)
            assert fits(t, a) == metrics.feasible
            seen.add(metrics.feasible)
        both = both or seen == {True, False}
    assert both


@pytest.mark.parametrize("groups,sizes,c", [((0, 1), (2, 4), 2), ((1, 0), (4, 2), 4),
                                            ((1, 1, 0), (2, 2, 2), 1)])
def test_dp_objective_equals_evaluate_on_mixed_stages(groups, sizes, c) -> None:
    fleet = two_groups(slow=(1, 2), fast=(1, 4), link_gb_per_s=5.0)
    graph, params = random_chain(7, 5), default_params()
    training = Training(global_batch_size=16, seq_len=1024)
    t = build_fleet_tables(graph, fleet, training, SPACE, params, c, Schedule.gpipe, groups, sizes)
    res = solve_dp(t)
    plan = t.plan_of(res.solution)
    assert plan.stage_groups == list(groups)
    assert all(s.group == groups[i] for i, st in enumerate(plan.stages) for s in st.strategies)
    assert evaluate(plan, graph, fleet, training, params).iteration_time_s == pytest.approx(
        res.primal, rel=1e-9)


def test_homogeneous_plan_priced_alike_on_the_one_group_fleet() -> None:
    fleet = two_groups(slow=(2, 2), fast=(1, 4))
    graph, params = random_chain(3, 5), default_params()
    training = Training(global_batch_size=16, seq_len=1024)
    t = build_cost_tables(graph, fleet.groups[1], training, SPACE, params, 2, 2, Schedule.one_f_one_b)
    plan = t.plan_of(solve_dp(t).solution)
    tagged = t.plan_of(solve_dp(t).solution)
    for st in tagged.stages:
        st.strategies = [s.__class__(**{**s.__dict__, "group": 1}) for s in st.strategies]
    tagged.stage_groups, tagged.stage_devices = [1, 1], [2, 2]
    one = evaluate(plan, graph, fleet.groups[1], training, params)
    two = evaluate(tagged, graph, fleet, training, params)
    assert two.iteration_time_s == one.iteration_time_s
    assert [s.peak_memory_gib for s in two.stages] == [s.peak_memory_gib for s in one.stages]
    # MFU over the whole fleet's peak, the idle group 0 included (as on one cluster)
    peak = [g.num_devices * g.device.datasheet_flops(training.dtype) for g in fleet.groups]
    assert two.mfu == pytest.approx(one.mfu * peak[1] / sum(peak), rel=1e-12)
    assert evaluate(plan, graph, Fleet.of(fleet.groups[1]), training, params).iteration_time_s == \
        one.iteration_time_s


def test_cross_class_sync_is_the_ring_all_reduce_over_the_slowest_path() -> None:
    fleet = two_groups(slow=(1, 2), fast=(1, 4), link_gb_per_s=5.0)
    graph, params = random_chain(3, 4), default_params()
    training = Training(global_batch_size=16, seq_len=1024)
    grad = sum(layer.params for layer in graph.layers) * reduced_grad_bytes(training, 0)
    sync = cross_class_sync(graph, fleet, training, params, ((0,), (1,)))
    tier = fleet.path_tier(0, 1)                      # 5 GB/s, 30 µs
    by_hand = 2 * 1 * tier.latency_s + 2 * 1 / 2 * (grad / 2) / (5e9 * params.inter_comm_efficiency)
    assert sync.rings == 2 and sync.time_s == pytest.approx(by_hand, rel=1e-12)
    assert sync.time_s == allreduce_time(2, grad / 2, tier, params.inter_comm_efficiency)
    assert cross_class_sync(graph, fleet, training, params, ((0, 1),)).time_s == 0.0


def test_replica_plan_is_the_slowest_class_plus_the_sync() -> None:
    fleet = two_groups(slow=(1, 2), fast=(1, 2))
    graph, params = random_chain(3, 3), default_params()
    training = Training(global_batch_size=16, seq_len=1024)
    classes = []
    for g, batch in ((0, 4), (1, 12)):
        tr = Training(global_batch_size=batch, seq_len=1024)
        t = build_fleet_tables(graph, fleet, tr, SPACE, params, 1, Schedule.one_f_one_b, (g,), (2,))
        classes.append(ReplicaClass((g,), batch, t.plan_of(solve_dp(t).solution)))
    m = evaluate_replicas(ReplicaPlan(classes), graph, fleet, training, params)
    each = [evaluate(c.plan, graph, fleet, Training(global_batch_size=c.batch, seq_len=1024), params)
            for c in classes]
    sync = cross_class_sync(graph, fleet, training, params, ((0,), (1,))).time_s
    assert m.iteration_time_s == max(e.iteration_time_s for e in each) + sync
    assert m.samples_per_s == pytest.approx(16 / m.iteration_time_s)
    assert 0 < m.mfu < max(e.mfu for e in each)
    with pytest.raises(PlanError, match="sum to the global batch"):
        evaluate_replicas(ReplicaPlan([classes[0], ReplicaClass((1,), 4, classes[1].plan)]),
                          graph, fleet, training, params)
    with pytest.raises(PlanError, match="share a group"):
        evaluate_replicas(ReplicaPlan([classes[0], ReplicaClass((0,), 12, classes[0].plan)]),
                          graph, fleet, training, params)
    assert not math.isnan(m.sync_s)
