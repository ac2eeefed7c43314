"""A scenario with a plan that its search did not prove says why (QA round 35: a sweep
whose Qwen3-235B scenarios hit solver.time_limit_s showed "feasible 28.05%" and nothing
else; their plan.json advised --time-limit, which in a sweep is the whole sweep's budget)."""

from __future__ import annotations

import io
import math

from rich.console import Console

from autopar_opt.capacity.worker import unproven_reason
from autopar_opt.cli.capacity import print_summary
from autopar_opt.ir.training import Schedule
from autopar_opt.search import SearchOptions
from autopar_opt.search.certificate import Certificate, ConfigRecord
from autopar_opt.search.configs import OuterConfig

OPTIONS = SearchOptions(solver="highs", time_limit_s=4.0, rel_gap=1e-3)


def _cert(open_bound: float) -> Certificate:
    """Incumbent 10 s (proven in its own configuration); a second configuration left at a
    bound of ``open_bound`` by the clock; a third pruned by its bound."""
    return Certificate([
        ConfigRecord(OuterConfig(1, 1, Schedule.one_f_one_b), "optimal", 10.0, 10.0, 1.0),
        ConfigRecord(OuterConfig(2, 2, Schedule.one_f_one_b), "not_solved", None, open_bound, 3.0),
        ConfigRecord(OuterConfig(2, 4, Schedule.one_f_one_b), "pruned", None, 12.0, 0.0)])


def test_a_scenario_its_time_limit_left_open_says_so():
    """Oracle: the certificate by hand: bound 8 s < 10 s x (1 - 0.001), one open."""
    cert = _cert(8.0)
    assert cert.gap > OPTIONS.rel_gap
    reason = unproven_reason("feasible", cert, OPTIONS, cut=False)
    assert "time limit of 4 s (base solver.time_limit_s) with 1 configuration(s) open" in reason
    assert "raise base.solver.time_limit_s" in reason and "--time-limit" not in reason
    cut = unproven_reason("feasible", cert, OPTIONS, cut=True)
    assert "what the sweep's --time-limit had left" in cut and "more --time-limit" in cut


def test_a_proven_scenario_has_no_such_reason():
    cert = _cert(9.995)          # within the gap of 0.1%: nothing open
    assert math.isclose(cert.lower_bound, 9.995)
    assert unproven_reason("optimal", cert, OPTIONS, cut=False) is None
    assert unproven_reason("infeasible", cert, OPTIONS, cut=False) is None


def test_the_terminal_says_why_a_scenario_is_not_proven():
    reason = unproven_reason("feasible", _cert(8.0), OPTIONS, cut=False)
    row = {"id": "gbs1024_seq4096", "status": "feasible", "gap": 0.2, "primal": 10.0,
           "time_to_train_days": [29.8, 41.4], "cost": [1.0, 2.0], "meets": "within the gap",
           "model_error": None, "reason": reason}
    doc = {"planning": {"prices": {"currency": "USD"}, "deadline_days": 30}, "scenarios": [row],
           "answers": {"requirement": "r", "cheapest_meeting_requirement": {"statement": "c"},
                       "fewest_gpus_per_device": {}, "pareto_time_cost": {"statement": "p"}},
           "run": {"computed": 1, "reused": 0, "store": "s"}, "wall_time_s": 1.0}
    buf = io.StringIO()
    print_summary(doc, Console(file=buf, width=400, color_system=None))
    assert f"not proven: gbs1024_seq4096: {reason}" in buf.getvalue()
