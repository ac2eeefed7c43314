"""Pipeline stages with the operator space inside (fixed split): MILP = brute force.

Tiny random operator graphs split into two stages of two devices (2 or 1 node(s)), 1-4
micro-batches, 1F1B and GPipe: the MILP's plan prices (by :func:`pipeline_objective`, the
DESIGN §3 formula on the tables) at the least value over every configuration choice, with
each stage's memory within a limit that binds; one stage with one micro-batch is the
single-stage objective.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from autopar_opt.cost.operators.tables import build_tables
from autopar_opt.ir.mesh import Mesh
from autopar_opt.ir.training import Schedule
from autopar_opt.opspace.pipeline import (StageSplit, layer_splits, pipeline_objective, pipeline_tables,
                                          solve_split, split_lower_bound)
from support.opspace_cases import context, random_graph


def _brute(t, capacity):
    best, arg = math.inf, None
    for ch in itertools.product(*[range(len(c)) for c in t.configs]):
        value, mem = pipeline_objective(t, list(ch))
        if max(mem) <= capacity * (1 + 1e-9) and value < best:
            best, arg = value, list(ch)
    return best, arg


@pytest.mark.parametrize("seed, c, schedule, gpn", [(0, 1, Schedule.one_f_one_b, 4), (1, 2, Schedule.one_f_one_b, 2),
                                                    (2, 4, Schedule.gpipe, 2), (3, 3, Schedule.one_f_one_b, 4)])
def test_split_milp_equals_brute_force(seed, c, schedule, gpn):
    g = random_graph(np.random.default_rng(seed), 4)
    ctx = context(4, gpus_per_node=gpn)
    split = StageSplit((0, 0, 1, 1), 2, c, schedule)
    t = pipeline_tables(g, ctx, split, (1, 2))
    best, _ = _brute(t, math.inf)
    out = solve_split(t)
    assert out.status == "optimal" and out.value == pytest.approx(best, rel=1e-7)
    assert split_lower_bound(t) <= best * (1 + 1e-12)
    # a memory limit between the least and the free optimum's stage memory binds
    _, mem = pipeline_objective(t, out.choice)
    least = max(sum(float((t.weight[v] + t.inflight[i] * t.act[v]).min()) for v in range(4)
                    if split.stage[v] == i) for i in range(2))
    cap = least + 0.5 * (max(mem) - least)
    t.capacity_bytes = cap
    best_m, arg = _brute(t, cap)
    out_m = solve_split(t)
    if arg is None:
        assert out_m.status == "infeasible"
    else:
        assert out_m.value == pytest.approx(best_m, rel=1e-7)
        assert max(pipeline_objective(t, out_m.choice)[1]) <= cap * (1 + 1e-9)


def test_one_stage_one_microbatch_is_the_single_stage_objective():
    g = random_graph(np.random.default_rng(5), 5)
    ctx = context(4)
    t = pipeline_tables(g, ctx, StageSplit((0,) * 5, 1, 1), (2, 2))
    single = build_tables(g, ctx, Mesh((2, 2), 4))
    rng = np.random.default_rng(0)
    for _ in range(20):
        ch = [int(rng.integers(len(c))) for c in t.configs]
        assert pipeline_objective(t, ch)[0] == pytest.approx(single.objective(ch), rel=1e-12)


def test_layer_splits_cut_only_between_layers():
    from autopar_opt.model_zoo.operator_graphs import transformer_lm
    g = transformer_lm(2, 16, 32, 4, 64, 100, 3, embeddings=False)
    splits = layer_splits(g, 2)
    assert len(splits) == 2                      # 3 blocks: after block 0 or after block 1
    for st in splits:
        assert StageSplit(st, 2, 1).problem(len(g.ops)) is None
        layers = {}
        for op, s in zip(g.ops, st):
            layers.setdefault(op.layer, set()).add(s)
        assert all(len(s) == 1 for s in layers.values())


def test_joint_search_over_splits_keeps_the_best_and_a_valid_bound():
    """pp ∈ {1, 2}, c ∈ {1, 2}: the joint search's best equals the least of the splits
    solved one by one, and its bound is at most its value."""
    from autopar_opt.model_zoo.operator_graphs import transformer_lm
    from autopar_opt.opspace.pipeline import solve_pipeline

    def graph_for(mb):
        return transformer_lm(mb, 64, 128, 4, 512, 100, 2, embeddings=False)

    ctx = context(4, gpus_per_node=2, batch=4)
    res = solve_pipeline(graph_for, ctx, [1, 2], [1, 2], reduce_scatter=False)
    assert res.best is not None and res.best.status == "optimal"
    assert res.lower_bound <= res.best.value * (1 + 1e-9)
    one_by_one = min(o.value for o in res.outcomes if o.value is not None)
    assert res.best.value == pytest.approx(one_by_one)
    # every pruned configuration's bound is at least the best value
    assert all(b >= res.best.value * (1 - 1e-9) for _, _, b in res.pruned)


@pytest.mark.parametrize("seed, gpn", [(6, 2), (7, 4)])
def test_independent_pipeline_evaluator_equals_the_tables(seed, gpn):
    """evaluate_pipeline (fresh pricing, device-by-device redistribution and transfer) =
    pipeline_objective (the vectorised tables the MILP reads) on random plans."""
    from autopar_opt.opspace.pipeline import evaluate_pipeline
    g = random_graph(np.random.default_rng(seed), 5)
    ctx = context(4, gpus_per_node=gpn)
    split = StageSplit((0, 0, 1, 1, 1), 2, 3)
    t = pipeline_tables(g, ctx, split, (2, 1))
    rng = np.random.default_rng(seed)
    for _ in range(10):
        ch = [int(rng.integers(len(c))) for c in t.configs]
        value, mem = evaluate_pipeline(g, ctx, split, (2, 1), [t.configs[v][k] for v, k in enumerate(ch)])
        ref, ref_mem = pipeline_objective(t, ch)
        assert value == pytest.approx(ref, rel=1e-12) and mem == pytest.approx(ref_mem, rel=1e-12)
