"""ZeRO-3/FSDP under PyTorch AMP: the 16-bit weight casts autograd keeps per micro-batch.

With fp32 parameters cast by ``torch.autocast``, each GEMM saves the 16-bit cast
of its weight for the input gradient (``tools/autograd/derivatives.yaml``, ``mm``:
``mm_mat1_backward(grad, mat2, ...)``); FSDP's reshard frees only its fp32
unsharded storage (``_flat_param.py`` ``_free_unsharded_flat_param``), so the cast,
2 B per unsharded local parameter, lives from the layer's forward to its backward,
once per micro-batch in flight (``autopar_opt/cost/state.py``
``autocast_saved_cast_bytes``; measured on CPU in benchmarks/autocast/RESULTS.md:
one live 8,192-byte bf16 cast per 64x64 weight after the forward under FSDP1 and
FSDP2, none with ``param_dtype=bf16``).

Oracles: bytes derived by hand from the layer sizes; brute force over every plan
of tiny instances whose capacity lies where the term decides which plans fit
(some plan fits without it, not with it, and beats the optimum): brute force =
exhaustive enumeration of the tables = DP = MILP = MIQP (SCIP, when installed) =
the block MILP, and ``evaluate`` of each plan equals the solver's objective and fits.
"""

from __future__ import annotations


import pytest

from support.bruteforce import brute_force
from support.solver_agreement import assert_all_reach, assignments, memory_limit, solve_every_way
from autopar_opt.cost import layer_cost as lc
from autopar_opt.cost.context import StageContext, user_reserve_for
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.memory import activation_bytes
from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import build_cost_tables, stage_memory
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.ir.graph import Layer, LayerGraph, LayerKind
from autopar_opt.ir.hardware import GIB
from autopar_opt.model_zoo.transformer import decoder_lm
from autopar_opt.ir.plan import Plan, StagePlan
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.solvers.dp.common import iteration_time, least_memory
from autopar_opt.ir.strategies import Strategy, enumerate_strategies
from autopar_opt.model_zoo.synthetic import small_cluster
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training

MB = 1e6
FSDP = runtime_named("pytorch-fsdp")


def _amp(**kw) -> Training:
    return Training(global_batch_size=8, seq_len=128, dtype="bf16", runtime=FSDP, autocast=True, **kw)


def _cost(layer: Layer, s: Strategy, training: Training):
    ctx = StageContext(small_cluster(1, 4), training, default_params(), 4, 8)
    return layer_cost(layer, s, ctx)


BLOCK = Layer("blk", LayerKind.transformer_block, flops_fwd=1e9, flops_bwd=2e9, params=1_000_000,
              max_tp=2, act_bytes=10 * MB, input_bytes=1 * MB, output_bytes=1 * MB)


def test_hand_derived_cast_bytes_per_microbatch() -> None:
    """1e6 parameters, tp = 2, dp = 2, micro-batch of 8 samples (4 per GPU).

    ZeRO-3, no recomputation: activations 10 MB x 4 / tp = 20 MB (no replicated
    part), plus the bf16 cast
    of the 5e5 local parameters, 2 B x 5e5 = 1 MB, per micro-batch.
    ZeRO-0: the standing cache of weight_parts instead (2 B x 5e5 once, in the
    weights), nothing per micro-batch. Without autocast: nothing.
    """
    z3 = Strategy(2, 2, zero=3)
    assert activation_bytes(BLOCK, z3, 8, training=_amp()) == pytest.approx(20 * MB)
    assert _cost(BLOCK, z3, _amp()).act_bytes == pytest.approx(20 * MB + 1 * MB, rel=1e-12)
    z0 = Strategy(2, 2, zero=0)
    assert _cost(BLOCK, z0, _amp()).act_bytes == pytest.approx(20 * MB, rel=1e-12)
    plain = Training(global_batch_size=8, seq_len=128, dtype="bf16", runtime=FSDP)
    assert _cost(BLOCK, z3, plain).act_bytes == pytest.approx(20 * MB, rel=1e-12)


def test_full_recomputation_moves_the_casts_to_the_working_set() -> None:
    """ZeRO-3 with full recomputation keeps the layer input, 1 MB x 4 = 4 MB, and
    no cast per micro-batch. In flight the layer holds: its recomputed
    activations less the kept input, 20 - 4 = 16 MB (the input is whole without
    sequence parallelism); two gathered fp32
    units (prefetch), 2 x 4 B x 5e5 = 4 MB; its unsharded fp32 gradient,
    4 B x 5e5 = 2 MB; the recomputed bf16 casts, 2 B x 5e5 = 1 MB: 23 MB."""
    s = Strategy(2, 2, zero=3, recompute=Recompute.full)
    c = _cost(BLOCK, s, _amp())
    assert c.act_bytes == pytest.approx(4 * MB, rel=1e-12)
    assert FSDP.fsdp_prefetch
    assert c.working_bytes == pytest.approx(16 * MB + 4 * MB + 2 * MB + 1 * MB, rel=1e-12)


def test_moe_layer_counts_its_local_experts() -> None:
    """A MoE block of 1e6 parameters, 8e5 of them in 4 routed experts; tp = 2,
    ep = 2: local parameters 2e5 / 2 + 8e5 / 4 = 3e5, cast bytes 2 B x 3e5 = 0.6 MB."""
    moe = Layer("moe", LayerKind.moe_block, flops_fwd=1e9, flops_bwd=2e9, params=1_000_000,
                max_tp=2, act_bytes=10 * MB, input_bytes=1 * MB, output_bytes=1 * MB,
                expert_params=800_000, num_experts=4, top_k=1)
    s = Strategy(2, 2, zero=3, ep=2)
    extra = _cost(moe, s, _amp()).act_bytes - activation_bytes(moe, s, 8, training=_amp())
    assert extra == pytest.approx(0.6 * MB, rel=1e-9)


def test_stage_holds_one_set_of_casts_per_inflight_microbatch() -> None:
    """Two stages of 2 GPUs (dp = 2), 1F1B with 4 micro-batches of 2 samples:
    stage 0 holds 2 micro-batches in flight, stage 1 one. Each stage's
    activation memory is in-flight x (activations + casts): block a stores
    10 MB x 1 sample per GPU + 2 B x 1e6 = 12 MB per micro-batch."""
    a = BLOCK.__class__(**{**BLOCK.__dict__, "name": "a"})
    b = BLOCK.__class__(**{**BLOCK.__dict__, "name": "b"})
    graph = LayerGraph.chain("two", [a, b])
    training = _amp()
    s = Strategy(2, 1, zero=3)
    plan = Plan([StagePlan(["a"], [s]), StagePlan(["b"], [s])], 4, Schedule.one_f_one_b)
    m = evaluate(plan, graph, small_cluster(1, 4), training)
    assert [st.inflight_microbatches for st in m.stages] == [2, 1]
    for st in m.stages:
        assert st.activation_gib == pytest.approx(st.inflight_microbatches * 12 * MB / GIB, rel=1e-12)


def test_full_recomputation_is_offered_where_it_only_drops_casts() -> None:
    """A layer whose activations are no larger than its input gains nothing from
    full recomputation, except under ZeRO-3 with autocast, where it drops the casts."""
    flat = Layer("lin", LayerKind.linear, flops_fwd=1e9, flops_bwd=2e9, params=1_000_000,
                 act_bytes=1 * MB, input_bytes=1 * MB, output_bytes=1 * MB)
    space = SearchSpace(zero_levels=(0, 3), recompute=(Recompute.none, Recompute.full),
                        tp_degrees=(1,), sequence_parallel=(False,))
    plain = {(s.zero, s.recompute) for s in enumerate_strategies(flat, 2, 8, space, 8)}
    assert plain == {(0, Recompute.none), (3, Recompute.none)}
    amp = {(s.zero, s.recompute) for s in enumerate_strategies(flat, 2, 8, space, 8, autocast=True)}
    assert amp == plain | {(3, Recompute.full)}


SPACE = SearchSpace(zero_levels=(0, 3), recompute=(Recompute.none, Recompute.full),
                    sequence_parallel=(False,), tp_degrees=(1, 2))


def _tables(graph, cluster, training, pp):
    return build_cost_tables(graph, cluster, training, SPACE, default_params(), pp, 4,
                             Schedule.one_f_one_b)


def _instance(blocks: int, pp: int, factor: float):
    graph = decoder_lm("tiny", blocks, 512, 512, 4, 1024, 1000)
    cluster = small_cluster(1, 2 * pp)
    t = _tables(graph, cluster, _amp(), pp)
    reserve = user_reserve_for(least_memory(t) / GIB * factor, cluster.device.hbm_gib, default_params())
    training = _amp(memory_reserve_gib=reserve)
    return graph, cluster, training, _tables(graph, cluster, training, pp)


def _plans(tables, without):
    """Every assignment: (time, fits, fits when the casts are left out)."""
    lim = memory_limit(tables)
    return [(iteration_time(tables, asg), max(stage_memory(tables, stage, ks)) <= lim,
             max(stage_memory(without, stage, ks)) <= lim, asg)
            for stage, ks, asg in assignments(tables)]


@pytest.mark.parametrize("blocks,pp,factor", [(2, 1, 1.5), (2, 2, 1.04), (3, 2, 1.04), (3, 3, 1.01)])
def test_solvers_agree_with_brute_force_where_the_casts_decide(blocks, pp, factor, monkeypatch) -> None:
    graph, cluster, training, tables = _instance(blocks, pp, factor)
    with monkeypatch.context() as m:
        m.setattr(lc, "autocast_saved_cast_bytes", lambda *a: 0.0)
        without = _tables(graph, cluster, training, pp)
    assert [list(map(str, s)) for s in without.strategies] == [list(map(str, s)) for s in tables.strategies]
    plans = _plans(tables, without)
    feasible = [p for p in plans if p[1]]
    assert feasible, "the instance must have a plan"
    best = min(p[0] for p in feasible)
    # the term decides: a plan that fits without it (and not with it) beats the optimum
    assert any(p[2] and not p[1] and p[0] < best * (1 - 1e-9) for p in plans)
    ref = brute_force(graph, cluster, training, SPACE, pp, 4)
    assert ref is not None and ref[0] == pytest.approx(best, rel=1e-9)
    assert_all_reach(solve_every_way(tables, pp), best, tables, graph, cluster, training)
