"""DeepSpeed's ``BF16_Optimizer`` accumulates every micro-batch's gradients in
a separate pass: after each micro-batch's backward, ``update_hp_grads`` runs
``hp_grad.data.add_(lp.grad.data.to(float32))`` over every local parameter
(``deepspeed/runtime/bf16_optimizer.py``; called per micro-batch by the
``PipelineEngine``'s ``_exec_backward_pass`` and by ``BF16_Optimizer.backward``).
The cast writes an fp32 copy (read 2, write 4 bytes), the add reads it and the
accumulator and writes the accumulator (4 + 4 + 4): 18 bytes of HBM traffic per
local parameter and micro-batch, on the compute stream
(``compute.grad_accumulate_time``, ``state.hp_grad_accumulate_bytes``).

Oracles: the byte count by hand at the device's datasheet bandwidth; the
iteration time of a one-stage plan (``c`` micro-batches of the same layers:
``c`` times the per-layer sum); brute force = DP = MILP = MIQP = block MILP and
``evaluate`` on a tiny DeepSpeed instance.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from autopar_opt.cost.compute import grad_accumulate_time
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.params import default_params
from autopar_opt.cost.state import (
    HP_GRAD_ACCUMULATE_BYTES, held_layer, hp_grad_accumulate_bytes, reduced_grad_bytes, state_bytes,
    weight_parts)
from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Recompute, Training

H = 1024
P = 12 * H * H + 13 * H          # one GPT block's parameters (Narayanan et al. 2021, Eq. 2 terms)
BW = 2039e9                      # A100-80GB HBM, datasheet (the catalog's figure)


def _training(runtime: str = "deepspeed", dtype: str = "bf16", **caps: bool) -> Training:
    return Training(global_batch_size=8, seq_len=512, dtype=dtype,
                    runtime=runtime_named(runtime, **caps))


def _ctx(training: Training):
    cl = make_cluster("c", 1, 8, "A100-80GB")
    return StageContext(cl, training, default_params(), 8, 1)


def _block() -> Layer:
    return Layer("b", kind=LayerKind.transformer_block, params=P, flops_fwd=24 * 512 * H * H,
                 flops_bwd=48 * 512 * H * H, flops_recompute_selective=0.0)


def test_eighteen_bytes_on_deepspeed_bf16_below_zero2_only():
    s0, s1, s2 = Strategy(dp=2, tp=2), Strategy(dp=2, tp=2, zero=1), Strategy(dp=2, tp=2, zero=2)
    assert HP_GRAD_ACCUMULATE_BYTES == 2 + 4 + 4 + 4 + 4
    ds = _training()
    assert hp_grad_accumulate_bytes(ds, s0) == 18.0
    assert hp_grad_accumulate_bytes(ds, s1) == 18.0
    assert hp_grad_accumulate_bytes(ds, s2) == 0.0          # ZeRO optimizer, not BF16_Optimizer
    assert hp_grad_accumulate_bytes(_training(dtype="fp16"), s1) == 0.0   # FP16 optimizer path
    assert hp_grad_accumulate_bytes(_training(lp_grad_copy=False), s1) == 0.0
    for rt in ("megatron-lm", "megatron-core", "megatron-bridge", "torchtitan", "pytorch-fsdp",
               "pytorch-ddp"):
        assert hp_grad_accumulate_bytes(_training(rt), s1) == 0.0, rt


def test_memory_and_reduce_bytes_follow_the_same_optimizer_per_strategy():
    """One predicate for the three terms: DeepSpeed runs BF16_Optimizer for a
    bf16 model below ZeRO-2 only (``_do_optimizer_sanity_check``) and its ZeRO
    optimizer at stages 2/3, which keeps only the bf16 ``.grad`` and reduces it
    in bf16 (``communication_data_type`` defaults to the model dtype). Hand
    numbers: 2 + (4 + 2) + 12 bytes and an fp32 reduction below ZeRO-2;
    2 + 2 + 12 and a 2-byte reduction at ZeRO-2/3, i.e. exactly the runtime
    with the BF16_Optimizer capabilities off (the oracle for the layer's time,
    communication and memory)."""
    ds = _training()
    zero_opt = _training(lp_grad_copy=False, fp32_grad_buffer=False)
    for zero in (0, 1):
        assert state_bytes(ds, zero) == (2, 6, 12)
        assert reduced_grad_bytes(ds, zero) == 4.0
    for zero in (2, 3):
        assert state_bytes(ds, zero) == (2, 2, 12)
        assert reduced_grad_bytes(ds, zero) == 2.0
    s2 = Strategy(dp=2, tp=1, zero=2)
    assert weight_parts(_block(), s2, ds) == (2 * P, 2 * P / 2, 12 * P / 2)
    for zero in (2, 3):
        s = Strategy(dp=2, tp=2, zero=zero)
        assert layer_cost(_block(), s, _ctx(ds)) == layer_cost(_block(), s, _ctx(zero_opt))
    s1 = Strategy(dp=2, tp=2, zero=1)
    assert layer_cost(_block(), s1, _ctx(ds)).sync_s > layer_cost(_block(), s1, _ctx(zero_opt)).sync_s
    meg = _training("megatron-lm")       # Megatron's fp32 main_grad at every stage
    assert reduced_grad_bytes(meg, 2) == 4.0 and state_bytes(meg, 2) == (2, 4, 12)


@pytest.mark.parametrize("tp,zero", [(1, 0), (2, 1), (4, 1)])
def test_layer_time_grows_by_the_hand_count(tp, zero):
    """18 bytes per local parameter (after tp; ZeRO-1 keeps the whole fp32
    accumulator) at 2,039 GB/s, added to the layer's compute and time; nothing
    else moves."""
    block, s = _block(), Strategy(dp=2, tp=tp, zero=zero, recompute=Recompute.full)
    on, off = _training(), _training(lp_grad_copy=False)
    hand = 18.0 * P / tp / BW
    assert grad_accumulate_time(block, s, _ctx(on)) == pytest.approx(hand, rel=1e-12)
    a, b = layer_cost(block, s, _ctx(on)), layer_cost(block, s, _ctx(off))
    assert a.time_s - b.time_s == pytest.approx(hand, rel=1e-9)
    assert a.compute_s - b.compute_s == pytest.approx(hand, rel=1e-9)
    assert (a.comm_s, a.sync_s, a.flops) == (b.comm_s, b.sync_s, b.flops)


def test_a_tied_copy_is_accumulated_with_its_layer():
    """With pp > 1 the output layer holds a copy of the word-embedding matrix,
    whose gradient is one more BF16_Optimizer parameter."""
    head = Layer("head", kind=LayerKind.lm_head, params=0, tied_params=1000 * H,
                 flops_fwd=2 * 512 * 1000 * H, flops_bwd=4 * 512 * 1000 * H)
    s, ctx = Strategy(dp=1, tp=2), _ctx(_training())
    assert grad_accumulate_time(head, s, ctx) == 0.0
    held = held_layer(head, True)
    assert grad_accumulate_time(held, s, ctx) == pytest.approx(18.0 * 1000 * H / 2 / BW, rel=1e-12)


def test_one_stage_iteration_pays_it_once_per_micro_batch():
    """pp = 1: T = c·p + g + fixed (docs/DESIGN.md §3), so the difference is
    c x the per-micro-batch sum over the layers, by hand."""
    from autopar_opt.cost.evaluate import evaluate
    from autopar_opt.model_zoo.transformer import decoder_lm
    from autopar_opt.ir.plan import Plan, StagePlan
    graph = decoder_lm("tiny", 2, 256, 256, 4, 1024, 1000)
    cluster = make_cluster("c", 1, 4, "A100-80GB")
    st = Strategy(dp=2, tp=2, zero=1)
    c = 4
    plan = Plan([StagePlan([layer.name for layer in graph.layers], [st] * len(graph.layers))], c)
    on = evaluate(plan, graph, cluster, _training())
    off = evaluate(plan, graph, cluster, _training(lp_grad_copy=False))
    local = sum(layer.params for layer in graph.layers) / 2
    assert on.iteration_time_s - off.iteration_time_s == pytest.approx(c * 18.0 * local / BW,
                                                                       rel=1e-9)


def test_solvers_and_evaluate_agree_on_deepspeed_bf16():
    """The term feeds the layer-time tables: brute force (cost functions, no
    tables) = DP = MILP = MIQP (when installed) = block MILP, and evaluate
    reproduces each objective (ZeRO 0-2 searched: the term on some choices,
    not on others). Below ZeRO-2 the optimum is slower than without the term;
    with ZeRO-2 allowed the search takes ZeRO-2, which the model prices
    without it (DeepSpeed's ZeRO-2 accumulation is not modelled)."""
    from support.bruteforce import brute_force
    from support.solver_agreement import assert_all_reach, solve_every_way
    from autopar_opt.cost.tables import build_cost_tables
    from autopar_opt.model_zoo.transformer import decoder_lm
    from autopar_opt.model_zoo.synthetic import small_cluster
    from autopar_opt.ir.training import Schedule, SearchSpace
    kw = dict(recompute=(Recompute.none, Recompute.full), sequence_parallel=(False,),
              tp_degrees=(1, 2))
    space, below2 = SearchSpace(zero_levels=(0, 1, 2), **kw), SearchSpace(zero_levels=(0, 1), **kw)
    graph = decoder_lm("tiny", 2, 256, 256, 4, 1024, 1000)
    cluster = small_cluster(1, 4)
    best = {}
    for copy in (True, False):
        training = replace(_training(lp_grad_copy=copy), global_batch_size=8, seq_len=256)
        for pp in (1, 2):
            best[copy, pp] = brute_force(graph, cluster, training, below2, pp, 2)[0]
            if copy:
                ref = brute_force(graph, cluster, training, space, pp, 2)
                assert ref is not None
                tables = build_cost_tables(graph, cluster, training, space, default_params(), pp,
                                           2, Schedule.one_f_one_b)
                assert_all_reach(solve_every_way(tables, pp), ref[0], tables, graph, cluster,
                                 training)
                assert all(s.zero == 2 for st in ref[1].stages for s in st.strategies)
    assert all(best[True, pp] > best[False, pp] for pp in (1, 2))
