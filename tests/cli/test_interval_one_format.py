"""The same 80% interval reads the same in solve's summary, plan.json, the report and
estimate (QA: it read ``0.864-1.14 s`` in the summary and plan.json, ``0.864 – 1.138 s``
in the report, and the spec's plan ``1.07-1.4 s`` in estimate but ``1.067-1.404 s`` in
solve's comparison). Oracle: the ends plan.json records, rounded by hand to the rule
(one number of decimals, three significant digits on the larger end)."""

from __future__ import annotations

import json
import re

from support.cli import run_cli
from support import paths


def _by_hand(low: float, high: float) -> str:
    places = 2 - len(str(int(high))) + 1 if high >= 1 else None
    assert places is not None and places >= 0, "the quickstart's interval is in seconds"
    return f"{low:.{places}f}-{high:.{places}f} s"


def test_one_interval_one_text_everywhere(tmp_path):
    spec = paths.REPO / "examples" / "quickstart.yaml"
    code, summary = run_cli("solve", spec, "--solver", "dp", "--out", tmp_path / "out")
    assert code == 0, summary
    doc = json.loads((tmp_path / "out" / "plan.json").read_text())
    iv = doc["metrics"]["interval"]
    text = _by_hand(iv["low"], iv["high"])
    assert iv["text"].startswith(f"80% interval {text}, from ")
    assert f"80% interval {text}, from" in summary
    html = (tmp_path / "out" / "report.html").read_text()
    shown = set(re.findall(r"interval (\d[\d.,]*-\d[\d.,]* [mµ]?s)", html))
    [spec_plan] = [b for b in doc["baselines"] if b.get("comparison")]
    theirs = _by_hand(spec_plan["metrics"]["interval"]["low"],
                      spec_plan["metrics"]["interval"]["high"])
    assert shown == {text, theirs}, shown
    assert f"(the spec's plan: 80% interval {theirs})" in summary
    code, estimate = run_cli("estimate", spec)
    assert code == 0 and f"80% interval {theirs}, from" in estimate
