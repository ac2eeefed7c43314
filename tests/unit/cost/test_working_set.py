"""The working set of the layer in flight (cost/memory.py ``working_set_bytes``).

Oracles:

- a hand-derived stage peak: one stage holding a fully recomputed layer and a ZeRO-3
  layer, every byte written out from the layer sizes (Chen et al. 2016 Sec. 3 and
  Korthikanti et al. 2022 Sec. 4.1 for the recomputed activations; Zhao et al. 2023
  Sec. 3.3 for two gathered units plus the unsharded gradient); the stage holds the
  larger of the two (one layer is in flight), not their sum;
- selective recomputation re-materialises the ``5·a·s²`` attention core, zero under
  fused attention;
- brute force over every plan of tiny instances whose capacity lies where the working
  set binds (some plan fits without the term and not with it, and it is faster than
  the optimum): brute force (pure cost functions, no tables) = exhaustive enumeration
  of the tables' assignments = DP = MILP = MIQP (SCIP, when installed) = the block
  MILP, and ``evaluate`` of each solver's plan equals its objective and fits.
"""

from __future__ import annotations


import numpy as np
import pytest

from support.bruteforce import brute_force
from support.solver_agreement import assert_all_reach, assignments, memory_limit, solve_every_way
from autopar_opt.core.assignment import Assignment
from autopar_opt.cost.context import StageContext, user_reserve_for
from autopar_opt.cost.memory import working_set_bytes
from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import build_cost_tables, stage_memory
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.ir.graph import Layer, LayerGraph, LayerKind
from autopar_opt.ir.hardware import GIB
from autopar_opt.model_zoo.transformer import decoder_lm
from autopar_opt.ir.plan import Plan, StagePlan
from autopar_opt.ir.runtime import RUNTIMES
from autopar_opt.solvers.dp.common import iteration_time, least_memory
from autopar_opt.ir.strategies import Strategy
from autopar_opt.model_zoo.synthetic import small_cluster
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training

MB = 1e6


def _two_layers() -> LayerGraph:
    """Two blocks with round per-sample sizes (no attention-core term)."""
    a = Layer("a", LayerKind.transformer_block, flops_fwd=1e9, flops_bwd=2e9, params=50_000_000,
              act_bytes=100 * MB, input_bytes=10 * MB, output_bytes=10 * MB)
    b = Layer("b", LayerKind.transformer_block, flops_fwd=1e9, flops_bwd=2e9, params=100_000_000,
              act_bytes=60 * MB, input_bytes=10 * MB, output_bytes=10 * MB)
    return LayerGraph.chain("two", [a, b])


def test_hand_derived_peak_of_a_recomputed_and_a_zero3_layer() -> None:
    """One stage of 2 GPUs (dp = 2), batch 8 in one micro-batch: 4 samples per GPU.

    Layer a, full recomputation, ZeRO-0: stores its input, 10 MB x 4 = 40 MB; its
    backward re-runs the forward, whose 100 MB x 4 = 400 MB are live less the
    stored input: X_a = 360 MB.
    Layer b, ZeRO-3, no recomputation: stores 60 MB x 4 = 240 MB of activations;
    in flight it holds its 16-bit parameters and the prefetched neighbour's
    (2 x 100e6 x 2 B = 400 MB) and its unsharded gradient before the
    reduce-scatter (100e6 x 2 B: the megatron-core runtime reduces in the weight
    dtype, ``fp32_grad_reduce`` off): X_b = 600 MB.
    The stage holds max(X_a, X_b) = 600 MB, not the sum 960 MB.
    """
    graph = _two_layers()
    cluster = small_cluster(1, 2)
    training = Training(global_batch_size=8, seq_len=1024)
    sa = Strategy(2, 1, zero=0, recompute=Recompute.full)
    sb = Strategy(2, 1, zero=3)
    assert training.runtime.fsdp_prefetch and not training.runtime.fp32_grad_reduce
    assert working_set_bytes(graph.layers[0], sa, 8, training) == pytest.approx(360 * MB)
    assert working_set_bytes(graph.layers[1], sb, 8, training) == pytest.approx(600 * MB)
    plan = Plan([StagePlan(["a", "b"], [sa, sb])], 1, Schedule.one_f_one_b)
    m = evaluate(plan, graph, cluster, training)
    st = m.stages[0]
    assert st.working_gib == pytest.approx(600 * MB / GIB, rel=1e-12)
    # weights + grads + optimizer (18 B/param before sharding: 2 + 4 fp32 grad buffer + 12)
    # a (ZeRO-0): 50e6 x 18 B; b (ZeRO-3 over 2): 100e6 x 18 B / 2
    stored = 50e6 * 18 + 100e6 * 18 / 2 + 40 * MB + 240 * MB
    assert st.peak_memory_gib - st.reserve_gib == pytest.approx((stored + 600 * MB) / GIB, rel=1e-9)
    # the same stage in the tables: stage_memory takes the max too
    t = build_cost_tables(graph, cluster, training, SearchSpace(tp_degrees=(1,)), default_params(),
                          1, 1, Schedule.one_f_one_b, prune_dominated=False)
    asg = t.assignment_of(plan)
    assert stage_memory(t, asg.stage, asg.choice)[0] == pytest.approx(stored + 600 * MB, rel=1e-12)
    # without prefetch one unit is in flight: X_b = 100e6 x (2 + 2) B
    no_prefetch = Training(global_batch_size=8, seq_len=1024,
                           runtime=RUNTIMES["megatron-lm"])
    assert not no_prefetch.runtime.fsdp_prefetch
    assert working_set_bytes(graph.layers[1], sb, 8, no_prefetch) == pytest.approx(
        100e6 * (2 + (4 if no_prefetch.runtime.fp32_grad_reduce else 2)))


def test_selective_recomputation_holds_the_attention_core_unless_fused() -> None:
    """Selective recomputation re-materialises the 5·a·s² scores of one layer:
    X = act_attn_bytes x samples per GPU with eager attention, 0 with flash attention."""
    layer = Layer("blk", LayerKind.transformer_block, params=1000, act_bytes=100 * MB,
                  act_attn_bytes=30 * MB, input_bytes=10 * MB)
    s = Strategy(1, 1, recompute=Recompute.selective)
    eager = Training(global_batch_size=4, runtime=RUNTIMES["megatron-lm"])
    assert not eager.runtime.flash_attention
    assert working_set_bytes(layer, s, 4, eager) == pytest.approx(4 * 30 * MB)
    fused = Training(global_batch_size=4)
    assert fused.runtime.flash_attention
    assert working_set_bytes(layer, s, 4, fused) == 0.0
    assert working_set_bytes(layer, Strategy(1, 1), 4, eager) == 0.0   # nothing re-run


SPACE = SearchSpace(zero_levels=(0, 3), recompute=(Recompute.none, Recompute.full),
                    sequence_parallel=(False,), tp_degrees=(1, 2))


def _instance(blocks: int, pp: int, factor: float):
    graph = decoder_lm("tiny", blocks, 256, 256, 4, 1024, 1000)
    cluster = small_cluster(1, 2 * pp)
    base = Training(global_batch_size=8, seq_len=256, runtime=RUNTIMES["megatron-lm"])
    t = build_cost_tables(graph, cluster, base, SPACE, default_params(), pp, 2, Schedule.one_f_one_b)
    reserve = user_reserve_for(least_memory(t) / GIB * factor, cluster.device.hbm_gib, default_params())
    training = Training(global_batch_size=8, seq_len=256, runtime=RUNTIMES["megatron-lm"],
                        memory_reserve_gib=reserve)
    tables = build_cost_tables(graph, cluster, training, SPACE, default_params(), pp, 2,
                               Schedule.one_f_one_b)
    return graph, cluster, training, tables


def _enumerate(tables):
    """Every assignment of the tables: (time, feasible with X, feasible without X)."""
    lim = memory_limit(tables)
    out = []
    for stage, ks, asg in assignments(tables):
        with_x = stage_memory(tables, stage, ks)
        stored = [0.0] * tables.pp
        for u, (i, k) in enumerate(zip(stage, ks)):
            stored[i] += float(tables.weight_bytes[u][k] + tables.inflight[i] * tables.act_bytes[u][k])
        out.append((iteration_time(tables, asg), max(with_x) <= lim, max(stored) <= lim, asg))
    return out


@pytest.mark.parametrize("blocks,pp,factor", [(2, 2, 1.02), (3, 2, 1.05), (2, 1, 1.1), (3, 3, 1.02)])
def test_solvers_agree_with_brute_force_where_the_working_set_binds(blocks, pp, factor) -> None:
    graph, cluster, training, tables = _instance(blocks, pp, factor)
    plans = _enumerate(tables)
    feasible = [p for p in plans if p[1]]
    assert feasible, "the instance must have a plan"
    best = min(p[0] for p in feasible)
    # the term binds: a plan that fits without it (and not with it) beats the optimum
    assert any(p[2] and not p[1] and p[0] < best * (1 - 1e-9) for p in plans)
    ref = brute_force(graph, cluster, training, SPACE, pp, 2)
    assert ref is not None and ref[0] == pytest.approx(best, rel=1e-9)
    assert_all_reach(solve_every_way(tables, pp), best, tables, graph, cluster, training)


def test_a_stage_mixing_strategies_holds_the_largest_working_set() -> None:
    """Evaluate and the tables agree on a stage of several strategies: the stage's
    working set is the largest of its layers', and the stage memory is the stored
    sum plus that maximum (checked against the per-layer costs)."""
    graph = decoder_lm("tiny", 3, 256, 256, 4, 1024, 1000)
    cluster = small_cluster(1, 2)
    training = Training(global_batch_size=8, seq_len=256, runtime=RUNTIMES["megatron-lm"])
    tables = build_cost_tables(graph, cluster, training, SPACE, default_params(), 1, 2,
                               Schedule.one_f_one_b, prune_dominated=False)
    rng = np.random.default_rng(0)
    ctx = StageContext(cluster, training, default_params(), 2, 4)
    checked = 0
    for _ in range(40):
        ks = [int(rng.integers(len(s))) for s in tables.strategies]
        xs = [float(tables.working_bytes[u][k]) for u, k in enumerate(ks)]
        if sum(x > 0 for x in xs) < 2:
            continue
        plan = tables.plan_of(Assignment([0] * len(ks), ks))
        st = evaluate(plan, graph, cluster, training).stages[0]
        want = [working_set_bytes(layer, tables.strategies[u][k], ctx.microbatch_samples, training)
                for u, (layer, k) in enumerate(zip(graph.layers, ks))]
        assert xs == pytest.approx(want, rel=1e-12)
        assert st.working_gib == pytest.approx(max(xs) / GIB, rel=1e-12)
        assert st.working_gib < sum(xs) / GIB
        stored = sum(float(tables.weight_bytes[u][k] + tables.act_bytes[u][k]) for u, k in enumerate(ks))
        assert stage_memory(tables, [0] * len(ks), ks)[0] == pytest.approx(stored + max(xs), rel=1e-12)
        assert st.peak_memory_gib - st.reserve_gib == pytest.approx((stored + max(xs)) / GIB, rel=1e-9)
        checked += 1
    assert checked >= 5
