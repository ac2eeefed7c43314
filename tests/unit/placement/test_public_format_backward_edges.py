"""A public-format graph whose backward node feeds a forward node (QA round 12): the
solvers leave backward nodes out of the contiguity order and take every edge touching
them to run forward -> backward, so ``autopar place`` ended in an internal error (exit
70) from the condensation. It is refused at input now: exit 2, naming the file, the
edge's key, the value, the rule and the fix, and no placement.json is written.

Oracle: the same graph with the flag corrected (node 0 forward) is placed, at the
hand optimum 2 (three unit-time nodes on two accelerators, free transfers: {0, 1} and
{2}, or {0} and {1, 2})."""

from __future__ import annotations

import json

from support.cli import run_cli


def _graph(first_backward: int) -> dict:
    return {"maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 0,
            "nodes": [{"id": i, "supportedOnFpga": 1, "cpuLatency": 1, "fpgaLatency": 1,
                       "isBackwardNode": first_backward if i == 0 else 0, "size": 1}
                      for i in range(3)],
            "edges": [{"sourceId": 0, "destId": 1, "cost": 0},
                      {"sourceId": 1, "destId": 2, "cost": 0}]}


def test_a_backward_node_feeding_a_forward_node_is_refused(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps(_graph(1)))
    code, text = run_cli("place", path, "--out", tmp_path / "out")
    assert code == 2, text
    assert "internal error" not in text
    assert "g.json" in text and "edges[0].destId = 1" in text
    assert "backward node" in text and "isBackwardNode" in text
    assert not (tmp_path / "out" / "placement.json").exists()


def test_the_corrected_graph_is_placed_at_the_hand_optimum(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps(_graph(0)))
    code, text = run_cli("place", path, "--json")
    assert code == 0, text
    assert json.loads(text)["value"] == 2
