"""``report_command`` (``autopar report plan.json -o report.html``), escaping and self-containment.

Escaping oracle: a model named ``<script>alert(1)</script>`` must appear only
as the escaped text ``&lt;script&gt;...``; the report must contain no
``<script>`` element at all, no external URL (``src=``/``href=``/``url(``)
and no ``<link>``/``<img>``/``<iframe>`` that could fetch anything.
"""

from __future__ import annotations

import json
import re

import pytest

from autopar_opt.cli.report import report_command
from autopar_opt.reports.render import render_html, write_report
from support import paths

DATA = paths.DATA / "report"
EVIL = "<script>alert(1)</script>"


def load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def test_user_text_is_escaped():
    doc = load("plan_feasible.json")
    doc["spec"]["model"]["name"] = EVIL
    doc["spec"]["cluster"]["name"] = '"><img src=x onerror=alert(2)>'
    doc["plan"]["stages"][0]["layers"][0] = "<b>embed</b>"
    doc["baselines"][2]["note"] = "<iframe src='http://evil'></iframe>"
    html = render_html(doc)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script" not in html.lower()
    assert "<img" not in html.lower() and "<iframe" not in html.lower()
    assert "&lt;b&gt;embed&lt;/b&gt;" in html and "<b>embed" not in html


@pytest.mark.parametrize("fixture", ["plan_feasible.json", "plan_infeasible.json"])
def test_report_is_self_contained(fixture):
    html = render_html(load(fixture))
    lower = html.lower()
    assert "<script" not in lower and "<link" not in lower and "@import" not in lower
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:|//|file:)""", lower)
    assert all(ref.startswith("#") for ref in re.findall(r"url\(([^)]*)\)", lower))  # local clip paths
    # SVG namespaces are identifiers, not fetches; nothing else may name a URL
    assert set(re.findall(r"https?://[^\s\"'<>]+", html)) <= {
        "http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink",
        "http://purl.org/dc/elements/1.1/", "http://creativecommons.org/ns#",
        "http://www.w3.org/1999/02/22-rdf-syntax-ns#"}


def test_feasible_report_has_every_section_in_order():
    html = render_html(load("plan_feasible.json"))
    ids = re.findall(r'<section id="([a-z]+)"', html)
    assert ids == ["answer", "plan", "certificate", "space", "timeline", "memory", "baselines", "solver"]
    assert html.count("<svg") == 2
    assert "embed</code>: dp4·tp1" in html
    assert "block000–block007</code>: dp4·tp1·rc-selective" in html
    assert "forward 1/3 and backward 2/3" in html
    assert 'class="min-bound"' in html and html.count('class="min-bound"') == 1


def test_report_command_writes_the_file(tmp_path, capsys):
    out = tmp_path / "report.html"
    assert report_command(str(DATA / "plan_feasible.json"), str(out)) == 0
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert list(tmp_path.iterdir()) == [out]          # no temp file left behind


def _run_bad(tmp_path, capsys, content: str | None, name: str = "plan.json"):
    src = tmp_path / name
    if content is not None:
        src.write_text(content)
    out = tmp_path / "report.html"
    rc = report_command(str(src), str(out))
    err = capsys.readouterr().err
    assert rc == 2
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == ([name] if content is not None else [])
    assert str(src) in err
    return err


def test_missing_file(tmp_path, capsys):
    assert "does not exist" in _run_bad(tmp_path, capsys, None)


def test_malformed_json(tmp_path, capsys):
    err = _run_bad(tmp_path, capsys, '{"schema_version": 1,')
    assert "JSON syntax error at line 1" in err


def test_missing_keys_named(tmp_path, capsys):
    doc = load("plan_feasible.json")
    del doc["certificate"]
    del doc["baselines"]
    err = _run_bad(tmp_path, capsys, json.dumps(doc))
    assert "missing key 'certificate'" in err and "missing key 'baselines'" in err


def test_not_an_object(tmp_path, capsys):
    assert "must be a JSON object" in _run_bad(tmp_path, capsys, "[1, 2]")


def test_bad_strategy_named(tmp_path, capsys):
    doc = load("plan_feasible.json")
    doc["plan"]["stages"][1]["strategies"][0]["recompute"] = "sometimes"
    err = _run_bad(tmp_path, capsys, json.dumps(doc))
    assert "plan.stages[1].strategies[0]" in err


def test_unwritable_output(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    rc = report_command(str(DATA / "plan_feasible.json"), str(tmp_path / "afile" / "r.html"))
    err = capsys.readouterr().err
    assert rc == 2 and "--out = " in err and "is a file, not a directory" in err
    assert (tmp_path / "afile").read_text() == "x"
    rc = report_command(str(DATA / "plan_feasible.json"), str(tmp_path))
    assert rc == 2 and "is a directory" in capsys.readouterr().err


def test_missing_output_folders_are_created(tmp_path):
    out = tmp_path / "no" / "such" / "r.html"
    assert report_command(str(DATA / "plan_feasible.json"), str(out)) == 0
    assert out.read_text().startswith("<!DOCTYPE html>") or "<html" in out.read_text()


def test_write_report_replaces_atomically(tmp_path):
    out = tmp_path / "r.html"
    out.write_text("old")
    write_report(load("plan_infeasible.json"), str(out))
    assert "debug-lm-too-big" in out.read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]


def test_a_bound_above_the_plan_is_refused(tmp_path, capsys):
    """A certificate whose lower bound exceeds its primal proves nothing: refused, not
    rendered with a negative possible speed-up (QA round 9)."""
    doc = load("plan_feasible.json")
    primal = float(doc["certificate"]["primal"])
    doc["certificate"]["lower_bound"] = primal * 2
    err = _run_bad(tmp_path, capsys, json.dumps(doc))
    assert "'certificate.lower_bound'" in err and "is above 'certificate.primal'" in err
    doc["certificate"]["lower_bound"] = primal * (1 + 1e-9)       # round-off stays accepted
    doc["certificate"]["gap"] = 0.0
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(doc))
    assert report_command(str(path), str(tmp_path / "ok.html")) == 0
