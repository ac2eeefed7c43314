"""The plan report warns about figures no plan can have (found by a new user, session 24:
a hand-edited plan.json with ``mfu: 1.7`` read "MFU 170.0%", and a stage of 500 GiB on an
80 GiB device "fits"); the untouched document gets no such warning."""

from __future__ import annotations

import copy
import json

from autopar_opt.reports.context import build_context
from support import paths

DOC = json.loads((paths.DATA / "report" / "plan_feasible.json").read_text())


def test_untouched_document_has_no_physical_warning():
    assert not [w for w in build_context(DOC)["warnings"] if "outside 0-100%" in w
                or "said to fit" in w or "positive finite" in w]


def test_impossible_figures_are_warned():
    doc = copy.deepcopy(DOC)
    doc["metrics"]["mfu"] = 1.7
    doc["metrics"]["stages"][0]["peak_memory_gib"] = 500.0
    warnings = build_context(doc)["warnings"]
    assert any("metrics.mfu = 1.7 is outside 0-100%" in w for w in warnings)
    assert any("stage 0 is said to fit with 500.00 GiB of 38.00 GiB" in w for w in warnings)


def test_a_placement_with_impossible_figures_is_refused(tmp_path):
    """A negative load was rendered "Optimal: max-load -5 is proven minimal" (session 24)."""
    from support.cli import run_cli

    doc = json.loads((paths.DATA / "report" / "placement_bert24.json").read_text())
    for key, value in (("value", -5), ("gap", float("nan")), ("status", "banana")):
        bad = dict(doc, **{key: value})
        path = tmp_path / f"{key}.json"
        path.write_text(json.dumps(bad))
        code, text = run_cli("report", path, "-o", tmp_path / f"{key}.html")
        assert code == 2 and key in text, text
        assert not (tmp_path / f"{key}.html").exists()
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(doc))
    assert run_cli("report", path, "-o", tmp_path / "ok.html")[0] == 0
