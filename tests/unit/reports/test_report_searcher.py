"""The searcher block of the HTML reports (issue 14): `autopar place|solve --searcher ... --out`.

Oracle: the JSON document the same command writes (placement.json / plan.json),
whose searcher value is checked against the independent evaluator elsewhere
(test_searchers_placement.py, test_cli.py); here every figure of that block must
appear in report.html, with the trace plot and table, and a report without a
searcher must have no searcher section.
"""

from __future__ import annotations

import json
import re

from typer.testing import CliRunner

from autopar_opt.cli.commands import app
from autopar_opt.reports.placement import render_placement_html
from autopar_opt.reports.searcher import TRACE_ROWS, searcher_context
from support import paths

ROOT = paths.REPO
BERT24 = ROOT / "tests" / "data" / "placement" / "throughput" / "LayerGraphs_bert24_inference.json"


def _section(html: str) -> str:
    m = re.search(r'<section id="searcher">(.*?)</section>', html, re.S)
    assert m, "no searcher section in report.html"
    return m.group(1)


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def test_place_report_shows_the_searcher_block(tmp_path):
    result = CliRunner().invoke(app, ["place", str(BERT24), "--searcher", "anneal", "--budget-s", "1",
                                      "--seed", "3", "--out", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "placement.json").read_text())
    block = doc["searcher"]
    sec = _section((tmp_path / "report.html").read_text())
    assert "Searcher: anneal (seed 3)" in sec
    assert _fmt(block["value"]) in sec and _fmt(block["lower_bound"]) in sec
    assert f"{100 * block['gap']:.4g}%" in sec
    assert doc["status"] == "optimal" and _fmt(block["optimum"]) in sec    # proven here
    assert f"{block['ratio_to_optimum']:.4f}x" in sec
    assert "<svg" in sec and "wall time (s)" in sec
    rows = re.findall(r"<tr><td class=\"num\">", sec)
    assert 1 <= len(rows) <= TRACE_ROWS
    last = block["trace"][-1]
    assert _fmt(last["best"]) in sec                 # the final trace point is a row


def test_solve_report_shows_the_searcher_block(tmp_path):
    result = CliRunner().invoke(app, ["solve", str(ROOT / "examples" / "quickstart.yaml"),
                                      "--searcher", "random", "--budget-s", "0.5", "--seed", "1",
                                      "--out", str(tmp_path), "--quiet"])
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "plan.json").read_text())
    block = doc["searcher"]
    sec = _section((tmp_path / "report.html").read_text())
    assert "Searcher: random (seed 1)" in sec
    assert _fmt(block["value"]) in sec and _fmt(block["lower_bound"]) in sec
    assert f"{100 * block['gap']:.4g}%" in sec
    assert f"pp = {block['plan']['pp']}" in sec
    if block["optimum"] is not None:
        assert _fmt(block["optimum"]) in sec and "proven" in sec
    assert "<svg" in sec


def test_no_searcher_no_section_and_unproven_optimum_is_said():
    doc = {"instance": "x", "num_nodes": 1, "num_edges": 0, "devices_text": "1 device",
           "objective": "max-load", "contiguous": True, "method": "dp", "wall_time_s": 0.1,
           "value": 2.0, "lower_bound": 1.0, "gap": 0.5, "status": "feasible", "devices": [],
           "baselines": []}
    assert 'id="searcher"' not in render_placement_html(doc)
    doc["searcher"] = {"name": "anneal", "seed": 0, "value": 2.5, "wall_time_s": 1.0, "samples": 10,
                       "trace": [{"wall_s": 0.1, "samples": 1, "best": 3.0},
                                 {"wall_s": 0.5, "samples": 5, "best": 2.5}],
                       "lower_bound": 1.0, "gap": 0.6, "optimum": None, "ratio_to_optimum": None,
                       "plan": {"assignment": [0]}}
    sec = _section(render_placement_html(doc))
    assert "did not prove an optimum" in sec and "60%" in sec and "devices used: 1" in sec
    ctx = searcher_context({**doc["searcher"], "value": None, "gap": None, "trace": []})
    assert not ctx["found"] and ctx["trace_svg"] is None and ctx["gap_text"] == "—"
