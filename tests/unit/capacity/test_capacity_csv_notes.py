"""capacity.csv carries each scenario's notes, as capacity.json, the terminal and
capacity.html do (QA round 35: the CSV, the file a planner loads into a spreadsheet, had no
column for them: a partial node's wiring, a sequence past the model's positions, search
degrees left out)."""

from __future__ import annotations

import copy
import csv
import io
import json

from autopar_opt.capacity.run import csv_text
from support import paths

DOC = json.loads((paths.DATA / "report" / "capacity_tiny.json").read_text())


def test_every_row_carries_its_notes():
    """Oracle: the document's own notes per scenario (two on the first, none on the second)."""
    doc = copy.deepcopy(DOC)
    doc["scenarios"][0]["notes"] = ["2 GPUs: one partial node of the base's 4-GPU nodes",
                                    "search.pp_degrees [4] left out"]
    doc["scenarios"][1]["notes"] = []
    rows = list(csv.DictReader(io.StringIO(csv_text(doc))))
    assert [r["notes"] for r in rows[:2]] == [
        "2 GPUs: one partial node of the base's 4-GPU nodes; search.pp_degrees [4] left out", ""]
    assert [r["id"] for r in rows] == [e["id"] for e in doc["scenarios"]]
