"""The searcher interface: a budget, a seed, a problem in; a priced plan and a trace out.

A searcher (``random``, ``anneal``, ``dqn``, ``gdp``, ``hp``) explores a space of plans and
returns a :class:`SearcherResult`. Which space, exactly (a searcher's best possible plan,
its *ceiling*, is the best plan of its space):

* layer strategies (:class:`~autopar_opt.learn.space.LayerSpace`): every searcher moves
  over the exact search's space, less the free stage-size configurations
  (``search.stage_devices: free``), which the searchers leave out;
* placement: ``gdp`` with its default per-node decoder
  (:mod:`autopar_opt.learn.node_decoder`) can emit every feasible placement, so its
  ceiling is the proven optimum; ``random`` and ``gdp --decoder block`` emit interval
  partitions of one class order only, whose best plan
  (:func:`autopar_opt.learn.block_ceiling.block_ceiling`) is 1.15-1.63x the optimum on
  four of the ten public instances; ``anneal`` starts from such partitions and moves
  single classes between accelerators, so it can reach every placement that keeps the
  host for host-only classes (not one that moves other work to the host).
* placement, ``hp`` (the hierarchical planner, :mod:`autopar_opt.learn.hp`, placement
  only): samples any device per unit, feasible or not, so its space holds the optimum;
  unmasked, it may sample no feasible placement at all (then it reports none).

The value it reports
is the one the problem's independent evaluator gives its best plan
(:func:`autopar_opt.cost.evaluate.evaluate` for layer plans), never the searcher's
own estimate. The trace records the best value found against wall time and
against samples (candidates priced), so one run answers "what had it found
after 10 s" without a second run: schedules (epsilon, temperature, learning
rate) are defined in samples, not in seconds, so a shorter budget gives
exactly the prefix of a longer run's trace (up to timing noise).
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np

#: The clock every searcher's budget is measured on (seconds). Wall time by default, as a
#: user's ``--time-limit`` means; :func:`use_cpu_clock` switches it to the process's CPU
#: time so that a benchmark on a shared machine gives each run the compute an idle core
#: would give it in the same wall budget (with one compute thread, CPU seconds never
#: exceed wall seconds, so a CPU budget never grants more work than the wall budget).
CLOCK: Callable[[], float] = time.perf_counter


def use_cpu_clock() -> None:
    """Measure searcher budgets (and GDP pre-training) in this process's CPU seconds."""
    global CLOCK
    CLOCK = time.process_time


def clock() -> float:
    """The current reading of :data:`CLOCK`."""
    return CLOCK()


#: name -> (module, function); learned ones need the ``learn`` extra (PyTorch).
SEARCHERS: dict[str, tuple[str, str, bool]] = {
    "random": ("autopar_opt.learn.random_search", "random_search", False),
    "anneal": ("autopar_opt.learn.anneal", "anneal", False),
    "dqn": ("autopar_opt.learn.dqn", "dqn_search", True),
    "gdp": ("autopar_opt.learn.gdp", "gdp_search", True),
    "hp": ("autopar_opt.learn.hp", "hp_search", True),
}
#: searchers of operator-graph placement only (``autopar place``; not ``autopar solve``).
PLACEMENT_ONLY: frozenset[str] = frozenset({"hp"})
#: the searchers ``autopar place`` runs (dqn searches the layer-strategy and operator
#: spaces only: ``learn/dqn.py``)
PLACEMENT_SEARCHERS: tuple[str, ...] = ("random", "anneal", "gdp", "hp")
#: the searchers that take the operator-sharding space (``learn/op_space.py``); GDP's policy
#: has no operator task (``gdp_tasks`` knows layer spaces and placements only)
OPERATOR_SEARCHERS: tuple[str, ...] = ("random", "anneal", "dqn")

INSTALL_HINT = ("the learned searchers need PyTorch (CPU): pip install 'autopar-opt[learn]' "
                "(or: pip install torch==2.13.0)")


class SearcherUnavailable(RuntimeError):
    """A searcher was asked for whose optional dependency is not installed."""


class SearcherUnknown(ValueError):
    """No searcher of that name."""


@dataclass
class TracePoint:
    """Best value (problem's fast price, same semantics as the evaluator) so far."""

    wall_s: float
    samples: int
    best: float

    def to_dict(self) -> dict:
        return {"wall_s": round(self.wall_s, 4), "samples": self.samples, "best": self.best}


@dataclass
class SearcherResult:
    """What a searcher found, priced by the problem's evaluator."""

    name: str
    seed: int
    plan: Any | None
    value: float | None            # evaluator's value of ``plan`` (None: nothing feasible found)
    feasible: bool
    wall_time_s: float
    samples: int
    trace: list[TracePoint]
    metrics: dict | None = None
    info: dict = field(default_factory=dict)

    def value_at(self, seconds: float) -> float | None:
        """Best value found within ``seconds`` (from the trace), None if none yet."""
        best = None
        for p in self.trace:
            if p.wall_s <= seconds and np.isfinite(p.best):
                best = p.best
        return best

    def to_dict(self) -> dict:
        return {"name": self.name, "seed": self.seed, "value": self.value,
                "feasible": self.feasible, "wall_time_s": round(self.wall_time_s, 4),
                "samples": self.samples, "trace": [p.to_dict() for p in self.trace],
                "info": self.info}


class Tracker:
    """Budget clock and best-so-far bookkeeping shared by every searcher.

    ``offer(cand, priced)`` records a priced candidate; feasible candidates
    compete on time, and the best one is what the searcher returns.
    """

    def __init__(self, budget_s: float, max_samples: int | None = None) -> None:
        self.start = clock()
        self.budget_s = budget_s
        self.max_samples = max_samples
        self.samples = 0
        self.best_value = float("inf")
        self.best: Any = None
        self.trace: list[TracePoint] = []

    def elapsed(self) -> float:
        return clock() - self.start

    def done(self) -> bool:
        if self.max_samples is not None and self.samples >= self.max_samples:
            return True
        return self.elapsed() >= self.budget_s

    def offer(self, cand: Any, priced: Any) -> bool:
        """Count one sample; keep it if feasible and better. True if it improved."""
        self.samples += 1
        if priced.feasible and priced.time_s < self.best_value * (1 - 1e-12):
            self.best_value, self.best = priced.time_s, cand.copy()
            self.trace.append(TracePoint(self.elapsed(), self.samples, priced.time_s))
            return True
        return False

    def result(self, name: str, seed: int, problem: Any, info: dict | None = None) -> SearcherResult:
        """Price the best candidate with the problem's evaluator and package it."""
        wall = self.elapsed()
        self.trace.append(TracePoint(wall, self.samples, self.best_value))
        if self.best is None:
            return SearcherResult(name, seed, None, None, False, wall, self.samples, self.trace,
                                  info=info or {})
        plan, value, feasible, metrics = problem.plan_value(self.best)
        return SearcherResult(name, seed, plan, value, feasible, wall, self.samples, self.trace,
                              metrics, info or {})


class SearchFn(Protocol):
    def __call__(self, problem: Any, budget_s: float, seed: int = 0,
                 max_samples: int | None = None, **options: Any) -> SearcherResult: ...


def torch_available() -> bool:
    """True when PyTorch imports (the ``learn`` extra is installed)."""
    try:
        importlib.import_module("torch")
    except ImportError:
        return False
    return True


def get_searcher(name: str) -> Callable[..., SearcherResult]:
    """The search function registered as ``name``.

    Raises :class:`SearcherUnknown` (names the choices) or
    :class:`SearcherUnavailable` (says how to install the extra)."""
    if name not in SEARCHERS:
        raise SearcherUnknown(f"unknown searcher {name!r}; choose one of {', '.join(SEARCHERS)}")
    module, func, needs_torch = SEARCHERS[name]
    if needs_torch and not torch_available():
        raise SearcherUnavailable(f"searcher {name!r}: {INSTALL_HINT}")
    return getattr(importlib.import_module(module), func)


def run_searcher(name: str, problem: Any, budget_s: float, seed: int = 0,
                 max_samples: int | None = None, **options: Any) -> SearcherResult:
    """Run the searcher ``name`` on ``problem`` for ``budget_s`` seconds."""
    return get_searcher(name)(problem, budget_s, seed=seed, max_samples=max_samples, **options)
