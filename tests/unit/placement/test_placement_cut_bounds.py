"""The communication-aware pigeonhole bound (:mod:`autopar_opt.placement.bounds.cuts`).

Oracles: exhaustive enumeration. ``ψ_τ(A)`` (a max flow) equals the minimum of
``t_τ(S) + cut(S)`` over every superset ``S`` of ``A``, enumerated; the bound
never exceeds the brute-force optimum of seeded small DAGs (contiguous and
not), including transfer-dominated variants where it beats the work LP; a
hand-derived chain where it equals the optimum.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from support.placement_cases import brute_force, random_problem
from autopar_opt.placement import DeviceType, PlacementProblem
from autopar_opt.placement.condense import condense
from autopar_opt.placement.bounds.cuts import PairFloor, conflict_bound
from autopar_opt.placement.heuristics import compute_lower_bound


def _heavy(p: PlacementProblem, factor: float) -> PlacementProblem:
    """``p`` with every transfer cost multiplied by ``factor``."""
    return PlacementProblem(p.name, p.node_names, p.node_ids, p.edges, p.time, p.size_bytes,
                            p.comm * factor, p.color, p.is_backward, p.device_types)


def _psi_brute(cond, t, a: np.ndarray) -> float:
    nu = cond.num_units
    tt = cond.time[t.name]
    if not np.all(np.isfinite(tt[a])) or cond.size_bytes[a].sum() > t.memory_bytes * (1 + 1e-9):
        return np.inf
    if not t.pays_comm:
        return float(tt[a].sum())
    best = np.inf
    rest = [u for u in range(nu) if u not in set(a.tolist())]
    for r in range(len(rest) + 1):
        for extra in itertools.combinations(rest, r):
            s = np.zeros(nu, bool)
            s[a] = True
            s[list(extra)] = True
            cut = sum(w for h, w in zip(cond.hyper, cond.hyper_w) if s[h].any() and not s[h].all())
            best = min(best, float(tt[s].sum()) + cut)
    return best


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("contiguous", [True, False])
def test_pair_floor_equals_enumerated_minimum(seed: int, contiguous: bool) -> None:
    p = _heavy(random_problem(seed, training=seed % 3 == 0, hetero=seed % 2 == 1), 3.0)
    cond = condense(p, fuse_cycles=contiguous)
    pf = PairFloor(cond, contiguous)
    for u, v in itertools.combinations(range(cond.num_units), 2):
        a = pf.hull(u, v)
        for t in p.device_types:
            want = _psi_brute(cond, t, a)
            got = pf.psi(t, a)
            if np.isinf(want):
                assert np.isinf(got)
            else:               # rounded down, never above the true minimum
                assert want - 1e-6 * (1 + want) <= got <= want + 1e-12


def test_hull_is_the_convex_closure() -> None:
    # chain 0 -> 1 -> 2 and a side branch 0 -> 3: the hull of (0, 2) is the chain only
    p = PlacementProblem("hull", [f"n{i}" for i in range(4)], list(range(4)),
                         np.array([(0, 1), (1, 2), (0, 3)]), {"acc": np.ones(4)}, np.ones(4),
                         np.ones(4), np.arange(4), np.zeros(4, bool), [DeviceType("acc", 2)])
    pf = PairFloor(condense(p), contiguous=True)
    assert pf.hull(2, 0).tolist() == [0, 1, 2]
    assert sorted(pf.hull(2, 3).tolist()) == [2, 3]
    assert sorted(PairFloor(condense(p), contiguous=False).hull(0, 2).tolist()) == [0, 2]


def test_hand_chain_transfer_bound_equals_optimum() -> None:
    # chain a -> b -> c, unit times, transfers of 10, two accelerators: any split pays a
    # transfer of 10 on both sides of the cut, so one device holding everything (3) is
    # optimal; the old floor gives 2 (two of the three unit-time units share a device),
    # the pigeonhole over the minimum cuts gives θ = min over supersets of each pair
    # = t({a,b,c}) = 3 (every proper superset pays a transfer of 10 or more).
    p = PlacementProblem("chain", ["a", "b", "c"], [0, 1, 2], np.array([(0, 1), (1, 2)]),
                         {"acc": np.ones(3)}, np.ones(3), np.array([10.0, 10.0, 0.0]),
                         np.arange(3), np.zeros(3, bool), [DeviceType("acc", 2)])
    cond = condense(p)
    assert compute_lower_bound(cond) == pytest.approx(2.0)
    assert brute_force(p, "max-load", True) == pytest.approx(3.0)
    assert conflict_bound(cond, contiguous=True) == pytest.approx(3.0, rel=1e-6)
    assert conflict_bound(cond, contiguous=True) <= 3.0


CASES = [(s, f) for s in range(10) for f in (1.0, 6.0)]


@pytest.mark.parametrize("contiguous", [True, False])
def test_bound_never_exceeds_brute_force(contiguous: bool) -> None:
    beats_work_lp = 0
    for seed, factor in CASES:
        p = _heavy(random_problem(seed, training=seed % 3 == 0, hetero=seed % 2 == 1,
                                  n=4 if seed % 3 == 0 else None), factor)
        best = brute_force(p, "max-load", contiguous)
        if not np.isfinite(best):
            continue
        cond = condense(p, fuse_cycles=contiguous)
        work = compute_lower_bound(cond)
        bound = conflict_bound(cond, contiguous=contiguous, floor=work)
        assert work <= bound <= best * (1 + 1e-9), (seed, factor)
        beats_work_lp += bound > work * (1 + 1e-6)
    assert beats_work_lp >= 3          # the transfer-heavy cases exercise the new bound
