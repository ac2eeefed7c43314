"""Framework semantics of cost model v3 (issue 28, point 5), each against a hand-derived case.

Context parallelism (ring with per-step overlap and log-sum-exp merges, the all-gather
variant), ZeRO-3/FSDP over the dp x cp group, ``reshard_after_forward`` and its pipeline
default, and the overlap mechanisms of tensor parallelism. Ideal parameters (every
efficiency 1, no kernel latency) leave only the term under test.
"""

from __future__ import annotations

import pytest

from autopar_opt.cost import overlap
from autopar_opt.cost.collectives import p2p_time
from autopar_opt.cost.comm import collective, cp_comm, zero3_bytes, zero3_comm, zero3_sync
from autopar_opt.cost.compute import compute_time
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.params import CostParams
from autopar_opt.ir.graph import Layer, LayerKind
from autopar_opt.ir.hardware import LinkTier, make_cluster
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy, enumerate_strategies
from autopar_opt.ir.training import Recompute, SearchSpace, Training

IDEAL = CostParams(gemm_efficiency={}, efficiency_default=1.0, fp8_efficiency={},
                   comm_interference=0.0,
                   fp8_efficiency_default=1.0, efficiency_half_us=0.0, comm_efficiency=1.0,
                   inter_comm_efficiency=1.0, elementwise_passes=0.0,
                   optimizer_bytes_per_param=0.0, memory_reserve_gib=0.0, memory_fragmentation=0.0)
F, P, S = 1e12, 10**9, 8192


def _ctx(runtime: str = "megatron-core", devices: int = 8, samples: int = 8, pipelined=False,
         **caps) -> StageContext:
    cl = make_cluster("t", 1, 8, "H100-SXM-80GB", inter_node=LinkTier("ib", 50.0, 10.0))
    tr = Training(samples, S, "bf16", runtime=runtime_named(runtime, **caps))
    return StageContext(cl, tr, IDEAL, devices, samples,
                        tie_tier=cl.intra_node if pipelined else None)


def _block(**kw) -> Layer:
    base = dict(kind=LayerKind.transformer_block, flops_fwd=F, flops_bwd=2 * F, params=P,
                flops_recompute_selective=0.1 * F, head_dim=128, attn_causal=True,
                attn_flops_halved=True, input_bytes=2.0 * S * 4096, cp_comm_bytes=4e9,
                supports_cp=True)
    base.update(kw)
    return Layer("b", **base)


def test_ring_context_parallelism_per_step():
    """cp = 2, tp = 1, dp = 4 (8 samples: 2 per rank): the rank's K/V is 4e9 x 8/4 = 8e9
    bytes for the whole sequence, a chunk half of it; one forward step sends a chunk over
    NVLink (α 5 µs + 4e9/450e9), one backward step K/V and dK/dV (twice). Each overlaps one
    step's attention (half of the rank's forward / backward attention time): exposed
    max(0, c_f - a_f/2) + max(0, c_b - a_b/2). The two partial outputs merge at 6 bytes per
    output element per step, forward and backward: 2 x 2 x 6 x (2·8192·4096/2 x 2 samples
    / 2) elements at 3,350 GB/s."""
    layer, s = _block(), Strategy(dp=4, tp=1, cp=2)
    ctx = _ctx()
    comp = compute_time(layer, s, ctx)
    nvlink = ctx.cluster.intra_node
    chunk = 4e9 * 8 / 4 / 2
    c_f, c_b = p2p_time(chunk, nvlink, 1.0), p2p_time(2 * chunk, nvlink, 1.0)
    a_f, a_b = comp.attn_fwd_s, comp.attn_s - comp.attn_fwd_s
    raw, exp, merge = cp_comm(layer, s, ctx, comp)
    assert raw == pytest.approx(c_f + c_b, rel=1e-12)
    assert exp == pytest.approx(max(0, c_f - a_f / 2) + max(0, c_b - a_b / 2), rel=1e-12)
    out_elems = 2 * S * 4096 / 2 * 8 / (4 * 2)
    assert merge == pytest.approx(2 * 2 * 6 * out_elems / 3350e9, rel=1e-12)
    assert layer_cost(layer, s, ctx).cp_exposed_s == pytest.approx(exp + merge, rel=1e-12)


def test_ring_steps_run_the_chunk_length_kernel():
    """With cp = 2 the attention kernel runs on s/2 = 4096-token chunks: the efficiency of
    the 4096 row, lower than the 8192 row's, so the core takes longer than a cp = 1 run of the
    same per-rank work would at full length."""
    layer = _block()
    one = compute_time(layer, Strategy(dp=8, tp=1, cp=1), _ctx())
    two = compute_time(layer, Strategy(dp=4, tp=1, cp=2), _ctx())
    assert two.attn_s > one.attn_s            # same FLOPs per rank, slower kernel


def test_all_gather_context_parallelism_is_exposed():
    """Transformer Engine's all_gather variant (and torchtitan's default rotation): all-gather
    K/V forward and again backward, reduce-scatter dK/dV, nothing hidden, no merges."""
    layer, s = _block(), Strategy(dp=4, tp=1, cp=2)
    ctx = _ctx(cp_comm_type="all_gather")
    kv = 4e9 * 8 / 4
    ag = collective(ctx, "all_gather", 2, 1, kv)
    rs = collective(ctx, "reduce_scatter", 2, 1, kv)
    raw, exp, merge = cp_comm(layer, s, ctx, compute_time(layer, s, ctx))
    assert raw == exp == pytest.approx(2 * ag + rs, rel=1e-12) and merge == 0.0


def test_fsdp_shards_over_dp_times_cp():
    """dp = 1, cp = 8: FSDP (torchtitan's dp_shard_cp mesh) still shards the parameters over
    the 8 ranks: ZeRO-3 is offered, gathers and shards over the cp group."""
    layer = _block()
    strategies = enumerate_strategies(layer, 8, 1, SearchSpace(cp_degrees=(1, 8), tp_degrees=(1,),
                                                              zero_levels=(0, 3)), 8, S)
    assert any(s.cp == 8 and s.dp == 1 and s.zero == 3 for s in strategies)
    s = Strategy(dp=1, tp=1, cp=8, zero=3)
    ctx = _ctx("torchtitan", samples=1)
    raw, _ = zero3_comm(layer, s, ctx, compute_time(layer, s, ctx))
    w, g = zero3_bytes(ctx.training)
    assert raw == pytest.approx(2 * collective(ctx, "all_gather", 8, 1, P * w)
                                + collective(ctx, "reduce_scatter", 8, 1, P * g), rel=1e-12)


def test_reshard_after_forward_false_skips_the_backward_gather_and_holds_the_parameters():
    """torchtitan, ZeRO-3 over dp = 8, one stage, reshard_after_forward never: one gather
    (forward) and one reduce-scatter per micro-batch, and the gathered 2-byte parameters
    stay with the in-flight micro-batch's activations."""
    layer, s = _block(), Strategy(dp=8, tp=1, zero=3)
    always, never = _ctx("torchtitan"), _ctx("torchtitan", reshard_after_forward="never")
    w, g = zero3_bytes(always.training)
    gather = collective(always, "all_gather", 8, 1, P * w)
    rs = collective(always, "reduce_scatter", 8, 1, P * g)
    assert zero3_comm(layer, s, always, compute_time(layer, s, always))[0] == \
        pytest.approx(2 * gather + rs, rel=1e-12)
    assert zero3_comm(layer, s, never, compute_time(layer, s, never))[0] == \
        pytest.approx(gather + rs, rel=1e-12)
    held = layer_cost(layer, s, never).act_bytes - layer_cost(layer, s, always).act_bytes
    assert held == pytest.approx(P * w, rel=1e-12)


def test_torchtitan_pipeline_default_gathers_once_per_iteration():
    """torchtitan with pp > 1 keeps FSDP parameters unsharded (reshard_after_forward False,
    get_fsdp_reshard_after_forward_policy) and the pipeline schedule defers gradient sync to
    the last micro-batch: no per-micro-batch ZeRO-3 traffic, one gather + reduce-scatter per
    iteration in the sync term, the gather behind the first forward, the reduce-scatter after
    the schedule's last backward, exposed whole (torch.distributed.pipelining
    perform_reduce_grad: runtime pipeline_reduce_after_schedule), the unsharded parameters
    and gradients (2 + 4 bytes) held for the iteration."""
    layer, s = _block(), Strategy(dp=8, tp=1, zero=3)
    piped, flat = _ctx("torchtitan", pipelined=True), _ctx("torchtitan")
    comp = compute_time(layer, s, piped)
    assert zero3_comm(layer, s, piped, comp) == (0.0, 0.0)
    w, g = zero3_bytes(piped.training)
    gather = collective(piped, "all_gather", 8, 1, P * w)
    rs = collective(piped, "reduce_scatter", 8, 1, P * g)
    exp, hidden = zero3_sync(layer, s, piped, comp)
    assert exp + hidden == pytest.approx(gather + rs, rel=1e-12)
    assert exp == pytest.approx(max(0, gather - comp.fwd_s) + rs, rel=1e-12)
    assert zero3_sync(layer, s, flat, compute_time(layer, s, flat)) == (0.0, 0.0)
    extra = layer_cost(layer, s, piped).weight_bytes - layer_cost(layer, s, flat).weight_bytes
    assert extra == pytest.approx(P * (w + g), rel=1e-9)


def test_async_tp_hides_each_pair_by_ring_decomposition():
    """torchtitan with async TP: every collective-GEMM pair is micro-pipelined per rank
    (n = tp = 8) in both passes, no SM held: exposed = 2 x sum over the four pairs of
    7·max(0, c/7 - g_i/8), with the block's GEMM shares (QKV, proj, up, down) = (3, 2, 8, 4)."""
    layer = _block(tp_comm_bytes=4e8, max_tp=8, supports_sp=True, tp_gemm_shares=(3, 2, 8, 4))
    s = Strategy(dp=1, tp=8, sp=True)
    ctx = _ctx("torchtitan", tp_comm_overlap=True)
    comp = compute_time(layer, s, ctx)
    raw = layer_cost(layer, s, _ctx("torchtitan")).tp_exposed_s     # no overlap: all of it
    c = raw / 2 / 4
    g = [comp.gemm_fwd_s * x / 17 for x in (3, 2, 8, 4)]
    want = 2 * sum(7 * max(0.0, c / 7 - gi / 8) for gi in g)
    assert layer_cost(layer, s, ctx).tp_exposed_s == pytest.approx(want, rel=1e-12)
    assert overlap.ring_exchange_exposed(1.0, 0.0, 8) == pytest.approx(1.0)
    assert overlap.pipeline_exposed(1.0, 10.0) == pytest.approx(0.25)
    assert overlap.bulk_exposed(1.0, 0.4) == pytest.approx(0.6)


def test_full_recompute_repeats_the_forward_ring():
    layer = _block()
    ctx = _ctx()
    none, full = Strategy(dp=4, tp=1, cp=2), Strategy(dp=4, tp=1, cp=2, recompute=Recompute.full)
    raw0 = cp_comm(layer, none, ctx, compute_time(layer, none, ctx))[0]
    raw1 = cp_comm(layer, full, ctx, compute_time(layer, full, ctx))[0]
    chunk = 4e9 * 8 / 4 / 2
    assert raw1 - raw0 == pytest.approx(p2p_time(chunk, ctx.cluster.intra_node, 1.0), rel=1e-12)


def _no_sync_ctx(microbatches: int, **caps) -> StageContext:
    """8 samples per micro-batch on dp = 8, ``microbatches`` of them per iteration."""
    cl = make_cluster("t", 1, 8, "H100-SXM-80GB", inter_node=LinkTier("ib", 50.0, 10.0))
    rt = runtime_named("pytorch-fsdp", fp32_grad_reduce=True, **caps)
    tr = Training(8 * microbatches, S, "bf16", runtime=rt)
    return StageContext(cl, tr, IDEAL, 8, 8)


def test_fsdp_no_sync_accumulation_reduces_once_and_holds_unsharded_fp32_gradients():
    """FSDP2 with gradient sync off until the last micro-batch (KempnerForge's
    maybe_no_sync; torch ``post_backward``: ``to_accumulated_grad_if_needed`` keeps the
    unsharded gradient in reduce_dtype): over 4 micro-batches each layer gathers twice
    per micro-batch (forward, backward) and reduce-scatters once per iteration, in the
    last backward beside that backward's gather: exposed
    max(0, gather + rs - bwd) - max(0, gather - bwd) once. At the peak the stage holds
    the unsharded fp32 gradient of every local parameter: 4 x 1e9 bytes for the layer,
    in place of its sharded gradient. With one micro-batch nothing changes."""
    from autopar_opt.cost.layer_cost import unsharded_held_parts
    from autopar_opt.cost.state import weight_parts

    layer, s = _block(), Strategy(dp=8, tp=1, zero=3)
    acc, sync = _no_sync_ctx(4, fsdp_no_sync_accumulation=True), _no_sync_ctx(4)
    assert acc.microbatches == 4
    w, g = zero3_bytes(acc.training)
    assert g == 4.0
    gather = collective(acc, "all_gather", 8, 1, P * w)
    rs = collective(acc, "reduce_scatter", 8, 1, P * g)
    comp = compute_time(layer, s, acc)
    assert zero3_comm(layer, s, acc, comp)[0] == pytest.approx(2 * gather, rel=1e-12)
    assert zero3_comm(layer, s, sync, comp)[0] == pytest.approx(2 * gather + rs, rel=1e-12)
    exp, hidden = zero3_sync(layer, s, acc, comp)
    assert exp + hidden == pytest.approx(rs, rel=1e-12)
    assert exp == pytest.approx(max(0.0, gather + rs - comp.bwd_s) - max(0.0, gather - comp.bwd_s),
                                abs=1e-15)
    assert zero3_sync(layer, s, sync, comp) == (0.0, 0.0)
    # memory: the peak's gradients are the unsharded fp32 ones, 4 B x 1e9
    _, held_g, per_mb = unsharded_held_parts(layer, s, acc)
    assert held_g + weight_parts(layer, s, acc.training)[1] == pytest.approx(4.0 * P, rel=1e-12)
    assert per_mb == 0.0
    assert unsharded_held_parts(layer, s, sync) == (0.0, 0.0, 0.0)
    more = layer_cost(layer, s, acc).weight_bytes - layer_cost(layer, s, sync).weight_bytes
    assert more == pytest.approx(held_g, rel=1e-12)
    # one micro-batch: gradient sync on that (last) micro-batch, as without the option
    one = _no_sync_ctx(1, fsdp_no_sync_accumulation=True)
    assert zero3_comm(layer, s, one, comp)[0] == pytest.approx(2 * gather + rs, rel=1e-12)
    assert unsharded_held_parts(layer, s, one) == (0.0, 0.0, 0.0)


def test_kempnerforge_is_read_with_no_sync_accumulation():
    """The calibration's reader: KempnerForge turns gradient sync off until the last
    micro-batch (kempnerforge/training/grad.py maybe_no_sync); plain FSDP does not say so."""
    from autopar_opt.calibration.reading.runtime import runtime_of

    notes: list[str] = []
    kf = runtime_of("KempnerForge (PyTorch FSDP2 fully_shard + DTensor tensor parallel)", notes)
    assert kf.fsdp_no_sync_accumulation and kf.name == "pytorch-fsdp" and not kf.loss_parallel
    assert any("set_requires_gradient_sync(False)" in n for n in notes)
    assert not runtime_of("PyTorch FSDP2 fully_shard", []).fsdp_no_sync_accumulation


def test_replicated_logits_without_loss_parallel():
    """A DTensor stack that gathers the column-parallel logits to every TP rank
    (ColwiseParallel(output_layouts=Replicate()), KempnerForge) keeps and computes the
    loss over the whole vocabulary: tp = 4, a bf16 plain PyTorch loss (2-byte
    log-probabilities kept, 2 x 2 bytes of transient gradients per logit): the kept
    bytes and the transient are 4x the vocabulary-parallel ones; the forward all-gathers
    the 2-byte logits over the 4 ranks (S·V logits per sample, 8 samples over dp = 2);
    with loss_parallel nothing is gathered."""
    from autopar_opt.cost.comm import logits_gather_time
    from autopar_opt.cost.memory import activation_bytes, eager_loss_bytes

    vocab = 32000
    head = Layer("out", kind=LayerKind.lm_head, flops_fwd=F, flops_bwd=2 * F, params=P,
                 act_bytes=4.0 * S * vocab, act_replicated_bytes=0.0)
    s = Strategy(dp=2, tp=4, sp=True)
    cl = make_cluster("t", 1, 8, "H100-SXM-80GB", inter_node=LinkTier("ib", 50.0, 10.0))

    def ctx(parallel: bool) -> StageContext:
        rt = runtime_named("pytorch-fsdp", eager_cross_entropy=True, fused_cross_entropy=False,
                           loss_parallel=parallel)
        return StageContext(cl, Training(8, S, "bf16", runtime=rt), IDEAL, 8, 8)

    split, whole = ctx(True), ctx(False)
    logits = S * vocab * 8 / 2                        # per TP rank when replicated
    assert activation_bytes(head, s, 8, training=whole.training) == pytest.approx(2.0 * logits)
    assert activation_bytes(head, s, 8, training=split.training) == pytest.approx(2.0 * logits / 4)
    assert eager_loss_bytes(head, s, 8, whole.training) == pytest.approx(4.0 * logits)
    assert eager_loss_bytes(head, s, 8, split.training) == pytest.approx(logits)
    gather = collective(whole, "all_gather", 4, 1, 2.0 * logits)
    assert gather > 0 and logits_gather_time(head, s, whole) == pytest.approx(gather, rel=1e-12)
    assert logits_gather_time(head, s, split) == 0.0
    extra = layer_cost(head, s, whole).tp_exposed_s - layer_cost(head, s, split).tp_exposed_s
    assert extra == pytest.approx(gather, rel=1e-9)
    assert runtime_named("pytorch-fsdp").loss_parallel and runtime_named("torchtitan").loss_parallel
