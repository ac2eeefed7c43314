"""A gpus value below the base's gpus_per_node is one partial node of the base's node, with
that node's NVLink wiring (QA round 35: 4 GPUs of an 8-GPU A100 node were priced as a
4-GPU point-to-point HGX board, 2 GPUs of a 4-GPU A100 board as a switched pair)."""

from __future__ import annotations

import pytest
import yaml

from autopar_opt.capacity import load_sweep
from support import paths

TINY = paths.DATA / "capacity" / "tiny.yaml"


def _sweep(tmp_path, gpn: int, gpus: list[int], device: str = "A100-80GB", **cluster):
    data = yaml.safe_load(TINY.read_text())
    data["base"]["cluster"] = {"nodes": 1, "gpus_per_node": gpn, "device": device, **cluster}
    data["axes"] = {"gpus": gpus}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return {s.axes["gpus"]: s for s in load_sweep(path).scenarios}


@pytest.mark.parametrize("gpn,part", [(8, 4), (4, 2), (8, 2)])
def test_a_pair_of_gpus_has_the_links_it_has_in_the_whole_node(tmp_path, gpn, part):
    """Oracle: a physical invariant. Two GPUs of one node are wired alike whether a job uses
    some or all of the node: the partial node's pair (pipeline send) and every group size
    it holds see the same NVLink share as in the whole node's scenario."""
    by = _sweep(tmp_path, gpn, [part, gpn])
    whole, partial = by[gpn].spec.cluster, by[part].spec.cluster
    assert partial.gpus_per_node == part and partial.nodes == 1
    assert partial.intra_pair.bandwidth_gb_per_s == pytest.approx(whole.intra_pair.bandwidth_gb_per_s)
    for k in range(2, part + 1):
        assert partial.intra_share(k) == pytest.approx(whole.intra_share(k))
    assert any("one partial node of the base's" in n for n in by[part].notes)


def test_a_stated_wiring_is_kept(tmp_path):
    """A base that states its board (mesh of 4) keeps it: 2 of its GPUs are not refused as
    "a node of 2 GPU(s) has no NVLinks to split" and share the board's links."""
    by = _sweep(tmp_path, 4, [2, 4], intra_node_topology="mesh")
    assert by[2].spec.cluster.intra_pair.bandwidth_gb_per_s == pytest.approx(
        by[4].spec.cluster.intra_pair.bandwidth_gb_per_s)
    assert by[2].data["cluster"]["nvlink_board_gpus"] == 4
