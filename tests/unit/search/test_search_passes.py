"""How the search spends its time (autopar_opt/search/engine.py): the first pass gives no
configuration more than the first one solved, the second pass goes best first with
doubling. Oracle: a fake clock and fake solves whose outcome depends only on the time
given, so the sequence of (configuration, time) the engine chooses is hand-derived."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from autopar_opt.core.bounds import Status
from autopar_opt.cost.params import default_params
from autopar_opt.ir.training import Recompute, SearchSpace, Training
from autopar_opt.model_zoo.synthetic import random_chain, small_cluster
from autopar_opt.search import engine
from autopar_opt.search.certificate import ConfigRecord
from autopar_opt.search.engine import Search, SearchOptions

SPACE = SearchSpace(zero_levels=(0, 3), recompute=(Recompute.none, Recompute.full))


def _search() -> Search:
    return Search(random_chain(5, 10), small_cluster(1, 4), Training(global_batch_size=16,
                                                                      seq_len=1024),
                  SPACE, default_params(), SearchOptions(solver="highs", time_limit_s=60,
                                                         rel_gap=1e-9))


def _fake(search: Search, clock: list[float], need: dict[int, float], calls: list):
    """solve(k, share): closes configuration k at value 10 when share >= need[k] (spending
    need[k]); otherwise spends the whole share and proves nothing new."""
    def solve(k, share):
        calls.append((k, round(share, 6)))
        cfg = search.prepared[k][0]
        old = search.records[k] if k < len(search.records) else None
        if share >= need.get(k, 0.0):
            clock[0] -= need.get(k, 0.0)
            return ConfigRecord(cfg, Status.optimal, 10.0, 10.0, need.get(k, 0.0))
        clock[0] -= share
        return ConfigRecord(cfg, Status.feasible, old.primal, old.lower_bound, share)
    return solve


def test_second_pass_retries_the_lowest_bound_with_doubled_time_first(monkeypatch):
    """Four open configurations (bounds 8, 9, 9.5, 9.8 under an incumbent of 10), 30 s
    left, each given 1 s by the first pass; the lowest needs 9 s. Equal shares (before)
    gave it 7.5 s once and moved on, leaving the certificate at bound 8. Best first with
    doubling: 7.5 s (= max(2 x 1, 30/4)), then max(2 x 7.5, 22.5/4) = 15 s, which closes
    it (9 s spent, 13.5 s left), then the next lowest: max(2 x 1, 13.5/3) = 4.5 s."""
    search = _search()
    assert len(search.prepared) >= 4
    bounds = [8.0, 9.0, 9.5, 9.8]
    search.records = [ConfigRecord(search.prepared[k][0], Status.feasible, 12.0, lb, 1.0)
                      for k, lb in enumerate(bounds)]
    search.best = (SimpleNamespace(iteration_time_s=10.0), None, None)
    clock, calls = [30.0], []
    monkeypatch.setattr(search, "remaining_s", lambda: clock[0])
    monkeypatch.setattr(search, "solve", _fake(search, clock, {0: 9.0, 1: 1.0, 2: 1.0, 3: 1.0},
                                               calls))
    search.second_pass()
    assert calls[:3] == [(0, 7.5), (0, 15.0), (1, 4.5)]
    assert search.records[0].status is Status.optimal
    # every attempt counted: the first pass's 1 s, the failed 7.5 s, the closing 9 s
    assert search.records[0].time_s == pytest.approx(1.0 + 7.5 + 9.0)
    assert "left over" in search.records[0].message
    assert all(r.status is Status.optimal for r in search.records)


def test_an_attempt_that_stops_early_with_nothing_new_is_not_repeated(monkeypatch):
    """A configuration whose solver returns at once with the same bound (more time would
    not change it) is tried once and left; its record counts the attempt's time."""
    search = _search()
    search.records = [ConfigRecord(search.prepared[0][0], Status.feasible, 12.0, 8.0, 1.0)]
    search.best = (SimpleNamespace(iteration_time_s=10.0), None, None)
    clock, calls = [30.0], []
    monkeypatch.setattr(search, "remaining_s", lambda: clock[0])

    def solve(k, share):
        calls.append((k, share))
        clock[0] -= 0.5
        return ConfigRecord(search.prepared[k][0], Status.feasible, 12.0, 8.0, 0.5)
    monkeypatch.setattr(search, "solve", solve)
    search.second_pass()
    assert calls == [(0, 30.0)]
    assert search.records[0].time_s == pytest.approx(1.5)


def test_first_pass_gives_no_configuration_more_than_the_first_one_solved(monkeypatch):
    """_time_share grows as later configurations are pruned (here: 2, 3, 4, ... s); the
    first pass caps each at the first solved configuration's 2 s, so what the pruning
    frees is left to the second pass."""
    search = _search()
    n = len(search.prepared)
    shares = iter(2.0 + i for i in range(n))
    monkeypatch.setattr(engine, "_time_share", lambda remaining, rest, below: next(shares))
    given = []

    def solve(k, share):
        given.append(share)
        return ConfigRecord(search.prepared[k][0], Status.optimal, 10.0 + k, 10.0 + k, 0.0)
    monkeypatch.setattr(search, "solve", solve)
    monkeypatch.setattr(search, "tighten", lambda k: None)
    search.best = None
    search.first_pass()
    assert given[0] == 2.0 and len(given) == n and max(given) == 2.0
