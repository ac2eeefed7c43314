"""capacity.html never rounds a figure across the threshold its verdict is judged
against (QA round 35: 0.059142 days beside a 0.0591-day deadline and "no" read
"0.0591 – 0.0591"; tokens/s beside a target likewise)."""

from __future__ import annotations

import copy
import json
import re

from autopar_opt.reports.capacity import render_capacity_html
from support import paths

DOC = json.loads((paths.DATA / "report" / "capacity_tiny.json").read_text())


def _cells(html: str, sid: str) -> list[str]:
    row = re.search(rf"<tr[^>]*><td>(?:<a [^>]*>)?{sid}(?:</a>)?</td>(.*?)</tr>", html).group(1)
    return re.findall(r"<td[^>]*>(.*?)</td>", row)


def test_days_and_tokens_are_shown_on_their_thresholds_side():
    """Oracle: the verdicts' own comparisons. The first scenario's 0.0591420 days exceed a
    0.0591-day deadline and its 195,702 tokens/s fall short of a 195,710 target: the figures
    shown, read back, must exceed the deadline and fall short of the target."""
    doc = copy.deepcopy(DOC)
    doc["planning"]["deadline_days"] = 0.0591
    doc["planning"]["target_tokens_per_s"] = 195710.0
    first = doc["scenarios"][0]
    first["meets"] = "no"
    html = render_capacity_html(doc)
    cells = _cells(html, first["id"])
    days = next(c for c in cells if c.startswith("0.059"))
    tokens = next(c for c in cells if c.startswith("1.957") or c.startswith("1.96"))
    assert all(float(x) > 0.0591 for x in days.split(" – ")), days
    assert all(float(x) < 195710.0 for x in tokens.split(" – ")), tokens


def test_a_gap_is_never_shown_below_itself():
    """A gap of 3e-5 read "0.00%" in the table. Oracle: the cell, read back, >= the gap."""
    doc = copy.deepcopy(DOC)
    first = doc["scenarios"][0]
    first["gap"] = 3e-5
    cells = _cells(render_capacity_html(doc), first["id"])
    gap = next(c for c in cells if c.endswith("%"))
    assert float(gap[:-1]) / 100 >= 3e-5, gap
