"""Interleaved (virtual-pipeline) schedules in the searched space (issue 29).

Megatron-Core runs interleaved 1F1B with ``v`` virtual stages per rank on its
default even split, every rank's layers divisible by ``v`` and the
micro-batches a multiple of ``pp`` (ir/target.py ``vp_problem``, cited from
Megatron-Core 0.16.1). Oracle: brute force over every split and strategy
combination of each interleaved configuration (tests/support/bruteforce.py,
priced apart from the cost tables and checked against evaluate()), keeping the
plans the Megatron exporter accepts (its rules are written apart from
ir/target.py), one recomputation mode for the model as in test_runnable.py.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from support.bruteforce import brute_force
from support.exportable import megatron_accepts
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import build_cost_tables
from autopar_opt.export import ExportError, export_plan, plan_view
from autopar_opt.ir.target import interleaved_split, vp_problem
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training
from autopar_opt.model_zoo.registry import build_model, get_cluster
from autopar_opt.search.configs import outer_configs
from autopar_opt.search.engine import SearchOptions, run_search
from autopar_opt.search.runnable import runnable_space
from autopar_opt.solvers.dp import solve_dp

GRAPH = build_model("debug-moe", overrides={"num_layers": 4})
CLUSTER = get_cluster("debug-2x4")
TRAINING = Training(global_batch_size=8, seq_len=128)
SPACE = SearchSpace(pp_degrees=(2,), tp_degrees=(1, 2), zero_levels=(1,),
                    sequence_parallel=(True,), recompute=(Recompute.none, Recompute.full),
                    ep_degrees=(1, 2), etp_degrees=(0,), microbatches=(2, 4),
                    schedules=(Schedule.one_f_one_b, Schedule.interleaved))


_megatron_accepts = megatron_accepts(GRAPH, CLUSTER, TRAINING)


def test_megatron_rules_of_virtual_stages():
    layers = GRAPH.layers            # embedding, 4 MoE blocks, head
    assert interleaved_split(layers, 2) == [0, 0, 0, 1, 1, 1]
    assert vp_problem(layers, 2, 2, 4) is None
    assert "multiple of pp" in vp_problem(layers, 2, 2, 3)
    assert "do not divide" in vp_problem(layers, 2, 4, 4)
    assert "more than one" in vp_problem(layers, 1, 2, 4)
    labels = [c.label() for c in outer_configs(GRAPH, CLUSTER, TRAINING, SPACE)]
    assert labels == ["pp=2 c=2 1f1b", "pp=2 c=2 interleaved vp=2", "pp=2 c=4 1f1b",
                      "pp=2 c=4 interleaved vp=2"]


def test_one_stage_is_not_called_interleaved_when_only_interleaving_is_listed():
    """pp = 1 has no pipeline (Megatron-Core: forward_backward_no_pipelining): its
    configurations read 1f1b even when search.schedules lists interleaved alone (QA round
    10: a one-stage plan read schedule=interleaved); pp = 2 keeps its vp = 1 and 2."""
    from dataclasses import replace
    only = replace(SPACE, pp_degrees=(1, 2), schedules=(Schedule.interleaved,))
    labels = [c.label() for c in outer_configs(GRAPH, CLUSTER, TRAINING, only)]
    assert [x for x in labels if x.startswith("pp=1")] == ["pp=1 c=2 1f1b", "pp=1 c=4 1f1b"]
    assert "pp=2 c=4 interleaved vp=2" in labels


def test_interleaved_tables_price_what_evaluate_prices():
    """The stored 1/v times with v·c rounds, and the interleaved in-flight memory,
    give evaluate()'s value for every plan the DP returns."""
    space = runnable_space(SPACE, "megatron")
    for cfg in outer_configs(GRAPH, CLUSTER, TRAINING, space):
        tables = build_cost_tables(GRAPH, CLUSTER, TRAINING, space, default_params(), cfg.pp,
                                   cfg.microbatches, cfg.schedule, vp=cfg.vp)
        out = solve_dp(tables)
        assert out.primal is not None
        plan = tables.plan_of(out.solution)
        assert plan.vp_chunks == cfg.vp
        metrics = evaluate(plan, GRAPH, CLUSTER, TRAINING, default_params())
        assert metrics.feasible
        assert metrics.iteration_time_s == pytest.approx(out.primal, rel=1e-9)


@functools.lru_cache(maxsize=1)
def _oracle():
    """The best plan Megatron accepts over the target's configurations, by brute force."""
    space = runnable_space(SPACE, "megatron")
    best, best_plan = math.inf, None
    for cfg in outer_configs(GRAPH, CLUSTER, TRAINING, space):
        ref = brute_force(GRAPH, CLUSTER, TRAINING, SPACE, cfg.pp, cfg.microbatches, cfg.schedule,
                          accept=_megatron_accepts, vp=cfg.vp)
        if ref is not None and ref[0] < best:
            best, best_plan = ref
    return best, best_plan


@pytest.mark.parametrize("solver", ["dp", "highs"])
def test_runnable_optimum_with_interleaving_equals_brute_force(solver):
    space = runnable_space(SPACE, "megatron")
    best, best_plan = _oracle()
    assert best_plan is not None and best_plan.vp_chunks == 2   # interleaving wins here
    res = run_search(GRAPH, CLUSTER, TRAINING, space, default_params(),
                     SearchOptions(solver=solver, time_limit_s=60, rel_gap=0.0,
                                   warm_start=solver != "highs"))
    assert res.metrics.iteration_time_s == pytest.approx(best, rel=1e-9)
    assert res.certificate.lower_bound == pytest.approx(best, rel=1e-9)
    assert res.plan.schedule is Schedule.interleaved and res.plan.vp_chunks == 2
    assert _megatron_accepts(res.plan)
    # without interleaving the optimum is worse: the schedule is what moved it
    plain = runnable_space(SearchSpace(**{**SPACE.__dict__, "schedules": (Schedule.one_f_one_b,)}),
                           "megatron")
    res1 = run_search(GRAPH, CLUSTER, TRAINING, plain, default_params(),
                      SearchOptions(solver="dp", time_limit_s=60, rel_gap=0.0))
    assert res1.metrics.iteration_time_s > best


def test_the_megatron_exporter_refuses_what_megatron_core_refuses():
    space = runnable_space(SPACE, "megatron")
    res = run_search(GRAPH, CLUSTER, TRAINING, space, default_params(),
                     SearchOptions(solver="dp", time_limit_s=60, rel_gap=0.0))
    plan = res.plan
    bad = type(plan)(plan.stages, 3 if plan.microbatches != 3 else 5, plan.schedule, 2)
    with pytest.raises(ExportError, match="multiple of the pipeline stages"):
        export_plan(bad, GRAPH, CLUSTER, Training(global_batch_size=6, seq_len=128), "megatron")
    four = type(plan)(plan.stages, plan.microbatches, plan.schedule, 4)
    with pytest.raises(ExportError, match="do not divide into 4 virtual stages"):
        export_plan(four, GRAPH, CLUSTER, TRAINING, "megatron")


def test_exported_interleaved_optimum_passes_megatron_core():
    """The VP flags of the exported optimum pass Megatron-Core's TransformerConfig,
    initialize_model_parallel and get_num_layers_to_build, and Megatron-LM's
    parse_args / validate_args (tests/support/frameworks.py)."""
    pytest.importorskip("megatron.core")
    from support.frameworks import validate_megatron

    space = runnable_space(SPACE, "megatron")
    res = run_search(GRAPH, CLUSTER, TRAINING, space, default_params(),
                     SearchOptions(solver="dp", time_limit_s=60, rel_gap=0.0))
    assert res.plan.vp_chunks == 2
    text = export_plan(res.plan, GRAPH, CLUSTER, TRAINING, "megatron").text
    assert "--num-virtual-stages-per-pipeline-rank 2" in text
    out = validate_megatron(text, CLUSTER.num_devices)
    view = plan_view(res.plan, GRAPH, CLUSTER, TRAINING)
    assert out["config"].virtual_pipeline_model_parallel_size == 2
    assert out["layers_per_rank"] == view.blocks_per_stage == [2, 2]
    assert out["microbatches"] == res.plan.microbatches
    pytest.importorskip("megatron.training.arguments")
    from support.frameworks import validate_megatron_lm     # Megatron-LM's validate_args
    args = validate_megatron_lm(text, CLUSTER.num_devices, CLUSTER.device.arch)
    assert args.virtual_pipeline_model_parallel_size == 2


def test_interleaved_tables_keep_the_shared_edge_matrices():
    """Edges between identical layer pairs share one matrix object (cost/tables.py
    _edge_tables); the interleaved tables scale the in-stage resharding R by 1/v (a chunk
    holds 1/v of the stage's edges), keep the stage-boundary sends R' whole (a chunk sends
    the whole activation: Narayanan et al. 2021, Sec. 2.2.2), and must keep that sharing
    (scaling each edge on its own took Mixtral-8x22B's search to 5 GiB)."""
    flat = build_cost_tables(GRAPH, CLUSTER, TRAINING, SPACE, default_params(), 2, 4,
                             Schedule.one_f_one_b)
    inter = build_cost_tables(GRAPH, CLUSTER, TRAINING, SPACE, default_params(), 2, 4,
                              Schedule.interleaved, vp=2)
    for a, b, scale in ((flat.reshard, inter.reshard, 0.5),
                        (flat.cross_intra, inter.cross_intra, 1.0),
                        (flat.cross_inter, inter.cross_inter, 1.0)):
        assert len({id(m) for m in b}) == len({id(m) for m in a})
        assert len({id(m) for m in a}) < len(a)        # the model has repeated edges
        for x, y in zip(a, b):
            assert y == pytest.approx(x * scale)
    assert any(np.any(m > 0) for m in flat.cross_inter + flat.cross_intra)   # sends priced


def test_interleaved_latency_by_hand():
    """evaluate()'s interleaved latency on a hand case: pp = 2, v = 2, c = 3, stage
    compute 4 and 2 s, one boundary send of 1.5 s, sync 0.5 s. Chunk stages 2 and 1 s,
    the send whole (Narayanan et al. 2021, Sec. 2.2.2), bottleneck max(2, 1, 1.5) = 2:
    T = (2 + 1) + 1.5 + (3·2 - 1)·2 + 0.5 = 15. Dividing the send by v as well (the
    earlier model) would give 3 + 0.75 + 10 + 0.5 = 14.25."""
    from autopar_opt.cost.evaluate import pipeline_latency

    t = pipeline_latency([4.0, 2.0], [1.5], [0.5, 0.2], 3, Schedule.interleaved, 2)
    assert t == pytest.approx(15.0)
    # a send slower than a chunk is the bottleneck of every chunk round: (2 + 1) + 3 + 5·3
    assert pipeline_latency([4.0, 2.0], [3.0], [0.0], 3, Schedule.interleaved, 2) == \
        pytest.approx(21.0)
    # without sends: c·max p + (Σp - max p)/v = 12 + 1 = 13 (+ sync)
    assert pipeline_latency([4.0, 2.0], [0.0], [0.5], 3, Schedule.interleaved, 2) == \
        pytest.approx(13.5)
