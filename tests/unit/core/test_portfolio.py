"""The portfolio runner (core/portfolio.py), the memory budget and the stdout guard.

Methods here are tiny fakes with known answers, so each rule of the runner is
checked by what it must record: run in order, stop once the gap is closed,
refuse a model past the budget, survive a MemoryError, keep a plan offered
before a stop signal, say which method proved what.
"""

from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pytest

from autopar_opt.core.interrupts import SearchInterrupted
from autopar_opt.core.memory_budget import (BYTES_PER_LINE, BYTES_PER_NONZERO, GIB, MemoryBudget,
                                            ModelSize)
from autopar_opt.core.portfolio import Method, Shared, run_portfolio
from autopar_opt.core.result import Termination


@dataclass
class Out:
    termination: Termination
    primal: float | None
    lower_bound: float
    solution: Any = None
    message: str = ""


def _method(name, out, calls, size=None, exact=True):
    def run(shared, limit):
        calls.append(name)
        return out
    return Method(name, run, size=(lambda: size) if size is not None else None, exact=exact,
                  describe_size=lambda: "a test model")


BIG = MemoryBudget(64 * GIB, "test")


def test_the_first_exact_method_closes_the_gap_and_the_rest_are_skipped():
    calls: list[str] = []
    methods = [_method("dp", Out(Termination.optimal, 10.0, 10.0, "plan"), calls),
               _method("milp", Out(Termination.optimal, 10.0, 10.0, "other"), calls)]
    shared = run_portfolio(methods, rel_gap=1e-9, deadline=None, budget=BIG)
    assert calls == ["dp"] and shared.primal == 10.0 and shared.lower_bound == 10.0
    assert [r.status for r in shared.records] == ["optimal", "skipped"]
    assert shared.primal_by == shared.bound_by == "dp" and shared.solution == "plan"


def test_bounds_and_plans_are_shared_between_methods():
    """A time-limited DP gives a plan and a bound, the MILP a better bound; the gap
    is the best plan against the larger bound."""
    calls: list[str] = []
    seen = []

    def milp(shared, limit):
        seen.append((shared.primal, shared.lower_bound))
        return Out(Termination.feasible, 12.0, 11.0, "milp plan")
    methods = [_method("dp", Out(Termination.feasible, 11.5, 9.0, "dp plan"), calls),
               Method("milp", milp)]
    shared = run_portfolio(methods, rel_gap=1e-3, deadline=None, budget=BIG)
    assert seen == [(11.5, 9.0)]
    assert shared.primal == 11.5 and shared.solution == "dp plan" and shared.lower_bound == 11.0
    assert shared.gap == pytest.approx(0.5 / 11.5) and not shared.closed()
    assert shared.primal_by == "dp" and shared.bound_by == "milp"


def test_a_model_past_the_memory_budget_is_refused_before_it_is_built():
    calls: list[str] = []
    small = MemoryBudget(1 * GIB, "test budget")
    methods = [_method("milp", Out(Termination.optimal, 1.0, 1.0, "x"), calls, size=2 * GIB),
               _method("dp", Out(Termination.optimal, 1.0, 1.0, "y"), calls)]
    shared = run_portfolio(methods, rel_gap=0.0, deadline=None, budget=small)
    assert calls == ["dp"] and shared.records[0].status == "refused"
    assert "a test model" in shared.records[0].message and "2.00 GiB" in shared.records[0].message
    assert "--memory-limit" in shared.records[0].message


def test_a_memory_error_is_recorded_and_the_next_method_runs():
    def boom(shared, limit):
        raise MemoryError
    calls: list[str] = []
    methods = [Method("milp", boom), _method("dp", Out(Termination.optimal, 3.0, 3.0, "p"), calls)]
    shared = run_portfolio(methods, rel_gap=0.0, deadline=None, budget=BIG)
    assert [r.status for r in shared.records] == ["out_of_memory", "optimal"] and shared.primal == 3.0


def test_proven_infeasibility_ends_the_portfolio():
    calls: list[str] = []
    methods = [_method("dp", Out(Termination.infeasible, None, math.inf), calls),
               _method("milp", Out(Termination.optimal, 1.0, 1.0, "x"), calls)]
    shared = run_portfolio(methods, rel_gap=0.0, deadline=None, budget=BIG)
    assert calls == ["dp"] and shared.infeasible and shared.closed()
    assert shared.methods()[0]["lower_bound"] == "inf"


def test_a_plan_offered_before_a_stop_signal_is_kept():
    def dp(shared, limit):
        shared.offer("dp", 5.0, "first pass plan", 4.0)
        raise SearchInterrupted(15)
    shared = Shared(1e-9)
    with pytest.raises(SearchInterrupted):
        run_portfolio([Method("dp", dp)], rel_gap=1e-9, deadline=None, budget=BIG, shared=shared)
    assert shared.primal == 5.0 and shared.lower_bound == 4.0
    assert shared.records[-1].status == "interrupted"


def test_a_heuristic_method_gives_plans_not_bounds():
    calls: list[str] = []
    methods = [_method("greedy", Out(Termination.heuristic, 7.0, 6.0, "g"), calls, exact=False)]
    shared = run_portfolio(methods, rel_gap=0.0, deadline=None, budget=BIG)
    assert shared.primal == 7.0 and shared.lower_bound == -math.inf


def test_no_time_left_skips_methods():
    calls: list[str] = []
    methods = [_method("dp", Out(Termination.optimal, 1.0, 1.0, "p"), calls)]
    shared = run_portfolio(methods, rel_gap=0.0, deadline=0.0, budget=BIG, clock=lambda: 1.0)
    assert calls == [] and shared.records[0].status == "skipped"


def test_model_size_prices_nonzeros_and_lines():
    """The measured constants (benchmarks/memory/RESULTS.md) times the model's counts."""
    size = ModelSize(rows=1_000, cols=2_000, nonzeros=10_000)
    assert size.bytes() == pytest.approx(BYTES_PER_NONZERO * 10_000 + BYTES_PER_LINE * 3_000)
    assert 40 <= BYTES_PER_NONZERO <= 200 and 200 <= BYTES_PER_LINE <= 800   # the measured range
    assert "10,000 non-zeros" in size.describe()


def test_default_budget_is_a_stated_fraction_of_the_machine():
    budget = MemoryBudget.default()
    assert budget.bytes > 0 and ("machine" in budget.source)
    assert MemoryBudget.of(2.5).bytes == pytest.approx(2.5 * GIB)
    assert "--memory-limit 2.5 GiB" in MemoryBudget.of(2.5).describe()


def test_native_writes_to_stdout_go_to_stderr_inside_the_guard():
    code = ("import os, sys\n"
            "from autopar_opt.core.streams import stdout_to_stderr\n"
            "print('before', flush=True)\n"
            "with stdout_to_stderr():\n"
            "    os.write(1, b'native chatter\\n')\n"
            "    print('python chatter')\n"
            "print('after')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.split() == ["before", "after"]
    assert "native chatter" in proc.stderr and "python chatter" in proc.stderr
