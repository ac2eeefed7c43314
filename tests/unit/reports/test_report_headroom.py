"""The memory table gives each stage's headroom (QA round 36: peak and capacity only).

Oracle: hand arithmetic on plan.json: capacity − peak per stage, and its share of the
capacity equal to the search's own ``metrics.stages[].headroom_fraction``.
"""

from __future__ import annotations

import re

import pytest

from autopar_opt.reports.render import render_html
from autopar_opt.reports.sections import headroom_text


def test_each_stage_row_states_capacity_minus_peak(solved):
    html = render_html(solved)
    head = re.search(r'<section id="memory">.*?<thead><tr>(.*?)</tr>', html, re.S).group(1)
    columns = re.findall(r"<th[^>]*>([^<]*)</th>", head)
    at = columns.index("headroom")
    body = re.search(r'<section id="memory">.*?<tbody>(.*?)</tbody>', html, re.S).group(1)
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in re.findall(r"<tr>(.*?)</tr>", body)]
    stages = solved["metrics"]["stages"]
    assert len(rows) == len(stages)
    for row, st in zip(rows, stages):
        left = st["capacity_gib"] - st["peak_memory_gib"]
        gib, pct = re.match(r"([\d.]+) GiB \((\d+)%\)", row[at]).groups()
        assert float(gib) == pytest.approx(left, abs=0.005)
        assert int(pct) == round(100 * st["headroom_fraction"])
        assert st["headroom_fraction"] == pytest.approx(left / st["capacity_gib"], rel=1e-9)


def test_a_stage_over_capacity_says_by_how_much():
    assert headroom_text(81.2, 80.0) == "1.20 GiB over"
