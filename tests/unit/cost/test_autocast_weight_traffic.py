"""PyTorch AMP's per-micro-batch weight traffic outside the GEMMs.

Under ``torch.autocast`` over fp32 parameters every micro-batch casts each GEMM
weight to 16 bits in the forward (``cached_cast``: ``arg.to(to_type)``, read 4 +
write 2 bytes; the cache dies with the autocast region, so the next micro-batch
casts again, and a fully or op-level recomputed forward casts once more), casts its
16-bit gradient back to fp32 in the backward (``_to_copy_backward``: read 2 + write
4) and, on every micro-batch but the first, adds the fp32 gradient into ``.grad``
(``AccumulateGrad``: read 4 + 4, write 4; ``zero_grad(set_to_none=True)`` leaves
nothing to add to on the first). ``compute.autocast_weight_bytes`` /
``autocast_weight_time``, measured against one H200 training step in
``benchmarks/kernels/H200.md``.

Oracles: the byte counts by hand; the layer's time grows by exactly those bytes at
the device's datasheet bandwidth and nothing else moves; a one-stage iteration pays
it ``c`` times; brute force = DP = MILP = MIQP (when installed) = block MILP, and
``evaluate`` reproduces each objective, with AMP on.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from autopar_opt.cost.compute import autocast_weight_bytes, autocast_weight_time
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.params import default_params
from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Recompute, Training

H = 1024
P = 12 * H * H + 13 * H          # one GPT block's parameters
E = 50_000 * H                   # a lookup embedding's table
BW = 2039e9                      # A100-80GB HBM, datasheet (the catalog's figure)
C = 4                            # micro-batches: global batch 8 over micro-batches of 2


def _training(autocast: bool = True, runtime: str = "pytorch-ddp") -> Training:
    return Training(global_batch_size=8, seq_len=512, dtype="bf16", runtime=runtime_named(runtime),
                    autocast=autocast)


def _ctx(training: Training) -> StageContext:
    return StageContext(make_cluster("c", 1, 8, "A100-80GB"), training, default_params(), 8, 2)


def _block() -> Layer:
    return Layer("b", kind=LayerKind.transformer_block, params=P, flops_fwd=24 * 512 * H * H,
                 flops_bwd=48 * 512 * H * H, flops_recompute_selective=0.0)


def _embedding() -> Layer:
    return Layer("emb", kind=LayerKind.embedding, params=E)


def test_the_hand_count_per_micro_batch():
    """A block: cast 6 + gradient cast 6, accumulate 12 x (c-1)/c = 9: 21 B per
    parameter; a full recompute casts again: 27; ZeRO-3 over dp 4 casts the whole
    gathered weight but accumulates its shard: 12 + 9/4; tp 2 halves all of it; a
    lookup embedding is not cast (autocast lists no ``embedding``), its fp32
    gradient still accumulates: 9 B per parameter."""
    ctx = _ctx(_training())
    assert ctx.microbatches == C
    blk, emb = _block(), _embedding()

    def bytes_(layer, s):
        return autocast_weight_bytes(layer, layer, s, ctx)
    assert bytes_(blk, Strategy(dp=1, tp=1)) == pytest.approx(21.0 * P, rel=1e-12)
    assert bytes_(blk, Strategy(dp=1, tp=1, recompute=Recompute.full)) == pytest.approx(27.0 * P, rel=1e-12)
    assert bytes_(blk, Strategy(dp=1, tp=1, recompute=Recompute.selective)) == pytest.approx(21.0 * P,
                                                                                       rel=1e-12)
    assert bytes_(blk, Strategy(dp=4, tp=1, zero=3)) == pytest.approx((12.0 + 9.0 / 4) * P, rel=1e-12)
    assert bytes_(blk, Strategy(dp=4, tp=1, zero=1)) == pytest.approx(21.0 * P, rel=1e-12)
    assert bytes_(blk, Strategy(dp=1, tp=2)) == pytest.approx(21.0 * P / 2, rel=1e-12)
    assert bytes_(emb, Strategy(dp=1, tp=1)) == pytest.approx(9.0 * E, rel=1e-12)


def test_fsdp_without_gradient_sync_accumulates_the_unsharded_gradient():
    """FSDP with gradient sync off until the last micro-batch (FSDP1 ``no_sync``,
    FSDP2 ``set_requires_gradient_sync(False)``) keeps each gradient unsharded and
    accumulates it whole: 12 + 9 B per parameter over dp 4, not 12 + 9/4."""
    t = Training(global_batch_size=8, seq_len=512, dtype="bf16", autocast=True,
                 runtime=runtime_named("pytorch-fsdp", fsdp_no_sync_accumulation=True))
    s = Strategy(dp=4, tp=1, zero=3)
    got = autocast_weight_bytes(_block(), _block(), s, _ctx(t))
    assert got == pytest.approx(21.0 * P, rel=1e-12)
    synced = replace(t, runtime=runtime_named("pytorch-fsdp"))
    assert autocast_weight_bytes(_block(), _block(), s, _ctx(synced)) == pytest.approx(
        (12.0 + 9.0 / 4) * P, rel=1e-12)


def test_one_micro_batch_accumulates_nothing():
    """c = 1: the only gradient of the iteration is stolen, not added."""
    ctx = StageContext(make_cluster("c", 1, 8, "A100-80GB"), _training(), default_params(), 8, 8)
    assert ctx.microbatches == 1
    assert autocast_weight_bytes(_block(), _block(), Strategy(dp=1, tp=1), ctx) == pytest.approx(12.0 * P)
    assert autocast_weight_bytes(_embedding(), _embedding(), Strategy(dp=1, tp=1), ctx) == 0.0


@pytest.mark.parametrize("s", [Strategy(dp=1, tp=1), Strategy(dp=2, tp=2, zero=1),
                               Strategy(dp=4, tp=1, zero=3, recompute=Recompute.full)])
def test_layer_time_grows_by_the_hand_count_and_nothing_else(s):
    """The same layer with and without AMP: compute differs by the bytes at 2,039
    GB/s and FLOPs do not (a block's FLOPs do not depend on autocast). Below ZeRO-3
    nothing else moves either; under ZeRO-3 AMP also gathers and reduce-scatters
    fp32 (its own terms), so only the compute is compared there."""
    on, off = _ctx(_training()), _ctx(_training(autocast=False))
    hand = autocast_weight_bytes(_block(), _block(), s, on) / BW
    assert hand > 0
    assert autocast_weight_time(_block(), _block(), s, on) == pytest.approx(hand, rel=1e-12)
    assert autocast_weight_time(_block(), _block(), s, off) == 0.0
    a, b = layer_cost(_block(), s, on), layer_cost(_block(), s, off)
    assert a.compute_s - b.compute_s == pytest.approx(hand, rel=1e-9)
    assert a.flops == b.flops
    if s.zero < 3:
        assert a.time_s - b.time_s == pytest.approx(hand, rel=1e-9)
        assert a.comm_s == b.comm_s


def test_a_tied_output_layer_casts_the_embedding_it_reads():
    """At pp = 1 the output layer holds no copy but its GEMM casts the tied matrix
    (over tp); it accumulates no gradient of its own (the embedding does)."""
    head = Layer("head", kind=LayerKind.lm_head, params=0, tied_params=E,
                 flops_fwd=2 * 512 * 50_000 * H, flops_bwd=4 * 512 * 50_000 * H)
    assert head.holds_tied_copy
    ctx = _ctx(_training())
    got = autocast_weight_bytes(head, head, Strategy(dp=1, tp=2), ctx)
    assert got == pytest.approx(12.0 * E / 2, rel=1e-12)


def test_one_stage_iteration_pays_it_once_per_micro_batch():
    """pp = 1: T = c·p + g + fixed (docs/DESIGN.md §3). Against the same plan
    without AMP the compute part ``c·p`` differs by c x the blocks' bytes; the
    once-per-iteration part ``g`` differs for AMP's own reasons (fp32 gradients
    reduced, fp32 parameters stepped), so the breakdown's compute is compared."""
    from autopar_opt.cost.evaluate import evaluate
    from autopar_opt.ir.graph import LayerGraph
    from autopar_opt.ir.plan import Plan, StagePlan
    graph = LayerGraph("blocks", [replace(_block(), name=f"b{i}") for i in range(2)], [("b0", "b1")])
    cluster = make_cluster("c", 1, 4, "A100-80GB")
    s = Strategy(dp=2, tp=2, zero=1)
    plan = Plan([StagePlan([layer.name for layer in graph.layers], [s] * 2)], C)
    on = evaluate(plan, graph, cluster, replace(_training(), global_batch_size=2 * C))
    off = evaluate(plan, graph, cluster, replace(_training(autocast=False), global_batch_size=2 * C))
    per_mb = 2 * 21.0 * P / 2 / BW
    assert on.breakdown["compute_s"] - off.breakdown["compute_s"] == pytest.approx(C * per_mb,
                                                                                   rel=1e-6)


def test_solvers_and_evaluate_agree_under_amp():
    """The term is in the layer-time tables: brute force (cost functions, no tables)
    = DP = MILP = MIQP (when installed) = block MILP, evaluate reproduces each
    objective; with recomputation on offer it costs a recomputed plan one more cast."""
    from support.bruteforce import brute_force
    from support.solver_agreement import agree_with_brute_force
    from autopar_opt.model_zoo.synthetic import small_cluster
    from autopar_opt.model_zoo.transformer import decoder_lm
    from autopar_opt.ir.training import SearchSpace
    space = SearchSpace(zero_levels=(0, 1, 3), recompute=(Recompute.none, Recompute.full),
                        sequence_parallel=(False,), tp_degrees=(1, 2))
    graph = decoder_lm("tiny", 2, 256, 256, 4, 1024, 1000)
    cluster = small_cluster(1, 4)
    training = replace(_training(), global_batch_size=8, seq_len=256)
    best = {}
    for amp in (True, False):
        t = replace(training, autocast=amp)
        for pp in (1, 2):
            if amp:
                ref, _ = agree_with_brute_force(graph, cluster, t, space, pp, 2)
            else:
                ref = brute_force(graph, cluster, t, space, pp, 2)
                assert ref is not None
            best[amp, pp] = ref[0]
    assert all(best[True, pp] > best[False, pp] for pp in (1, 2))
