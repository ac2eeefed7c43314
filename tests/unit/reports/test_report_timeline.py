"""The simulated pipeline timeline (reports/timeline.py) and layer-run collapsing.

Oracles: for equal stage times ``p`` and no transfers, GPipe and 1F1B both
finish after ``(pp + c - 1)·p`` (each stage does ``c`` forwards and ``c``
backwards; the first micro-batch needs ``pp`` forward+backward hops), which
is also :func:`pipeline_latency` without sync. Dependencies and the 1F1B
memory property (stage ``i`` never holds more than ``pp - i`` micro-batches)
are checked op by op on random instances.
"""

from __future__ import annotations

import random

import pytest

from autopar_opt.cost.evaluate import pipeline_latency
from autopar_opt.reports.sections import collapse_runs
from autopar_opt.reports.timeline import idle_time, makespan, simulate, stage_order
from autopar_opt.ir.training import Schedule


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("pp,c", [(1, 1), (1, 4), (2, 4), (4, 8), (3, 2), (4, 3)])
def test_uniform_stages_match_closed_form(schedule, pp, c):
    p, g = 0.3, 0.05
    ops = simulate([p] * pp, [0.0] * (pp - 1), [g] * pp, c, schedule)
    expected = pipeline_latency([p] * pp, [0.0] * (pp - 1), [g] * pp, c, Schedule(schedule))
    assert makespan(ops) == pytest.approx((pp + c - 1) * p + g)
    assert makespan(ops) == pytest.approx(expected)
    # bubble of every stage: (pp - 1)·p, the classic fill + drain
    for i in range(pp):
        assert idle_time(ops, i) == pytest.approx((pp - 1) * p)


def _by_key(ops):
    return {(op.kind, op.stage, op.microbatch): op for op in ops}


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_dependencies_and_shares_hold(seed, schedule):
    rng = random.Random(seed)
    pp, c = rng.randint(1, 5), rng.randint(1, 7)
    p = [rng.uniform(0.1, 1.0) for _ in range(pp)]
    o = [rng.uniform(0.0, 0.2) for _ in range(pp - 1)]
    ops = simulate(p, o, [0.0] * pp, c, schedule)
    ops_of = _by_key(ops)
    for i in range(pp):
        mine = sorted((op for op in ops if op.stage == i and op.kind in "FB"), key=lambda x: x.start)
        assert len(mine) == 2 * c
        for a, b in zip(mine, mine[1:]):
            assert b.start >= a.end - 1e-12            # a stage runs one op at a time
        for m in range(c):
            f, b = ops_of[("F", i, m)], ops_of[("B", i, m)]
            assert f.end - f.start == pytest.approx(p[i] / 3)
            assert b.end - b.start == pytest.approx(2 * p[i] / 3)
            assert b.start >= f.end - 1e-12
            if i > 0:   # forward input arrives after the previous stage + half the transfer
                assert f.start >= ops_of[("F", i - 1, m)].end + o[i - 1] / 2 - 1e-12
            if i < pp - 1:
                assert b.start >= ops_of[("B", i + 1, m)].end + o[i] / 2 - 1e-12


@pytest.mark.parametrize("pp,c", [(4, 8), (3, 2), (2, 5)])
def test_1f1b_keeps_at_most_pp_minus_i_in_flight(pp, c):
    for i in range(pp):
        live = peak = 0
        for kind, _ in stage_order("1f1b", pp, i, c):
            live += 1 if kind == "F" else -1
            peak = max(peak, live)
        assert peak == min(pp - i, c)
    gpipe = stage_order("gpipe", pp, 0, c)
    assert gpipe[:c] == [("F", m) for m in range(c)]


def test_simulate_rejects_inconsistent_lengths():
    with pytest.raises(ValueError, match="2 stages need 1 transfer times"):
        simulate([1.0, 1.0], [], [0.0, 0.0], 2, "1f1b")
    with pytest.raises(ValueError, match="at least one stage"):
        simulate([1.0], [], [0.0], 0, "1f1b")


def test_collapse_runs_groups_consecutive_equal_strategies():
    runs = collapse_runs(["embed", "b0", "b1", "b2", "head"], ["x", "y", "y", "y", "x"])
    assert [(r["first"], r["last"], r["count"], r["label"]) for r in runs] == [
        ("embed", "embed", 1, "x"), ("b0", "b2", 3, "y"), ("head", "head", 1, "x")]
