"""`place --searcher gdp|hp` on more devices than the per-node decoder tracks (63; QA round
12): the command printed one bare line, "error: k100: 100 devices; the per-node decoder
tracks at most 63", with no fix and, under --json, nothing on stdout. It is a refused
option now (exit 2), named, with the searchers that do take it, and JSON under --json.

Oracle: the decoder's limit (learn/place_graph.MAX_DEVICES) and the searcher it names
(gdp's block decoder), which runs on the same instance."""

from __future__ import annotations

import json

import pytest

from autopar_opt.learn.place_graph import MAX_DEVICES

pytest.importorskip("torch")

GRAPH = {"maxSizePerFPGA": 100, "maxFPGAs": MAX_DEVICES + 37, "maxCPUs": 0,
         "nodes": [{"id": i, "supportedOnFpga": 1, "cpuLatency": 1, "fpgaLatency": 1,
                    "isBackwardNode": 0, "size": 1} for i in range(3)],
         "edges": [{"sourceId": 0, "destId": 1, "cost": 1}, {"sourceId": 1, "destId": 2, "cost": 1}]}


@pytest.mark.parametrize("searcher", ["gdp", "hp"])
def test_the_refusal_is_an_option_error_with_a_fix(tmp_path, searcher):
    path = tmp_path / "g.json"
    path.write_text(json.dumps(GRAPH))
    from typer.testing import CliRunner

    from autopar_opt.cli.commands import app

    res = CliRunner().invoke(app, ["place", str(path), "--searcher", searcher, "--budget-s", "1",
                                   "--time-limit", "10", "--json"])
    assert res.exit_code == 2, res.output
    problem = json.loads(res.stdout)["error"]["problems"][0]
    assert problem["key"] == "--searcher" and problem["value"] == searcher
    assert f"track at most {MAX_DEVICES}" in problem["rule"] and "--decoder block" in problem["fix"]


def test_the_named_alternative_runs(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps(GRAPH))
    from typer.testing import CliRunner

    from autopar_opt.cli.commands import app

    res = CliRunner().invoke(app, ["place", str(path), "--searcher", "gdp", "--decoder", "block",
                                   "--budget-s", "1", "--time-limit", "10", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["searcher"]["feasible"]
