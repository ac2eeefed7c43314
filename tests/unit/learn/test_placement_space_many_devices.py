"""The random/annealing searchers' contiguity check on many devices (QA round 12): it
built a devices x devices matrix for every candidate, 17 GB and 38 s a candidate with
65,536 accelerators and 65,536 CPU cores (a 2 s budget ran 38 s; under a memory cap the
command died "out of memory"). It now works on the devices the crossing edges touch.

Oracle: the searcher's price equals evaluate_placement's value and feasibility on
random moves (as on the public instances), in a few MB with 4,096 + 4,096 devices (the
old matrix alone was 64 MiB)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from autopar_opt.learn.placement_space import PlacementSpace
from autopar_opt.placement.evaluate import evaluate_placement
from autopar_opt.placement.importers.public_json import problem_from_public

GRAPH = {"maxSizePerFPGA": 100, "maxFPGAs": 4096, "maxCPUs": 4096,
         "nodes": [{"id": i, "supportedOnFpga": 1, "cpuLatency": 3, "fpgaLatency": 1 + i % 3,
                    "isBackwardNode": 0, "size": 10} for i in range(8)],
         "edges": [{"sourceId": u, "destId": v, "cost": 0.5}
                   for u, v in ((0, 1), (1, 2), (0, 3), (3, 4), (2, 5), (4, 5), (5, 6), (6, 7))]}


def test_prices_many_devices_in_little_memory():
    space = PlacementSpace(problem_from_public(GRAPH))
    rng = np.random.default_rng(0)
    seen = set()
    tracemalloc.start()
    try:
        for _ in range(20):
            cand = space.random_candidate(rng)
            for _ in range(int(rng.integers(0, 8))):
                cand = space.neighbour(cand, rng)
            cand.choice[rng.integers(space.num_classes)] = int(rng.choice(space.accel))
            priced = space.price(cand)
            m = evaluate_placement(space.problem, space.node_assignment(cand), contiguous=True)
            assert priced.time_s == pytest.approx(m.value, rel=1e-9)
            assert priced.feasible == m.feasible
            seen.add(priced.feasible)
        cyc = space.random_candidate(rng)          # 0 and 2 on one device, 1 between: a cycle
        cyc.choice[:] = space.accel[0]
        cyc.choice[space.class_of[1]] = space.accel[4000]
        priced = space.price(cyc)
        m = evaluate_placement(space.problem, space.node_assignment(cyc), contiguous=True)
        assert not priced.feasible and not m.feasible and "not contiguous" in m.violations[0]
        seen.add(priced.feasible)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert seen == {True, False}
    assert peak < 16 * 2**20
