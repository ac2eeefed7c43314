"""A stop signal during `autopar place` still answers (issue 35 point 2): the exit code
is 128 + the signal, placement.json and the report are written, the JSON is printed,
and the bound stays valid. A placement that was still searching when the signal came
answers with no placement and the bound 0 (loads are non-negative), saying why."""

from __future__ import annotations

import json
import os
import signal

import pytest

from support.cli import first_json, run_cli
from support.signals import signalling_stub
from support.paths import DATA

BERT24 = DATA / "placement" / "throughput" / "LayerGraphs_bert24_inference.json"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_mid_search_still_writes_the_document(sig, tmp_path, monkeypatch):
    monkeypatch.setattr("autopar_opt.cli.place.solve_placement",
                        signalling_stub(sig, "the search"))
    out = tmp_path / "out"
    code, text = run_cli("place", BERT24, "--json", "--out", out)
    assert code == 128 + sig
    doc = json.loads((out / "placement.json").read_text())
    assert doc["status"] == "no_solution" and doc["lower_bound"] == 0.0
    assert f"interrupted by signal {int(sig)}" in doc["details"]["stopped"]
    assert (out / "report.html").stat().st_size > 0
    summary = first_json(text)      # stderr (the stopped line) follows it
    assert summary["status"] == "no_solution"


def test_without_a_signal_place_answers_as_before(tmp_path):
    code, text = run_cli("place", BERT24, "--json", "--out", tmp_path / "out")
    assert code == 0
    assert json.loads(text[text.index("{"):])["status"] == "optimal"


def test_a_search_that_returns_its_incumbent_after_the_signal_says_it_was_interrupted(
        tmp_path, monkeypatch):
    """The MILP asked to stop returns what it holds (status feasible): the document and
    the report say the run was interrupted (session 24: exit 143, and 'feasible' with
    the word 'interrupted' nowhere)."""
    from autopar_opt.placement.solve import solve_placement as real

    def stopped_search(*args, **kwargs):
        result = real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)     # the signal came while it was finishing
        return result
    monkeypatch.setattr("autopar_opt.cli.place.solve_placement", stopped_search)
    out = tmp_path / "out"
    code, text = run_cli("place", BERT24, "--out", out)
    assert code == 128 + signal.SIGTERM
    doc = json.loads((out / "placement.json").read_text())
    assert doc["details"]["stopped"].startswith(f"interrupted by signal {int(signal.SIGTERM)}")
    assert "why:          stopped: interrupted" in text
    assert "The run was interrupted" in (out / "report.html").read_text()
