"""tests/data/report/capacity_tiny.json (the capacity.json that the report, CSV and fuzz
tests read) has the layout the current code writes: every key, at every level, that a
capacity document built now holds, and none it no longer holds (QA round 36: the recorded
file lacked each scenario's ``notes`` and the answers' ``not_solved``, added since, so the
report tests read a document the tool no longer writes). Rebuild it with
``.venv/bin/python tests/data/report/build_fixtures.py``.

Oracle: :func:`~autopar_opt.capacity.run.build_capacity_document` on the same sweep
(tests/data/capacity/tiny.yaml), fed rows made from the fixture's own figures, no search."""

from __future__ import annotations

import json

from autopar_opt.capacity import load_sweep
from autopar_opt.capacity.run import SweepRun, build_capacity_document
from support import paths

FIXTURE = paths.DATA / "report" / "capacity_tiny.json"


def _row(e: dict) -> dict:
    """A worker row with the entry's figures (its interval from its model error)."""
    err = e.get("model_error") or {}
    low, high = err.get("iteration_time_s") or (e["primal"], e["primal"])
    return {"id": e["id"], "key": e["key"], "status": e["status"], "primal": e["primal"],
            "lower_bound": e["lower_bound"], "gap": e["gap"], "exact": True, "plan": e["plan"],
            "mfu": e["mfu"], "peak_memory_gib": e["peak_memory_gib"], "reason": e["reason"],
            "interval": {"low": low, "high": high, "level": err.get("level", 0.8),
                         "comparable_runs": err.get("comparable_runs", 1), "wide": False},
            "document": None, "report_html": None}


def _shape(x) -> object:
    """The keys of ``x`` at every level (a list by its first item)."""
    if isinstance(x, dict):
        return {k: _shape(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_shape(x[0])] if x and isinstance(x[0], (dict, list)) else []
    return None


def _diff(a, b, where: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{where}.{k}: only in the fixture" for k in a if k not in b]
        out += [f"{where}.{k}: only in what the code writes" for k in b if k not in a]
        return out + [d for k in a if k in b for d in _diff(a[k], b[k], f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and a and b:
        return _diff(a[0], b[0], where + "[0]")
    return []


def test_the_recorded_capacity_document_has_the_current_layout():
    fixture = json.loads(FIXTURE.read_text())
    sweep = load_sweep(paths.DATA / "capacity" / "tiny.yaml")
    rows = {e["id"]: _row(e) for e in fixture["scenarios"]}
    now = build_capacity_document(sweep, SweepRun(rows, computed=list(rows)), "local", 1,
                                  "capacity.sqlite")
    for entry in now["scenarios"]:               # as `capacity --out` adds it
        entry["report"] = f"scenarios/{entry['id']}/report.html"
    assert [e["id"] for e in now["scenarios"]] == [e["id"] for e in fixture["scenarios"]]
    assert _diff(_shape(fixture), _shape(now)) == []
