"""A crash in the solver's native code fails one solve, not the command
(solvers/isolate.py): the work runs in a forked child; its value, its
exception, its death by a signal and a stop request relayed from a signal the
parent catches, each checked here; and the HiGHS backend's retry without presolve
after a crash."""

from __future__ import annotations

import os
import signal
import threading
import time

import pyomo.environ as pyo
import pytest

from autopar_opt.core.interrupts import InterruptGuard
from autopar_opt.core.result import ProblemClass, Termination
from autopar_opt.solvers import highs as highs_module
from autopar_opt.solvers.isolate import SolverCrashed, isolation_enabled, run_forked
from autopar_opt.solvers.registry import get_backend

pytestmark = pytest.mark.skipif(not isolation_enabled(), reason="no fork on this system")


def test_value_and_exception_come_back():
    assert run_forked(lambda stop: {"x": 41 + 1, "pid": os.getpid()}, "work")[0]["x"] == 42
    assert run_forked(lambda stop: os.getpid(), "work")[0] != os.getpid()   # another process

    def fails(stop):
        raise ValueError("bad model")
    with pytest.raises(RuntimeError, match="ValueError: bad model"):
        run_forked(fails, "work")


def test_a_child_killed_by_a_signal_is_a_crash_not_a_dead_parent():
    def segfaults(stop):
        os.kill(os.getpid(), signal.SIGSEGV)
    with pytest.raises(SolverCrashed, match=r"HiGHS crashed in its child process \(SIGSEGV\)"):
        run_forked(segfaults, "HiGHS")


def test_a_stop_signal_caught_by_the_parent_reaches_the_child():
    """Ctrl-C while the child works: the parent's guard raises SearchInterrupted,
    run_forked sets the shared byte, the child's stop_requested() sees it and
    returns; the parent reports interrupted=True and the child's own value."""
    def waits(stop):
        end = time.monotonic() + 20
        while not stop() and time.monotonic() < end:
            time.sleep(0.01)
        return "stopped" if stop() else "timed out"

    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    with InterruptGuard() as guard:
        timer.start()
        value, interrupted = run_forked(waits, "work")
    assert guard.signum == signal.SIGINT
    assert (value, interrupted) == ("stopped", True)


def _model():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(domain=pyo.NonNegativeIntegers, bounds=(0, 3))
    m.y = pyo.Var(domain=pyo.NonNegativeIntegers, bounds=(0, 3))
    m.c = pyo.Constraint(expr=m.x + 2 * m.y >= 3.5)
    m.obj = pyo.Objective(expr=2 * m.x + 3 * m.y)
    return m


def test_highs_solves_in_a_child_and_loads_the_values():
    """min 2x + 3y, x + 2y >= 3.5, x, y integer in [0, 3]: (0, 2) costs 6, (2, 1) 7,
    (1, 2) 8: the optimum 6, its values loaded into the Pyomo variables."""
    m = _model()
    res = get_backend("highs").solve_model(m, ProblemClass.milp, time_limit_s=10, rel_gap=1e-9)
    assert res.termination is Termination.optimal and res.primal == pytest.approx(6.0)
    assert (pyo.value(m.x), pyo.value(m.y)) == (pytest.approx(0.0), pytest.approx(2.0))


def test_highs_retries_without_presolve_after_a_crash(monkeypatch):
    """The first child dies (SIGSEGV) unless presolve is off; the backend solves
    again without presolve and says so in the result's message."""
    real = highs_module._solve

    def crashes_with_presolve(form, time_limit_s, rel_gap, warm_start, options, version, stop):
        if options.get("presolve") != "off":
            os.kill(os.getpid(), signal.SIGSEGV)
        return real(form, time_limit_s, rel_gap, warm_start, options, version, stop)
    monkeypatch.setattr(highs_module, "_solve", crashes_with_presolve)
    res = get_backend("highs").solve_model(_model(), ProblemClass.milp, time_limit_s=10,
                                           rel_gap=1e-9)
    assert res.primal == pytest.approx(6.0)
    assert "HiGHS crashed in its child process (SIGSEGV); solved again without presolve" \
        in res.message

    def always_crashes(*args):
        os.kill(os.getpid(), signal.SIGSEGV)
    monkeypatch.setattr(highs_module, "_solve", always_crashes)
    with pytest.raises(SolverCrashed):
        get_backend("highs").solve_model(_model(), ProblemClass.milp, time_limit_s=10,
                                         rel_gap=1e-9)


def test_a_child_past_its_deadline_is_stopped():
    """A child that has not answered by its deadline is killed and SolverTimedOut raised
    (the work would sleep 60 s: without the kill this test would return its value); a
    child that answers in time is unaffected by the deadline."""
    from autopar_opt.solvers.isolate import SolverTimedOut

    with pytest.raises(SolverTimedOut, match=r"HiGHS had not answered 0.3 s after it started"):
        run_forked(lambda stop: time.sleep(60) or "late", "HiGHS", deadline_s=0.3)
    assert run_forked(lambda stop: "on time", "work", deadline_s=30.0)[0] == "on time"


def test_highs_past_its_time_limit_returns_no_plan_and_says_why(monkeypatch):
    """HiGHS's root cut separation does not check its time limit (benchmarks/runnable:
    8.4 s past a 20 s limit): the backend stops the child at the limit plus the grace
    (highs.deadline_s) and answers 'time limit, no solution' with the reason."""
    assert highs_module.deadline_s(20.0) == pytest.approx(21.5)     # 1.5 s grace
    assert highs_module.deadline_s(100.0) == pytest.approx(105.0)   # 5% of the limit
    assert highs_module.deadline_s(None) is None

    def overruns(form, time_limit_s, rel_gap, warm_start, options, version, stop):
        time.sleep(60)
    monkeypatch.setattr(highs_module, "_solve", overruns)
    monkeypatch.setattr(highs_module, "DEADLINE_GRACE_S", 0.2)
    res = get_backend("highs").solve_model(_model(), ProblemClass.milp, time_limit_s=0.1,
                                           rel_gap=1e-9)
    assert res.termination is Termination.time_limit_no_solution and res.primal is None
    assert res.lower_bound == float("-inf")
    assert "ran past its time limit of 0.1 s" in res.message
