"""An exit 3 from the exact DP or MILP says why (QA round 12): `place` printed "status:
infeasible (dp)" and nothing else, where the memory-bound and device-support proofs
give a reason. A unit that must sit on one device and fits none is named with its
bytes; otherwise the proof's method is.

Oracles: brute force (no assignment is feasible) and the bytes by hand: a chain 0 -> 1 -> 2
of 60-byte nodes with 0 and 2 in one colour class needs 180 bytes on one device when
contiguous (the class closes a cycle through 1), 120 when not; three 60-byte nodes on
two 100-byte devices fit no device pair (pigeonhole), though each fits and 180 <= 200."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from autopar_opt.placement.evaluate import evaluate_placement
from autopar_opt.placement.importers.public_json import problem_from_public
from support.cli import run_cli


def _graph(classes: bool) -> dict:
    nodes = [{"id": i, "supportedOnFpga": 1, "cpuLatency": 1, "fpgaLatency": 1,
              "isBackwardNode": 0, "size": 60} for i in range(3)]
    if classes:
        nodes[0]["colorClass"] = nodes[2]["colorClass"] = 7
    return {"maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 0, "nodes": nodes,
            "edges": [{"sourceId": 0, "destId": 1, "cost": 1}, {"sourceId": 1, "destId": 2, "cost": 1}]}


def _why(tmp_path, graph: dict, *args: str) -> str:
    problem = problem_from_public(graph)
    contiguous = "--no-contiguous" not in args
    assert not any(evaluate_placement(problem, np.array(a), contiguous=contiguous).feasible
                   for a in itertools.product(range(2), repeat=3))
    path = tmp_path / "g.json"
    path.write_text(json.dumps(graph))
    code, text = run_cli("place", path, "--json", *args)
    assert code == 3, text
    return json.loads(text)["details"]["infeasible"]


@pytest.mark.parametrize("args, ids, nbytes", [((), "nodes 0, 1, 2", 180),
                                               (("--no-contiguous",), "nodes 0, 2", 120)])
def test_a_unit_too_big_for_any_device_is_named(tmp_path, args, ids, nbytes):
    why = _why(tmp_path, _graph(True), *args)
    assert why.startswith(f"{ids} must share one device") and f"need {nbytes} bytes" in why
    assert "100 bytes" in why


def test_otherwise_the_proof_is_named(tmp_path):
    why = _why(tmp_path, _graph(False))
    assert why == ("no contiguous placement meets the memory limits, colour classes and device "
                   "support (proven by dp)")


def test_the_unit_named_is_one_that_fits_no_device(tmp_path):
    """The largest unit may fit (here on an accelerator) while a smaller CPU-only node
    fits no device (the spec gives the CPU 10 bytes): that node is the one named."""
    import yaml

    graph = _graph(False)
    graph.update(maxSizePerFPGA=1000, maxCPUs=1)
    graph["nodes"][0]["size"] = 400
    graph["nodes"][2].update(supportedOnFpga=0, size=50)
    (tmp_path / "g.json").write_text(json.dumps(graph))
    spec = tmp_path / "p.yaml"
    spec.write_text(yaml.safe_dump({"placement": {"graph": {"file": "g.json"}, "devices": [
        {"type": "accelerator", "count": 2}, {"type": "cpu", "count": 1, "memory_bytes": 10}]}}))
    code, text = run_cli("place", spec, "--json")
    assert code == 3, text
    assert json.loads(text)["details"]["infeasible"] == (
        "node 2 needs 50 bytes, more than the 10 bytes of any device that runs them")
