"""A stop signal during the placement DP keeps the best placement found before it
(QA round 13): SIGTERM while the DP over ideals ran answered "no_solution" with the
bound 0, dropping the baselines' placement the solve already held.

Oracle: the baselines of the same document (the greedy topological split and
everything on one device, priced by the evaluator) and a second pricing of the
document's placement by ``evaluate_placement`` from its per-device node lists."""

from __future__ import annotations

import json
import signal

import numpy as np
import pytest

from autopar_opt.placement.evaluate import evaluate_placement
from autopar_opt.placement.importers.public_json import load_public
from support.cli import run_cli
from support.signals import signalling_stub

NODES = 600       # past the small-lattice path (400 ideals): the full path runs the DP


def _chain(path):
    graph = {"maxSizePerFPGA": 1e9, "maxFPGAs": 4, "maxCPUs": 0,
             "nodes": [{"id": i, "supportedOnFpga": 1, "cpuLatency": 5,
                        "fpgaLatency": 1 + (i * 7) % 5, "isBackwardNode": 0, "size": 1}
                       for i in range(NODES)],
             "edges": [{"sourceId": i, "destId": i + 1, "cost": 0.5 + i % 3}
                       for i in range(NODES - 1)]}
    path.write_text(json.dumps(graph))
    return path


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_the_dp_keeps_the_baselines_placement(sig, tmp_path, monkeypatch):
    monkeypatch.setattr("autopar_opt.placement.exact.dp.solve_dp", signalling_stub(sig, "the DP"))
    graph = _chain(tmp_path / "chain.json")
    out = tmp_path / "out"
    code, text = run_cli("place", graph, "--out", out)
    assert code == 128 + sig, text
    doc = json.loads((out / "placement.json").read_text())
    baselines = [b["value"] for b in doc["baselines"] if b["value"] is not None]
    assert doc["value"] == pytest.approx(min(baselines), rel=1e-12)
    assert doc["status"] == "feasible" and 0 < doc["lower_bound"] <= doc["value"]
    assert doc["details"]["stopped"].startswith(
        f"interrupted by signal {int(sig)} during the DP over ideals")
    assert {"method": "dp", "status": "interrupted"}.items() <= doc["details"]["methods"][-1].items()
    problem = load_public(graph)
    assign = np.full(problem.num_nodes, -1)
    for d, row in enumerate(doc["devices"]):
        assign[[problem.node_ids.index(v) for v in row["nodes"]]] = d
    assert (assign >= 0).all()
    again = evaluate_placement(problem, assign)
    assert again.feasible and again.value == pytest.approx(doc["value"], rel=1e-12)
    assert "why:          stopped: interrupted" in text
    assert "The run was interrupted" in (out / "report.html").read_text()
