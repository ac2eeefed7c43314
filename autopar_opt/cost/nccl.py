"""NCCL's own cost model of a collective: ring and tree, LL, LL128 and Simple.

NCCL chooses, for every collective call, the algorithm and protocol of least
predicted time ``t = latency + bytes / bandwidth`` with a model whose
constants ship in its source (NVIDIA/nccl ``src/graph/tuning.cc`` @ 5067397c,
``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime``). This module is that model,
written out, with the group's large-message bus bandwidth as its one input
from the hardware (:class:`Group`): the cost model prices a collective the
way NCCL itself expects it to run, including the hop latencies that dominate
at hundreds of ranks and the switch to a tree for all-reduce across many
nodes. Every constant below cites its line.

* Latency (µs): ``baseLat[a][p]`` plus, for a ring, ``(nsteps - nInter)·intraLat
  + nInter·interLat`` with ``nsteps = 2(n-1)`` (all-reduce) or ``n-1``
  (all-gather, reduce-scatter) and ``nInter = 2(nodes-1)`` or ``nodes-1``;
  ``intraLat = max(hwLat[intra][ring][p], netOverhead·(3 for Simple))`` once
  the ring leaves the node; ``interLat = hwLat[NET][a][p]`` (the tree's
  network latency when one rank per node). For the tree (all-reduce only):
  ``2·((ppn-1)·intraLat + log2(nodes)·interLat)``. A multi-node ring Simple
  all-reduce pays ``1.4x`` its latency (``ncclTopoGetAlgoTime``, "Plateau
  effect of ring", compute capability ≥ 8.0; 1.9 below).
* Bandwidth (GB/s): the bus bandwidth ``busBw`` of the group (nccl-tests'
  large-message figure, :class:`Group`), scaled per protocol: ring LL
  ``min(llMaxBw, 0.5·busBw)``, ring LL128 ``0.92·busBw``; tree
  ``0.92·busBw``, then LL ``min(busBw/3.8, llMaxBw)`` or LL128 ``x 120/128``
  (``x 7/9`` inside one node); across nodes the tree's bandwidth is at most
  its channels times ``perChMaxTreeBws`` (LL128: ``perChMaxTreeLL128Bws``), the
  channels counted as NCCL's topology search builds them
  (:func:`inter_node_channels`: one per NIC, doubled unless fast and many); the
  tree's measured correction factor per
  message size (``treeCorrectionFactor``); then converted to algorithm
  bandwidth: ``busBw·n/nsteps`` for a ring, ``busBw/2`` for a tree.
* ``t = lat + bytes / (1000·bw)`` µs; the minimum over the algorithms and
  protocols is the collective's time.

* Broadcast (ring only, as NCCL runs it): the chain's fill, the ring latency above with
  ``n-1`` steps and ``nodes-1`` of them across the network, and bandwidth ``busBw`` (its
  algorithm bandwidth: nccl-tests ``doc/PERFORMANCE.md``). NCCL's tuner charges a ring
  broadcast one hop where its topology search kept the same channels
  (``tuning.cc``: ``if (graphs[a]->sameChannels) latencies += lat``), which its choice of
  protocol tolerates but a chain across hundreds of ranks does not: the first chunk
  crosses ``n-1`` links (``src/device/broadcast.h``), each paying the hop latency.

Not modelled (stated): NVLink SHARP (NVLS) and CollNet/SHARP in-network
reduction (all-reduce only, when the fabric has them: +23-30% bus bandwidth in
NVIDIA's GTC 2025 S72583 figures), PAT (all-gather/reduce-scatter with one
GPU per node, NCCL ≥ 2.23), the per-channel caps of rings and of trees inside one
node (their channel counts come from the intra-node search, not derived here),
the tree's ``x 0.85`` when the search falls back to the plain TREE pattern, and a
tuner plugin's own choices (AWS ofi).
"""

from __future__ import annotations

import functools

import math
from dataclasses import dataclass

#: Algorithms and protocols, in tuning.cc's order.
ALGORITHMS = ("tree", "ring")
PROTOCOLS = ("LL", "LL128", "Simple")
#: ``baseLatencies`` (µs), tuning.cc ``ncclTunerConstantsDefaults``: Tree, Ring x (LL, LL128, Simple).
BASE_LATENCY_US = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4)}
#: ``hwLatencies`` (µs) per link kind, algorithm and protocol (LL, LL128, Simple), tuning.cc.
HW_LATENCY_US = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4)},
    "pci": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7)},
    "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0)},
}
#: ``llMaxBws`` (GB/s): one node -> by GPU generation (Volta, Ampere, Hopper,
#: Blackwell) x (N1, N2, N4); several nodes -> by CPU (row 0: Intel x86, taken
#: for every cluster: stated).
LL_MAX_BW = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (282.0, 90.0, 70.0))
#: ``treeCorrectionFactor[protocol][log2(bytes/64)]``, messages of 64 B to 256 MB.
TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9))
#: ``getNetOverhead`` (µs) on an x86 Intel host (1.0; 2.0 on AMD): tuning.cc.
NET_OVERHEAD_US = 1.0
#: Protocol bandwidth factors of ``ncclTopoTuneModel`` (LL128: 120/128 of the
#: line used for data; LL: half).
LL_FACTOR, LL128_RING_FACTOR, TREE_FACTOR = 0.5, 0.92, 0.92
LL_TREE_DIVISOR, LL128_TREE_NET, LL128_TREE_NODE = 3.8, 120.0 / 128.0, 7.0 / 9.0
#: ``perChMaxTreeBws`` and ``perChMaxTreeLL128Bws`` (GB/s per channel), tuning.cc
#: ``ncclTunerConstantsDefaults``: generation (Volta, Ampere, Hopper, Blackwell) x
#: (N1, N2, N4+ nodes): the tree's bus bandwidth is at most ``nChannels`` times these.
PER_CHANNEL_TREE_BW = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (70.0, 42.8, 24.0))
PER_CHANNEL_TREE_LL128_BW = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0),
                             (55.6, 31.67, 20.0))
#: Per-channel bandwidths (GB/s) NCCL's topology search tries across nodes, fastest
#: first (src/graph/search.cc ``speedArrayInter``, ``sm90SpeedArrayInter``,
#: ``sm100SpeedArrayInter``), by generation: pre-Hopper, Hopper, Blackwell.
SPEEDS_INTER = (
    (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2,
     0.24, 0.12),
    (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24,
     0.12),
    (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0,
     2.4, 1.2, 0.24, 0.12))
#: Multi-node ring Simple all-reduce latency factor (``ncclTopoGetAlgoTime``,
#: compute capability >= 8.0; 1.9 below) when ``bytes/(nChannels·n) >= 64``,
#: taken with NCCL's usual 16 channels on NVSwitch systems (stated).
RING_PLATEAU, RING_PLATEAU_PRE_AMPERE, PLATEAU_CHANNELS = 1.4, 1.9, 16
#: Collectives this model prices.
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")


@dataclass(frozen=True)
class Group:
    """What a collective over one communicator sees.

    ranks : members of the communicator (``n``).
    nodes : nodes they span (one rank per node: ``nodes = ranks``).
    bus_gb_per_s : the group's large-message bus bandwidth, GB/s: the
        slowest of the per-rank intra-node link and the per-rank share of the
        node's NICs used by the group, each at its measured nccl-tests
        efficiency (:func:`autopar_opt.cost.comm.collective_group`).
    intra : link kind inside a node, ``nvlink`` or ``pci`` (``hwLatencies``).
    generation : 0 Volta, 1 Ampere, 2 Hopper, 3 Blackwell (``llMaxBws``,
        the ring plateau factor, the tree's per-channel caps).
    channels : the inter-node graph's channel count, which caps the tree
        (:func:`inter_node_channels`).
    """

    ranks: int
    nodes: int
    bus_gb_per_s: float
    intra: str = "nvlink"
    generation: int = 2
    #: channels of the communicator's inter-node graph (:func:`inter_node_channels`);
    #: 0 where not derived (inside one node): no per-channel cap on the tree
    channels: int = 0

    @property
    def ranks_per_node(self) -> float:
        return self.ranks / self.nodes


def _log2i(x: float) -> int:
    """NCCL's ``log2i``: floor of log2 (0 for x <= 1)."""
    return int(math.floor(math.log2(x))) if x > 1 else 0


def _steps(collective: str, n: int) -> int:
    """Ring steps of the latency term: ``2(n-1)`` for an all-reduce, ``n-1`` for an
    all-gather, a reduce-scatter and a broadcast (a broadcast's chunks travel the ring as
    a chain, root to the rank before it: ``src/device/broadcast.h`` ``runRing``, each
    rank ``directRecvCopyDirectSend`` to the next, so the first chunk crosses ``n-1``
    links before the last rank has it)."""
    return 2 * (n - 1) if collective == "all_reduce" else n - 1


def _ll_max(g: Group) -> float:
    row = LL_MAX_BW[g.generation] if g.nodes == 1 else LL_MAX_BW[0]
    return row[0 if g.nodes == 1 else 1 if g.nodes == 2 else 2]


def inter_node_channels(nics: float, nic_gb_per_s: float, generation: int) -> int:
    """Channels of a communicator's graph across nodes, as NCCL's topology search
    builds it (src/graph/search.cc ``ncclTopoCompute``): each channel crosses the
    network on one NIC at the fastest per-channel speed of :data:`SPEEDS_INTER`
    that the NIC carries (a 400 Gb/s NIC, 50 GB/s: 48), one channel per NIC the
    communicator uses (``nics``, at least one); ``ncclTopoDupChannels`` then
    doubles them (halving their speed) unless the speed is below 25 GB/s or, from
    Hopper on (compute capability above 8.0), it is below 50 GB/s with more than
    4 channels. A DGX H100 or B200 node's eight 400 Gb/s NICs: 8 channels at 48."""
    speeds = SPEEDS_INTER[min(max(generation - 1, 0), 2)]
    speed = next((v for v in speeds if v <= nic_gb_per_s + 1e-9), speeds[-1])
    n = max(1, math.ceil(nics - 1e-9))
    if speed < 25.0 or (generation >= 2 and speed < 50.0 and n > 4):
        return n
    return 2 * n


def _bus(algorithm: str, p: int, g: Group) -> float:
    """Bus bandwidth of ``algorithm`` with protocol index ``p`` (0 LL, 1 LL128, 2 Simple).
    The tree's is capped by its channels (tuning.cc: ``min(busBw·0.92, nChannels ·
    perChMaxTreeBw)`` for every protocol of a tree all-reduce, then LL128's own
    ``nChannels · perChMaxTreeLL128Bw``) where the channel count is known."""
    bus = g.bus_gb_per_s
    if algorithm == "ring":
        if p == 0:
            return min(_ll_max(g), bus * LL_FACTOR)
        return bus * LL128_RING_FACTOR if p == 1 else bus
    scale = 0 if g.nodes == 1 else 1 if g.nodes == 2 else 2
    bus *= TREE_FACTOR
    if g.channels:
        bus = min(bus, g.channels * PER_CHANNEL_TREE_BW[g.generation][scale])
    if p == 0:
        return min(bus / LL_TREE_DIVISOR, _ll_max(g))
    if p == 1:
        bus *= LL128_TREE_NODE if g.nodes == 1 else LL128_TREE_NET
        if g.channels:
            bus = min(bus, g.channels * PER_CHANNEL_TREE_LL128_BW[g.generation][scale])
        return bus
    return bus


def latency_us(collective: str, algorithm: str, protocol: str, g: Group, nbytes: float = 0.0) -> float:
    """Latency term of ``collective`` (module docstring), µs."""
    p = PROTOCOLS.index(protocol)
    n, nodes = g.ranks, g.nodes
    lat = BASE_LATENCY_US[algorithm][p]
    intra = HW_LATENCY_US[g.intra][algorithm][p]
    inter = HW_LATENCY_US["net"]["tree" if g.ranks_per_node == 1 else algorithm][p]
    if algorithm == "ring":
        steps = _steps(collective, n)
        if nodes > 1:
            intra = max(intra, NET_OVERHEAD_US * (3.0 if p == 2 else 1.0))
        n_inter = 0 if nodes == 1 else (2 * (nodes - 1) if collective == "all_reduce" else nodes - 1)
        lat += (steps - n_inter) * intra + n_inter * inter
        if p == 2 and nodes > 1 and collective == "all_reduce" \
                and nbytes / (PLATEAU_CHANNELS * n) >= 64:
            lat *= RING_PLATEAU if g.generation >= 1 else RING_PLATEAU_PRE_AMPERE
        return lat
    return lat + 2 * ((g.ranks_per_node - 1) * intra + _log2i(nodes) * inter)


def algorithm_time(collective: str, algorithm: str, protocol: str, nbytes: float, g: Group) -> float:
    """Seconds ``collective`` of ``nbytes`` takes with one algorithm and protocol."""
    p = PROTOCOLS.index(protocol)
    n = g.ranks
    bus = _bus(algorithm, p, g)
    if collective == "broadcast":       # nccl-tests: a broadcast's bus bandwidth is its algbw
        alg = bus
    else:
        alg = bus * n / _steps(collective, n) if algorithm == "ring" else bus * 0.5
    if algorithm == "tree":
        size = _log2i(max(nbytes, 1.0) / 64.0) if nbytes >= 64 else -1
        if 0 <= size < len(TREE_CORRECTION[p]) - 1:
            alg *= TREE_CORRECTION[p][size]
    return latency_us(collective, algorithm, protocol, g, nbytes) * 1e-6 + nbytes / (alg * 1e9)


def choices(collective: str, g: Group) -> list[tuple[str, str]]:
    """The (algorithm, protocol) pairs NCCL considers: tree only for all-reduce."""
    algos = ALGORITHMS if collective == "all_reduce" else ("ring",)
    return [(a, p) for a in algos for p in PROTOCOLS]


@functools.lru_cache(maxsize=1 << 16)
def collective_time(collective: str, nbytes: float, g: Group) -> float:
    """Seconds of ``collective`` (``nbytes``: the full buffer, as nccl-tests'
    size: all-reduce input, all-gather output, reduce-scatter input) over
    ``g``: NCCL's least predicted time. 0 for one rank or no bytes. A pure
    function of its arguments (``Group`` is frozen), cached: the strategies of
    one table ask for the same collectives many times (a hybrid-sharded twin
    shares its tensor-parallel and pipeline collectives with its fully sharded one)."""
    if collective not in COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r} (known: {', '.join(COLLECTIVES)})")
    if g.ranks <= 1 or nbytes <= 0:
        return 0.0
    return min(algorithm_time(collective, a, p, nbytes, g) for a, p in choices(collective, g))


def bus_bandwidth(collective: str, nbytes: float, g: Group) -> float:
    """nccl-tests' bus bandwidth (GB/s) the model predicts: ``bytes/t`` times
    ``2(n-1)/n`` (all-reduce) or ``(n-1)/n`` (doc/PERFORMANCE.md)."""
    n = g.ranks
    factor = 2 * (n - 1) / n if collective == "all_reduce" else 1.0 if collective == "broadcast" \
        else (n - 1) / n
    return nbytes / collective_time(collective, nbytes, g) * factor / 1e9
