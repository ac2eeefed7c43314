"""An output file that cannot be written after the search (QA round 34).

solve writes plan.json, then report.html; place writes placement.json, then report.html.
When one of them could not be written (a full disk, here simulated; an immutable file, seen
with ``chattr +i``), the command said ``error: cannot write to OUT (...)``, exit 2, and with ``--json``
printed no error object: whether OUT's plan.json or report.html were this run's was left to
guess (the report beside a new plan.json was an earlier run's). Oracle: the files on disk
after the run, against what the message says was and was not written.
"""

from __future__ import annotations

import errno
import json

import pytest

from autopar_opt.cli import capacity as capacity_cli   # binds write_atomic: patched too
from autopar_opt.core import files
from support import paths
from support.cli import run_cli

GRAPH = paths.DATA / "placement" / "throughput" / "LayerGraphs_bert24_inference.json"


@pytest.fixture
def disk_full_at(monkeypatch):
    """``disk_full_at(name)``: writing a file called ``name`` fails as a full disk does."""
    real = files.write_atomic

    def arm(name):
        def write(path, text):
            if path.name == name:
                raise OSError(errno.ENOSPC, "No space left on device", str(path))
            real(path, text)
        monkeypatch.setattr(files, "write_atomic", write)
        monkeypatch.setattr(capacity_cli, "write_atomic", write)
    return arm


def _error(text: str) -> dict:
    return json.loads(text[text.index("{"):text.rindex("}") + 1])["error"]


def test_solve_names_the_file_written_and_the_one_not(tmp_path, disk_full_at):
    out = tmp_path / "out"
    disk_full_at("report.html")
    code, text = run_cli("solve", paths.REPO / "examples" / "quickstart.yaml", "--solver", "dp",
                         "--out", out, "--json", "--quiet")
    assert code == 2, text
    error = _error(text)
    assert error["kind"] == "cannot write"
    assert "cannot write report.html (No space left on device)" in error["message"]
    assert "written whole: plan.json" in error["message"]
    assert "not written: report.html" in error["message"]
    assert json.loads((out / "plan.json").read_text())["status"] == "optimal"   # as said


def test_place_stops_at_the_first_file_and_says_so(tmp_path, disk_full_at):
    out = tmp_path / "out"
    disk_full_at("placement.json")
    code, text = run_cli("place", GRAPH, "--out", out, "--json", "--time-limit", "20")
    assert code == 2, text
    error = _error(text)
    assert "not written: placement.json, report.html" in error["message"]
    assert "written whole" not in error["message"]
    assert not (out / "report.html").exists()


def test_capacity_names_the_file_and_keeps_the_results_in_the_store(tmp_path, disk_full_at):
    out = tmp_path / "out"
    disk_full_at("capacity.csv")
    code, text = run_cli("capacity", paths.DATA / "capacity" / "tiny.yaml", "--out", out,
                         "--workers", "1", "--json", "--quiet")
    assert code == 2, text
    message = _error(text)["message"]
    assert "cannot write capacity.csv (No space left on device)" in message
    assert "written whole: " in message and "capacity.json" in message
    assert "it and the files after it were not written" in message
    assert json.loads((out / "capacity.json").read_text())["scenarios"]      # as said
    assert not (out / "capacity.csv").exists() and not (out / "capacity.html").exists()
