"""Hand-derived redistribution costs on a two-operator graph (every pair of layouts).

``a`` writes a (64, 64) bf16 tensor, ``b`` reads it; both split dims ``i`` (rows) or
``j`` (columns). ``S`` = 8 KiB, ``α``/``β`` the NVLink tier's latency and effective
bandwidth (datasheet × NCCL efficiency), network ``α'``/``β'``. Forward: producer →
consumer layout; backward: the complete gradient back. Ring formulas:
all-gather over g: ``(g-1)α + (g-1)/g·S/β``; all-to-all: ``(g-1)α + (g-1)/g·(S/g)/β``.
"""

from __future__ import annotations

import pytest

from autopar_opt.ir.mesh import Config, Mesh
from autopar_opt.cost.operators.tables import build_tables
from support.opspace_cases import context, two_op_graph

S = 64 * 64 * 2


def _tiers(ctx):
    cl, p = ctx.cluster, ctx.params
    intra = (cl.intra_node.latency_s, cl.intra_node.bytes_per_s * p.comm_efficiency)
    inter = (cl.inter_node.latency_s, cl.inter_node.bytes_per_s * p.inter_comm_efficiency)
    return intra, inter


def _matrix(ctx, mesh):
    t = build_tables(two_op_graph(), ctx, mesh)
    assert t.edges == [(0, 1)]
    return t, t.redistribution[0]


def _cfg(*axes):
    """Config of a (i, j) operator from per-mesh-axis (f_i, f_j) pairs (axis 0 first; a
    1-D mesh (1, N) has an axis 0 of size 1)."""
    return Config(tuple(tuple(a) for a in axes))


def test_one_node_every_pair_of_1d_layouts():
    ctx = context(4)
    (a, b), _ = _tiers(ctx)
    t, R = _matrix(ctx, Mesh((1, 4), 4))
    rep, ri, rj = _cfg((1, 1), (1, 1)), _cfg((1, 1), (4, 1)), _cfg((1, 1), (1, 4))
    gather = 3 * a + 0.75 * S / b                 # all-gather over 4, one direction
    a2a = 3 * a + 0.75 * (S / 4) / b              # all-to-all over 4, one direction
    expected = {(rep, rep): 0.0, (ri, ri): 0.0, (rj, rj): 0.0,
                (rep, ri): gather, (rep, rj): gather,          # slice fwd, gather the gradient bwd
                (ri, rep): gather, (rj, rep): gather,          # gather fwd, slice bwd
                (ri, rj): 2 * a2a, (rj, ri): 2 * a2a}          # all-to-all both ways
    for (p, c), want in expected.items():
        got = R[t.index_of(0, p), t.index_of(1, c)]
        assert got == pytest.approx(want, rel=1e-12, abs=1e-15), (p.label(t.graph.ops[0]), c)


def test_one_node_2d_mesh_block_layouts():
    ctx = context(4)
    (a, b), _ = _tiers(ctx)
    t, R = _matrix(ctx, Mesh((2, 2), 4))
    i0j1 = _cfg((2, 1), (1, 2))       # i over mesh axis 0, j over axis 1: 2x2 blocks
    rep = _cfg((1, 1), (1, 1))
    i_ax1 = _cfg((1, 1), (2, 1))      # i over axis 1 only (replicated over axis 0)
    # 2x2 blocks -> replicated: each device gathers the 3 blocks it lacks
    assert R[t.index_of(0, i0j1), t.index_of(1, rep)] == pytest.approx(3 * a + 0.75 * S / b, rel=1e-12)
    # i halves over axis 1 (rank r = 2·i0 + i1 holds row block i1) -> 2x2 blocks (rank
    # holds row block i0, column block i1). Forward: rank 1 needs (row 0, col 1) but holds
    # row 1: one message of S/4 (rank 2 likewise); ranks 0, 3 hold theirs. Backward (2x2 ->
    # row halves): rank 1 needs row block 1 whole and holds none of it: two messages,
    # S/2. Slowest device each way: (α + S/4β) + (2α + S/2β).
    assert R[t.index_of(0, i_ax1), t.index_of(1, i0j1)] == pytest.approx(3 * a + 0.75 * S / b, rel=1e-12)


def test_two_nodes_tier_follows_where_the_blocks_are():
    ctx = context(4, gpus_per_node=2)
    (a, b), (a2, b2) = _tiers(ctx)
    # 1-D: i in 4 blocks -> replicated: two of the three blocks are on the other node
    t, R = _matrix(ctx, Mesh((1, 4), 2))
    ri, rep = _cfg((1, 1), (4, 1)), _cfg((1, 1), (1, 1))
    assert R[t.index_of(0, ri), t.index_of(1, rep)] == pytest.approx(3 * a2 + 0.75 * S / b2, rel=1e-12)
    # 2x2 mesh, mesh axis 0 = the two nodes: i halves over axis 0 -> replicated needs the
    # other node's half (network); i halves over axis 1 -> replicated: the node mate has it
    t, R = _matrix(ctx, Mesh((2, 2), 2))
    i_nodes, i_mates, rep2 = _cfg((2, 1), (1, 1)), _cfg((1, 1), (2, 1)), _cfg((1, 1), (1, 1))
    assert R[t.index_of(0, i_nodes), t.index_of(1, rep2)] == pytest.approx(a2 + 0.5 * S / b2, rel=1e-12)
    assert R[t.index_of(0, i_mates), t.index_of(1, rep2)] == pytest.approx(a + 0.5 * S / b, rel=1e-12)
