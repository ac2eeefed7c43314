"""Baselines are plans of the space, priced by the evaluator, never better than the optimum."""

from __future__ import annotations


from autopar_opt.model_zoo.operator_graphs import alexnet, transformer_lm
from autopar_opt.opspace import baselines as bl
from autopar_opt.opspace.solve import solve_operator_space
from support.opspace_cases import context


def test_data_parallel_splits_the_batch_over_the_devices_it_divides():
    g = alexnet(2)
    base = bl.data_parallel(g, context(4, batch=2))
    assert base.plan.mesh.shape == (1, 2) and base.plan.mesh.replicas == 2
    for op, cfg in zip(g.ops, base.plan.configs):
        assert cfg.totals(op).get("b", 1) == 2
    assert "replicas" in base.note


def test_one_weird_trick_and_data_parallel_are_never_better_than_the_optimum():
    g = alexnet(32)
    ctx = context(4, batch=32)
    opt = solve_operator_space(g, ctx, 4).value
    trick = bl.one_weird_trick(g, ctx)
    labels = [c.label(op) for op, c in zip(g.ops, trick.plan.configs)]
    assert labels[:8] == ["b4"] * 8 and labels[9:12] == ["n4"] * 3      # convs data-, FCs model-parallel
    for base in (trick, bl.data_parallel(g, ctx)):
        assert base.metrics.time_s >= opt * (1 - 1e-12)


def test_megatron_baseline_is_the_best_template_plan():
    g = transformer_lm(8, 128, 256, 4, 1024, 100, 2, embeddings=False)
    ctx = context(4, batch=8)
    meg = bl.megatron(g, ctx)
    assert meg is not None and meg.note.startswith("best per-layer template plan")
    assert meg.metrics.time_s >= solve_operator_space(g, ctx, 4).value * (1 - 1e-12)
    assert bl.megatron(alexnet(8), context(4, batch=8)) is None           # no transformer roles


def test_megatron_baseline_stops_at_the_deadline():
    """Past the command's deadline no mesh is searched (no baseline); far from it the
    plan is the one without a deadline, with no note of a cut search."""
    import time

    g = transformer_lm(8, 128, 256, 4, 1024, 100, 2, embeddings=False)
    ctx = context(4, batch=8)
    assert bl.megatron(g, ctx, deadline=time.perf_counter() - 1.0) is None
    far = bl.megatron(g, ctx, deadline=time.perf_counter() + 3600.0)
    assert far.metrics.time_s == bl.megatron(g, ctx).metrics.time_s and "time limit" not in far.note
