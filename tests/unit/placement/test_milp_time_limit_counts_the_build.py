"""The placement MILP's time limit covers counting and building the model too (QA round
12): the solver was given the whole limit after the build, so `place --solver highs
--time-limit 5` on 2 x 8,192 devices ran 12.5 s (5.5 s of building, then 6 s of solve).

Oracle: a limit that the build alone spends leaves nothing for the solver: no solver
status, no plan, the refusal says why; with time left the same MILP proves the optimum
found by brute force over all 27 assignments."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from autopar_opt.placement.condense import condense
from autopar_opt.placement.evaluate import evaluate_placement
from autopar_opt.placement.exact.solve_milp import run_milp
from autopar_opt.placement.importers.public_json import problem_from_public

GRAPH = {"maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 1,
         "nodes": [{"id": i, "supportedOnFpga": 1, "cpuLatency": 4 + i, "fpgaLatency": 1 + i,
                    "isBackwardNode": 0, "size": 30} for i in range(3)],
         "edges": [{"sourceId": 0, "destId": 1, "cost": 0.5}, {"sourceId": 1, "destId": 2, "cost": 0.5}]}


def _run(limit):
    problem = problem_from_public(GRAPH)
    return problem, run_milp(problem, condense(problem, fuse_cycles=False), "max-load", False,
                             "highs", limit, 1e-9, None)


def test_a_limit_spent_by_the_build_leaves_nothing_for_the_solver():
    _, (value, assign, bound, info) = _run(1e-9)
    assert "milp_status" not in info and assign is None and value == np.inf
    assert "time limit ran out while building the MILP" in info["milp_refused"]


def test_with_time_left_the_milp_proves_the_brute_force_optimum():
    problem, (value, _, bound, info) = _run(30.0)
    best = min(m.value for a in itertools.product(range(3), repeat=3)
               if (m := evaluate_placement(problem, np.array(a))).feasible)
    assert value == pytest.approx(best) and bound == pytest.approx(best, rel=1e-6)
