"""The exact DP with more devices than units (QA round 12): its state grid had one state
per device count of every type, built as a Python list before any guard or deadline, so
`place` on a 3-node graph with 65,536 accelerators and 65,536 CPU cores filled 24 GB and
was killed. A placement uses at most one device per unit, so the counts are capped at
the number of units (exact), and a grid still too large is refused by a guard.

Oracles: brute force over every assignment of a small graph with more devices than
nodes (the capped DP must keep the optimum and number the devices of the second type
after all of the first); by hand, three nodes of CPU time 0, 1 and 2 on 1,000 + 1,000
devices take 2 (each on its own CPU core: a CPU pays no transfers; node 2 needs 2 on
either type), in little memory."""

from __future__ import annotations

import itertools
import tracemalloc

import numpy as np
import pytest

from autopar_opt.placement.evaluate import evaluate_placement
from autopar_opt.placement.importers.public_json import problem_from_public
from autopar_opt.placement.solve import solve_placement


def _graph(fpgas: int, cpus: int, cpu_time: float = 1.0) -> dict:
    return {"maxSizePerFPGA": 100, "maxFPGAs": fpgas, "maxCPUs": cpus,
            "nodes": [{"id": i, "supportedOnFpga": 1, "cpuLatency": cpu_time + i,
                       "fpgaLatency": 1 + 0.5 * i, "isBackwardNode": 0, "size": 40}
                      for i in range(3)],
            "edges": [{"sourceId": 0, "destId": 1, "cost": 0.25},
                      {"sourceId": 0, "destId": 2, "cost": 0.25},
                      {"sourceId": 1, "destId": 2, "cost": 0.5}]}


@pytest.mark.parametrize("cpu_time", [0.5, 3.0])
def test_more_devices_than_units_keeps_the_brute_force_optimum(cpu_time):
    problem = problem_from_public(_graph(4, 3, cpu_time))
    best = min(m.value for a in itertools.product(range(7), repeat=3)
               if (m := evaluate_placement(problem, np.array(a), contiguous=True)).feasible)
    res = solve_placement(problem)
    assert res.value == pytest.approx(best, rel=1e-12) and res.status == "optimal"
    assert evaluate_placement(problem, res.assignment, contiguous=True).feasible


def test_thousands_of_devices_on_three_nodes_in_little_memory():
    problem = problem_from_public(_graph(1000, 1000, 0.0))
    tracemalloc.start()
    try:
        res = solve_placement(problem, time_limit_s=60)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert res.value == pytest.approx(2.0) and res.status == "optimal"
    assert peak < 64 * 2**20
