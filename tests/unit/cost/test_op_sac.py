"""Selective activation checkpointing by op and by layer (issue 28, point 5):
torchtitan's ``selective_ac_option = "op"`` save list and ``selective_ac_option
= N`` (full checkpointing on every N-th block), each against a hand-derived case.

Sources: ``torchtitan/models/llama3/infra/parallelize.py`` at 9a8cb98
(``_save_list``; "Saves output of all compute ops, except every second mm";
``ptd_checkpoint_wrapper._count % ac_freq == 0``), torchtitan's Llama
``model.py`` (``wq, wk, wv``, ``wo``, ``w2(silu(w1(x)) * w3(x))``).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from autopar_opt.cost.comm import collective, tp_comm_time
from autopar_opt.cost.compute import compute_time
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.cost.memory import activation_bytes
from autopar_opt.cost.params import CostParams
from autopar_opt.export import ExportError, export_plan
from autopar_opt.export.torchtitan import layer_sac_pattern, plan_from_torchtitan
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.plan import Plan, StagePlan
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy, enumerate_strategies
from autopar_opt.ir.training import Recompute, SearchSpace, Training
from autopar_opt.model_zoo.registry import build_model
from autopar_opt.model_zoo.transformer import embedding, transformer_block

S, H, A, KV, FF = 1024, 1024, 8, 2, 2816
HKV = H * KV // A                      # 256


def _llama_block(**kw):
    return transformer_block("b", S, H, A, FF, kv_heads=KV, gated_mlp=True, flash_attention=True,
                             biases=False, dropout=False, **kw)


def test_save_list_of_a_llama_block_by_hand():
    """mm order wq, wk, wv, wo, w1, w3, w2: odd ones kept (wq, wv, w1; w2 whole
    per tensor-parallel rank), even ones re-run (wk, wo, w3); the input and the
    SDPA output with its fp32 log-sum-exp kept."""
    b = _llama_block()
    split = 2 * S * H + 2 * S * HKV + 2 * S * FF + 2 * S * H + 4 * A * S
    assert b.act_op_saved_replicated_bytes == 2 * S * H
    assert b.act_op_saved_unsplit_bytes == 2 * S * H
    assert b.act_op_saved_bytes == split + 2 * S * H + 2 * S * H
    assert b.flops_recompute_op == 2 * S * H * HKV + 2 * S * H * H + 2 * S * H * FF
    # a plain MLP (wq, wk, wv, wo, up, down): down (row-parallel) is the 6th, re-run
    plain = transformer_block("p", S, H, A, FF, flash_attention=True, biases=False)
    assert plain.act_op_saved_unsplit_bytes == 0
    assert plain.flops_recompute_op == 2 * S * H * H + 2 * S * H * H + 2 * S * FF * H
    # biased projections run aten.addmm (not in the save list): not offered
    assert transformer_block("c", S, H, A, FF, flash_attention=True).act_op_saved_bytes == 0


def _ctx(samples=4, devices=8, params=None):
    cl = make_cluster("t", 1, 8, "H100-SXM-80GB")
    tr = Training(samples, S, "bf16", runtime=runtime_named("torchtitan"))
    return StageContext(cl, tr, params or CostParams(), devices, samples)


def test_op_memory_splits_columns_keeps_row_parallel_partial_sums_whole():
    b = _llama_block()
    s = Strategy(dp=2, tp=4, sp=True, recompute=Recompute.op)
    split = b.act_op_saved_bytes - 2 * S * H - 2 * S * H
    per_sample = split / 4 + 2 * S * H / 4 + 2 * S * H
    assert activation_bytes(b, s, 4) == pytest.approx(per_sample * 4 / 2)
    # between no recomputation and full recomputation
    none = activation_bytes(b, replace(s, recompute=Recompute.none), 4)
    full = activation_bytes(b, replace(s, recompute=Recompute.full), 4)
    assert full < activation_bytes(b, s, 4) < none


def test_op_recomputes_every_second_gemm_and_the_elementwise_forward():
    """At efficiency 1 with a per-kernel latency of 10 µs and no element-wise cost, the
    backward grows by the re-run GEMM FLOPs at the 16-bit peak plus 3 kernels' latency
    (wk, wo, w3 of the 7 GEMM kernels torchtitan runs); with element-wise passes, by the
    forward's element-wise time too; the attention kernel is not re-run."""
    b, s = _llama_block(), Strategy(dp=2, tp=4, sp=True)
    ideal = CostParams(gemm_efficiency={}, efficiency_default=1.0, efficiency_half_us=10.0,
                       elementwise_passes=0.0)
    ctx = _ctx(params=ideal)
    none, op = compute_time(b, s, ctx), compute_time(b, replace(s, recompute=Recompute.op), ctx)
    per_dev = 4 / 2 / 4
    redo = b.flops_recompute_op * per_dev / ctx.half_peak_flops + 3 * 10e-6
    assert op.fwd_s == pytest.approx(none.fwd_s)
    assert op.bwd_s - none.bwd_s == pytest.approx(redo)
    assert op.hw_flops - none.hw_flops == pytest.approx(b.flops_recompute_op * per_dev)
    # element-wise: op re-runs the forward's element-wise share (the forward time it adds)
    elem = _ctx(params=replace(ideal, elementwise_passes=6.0))
    none_e = compute_time(b, s, elem)
    op_e = compute_time(b, replace(s, recompute=Recompute.op), elem)
    fwd_elementwise = none_e.fwd_s - none.fwd_s
    assert fwd_elementwise > 0
    assert op_e.bwd_s - none_e.bwd_s == pytest.approx(redo + fwd_elementwise)


def test_op_repeats_the_all_gathers_not_the_saved_reduce_scatters():
    b, ctx = _llama_block(), _ctx()
    s = Strategy(dp=2, tp=4, sp=True)
    nbytes = b.tp_comm_bytes * 4 / 2
    gathers = collective(ctx, "all_gather", 4, 1, nbytes, b.tp_collectives)
    op = tp_comm_time(b, replace(s, recompute=Recompute.op), ctx)
    assert op - tp_comm_time(b, s, ctx) == pytest.approx(gathers)
    assert tp_comm_time(b, replace(s, recompute=Recompute.full), ctx) - op == pytest.approx(
        collective(ctx, "reduce_scatter", 4, 1, nbytes, b.tp_collectives))


def test_op_is_offered_on_blocks_only_and_does_nothing_elsewhere():
    space = SearchSpace(recompute=(Recompute.none, Recompute.op))
    assert {st.recompute for st in enumerate_strategies(_llama_block(), 8, 8, space, 8)} \
        == {Recompute.none, Recompute.op}
    emb = embedding("e", S, H, 32000)
    assert {st.recompute for st in enumerate_strategies(emb, 8, 8, space, 8)} == {Recompute.none}
    s = Strategy(dp=8, tp=1)
    assert activation_bytes(emb, replace(s, recompute=Recompute.op), 8) \
        == activation_bytes(emb, s, 8)


GRAPH = build_model("llama3-8b", overrides={"num_layers": 6})
CLUSTER = make_cluster("t", 1, 8, "H100-SXM-80GB")
TITAN = Training(global_batch_size=16, seq_len=8192, runtime=runtime_named("torchtitan"))


def _plan(modes_per_stage, dp=4):
    names = [layer.name for layer in GRAPH.layers]
    base = Strategy(dp, 1, 1, False, 3)
    stages, start = [], 0
    for modes in modes_per_stage:
        size = len(modes) + (1 if start == 0 else 0) + (1 if start + len(modes) + 1 >= 7 else 0)
        part = names[start:start + size]
        it = iter(modes)
        stages.append(StagePlan(part, [replace(base, recompute=next(it)) if n.startswith("block")
                                       else base for n in part]))
        start += size
    return Plan(stages, 4)


def test_torchtitan_export_of_op_and_every_nth_block():
    """Op-level checkpointing is torchtitan 0.3's SelectiveAC (and 0.2's selective
    'op'); full checkpointing on every N-th block is 0.2's selective_ac_option N only
    (0.3's SelectiveAC is per-op). The sections round-trip to the same plan."""
    from autopar_opt.export.torchtitan import torchtitan_config
    from autopar_opt.export.view import plan_view

    op = _plan([[Recompute.op] * 3, [Recompute.op] * 3])
    evaluate(op, GRAPH, CLUSTER, TITAN)
    text = export_plan(op, GRAPH, CLUSTER, TITAN, "torchtitan").text
    assert "config.activation_checkpoint = SelectiveAC.Config()" in text
    cfg = torchtitan_config(plan_view(op, GRAPH, CLUSTER, TITAN))
    assert cfg["activation_checkpoint"] == {"mode": "selective", "selective_ac_option": "op"}
    assert plan_from_torchtitan(cfg, GRAPH, 8).to_dict() == op.to_dict()
    # every 2nd block of each stage: torchtitan counts from 1 per process
    assert layer_sac_pattern(3, 2) == [Recompute.none, Recompute.full, Recompute.none]
    every2 = _plan([layer_sac_pattern(3, 2), layer_sac_pattern(3, 2)])
    cfg = torchtitan_config(plan_view(every2, GRAPH, CLUSTER, TITAN))
    assert cfg["activation_checkpoint"] == {"mode": "selective", "selective_ac_option": "2"}
    assert plan_from_torchtitan(cfg, GRAPH, 8).to_dict() == every2.to_dict()
    with pytest.raises(ExportError, match="per-op only"):
        export_plan(every2, GRAPH, CLUSTER, TITAN, "torchtitan", "0.3")
    # a pattern torchtitan has no form for, and Megatron-LM without op-level checkpointing
    with pytest.raises(ExportError, match="N-th block"):
        export_plan(_plan([[Recompute.full, Recompute.none, Recompute.none],
                           layer_sac_pattern(3, 2)]), GRAPH, CLUSTER, TITAN, "torchtitan")
    with pytest.raises(ExportError, match="op-level"):
        export_plan(op, GRAPH, CLUSTER, TITAN, "megatron")
