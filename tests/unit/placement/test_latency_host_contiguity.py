"""Latency: the host's nodes need not be contiguous (QA round 12). Under the latency
model host nodes run one by one as soon as their inputs are ready, and the authors'
latency IP (``latency-ip/lip.py``: every CPU core in one machine, contiguity rows on
the accelerators only) and our MILP allow a host node before and another after an
accelerator block. The evaluator checked contiguity with the host as one more part, so
it threw the MILP's proven optimum away ("not contiguous") and `place` answered a
worse placement as merely "feasible".

Oracle (hand): a -> b -> c, a and c fast on the CPU (1), b fast on the accelerator (1),
every transfer 0.5. Host a, accelerator b, host c runs in 1 + (0.5 + 1 + 0.5) + 1 = 4;
the best placement whose host part is contiguous takes 12.5 (a on the host, b and c on
the accelerator: 1 + (0.5 + 1 + 10), or its mirror); everything on the host 102."""

from __future__ import annotations

import json

import pytest

from autopar_opt.placement.evaluate import evaluate_placement
from autopar_opt.placement.importers.public_json import problem_from_public
from support.cli import run_cli

GRAPH = {"maxSizePerFPGA": 100, "maxFPGAs": 1, "maxCPUs": 1,
         "nodes": [{"id": i, "supportedOnFpga": 1, "cpuLatency": cpu, "fpgaLatency": acc,
                    "isBackwardNode": 0, "size": 1}
                   for i, cpu, acc in ((0, 1, 10), (1, 100, 1), (2, 1, 10))],
         "edges": [{"sourceId": 0, "destId": 1, "cost": 0.5},
                   {"sourceId": 1, "destId": 2, "cost": 0.5}]}


def test_a_host_node_on_each_side_of_a_block_is_a_valid_latency_placement():
    problem = problem_from_public(GRAPH)
    m = evaluate_placement(problem, [1, 0, 1], objective="latency", contiguous=True)
    assert m.feasible, m.violations
    assert m.value == pytest.approx(4.0)


def test_place_proves_the_hand_optimum(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps(GRAPH))
    code, text = run_cli("place", path, "--objective", "latency", "--json", "--time-limit", "20")
    assert code == 0, text
    doc = json.loads(text)
    assert doc["value"] == pytest.approx(4.0) and doc["status"] == "optimal"
    devices = {d["device"]: d["nodes"] for d in doc["devices"]}
    assert devices == {"accelerator0": [1], "cpu0": [0, 2]}


def test_max_load_keeps_the_host_in_the_chain_of_ideals():
    problem = problem_from_public(GRAPH)
    m = evaluate_placement(problem, [1, 0, 1], objective="max-load", contiguous=True)
    assert not m.feasible and "not contiguous" in m.violations[0]
