"""Exact domain reduction of the min-sum problem (solvers/dp/min_sum_reduction.py).

Oracles: brute force over every plan of tiny random problems (4-6 variables, 2-6
configurations, graphs with cycles), with and without a binding memory row; forest
min-marginals against the brute-force min-marginals of the relaxation; hand-built cases in
which each rule must remove a stated configuration (so the checks are not vacuous).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from autopar_opt.solvers.dp.min_sum_reduction import (dominated, reduce_domains, spanning_forest,
                                                      tree_min_marginals)


def _problem(seed: int, n: int):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 7, size=n)
    pairs = [(i, i + 1) for i in range(n - 1)]                          # a path ...
    pairs += [(a, b) for a, b in itertools.combinations(range(n), 2)
              if b > a + 1 and rng.random() < 0.4]                     # ... and chords (cycles)
    unary = [rng.random(s) * 3 for s in sizes]
    tables = []
    for a, b in pairs:
        t = rng.random((sizes[a], sizes[b]))
        t[rng.random(t.shape) < 0.3] = 0.0                              # free resharding pairs
        tables.append(t)
    memory = [rng.random(s) for s in sizes]
    return unary, pairs, tables, memory


def _value(unary, pairs, tables, c):
    return sum(u[k] for u, k in zip(unary, c)) + sum(t[c[a], c[b]] for (a, b), t in zip(pairs, tables))


def _brute(unary, pairs, tables, memory=None, cap=math.inf, domains=None):
    domains = domains or [range(len(u)) for u in unary]
    best = math.inf
    for c in itertools.product(*domains):
        if memory is not None and sum(m[k] for m, k in zip(memory, c)) > cap:
            continue
        best = min(best, _value(unary, pairs, tables, c))
    return best


@pytest.mark.parametrize("seed", range(12))
def test_reduced_domains_keep_the_optimum(seed):
    unary, pairs, tables, _ = _problem(seed, 4 + seed % 3)
    best = _brute(unary, pairs, tables)
    red = reduce_domains(unary, pairs, tables)
    assert all(len(k) > 0 for k in red.keep)
    assert _brute(unary, pairs, tables, domains=[list(k) for k in red.keep]) == pytest.approx(best, rel=1e-12)
    assert red.lower_bound <= best * (1 + 1e-12)
    assert red.incumbent_value >= best * (1 - 1e-12)
    assert _value(unary, pairs, tables, red.incumbent) == pytest.approx(red.incumbent_value, rel=1e-12)


def test_reduction_removes_configurations_on_random_problems():
    """Over the random problems above, fixing and dominance together remove configurations
    (the equality test is not vacuous)."""
    removed = 0
    for seed in range(12):
        unary, pairs, tables, _ = _problem(seed, 4 + seed % 3)
        red = reduce_domains(unary, pairs, tables)
        removed += sum(map(len, unary)) - sum(map(len, red.keep))
    assert removed > 50


@pytest.mark.parametrize("seed", range(8))
def test_reduced_domains_keep_the_memory_constrained_optimum(seed):
    unary, pairs, tables, memory = _problem(100 + seed, 5)
    least = sum(float(m.min()) for m in memory)
    cap = least + 0.3 * (sum(float(m.max()) for m in memory) - least)      # binds
    best = _brute(unary, pairs, tables, memory, cap)
    red = reduce_domains(unary, pairs, tables, memory, cap)
    kept = _brute(unary, pairs, tables, memory, cap, domains=[list(k) for k in red.keep])
    assert kept == pytest.approx(best, rel=1e-12)
    if red.incumbent:
        assert sum(m[k] for m, k in zip(memory, red.incumbent)) <= cap * (1 + 1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_forest_min_marginals_equal_brute_force_on_the_forest(seed):
    unary, pairs, tables, _ = _problem(200 + seed, 5)
    forest = spanning_forest(len(unary), pairs, np.arange(len(pairs), dtype=float))
    marg = tree_min_marginals(unary, pairs, tables, forest)
    f_pairs, f_tables = [pairs[e] for e in forest], [tables[e] for e in forest]
    for v, u in enumerate(unary):
        for k in range(len(u)):
            doms = [range(len(x)) if w != v else [k] for w, x in enumerate(unary)]
            assert marg[v][k] == pytest.approx(_brute(unary, f_pairs, f_tables, domains=doms), rel=1e-12)
            # and a lower bound of the full problem's min-marginal
            assert marg[v][k] <= _brute(unary, pairs, tables, domains=doms) * (1 + 1e-12)


def test_dominance_by_hand():
    """Variable with three configurations and one neighbour of two: 0 is cheaper than 1 by 2
    and its row costs at most 1 more anywhere, so 0 dominates 1; 2 is cheaper than 0 by 0.5
    but costs 3 more against neighbour configuration 1, so nothing dominates 2 and 2
    dominates nothing. With memory compared, 0 no longer dominates 1 where it needs more."""
    unary = np.array([1.0, 3.0, 0.5])
    x = np.array([[1.0, 1.0], [0.0, 0.5], [1.0, 4.0]])
    assert dominated(unary, [x], None).tolist() == [False, True, False]
    assert dominated(unary, [x], np.array([2.0, 1.0, 0.0])).tolist() == [False, False, False]
    # two equal configurations: exactly one goes
    assert dominated(np.array([1.0, 1.0]), [np.array([[0.0, 2.0], [0.0, 2.0]])], None).sum() == 1


def test_fixing_by_hand():
    """Chain of two variables: the plan (0, 0) costs 2; configuration 1 of variable 0 costs
    5 alone, so its forest bound 5 > 2 fixes it out; the optimum stays."""
    unary = [np.array([1.0, 5.0]), np.array([1.0, 1.5])]
    pairs = [(0, 1)]
    tables = [np.array([[0.0, 1.0], [0.0, 0.0]])]
    red = reduce_domains(unary, pairs, tables, dominance=False)
    assert red.keep[0].tolist() == [0] and red.incumbent_value == pytest.approx(2.0)
    assert red.keep[1].tolist() == [0]          # (0, 1) costs 3.5 > 2
