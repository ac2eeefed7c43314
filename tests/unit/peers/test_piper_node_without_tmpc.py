"""A Piper node with no TMPC at any tensor degree (QA round 12): no stage can hold it,
so no plan exists, but `solve` answered "proven infeasible ... no plan fits the memory
per device and the devices", blaming memory. It is refused at input now (exit 2) naming
the node's key and the fix.

Oracle: the same two-node instance with the node given one TMPC is solved (one stage on
one device: 1 + 2 = 3 per sample, by hand), so the missing TMPC is the only cause."""

from __future__ import annotations

import json

import pytest
import yaml

from support.cli import run_cli


def _tmpc(p: float, fw: dict, bw: dict) -> dict:
    return {"id": "vanilla", "timePerSample": p, "parameterSize": 0, "memoryUsageA": 1,
            "memoryUsageB": 1, "syncTimeFw": fw, "syncTimeBw": bw}


def _instance(first: dict) -> dict:
    return {"maxMemoryPerDevice": 1e9, "maxDevices": 1, "bandwidth": 1e9, "mbsInBatch": 1,
            "nodes": [{"id": 0, "TMPCs": first},
                      {"id": 1, "TMPCs": {"1": [_tmpc(2.0, {"0": 0}, {})]}}],
            "edges": [{"sourceId": 0, "destId": 1, "communicationCost": 0}]}


def _solve(tmp_path, first: dict):
    (tmp_path / "p.json").write_text(json.dumps(_instance(first)))
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"problem": {"format": "piper", "file": "p.json", "devices": 1}}))
    return run_cli("solve", spec, "--json", "--time-limit", "20")


@pytest.mark.parametrize("first", [{}, {"1": [], "2": []}])
def test_a_node_without_tmpcs_is_refused(tmp_path, first):
    code, text = _solve(tmp_path, first)
    assert code == 2, text
    assert "p.json" in text and "nodes[0].TMPCs" in text and "no TMPC at any" in text


def test_with_one_tmpc_the_instance_solves(tmp_path):
    code, text = _solve(tmp_path, {"1": [_tmpc(1.0, {}, {"1": 0})]})
    assert code == 0, text
    assert json.loads(text)["certificate"]["primal"] == pytest.approx(3.0)
