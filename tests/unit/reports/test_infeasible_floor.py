"""A proven-infeasible report whose per-device memory floor is below the usable memory
does not call the floor "the least memory any plan needs" with a "shortfall factor" below
1 (QA round 12: 1.46 GiB and 0.92x on a space whose plans all need 1.68 GiB or more of
1.60): it names the floor as the weaker bound and lists each configuration's proof, the
details of plan.json. Oracle: the document's own details and figures."""

from __future__ import annotations

import copy
import json

from autopar_opt.reports.render import render_html
from support import paths


def _infeasible() -> dict:
    doc = json.loads((paths.DATA / "report" / "plan_infeasible.json").read_text())
    assert doc["status"] == "infeasible"
    return doc


def test_a_floor_below_the_capacity_is_not_the_least_memory_a_plan_needs():
    doc = copy.deepcopy(_infeasible())
    inf = doc["infeasibility"]
    inf["least_memory_gib"] = 0.92 * inf["capacity_gib"]
    inf["details"] = ["chain-label-dp: no plan fits: the least memory any plan needs is 1.676 GiB "
                      "per device on its fullest stage, against 1.600 GiB usable",
                      "layer head alone needs 1.97 GiB per device at its peak, more than the "
                      "1.60 GiB usable"]
    html = render_html(doc)
    assert "Shortfall factor" not in html
    assert "Least memory any plan needs per device" not in html
    assert "Per-device memory floor" in html
    for line in inf["details"]:
        assert line in html


def test_a_floor_above_the_capacity_keeps_its_shortfall_factor():
    doc = _infeasible()
    inf = doc["infeasibility"]
    assert inf["least_memory_gib"] >= inf["capacity_gib"]
    html = render_html(doc)
    assert "Shortfall factor" in html and "Least memory any plan needs per device" in html
    assert f"{inf['least_memory_gib'] / inf['capacity_gib']:.2f}×" in html
