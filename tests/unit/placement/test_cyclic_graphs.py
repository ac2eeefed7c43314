"""Placement of a graph with a directed cycle (found by a new user, session 24): the
bundled BERT training operator graphs have cycles; ``--no-contiguous`` (and
``--searcher`` with it) ended in an internal error from the topological split and the
communication-aware bound, both of which took a topological order; the latency
objective (a longest path) crashed the same way instead of refusing the input.

Oracle: brute force over every assignment of the 4-node cycle to 3 devices."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from autopar_opt.placement.evaluate import evaluate_placement
from autopar_opt.placement.importers.public_json import load_public
from autopar_opt.placement.solve import solve_placement
from support.cli import run_cli

RING = {"maxSizePerFPGA": 1000.0, "maxFPGAs": 2, "maxCPUs": 1,
        "nodes": [{"id": i, "supportedOnFpga": 1, "cpuLatency": 10.0, "fpgaLatency": 1.0 + i / 10,
                   "isBackwardNode": 0, "size": 100.0} for i in (1, 2, 3, 4)],
        "edges": [{"sourceId": u, "destId": v, "cost": 0.1}
                  for u, v in ((1, 2), (2, 3), (3, 4), (4, 1))]}


@pytest.fixture()
def ring(tmp_path):
    path = tmp_path / "ring.json"
    path.write_text(json.dumps(RING))
    return path


def _brute(problem, contiguous: bool) -> float:
    best = np.inf
    for a in itertools.product(range(problem.num_devices), repeat=problem.num_nodes):
        m = evaluate_placement(problem, np.array(a), contiguous=contiguous)
        if m.feasible:
            best = min(best, m.value)
    return best


@pytest.mark.parametrize("contiguous", [True, False])
def test_a_cycle_is_placed_at_the_brute_force_optimum(ring, contiguous):
    problem = load_public(ring)
    res = solve_placement(problem, contiguous=contiguous, time_limit_s=30)
    assert res.status == "optimal"
    assert res.value == pytest.approx(_brute(problem, contiguous), rel=1e-9)


def test_the_cli_places_it_with_a_searcher_and_refuses_latency(ring):
    code, text = run_cli("place", ring, "--no-contiguous", "--searcher", "anneal",
                         "--budget-s", "1", "--time-limit", "20")
    assert code == 0 and "internal error" not in text
    code, text = run_cli("place", ring, "--objective", "latency")
    assert code == 2
    assert "needs an acyclic graph" in text and "1 -> 2 -> 3 -> 4 -> 1" in text


@pytest.mark.parametrize("flag, rule", [("--contiguous", "keeps every cycle on one device"),
                                        ("--no-contiguous", "prices its edges like any others")])
def test_max_load_says_the_input_has_a_cycle(ring, tmp_path, flag, rule):
    """A cyclic input (often a reversed edge) was placed without a word (QA round 35): the
    text, the JSON and placement.json name one cycle (the ring's, by hand) and what the
    variant did with it; an acyclic graph gets no such line."""
    code, text = run_cli("place", ring, flag, "--time-limit", "20")
    assert code == 0 and "cycles:" in text and "1 -> 2 -> 3 -> 4 -> 1" in text and rule in text
    code, out = run_cli("place", ring, flag, "--json", "--time-limit", "20", "--out", tmp_path / "o")
    assert code == 0 and "1 -> 2 -> 3 -> 4 -> 1" in json.loads(out[out.index("{"):])["cycles"]
    assert rule in json.loads((tmp_path / "o" / "placement.json").read_text())["cycles"]
    chain = dict(RING, edges=RING["edges"][:3])
    (tmp_path / "chain.json").write_text(json.dumps(chain))
    code, text = run_cli("place", tmp_path / "chain.json", flag, "--time-limit", "20")
    assert code == 0 and "cycles:" not in text
