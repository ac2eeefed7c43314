"""A placement spec that gives CPU devices to a public-format file whose ``maxCPUs`` is
0 (QA round 12): the device override looked up the file's CPU entry, which such a file
lacks, and `place` ended in an internal error (StopIteration). The CPU now takes the
format's defaults (unlimited memory, pays no transfers), as a file with CPUs has it.

Oracle (hand): node 0 runs only on a CPU (3), node 1 on the accelerator (2), the edge
costs 1. With one CPU: the CPU holds node 0 (load 3, a CPU pays no transfers) and the
accelerator node 1 plus receiving node 0's output (2 + 1 = 3), so the optimum is 3;
the same file with ``maxCPUs: 1`` and no override gives the same answer."""

from __future__ import annotations

import json

import pytest
import yaml

from support.cli import run_cli


def _graph(cpus: int) -> dict:
    return {"maxSizePerFPGA": 100, "maxFPGAs": 1, "maxCPUs": cpus,
            "nodes": [{"id": 0, "supportedOnFpga": 0, "cpuLatency": 3, "fpgaLatency": 1,
                       "isBackwardNode": 0},
                      {"id": 1, "supportedOnFpga": 1, "cpuLatency": 9, "fpgaLatency": 2,
                       "isBackwardNode": 0}],
            "edges": [{"sourceId": 0, "destId": 1, "cost": 1}]}


def _value(code: int, text: str) -> float:
    assert code == 0, text
    return json.loads(text)["value"]


def test_cpu_devices_for_a_file_without_cpus(tmp_path):
    (tmp_path / "g.json").write_text(json.dumps(_graph(0)))
    spec = tmp_path / "p.yaml"
    spec.write_text(yaml.safe_dump({"placement": {
        "graph": {"file": "g.json"},
        "devices": [{"type": "accelerator", "count": 1}, {"type": "cpu", "count": 1}]}}))
    assert _value(*run_cli("place", spec, "--json")) == pytest.approx(3.0)
    (tmp_path / "h.json").write_text(json.dumps(_graph(1)))
    assert _value(*run_cli("place", tmp_path / "h.json", "--json")) == pytest.approx(3.0)
