"""A peer problem's instance file is shown as one normalised path.

Before, the spec's folder was joined to ``problem.file`` as written, and plan.json, the
HTML report and the missing-file error showed ``/tmp/x/sub/../../data/gnmt.json``. Oracle:
the operating system's own resolution of the same file (``os.path.realpath``), which has no
``..`` part and names the file read."""

from __future__ import annotations

import json
import os
import shutil

from support.cli import first_json, run_cli
from support.paths import TESTS

GNMT = TESTS / "data" / "peers" / "piper" / "gnmt.json"


def _spec(tmp_path, file: str):
    (tmp_path / "sub" / "deeper").mkdir(parents=True, exist_ok=True)
    spec = tmp_path / "sub" / "deeper" / "p.yaml"
    spec.write_text(f"problem: {{format: piper, file: {file}, devices: 8, "
                    "memory_per_device_gib: 8, bandwidth_gib_per_s: 25}\n")
    return spec


def test_plan_json_and_report_show_the_instance_without_dot_dot(tmp_path):
    (tmp_path / "data").mkdir()
    shutil.copy(GNMT, tmp_path / "data" / "gnmt.json")
    spec = _spec(tmp_path, "../.././data//gnmt.json")
    code, text = run_cli("solve", spec, "--time-limit", "20", "--out", tmp_path / "out",
                         "--quiet")
    assert code == 0, text
    want = os.path.realpath(tmp_path / "data" / "gnmt.json")
    doc = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert doc["spec"]["problem"]["file"] == want
    html = (tmp_path / "out" / "report.html").read_text()
    assert f"<th>file</th><td>{want}" in html and "/../" not in html


def test_a_missing_instance_is_named_by_its_normalised_path(tmp_path):
    spec = _spec(tmp_path, "../../nowhere/gnmt.json")
    code, text = run_cli("solve", spec, "--time-limit", "5", "--json")
    assert code == 2, text
    [problem] = first_json(text)["error"]["problems"]
    assert problem["key"] == "problem.file" and problem["value"] == "../../nowhere/gnmt.json"
    want = os.path.realpath(tmp_path / "nowhere" / "gnmt.json")
    assert problem["rule"] == f"{want} does not exist", problem
