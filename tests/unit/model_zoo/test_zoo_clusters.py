"""Named clusters: sizes, devices and link tiers from the YAML files."""

from __future__ import annotations

import pytest

from autopar_opt.ir.hardware import DEFAULT_INTER_NODE, DEVICE_CATALOG
from autopar_opt.model_zoo import get_cluster, list_clusters

#: name -> (nodes, gpus per node, catalog device) as required by the zoo brief.
EXPECTED = {
    "dgx-a100-8": (1, 8, "A100-80GB"),
    "1x8-a100-40": (1, 8, "A100-40GB"), "2x8-a100-40": (2, 8, "A100-40GB"),
    "4x8-a100-40": (4, 8, "A100-40GB"),
    "1x8-v100-32": (1, 8, "V100-32GB"), "2x8-v100-32": (2, 8, "V100-32GB"),
    "4x8-v100-32": (4, 8, "V100-32GB"),
    "4x8-a100-80": (4, 8, "A100-80GB"),
    "h100-1024": (128, 8, "H100-SXM-80GB"),
    "a100-80-3072": (384, 8, "A100-80GB"),
    "h100-16384": (2048, 8, "H100-SXM-80GB"),
    "h800-2048": (256, 8, "H800-SXM-80GB"),
    "debug-2x4": (2, 4, "A100-40GB"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_named_cluster_shape_and_device(name):
    nodes, gpn, device = EXPECTED[name]
    c = get_cluster(name)
    assert (c.nodes, c.gpus_per_node, c.device.name) == (nodes, gpn, device)
    assert c.device is DEVICE_CATALOG[device]
    assert c.name == name and c.source.strip()


def test_list_clusters_matches_get_cluster():
    infos = {i.name: i for i in list_clusters()}
    assert set(EXPECTED) <= set(infos)
    for name, info in infos.items():
        c = get_cluster(name)
        assert (info.nodes, info.gpus_per_node, info.device) == (c.nodes, c.gpus_per_node,
                                                                c.device.name)
        assert info.description.strip() and info.source.strip()


def test_network_tiers():
    """DGX H100: one 400 Gb/s NDR NIC per GPU = 50 GB/s; Selene (DGX A100):
    200 Gb/s HDR per GPU = 25 GB/s; debug-2x4 sets its tiers explicitly."""
    assert get_cluster("h100-1024").inter_node.bandwidth_gb_per_s == 400 / 8
    assert get_cluster("h100-1024").num_devices == 1024
    big = get_cluster("a100-80-3072")
    assert big.num_devices == 3072 and big.inter_node.bandwidth_gb_per_s == 200 / 8
    dbg = get_cluster("debug-2x4")
    assert (dbg.intra_node.name, dbg.intra_node.bandwidth_gb_per_s) == ("nvlink3", 300.0)
    assert (dbg.inter_node.name, dbg.inter_node.latency_us) == ("ib-hdr", 10.0)
    assert get_cluster("2x8-v100-32").inter_node == DEFAULT_INTER_NODE["V100-32GB"]


def test_unknown_cluster_lists_valid_names():
    with pytest.raises(ValueError, match=r"unknown cluster 'dgx-a100'.*valid names:.*dgx-a100-8"):
        get_cluster("dgx-a100")
