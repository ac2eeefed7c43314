"""fp16 runs keep 16-bit gradients and a 16-bit data-parallel reduction on the
runtimes whose ``fp32_grad_buffer`` is forced for bf16 only
(``state.reduced_grad_bytes``).

Sources: Megatron-LM ``arguments.py`` forces
``accumulate_allreduce_grads_in_fp32`` for bf16 only; ``docs/source/
distrib_optimizer.md``: "fp16 param, fp16 grads: 20 (non-distributed),
4 + 16/d (distributed)", "bf16 param, fp32 grads: 18, 6 + 12/d";
DeepSpeed ``DeepSpeedEngine.communication_data_type``: ``torch.float16``
under fp16 unless set. The fp16 rows here are the table's minus the
optimizer's fp32 gradient copy (4 B, or 4/d sharded), which exists only
from ``step()`` to the next ``zero_grad`` (``state.state_bytes``).

Oracles: bytes per parameter by hand from the table; the ring all-reduce's
bandwidth term halves with the bytes (Thakur et al. 2005: 2(n-1)/n·V/β);
brute force = DP = MILP = MIQP = block MILP and ``evaluate`` on an fp16
instance.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from autopar_opt.calibration.reading.runtime import fp16_grad_dtype
from autopar_opt.cost.comm import gradient_sync, ring_link
from autopar_opt.cost.compute import compute_time
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.params import default_params
from autopar_opt.cost.state import reduced_grad_bytes, state_bytes, weight_parts
from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Recompute, Training

H = 1024
P = 12 * H * H + 13 * H


def _training(runtime: str, dtype: str, **caps: bool) -> Training:
    return Training(global_batch_size=8, seq_len=512, dtype=dtype,
                    runtime=runtime_named(runtime, **caps))


def _block() -> Layer:
    return Layer("b", kind=LayerKind.transformer_block, params=P, flops_fwd=24 * 512 * H * H,
                 flops_bwd=48 * 512 * H * H, flops_recompute_selective=0.0)


@pytest.mark.parametrize("rt", ["megatron-lm", "megatron-core"])
def test_megatron_bytes_per_parameter(rt):
    """Non-distributed: bf16 2 + 4 + 12 = 18 (the table's row); fp16
    2 + 2 + 12 = 16 (the table's 20 less the step-time fp32 gradient copy);
    fp16 with --accumulate-allreduce-grads-in-fp32: 2 + 4 + 12 = 18."""
    assert state_bytes(_training(rt, "bf16"), 0) == (2, 4, 12)
    assert state_bytes(_training(rt, "fp16"), 0) == (2, 2, 12)
    assert state_bytes(_training(rt, "fp16", fp16_fp32_grads=True), 0) == (2, 4, 12)
    assert reduced_grad_bytes(_training(rt, "fp16"), 0) == 2
    assert reduced_grad_bytes(_training(rt, "bf16"), 0) == 4
    assert reduced_grad_bytes(_training(rt, "fp8"), 0) == 4


@pytest.mark.parametrize("d", [2, 8])
def test_distributed_optimizer_bytes_per_parameter(d):
    """ZeRO-1 over d ranks (= --use-distributed-optimizer): bf16 6 + 12/d
    (the table), fp16 4 + 12/d (the table's 4 + 16/d less the 4/d shard of
    the fp32 gradient copy made in the step)."""
    block, s = _block(), Strategy(dp=d, tp=1, zero=1)
    bf16 = sum(weight_parts(block, s, _training("megatron-core", "bf16")))
    fp16 = sum(weight_parts(block, s, _training("megatron-core", "fp16")))
    assert bf16 == pytest.approx(P * (6 + 12 / d), rel=1e-12)
    assert fp16 == pytest.approx(P * (4 + 12 / d), rel=1e-12)


def test_deepspeed_bytes_per_parameter():
    """BF16_Optimizer: 2 + (4 fp32 accumulator + 2 lp .grad) + 12 = 20;
    FP16_Optimizer: 2 + 2 + 12 = 16 (its fp32 flat gradient is built in
    step()); the fp16 all-reduce moves 2 bytes (communication_data_type)."""
    assert state_bytes(_training("deepspeed", "bf16"), 0) == (2, 6, 12)
    assert state_bytes(_training("deepspeed", "fp16"), 0) == (2, 2, 12)
    assert reduced_grad_bytes(_training("deepspeed", "fp16"), 0) == 2


def test_runtimes_without_fp32_buffer_unchanged():
    for rt in ("megatron-bridge", "pytorch-fsdp", "torchtitan"):
        assert state_bytes(_training(rt, "fp16"), 0) == state_bytes(_training(rt, "bf16"), 0) == (2, 2, 12)


@pytest.mark.parametrize("rt", ["megatron-lm", "megatron-core", "deepspeed"])
def test_dp_reduction_bandwidth_term_halves(rt):
    """dp = 8 all-reduce, overlap off so all of it is exposed: time minus the
    ring latency 2(n-1)·α halves from bf16 (4 B) to fp16 (2 B)."""
    block, s = _block(), Strategy(dp=8, tp=1, recompute=Recompute.full)
    cl = make_cluster("c", 1, 8, "A100-80GB")

    def reduction(dtype: str) -> tuple[float, float]:
        tr = _training(rt, dtype, grad_reduce_overlap=False)
        ctx = StageContext(cl, tr, default_params(), 8, 1)
        exposed, hidden, _ = gradient_sync(block, s, ctx, compute_time(block, s, ctx))
        assert hidden == 0.0
        tier, _eff = ring_link(ctx, 8, 1)
        return exposed, 2 * 7 * tier.latency_s

    bf16, lat = reduction("bf16")
    fp16, lat16 = reduction("fp16")
    assert lat == lat16 and bf16 > lat
    assert fp16 - lat == pytest.approx((bf16 - lat) / 2, rel=1e-12)


def test_record_flag_reads_fp32_accumulation():
    rt = runtime_named("megatron-lm")
    notes: list[str] = []
    assert not fp16_grad_dtype(rt, "fp16", "Megatron-LM", "fp16 mixed precision", notes) \
        .fp16_fp32_grads
    on = fp16_grad_dtype(rt, "fp16", "Megatron-LM --accumulate-allreduce-grads-in-fp32",
                         "fp16", notes)
    assert on.fp16_fp32_grads
    assert fp16_grad_dtype(rt, "fp16", "", "--accumulate_allreduce_grads_in_fp32",
                           notes).fp16_fp32_grads
    assert fp16_grad_dtype(rt, "bf16", "x --accumulate-allreduce-grads-in-fp32", "", notes) is rt


def test_solvers_and_evaluate_agree_on_fp16():
    """brute force = DP = MILP = MIQP (when installed) = block MILP, evaluate
    reproduces each objective, on a Megatron-LM fp16 instance; the optimum is
    no slower than the same instance priced with fp32 gradients."""
    from support.bruteforce import brute_force
    from support.solver_agreement import assert_all_reach, solve_every_way
    from autopar_opt.cost.tables import build_cost_tables
    from autopar_opt.model_zoo.transformer import decoder_lm
    from autopar_opt.model_zoo.synthetic import small_cluster
    from autopar_opt.ir.training import Schedule, SearchSpace
    space = SearchSpace(zero_levels=(0, 1), recompute=(Recompute.none, Recompute.full),
                        sequence_parallel=(False,), tp_degrees=(1, 2))
    graph = decoder_lm("tiny", 2, 256, 256, 4, 1024, 1000)
    cluster = small_cluster(1, 4)
    for pp in (1, 2):
        best = {}
        for fp32 in (False, True):
            training = replace(_training("megatron-lm", "fp16", fp16_fp32_grads=fp32),
                               global_batch_size=8, seq_len=256)
            ref = brute_force(graph, cluster, training, space, pp, 2)
            assert ref is not None
            best[fp32] = ref[0]
            if not fp32:
                tables = build_cost_tables(graph, cluster, training, space, default_params(), pp,
                                           2, Schedule.one_f_one_b)
                assert_all_reach(solve_every_way(tables, pp), ref[0], tables, graph, cluster,
                                 training)
        assert best[False] <= best[True]
