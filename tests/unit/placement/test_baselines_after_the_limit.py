"""With no time left to work the baselines out on the whole graph, the summary takes the
solve's own run of the same heuristics (found by a new user, session 24: a 20 s latency
run printed "baseline everything on one device: -" and "not computed within the time
limit" while placement.json's details held both values)."""

from __future__ import annotations

import time

from autopar_opt.cli.place import placement_baselines
from autopar_opt.placement.importers.public_json import load_public
from autopar_opt.placement.solve import solve_placement
from support import paths

GRAPH = paths.DATA / "placement" / "latency" / "LayerGraphs_bert24_inference.json"


def test_the_solves_own_heuristics_stand_in_when_the_time_is_spent():
    result = solve_placement(load_public(GRAPH), objective="latency", time_limit_s=30)
    det = result.details
    assert det["single_device"] is not None and det["topological_split"] is not None
    rows = placement_baselines(result, None, deadline=time.perf_counter() - 1.0)    # already past
    assert [r["value"] for r in rows] == [det["single_device"], det["topological_split"]]
    assert not any("note" in r for r in rows)


def test_placement_json_names_cut_nodes_by_the_inputs_ids(tmp_path):
    """metrics.cut_nodes uses the file's node ids, as devices[].nodes and cut_edges do
    (session 24: internal 0-based positions beside the ids)."""
    import json

    from support.cli import run_cli

    graph = paths.DATA / "placement" / "throughput" / "LayerGraphs_bert24_inference.json"
    code, text = run_cli("place", graph, "--out", tmp_path / "o", "--quiet")
    assert code == 0, text
    doc = json.loads((tmp_path / "o" / "placement.json").read_text())
    placed = {n for d in doc["devices"] for n in d["nodes"]}
    cut = doc["metrics"]["cut_nodes"]
    assert cut and set(cut) <= placed
    assert set(cut) == {e["id"] for e in doc["cut_edges"]}
