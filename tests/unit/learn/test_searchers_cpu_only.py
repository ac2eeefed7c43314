"""The random and annealing searchers on an instance with CPU cores only (QA round 12):
``--searcher random|anneal`` ended in numpy's "negative dimensions are not allowed"
(cutting the class order into k - 1 = -1 blocks). They keep work off the host, so with
no accelerator their one plan is everything on the first CPU core, priced by the
evaluator like any other, and the exact side answers the optimum.

Oracle (hand): CPU times 1, 2, 3 on a chain, two CPU cores that pay no transfers: all on
one core takes 6; the optimum splits {0, 1} | {2}: 3."""

from __future__ import annotations

import json

import pytest

from support.cli import run_cli

GRAPH = {"maxSizePerFPGA": 0, "maxFPGAs": 0, "maxCPUs": 2,
         "nodes": [{"id": i, "supportedOnFpga": 0, "cpuLatency": t, "fpgaLatency": 0,
                    "isBackwardNode": 0, "size": 5} for i, t in enumerate((1, 2, 3))],
         "edges": [{"sourceId": 0, "destId": 1, "cost": 9}, {"sourceId": 1, "destId": 2, "cost": 9}]}


@pytest.mark.parametrize("searcher", ["random", "anneal"])
def test_cpu_cores_only(tmp_path, searcher):
    path = tmp_path / "g.json"
    path.write_text(json.dumps(GRAPH))
    code, text = run_cli("place", path, "--searcher", searcher, "--budget-s", "1",
                         "--time-limit", "10", "--json")
    assert code == 0, text
    doc = json.loads(text)
    assert doc["searcher"]["value"] == pytest.approx(6.0) and doc["searcher"]["feasible"]
    assert doc["value"] == pytest.approx(3.0) and doc["status"] == "optimal"
