"""Pooling and normalisation layers are memory bound (``compute.MEMORY_BOUND_KINDS``):
priced as HBM traffic at the device's bandwidth, with no GEMM kernel and no
per-GEMM-kernel latency (``efficiency_half_us``). Before, a pool's
``k²·C·Hout·Wout`` operations were priced as one GEMM forward and two backward,
each paying the per-kernel latency (about 2.4% of Inception-v3's iteration).

Oracles: the traffic written out by hand from the tensor sizes (roofline,
Williams et al. 2009; PyTorch's pooling kernels read the input and write the
output once per pass, the backward reads the output gradient and writes the
input gradient; LayerNorm's backward also re-reads the saved input) at the A100
datasheet bandwidth, 2,039 GB/s; and exhaustive search = the solvers =
``evaluate`` on a graph that holds such layers.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from support.bruteforce import brute_force
from support.solver_agreement import assert_all_reach, solve_every_way
from autopar_opt.cost.compute import compute_time, gemm_kernels
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.layer_cost import layer_cost
from autopar_opt.cost.memory import activation_bytes
from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import build_cost_tables
from autopar_opt.ir.graph import Layer, LayerGraph, LayerKind
from autopar_opt.ir.hardware import make_cluster
from autopar_opt.model_zoo.cnn import CnnBuilder, Tensor
from autopar_opt.ir.strategies import Strategy
from autopar_opt.model_zoo.synthetic import small_cluster
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training

A100_80_BW = 2039e9            # bytes/s, NVIDIA A100 SXM4 80GB datasheet


def _ctx(params=None, samples: int = 32):
    cl = make_cluster("c", 1, 8, "A100-80GB")
    p = params or default_params()
    return StageContext(cl, Training(256, None, "bf16"), p, 1, samples)


def _maxpool1() -> Layer:
    """Inception-v3's maxpool1: 3x3 stride 2 over 64x147x147 -> 64x73x73 (16-bit)."""
    b = CnnBuilder("t")
    b.pool("maxpool1", Tensor("x", 64, 147, 147), 3, 2, op="max")
    return b.layers[0]


def test_a_pool_is_its_hbm_traffic_by_hand():
    """Max pool: read x, write y and the int64 arg-max index forward; read dy
    and the index, write dx backward (``DilatedMaxPool2d.cu``)."""
    pool = _maxpool1()
    x, y = 2.0 * 64 * 147 * 147, 2.0 * 64 * 73 * 73         # bytes per sample
    idx = 8.0 * 64 * 73 * 73                                 # one int64 per output element
    c = compute_time(pool, Strategy(dp=1, tp=1), _ctx())
    assert c.fwd_s == pytest.approx(32 * (x + y + idx) / A100_80_BW, rel=1e-12)
    assert c.bwd_s == pytest.approx(32 * (y + x + idx) / A100_80_BW, rel=1e-12)
    assert c.gemm_s == 0.0 and c.attn_s == 0.0
    assert gemm_kernels(pool) == 0
    # data parallelism splits the micro-batch; full recomputation re-reads and re-writes once more
    c8 = compute_time(pool, Strategy(dp=8, tp=1, recompute=Recompute.full), _ctx())
    assert c8.total_s == pytest.approx(4 * (3 * (x + y + idx)) / A100_80_BW, rel=1e-12)
    # the same window as an average pool writes no index: 5·y against 9·y (x = 4.05·y)
    b = CnnBuilder("t")
    b.pool("avg", Tensor("x", 64, 147, 147), 3, 2, op="avg")
    avg = compute_time(b.layers[0], Strategy(dp=1, tp=1), _ctx())
    assert avg.fwd_s == pytest.approx(32 * (x + y) / A100_80_BW, rel=1e-12)
    assert c.total_s / avg.total_s == pytest.approx(1.0 + 4 * y / (x + y), rel=1e-12)
    assert 1.79 < c.total_s / avg.total_s < 1.80
    # the index is part of the layer's identity (tables share costs by signature)
    assert pool.signature() != replace(pool, pool_index_bytes=0.0).signature()
    # the model FLOPs are still reported (MFU), only the time changed
    assert c.flops == pytest.approx(32 * (pool.flops_fwd + pool.flops_bwd))


def test_a_pool_pays_no_gemm_latency_and_no_fitted_elementwise_passes():
    """The time depends on neither ``efficiency_half_us`` nor ``elementwise_passes``
    (the fitted passes of the transformer element-wise kernels): under the old
    pricing both moved it."""
    pool = _maxpool1()
    base = compute_time(pool, Strategy(dp=1, tp=1), _ctx()).total_s
    p = default_params()
    other = replace(p, efficiency_half_us=p.efficiency_half_us * 3,
                    elementwise_passes=p.elementwise_passes + 2)
    assert compute_time(pool, Strategy(dp=1, tp=1), _ctx(other)).total_s == base
    # a conv of the same graph still pays both (it is a GEMM with element-wise BN/ReLU)
    b = CnnBuilder("t")
    b.conv("conv", Tensor("x", 64, 35, 35), 64, 3, pad=1)
    conv = b.layers[0]
    assert compute_time(conv, Strategy(dp=1, tp=1), _ctx(other)).total_s > \
        compute_time(conv, Strategy(dp=1, tp=1), _ctx()).total_s


def test_a_norm_layer_rereads_its_input_in_backward():
    x = 4.0e6
    norm = Layer("ln", LayerKind.norm, flops_fwd=5e5, flops_bwd=1e6, params=2048,
                 act_bytes=x, act_replicated_bytes=x, input_bytes=x, output_bytes=x, max_tp=8,
                 supports_sp=True)
    c = compute_time(norm, Strategy(dp=1, tp=1), _ctx(samples=4))
    assert c.fwd_s == pytest.approx(4 * 2 * x / A100_80_BW, rel=1e-12)
    assert c.bwd_s == pytest.approx(4 * 3 * x / A100_80_BW, rel=1e-12)   # read dy and x, write dx
    assert c.gemm_s == 0.0
    # tensor parallelism leaves it replicated unless sequence parallelism splits the tokens
    rep = compute_time(norm, Strategy(dp=1, tp=4), _ctx(samples=4)).total_s
    sp = compute_time(norm, Strategy(dp=1, tp=4, sp=True), _ctx(samples=4)).total_s
    assert rep == pytest.approx(c.total_s, rel=1e-12) and sp == pytest.approx(rep / 4, rel=1e-12)


@pytest.mark.parametrize("repl_share", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("sp", [False, True])
def test_a_norm_splits_its_time_as_its_memory_under_tp(repl_share, sp):
    """Time and stored bytes use one decomposition: the replicated share ``r``
    stays whole without sequence parallelism, the rest is split by ``tp``.
    By hand at tp = 4: without SP, ``r + (1 - r)/4`` of the tp = 1 figure
    (1/4, 5/8, 1 for r = 0, 1/2, 1); with SP, 1/4 for every r. Before, the
    time stayed whole without SP whatever ``r`` while the memory was split."""
    x = 4.0e6
    norm = Layer("ln", LayerKind.norm, flops_fwd=5e5, flops_bwd=1e6, params=2048,
                 act_bytes=x, act_replicated_bytes=repl_share * x, input_bytes=x,
                 output_bytes=x, max_tp=8, supports_sp=True)
    hand = 0.25 if sp else repl_share + (1.0 - repl_share) / 4
    one, four = Strategy(dp=1, tp=1), Strategy(dp=1, tp=4, sp=sp)
    t = [compute_time(norm, st, _ctx(samples=4)).total_s for st in (one, four)]
    m = [activation_bytes(norm, st, 4) for st in (one, four)]
    assert t[1] / t[0] == pytest.approx(hand, rel=1e-12)
    assert m[1] / m[0] == pytest.approx(hand, rel=1e-12)


def test_every_inception_pool_is_priced_by_its_traffic():
    """All 14 pools of Inception-v3 (max, average and the global average pool):
    ``time = 2·(x + y + i)·samples / bandwidth``, ``i = 4·y`` for the four max
    pools (an int64 index per 16-bit output element), 0 else; nothing else (no parameters: no
    gradient sync; one device per sample group: no communication)."""
    from autopar_opt.model_zoo.registry import build_model
    graph = build_model("inception-v3")
    ctx = _ctx()
    pools = [layer for layer in graph.layers if layer.kind is LayerKind.pool]
    assert len(pools) == 14
    for pool in pools:
        c = layer_cost(pool, Strategy(dp=8, tp=1), ctx)
        index = 4.0 * pool.output_bytes if "max" in pool.name else 0.0   # int64 vs 16-bit
        hand = 4 * 2 * (pool.input_bytes + pool.output_bytes + index) / A100_80_BW
        assert c.time_s == pytest.approx(hand, rel=1e-12), pool.name
        assert c.sync_s == 0.0 and c.comm_s == 0.0


SPACE = SearchSpace(zero_levels=(0,), recompute=(Recompute.none, Recompute.full),
                    sequence_parallel=(False, True), tp_degrees=(1, 2))


def test_solvers_and_evaluate_agree_on_a_graph_with_memory_bound_layers():
    """A GEMM layer, two norms and a pool: brute force (cost functions,
    no tables) = DP = MILP = MIQP (when installed) = block MILP, and evaluate
    reproduces each objective."""
    mb = 1e6
    layers = [
        Layer("l0", LayerKind.linear, flops_fwd=4e9, flops_bwd=8e9, params=4_000_000,
              act_bytes=8 * mb, input_bytes=8 * mb, output_bytes=8 * mb, tp_comm_bytes=8 * mb,
              max_tp=2),
        *[Layer(f"ln{i}", LayerKind.norm, flops_fwd=4e6, flops_bwd=8e6, params=2048,
                act_bytes=8 * mb, input_bytes=8 * mb, output_bytes=8 * mb, max_tp=2,
                supports_sp=True) for i in range(2)],     # identical: the block MILP's run
        Layer("pool", LayerKind.pool, flops_fwd=9e6, flops_bwd=9e6, act_bytes=2 * mb,
              input_bytes=8 * mb, output_bytes=2 * mb),
    ]
    graph = LayerGraph.chain("mb", layers)
    cluster = small_cluster(1, 4)
    training = Training(global_batch_size=8)
    for pp in (1, 2):
        tables = build_cost_tables(graph, cluster, training, SPACE, default_params(), pp, 2,
                                   Schedule.one_f_one_b)
        ref = brute_force(graph, cluster, training, SPACE, pp, 2)
        assert ref is not None
        assert_all_reach(solve_every_way(tables, pp), ref[0], tables, graph, cluster, training)
