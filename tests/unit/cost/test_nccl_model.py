"""NCCL's cost model (autopar_opt.cost.nccl) against hand-derived values.

Every expected number is worked out from the constants of NVIDIA/nccl
src/graph/tuning.cc (@ 5067397c) written in the comment above it, not by
calling the code under test with other arguments.
"""

import math

import pytest

from autopar_opt.cost import nccl
from autopar_opt.cost.nccl import Group


def test_single_node_ring_simple_all_reduce_latency():
    """8 ranks in one NVLink node, Simple ring all-reduce: baseLat 8.4 µs plus
    2(n-1) = 14 steps of hwLat[NVLINK][RING][SIMPLE] = 3.4 µs: 8.4 + 47.6 = 56 µs."""
    g = Group(8, 1, 370.0)
    assert nccl.latency_us("all_reduce", "ring", "Simple", g) == pytest.approx(56.0)


def test_multi_node_ring_latency_counts_inter_steps():
    """32 ranks on 4 nodes, Simple ring all-gather: nsteps = 31, nInter = nodes-1 = 3;
    intraLat = max(3.4, 3 x netOverhead 1.0) = 3.4, interLat = hwLat[NET][RING][SIMPLE] = 14:
    8.4 + 28 x 3.4 + 3 x 14 = 145.6 µs. The all-reduce doubles both counts (nsteps 62,
    nInter 6: 8.4 + 56 x 3.4 + 6 x 14 = 282.8) and, for a large message, pays the 1.4x
    ring plateau factor: 395.92 µs."""
    g = Group(32, 4, 380.0)
    assert nccl.latency_us("all_gather", "ring", "Simple", g) == pytest.approx(145.6)
    assert nccl.latency_us("all_reduce", "ring", "Simple", g, 0.0) == pytest.approx(282.8)
    assert nccl.latency_us("all_reduce", "ring", "Simple", g, 2**30) == pytest.approx(282.8 * 1.4)


def test_one_rank_per_node_uses_the_tree_network_latency():
    """ppn = 1: interLat = hwLat[NET][TREE][p] (LL128: 8.5 instead of the ring's 4.0).
    16 nodes, LL128 ring all-gather: 14 + 15 x 8.5 = 141.5 µs (every step crosses a node)."""
    g = Group(16, 16, 47.5)
    assert nccl.latency_us("all_gather", "ring", "LL128", g) == pytest.approx(14.0 + 15 * 8.5)


def test_tree_latency_is_logarithmic_in_nodes():
    """Tree all-reduce, Simple, 64 nodes x 8 ranks: 8.4 + 2 x ((8-1) x 4.0 + log2(64) x 14)
    = 8.4 + 2 x (28 + 84) = 232.4 µs, against a ring's 8.4 + (1022 - 126) x 3.4 + 126 x 14
    = 4818.8 µs (times 1.4 for a large message)."""
    g = Group(512, 64, 380.0)
    assert nccl.latency_us("all_reduce", "tree", "Simple", g) == pytest.approx(232.4)
    assert nccl.latency_us("all_reduce", "ring", "Simple", g) == pytest.approx(4818.8)


def test_large_message_ring_time_is_the_bus_bandwidth_time():
    """16 GiB all-reduce on 8 ranks at a 370 GB/s bus: algorithm bandwidth 370 x 8/14,
    t = 56 µs + 16 GiB x 14 / (8 x 370 GB/s); nccl-tests' busbw (x 2 x 7/8) is 370 within
    the latency's 0.1%."""
    g = Group(8, 1, 370.0)
    m = 16 * 2**30
    t = 56e-6 + m / (370e9 * 8 / 14)
    assert nccl.algorithm_time("all_reduce", "ring", "Simple", m, g) == pytest.approx(t)
    assert nccl.collective_time("all_reduce", m, g) == pytest.approx(t)
    assert nccl.bus_bandwidth("all_reduce", m, g) == pytest.approx(370.0, rel=2e-3)


def test_small_messages_take_the_low_latency_protocol():
    """A 64 KiB all-reduce on one Hopper node: ring LL costs 6.6 + 14 x 0.6 = 15 µs of latency
    at min(llMaxBw = 141, 0.5 x 370) = 141 GB/s bus bandwidth, Simple 56 µs: LL wins."""
    g = Group(8, 1, 370.0)
    m = 64 * 2**10
    ll = 15e-6 + m / (141e9 * 8 / 14)
    assert nccl.algorithm_time("all_reduce", "ring", "LL", m, g) == pytest.approx(ll)
    assert nccl.collective_time("all_reduce", m, g) == pytest.approx(ll)


def test_tree_wins_all_reduce_at_scale():
    """1 MiB all-reduce over 512 ranks on 64 nodes: the ring's 1,000+ hops cost milliseconds,
    the tree's log2(64) network hops a few hundred microseconds."""
    g = Group(512, 64, 380.0)
    m = 2**20
    times = {(a, p): nccl.algorithm_time("all_reduce", a, p, m, g) for a, p in nccl.choices("all_reduce", g)}
    best = min(times, key=times.get)
    assert best[0] == "tree"
    assert nccl.collective_time("all_reduce", m, g) == pytest.approx(times[best])


def test_tree_correction_factor_by_message_size():
    """Tree Simple at 1 MiB: log2(2^20 / 64) = 14 -> treeCorrectionFactor[Simple][14] = 0.5;
    bus 0.92 x 380, algorithm bandwidth half of it, times 0.5."""
    g = Group(512, 64, 380.0)
    m = 2**20
    lat = 232.4e-6
    alg = 380.0 * 0.92 * 0.5 * 0.5
    assert nccl.algorithm_time("all_reduce", "tree", "Simple", m, g) == pytest.approx(lat + m / (alg * 1e9))


def test_all_gather_has_no_tree_and_one_rank_costs_nothing():
    g = Group(8, 1, 370.0)
    assert {a for a, _ in nccl.choices("all_gather", g)} == {"ring"}
    assert nccl.collective_time("all_gather", 2**20, Group(1, 1, 370.0)) == 0.0
    assert nccl.collective_time("reduce_scatter", 0.0, g) == 0.0
    with pytest.raises(ValueError, match="unknown collective"):
        nccl.collective_time("all_to_all", 1.0, g)


def test_ll_cap_depends_on_generation_in_a_node_and_on_node_count_across():
    """llMaxBws: one Ampere node 87.7 GB/s, one Blackwell node 282; across 2 nodes
    (x86 row) 39, across more 20.4."""
    m = 2**16
    for gen, cap in ((1, 87.7), (3, 282.0)):
        g = Group(8, 1, 1000.0, generation=gen)
        lat = nccl.latency_us("all_reduce", "ring", "LL", g) * 1e-6
        assert nccl.algorithm_time("all_reduce", "ring", "LL", m, g) == pytest.approx(
            lat + m / (cap * 1e9 * 8 / 14))
    g = Group(32, 4, 380.0)
    lat = nccl.latency_us("all_reduce", "ring", "LL", g) * 1e-6
    assert nccl.algorithm_time("all_reduce", "ring", "LL", m, g) == pytest.approx(
        lat + m / (20.4e9 * 32 / 62))
    assert math.isclose(nccl._ll_max(Group(16, 2, 380.0)), 39.0)


def test_inter_node_channels_follow_the_topology_search():
    """One channel per NIC at the fastest per-channel speed the NIC carries
    (search.cc speedArrayInter), doubled by ncclTopoDupChannels unless the speed is
    below 25 GB/s or, from Hopper, below 50 GB/s with more than 4 channels."""
    assert nccl.inter_node_channels(8, 50.0, 3) == 8      # 48 GB/s, 8 channels: kept
    assert nccl.inter_node_channels(8, 50.0, 2) == 8
    assert nccl.inter_node_channels(4, 50.0, 2) == 8      # 4 channels: doubled
    assert nccl.inter_node_channels(1, 50.0, 3) == 2
    assert nccl.inter_node_channels(0.5, 50.0, 2) == 2    # half a NIC: one channel, doubled
    assert nccl.inter_node_channels(8, 25.0, 1) == 8      # HDR 200 Gb/s: 24 GB/s, below 25
    assert nccl.inter_node_channels(8, 100.0, 3) == 16    # 800 Gb/s on Blackwell: 96, doubled


def test_tree_bandwidth_is_capped_by_its_channels():
    """64 B200 on 8 nodes, 8 NICs each (8 channels): tuning.cc caps the tree at
    min(0.92 x 380, 8 x perChMaxTreeBws[Blackwell][N4] = 8 x 24) = 192 GB/s, LL128 at
    min(192 x 120/128, 8 x perChMaxTreeLL128Bws = 8 x 20) = 160; without a channel count
    (inside a node) no cap. A 16 GiB tree all-reduce: algorithm bandwidth 192 / 2."""
    g = Group(64, 8, 380.0, generation=3, channels=8)
    m = 16 * 2**30
    lat = nccl.latency_us("all_reduce", "tree", "Simple", g, m) * 1e-6
    assert nccl.algorithm_time("all_reduce", "tree", "Simple", m, g) == \
        pytest.approx(lat + m / (192.0 / 2 * 1e9))
    lat128 = nccl.latency_us("all_reduce", "tree", "LL128", g, m) * 1e-6
    assert nccl.algorithm_time("all_reduce", "tree", "LL128", m, g) == \
        pytest.approx(lat128 + m / (160.0 / 2 * 1e9))
    uncapped = Group(64, 8, 380.0, generation=3)
    assert nccl.algorithm_time("all_reduce", "tree", "Simple", m, uncapped) == \
        pytest.approx(lat + m / (380.0 * 0.92 / 2 * 1e9))
    # the ring is not capped: it wins the large message
    assert nccl.collective_time("all_reduce", m, g) == \
        pytest.approx(min(nccl.algorithm_time("all_reduce", "ring", p, m, g) for p in nccl.PROTOCOLS))
