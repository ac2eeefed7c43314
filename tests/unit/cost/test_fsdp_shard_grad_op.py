"""ZeRO-2 on PyTorch FSDP is ``SHARD_GRAD_OP``: the forward pass gathers the parameters.

FSDP's ``SHARD_GRAD_OP`` all-gathers each unit's parameters in the forward pass (prefetched
behind the neighbouring unit's forward), keeps them to the backward and frees them after it
whenever gradients are synchronised (``torch/distributed/fsdp/_runtime_utils.py``
``_should_free_in_backward``: ``state._sync_gradients or`` a strategy that reshards after
forward, which ``SHARD_GRAD_OP`` is not), so with gradients synchronised every micro-batch
each micro-batch gathers again and reduce-scatters in its backward; under ``no_sync``
accumulation the parameters stay gathered and the reduce-scatter runs once. Megatron's
distributed optimizer gathers the updated parameters after the step (hidden only with
``--overlap-param-gather``).

Oracles: NCCL's model of each collective by hand; the exposed part ``max(0, comm - window)``
by hand for a window wider and narrower than the gather; brute force = DP = MILP = MIQP
(when installed) = block MILP on an FSDP instance whose optimum takes ZeRO-2.
"""

from __future__ import annotations

import pytest

from autopar_opt.cost import comm
from autopar_opt.cost.context import Compute, StageContext
from autopar_opt.cost.params import default_params
from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Training

H = 2048
BLOCK = Layer("b", kind=LayerKind.transformer_block, params=12 * H * H, flops_fwd=24 * 2048 * H * H,
              flops_bwd=48 * 2048 * H * H, flops_recompute_selective=0.0)
S2 = Strategy(dp=32, tp=1, zero=2)


def _ctx(runtime: str, microbatches: int = 1, **caps) -> StageContext:
    """dp 32 over four 8-GPU nodes; a global batch of 32 samples in ``microbatches``."""
    cl = make_cluster("c", 4, 8, "H100-SXM-80GB")
    tr = Training(global_batch_size=32, seq_len=2048, runtime=runtime_named(runtime, **caps))
    return StageContext(cl, tr, default_params(), 32, 32 // microbatches)


def _by_hand(ctx: StageContext, kind: str) -> float:
    """NCCL's model of ``kind`` over the 32 ranks for :data:`BLOCK`: the gradient in the
    reduce dtype (reduce-scatter) or the 16-bit weights (all-gather), in ONE call (FSDP
    reduces and gathers a unit's flat parameter at once; DDP's 25 MB buckets would make
    the 200 MB fp32 gradient of this block 8 calls); the bucketed call count where the
    runtime is not FSDP's (Megatron-Core's buckets)."""
    rt = ctx.training.runtime
    g = comm.reduced_grad_bytes(ctx.training, 2)
    per_param = comm.state_bytes(ctx.training, 2)[0] if kind == "all_gather" else g
    msgs = 1.0 if rt.zero2_forward_gather else comm.grad_bucket_messages(
        BLOCK.params * g, rt.name, 32, g)
    return comm.collective(ctx, kind, 32, 1, BLOCK.params * per_param, msgs)


def test_fsdp_reduces_a_unit_in_one_call():
    """BLOCK's 200 MB fp32 gradient: one reduce-scatter under FSDP, cheaper than the same
    bytes in DDP's eight 25 MB buckets (seven more latencies over 32 ranks)."""
    fsdp = _ctx("pytorch-fsdp", fp32_grad_reduce=True)
    g = comm.reduced_grad_bytes(fsdp.training, 2)
    assert g == 4.0 and comm.zero12_messages(S2, fsdp, BLOCK.params * g, 32, g) == 1.0
    assert comm.grad_bucket_messages(BLOCK.params * g, "pytorch-fsdp", 32, g) == 8.0
    one = comm.collective(fsdp, "reduce_scatter", 32, 1, BLOCK.params * g, 1.0)
    eight = comm.collective(fsdp, "reduce_scatter", 32, 1, BLOCK.params * g, 8.0)
    assert one < eight
    exp, hidden, _ = comm.gradient_sync(BLOCK, S2, fsdp, _compute(0.0, 0.0))
    assert exp + hidden == pytest.approx(one + _by_hand(fsdp, "all_gather"))


def _compute(fwd: float, bwd: float) -> Compute:
    return Compute(fwd, bwd, 0.0, 0.0, 0.0, 0.0)


def test_the_fsdp_stacks_gather_in_the_forward_the_others_after_the_step():
    for name in ("pytorch-fsdp", "torchtitan"):
        assert runtime_named(name).zero2_forward_gather, name
    for name in ("megatron-core", "megatron-lm", "megatron-bridge", "deepspeed", "pytorch-ddp"):
        assert not runtime_named(name).zero2_forward_gather, name


def test_one_micro_batch_the_gather_hides_behind_the_forward():
    """One micro-batch: the gather runs once, behind the forward window with prefetch;
    Megatron-Core without --overlap-param-gather exposes all of it."""
    fsdp = _ctx("pytorch-fsdp")
    rs, ag = _by_hand(fsdp, "reduce_scatter"), _by_hand(fsdp, "all_gather")
    assert comm.zero2_microbatch_comm(BLOCK, S2, fsdp, _compute(0, 0)) == (0.0, 0.0)
    # a forward wider than the gather hides it, a backward wider than the reduce-scatter hides it
    exp, hidden, _ = comm.gradient_sync(BLOCK, S2, fsdp, _compute(2 * ag, 2 * rs))
    assert exp == pytest.approx(0.0, abs=1e-15) and hidden == pytest.approx(rs + ag)
    # a forward half as long as the gather leaves half of it
    exp, hidden, _ = comm.gradient_sync(BLOCK, S2, fsdp, _compute(ag / 2, 2 * rs))
    assert exp == pytest.approx(ag / 2) and exp + hidden == pytest.approx(rs + ag)
    # without prefetch FSDP gathers on demand: exposed
    cold = _ctx("pytorch-fsdp", fsdp_prefetch=False)
    exp, _, _ = comm.gradient_sync(BLOCK, S2, cold, _compute(2 * ag, 2 * rs))
    assert exp == pytest.approx(_by_hand(cold, "all_gather"))
    # Megatron-Core's gather after the step, without --overlap-param-gather: exposed
    mc = _ctx("megatron-core", param_gather_overlap=False)
    exp, _, _ = comm.gradient_sync(BLOCK, S2, mc, _compute(2 * ag, 1e9))
    assert exp == pytest.approx(_by_hand(mc, "all_gather"))


def test_synchronised_micro_batches_gather_and_reduce_scatter_each_time():
    """Four micro-batches with gradients synchronised each: every micro-batch gathers
    (forward window) and reduce-scatters (backward window); the iteration's sync keeps the
    optimizer step only."""
    fsdp = _ctx("pytorch-fsdp", microbatches=4)
    assert fsdp.microbatches == 4
    rs, ag = _by_hand(fsdp, "reduce_scatter"), _by_hand(fsdp, "all_gather")
    raw, exp = comm.zero2_microbatch_comm(BLOCK, S2, fsdp, _compute(ag / 4, rs / 2))
    assert raw == pytest.approx(rs + ag)
    assert exp == pytest.approx(3 * ag / 4 + rs / 2)
    exp, hidden, step = comm.gradient_sync(BLOCK, S2, fsdp, _compute(ag / 4, rs / 2))
    assert exp == 0.0 and hidden == 0.0 and step > 0


def test_no_sync_accumulation_keeps_the_parameters_gathered():
    """Under no_sync accumulation (FSDP1 no_sync / FSDP2 set_requires_gradient_sync(False))
    SHARD_GRAD_OP frees nothing until the last micro-batch: one gather and one
    reduce-scatter per iteration, in the iteration's sync."""
    acc = _ctx("pytorch-fsdp", microbatches=4, fsdp_no_sync_accumulation=True)
    rs, ag = _by_hand(acc, "reduce_scatter"), _by_hand(acc, "all_gather")
    assert comm.zero2_microbatch_comm(BLOCK, S2, acc, _compute(0, 0)) == (0.0, 0.0)
    exp, hidden, _ = comm.gradient_sync(BLOCK, S2, acc, _compute(0.0, 0.0))
    assert exp == pytest.approx(rs + ag) and hidden == 0.0


def test_solvers_and_evaluate_agree_on_fsdp_zero2():
    """The per-micro-batch gather is in the tables: brute force (cost functions) = DP =
    MILP = MIQP (when installed) = block MILP, evaluate reproduces each objective, on an
    FSDP instance whose optimum takes ZeRO-2 with more than one micro-batch."""
    from support.solver_agreement import agree_where_zero2_is_optimal
    assert agree_where_zero2_is_optimal("pytorch-fsdp", (0, 2, 3), 2)


def test_shard_grad_op_with_fp32_sharded_parameters_holds_fp32_gradients():
    """torchtitan's FSDP2 (fp32 sharded parameters, fp32 reduction) at ZeRO-2: per parameter
    2 bytes of gathered 16-bit weights plus (4 fp32 parameter + 4 fp32 gradient + 8 Adam)/dp
    (oracle by hand); the state split is weights 2, gradient 4, optimizer 12 (fp32 copy and
    moments). At ZeRO-3 the split 2 + 2 + 12 totals the same 16/dp FSDP holds. A 16-bit
    reduction (fp32_grad_reduce off, FSDP's PURE) keeps 16-bit gradients."""
    from autopar_opt.cost.state import state_bytes
    titan = Training(global_batch_size=32, seq_len=2048, runtime=runtime_named("torchtitan"))
    assert state_bytes(titan, 2) == (2.0, 4.0, 12.0)
    assert comm.reduced_grad_bytes(titan, 2) == 4.0          # the reduce-scatter moves fp32
    assert sum(state_bytes(titan, 3)) == 16.0
    pure = Training(global_batch_size=32, seq_len=2048,
                    runtime=runtime_named("torchtitan", fp32_grad_reduce=False))
    assert state_bytes(pure, 2)[1] == 2.0
    megatron = Training(global_batch_size=32, seq_len=2048, runtime=runtime_named("megatron-core"))
    assert state_bytes(megatron, 2) == (2.0, 4.0, 12.0)     # its fp32 main_grad buffer


def test_a_pipeline_schedule_keeps_shard_grad_op_gathered_across_micro_batches():
    """With pipeline stages, PyTorch pipelining turns resharding after backward and gradient
    sync off until the last micro-batch: one gather and one reduce-scatter per iteration
    (in the sync), none per micro-batch."""
    from dataclasses import replace as dc_replace

    from autopar_opt.ir.hardware import LinkTier
    flat = _ctx("pytorch-fsdp", microbatches=4)
    piped = dc_replace(flat, tie_tier=LinkTier("inter", 25.0, 10.0))
    assert piped.pipelined and not flat.pipelined
    assert comm.zero2_microbatch_comm(BLOCK, S2, flat, _compute(0, 0))[0] > 0
    assert comm.zero2_microbatch_comm(BLOCK, S2, piped, _compute(0, 0)) == (0.0, 0.0)
    exp, hidden, _ = comm.gradient_sync(BLOCK, S2, piped, _compute(0.0, 0.0))
    assert exp + hidden == pytest.approx(_by_hand(piped, "reduce_scatter")
                                         + _by_hand(piped, "all_gather"))
