"""Random search: the baseline every learned searcher must beat.

Each sample draws a configuration, a split and a strategy per layer
uniformly at random (:meth:`LayerSpace.random_candidate`, or the placement
space's equivalent) and keeps the best feasible one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autopar_opt.learn.base import SearcherResult, Tracker


def random_search(problem: Any, budget_s: float, seed: int = 0,
                  max_samples: int | None = None) -> SearcherResult:
    """Uniform random sampling for ``budget_s`` seconds (or ``max_samples``)."""
    rng = np.random.default_rng(seed)
    tracker = Tracker(budget_s, max_samples)
    while not tracker.done():
        cand = problem.random_candidate(rng)
        tracker.offer(cand, problem.price(cand))
    return tracker.result("random", seed, problem)
