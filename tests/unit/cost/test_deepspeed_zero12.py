"""DeepSpeed's ZeRO-1/2 gradient reduction: an all-reduce, and at ZeRO-2 every micro-batch.

DeepSpeed all-reduces each gradient bucket and lets every rank keep its partition
(``BF16_Optimizer`` through ``DeepSpeedEngine.allreduce_gradients`` ->
``buffered_allreduce_fallback``; the ZeRO optimizer through ``average_tensor`` ->
``allreduce_and_scatter`` while ``use_multi_rank_bucket_allreduce``, True by default in
the pinned 0.19.8), then all-gathers the updated parameters; at ZeRO-2 the partitioned
gradients are reduced on every micro-batch ("ZeRO stage >= 2 communicates during non
gradient accumulation boundaries as well", ``DeepSpeedEngine.allreduce_gradients``).
Megatron's distributed optimizer reduce-scatters once per iteration.

Oracles: NCCL's model of the named collectives by hand; a one-stage iteration pays the
ZeRO-2 reduction ``c`` times; brute force = DP = MILP = MIQP (when installed) = block
MILP, and ``evaluate`` reproduces each objective, on a DeepSpeed instance with ZeRO 1/2.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from autopar_opt.cost import comm
from autopar_opt.cost.context import Compute, StageContext
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.params import default_params
from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Training

H = 2048
BLOCK = Layer("b", kind=LayerKind.transformer_block, params=12 * H * H, flops_fwd=24 * 2048 * H * H,
              flops_bwd=48 * 2048 * H * H, flops_recompute_selective=0.0)
NO_COMPUTE = Compute(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


def _ctx(runtime: str, microbatch_samples: int = 4, **caps) -> StageContext:
    cl = make_cluster("c", 4, 8, "H100-SXM-80GB")
    tr = Training(global_batch_size=32, seq_len=2048, runtime=runtime_named(runtime, **caps))
    return StageContext(cl, tr, default_params(), 32, microbatch_samples)


def test_deepspeed_and_internevo_stacks_all_reduce_megatron_reduce_scatters():
    assert runtime_named("deepspeed").zero_grad_all_reduce
    assert runtime_named("deepspeed").zero2_microbatch_reduce
    for name in ("megatron-core", "megatron-lm", "pytorch-fsdp", "torchtitan"):
        assert not runtime_named(name).zero_grad_all_reduce, name
        assert not runtime_named(name).zero2_microbatch_reduce, name


def _by_hand(ctx: StageContext, zero: int, kind: str) -> float:
    """NCCL's model of ``kind`` over the 32 data-parallel ranks for :data:`BLOCK`: its
    gradient (reductions) or its weights (``all_gather``) in DeepSpeed's buckets."""
    g = comm.reduced_grad_bytes(ctx.training, zero)
    per_param = comm.state_bytes(ctx.training, zero)[0] if kind == "all_gather" else g
    msgs = comm.grad_bucket_messages(BLOCK.params * g, "deepspeed", 32, g)
    return comm.collective(ctx, kind, 32, 1, BLOCK.params * per_param, msgs)


def test_zero1_reduction_is_an_all_reduce_then_an_all_gather():
    """ZeRO-1 over dp 32 (four nodes): DeepSpeed = all-reduce of the gradient + all-gather
    of the parameters; the same with the capability off = reduce-scatter + all-gather."""
    s = Strategy(dp=32, tp=1, zero=1)
    ds, rs_only = _ctx("deepspeed"), _ctx("deepspeed", zero_grad_all_reduce=False)
    ar, rs, ag = (_by_hand(ds, 1, kind) for kind in ("all_reduce", "reduce_scatter", "all_gather"))
    exp, hidden, _ = comm.gradient_sync(BLOCK, s, ds, NO_COMPUTE)
    assert exp + hidden == pytest.approx(ar + ag)
    exp, hidden, _ = comm.gradient_sync(BLOCK, s, rs_only, NO_COMPUTE)
    assert exp + hidden == pytest.approx(rs + ag)
    assert ar > 1.8 * rs                       # about twice the bytes per link
    assert comm.zero2_microbatch_comm(BLOCK, s, ds, NO_COMPUTE) == (0.0, 0.0)


def test_zero2_reduces_every_micro_batch_and_gathers_once():
    """ZeRO-2 on DeepSpeed: the iteration's sync keeps the all-gather only, and the
    layer's per-micro-batch communication carries the all-reduce, exposed (overlap_comm
    off below stage 3) and counted with the other ZeRO traffic."""
    s = Strategy(dp=32, tp=1, zero=2)
    ds = _ctx("deepspeed")
    ar, ag = _by_hand(ds, 2, "all_reduce"), _by_hand(ds, 2, "all_gather")
    exp, hidden, _ = comm.gradient_sync(BLOCK, s, ds, NO_COMPUTE)
    assert exp + hidden == pytest.approx(ag)
    assert comm.zero2_microbatch_comm(BLOCK, s, ds, NO_COMPUTE) == pytest.approx((ar, ar))
    once = _ctx("deepspeed", zero2_microbatch_reduce=False)
    a, b = layer_cost(BLOCK, s, ds), layer_cost(BLOCK, s, once)
    assert a.zero_exposed_s - b.zero_exposed_s == pytest.approx(ar, rel=1e-9)
    assert a.time_s - b.time_s == pytest.approx(ar, rel=1e-9)
    assert b.sync_s - a.sync_s == pytest.approx(ar, rel=1e-9)
    # overlapped with the backward where the runtime overlaps the reduction
    comp = Compute(0.0, ar / 2, 0.0, 0.0, 0.0, 0.0)
    over = _ctx("deepspeed", grad_reduce_overlap=True)
    assert comm.zero2_microbatch_comm(BLOCK, s, over, comp)[1] == pytest.approx(
        _by_hand(over, 2, "all_reduce") - ar / 2)


def test_one_stage_iteration_pays_the_zero2_reduction_per_micro_batch():
    """pp = 1, c micro-batches: against the same plan reducing once per iteration,
    (c - 1) more reductions."""
    from autopar_opt.cost.evaluate import evaluate
    from autopar_opt.ir.graph import LayerGraph
    from autopar_opt.ir.plan import Plan, StagePlan
    graph = LayerGraph("blocks", [replace(BLOCK, name=f"b{i}") for i in range(2)], [("b0", "b1")])
    cluster = make_cluster("c", 4, 8, "H100-SXM-80GB")
    s = Strategy(dp=32, tp=1, zero=2)
    c = 4
    plan = Plan([StagePlan(["b0", "b1"], [s, s])], c)
    tr = Training(global_batch_size=32 * c, seq_len=2048, runtime=runtime_named("deepspeed"))
    once = replace(tr, runtime=runtime_named("deepspeed", zero2_microbatch_reduce=False))
    on, off = evaluate(plan, graph, cluster, tr), evaluate(plan, graph, cluster, once)
    ctx = StageContext(cluster, tr, default_params(), 32, 32)
    ar = comm.zero2_microbatch_comm(BLOCK, s, ctx, NO_COMPUTE)[0]
    assert on.iteration_time_s - off.iteration_time_s == pytest.approx(2 * (c - 1) * ar, rel=1e-6)


def test_solvers_and_evaluate_agree_on_deepspeed_zero12():
    """The per-micro-batch term is in the tables: brute force (cost functions) = DP =
    MILP = MIQP (when installed) = block MILP, evaluate reproduces each objective, on an
    instance whose optimum takes ZeRO-2 (so the term is on the optimal plan)."""
    from support.solver_agreement import agree_where_zero2_is_optimal
    assert agree_where_zero2_is_optimal("deepspeed", (0, 1, 2), 4)
