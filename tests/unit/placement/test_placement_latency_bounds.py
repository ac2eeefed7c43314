"""Latency: the sum-of-loads DP incumbent and the path-segmentation lower bound.

Oracles: brute force over every assignment on small random DAGs (bound ≤ optimum ≤
incumbent; the incumbent is feasible and ``evaluate`` prices it at most at the DP's
value), and a hand-derived chain where memory forces a cut.
"""

from __future__ import annotations

import numpy as np
import pytest

from support.placement_cases import brute_force, random_problem
from autopar_opt.placement import DeviceType, PlacementProblem, evaluate_placement, solve_placement
from autopar_opt.placement.condense import condense
from autopar_opt.placement.heuristics import critical_path_bound
from autopar_opt.placement.bounds.latency import (latency_lower_bound, longest_path, path_bound,
                                                  serial_incumbent)


def _chain(comm: float, mem: float, host: bool, accelerators: int = 2) -> PlacementProblem:
    types = [DeviceType("acc", accelerators, mem, True)]
    times = {"acc": np.array([1.0, 1.0])}
    if host:
        types.append(DeviceType("cpu", 1, float("inf"), False))
        times["cpu"] = np.array([10.0, 10.0])
    return PlacementProblem("chain", ["a", "b"], [0, 1], np.array([[0, 1]]), times,
                            np.array([1.0, 1.0]), np.array([comm, 0.0]), np.array([0, 1]),
                            np.array([False, False]), types)


def test_path_bound_by_hand() -> None:
    # a -> b, each fills one accelerator's memory: a on d0 (1 + send 3), b on d1
    # (1 + receive 3): latency 8, where the critical path (free transfers) says 2
    p = _chain(3.0, 1.0, host=False)
    assert critical_path_bound(p) == pytest.approx(2.0)
    assert path_bound(p, [0, 1]) == pytest.approx(8.0)
    assert brute_force(p, "latency", True) == pytest.approx(8.0)
    # one accelerator and a host (10 per node, no transfers): one node on each, 1 + 3 + 10
    p = _chain(3.0, 1.0, host=True, accelerators=1)
    assert path_bound(p, [0, 1]) == pytest.approx(14.0) == brute_force(p, "latency", True)
    # memory for both: one block, no transfer
    p = _chain(3.0, 2.0, host=False)
    assert path_bound(p, [0, 1]) == pytest.approx(2.0) == brute_force(p, "latency", True)


@pytest.mark.parametrize("seed", range(10))
def test_latency_bound_and_incumbent_against_brute_force(seed: int) -> None:
    p = random_problem(700 + seed, n=5, hetero=seed % 3 == 0, cpu=seed % 4 != 3)
    best = brute_force(p, "latency", True)
    lower, info = latency_lower_bound(p)
    assert lower <= best * (1 + 1e-9)
    assert info["critical_path"] <= lower
    for path in (longest_path(p, p.time["acc"]), longest_path(p, p.size_bytes)):
        assert path_bound(p, path) <= best * (1 + 1e-9)
    assign, serial = serial_incumbent(condense(p))
    if np.isfinite(best):
        assert assign is not None
    if assign is not None:
        m = evaluate_placement(p, assign, objective="latency", contiguous=True)
        assert m.feasible and best * (1 - 1e-9) <= m.value <= serial * (1 + 1e-9)
    res = solve_placement(p, objective="latency", solver="dp")
    assert res.lower_bound <= best * (1 + 1e-9) <= res.value * (1 + 1e-9) + 1e-12
    if res.assignment is not None:
        priced = evaluate_placement(p, res.assignment, objective="latency", contiguous=True)
        assert priced.feasible and priced.value == pytest.approx(res.value, rel=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_latency_mip_start_is_feasible_and_priced_by_evaluate(seed: int) -> None:
    """The MIP start built from a placement satisfies every row and bound of the latency
    MILP, and its objective column equals evaluate's latency."""
    from autopar_opt.placement.exact.latency_milp import build_latency_milp, latency_start

    p = random_problem(760 + seed, n=6, hetero=seed % 2 == 0)
    cond = condense(p)
    assign, _ = serial_incumbent(cond)
    assert assign is not None
    latency = evaluate_placement(p, assign, objective="latency", contiguous=True).latency
    milp = build_latency_milp(cond, big_m=latency)
    sol = latency_start(milp, p, assign)
    form = milp.form
    ax = form.A @ sol
    tol = 1e-7 * max(1.0, latency)
    assert np.all(ax >= form.row_lo - tol) and np.all(ax <= form.row_hi + tol)
    assert np.all(sol >= form.col_lo - tol) and np.all(sol <= form.col_hi + tol)
    assert float(form.c @ sol) == pytest.approx(latency, rel=1e-12)


def _transfers_by_definition(p: PlacementProblem, path: list[int]) -> np.ndarray:
    """``T[a, b]`` straight from its definition (``path_transfers``' docstring), O(m³)."""
    m = len(path)
    pos = {v: i for i, v in enumerate(path)}
    cons = {i: {pos[v] for u, v in p.edges.tolist() if u == path[i] and v in pos and pos[v] > i}
            for i in range(m)}
    t = np.zeros((m + 1, m + 1))
    for a in range(m + 1):
        for b in range(a + 1, m + 1):
            t[a, b] = sum(p.comm[path[j]] for j in range(a) if any(a <= c < b for c in cons[j]))
            t[a, b] += sum(p.comm[path[j]] for j in range(a, b) if any(c >= b for c in cons[j]))
    return t


def _heavy_tight(seed: int) -> PlacementProblem:
    """A seeded DAG with transfers that dominate and memory that binds."""
    p = random_problem(900 + seed, n=5, hetero=seed % 3 == 0, cpu=seed % 4 != 3)
    types = [DeviceType(t.name, t.count, float(p.size_bytes.sum()) * 0.45 if t.pays_comm
                        else t.memory_bytes, t.pays_comm) for t in p.device_types]
    return PlacementProblem(p.name, p.node_names, p.node_ids, p.edges, p.time, p.size_bytes,
                            p.comm * (1 + 4 * (seed % 2)), p.color, p.is_backward, types)


@pytest.mark.parametrize("seed", range(12))
def test_path_transfers_and_side_charges_never_exceed_brute_force(seed: int) -> None:
    from autopar_opt.placement.bounds.latency import memory_prices, path_transfers

    p = _heavy_tight(seed)
    best = brute_force(p, "latency", True)
    tmin = np.minimum(p.time["acc"], p.time.get("cpu", np.full(p.num_nodes, np.inf)))
    for w in (p.time["acc"], p.size_bytes, p.comm, np.where(np.isfinite(tmin), tmin, 0.0)):
        path = longest_path(p, w)
        got = path_transfers(p, np.asarray(path))
        want = _transfers_by_definition(p, path)
        assert np.triu(got, 1) == pytest.approx(np.triu(want, 1))
        for lam in memory_prices(p, path):
            assert path_bound(p, path, lam) <= best * (1 + 1e-9), (path, lam)
