"""A run file's hardware figures are physical sizes: a GPU's memory, a NIC's bandwidth and a
power cap are positive or not stated (QA round 11: ``power_limit_w: -300`` crashed the
calibration with a complex cube root, ``0`` divided by zero, and a negative bandwidth or memory
was priced without a word)."""

from __future__ import annotations

import json

import pytest

from autopar_opt.calibration.build import build_run
from autopar_opt.calibration.reading import Unmodelable, read_record
from autopar_opt.calibration.reading.run_schema import run_file_json_schema
from support.runs import tiny_record


@pytest.mark.parametrize("key, value, unit", [
    ("power_limit_w", -300, "W"), ("power_limit_w", 0, "W"),
    ("inter_node_gbps_per_gpu", -100, "Gb/s"), ("inter_node_gbps_per_gpu", 0, "Gb/s"),
    ("gpu_memory_gb", -80, "GB"), ("gpu_memory_gb", 0, "GB")])
def test_a_figure_that_is_not_positive_is_refused_naming_key_value_and_rule(key, value, unit):
    with pytest.raises(Unmodelable, match=rf"hardware\.{key} = {value} must be a positive "
                                          rf"number of {unit}; state the real figure or null"):
        build_run(read_record(tiny_record(**{f"hardware__{key}": value})))


def test_a_positive_cap_is_priced_and_the_schema_says_positive():
    """A cap of 200 W on the 400 W A100 SXM: (200/400)^(1/3) = 0.794 of the peaks."""
    run = build_run(read_record(tiny_record(hardware__power_limit_w=200)))
    assert run.cluster.device.clock_factor == pytest.approx(0.5 ** (1 / 3))
    hw = run_file_json_schema()["$defs"]["Hardware"]["properties"]
    for key in ("power_limit_w", "inter_node_gbps_per_gpu", "gpu_memory_gb"):
        assert hw[key]["anyOf"][0] == {"type": "number", "exclusiveMinimum": 0}, json.dumps(hw[key])


def test_a_cap_outside_the_boards_range_skips_the_record_with_the_reason():
    """QA round 37: a record's cap below the A100 SXM's 100 W minimum was priced; it is now
    a record the reader skips, naming the key, the range and its source."""
    with pytest.raises(Unmodelable, match=r"hardware\.power_limit_w: power limit 50 W is outside "
                                          r"the power limits A100-80GB accepts: 100-400 W"):
        read_record(tiny_record(hardware__power_limit_w=50))
