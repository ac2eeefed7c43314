"""Expert splits on the problem's own device numbering (QA round 12).

* A spec that lists the CPU before the accelerators (``devices: [{type: cpu}, {type:
  accelerator, count: 6}]``) put the split's first FPGA group on the CPU: bert24
  inference's expert split priced 150.62 instead of 20.084.
* A split with more non-empty CPU groups than the instance has CPUs ended in an internal
  error (a device index past the last); it is refused now, naming ``cpus``.

Oracle: the expert split priced by an evaluator written from the data README (20.083953125,
the same as with the accelerators listed first) and the instance's maxCPUs."""

from __future__ import annotations

import json

import pytest
import yaml

from support.cli import run_cli
from support import paths

DATA = paths.DATA / "placement"
GRAPH = DATA / "throughput" / "LayerGraphs_bert24_inference.json"
EXPERT = DATA / "experts" / "bert24_inference.json"


def _expert_value(text: str) -> float:
    return next(b["value"] for b in json.loads(text)["baselines"] if b["name"].startswith("human"))


@pytest.mark.parametrize("order", [("accelerator", "cpu"), ("cpu", "accelerator")])
def test_the_split_keeps_its_devices_whatever_the_order(tmp_path, order):
    counts = {"accelerator": 6, "cpu": 1}
    spec = tmp_path / "p.yaml"
    spec.write_text(yaml.safe_dump({"placement": {"graph": {"file": str(GRAPH)}, "devices": [
        {"type": t, "count": counts[t]} for t in order]}}))
    code, text = run_cli("place", spec, "--expert", EXPERT, "--json")
    assert code == 0, text
    assert _expert_value(text) == pytest.approx(20.083953125, rel=1e-9)


def test_a_node_on_a_cpu_the_instance_lacks_is_refused(tmp_path):
    split = json.loads(EXPERT.read_text())
    split = {"fpgas": split["fpgas"][:-2], "cpus": split["fpgas"][-2:]}
    path = tmp_path / "two_cpus.json"
    path.write_text(json.dumps(split))
    code, text = run_cli("place", GRAPH, "--expert", path)
    assert code == 2, text
    assert "two_cpus.json: cpus = 2: places nodes on CPU 1" in text and "(1)" in text
