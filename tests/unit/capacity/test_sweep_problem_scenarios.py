"""A problem at a base key that only some scenarios of a sweep have names the axis value
that causes it (QA round 35: "base.training.dtype = 'bf16': device V100-32GB has no bf16
peak" refused a sweep over A100 and V100, and base.training.memory_reserve_gib named "the
device's 79.6475 GiB" of one device of three, neither saying which scenarios or axis
value; the fix suggested changing the base for every scenario)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from autopar_opt.capacity import load_sweep
from autopar_opt.spec import SpecError, build_spec
from support.sweeps import only_problem

SWEEP = {"base": {"model": {"zoo": "debug", "overrides": {"hidden": 256, "heads": 4,
                                                          "ffn_hidden": 1024}},
                  "cluster": {"nodes": 1, "gpus_per_node": 2, "device": "A100-80GB"},
                  "training": {"global_batch_size": 8, "seq_len": 256},
                  "solver": {"name": "highs", "time_limit_s": 20}},
         "axes": {"device": ["A100-80GB", "V100-32GB"], "gpus": [2, 4]},
         "planning": {"token_budget": 1.0e8, "deadline_days": 1,
                      "prices": {"per_gpu_hour": {"A100-80GB": 1, "V100-32GB": 0.5},
                                 "source": "test"}}}


def _fails(sweep: dict, device: str) -> bool:
    """Oracle: whether the base spec with ``device`` substituted by hand is refused."""
    spec = copy.deepcopy(sweep["base"])
    spec["cluster"]["device"] = device
    try:
        build_spec(spec, Path("spec.yaml"))
    except SpecError:
        return True
    return False


def test_a_device_that_cannot_take_the_base_dtype_is_named(tmp_path):
    assert _fails(SWEEP, "V100-32GB") and not _fails(SWEEP, "A100-80GB")
    problem, _ = only_problem(tmp_path, SWEEP)
    assert problem.key == "base.training.dtype"
    assert "with axes.device[1] = V100-32GB" in problem.rule
    assert "2 other scenario(s) accept this value" in problem.rule
    assert "; or leave V100-32GB out of axes.device" in problem.fix


def test_without_the_device_the_sweep_loads(tmp_path):
    """The fix offered works: the sweep less that axis value loads (its 2 scenarios)."""
    sweep = copy.deepcopy(SWEEP)
    sweep["axes"]["device"] = ["A100-80GB"]
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(sweep))
    assert [s.id for s in load_sweep(path).scenarios] == ["A100-80GB_2gpu", "A100-80GB_4gpu"]


def test_a_key_every_scenario_breaks_is_not_said_to_be_accepted(tmp_path):
    """A reserve above every device's memory: each device's problem names its scenarios,
    and none claims the others accept the value nor offers dropping a device as a fix."""
    sweep = copy.deepcopy(SWEEP)
    sweep["base"]["training"].update(memory_reserve_gib=200, dtype="fp16")
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(sweep))
    with pytest.raises(SpecError) as exc:
        load_sweep(path)
    problems = exc.value.problems
    assert {p.key for p in problems} == {"base.training.memory_reserve_gib"}
    assert len(problems) == 2
    for p in problems:
        assert "accept" not in p.rule and "out of axes" not in p.fix
        assert "(in the 2 scenario(s) with axes.device[" in p.rule


def test_an_axis_value_that_fits_some_scenarios_makes_that_combination_an_invalid_row(tmp_path):
    """device [A100, H100] x dtype [bf16, fp8]: fp8 fits H100, not A100. The whole sweep was
    refused at axes.dtype[1] (QA round 35, then naming the combination); now the one
    combination is a row of status invalid (QA round 36,
    tests/unit/capacity/test_capacity_invalid_rows.py). Oracle: the base with each device
    and fp8 substituted by hand, built alone."""
    sweep = copy.deepcopy(SWEEP)
    sweep["axes"] = {"device": ["A100-80GB", "H100-SXM-80GB"], "dtype": ["bf16", "fp8"]}
    sweep["planning"]["prices"]["per_gpu_hour"] = {"A100-80GB": 1, "H100-SXM-80GB": 2}
    fp8 = copy.deepcopy(sweep)
    fp8["base"]["training"]["dtype"] = "fp8"
    assert _fails(fp8, "A100-80GB") and not _fails(fp8, "H100-SXM-80GB")
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(sweep))
    loaded = load_sweep(path)
    assert [s.id for s in loaded.invalid] == ["A100-80GB_fp8"]
    assert [s.id for s in loaded.scenarios] == ["A100-80GB_bf16", "H100-SXM-80GB_bf16",
                                                "H100-SXM-80GB_fp8"]
    (reason,) = loaded.invalid[0].reasons
    assert reason.startswith("axes.dtype[1] = 'fp8': device A100-80GB has no fp8 peak")
