"""Two ``devices`` entries of one type get distinct device names (QA round 12): the
names were numbered per entry, so ``[{type: accelerator, count: 2}, {type: accelerator,
count: 3}]`` printed and wrote ``accelerator0`` and ``accelerator1`` twice each, and a
reader of placement.json could not tell which device held which nodes.

Oracle: five devices, five distinct names accelerator0..accelerator4, and the node
lists under them partition the graph's nodes."""

from __future__ import annotations

import json

import yaml

from support.cli import run_cli
from support import paths

GRAPH = paths.DATA / "placement" / "throughput" / "LayerGraphs_bert24_inference.json"


def test_two_entries_of_one_type_name_every_device_once(tmp_path):
    spec = tmp_path / "p.yaml"
    spec.write_text(yaml.safe_dump({"placement": {
        "graph": {"file": str(GRAPH)},
        "devices": [{"type": "accelerator", "count": 2}, {"type": "accelerator", "count": 3}]}}))
    code, text = run_cli("place", spec, "--json", "--out", tmp_path / "out")
    assert code == 0, text
    doc = json.loads((tmp_path / "out" / "placement.json").read_text())
    names = [d["device"] for d in doc["devices"]]
    assert names == [f"accelerator{i}" for i in range(5)]
    nodes = sorted(n for d in doc["devices"] for n in d["nodes"])
    assert nodes == sorted(nd["id"] for nd in json.loads(GRAPH.read_text())["nodes"])
