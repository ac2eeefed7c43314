"""A fleet scenario whose search the sweep's --time-limit cut short is marked
``time_limited`` and not stored unless proven, as a plain scenario's is (QA round 35: the
fleet row had no mark, so its "no plan was found within the time limit" was stored and
served to every later run, however much time that one had)."""

from __future__ import annotations

import dataclasses

import pytest

import autopar_opt.capacity.run as run_module
from autopar_opt.capacity import load_sweep
from autopar_opt.capacity.run import run_sweep
from autopar_opt.capacity.store import ResultStore
from autopar_opt.capacity.worker import search_scenario
from support import paths

LIMIT_S = 0.001       # what a sweep's --time-limit may leave a scenario (the search's own: 30 s)


@pytest.mark.parametrize("name", ["tiny.yaml", "fleet.yaml"])
def test_a_scenario_cut_short_is_marked_and_stored_only_when_proven(tmp_path, monkeypatch, name):
    """Oracle: the plain scenario's route (tiny.yaml), which marks and keeps such rows out
    of the store; the fleet route (fleet.yaml: A100 and H100 groups) must do the same."""
    path = paths.DATA / "capacity" / name
    sweep = load_sweep(path)
    one = dataclasses.replace(sweep, scenarios=sweep.scenarios[-1:])
    rows = []

    def engine(_engine, tasks, _workers):
        for task in tasks:                        # as solve_scenario with a deadline close
            rows.append(search_scenario(task, LIMIT_S))
            yield rows[-1]

    monkeypatch.setattr(run_module, "run_engine", engine)
    with ResultStore(tmp_path / "store.sqlite") as store:
        run_sweep(one, store, "local", 1)
        (row,) = rows
        assert row.get("time_limited") is True
        proven = row["status"] in ("optimal", "infeasible")
        assert store.count() == (1 if proven else 0), row["status"]
