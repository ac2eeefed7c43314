"""A small MFU is printed with its significant digits, as the report prints it: the
summary of examples/split/spec.yaml (a tiny model, MFU 0.036%) said "MFU 0.0%" beside the
report's "0.036%", as if the GPUs did no model work."""

from __future__ import annotations

import json
import re

import pytest

from support import paths
from support.cli import run_cli


def test_the_summary_prints_a_small_mfu_as_the_report_does(tmp_path):
    code, text = run_cli("solve", paths.REPO / "examples" / "split" / "spec.yaml",
                         "--time-limit", "10", "--out", tmp_path / "out")
    assert code == 0, text
    mfu = json.loads((tmp_path / "out" / "plan.json").read_text())["metrics"]["mfu"]
    assert 0 < mfu < 0.0005                        # below 0.05%: ".1f" printed 0.0
    said = re.search(r"MFU ([0-9.]+)%", text).group(1)
    assert float(said) / 100 == pytest.approx(mfu, rel=0.05)
    html = (tmp_path / "out" / "report.html").read_text()
    assert f"{said}%" in html
