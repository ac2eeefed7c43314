"""Selective recomputation re-runs the context-parallel exchange of the attention it
recomputes (QA round 12).

Oracle: Megatron-Core's selective recomputation checkpoints ``core_attn`` (the
``--recompute-modules`` default), which under context parallelism is Transformer
Engine's attention with the exchange inside it (``AttnFuncWithCPAndKVP2P``, the
all-gather and all-to-all variants), so the backward pass re-runs the forward's
exchange as full recomputation does. By hand: Ulysses' two all-to-alls per forward
(the pairwise exchange of :mod:`autopar_opt.cost.collectives` inside one node), three
forward-sized exchanges with a recomputed forward; the ring's ``cp - 1`` K/V sends
forward twice and the K/V + dK/dV sends once. Before the fix selective recomputation
priced the recomputed core without its exchange."""

import pytest

from autopar_opt.cost import compute
from autopar_opt.cost.collectives import p2p_time
from autopar_opt.cost.comm import cp_comm
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.params import default_params
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Recompute, Training
from autopar_opt.model_zoo.transformer import transformer_block

S, H = 32768, 4096


def _block():
    return transformer_block("b", S, H, 32, 14336, kv_heads=8, gated_mlp=True, flash_attention=True,
                             biases=False, fused_gated=True, dropout=False, layer_norm=False)


def _ctx(kind: str) -> StageContext:
    cl = make_cluster("c", 1, 8, "H100-SXM-80GB")
    tr = Training(global_batch_size=64, seq_len=S, runtime=runtime_named("megatron-core", cp_comm_type=kind))
    return StageContext(cl, tr, default_params(), 8, 2)


def test_ulysses_exchanges_again():
    blk, ctx = _block(), _ctx("a2a")
    s = Strategy(dp=1, tp=2, cp=4, sp=True, recompute=Recompute.selective)
    link, eff = ctx.cluster.intra_node, ctx.params.comm_efficiency
    share = 2 / (1 * 4 * 2)

    def a2a(m):
        return 3 * link.latency_s + 3 / 4 * m / (link.bytes_per_s * eff)
    one_way = a2a((blk.input_bytes + blk.cp_comm_bytes) * share) + a2a(blk.input_bytes * share)
    raw, exposed, _ = cp_comm(blk, s, ctx, compute.compute_time(blk, s, ctx))
    assert raw == pytest.approx(3 * one_way) and exposed == raw


def test_ring_sends_the_forward_chunks_again():
    blk, ctx = _block(), _ctx("p2p")
    s = Strategy(dp=1, tp=2, cp=4, sp=True, recompute=Recompute.selective)
    chunk = blk.cp_comm_bytes / 2 * 2 / 1 / 4             # K/V over tp, 2 samples, a 1/cp chunk
    hop, eff = ctx.cluster.intra_pair, ctx.params.comm_efficiency
    raw, _, _ = cp_comm(blk, s, ctx, compute.compute_time(blk, s, ctx))
    assert raw == pytest.approx(3 * (2 * p2p_time(chunk, hop, eff) + p2p_time(2 * chunk, hop, eff)))
