"""Variable elimination in blocks (solvers/dp/elimination.py, issue 35).

Oracles: brute force over every assignment of tiny random instances, with blocks
of 1 to 40 entries (a step cut along one, two or three leading axes) and
unblocked; the memory the elimination's tables take, counted before the run
(:func:`created_entries`), equals the entries of the tables it creates.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from autopar_opt.solvers.dp import elimination


def _instance(seed: int):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 8))
    sizes = [int(rng.integers(1, 5)) for _ in range(n)]
    pairs = [(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < 0.5]
    unary = [rng.integers(0, 9, s).astype(float) for s in sizes]
    tables = [rng.integers(0, 9, (sizes[u], sizes[v])).astype(float) for u, v in pairs]
    return sizes, pairs, unary, tables


def _value(choice, pairs, unary, tables) -> float:
    return (sum(u[c] for u, c in zip(unary, choice))
            + sum(t[choice[u], choice[v]] for (u, v), t in zip(pairs, tables)))


@pytest.mark.parametrize("seed", range(40))
def test_blocked_elimination_equals_brute_force(monkeypatch, seed):
    sizes, pairs, unary, tables = _instance(seed)
    best = min(_value(c, pairs, unary, tables)
               for c in itertools.product(*[range(s) for s in sizes]))
    for block in (1, 3, 7, 40, 1 << 20):
        monkeypatch.setattr(elimination, "BLOCK_ENTRIES", block)
        res = elimination.solve_min_sum(unary, pairs, tables)
        assert res.value == best and _value(res.choice, pairs, unary, tables) == best


@pytest.mark.parametrize("seed", range(10))
def test_created_entries_are_counted_before_the_run(monkeypatch, seed):
    sizes, pairs, unary, tables = _instance(seed)
    made = []
    original = elimination._eliminate

    def spy(factors, full, sizes_):
        best, arg = original(factors, full, sizes_)
        made.append(best.size)
        assert arg.shape == best.shape
        return best, arg
    monkeypatch.setattr(elimination, "_eliminate", spy)
    order, widest = elimination.greedy_order(sizes, pairs)
    counted = elimination.created_entries(sizes, order, pairs)
    elimination.solve_min_sum(unary, pairs, tables)
    assert sum(made) == counted
    need, wide = elimination.elimination_bytes(sizes, pairs)
    assert wide == widest and need >= elimination.BYTES_PER_CREATED_ENTRY * counted
