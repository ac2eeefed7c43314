"""The searchers' budget clock: wall time by default, the process's CPU time on request.

Benchmarks on a shared machine measure learned searchers on the CPU clock so that each run
gets an idle core's compute; these tests check that the budget really follows that clock
(a fake clock decides when the budget ends) and that the CPU clock excludes sleeping.
"""

from __future__ import annotations

import time

import pytest

from autopar_opt.learn import base


@pytest.fixture
def restore_clock():
    saved = base.CLOCK
    yield
    base.CLOCK = saved


def test_the_default_clock_is_wall_time(restore_clock) -> None:
    t0 = base.clock()
    time.sleep(0.05)
    assert base.clock() - t0 >= 0.04


def test_the_budget_ends_when_the_clock_says_so(restore_clock) -> None:
    now = [100.0]
    base.CLOCK = lambda: now[0]
    tracker = base.Tracker(budget_s=5.0)
    assert not tracker.done()
    now[0] = 104.9
    assert not tracker.done()
    now[0] = 105.0
    assert tracker.done()
    assert tracker.elapsed() == pytest.approx(5.0)


def test_the_cpu_clock_does_not_count_sleep(restore_clock) -> None:
    base.use_cpu_clock()
    assert base.CLOCK is time.process_time
    tracker = base.Tracker(budget_s=0.2)
    time.sleep(0.3)
    assert not tracker.done()          # sleeping used no CPU: the budget is not spent
    assert tracker.elapsed() < 0.2
