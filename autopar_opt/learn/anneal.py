"""Simulated annealing (with restarts) over the problem's local moves.

Kirkpatrick, Gelatt and Vecchi (1983): a move that worsens the penalised value
by a relative ``delta`` is accepted with probability ``exp(-delta / temp)``;
the temperature falls geometrically from ``temp_start`` to ``temp_end`` over
``steps_per_run`` samples, then the search restarts from the best candidate
so far (every other restart from a fresh random one). Relative deltas make the
schedule independent of the instance's time scale. Schedules count samples,
not seconds, so a run's trace prefix is what a shorter budget would find.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from autopar_opt.learn.base import SearcherResult, Tracker


def anneal(problem: Any, budget_s: float, seed: int = 0, max_samples: int | None = None,
           temp_start: float = 0.05, temp_end: float = 1e-4,
           steps_per_run: int = 4000) -> SearcherResult:
    """Anneal for ``budget_s`` seconds (or ``max_samples``); see the module docstring."""
    rng = np.random.default_rng(seed)
    tracker = Tracker(budget_s, max_samples)
    cool = (temp_end / temp_start) ** (1.0 / steps_per_run)
    runs = 0
    while not tracker.done():
        if runs % 2 == 1 and tracker.best is not None:
            cur = tracker.best.copy()
        else:
            cur = problem.random_candidate(rng)
        runs += 1
        priced = problem.price(cur)
        tracker.offer(cur, priced)
        cur_val, temp = priced.penalised, temp_start
        for _ in range(steps_per_run):
            if tracker.done():
                break
            nxt = problem.neighbour(cur, rng)
            priced = problem.price(nxt)
            tracker.offer(nxt, priced)
            delta = (priced.penalised - cur_val) / max(cur_val, 1e-30)
            if delta <= 0 or rng.random() < math.exp(-delta / temp):
                cur, cur_val = nxt, priced.penalised
            temp *= cool
    return tracker.result("anneal", seed, problem, {"restarts": runs})
