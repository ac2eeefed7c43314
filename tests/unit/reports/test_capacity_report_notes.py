"""capacity.html says what the sweep changed or kept for some scenarios (QA round 11: the
notes, e.g. "group h100 is not in axes.group_nodes: its 1 node(s) from the base are in every
scenario", were printed in the terminal and kept in capacity.json, but the report a person
forwards left them out, so its scenario ids hid the fixed group)."""

from __future__ import annotations

import copy
import json

from autopar_opt.reports.capacity import render_capacity_html
from support import paths

DOC = json.loads((paths.DATA / "report" / "capacity_tiny.json").read_text())


def test_each_note_is_in_the_report_once_with_its_scenarios():
    doc = copy.deepcopy(DOC)
    first, second = doc["scenarios"][0], doc["scenarios"][1]
    note = "search.pp_degrees [4] left out: it does not fit this scenario's devices"
    first["notes"] = [note]
    second["notes"] = [note]
    html = render_capacity_html(doc)
    assert html.count("search.pp_degrees [4] left out") == 1
    assert f"(scenarios: {first['id']}, {second['id']})" in html
    # a document without notes gets no note paragraph
    bare = copy.deepcopy(DOC)
    for e in bare["scenarios"]:
        e["notes"] = []
    assert "Note:" not in render_capacity_html(bare)


def test_a_damaged_capacity_json_is_refused_naming_its_keys(tmp_path):
    """`autopar report` on a hand-edited capacity.json named a Python exception
    ("IndexError: list index out of range", "TypeError: 'NoneType' object is not
    subscriptable") instead of the key (QA round 11). Oracle: the keys edited."""
    from typer.testing import CliRunner

    from autopar_opt.cli.commands import app

    doc = copy.deepcopy(DOC)
    doc["scenarios"][1]["time_to_train_days"] = [1]
    doc["scenarios"][2]["cost"] = None
    path = tmp_path / "capacity.json"
    path.write_text(json.dumps(doc))
    result = CliRunner().invoke(app, ["report", str(path), "--out", str(tmp_path / "r.html")])
    assert result.exit_code == 2
    text = " ".join(result.output.split())
    assert "scenarios[1].time_to_train_days = [1]: must be [low, high]" in text
    assert "scenarios[2].cost = null" in text and "Error:" not in text
    assert not (tmp_path / "r.html").exists()
    path.write_text(json.dumps(DOC))
    ok = CliRunner().invoke(app, ["report", str(path), "--out", str(tmp_path / "r.html")])
    assert ok.exit_code == 0 and (tmp_path / "r.html").is_file()
