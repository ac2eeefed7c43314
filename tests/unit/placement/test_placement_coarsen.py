"""Chain coarsening (autopar_opt/placement/coarsen.py): it keeps the max-load optimum.

Oracles: brute force over every assignment of the ORIGINAL nodes against brute
force over the coarsened units (expanded and priced by the independent
evaluator), and the exact DP on both, on seeded chain-rich instances built so
that the rule fires (some expensive-to-move outputs, some zero-size nodes,
heterogeneous types, a CPU). The naive rule (contract every single-input /
single-output chain edge) is shown NOT to keep the optimum.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from support.placement_cases import brute_force
from autopar_opt.placement import DeviceType, PlacementProblem, evaluate_placement
from autopar_opt.placement.coarsen import coarsen_chains
from autopar_opt.placement.condense import Condensed, condense, from_units
from autopar_opt.placement.exact.dp import solve_dp
from autopar_opt.placement.heuristics import compute_lower_bound, pigeonhole_bound


def chain_problem(seed: int, *, hetero: bool, cpu: bool, n: int = 6) -> PlacementProblem:
    """A few chains joined into a DAG; every other output is costly to move, so some
    chain cuts are dominated (module docstring of coarsen.py), others are not."""
    rng = random.Random(seed)
    edges = [(i, i + 1) for i in range(n - 1) if rng.random() < 0.8]
    for v in range(2, n):
        if rng.random() < 0.25:
            edges.append((rng.randrange(v - 1), v))
    edges = sorted(set(edges))
    t = np.array([rng.choice([0.0, 0.5]) if rng.random() < 0.4 else rng.uniform(1, 6)
                  for _ in range(n)])
    comm = np.array([rng.uniform(4, 12) if rng.random() < 0.5 else rng.uniform(0, 2)
                     for _ in range(n)])
    size = np.array([0.0 if rng.random() < 0.5 else rng.uniform(1, 4) for _ in range(n)])
    mem = float(size.sum()) * rng.choice([0.6, 2.0])
    times = {"acc": t}
    types = [DeviceType("acc", 2 if hetero or cpu else 3, mem, True)]
    if hetero:
        times["fast"] = t * rng.uniform(0.4, 0.8)
        types.append(DeviceType("fast", 1, mem, True))
    if cpu:
        times["cpu"] = t * rng.uniform(2, 4)
        types.append(DeviceType("cpu", 1, float("inf"), False))
    return PlacementProblem(name=f"chain{seed}", node_names=[f"n{i}" for i in range(n)],
                            node_ids=list(range(n)), edges=np.array(edges).reshape(-1, 2),
                            time=times, size_bytes=size, comm=comm, color=np.arange(n),
                            is_backward=np.zeros(n, bool), device_types=types)


def brute_force_units(cond: Condensed, contiguous: bool) -> float:
    """Best max-load over every unit -> device map, priced on the original graph."""
    best = np.inf
    for choice in itertools.product(range(cond.problem.num_devices), repeat=cond.num_units):
        m = evaluate_placement(cond.problem, cond.expand(np.array(choice)), contiguous=contiguous)
        if m.feasible:
            best = min(best, m.value)
    return best


CASES = [(seed, het, cpu) for seed in range(5) for het, cpu in ((False, False), (True, False),
                                                                  (False, True))]


@pytest.mark.parametrize("contiguous", [True, False])
def test_coarsening_keeps_the_max_load_optimum(contiguous: bool) -> None:
    fired = 0
    for seed, hetero, cpu in CASES:
        p = chain_problem(seed, hetero=hetero, cpu=cpu)
        cond = condense(p, fuse_cycles=contiguous)
        coarse, rep = coarsen_chains(cond, contiguous=contiguous)
        assert rep.units_after == coarse.num_units <= cond.num_units
        fired += rep.contracted > 0
        expect = brute_force(p, "max-load", contiguous)
        got = brute_force_units(coarse, contiguous)
        assert got == pytest.approx(expect, rel=1e-9, abs=1e-12), (seed, hetero, cpu, rep)
        if contiguous and np.isfinite(expect):       # the exact DP on the coarse graph too
            assert solve_dp(coarse).value == pytest.approx(expect, rel=1e-9)
        # the bounds computed on the coarse graph are bounds of the original problem
        assert compute_lower_bound(coarse) <= expect * (1 + 1e-9)
        assert compute_lower_bound(cond) <= expect * (1 + 1e-9)
    assert fired >= len(CASES) // 3, f"the rule fired on only {fired} of {len(CASES)} instances"


def test_naive_chain_contraction_loses_the_optimum() -> None:
    """a -> b on two devices with free transfers: the split max(3, 2) = 3 is optimal;
    contracting the single-output / single-input edge forces 3 + 2 = 5 (hand-derived).
    The dominated-cut rule leaves this edge alone."""
    p = PlacementProblem(name="ab", node_names=["a", "b"], node_ids=[0, 1],
                         edges=np.array([[0, 1]]), time={"acc": np.array([3.0, 2.0])},
                         size_bytes=np.zeros(2), comm=np.zeros(2), color=np.arange(2),
                         is_backward=np.zeros(2, bool), device_types=[DeviceType("acc", 2)])
    cond = condense(p)
    assert brute_force(p, "max-load", True) == 3.0
    naive = from_units(p, np.array([0, 0]), np.zeros((0, 2), dtype=np.int64))
    assert brute_force_units(naive, True) == 5.0
    assert coarsen_chains(cond, contiguous=True)[1].contracted == 0


def test_dominated_edge_is_contracted_by_hand() -> None:
    """a -> b, moving a's output costs 10, b takes 1 and sends 0: splitting costs both
    devices 10, pulling b onto a's device changes that device by 1 + 0 - 10 <= 0."""
    p = PlacementProblem(name="ab", node_names=["a", "b", "c"], node_ids=[0, 1, 2],
                         edges=np.array([[0, 1], [1, 2]]), time={"acc": np.array([3.0, 1.0, 4.0])},
                         size_bytes=np.zeros(3), comm=np.array([10.0, 0.0, 0.0]),
                         color=np.arange(3), is_backward=np.zeros(3, bool),
                         device_types=[DeviceType("acc", 2)])
    coarse, rep = coarsen_chains(condense(p), contiguous=True)
    assert rep.contracted == 1 and coarse.unit_of[0] == coarse.unit_of[1] != coarse.unit_of[2]
    assert brute_force_units(coarse, True) == brute_force(p, "max-load", True) == 4.0


def test_pigeonhole_bound_by_hand() -> None:
    """Three unit-time nodes, no edges, two devices: T/k = 1.5 but two nodes share a
    device, so the optimum is 2 (hand-derived); the LP bound now says so."""
    p = PlacementProblem(name="three", node_names=["a", "b", "c"], node_ids=[0, 1, 2],
                         edges=np.zeros((0, 2), dtype=np.int64), time={"acc": np.ones(3)},
                         size_bytes=np.zeros(3), comm=np.zeros(3), color=np.arange(3),
                         is_backward=np.zeros(3, bool), device_types=[DeviceType("acc", 2)])
    assert brute_force(p, "max-load", False) == 2.0
    assert compute_lower_bound(condense(p, fuse_cycles=False)) == 2.0
    assert pigeonhole_bound(np.array([5.0, 1.0, 3.0, 2.0]), 2) == 5.0      # 3 + 2
    assert pigeonhole_bound(np.array([5.0, 1.0]), 2) == 0.0                # no pigeon
