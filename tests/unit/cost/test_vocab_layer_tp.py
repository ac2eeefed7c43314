"""The vocabulary-parallel embedding and output layer cross the tensor-parallel group once
each way per micro-batch (QA round 12).

Oracle: Shoeybi et al. 2019 (Megatron-LM), Sec. 3 and Fig. 3: a ``g`` operator
(all-reduce forward, identity backward) after the parallel embedding lookup, an ``f``
(identity forward, all-reduce backward) before the column-parallel output projection;
Megatron-Core ``VocabParallelEmbedding`` (``reduce_from_tensor_model_parallel_region``,
whose backward returns the gradient unchanged) and ``ColumnParallelLinear``
(``copy_to_tensor_model_parallel_region``). Under sequence parallelism (Korthikanti et al.
2022, Sec. 4.2.2) the ``g`` is a reduce-scatter (backward: all-gather) and the ``f`` an
all-gather (backward: reduce-scatter). Each collective priced by the model's own
:func:`~autopar_opt.cost.comm.collective`. A transformer block keeps its two collectives
each way. Before the fix both layers were priced as a block's sub-layer: the collective
forward and again backward (2 all-reduces of 2·s·h instead of 1)."""

import pytest

from autopar_opt.cost.comm import collective, tp_comm_time
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.params import default_params
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.ir.runtime import runtime_named
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Training
from autopar_opt.model_zoo.transformer import embedding, lm_head, transformer_block

S, H, V = 2048, 4096, 32000


def _ctx() -> StageContext:
    cl = make_cluster("c", 1, 8, "H100-SXM-80GB")
    tr = Training(global_batch_size=8, seq_len=S, runtime=runtime_named("megatron-core"))
    return StageContext(cl, tr, default_params(), 8, 2)


@pytest.mark.parametrize("sp", [False, True])
def test_once_each_way(sp):
    ctx = _ctx()
    s = Strategy(dp=1, tp=4, sp=sp)
    x = 2 * S * H * 2                                  # 2·s·h bytes x 2 samples
    ar = collective(ctx, "all_reduce", 4, 1, x)
    rs = collective(ctx, "reduce_scatter", 4, 1, x)
    ag = collective(ctx, "all_gather", 4, 1, x)
    for layer in (embedding("embed", S, H, V), lm_head("head", S, H, V)):
        assert layer.tp_comm_bytes * 2 == x
        assert tp_comm_time(layer, s, ctx) == pytest.approx(rs + ag if sp else ar, rel=1e-12)
    block = transformer_block("b", S, H, 32, 4 * H, flash_attention=True)
    two = 2 * collective(ctx, "reduce_scatter", 4, 1, 2 * x, 2) + 2 * collective(ctx, "all_gather", 4, 1,
                                                                                2 * x, 2) \
        if sp else 2 * collective(ctx, "all_reduce", 4, 1, 2 * x, 2)
    assert tp_comm_time(block, s, ctx) == pytest.approx(two, rel=1e-12)
