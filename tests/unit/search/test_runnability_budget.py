"""The free space's search behind the price of runnability is a side figure: it gets
at most FREE_FACTOR x the runnable search's own time, at least FREE_MIN_S, within the
time left (autopar_opt.search.runnable.price_of_runnability)."""

from __future__ import annotations

import pytest

from autopar_opt.cost.params import default_params
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training
from autopar_opt.model_zoo.registry import build_model, get_cluster
from autopar_opt.search import runnable
from autopar_opt.search.engine import SearchOptions, run_search

GRAPH = build_model("debug", overrides={"num_layers": 2})
CLUSTER = get_cluster("debug-2x4")
TRAINING = Training(global_batch_size=8, seq_len=128)
SPACE = SearchSpace(pp_degrees=(1, 2), tp_degrees=(1, 2), zero_levels=(0, 1),
                    recompute=(Recompute.none,), schedules=(Schedule.one_f_one_b,),
                    microbatches=(1, 2))


@pytest.mark.parametrize("left,took,given", [
    (60.0, 0.5, runnable.FREE_MIN_S),                    # a quick proof: the floor
    (60.0, 20.0, 20.0 * runnable.FREE_FACTOR),           # a long one: its own time
    (3.0, 20.0, 3.0),                                    # never past what the limit leaves
    (60.0, None, 60.0),                                  # no runnable time given: all that is left
])
def test_the_free_search_gets_its_budget(left, took, given, monkeypatch):
    space = runnable.runnable_space(SPACE, "megatron")
    options = SearchOptions(solver="dp", time_limit_s=60, rel_gap=0.0)
    res = run_search(GRAPH, CLUSTER, TRAINING, space, default_params(), options)
    seen = []
    real = runnable.run_search

    def spy(*args, **kwargs):
        seen.append(args[5].time_limit_s)
        return real(*args, **kwargs)
    monkeypatch.setattr(runnable, "run_search", spy)
    price = runnable.price_of_runnability(res, GRAPH, CLUSTER, TRAINING, space, default_params(),
                                          options, left, target_time_s=took)
    assert seen == [pytest.approx(given)]
    assert price.free_status == "optimal" and price.note == ""   # this small space closes


def test_a_capped_free_search_that_does_not_close_says_so(monkeypatch):
    space = runnable.runnable_space(SPACE, "megatron")
    options = SearchOptions(solver="dp", time_limit_s=60, rel_gap=0.0)
    res = run_search(GRAPH, CLUSTER, TRAINING, space, default_params(), options)
    real = runnable.run_search

    def stopped_at_once(graph, cluster, training, space, params, opts, *a, **k):
        out = real(graph, cluster, training, space, params, opts, *a, **k)
        # as if the search had been cut: its bound below its plan
        out.certificate.configurations[0].lower_bound = 0.0
        return out
    monkeypatch.setattr(runnable, "run_search", stopped_at_once)
    price = runnable.price_of_runnability(res, GRAPH, CLUSTER, TRAINING, space, default_params(),
                                          options, 60.0, target_time_s=0.1)
    assert price.free_status != "optimal"
    assert price.note.startswith(f"the free space's search was given {runnable.FREE_MIN_S:g} s")
