"""Tensor-parallel input redistribution per projection (runtime ``tp_input_per_projection``).

Oracle: the collectives counted by hand from the DTensor plan KempnerForge builds
(``distributed/tensor_parallel.py`` ``_build_block_tp_plan``): every one of a gated block's
five column-parallel projections (q, k, v, gate, up) redistributes its own input, the two
row-parallel ones (o, down) their outputs. With sequence parallelism: forward 5 all-gathers
and 2 reduce-scatters, backward 5 reduce-scatters (the input gradients) and 2 all-gathers,
and a fully recomputed forward repeats the forward ones; without it, 2 all-reduces forward
and 5 backward. Megatron's pattern is 2 + 2 each way. Each collective moves one block
input (``tp_comm_bytes / 2``).
"""

from __future__ import annotations

import pytest

from autopar_opt.calibration.reading.stacks import kempnerforge
from autopar_opt.cost.comm import collective, projection_inputs, tp_comm_time
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.params import CostParams
from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Recompute, Training

T = 8e6           # tp_comm_bytes per sample: two block inputs (attention, MLP)


def _ctx(per_projection: bool, fused: bool) -> StageContext:
    rt = runtime_named("pytorch-fsdp", tp_input_per_projection=per_projection,
                       fused_projections=fused)
    return StageContext(make_cluster("c", 1, 8, "H100-SXM-80GB"),
                        Training(8, 1, "bf16", runtime=rt), CostParams(), 4, 8)


def _block() -> Layer:
    return Layer("b", LayerKind.transformer_block, flops_fwd=1e12, flops_bwd=2e12, params=1e8,
                 tp_comm_bytes=T,
                 gemm_kernels=4, gemm_kernels_unfused=7)


@pytest.mark.parametrize("sp,recompute,ag,rs,ar", [
    (True, Recompute.none, 7, 7, 0),        # 5 + 2 gathers, 2 + 5 reduce-scatters
    (True, Recompute.full, 12, 9, 0),       # the forward's 5 gathers and 2 RS again
    (False, Recompute.none, 0, 0, 7),       # 2 forward all-reduces, 5 backward
    (False, Recompute.full, 0, 0, 9),
])
def test_counts_by_hand(sp, recompute, ag, rs, ar):
    ctx = _ctx(True, fused=False)
    s = Strategy(dp=1, tp=4, sp=sp, recompute=recompute)
    b = _block()
    assert projection_inputs(b, ctx.training.runtime, 2) == 5
    per = b.tp_comm_bytes * ctx.microbatch_samples / (s.dp * s.cp) / 2
    hand = ((collective(ctx, "all_gather", 4, 1, ag * per, ag) if ag else 0.0)
            + (collective(ctx, "reduce_scatter", 4, 1, rs * per, rs) if rs else 0.0)
            + (collective(ctx, "all_reduce", 4, 1, ar * per, ar) if ar else 0.0))
    assert tp_comm_time(b, s, ctx) == pytest.approx(hand, rel=1e-12)


def test_fused_projections_or_the_flag_off_keep_megatrons_two():
    b = _block()
    s = Strategy(dp=1, tp=4, sp=True)
    megatron = tp_comm_time(b, s, _ctx(False, fused=False))
    assert projection_inputs(b, _ctx(True, fused=True).training.runtime, 2) == 2
    assert tp_comm_time(b, s, _ctx(True, fused=True)) == pytest.approx(megatron, rel=1e-12)
    assert tp_comm_time(b, s, _ctx(True, fused=False)) > 1.5 * megatron


def test_kempnerforge_redistributes_per_projection_only_uncompiled():
    notes: list[str] = []
    eager = kempnerforge(notes, "kempnerforge (fsdp2 ...), torch.compile off")
    assert eager.tp_input_per_projection and not eager.fused_projections
    assert "one tensor-parallel input redistribution per projection" in "\n".join(notes)
    notes = []
    compiled = kempnerforge(notes, "kempnerforge (fsdp2 ...)")
    assert not compiled.tp_input_per_projection and "CSE" in "\n".join(notes)
