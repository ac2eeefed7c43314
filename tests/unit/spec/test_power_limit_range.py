"""A power cap is a limit the board accepts (QA round 37): ``nvidia-smi -pl`` refuses a value
outside [Min Power Limit, Max Power Limit], so a spec's ``power_limit_w: 5`` on an H100 (priced
before as a GPU at 0.19 of its clock, exit 0) is refused naming the file, key, value, the part's
range with its source and the fix, in a plain cluster, a fleet's group and the CLI alike; a part
whose minimum is not published takes the cap and says it assumed none."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from autopar_opt.cost.assumptions import cost_assumptions
from autopar_opt.ir.hardware import DEVICE_CATALOG
from autopar_opt.ir.power_limits import POWER_LIMIT_RANGES
from autopar_opt.ir.training import Training
from autopar_opt.model_zoo.registry import build_model
from autopar_opt.spec import SpecError, load_spec
from support import paths
from support.cli import run_cli
from support.fleets import TINY_MIX_CLUSTER

GOOD = paths.DATA / "specs" / "good"


def _spec(tmp_path: Path, cluster: dict) -> Path:
    data = yaml.safe_load((GOOD / "spec.yaml").read_text())
    data["cluster"] = cluster
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _h100(watts: float) -> dict:
    return {"nodes": 1, "gpus_per_node": 8, "device": "H100-SXM-80GB", "power_limit_w": watts}


@pytest.mark.parametrize("watts", [1, 5, 199, 701, 2000])
def test_a_cap_outside_the_boards_range_is_refused_with_range_source_and_fix(tmp_path, watts):
    path = _spec(tmp_path, _h100(watts))
    with pytest.raises(SpecError) as err:
        load_spec(path)
    [problem] = err.value.problems
    assert problem.file == str(path) and problem.key == "cluster.power_limit_w"
    assert problem.value == watts
    assert "200-700 W" in problem.rule and "stackhpc/ansible-slurm-appliance PR #975" in problem.rule
    assert "nvidia-smi -pl refuses" in problem.rule
    assert "state a limit from 200 to 700 W" in problem.fix


@pytest.mark.parametrize("watts", [200, 500, 700])
def test_a_cap_inside_the_range_is_priced(tmp_path, watts):
    dev = load_spec(_spec(tmp_path, _h100(watts))).cluster.device
    assert dev.clock_factor == pytest.approx((watts / 700) ** (1 / 3))


def test_the_cli_exits_non_zero_without_a_traceback_or_output(tmp_path):
    path = _spec(tmp_path, _h100(5))
    code, text = run_cli("solve", path, "--out", tmp_path / "out")
    assert code != 0 and "cluster.power_limit_w = 5" in text and "200-700 W" in text
    assert not (tmp_path / "out").exists()


def test_a_fleet_group_is_held_to_its_own_parts_range(tmp_path):
    """500 W is inside the H100's range and above the A100's 400 W maximum."""
    data = yaml.safe_load((GOOD / "spec.yaml").read_text())
    data["cluster"] = copy.deepcopy(TINY_MIX_CLUSTER)
    data.pop("plan", None)         # a fleet of two groups takes no hand-written plan
    for group in data["cluster"]["groups"]:
        group["power_limit_w"] = 500
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SpecError) as err:
        load_spec(path)
    [problem] = err.value.problems
    assert problem.key == "cluster.groups[0].power_limit_w" and problem.value == 500
    assert "A100-40GB" in problem.rule and "100-400 W" in problem.rule


def test_a_part_without_a_published_minimum_takes_the_cap_and_says_so(tmp_path):
    """The H100 PCIe's minimum is not published (its datasheet's 300-350 W is the range of
    its maximum, not of the cap): 100 W is taken, and the assumptions say no minimum was
    assumed; above its 350 W rating it is refused."""
    cluster = {"nodes": 1, "gpus_per_node": 8, "device": "H100-PCIe-80GB", "power_limit_w": 100}
    spec = load_spec(_spec(tmp_path, cluster))
    graph = build_model("llama3-8b", overrides={"num_layers": 2})
    text = "\n".join(cost_assumptions(graph, spec.cluster, Training(64, 8192)))
    assert "no published minimum power limit for H100-PCIe-80GB" in text
    assert "none assumed" in text
    cluster["power_limit_w"] = 351
    with pytest.raises(SpecError, match="at most 350 W"):
        load_spec(_spec(tmp_path, cluster))


def test_every_published_range_is_a_range_up_to_the_catalogs_rating():
    """The data against the catalog: each published maximum is the part's rated power (the
    datasheet's), each minimum below it."""
    for name, rng in POWER_LIMIT_RANGES.items():
        assert rng.min_w is not None and 0 < rng.min_w < rng.max_w, name
        assert rng.max_w == DEVICE_CATALOG[name].tdp_w, name
        assert rng.source, name
