"""evaluate(): hand-derived iteration times and memory, and plan validation errors."""

from __future__ import annotations

import pytest

from autopar_opt.cost.params import CostParams
from autopar_opt.cost.evaluate import PlanError, evaluate
from autopar_opt.ir.graph import Layer, LayerGraph
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.plan import Plan, StagePlan, uniform_plan
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Schedule, Training

IDEAL = CostParams(gemm_efficiency={}, efficiency_default=1.0, efficiency_half_us=0.0,
                   comm_efficiency=1.0, inter_comm_efficiency=1.0,
                   elementwise_passes=0.0, optimizer_bytes_per_param=0.0,
                   memory_reserve_gib=0.0, memory_fragmentation=0.0)
F = 1e12      # forward FLOPs per sample
X = 1e8       # output bytes per sample
A = 1e9       # activation bytes per sample
PEAK = 312e12


def two_layers() -> LayerGraph:
    mk = lambda n: Layer(n, flops_fwd=F, flops_bwd=2 * F, act_bytes=A, output_bytes=X)
    return LayerGraph.chain("two", [mk("l0"), mk("l1")])


def test_two_stage_pipeline_by_hand():
    """1 node x 2 GPUs (NVLink3: 300 GB/s, α = 5 µs), B = 8, c = 4 → b = 2 samples.
    pp = 2, one device per stage, dp = tp = 1:
      p = 3·F·b/peak = 6e12/312e12 s per stage and micro-batch;
      o = 2·(α + X·b/β) (activation forward, gradient backward);
      T = 2p + o + (c−1)·max(p, o)  (no sync: no parameters).
    Memory (1F1B): stage 0 holds min(pp−0, c) = 2 micro-batches of A·b bytes, stage 1 one."""
    g = two_layers()
    cl = make_cluster("c", 1, 2, "A100-80GB")
    tr = Training(global_batch_size=8, seq_len=1, memory_reserve_gib=0.0)
    plan = uniform_plan(["l0", "l1"], 2, Strategy(dp=1, tp=1), microbatches=4)
    m = evaluate(plan, g, cl, tr, IDEAL)
    p = 3 * F * 2 / PEAK
    o = 2 * (5e-6 + X * 2 / 300e9)
    assert m.iteration_time_s == pytest.approx(2 * p + o + 3 * max(p, o), rel=1e-12)
    assert [s.peak_memory_gib for s in m.stages] == pytest.approx([2 * A * 2 / 2**30, A * 2 / 2**30])
    assert m.samples_per_s == pytest.approx(8 / m.iteration_time_s)
    assert m.mfu == pytest.approx(2 * 3 * F * 8 / (m.iteration_time_s * 2 * PEAK))


def test_single_stage_data_parallel_by_hand():
    """pp = 1, dp = 2 on 2 GPUs, c = 2 → b = 4 samples, 2 per device:
    p = 2 layers · 3·F·2/peak, T = c·p (one stage: no bubble, no sync);
    1F1B with one stage keeps one micro-batch: memory 2 layers · A·2."""
    g = two_layers()
    cl = make_cluster("c", 1, 2, "A100-80GB")
    tr = Training(global_batch_size=8, seq_len=1, memory_reserve_gib=0.0)
    plan = uniform_plan(["l0", "l1"], 1, Strategy(dp=2, tp=1), microbatches=2)
    m = evaluate(plan, g, cl, tr, IDEAL)
    p = 2 * 3 * F * 2 / PEAK
    assert m.iteration_time_s == pytest.approx(2 * p, rel=1e-12)
    assert m.stages[0].peak_memory_gib == pytest.approx(2 * A * 2 / 2**30)
    gp = evaluate(Plan(plan.stages, 2, Schedule.gpipe), g, cl, tr, IDEAL)
    assert gp.stages[0].peak_memory_gib == pytest.approx(2 * m.stages[0].peak_memory_gib)


@pytest.mark.parametrize("stages,c,match", [
    ([StagePlan(["l0"], [Strategy(1, 1)])], 4, "every layer exactly once"),
    ([StagePlan(["l1"], [Strategy(1, 1)]), StagePlan(["l0"], [Strategy(1, 1)])], 4, "backwards"),
    ([StagePlan(["l0", "l1"], [Strategy(2, 1), Strategy(2, 1)])], 8, "must divide the 1 samples"),
    ([StagePlan(["l0", "l1"], [Strategy(1, 1), Strategy(1, 1)])], 4, "must equal the 2 devices"),
    ([StagePlan(["l0", "l1"], [Strategy(2, 1), Strategy(2, 1)])], 3, "do not divide the global batch"),
])
def test_plan_errors(stages, c, match):
    g = two_layers()
    cl = make_cluster("c", 1, 2, "A100-80GB")
    with pytest.raises(PlanError, match=match):
        evaluate(Plan(stages, c), g, cl, Training(global_batch_size=8), IDEAL)


def test_a_one_stage_plan_has_no_bubble_from_round_off():
    """QA round 7: a one-stage plan's breakdown showed a pipeline bubble of -2.22e-16 s (the
    round-off of total minus the terms), printed as such in the solve summary. Here
    3 x 0.1 + 0.05 sums to 0.35000000000000003 against a total of 0.35."""
    from autopar_opt.cost.evaluate import StageMetrics, iteration_breakdown

    assert 0.35 - (3 * 0.1 + 0.05) != 0.0            # the round-off this guards against
    st = StageMetrics(index=0, layers=["l"], time_s=0.1, compute_s=0.1, comm_s=0.0,
                      transfer_s=0.0, sync_s=0.0, weight_gib=0.0, activation_gib=0.0,
                      peak_memory_gib=0.0, capacity_gib=80.0, inflight_microbatches=1)
    assert iteration_breakdown([st], 3, 0.35, 0.05)["pipeline_bubble_s"] == 0.0
    assert iteration_breakdown([st], 3, 0.45, 0.05)["pipeline_bubble_s"] == pytest.approx(0.1)


def test_mfu_is_over_the_datasheet_peak_whatever_the_power_cap():
    """A power cap slows the compute (the sustained clock, x(P/P_rated)^(1/3)) but MFU's
    denominator stays the datasheet peak (PaLM App. B), so the capped GPU running the same
    plan more slowly reports a lower MFU; it reported a higher one (QA round 10: 27.1%
    against 25.5% at 500 W on an H100)."""
    from dataclasses import replace

    from autopar_opt.ir.hardware import DEVICE_CATALOG

    g = two_layers()
    tr = Training(global_batch_size=8, seq_len=1, memory_reserve_gib=0.0)
    plan = uniform_plan(["l0", "l1"], 1, Strategy(dp=1, tp=1), microbatches=1)
    full = evaluate(plan, g, make_cluster("c", 1, 1, "H100-SXM-80GB"), tr, IDEAL)
    capped_dev = replace(DEVICE_CATALOG["H100-SXM-80GB"], power_limit_w=500.0)
    capped = evaluate(plan, g, make_cluster("c", 1, 1, capped_dev), tr, IDEAL)
    assert capped.iteration_time_s > full.iteration_time_s
    assert capped.mfu < full.mfu
    # the same model FLOPs over the same (datasheet) peak: MFU x T is the plan's constant
    assert capped.mfu * capped.iteration_time_s == pytest.approx(full.mfu * full.iteration_time_s)
    # by hand: 6·F·B FLOPs in T seconds on one 989 TFLOP/s GPU
    assert full.mfu == pytest.approx(6 * F * 8 / (full.iteration_time_s * 989e12))
