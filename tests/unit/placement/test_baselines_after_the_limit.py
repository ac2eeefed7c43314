"""With no time left to work the baselines out on the whole graph, the summary takes the
solve's own run of the same heuristics (found by a new user, session 24: a 20 s latency
run printed "baseline everything on one device: -" and "not computed within the time
limit" while placement.json's details held both values)."""

from __future__ import annotations

import time

from autopar_opt.cli.place import _baselines
from autopar_opt.placement.importers.public_json import load_public
from autopar_opt.placement.solve import solve_placement
from support import paths

GRAPH = paths.DATA / "placement" / "latency" / "LayerGraphs_bert24_inference.json"


def test_the_solves_own_heuristics_stand_in_when_the_time_is_spent():
    result = solve_placement(load_public(GRAPH), objective="latency", time_limit_s=30)
    det = result.details
    assert det["single_device"] is not None and det["topological_split"] is not None
    rows = _baselines(result, None, deadline=time.perf_counter() - 1.0)    # already past
    assert [r["value"] for r in rows] == [det["single_device"], det["topological_split"]]
    assert not any("note" in r for r in rows)
