"""A max pool keeps its int64 arg-max index for the backward pass.

PyTorch's ``tools/autograd/derivatives.yaml`` gives ``max_pool2d_with_indices``
the backward ``max_pool2d_with_indices_backward(grad, self, ..., result1)``:
it saves ``self`` (the pool's input, i.e. its producer's output, which the
producer already counts) and ``result1`` (the int64 index, one per output
element). ``avg_pool2d_backward(grad, self, ...)`` saves only ``self``. The
index was priced as traffic (``memory_bound_bytes``) but not as memory; these
tests pin the stored bytes by hand and check that every solver and
``evaluate`` see the same figure.
"""

from __future__ import annotations


from support.bruteforce import brute_force
from support.solver_agreement import assert_all_reach, solve_every_way
from autopar_opt.cost.compute import memory_bound_bytes
from autopar_opt.cost.memory import activation_bytes
from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import build_cost_tables
from autopar_opt.ir.graph import LayerGraph, LayerKind
from autopar_opt.model_zoo.cnn import CnnBuilder, Tensor
from autopar_opt.model_zoo.registry import build_model
from autopar_opt.ir.strategies import Strategy
from autopar_opt.model_zoo.synthetic import small_cluster
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training


def _layer(graph, name):
    return next(layer for layer in graph.layers if layer.name == name)


def test_inception_maxpool1_keeps_its_output_and_its_index_by_hand():
    """maxpool1: 3x3 stride 2 over Conv2d_2b's 64x147x147 map -> 64x73x73.
    Kept: the 16-bit output (the next conv's saved input, as every layer) and
    the int64 index: 2·64·73·73 + 8·64·73·73 = 682,112 + 2,728,448 bytes."""
    graph = build_model("inception-v3")
    pool = _layer(graph, "maxpool1")
    assert pool.input_bytes == 2 * 64 * 147 * 147              # Conv2d_2b's output
    assert _layer(graph, "Conv2d_2b_3x3").act_bytes == pool.input_bytes   # counted there
    assert pool.act_bytes == 3_410_560.0
    assert activation_bytes(pool, Strategy(dp=1, tp=1), 32) == 32 * 3_410_560.0
    assert activation_bytes(pool, Strategy(dp=8, tp=1), 32) == 4 * 3_410_560.0
    # full recomputation keeps only the input (2,765,952 < 3,410,560): now worth offering
    assert activation_bytes(pool, Strategy(dp=1, tp=1, recompute=Recompute.full), 1) \
        == 2 * 64 * 147 * 147


def test_an_average_pool_keeps_only_its_output_by_hand():
    """Mixed_5b.avg_pool: 3x3 stride 1 pad 1 over maxpool2's 192x35x35 map.
    ``avg_pool2d_backward(grad, self, ...)`` saves ``self`` only (maxpool2's
    output, counted there): kept = the 16-bit output, 2·192·35·35 = 470,400
    bytes, and no index."""
    graph = build_model("inception-v3")
    avg = _layer(graph, "Mixed_5b.avg_pool")
    assert avg.input_bytes == _layer(graph, "maxpool2").output_bytes == 470_400.0
    assert avg.act_bytes == 470_400.0 and avg.pool_index_bytes == 0.0
    assert activation_bytes(avg, Strategy(dp=1, tp=1), 2) == 940_800.0


def test_time_and_memory_count_the_same_index_on_every_inception_pool():
    """For the 14 pools: the kept bytes exceed the output by exactly the
    index that the traffic prices (4·y for the four max pools, 0 else)."""
    graph = build_model("inception-v3")
    pools = [layer for layer in graph.layers if layer.kind is LayerKind.pool]
    assert len(pools) == 14
    maxes = 0
    for pool in pools:
        idx = 4.0 * pool.output_bytes if "max" in pool.name else 0.0
        maxes += idx > 0
        assert pool.pool_index_bytes == idx, pool.name
        assert pool.act_bytes - pool.output_bytes == idx, pool.name
        fwd, bwd = memory_bound_bytes(pool)
        assert fwd == bwd == pool.input_bytes + pool.output_bytes + idx, pool.name
    assert maxes == 4


SPACE = SearchSpace(zero_levels=(0,), recompute=(Recompute.none, Recompute.full),
                    sequence_parallel=(False,), tp_degrees=(1, 2))


def test_solvers_and_evaluate_agree_with_a_max_pool_index_in_memory():
    """conv -> two same-size max pools (the block MILP's run) -> conv, from
    the CNN builder: the tables
    hold the pool's kept bytes with the index, and brute force = DP = MILP =
    MIQP (when installed) = block MILP, with evaluate reproducing each."""
    b = CnnBuilder("t")
    x = b.conv("c1", Tensor("", 3, 64, 64), 32, 3, pad=1)
    x = b.pool("p1", x, 3, 1, 1, op="max")
    x = b.pool("p2", x, 3, 1, 1, op="max")
    b.conv("c2", x, 64, 3, pad=1)
    graph = LayerGraph.chain("pool-chain", b.layers)
    cluster = small_cluster(1, 4)
    training = Training(global_batch_size=8)
    for pp in (1, 2):
        tables = build_cost_tables(graph, cluster, training, SPACE, default_params(), pp, 2,
                                   Schedule.one_f_one_b)
        p1 = [layer.name for layer in graph.layers].index("p1")
        for k, s in enumerate(tables.strategies[p1]):
            if s.recompute is Recompute.none:
                # 8 samples / 2 micro-batches = 4 per micro-batch; 32x64x64 kept
                assert tables.act_bytes[p1][k] == 4 * (2 + 8) * 32 * 64 * 64 / s.dp
        ref = brute_force(graph, cluster, training, SPACE, pp, 2)
        assert ref is not None
        assert_all_reach(solve_every_way(tables, pp), ref[0], tables, graph, cluster, training)
