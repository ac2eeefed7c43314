"""``autopar place --memory-limit`` (issue 35): the MILP is counted, not built, past the
budget; the command answers with the other methods' placement and bound, says why in
its summary and ``methods``, exit 0 (a placement was found), no traceback."""

from __future__ import annotations

import json

from support import paths
from support.cli import run_cli

BERT = paths.DATA / "placement" / "throughput" / "LayerGraphs_bert24_inference.json"


def test_a_tiny_memory_limit_refuses_the_milp_and_says_why(tmp_path):
    code, text = run_cli("place", BERT, "--solver", "highs", "--memory-limit", "0.00001",
                         "--out", tmp_path / "out")
    assert code == 0, text
    assert "milp refused: not built" in text and "--memory-limit 1e-05 GiB" in text
    doc = json.loads((tmp_path / "out" / "placement.json").read_text())
    assert doc["method"] == "heuristic" and doc["status"] == "feasible"
    assert [m["status"] for m in doc["details"]["methods"]] == ["feasible", "refused"]
    assert doc["lower_bound"] <= doc["value"]


def test_a_bad_memory_limit_is_refused_before_any_work():
    code, text = run_cli("place", BERT, "--memory-limit", "-1")
    assert code == 2 and "--memory-limit" in text
