"""``calibrate --json`` on a file none of whose records can be modeled (exit 2) prints the
"error" object every --json command prints for an input error, beside the report (QA round 11:
only the report came, so a caller checking "error" on exit 2 found none)."""

from __future__ import annotations

import json

from support.cli import run_cli
from support.runs import tiny_record, write_runs


def _doc(out: str) -> dict:
    """The JSON document of the output (stderr's lines may follow it)."""
    return json.JSONDecoder().raw_decode(out[out.index("{"):])[0]


def test_no_modelable_record_gives_the_error_object(tmp_path):
    path = write_runs(tmp_path, [tiny_record(hardware__num_gpus=2)])
    code, out = run_cli("calibrate", path, "--json")
    assert code == 2
    doc = _doc(out)
    err = doc["error"]
    assert err["kind"] == "invalid run file" and err["exit_code"] == 2
    (problem,) = err["problems"]
    assert problem["file"] == str(path) and problem["key"] == "record r1"
    assert "!= hardware.num_gpus = 2" in problem["rule"]
    assert doc["records"] == [{"id": "r1", "skipped": problem["rule"]}]


def test_a_modelable_file_has_no_error_object(tmp_path):
    code, out = run_cli("calibrate", write_runs(tmp_path, [tiny_record()]), "--json")
    assert code == 0 and "error" not in _doc(out)
