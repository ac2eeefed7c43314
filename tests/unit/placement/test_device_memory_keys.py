"""A placement spec's device memory is read from either key, whatever the graph's source
(found by a new user, session 24: a file graph read only ``memory_bytes`` and a zoo graph
only ``memory_gib``, so the other key was accepted and ignored, and a placement over the
stated memory was called optimal); both keys at once are refused."""

from __future__ import annotations

import pytest
import yaml

from autopar_opt.core.errors import SpecError
from autopar_opt.placement.importers.spec import load_placement
from support import paths

GRAPH = paths.DATA / "placement" / "throughput" / "LayerGraphs_bert24_inference.json"


def _load(tmp_path, graph: dict, device: dict):
    spec = tmp_path / "p.yaml"
    spec.write_text(yaml.safe_dump({"placement": {"graph": graph, "devices": [device]}}))
    return load_placement(spec)[0]


@pytest.mark.parametrize("key, value, expected", [("memory_gib", 0.5, 0.5 * 2**30),
                                                  ("memory_bytes", 1.0e6, 1.0e6)])
def test_a_file_graph_and_a_zoo_graph_read_both_keys(tmp_path, key, value, expected):
    file_graph = _load(tmp_path, {"file": str(GRAPH)},
                       {"type": "accelerator", "count": 2, key: value})
    assert file_graph.device_types[0].memory_bytes == expected
    zoo_graph = _load(tmp_path, {"zoo": "transformer", "layers": 2},
                      {"type": "A100-80GB", "count": 2, key: value})
    assert zoo_graph.device_types[0].memory_bytes == expected


def test_both_keys_are_refused(tmp_path):
    with pytest.raises(SpecError) as err:
        _load(tmp_path, {"zoo": "transformer", "layers": 2},
              {"type": "A100-80GB", "memory_gib": 80, "memory_bytes": 1000})
    problem = err.value.problems[0]
    assert problem.key.endswith(".memory_gib") and "keep one of" in problem.fix


def test_a_node_no_device_runs_is_infeasible_with_the_reason(tmp_path):
    """A node unsupported on the accelerators with no CPU: proven infeasible, and the
    reason names the node (session 24: 'infeasible (dp)' with no reason)."""
    import json

    from autopar_opt.placement.importers.public_json import load_public
    from autopar_opt.placement.solve import solve_placement

    graph = {"maxSizePerFPGA": 1000.0, "maxFPGAs": 2, "maxCPUs": 0,
             "nodes": [{"id": i, "supportedOnFpga": 0 if i == 2 else 1, "cpuLatency": 10.0,
                        "fpgaLatency": 1.0, "isBackwardNode": 0, "size": 100.0}
                       for i in (1, 2, 3)],
             "edges": [{"sourceId": 1, "destId": 2, "cost": 0.1},
                       {"sourceId": 2, "destId": 3, "cost": 0.1}]}
    path = tmp_path / "g.json"
    path.write_text(json.dumps(graph))
    for contiguous in (True, False):
        res = solve_placement(load_public(path), contiguous=contiguous)
        assert res.status == "infeasible" and res.method == "device support"
        assert "run on none of the devices there are (2 x accelerator): node(s) 2" \
            in res.details["infeasible"]
