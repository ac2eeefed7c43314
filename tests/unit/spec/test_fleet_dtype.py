"""A dtype one group of a fleet lacks (QA round 36): FP8 on an A100 + H100 fleet.

The spec was refused with "device A100-40GB has no fp8 peak; use one of its dtypes", naming
neither the group nor that the fleet trains in one dtype on every group; the fix now names the
group (its key and device) and offers the dtypes every group has (the catalog's peaks by
hand: A100 bf16/fp16/tf32/fp32, H100 the same and fp8, V100 fp16/fp32) or leaving it out."""

from __future__ import annotations

import copy

import pytest
import yaml

from autopar_opt.spec import SpecError, load_spec
from support.fleets import TINY_MIX_CLUSTER


def _load(tmp_path, cluster: dict, training: dict):
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump({"model": {"zoo": "debug"}, "cluster": cluster,
                                    "training": {"global_batch_size": 16, **training}}))
    return load_spec(path)


@pytest.mark.parametrize("device, training, common, default", [
    ("A100-40GB", {"dtype": "fp8"}, "bf16, fp16, tf32, fp32", False),
    ("V100-32GB", {"dtype": "bf16"}, "fp16, fp32", False),
    ("V100-32GB", {}, "fp16, fp32", True)])
def test_the_group_lacking_the_dtype_is_named_with_the_dtypes_every_group_has(
        tmp_path, device, training, common, default):
    cluster = copy.deepcopy(TINY_MIX_CLUSTER)
    cluster["groups"][0]["device"] = device
    with pytest.raises(SpecError) as err:
        _load(tmp_path, cluster, training)
    (problem,) = [p for p in err.value.problems if p.key == "training.dtype"]
    assert f"group a100 (cluster.groups[0], {device}) has no" in problem.rule
    assert "one dtype on every group" in problem.rule
    assert ("its default is bf16" in problem.rule) is default
    assert f"a dtype every group has: {common}; or leave a100 out of the fleet" in problem.fix
    assert "h100" not in problem.rule


def test_a_dtype_every_group_has_is_accepted(tmp_path):
    cluster = copy.deepcopy(TINY_MIX_CLUSTER)
    cluster["groups"][0]["device"] = "H200-141GB"        # Hopper beside Hopper: fp8 on both
    assert _load(tmp_path, cluster, {"dtype": "fp8"}).training.dtype == "fp8"


@pytest.mark.parametrize("reserve, named, least", [
    (45.0, "group a100 (cluster.groups[0], 40 GiB)", "below 40 GiB (a100's)"),
    (90.0, "groups a100 (cluster.groups[0], 40 GiB), h100 (cluster.groups[1], 79.65 GiB)",
     "below 40 GiB (a100's)")])
def test_a_reserve_above_a_groups_memory_names_the_group(tmp_path, reserve, named, least):
    """The reserve is held on every GPU of every group (catalog: A100-40GB 40 GiB, H100 80 GB
    = 79.65 GiB); the refusal said "reserve is not below the 40 GiB of device memory" without
    the group (QA round 36). Leaving groups out is offered only while one would remain."""
    with pytest.raises(SpecError) as err:
        _load(tmp_path, copy.deepcopy(TINY_MIX_CLUSTER), {"memory_reserve_gib": reserve})
    (problem,) = [p for p in err.value.problems if p.key == "training.memory_reserve_gib"]
    assert f"not below the device memory of {named};" in problem.rule
    assert least in problem.fix
    assert ("out of the fleet" in problem.fix) is (reserve < 79.0)


def test_a_dtype_no_group_has_offers_no_fleet_without_groups(tmp_path):
    """fp8 on A100 + V100: both lack it; the fix offers the dtypes they share (fp16, fp32),
    not leaving both groups out."""
    cluster = copy.deepcopy(TINY_MIX_CLUSTER)
    cluster["groups"][1]["device"] = "V100-32GB"
    with pytest.raises(SpecError) as err:
        _load(tmp_path, cluster, {"dtype": "fp8"})
    (problem,) = [p for p in err.value.problems if p.key == "training.dtype"]
    assert problem.rule.startswith("groups a100 (cluster.groups[0], A100-40GB), h100 "
                                   "(cluster.groups[1], V100-32GB) have no fp8 peak")
    assert problem.fix == "use a dtype every group has: fp16, fp32"

