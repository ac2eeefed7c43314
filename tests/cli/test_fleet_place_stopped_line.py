"""A fleet solve and ``autopar place`` stopped by a signal say so in one line under
``--quiet`` (and ``--json``), as a solve on one cluster does (QA round 35): before, both
exited 130/143 with nothing on stderr (QA round 36), the result written with no word of it.

Oracle: the line a solve on one cluster prints
(tests/cli/test_signal_outside_search.py), with the fleet's plan.json and place's
placement.json in it, and the status those files record."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import signal
import time

import pytest
import yaml

from autopar_opt.core.interrupts import SearchInterrupted
from support.cli import run_cli
from support.fleets import TINY_MIX_CLUSTER
from support.paths import DATA

BERT24 = DATA / "placement" / "throughput" / "LayerGraphs_bert24_inference.json"
FLEET = {"model": {"zoo": "debug"}, "cluster": copy.deepcopy(TINY_MIX_CLUSTER),
         "training": {"global_batch_size": 16},
         "search": {"zero_levels": [0], "recompute": ["none"]},
         "solver": {"name": "dp", "time_limit_s": 60, "rel_gap": 0.001}}


def _signal_after(real, sig: int, stopped):
    """``real``, then ``sig`` sent to this process, caught as a search catches it; the
    result as ``stopped(result, signum)`` makes it (what the search returns when stopped)."""
    def run(*args, **kwargs):
        result = real(*args, **kwargs)
        try:
            os.kill(os.getpid(), sig)
            time.sleep(30)                      # the guard's handler raises here
        except SearchInterrupted as exc:
            return stopped(result, exc.signum)
        pytest.fail("the stop signal was not raised")
    return run


@pytest.mark.parametrize("flag", ["--quiet", "--json"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_fleet_solve_stopped_says_it_in_one_line(tmp_path, monkeypatch, sig, flag):
    import autopar_opt.search.mixed as mixed

    monkeypatch.setattr(mixed, "run_fleet_search", _signal_after(
        mixed.run_fleet_search, sig,
        lambda result, signum: dataclasses.replace(result, interrupted_by=signum)))
    spec = tmp_path / "fleet.yaml"
    spec.write_text(yaml.safe_dump(FLEET))
    out = tmp_path / "out"
    code, text = run_cli("solve", spec, "--out", out, flag)
    assert code == 128 + sig, text
    doc = json.loads((out / "plan.json").read_text())
    assert doc["status"] == "interrupted" and "fleet" in doc
    line = (f"autopar: stopped by {sig.name} (exit {128 + sig}); the search's result, status "
            f"interrupted, is in {out / 'plan.json'}")
    assert line in text


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_placement_stopped_says_it_in_one_line(tmp_path, monkeypatch, sig):
    import autopar_opt.cli.place as place

    monkeypatch.setattr(place, "solve_placement",
                        _signal_after(place.solve_placement, sig, lambda result, _s: result))
    out = tmp_path / "out"
    code, text = run_cli("place", BERT24, "--out", out, "--quiet")
    assert code == 128 + sig, text
    doc = json.loads((out / "placement.json").read_text())
    line = (f"autopar: stopped by {sig.name} (exit {128 + sig}); the placement's result, "
            f"status {doc['status']}, is in {out / 'placement.json'}")
    assert line in text
    assert set(text.splitlines()) == {line}, text     # that line alone (the runner may
    # repeat stderr after the output)
