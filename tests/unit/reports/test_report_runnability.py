"""The price of runnability in the HTML report (issue 29).

Oracle: the ``runnability`` block of the plan.json the same ``autopar solve --out``
writes (``search/runnable.py::Runnability.to_dict``). Every figure of the block
must appear in report.html (and in the re-render of ``autopar report``), read back
from the HTML as numbers; a document without the block (written before it, or
without a target) renders with no such section; a price with an unknown end
reads "not priced" with its reason.
"""

from __future__ import annotations

import copy
import html as html_text
import json
import math
import re

import pytest

from autopar_opt.reports.context import build_context
from autopar_opt.reports.document import ReportInputError
from autopar_opt.reports.render import render_html
from support.cli import run_cli


@pytest.fixture(scope="module")
def solved(quickstart_out):
    """(plan.json, report.html, folder) of a real search under the runtime's target
    (megatron)."""
    out = quickstart_out
    return json.loads((out / "plan.json").read_text()), (out / "report.html").read_text(), out


def _section(html: str) -> str:
    m = re.search(r'<div id="runnability">(.*?)</div>', html, re.S)
    assert m, "no runnability section in the report"
    return html_text.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]*>", " ", m.group(1))))


def _row(text: str, label: str) -> str:
    """The cell after ``label`` in the section's text (up to the next row label)."""
    m = re.search(re.escape(label) + r"(.*?)(?= Runnable search| Free space| Price bounds|$)",
                  text)
    assert m, f"no row {label!r} in: {text}"
    return m.group(1)


def _seconds(cell: str) -> list[float]:
    return [float(x) for x in re.findall(r"(-?[\d.]+(?:e[-+]?\d+)?) s\b", cell)]


def _percents(cell: str) -> list[float]:
    return [float(x) / 100 for x in re.findall(r"(-?[\d.]+(?:e[-+]?\d+)?)%", cell)]


def _check_figures(html: str, run: dict) -> None:
    text = _section(html)
    assert f"Runnable by {run['target']['framework']}" in text
    assert run["target"]["source"] in text                 # where the target came from
    rel = dict(rel=1e-5)                                     # 6 significant digits written
    runnable = _seconds(_row(text, "Runnable search: plan / lower bound"))
    assert runnable == pytest.approx([run["runnable_primal"], run["runnable_lower_bound"]], **rel)
    free_cell = _row(text, "Free space: plan / lower bound")
    assert _seconds(free_cell) == pytest.approx([run["free_primal"], run["free_lower_bound"]], **rel)
    assert f"({run['free_status']})" in free_cell
    ends = _percents(_row(text, "Price bounds"))
    assert ends == pytest.approx([run["price_low"], run["price_high"]], rel=5e-3, abs=1e-12)
    price = _percents(_row(text, "Price of runnability"))
    assert price and price[0] == pytest.approx(run["price_low"], rel=5e-3, abs=1e-12)


def test_the_report_shows_the_figures_of_plan_json(solved):
    doc, html, _ = solved
    run = doc["runnability"]
    assert run is not None and run["target"]["framework"] == "megatron"
    assert run["free_status"] == "optimal"        # quickstart's free space is solved exactly
    # the oracle's own consistency: the price is the ratio of the two certificates
    assert run["price_high"] == pytest.approx(run["runnable_primal"] / run["free_lower_bound"] - 1)
    _check_figures(html, run)


def test_autopar_report_re_renders_the_block(solved, tmp_path):
    doc, _, out = solved
    code, text = run_cli("report", out / "plan.json", "-o", tmp_path / "again.html")
    assert code == 0, text
    _check_figures((tmp_path / "again.html").read_text(), doc["runnability"])


@pytest.mark.parametrize("how", ["absent", "null"])
def test_a_document_without_the_block_still_renders(solved, how):
    doc = copy.deepcopy(solved[0])
    if how == "absent":
        del doc["runnability"]
    else:
        doc["runnability"] = None
    assert build_context(doc)["runnability"] is None
    html = render_html(doc)
    assert 'id="runnability"' not in html and "price of runnability" not in html
    assert "The answer" in html and "The certificate" in html


def test_a_price_with_an_unknown_end_reads_not_priced(solved):
    doc = copy.deepcopy(solved[0])
    run = doc["runnability"]
    run.update(free_primal=None, free_lower_bound="-inf", free_status="not_solved",
               price_low="nan", price_high="nan", note="")
    text = _section(render_html(doc))
    assert "not priced" in text and "free space's search ended not_solved without a plan" in text
    run["note"] = "no time was left for the free space's search; a longer --time-limit prices it"
    text = _section(render_html(doc))
    assert "not priced" in text and run["note"] in text
    assert "−∞" in _row(text, "Free space: plan / lower bound")


def test_a_range_is_written_low_to_high(solved):
    doc = copy.deepcopy(solved[0])
    doc["runnability"].update(price_low=0.0, price_high=0.125)
    cell = _row(_section(render_html(doc)), "Price of runnability")
    assert _percents(cell) == [0.0, 0.125]


def test_a_malformed_figure_names_its_key(solved):
    doc = copy.deepcopy(solved[0])
    doc["runnability"]["price_low"] = "cheap"
    with pytest.raises(ReportInputError, match=r"runnability\.price_low"):
        build_context(doc)
    doc = copy.deepcopy(solved[0])
    doc["runnability"]["target"] = {}
    with pytest.raises(ReportInputError, match=r"runnability\.target"):
        build_context(doc)
    assert math.isfinite(solved[0]["runnability"]["price_low"])


def test_a_free_plan_slower_than_the_runnable_one_is_explained(solved):
    """The free space holds every runnable plan: a slower free plan means its search
    stopped early (the Mixtral example at --time-limit 30 does this)."""
    doc = copy.deepcopy(solved[0])
    run = doc["runnability"]
    run.update(free_primal=run["runnable_primal"] * 1.3, free_status="feasible",
               price_low=0.0, note="")
    text = _section(render_html(doc))
    assert "slower than the runnable one" in text and "--time-limit" in text
    run.update(free_status="optimal", free_primal=run["runnable_primal"] * 0.9)
    assert "slower than the runnable one" not in _section(render_html(doc))
