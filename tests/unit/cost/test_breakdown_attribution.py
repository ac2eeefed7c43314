"""Each exposed-communication term of a layer's price carries its own traffic (QA round 12).

Oracle: the definition of the terms (``LayerCost``: ``cp_exposed_s`` the context-parallel
exchange, ``zero_exposed_s`` the ZeRO-2/3 gathers and reduce-scatters) and the
interference rule of :func:`autopar_opt.cost.layer_cost.layer_cost`: hidden NCCL traffic
slows the compute by ``comm_interference`` x its hidden time. A ZeRO-0 plan moves no ZeRO
traffic, so its ZeRO term is 0 whatever its context-parallel ring hides; the ring's hidden
share is charged to the CP term, by hand from :func:`~autopar_opt.cost.comm.cp_comm`.
Before the fix the ring's interference was reported as ZeRO-2/3 communication
(``autopar estimate``: 'exposed ZeRO-2/3 comm 0.02175 s' for a dp2·tp2·cp4 ZeRO-0 plan)."""

import pytest

from autopar_opt.cost import compute
from autopar_opt.cost.comm import cp_comm
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.params import default_params
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Training
from autopar_opt.model_zoo.transformer import transformer_block

S, H = 32768, 4096


def _ctx() -> StageContext:
    cl = make_cluster("c", 1, 8, "H100-SXM-80GB")
    tr = Training(global_batch_size=16, seq_len=S, runtime=runtime_named("megatron-core"))
    return StageContext(cl, tr, default_params(), 8, 2)


def test_ring_interference_is_context_parallel_not_zero():
    blk = transformer_block("b", S, H, 32, 14336, kv_heads=8, gated_mlp=True, flash_attention=True,
                            biases=False, fused_gated=True, dropout=False, layer_norm=False)
    ctx = _ctx()
    s = Strategy(dp=1, tp=2, cp=4, sp=True)          # ZeRO-0
    raw, exp, merge = cp_comm(blk, s, ctx, compute.compute_time(blk, s, ctx))
    assert raw > exp            # the ring hides part of its sends: there is interference
    cost = layer_cost(blk, s, ctx)
    k = ctx.params.comm_interference
    assert cost.zero_exposed_s == 0.0
    assert cost.cp_exposed_s == pytest.approx(exp + merge + k * (raw - exp))
    # the terms still add up to the layer's exposed communication
    parts = (cost.tp_exposed_s + cost.cp_exposed_s + cost.zero_exposed_s + cost.ep_exposed_s
             + cost.offload_exposed_s)
    assert parts == pytest.approx(cost.comm_s)
