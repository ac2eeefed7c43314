"""Ulysses context parallelism (runtime ``cp_comm_type`` ``a2a``).

Oracles: DeepSpeed-Ulysses (Jacobs et al. 2023, arXiv 2309.14509, Sec. 3.1): around
the attention core one all-to-all of Q, K, V and one of the output, forward, and
their gradients backward, each rank holding ``1/cp`` of the tokens before and the
whole sequence of ``heads/cp`` heads inside; the all-to-all's time by hand from the
link's latency and bandwidth (pairwise exchange inside a node, Thakur et al. 2005);
the heads of a call by hand; Transformer Engine's a2a rule (heads divisible by cp)."""

import pytest

from autopar_opt.cost import compute
from autopar_opt.cost.comm import cp_comm
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.params import default_params
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy, enumerate_strategies
from autopar_opt.ir.training import Recompute, SearchSpace, Training
from autopar_opt.model_zoo.transformer import transformer_block

S, H = 32768, 4096


def _block():
    return transformer_block("b", S, H, 32, 14336, kv_heads=8, gated_mlp=True, flash_attention=True,
                             biases=False, fused_gated=True, dropout=False, layer_norm=False)


def _ctx(kind: str, samples: int = 2) -> StageContext:
    cl = make_cluster("c", 1, 8, "H100-SXM-80GB")
    tr = Training(global_batch_size=64, seq_len=S, runtime=runtime_named("megatron-core", cp_comm_type=kind))
    return StageContext(cl, tr, default_params(), 8, samples)


def test_the_all_to_alls_by_hand():
    blk, ctx = _block(), _ctx("a2a")
    s = Strategy(dp=1, tp=2, cp=4, sp=True)
    comp = compute.compute_time(blk, s, ctx)
    link, eff = ctx.cluster.intra_node, ctx.params.comm_efficiency
    share = 2 / (1 * 4 * 2)                        # micro-batch 2 over dp 1, cp 4, tp 2

    def a2a(m):
        return 3 * link.latency_s + 3 / 4 * m / (link.bytes_per_s * eff)
    q_o = 2 * S * H * 2 / 2                        # input_bytes: 2·s·h, 16-bit (e = 1)
    kv = blk.cp_comm_bytes
    assert q_o == blk.input_bytes
    one_way = a2a((q_o + kv) * share) + a2a(q_o * share)
    raw, exposed, merge = cp_comm(blk, s, ctx, comp)
    assert raw == pytest.approx(2 * one_way) and exposed == raw and merge == 0.0
    full = cp_comm(blk, Strategy(dp=1, tp=2, cp=4, sp=True, recompute=Recompute.full), ctx, comp)
    assert full[0] == pytest.approx(3 * one_way)   # the recomputed forward exchanges again


def test_the_kernel_runs_the_whole_sequence_on_fewer_heads():
    blk = _block()
    s = Strategy(dp=1, tp=2, cp=4, sp=True)
    uly, ring = _ctx("a2a"), _ctx("p2p")
    # 32 heads: 16 per tp rank (2 samples), 4 per Ulysses rank
    assert compute.call_batch_heads(blk, s, ring) == pytest.approx(2 * 32 / 2)
    assert compute.call_batch_heads(blk, s, uly) == pytest.approx(2 * 32 / 8)
    look_u, look_r = compute.attention_lookup(blk, s, uly), compute.attention_lookup(blk, s, ring)
    from autopar_opt.cost import attention
    base = attention.lookup(look_u.kernel, "hopper", True, 128, S)
    assert look_u.fwd <= base.fwd and look_u.fwd == pytest.approx(
        base.fwd * attention.fill_factor(8, S, 128, look_u.kernel, True))
    chunk = attention.lookup(look_r.kernel, "hopper", True, 128, S / 4)
    assert look_r.fwd == pytest.approx(chunk.fwd * attention.fill_factor(32, S / 4, 128, look_r.kernel, True))


def test_heads_must_split_over_tp_times_cp():
    """8 KV heads (the block's max_tp): Ulysses admits tp·cp of 1, 2, 4, 8 only."""
    blk = _block()
    space = SearchSpace(cp_degrees=(1, 2, 4, 8, 16), tp_degrees=(1, 2, 4, 8))
    ring = enumerate_strategies(blk, 16, 16, space, 8, S)
    uly = enumerate_strategies(blk, 16, 16, space, 8, S, head_split_cp=True)
    assert any(s.tp * s.cp > 8 for s in ring)
    assert uly and all(8 % (s.tp * s.cp) == 0 for s in uly)
    assert {(s.tp, s.cp) for s in uly} == {(s.tp, s.cp) for s in ring if 8 % (s.tp * s.cp) == 0}
