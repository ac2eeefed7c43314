"""A fleet plan's interval says every group it runs on that no published run is like.

340b9f06 made an interval say when no published run behind it ran on the priced kind of
part (a PCIe or NVL card, a power limit below the rated power). A fleet plan's interval is
the widest of its groups' (cost.interval.fleet_interval), and only that group's sentence
was kept: a pipeline over an H100 SXM group and an H100 PCIe group took the SXM group's
interval (the same generation, the first of equal width) and said nothing of the PCIe card
(QA round 36). Oracle: device_unlike of each group's device, the sentence one cluster of
that device gets."""

from __future__ import annotations

import copy
import json

import yaml

from autopar_opt.cost.interval import device_unlike
from autopar_opt.ir.hardware import DEVICE_CATALOG
from support.cli import first_json, run_cli

FLEET = {"name": "mix", "groups": [
    {"name": "a100", "device": "A100-80GB", "nodes": 1, "gpus_per_node": 2},
    {"name": "h100", "device": "H100-SXM-80GB", "nodes": 1, "gpus_per_node": 2}],
    "links": [{"between": ["a100", "h100"], "bandwidth_gb_per_s": 100, "latency_us": 20}]}
SPEC = {"model": {"zoo": "gpt-1.7b"}, "cluster": FLEET,
        "training": {"global_batch_size": 64, "seq_len": 1024},
        "search": {"pp_degrees": [2], "tp_degrees": [1, 2], "zero_levels": [1],
                   "recompute": ["none"], "sequence_parallel": [True]},
        "solver": {"name": "dp", "time_limit_s": 20}}


def test_every_group_unlike_the_published_runs_is_said(tmp_path):
    path = tmp_path / "solve.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    code, text = run_cli("solve", path, "--out", tmp_path / "out", "--quiet")
    assert code == 0, text
    plan = tmp_path / "out" / "plan.json"
    assert sorted(json.loads(plan.read_text())["plan"]["stage_groups"]) == ["a100", "h100"]
    spec = copy.deepcopy(SPEC)
    groups = spec["cluster"]["groups"]
    groups[0]["device"], groups[1]["device"] = "H100-SXM-80GB", "H100-PCIe-80GB"
    groups[1]["power_limit_w"] = 300
    other = tmp_path / "pcie.yaml"
    other.write_text(yaml.safe_dump(spec))
    code, text = run_cli("estimate", other, "--plan", plan, "--json")
    assert code == 0, text
    words = first_json(text)["metrics"]["interval"]["text"]
    from dataclasses import replace

    pcie = replace(DEVICE_CATALOG["H100-PCIe-80GB"], power_limit_w=300.0)
    assert device_unlike(pcie) in words, words
    assert "H100-SXM-80GB" not in words      # the SXM group at rated power: nothing to say
    # a fleet of parts like the published runs' says none
    code, text = run_cli("estimate", path, "--plan", plan, "--json")
    assert code == 0, text
    assert "no published run behind it ran" not in first_json(text)["metrics"]["interval"]["text"]
