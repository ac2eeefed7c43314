"""The collective model against published NCCL measurements (issue 28, point 2).

tests/data/microbench/nccl_tests.yaml holds every published point with its
source and locator (NVIDIA GTC 2024 S62129 and GTC 2025 S72583 slides, nccl-tests
and all_reduce_bench runs reported in stas00/ml-engineering, and Together AI's
nccl-tests scaling reports on two B200 InfiniBand clusters at 16-512 GPUs,
togethercomputer/together-nccl-tests). Each row is priced
through the model's own path: a catalog device, a cluster built from the row's
hardware (GPUs, nodes, NICs per node), the group the model forms for those
ranks (:func:`autopar_opt.cost.comm.collective_group`) and NCCL's algorithm and
protocol choice (:mod:`autopar_opt.cost.nccl`). Nothing here is fitted to the
rows: the link efficiencies are the two pinned scalars of CostParams.
"""

import pytest
import yaml

from autopar_opt.cost import nccl
from autopar_opt.cost.comm import collective_group
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.params import CostParams
from autopar_opt.ir.hardware import LinkTier, make_cluster
from autopar_opt.ir.training import Training
from support import paths

DATA = paths.DATA / "microbench" / "nccl_tests.yaml"
ROWS = yaml.safe_load(DATA.read_text())["rows"]
DEVICE = {"V100-SXM2": "V100-32GB", "A100-SXM4": "A100-80GB", "H100-SXM5": "H100-SXM-80GB",
          "H200-SXM": "H200-141GB", "B200": "B200", "GB200": "GB200", None: "H100-SXM-80GB"}
#: NICs per node and GB/s per NIC the rows state (inter_node text).
NICS = {"1x 200 Gb/s RDMA (IB/RoCE) per node": (1, 25.0), "1x 400 Gb/s RDMA (IB/RoCE) per node": (1, 50.0),
        "2x 200 Gb/s RDMA per node": (2, 25.0),
        "8x 200 Gb/s RDMA per node (DGX A100)": (8, 25.0), "8x 200 Gb/s RDMA per node": (8, 25.0),
        "8x 400 Gb/s RDMA per node (DGX H100)": (8, 50.0), "8x 400 Gb/s RDMA per node": (8, 50.0),
        "8x 400 Gb/s RDMA per node + SHARP": (8, 50.0),
        "8x 400 Gb/s EFA v4 per node": (8, 50.0), "16x 200 Gb/s EFA v3 per node (400 GB/s)": (16, 25.0),
        "8x 400 Gb/s NDR InfiniBand per node": (8, 50.0),
        "8x 400 Gb/s NDR InfiniBand per node (ConnectX-7)": (8, 50.0)}
PLATEAU_BYTES = 16 * 2**30


def _price(row: dict) -> float:
    """Model bus bandwidth (GB/s) of a row: NCCL's own choice of algorithm and protocol,
    or, for a row measured with ``NCCL_ALGO=Tree`` forced, the tree's best protocol."""
    nodes = row["nodes"] or (4 if row["inter_node"] and row["gpu"] != "GB200" else 1)
    gpus = row["gpus"] or 8 * nodes
    dev = DEVICE[row["gpu"]]
    per_node = gpus // nodes
    nics, nic_gbs = NICS.get(row["inter_node"], (per_node, 50.0))
    cluster = make_cluster("row", nodes, per_node if dev != "GB200" else 72, dev,
                           inter_node=LinkTier("net", nic_gbs, 10.0), nics_per_node=nics)
    ctx = StageContext(cluster, Training(global_batch_size=1), CostParams(), gpus, 1)
    group = collective_group(ctx, gpus, 1)
    nbytes = row["bytes"] or PLATEAU_BYTES
    if not row["algorithm"].startswith("tree"):
        return nccl.bus_bandwidth(row["collective"], nbytes, group)
    t = min(nccl.algorithm_time(row["collective"], "tree", p, nbytes, group) for p in nccl.PROTOCOLS)
    return nbytes / t * 2 * (gpus - 1) / gpus / 1e9


def _id(row: dict) -> str:
    size = "plateau" if row["bytes"] is None else f"{row['bytes'] // 2**20}MiB"
    return f"{row['source']}:{row['collective']}:{row['gpus']}gpu:{size}:{row['algorithm'].split()[0]}"


#: Published rows the model misses by more than the 8% rule, with model/measured (the
#: check stays, as a strict xfail: a model change that fixes one fails the test until the
#: entry is removed). B200 "use3a-ss": the cluster's own ring falls from 345 GB/s at 2
#: nodes to 291 at 46 nodes while the other B200 cluster of the same report series
#: ("flapping-airplanes") holds 386-390 on the same 8x 400 Gb/s NICs; the model prices both
#: alike (366-379). Neither fabric is described, so nothing in the model tells them apart.
#: "flapping-airplanes" 8 GiB at 32-60 nodes: measured 387, 380, 273 GB/s, the model's ring
#: latency (hwLat x 2(n-1) steps, x1.4 plateau) predicts 354, 347, 347: too pessimistic at
#: 32 and 48 nodes, too optimistic at 60 (a measured dip: 340 at 16 GiB, 366 at 32 GiB).
MISSES = {
    "together_fa_20260509:all_reduce:256gpu:8192MiB:ring": "model/measured 0.914 (354 vs 387 GB/s)",
    "together_fa_20260509:all_reduce:384gpu:8192MiB:ring": "model/measured 0.915 (347 vs 380 GB/s)",
    "together_fa_20260509:all_reduce:480gpu:8192MiB:ring": "model/measured 1.273 (347 vs 273 GB/s)",
    "together_use3a_20260502:all_reduce:16gpu:16384MiB:ring": "model/measured 1.100 (379 vs 345 GB/s)",
    "together_use3a_20260502:all_reduce:32gpu:16384MiB:ring": "model/measured 1.130 (378 vs 335 GB/s)",
    "together_use3a_20260502:all_reduce:64gpu:16384MiB:ring": "model/measured 1.167 (377 vs 323 GB/s)",
    "together_use3a_20260502:all_reduce:128gpu:16384MiB:ring": "model/measured 1.218 (373 vs 306 GB/s)",
    "together_use3a_20260502:all_reduce:256gpu:16384MiB:ring": "model/measured 1.203 (366 vs 304 GB/s)",
    "together_use3a_20260502:all_reduce:368gpu:16384MiB:ring": "model/measured 1.238 (361 vs 291 GB/s)",
    "together_use3a_20260502:all_gather:16gpu:16384MiB:ring": "model/measured 1.106 (379 vs 343 GB/s)",
    "together_use3a_20260502:all_gather:32gpu:16384MiB:ring": "model/measured 1.169 (379 vs 324 GB/s)",
    "together_use3a_20260502:all_gather:64gpu:16384MiB:ring": "model/measured 1.212 (378 vs 312 GB/s)",
    "together_use3a_20260502:all_gather:128gpu:16384MiB:ring": "model/measured 1.230 (375 vs 305 GB/s)",
    "together_use3a_20260502:all_gather:256gpu:16384MiB:ring": "model/measured 1.224 (370 vs 302 GB/s)",
    "together_use3a_20260502:all_gather:368gpu:16384MiB:ring": "model/measured 1.248 (366 vs 293 GB/s)",
    # InfiniBand SHARP (CollNet, in-network reduction) all-reduce at 64-512 B200 GPUs: 535-589
    # GB/s measured, flat with scale; the model does not price in-network reduction (its
    # ring, 360-378 GB/s).
    "together_fa_20260512:all_reduce:64gpu:32768MiB:collnet_chain":
        "model/measured 0.692 (378 vs 546.26 GB/s)",
    "together_fa_20260512:all_reduce:128gpu:32768MiB:collnet_chain":
        "model/measured 0.691 (377 vs 544.99 GB/s)",
    "together_fa_20260512:all_reduce:128gpu:32768MiB:collnet_direct":
        "model/measured 0.639 (377 vs 588.83 GB/s)",
    "together_fa_20260512:all_reduce:256gpu:32768MiB:collnet_chain":
        "model/measured 0.690 (373 vs 540.74 GB/s)",
    "together_fa_20260512:all_reduce:256gpu:32768MiB:collnet_direct":
        "model/measured 0.660 (373 vs 565.06 GB/s)",
    "together_fa_20260512:all_reduce:512gpu:32768MiB:collnet_chain":
        "model/measured 0.685 (366 vs 534.53 GB/s)",
    "together_fa_20260512:all_reduce:512gpu:32768MiB:collnet_direct":
        "model/measured 0.671 (366 vs 545.77 GB/s)",
    "together_use3a_20260502:all_reduce:64gpu:16384MiB:collnet":
        "model/measured 0.687 (377 vs 547.9 GB/s)",
    "together_use3a_20260502:all_reduce:128gpu:16384MiB:collnet":
        "model/measured 0.682 (373 vs 546.7 GB/s)",
    "together_use3a_20260502:all_reduce:256gpu:16384MiB:collnet":
        "model/measured 0.673 (366 vs 544.3 GB/s)",
    "together_use3a_20260502:all_reduce:368gpu:16384MiB:collnet":
        "model/measured 0.662 (361 vs 544.8 GB/s)",
    # NVLSTree at 64-8,192 H100 GPUs (GTC 2024 S62129 slide 35, digitized from the plot,
    # +-4 GB/s): the model has no NVLS and prices its own choice, ring or a tree capped by
    # its channels (8 NICs: 8 x perChMaxTreeBw 36 GB/s = 288 GB/s on Hopper). From 256 MiB
    # up it is 8-23% below NVLSTree (NVLink SHARP's in-switch reduction, not modelled: the
    # conservative side); at 64 MiB from 1,024 GPUs it is 1.34-1.50x optimistic (the
    # measured curve stays latency-bound to larger messages than the model's tree).
    "gtc24_s62129_nvlstree:all_reduce:64gpu:256MiB:nvls_tree":
        "model/measured 0.913 (281 vs 308 +-4 GB/s)",
    "gtc24_s62129_nvlstree:all_reduce:64gpu:1024MiB:nvls_tree":
        "model/measured 0.911 (317 vs 348 +-4 GB/s)",
    "gtc24_s62129_nvlstree:all_reduce:256gpu:256MiB:nvls_tree":
        "model/measured 0.855 (235 vs 275 +-4 GB/s)",
    "gtc24_s62129_nvlstree:all_reduce:256gpu:1024MiB:nvls_tree":
        "model/measured 0.824 (283 vs 343 +-4 GB/s)",
    "gtc24_s62129_nvlstree:all_reduce:1024gpu:64MiB:nvls_tree":
        "model/measured 1.374 (169 vs 123 +-4 GB/s)",
    "gtc24_s62129_nvlstree:all_reduce:1024gpu:256MiB:nvls_tree":
        "model/measured 0.906 (230 vs 254 +-4 GB/s)",
    "gtc24_s62129_nvlstree:all_reduce:1024gpu:1024MiB:nvls_tree":
        "model/measured 0.840 (278 vs 331 +-4 GB/s)",
    "gtc24_s62129_nvlstree:all_reduce:1024gpu:16384MiB:nvls_tree":
        "model/measured 0.858 (318 vs 370 +-4 GB/s)",
    "gtc24_s62129_nvlstree:all_reduce:2048gpu:64MiB:nvls_tree":
        "model/measured 1.335 (166 vs 124 +-4 GB/s)",
    "gtc24_s62129_nvlstree:all_reduce:2048gpu:1024MiB:nvls_tree":
        "model/measured 0.894 (277 vs 310 +-4 GB/s)",
    "gtc24_s62129_nvlstree:all_reduce:2048gpu:16384MiB:nvls_tree":
        "model/measured 0.827 (305 vs 369 +-4 GB/s)",
    "gtc24_s62129_nvlstree:all_reduce:4096gpu:64MiB:nvls_tree":
        "model/measured 1.488 (162 vs 109 +-4 GB/s)",
    "gtc24_s62129_nvlstree:all_reduce:4096gpu:16384MiB:nvls_tree":
        "model/measured 0.768 (287 vs 374 +-4 GB/s)",
    "gtc24_s62129_nvlstree:all_reduce:8192gpu:64MiB:nvls_tree":
        "model/measured 1.500 (159 vs 106 +-4 GB/s)",
    "gtc24_s62129_nvlstree:all_reduce:8192gpu:1024MiB:nvls_tree":
        "model/measured 0.900 (275 vs 306 +-4 GB/s)",
    "gtc24_s62129_nvlstree:all_reduce:8192gpu:16384MiB:nvls_tree":
        "model/measured 0.785 (287 vs 366 +-4 GB/s)",
}


def _params(rows: list[dict]) -> list:
    return [pytest.param(r, id=_id(r), marks=pytest.mark.xfail(strict=True, reason=MISSES[_id(r)]))
            if _id(r) in MISSES else pytest.param(r, id=_id(r)) for r in rows]


#: Ring rows (NCCL's default algorithm where the measurement does not say otherwise on
#: InfiniBand, or NCCL_ALGO=Ring forced): NVLS/SHARP rows, forced-tree rows and AWS's
#: tuner-plugin sweeps are checked apart.
RING = [r for r in ROWS if r["algorithm"].startswith("ring")]
LARGE = [r for r in RING if r["bytes"] is None or r["bytes"] >= 2**30]


@pytest.mark.parametrize("row", _params(LARGE))
def test_large_message_bus_bandwidth_within_8_percent(row):
    """Large messages (the plateau, >= 1 GiB): the ring runs at the group's bus bandwidth;
    every published ring figure within 8%, from one node to 512 GPUs (64 nodes); the
    misses are listed in MISSES."""
    assert _price(row) == pytest.approx(row["busbw_gb_per_s"], rel=0.08)


@pytest.mark.parametrize("row", _params([r for r in ROWS if r["algorithm"].startswith("tree")]))
def test_forced_tree_rows_within_8_percent(row):
    """NCCL_ALGO=Tree all-reduce at 64-512 B200 GPUs, against the model's tree (its best
    protocol), by the same 8% rule: measured 193-196 GB/s, half the ring on the same nodes;
    the model's tree is capped by its channels (tuning.cc: nChannels x perChMaxTreeBw, 8
    channels, one per 400 Gb/s NIC, x 24 GB/s on Blackwell = 192 GB/s): 0.97-0.99 of the
    measured (it was 1.77-1.80x before the cap)."""
    assert _price(row) == pytest.approx(row["busbw_gb_per_s"], rel=0.08)


@pytest.mark.parametrize("row", _params([r for r in ROWS if r["algorithm"].startswith("nvls_tree")]))
def test_nvls_tree_rows_at_64_to_8k_gpus_within_8_percent(row):
    """NVLSTree all-reduce at 64-8,192 H100 GPUs and 64 MiB-16 GiB (digitized from NVIDIA's
    plot) against the model's own choice, by the same 8% rule: the misses (MISSES) are
    NVLink SHARP's gain above the model from 256 MiB up and the 64 MiB points from 1,024
    GPUs, where the model is optimistic; the rest agree."""
    assert _price(row) == pytest.approx(row["busbw_gb_per_s"], rel=0.08)


@pytest.mark.parametrize("row", _params([r for r in ROWS if r["algorithm"].startswith("collnet")
                                          and r["source"].startswith("together")]))
def test_ib_sharp_rows_at_64_to_512_gpus_within_8_percent(row):
    """CollNet (InfiniBand SHARP) all-reduce at 64-512 B200 GPUs against the model's own
    choice, by the same 8% rule: all miss (MISSES), SHARP is not modelled (nccl.py)."""
    assert _price(row) == pytest.approx(row["busbw_gb_per_s"], rel=0.08)


def test_at_scale_rows_are_covered():
    """The published rows reach 8,192 GPUs, and every ring row at >= 64 GPUs is in the 8%
    check (the large-message set), none dropped by the filters above."""
    scale = [r for r in ROWS if (r["gpus"] or 0) >= 64]
    assert max(r["gpus"] for r in scale) == 8192
    ring = [r for r in scale if r["algorithm"].startswith("ring")]
    assert len(ring) >= 30 and all(r in LARGE for r in ring)
    assert set(MISSES) <= {_id(r) for r in ROWS}


def test_sharp_rows_are_above_the_model():
    """NVLink SHARP / CollNet in-network reduction is not modelled (stated in nccl.py): the
    published SHARP all-reduce figures are 20-30% above the ring the model prices."""
    rows = [r for r in ROWS if r["algorithm"] in ("nvls", "collnet/nvls")]
    assert len(rows) == 7
    for row in rows:
        assert 1.15 < row["busbw_gb_per_s"] / _price(row) < 1.40


def test_efa_sweep_is_recorded_not_fitted():
    """The 4-node B200 EFA sweep (AWS ofi tuner, PyTorch all_reduce): from 512 MiB up within
    10% of the model; at 1-256 MiB the model is optimistic by up to 2.6x (EFA latencies and the
    plugin's choices are not NCCL's own tuning; benchmarks/kernels/COLLECTIVES.md lists every
    point)."""
    rows = [r for r in ROWS if r["source"] == "mlengineering_b200_4n" and r["nodes"] == 4]
    for r in rows:
        ratio = _price(r) / r["busbw_gb_per_s"]
        if r["bytes"] >= 512 * 2**20:
            assert ratio == pytest.approx(1.0, abs=0.10)
        elif r["bytes"] >= 2**20:
            assert 1.0 <= ratio < 6.0


def test_a_group_beyond_one_leaf_shares_the_blocking_fabric():
    """Hand case: 8 nodes of 8 H100, one 50 GB/s NIC per GPU, 4 nodes per leaf,
    2:1 above. A data-parallel ring of one rank per node (stride 8) inside one leaf
    (4 nodes) sees its own NIC at 0.95: 47.5 GB/s; across two leaves (8 nodes) half
    of it; non-blocking (no leaf stated) the full 47.5."""
    def bus(ranks, **fabric):
        cl = make_cluster("c", 8, 8, "H100-SXM-80GB", inter_node=LinkTier("net", 50.0, 10.0),
                          **fabric)
        ctx = StageContext(cl, Training(global_batch_size=1), CostParams(), 64, 1)
        return collective_group(ctx, ranks, 8).bus_gb_per_s
    assert bus(4, nodes_per_leaf=4, oversubscription=2.0) == pytest.approx(47.5)
    assert bus(8, nodes_per_leaf=4, oversubscription=2.0) == pytest.approx(23.75)
    assert bus(8) == pytest.approx(47.5)
