"""A scenario id longer than a folder name may be (QA round 34).

Each scenario's plan is written to ``scenarios/ID/``, ``ID`` the axis values' labels joined
by ``_``. An interconnect option named with 250 characters beside a device axis made an id
of 265 bytes: the sweep solved every scenario, then stopped with exit 2, "File name too
long", leaving the store and an empty scenarios folder. Oracle: the id's byte length
against the 255-byte limit of a folder name; at 255 bytes the sweep loads.
"""

from __future__ import annotations

import copy

import yaml

from autopar_opt.capacity import load_sweep
from support import paths
from support.sweeps import only_problem, write_sweep

TINY = yaml.safe_load((paths.DATA / "capacity" / "tiny.yaml").read_text())


def _sweep(name: str) -> dict:
    data = copy.deepcopy(TINY)
    data["axes"] = {"device": ["A100-80GB"], "gpus": [4],
                    "interconnect": [{"name": name, "inter_node": {"bandwidth_gb_per_s": 50.0,
                                                                   "latency_us": 10.0}}]}
    return data


def test_an_id_too_long_for_a_folder_is_refused_before_any_search(tmp_path):
    problem, _ = only_problem(tmp_path, _sweep("n" * 250))
    assert problem.key == "axes"
    assert "a scenario id of 265 bytes" in problem.rule and "(255 bytes)" in problem.rule
    assert "interconnect" in problem.fix


def test_an_id_of_255_bytes_loads(tmp_path):
    prefix = len("A100-80GB_4gpu_")
    sweep = load_sweep(write_sweep(tmp_path, _sweep("n" * (255 - prefix))))
    (scenario,) = sweep.scenarios
    assert len(scenario.id.encode()) == 255
