"""``export`` finds the spec of a plan solved with a relative path from any folder
(found by a new user, session 24: plan.json kept 's1.yaml' as given, and an export run
from another folder said the spec was not readable)."""

from __future__ import annotations

import json
import shutil

from support import paths
from support.cli import run_cli


def test_export_from_another_folder_reads_the_resolved_spec_path(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(paths.REPO / "examples" / "quickstart.yaml", work / "q.yaml")
    monkeypatch.chdir(work)
    code, text = run_cli("solve", "q.yaml", "--out", "o", "--quiet")
    assert code == 0, text
    doc = json.loads((work / "o" / "plan.json").read_text())
    assert doc["spec"]["path"] == "q.yaml"
    assert doc["spec"]["resolved_path"] == str((work / "q.yaml").resolve())
    monkeypatch.chdir(tmp_path)
    code, text = run_cli("export", work / "o" / "plan.json", "--to", "megatron")
    assert code == 0, text
    assert "--tensor-model-parallel-size" in text
