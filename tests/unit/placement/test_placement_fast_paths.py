"""The fast paths of the contiguous max-load solver give the same answers as the slow ones.

- :func:`two_type_lp` (closed form) = the same LP solved by HiGHS;
- the DP's batched pricing and its per-ideal pricing = brute force (heterogeneous
  types, CPU, memory limits, colour classes, training graphs), including the
  unused-device step (running minimum over the state grid);
- ``solve_placement``'s small-lattice path (exact DP only) = its full path.
"""

from __future__ import annotations

import numpy as np
import pytest

from support.placement_cases import brute_force, random_problem
from autopar_opt.placement import evaluate_placement
from autopar_opt.placement.exact import dp as dp_mod
from autopar_opt.placement import solve as solve_mod
from autopar_opt.placement.condense import condense
from autopar_opt.placement.heuristics import lp_bound, two_type_lp


def test_two_type_lp_equals_highs() -> None:
    rng = np.random.default_rng(7)
    for _ in range(150):
        n = int(rng.integers(1, 25))
        ta, tb = rng.exponential(1.0, n), rng.exponential(3.0, n)
        ta[rng.random(n) < 0.15] = np.inf                      # host-only units
        tb[(rng.random(n) < 0.15) & np.isfinite(ta)] = np.inf  # accelerator-only units
        ta[rng.random(n) < 0.05] = 0.0
        a, b = int(rng.integers(1, 7)), int(rng.integers(1, 4))
        closed = two_type_lp(ta, tb, a, b)
        highs = lp_bound(np.array([ta, tb]), [a, b]) / (1 - 1e-7)
        assert closed == pytest.approx(highs, rel=1e-7, abs=1e-12)


def test_two_type_lp_by_hand() -> None:
    # 2 units (2, 4) on 1 fast + 1 slow device, slow twice as slow: moving unit 0 (ratio
    # 0.5) to the fast device first, then a fraction θ of unit 1:  2 + 4θ = 8(1 − θ) → θ = 1/2
    assert two_type_lp(np.array([2.0, 4.0]), np.array([4.0, 8.0]), 1, 1) == pytest.approx(4.0)
    # a unit that runs on neither type: no placement at all
    assert two_type_lp(np.array([np.inf]), np.array([np.inf]), 1, 1) == np.inf


def test_dp_pricing_paths_equal_brute_force(monkeypatch) -> None:
    for seed in range(10):
        p = random_problem(900 + seed, hetero=seed % 2 == 0, training=seed % 5 == 0)
        best = brute_force(p, "max-load", True)
        cond = condense(p)
        batched = dp_mod.solve_dp(cond)
        monkeypatch.setattr(dp_mod, "BATCH_LIMIT", 0)          # one ideal at a time
        per_ideal = dp_mod.solve_dp(cond)
        monkeypatch.undo()
        for res in (batched, per_ideal):
            assert res.value == pytest.approx(best, rel=1e-9)
            placed = evaluate_placement(p, cond.expand(res.unit_device), contiguous=True)
            assert placed.feasible and placed.value == pytest.approx(best, rel=1e-9)


def test_small_lattice_path_equals_full_path(monkeypatch) -> None:
    for seed in range(10):
        p = random_problem(950 + seed, hetero=seed % 2 == 1, training=seed % 4 == 0)
        lean = solve_mod.solve_placement(p)
        assert lean.details.get("path", "").startswith("small lattice")
        monkeypatch.setattr(solve_mod, "LEAN_DP_IDEALS", 0)
        full = solve_mod.solve_placement(p)
        monkeypatch.undo()
        assert "path" not in full.details
        assert lean.value == pytest.approx(full.value, rel=1e-9)
        assert lean.lower_bound == pytest.approx(lean.value, rel=1e-9)
        assert lean.status == full.status == "optimal"
