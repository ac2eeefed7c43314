"""A search the time limit ends above the requested gap says plainly that more
time would close it, with an estimate from its own solve rates (issue 29,
"time that adapts"). Oracle: hand-made certificates whose open and closed
configurations and times give the estimate by hand."""

from __future__ import annotations

import math
from dataclasses import replace

from autopar_opt.core.bounds import Status
from autopar_opt.cost.params import default_params
from autopar_opt.ir.training import Schedule, SearchSpace, Training
from autopar_opt.model_zoo.registry import build_model, get_cluster
from autopar_opt.search.certificate import Certificate, ConfigRecord
from autopar_opt.search.configs import OuterConfig
from autopar_opt.search.document import more_time, notices
from autopar_opt.search.engine import SearchOptions, run_search

GRAPH = build_model("debug-moe", overrides={"num_layers": 2})
CLUSTER = get_cluster("debug-2x4")
TRAINING = Training(global_batch_size=8, seq_len=128)


def _result(records):
    res = run_search(GRAPH, CLUSTER, TRAINING, SearchSpace(pp_degrees=(1,), microbatches=(1,)),
                     default_params(), SearchOptions(solver="dp", time_limit_s=30, rel_gap=0.0))
    return replace(res, certificate=Certificate(records))


def _rec(pp, c, status, primal, lower, t):
    return ConfigRecord(OuterConfig(pp, c, Schedule.one_f_one_b), Status(status), primal, lower, t)


def test_the_limit_ending_above_the_gap_gives_an_estimate_of_the_time_needed():
    records = [_rec(1, 1, "optimal", 10.0, 10.0, 2.0),       # closed: 2, 4, 6 s (median 4)
               _rec(1, 2, "optimal", 11.0, 11.0, 4.0),
               _rec(1, 4, "infeasible", None, math.inf, 6.0),
               _rec(2, 1, "feasible", 10.5, 8.0, 9.0),        # open: max(9, 4) + max(1, 4)
               _rec(2, 2, "not_solved", None, 9.0, 1.0),
               _rec(2, 4, "pruned", None, 10.0, 0.0)]         # bound reaches the incumbent
    options = SearchOptions(solver="dp", time_limit_s=60, rel_gap=0.01)
    res = _result(records)
    text = more_time(res, options)
    assert text.startswith("More time would close the gap: 2 configuration(s) keep it open")
    assert "the least 8 s at pp=2 c=1 1f1b" in text
    assert "they had 10 s in all" in text and "median of 4 s" in text
    assert "about 13 s more search time, i.e. --time-limit 73 or more" in text
    assert text in notices(res, options)


def test_no_estimate_when_the_gap_is_met_or_the_search_was_interrupted():
    closed = [_rec(1, 1, "optimal", 10.0, 9.95, 2.0), _rec(2, 1, "pruned", None, 10.0, 0.0)]
    options = SearchOptions(solver="dp", time_limit_s=60, rel_gap=0.01)
    assert more_time(_result(closed), options) is None
    open_ = [_rec(1, 1, "optimal", 10.0, 10.0, 2.0), _rec(2, 1, "feasible", 10.5, 8.0, 9.0)]
    assert more_time(replace(_result(open_), interrupted_by=2), options) is None


def test_a_gap_left_by_a_solver_tolerance_is_not_sent_to_more_time():
    """QA round 5 (W1): every configuration closed (Gurobi's MIQP stopped at its own
    tolerance, 1.66e-6 against the requested 1e-6), and the note said "configurations open"
    and "raise --time-limit", which cannot help."""
    records = [_rec(1, 1, "optimal", 10.0, 10.0 * (1 - 1.66e-6), 2.0),
               _rec(2, 1, "pruned", None, 10.0, 0.0)]
    options = SearchOptions(solver="dp", time_limit_s=60, rel_gap=1e-6)
    said = " ".join(notices(_result(records), options))
    assert "every configuration is closed" in said and "own tolerance" in said
    assert "open" not in said.split("though")[0] and "raise --time-limit" not in said


def test_no_solve_time_to_estimate_from_suggests_a_larger_limit():
    """QA round 9: with no configuration solved the estimate was "about 0 s more search
    time, i.e. --time-limit 2 or more", the limit that had just run out; the least bound is
    taken over the configurations that have one ("the least none" before)."""
    records = [_rec(1, 1, "not_solved", None, -math.inf, 0.0),
               _rec(2, 1, "feasible", 10.5, 8.0, 0.0),
               _rec(2, 2, "not_solved", None, -math.inf, 0.0)]
    options = SearchOptions(solver="dp", time_limit_s=2, rel_gap=0.01)
    text = more_time(_result(records), options)
    assert "3 configuration(s) keep it open (1 with a proven bound, the least 8 s at pp=2 c=1" in text
    assert "no rate to estimate from; try --time-limit 12 or more" in text
    assert "about 0 s" not in text and "the least none" not in text
