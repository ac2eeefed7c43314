"""FSDP2's copies around its collectives, on the compute stream (``cost.fsdp_copies``).

Source: ``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py``:
``foreach_all_gather_copy_out`` (``split_with_sizes_copy`` of the gathered buffer into the
unsharded parameters: read and write the unit, 2·w bytes per parameter, in
``wait_for_unshard`` on the current stream) and ``foreach_reduce_scatter_copy_in``
(``torch._chunk_cat`` of the unsharded gradients into the reduce dtype before the
reduce-scatter stream waits on the current one: read g, write r); with gradient sync
off, ``_fsdp_param.py`` ``to_accumulated_grad_if_needed`` (cast: read g, write r) and
``accumulate_unsharded_grad_if_needed`` (add: read r + g, write r).

Oracles: the bytes per parameter by hand from those kernels, and the layer's compute
time grown by exactly those bytes at the measured copy bandwidth.
"""

from __future__ import annotations

import pytest

from autopar_opt.cost import fsdp_copies
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.fp8_casts import COPY_BANDWIDTH_FRACTION
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.params import default_params
from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.hardware import LinkTier, make_cluster
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Training

H = 1024
P = 12 * H * H
BLOCK = Layer("b", kind=LayerKind.transformer_block, params=P, flops_fwd=24 * 2048 * H * H,
              flops_bwd=48 * 2048 * H * H, flops_recompute_selective=0.0)
S3 = Strategy(dp=8, tp=1, zero=3)


def _ctx(runtime: str, microbatches: int, pipelined: bool = False, **caps) -> StageContext:
    """One 8-GPU H100 node, a global batch of 8·microbatches samples, micro-batch 8."""
    cl = make_cluster("t", 1, 8, "H100-SXM-80GB")
    tr = Training(8 * microbatches, 2048, "bf16", runtime=runtime_named(runtime, **caps))
    tie = LinkTier("ib", 50.0, 10.0) if pipelined else None
    return StageContext(cl, tr, default_params(), 8, 8, tie_tier=tie)


def test_torchtitan_pays_two_copy_outs_and_one_copy_in_per_microbatch():
    """torchtitan: FSDP2, resharding after forward (two gathers per micro-batch), bf16
    parameters (w = g = 2), fp32 reduce (r = 4), sync every micro-batch: 2·(2·2) + (2 + 4)
    = 14 bytes per parameter per micro-batch."""
    ctx = _ctx("torchtitan", 4)
    assert fsdp_copies.copy_bytes(BLOCK, S3, ctx) == pytest.approx(14.0 * P)


def test_no_sync_accumulation_casts_adds_and_copies_in_once():
    """KempnerForge's sync-off accumulation over c = 4 micro-batches, fp32 reduce: the
    first casts (2 + 4), the three others add (4 + 2 + 4 each), the last's reduce-scatter
    copies the accumulator in (4 + 4): (6 + 30 + 8) / 4 = 11, plus the two copy-outs 8."""
    ctx = _ctx("pytorch-fsdp", 4, fsdp2_copies=True, fsdp_no_sync_accumulation=True,
               fp32_grad_reduce=True)
    assert fsdp_copies.copy_bytes(BLOCK, S3, ctx) == pytest.approx(19.0 * P)


def test_same_dtype_accumulation_is_autograds_in_place_add():
    """Gradient sync off with the reduce dtype the parameters' (bf16): no cast; autograd adds
    each later micro-batch's gradient in place (2 + 2 read, 2 write); the last copy-in
    reads and writes bf16 (2 + 2): (0 + 3·6 + 4) / 4 = 5.5, plus the copy-outs 8."""
    ctx = _ctx("pytorch-fsdp", 4, fsdp2_copies=True, fsdp_no_sync_accumulation=True)
    assert fsdp_copies.copy_bytes(BLOCK, S3, ctx) == pytest.approx(13.5 * P)


def test_a_pipeline_that_keeps_the_parameters_gathers_once_per_iteration():
    """torchtitan under a pipeline keeps the parameters (reshard_after_forward False) and
    syncs on the last micro-batch only: one copy-out per iteration (4 bytes / c) and the
    fp32 accumulation: c = 4: 1 + 11 = 12 bytes per parameter per micro-batch."""
    ctx = _ctx("torchtitan", 4, pipelined=True)
    assert fsdp_copies.copy_bytes(BLOCK, S3, ctx) == pytest.approx(12.0 * P)


@pytest.mark.parametrize("runtime,caps,s", [
    ("pytorch-fsdp", {}, S3),                                  # FSDP1: the flat parameter
    ("torchtitan", {}, Strategy(dp=1, tp=8, zero=3)),          # nothing sharded
    ("torchtitan", {}, Strategy(dp=8, tp=1, zero=1)),          # no FSDP gather
    ("megatron-core", {}, S3),
])
def test_no_copies_where_fsdp2_gathers_nothing(runtime, caps, s):
    assert fsdp_copies.copy_bytes(BLOCK, s, _ctx(runtime, 4, **caps)) == 0.0


def test_the_layer_compute_grows_by_the_copies_at_the_copy_bandwidth():
    """layer_cost's compute_s with the copies minus without = the bytes over the H100's
    3,350 GB/s at the measured copy fraction; nothing else moves."""
    on, off = _ctx("torchtitan", 4), _ctx("torchtitan", 4, fsdp2_copies=False)
    a, b = layer_cost(BLOCK, S3, on), layer_cost(BLOCK, S3, off)
    expected = 14.0 * P / (3350e9 * COPY_BANDWIDTH_FRACTION)
    assert a.compute_s - b.compute_s == pytest.approx(expected, rel=1e-9)
    assert a.comm_s == pytest.approx(b.comm_s) and a.sync_s == pytest.approx(b.sync_s)


def test_records_say_which_fsdp_they_read():
    """A text naming FSDP2 or fully_shard turns the copies on and says so; a text naming
    neither is read as the FlatParameter FSDP and says that too."""
    from autopar_opt.calibration.reading.runtime import runtime_of
    notes2: list[str] = []
    assert runtime_of("PyTorch FSDP2 fully_shard", notes2).fsdp2_copies
    assert any("FSDP2 (fully_shard) stated" in n for n in notes2)
    notes1: list[str] = []
    assert not runtime_of("Composer / llm-foundry (PyTorch FSDP)", notes1).fsdp2_copies
    notes3: list[str] = []
    assert not runtime_of("fms-fsdp (PyTorch FSDP, SDPA)", notes3).fsdp2_copies
    assert any("FSDP version not stated" in n for n in notes3)
    kf = runtime_of("KempnerForge (PyTorch FSDP2 fully_shard + DTensor tensor parallel)", [])
    assert kf.fsdp2_copies


def test_the_assumptions_say_fsdp2_copies_are_priced():
    from autopar_opt.cost.assumptions import cost_assumptions
    from autopar_opt.ir.graph import LayerGraph
    graph = LayerGraph("one", [BLOCK], [])
    cl = make_cluster("t", 1, 8, "H100-SXM-80GB")
    for runtime, said in (("torchtitan", True), ("pytorch-fsdp", False)):
        tr = Training(8, 1024, "bf16", runtime=runtime_named(runtime))
        text = " ".join(cost_assumptions(graph, cl, tr, default_params()))
        assert ("cost/fsdp_copies.py" in text) is said
        # the FlatParameter reading of plain PyTorch FSDP is said, with how to change it
        assert ("fsdp2_copies: true" in text) is (not said)
