"""A fleet group's ``nic_gb_per_s`` written on a plain cluster (QA round 36).

The fleet refusals (``export``, ``estimate --plan``, ``--runnable-by``) tell the user to
write a group alone as its plain cluster; the copied group's ``nic_gb_per_s`` was refused
with "did you mean 'nics_per_node'?" alone. The fix now names the plain cluster's way to say
it, ``inter_node: {bandwidth_gb_per_s: X}`` beside ``nics_per_node``. Oracle (a second
route): the plain cluster written as the fix says has the group's inter-node tier, NICs and
per-GPU share."""

from __future__ import annotations

import copy

import pytest
import yaml

from autopar_opt.spec import SpecError, load_spec
from support.fleets import TINY_MIX_CLUSTER


def _spec(tmp_path, cluster: dict, name: str):
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"model": {"zoo": "debug"}, "cluster": cluster,
                                    "training": {"global_batch_size": 16}}))
    return path


def test_the_fix_names_the_plain_clusters_key_and_gives_the_groups_network(tmp_path):
    group = copy.deepcopy(TINY_MIX_CLUSTER["groups"][1])      # h100: 1 NIC of 50 GB/s per node
    fleet = load_spec(_spec(tmp_path, copy.deepcopy(TINY_MIX_CLUSTER), "fleet.yaml")).fleet
    with pytest.raises(SpecError) as err:
        load_spec(_spec(tmp_path, group, "copied.yaml"))
    problem = err.value.problems[0]
    assert problem.key == "cluster.nic_gb_per_s" and "unknown key" in problem.rule
    assert "inter_node: {bandwidth_gb_per_s: 50.0" in problem.fix and "nics_per_node" in problem.fix
    # the plain cluster the fix describes, with the H100's network latency (10 us, the catalog's)
    plain = {k: v for k, v in group.items() if k != "nic_gb_per_s"}
    plain["inter_node"] = {"bandwidth_gb_per_s": 50.0, "latency_us": 10.0}
    got = load_spec(_spec(tmp_path, plain, "plain.yaml")).cluster
    want = fleet.groups[1]
    assert got.nics == want.nics == 1
    assert got.inter_node.bandwidth_gb_per_s == want.inter_node.bandwidth_gb_per_s == 50.0
    assert got.inter_node.latency_us == want.inter_node.latency_us
    assert got.inter_node_per_gpu.bandwidth_gb_per_s == want.inter_node_per_gpu.bandwidth_gb_per_s == 25.0


def test_a_plain_clusters_nics_and_link_copied_into_a_group_build_the_same_network(tmp_path):
    """``inter_node`` (one NIC's rate) beside ``nics_per_node`` is a plain cluster's way to
    state its network; in a group it was refused ("states the inter-node link twice", fix
    "keep one of the two"), and keeping ``inter_node`` alone gave one NIC per GPU: 8 x 50
    GB/s instead of 4 x 50 per node of 8, twice the per-GPU share (QA round 36). Oracle: the
    plain cluster of the same keys; by hand 4 x 50 / 8 = 25 GB/s per GPU of a busy node."""
    plain = {"name": "h", "device": "H100-SXM-80GB", "nodes": 2, "gpus_per_node": 8,
             "inter_node": {"bandwidth_gb_per_s": 50.0, "latency_us": 12.0}, "nics_per_node": 4}
    want = load_spec(_spec(tmp_path, plain, "plain.yaml")).cluster
    fleet = copy.deepcopy(TINY_MIX_CLUSTER)
    fleet["groups"][1] = {**plain, "name": "h100"}
    got = load_spec(_spec(tmp_path, fleet, "fleet.yaml")).fleet.groups[1]
    assert (got.nics, got.inter_node.bandwidth_gb_per_s, got.inter_node.latency_us) == \
        (want.nics, want.inter_node.bandwidth_gb_per_s, want.inter_node.latency_us) == (4, 50.0, 12.0)
    assert got.inter_node_per_gpu.bandwidth_gb_per_s == want.inter_node_per_gpu.bandwidth_gb_per_s == 25.0

