"""Vocabulary layers left whole on every tensor-parallel rank (``cost.tp_replicated``), and
FSDP's reduce-scatters after a ``torch.distributed.pipelining`` schedule.

Sources: KempnerForge ``kempnerforge/distributed/tensor_parallel.py``
``apply_tensor_parallel`` ("Token embedding stays replicated"; pipeline stages run
without SequenceParallel and shard the output head only with it); PyTorch
``torch/distributed/pipelining/stage.py`` (``backward_maybe_with_nosync`` turns an FSDP
stage's gradient sync off for every micro-batch; ``perform_reduce_grad``, "scheduled after
all microbatches W, B actions", runs each FSDP group's ``post_backward``).

Oracles: a layer every rank of a ``tp``-way group computes whole costs, per device, what
the same layer costs at ``tp = 1`` over the same data-parallel ranks (FLOPs, weights),
with no tensor-parallel traffic and ``1/tp`` of its FLOPs counted as model FLOPs; the
deferred reduce-scatter is the whole collective, exposed.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from autopar_opt.cost import comm, tp_replicated
from autopar_opt.cost.compute import compute_time
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.params import default_params
from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.hardware import LinkTier, make_cluster
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Training

H, V, SEQ = 1024, 32768, 2048
HEAD = Layer("head", kind=LayerKind.lm_head, params=H * V, flops_fwd=2 * SEQ * H * V,
             flops_bwd=4 * SEQ * H * V, act_bytes=4.0 * SEQ * V + 2.0 * SEQ * H,
             act_replicated_bytes=2.0 * SEQ * H, tp_comm_bytes=2.0 * SEQ * H, max_tp=8)
EMBED = Layer("embed", kind=LayerKind.embedding, params=H * V, tp_comm_bytes=2.0 * SEQ * H,
              max_tp=8)
BLOCK = Layer("b", kind=LayerKind.transformer_block, params=12 * H * H,
              flops_fwd=24 * SEQ * H * H, flops_bwd=48 * SEQ * H * H)


def _ctx(pipelined: bool, **caps) -> StageContext:
    """Two 8-GPU H100 nodes, micro-batch 8 samples, 4 micro-batches, KempnerForge-like."""
    cl = make_cluster("t", 2, 8, "H100-SXM-80GB")
    rt = runtime_named("pytorch-fsdp", loss_parallel=False, **caps)
    tr = Training(32, SEQ, "bf16", runtime=rt)
    tie = LinkTier("ib", 50.0, 10.0) if pipelined else None
    return StageContext(cl, tr, default_params(), 8, 8, tie_tier=tie)


S_TP = Strategy(dp=2, tp=4, zero=3)


def test_head_in_a_pipeline_is_whole_on_each_rank_where_the_runtime_says_so():
    ctx = _ctx(True, tp_head_in_pipeline=False)
    assert tp_replicated.replicated_over_tp(HEAD, S_TP, ctx)
    assert not tp_replicated.replicated_over_tp(HEAD, S_TP, _ctx(False, tp_head_in_pipeline=False))
    assert not tp_replicated.replicated_over_tp(HEAD, S_TP, _ctx(True))
    assert not tp_replicated.replicated_over_tp(BLOCK, S_TP, ctx)
    assert not tp_replicated.replicated_over_tp(HEAD, Strategy(dp=8, tp=1, zero=3), ctx)


def test_replicated_head_computes_what_tp1_computes_and_counts_a_tp_th_as_model_flops():
    ctx = _ctx(True, tp_head_in_pipeline=False)
    whole = layer_cost(HEAD, S_TP, ctx)
    sharded = layer_cost(HEAD, S_TP, _ctx(True))
    one = compute_time(HEAD, Strategy(dp=2, tp=1, zero=3), ctx)
    assert whole.hw_flops == pytest.approx(one.hw_flops)
    assert whole.hw_flops == pytest.approx(4 * sharded.hw_flops)
    assert whole.flops == pytest.approx(sharded.flops)          # model FLOPs: counted once
    assert whole.tp_exposed_s == 0.0 and sharded.tp_exposed_s > 0.0   # no logits gather
    assert whole.compute_s > sharded.compute_s


def test_replicated_embedding_holds_the_whole_table_sharded_over_dp_only():
    """bf16 weights under ZeRO-3 over dp = 2: the whole table V·H over 2 ranks; the
    vocabulary-parallel table over tp = 4 holds a quarter of it."""
    rep = layer_cost(EMBED, S_TP, _ctx(False, tp_embedding=False))
    par = layer_cost(EMBED, S_TP, _ctx(False))
    assert rep.weight_bytes == pytest.approx(4 * par.weight_bytes)
    assert rep.tp_exposed_s == 0.0 and par.tp_exposed_s > 0.0


def test_pipeline_runtime_reduces_after_the_schedule_exposed_whole():
    """Gradient sync off until the last micro-batch (KempnerForge): without the pipeline
    runtime's deferral the last backward hides part of the reduce-scatter; deferred, the
    whole collective is exposed and nothing is hidden."""
    s = Strategy(dp=16, tp=1, zero=3)
    caps = dict(fsdp_no_sync_accumulation=True, fp32_grad_reduce=True)
    ctx_late = _ctx(True, pipeline_reduce_after_schedule=True, **caps)
    ctx_in = _ctx(True, **caps)
    comp = compute_time(BLOCK, s, ctx_in)
    exposed_late, hidden_late = comm.zero3_sync(BLOCK, s, ctx_late, comp)
    exposed_in, hidden_in = comm.zero3_sync(BLOCK, s, ctx_in, comp)
    assert hidden_late == 0.0
    assert exposed_late == pytest.approx(exposed_in + hidden_in)
    assert hidden_in > 0.0
    # not pipelined: the runtime's deferral does not apply
    flat = _ctx(False, pipeline_reduce_after_schedule=True, **caps)
    assert comm.zero3_sync(BLOCK, s, flat, comp) == comm.zero3_sync(BLOCK, s, _ctx(False, **caps),
                                                                       comp)


def test_torchtitan_pipeline_keeps_parameters_and_reduces_late():
    """torchtitan under a pipeline (reshard_after_forward False by default): one gather per
    iteration behind the first forward and the reduce-scatter once; deferred after the
    schedule, the reduce-scatter moves from hidden to exposed, the total unchanged."""
    cl = make_cluster("t", 2, 8, "H100-SXM-80GB")
    tt = runtime_named("torchtitan")
    assert tt.pipeline_reduce_after_schedule
    tie = LinkTier("ib", 50.0, 10.0)
    late = StageContext(cl, Training(32, SEQ, "bf16", runtime=tt), default_params(), 8, 8,
                        tie_tier=tie)
    inside = StageContext(cl, Training(32, SEQ, "bf16", runtime=replace(
        tt, pipeline_reduce_after_schedule=False)), default_params(), 8, 8, tie_tier=tie)
    s = Strategy(dp=16, tp=1, zero=3)
    comp = compute_time(BLOCK, s, late)
    assert comm.zero3_comm(BLOCK, s, late, comp) == (0.0, 0.0)   # nothing per micro-batch
    e_late, h_late = comm.zero3_sync(BLOCK, s, late, comp)
    e_in, h_in = comm.zero3_sync(BLOCK, s, inside, comp)
    assert e_late + h_late == pytest.approx(e_in + h_in)
    assert e_late > e_in
