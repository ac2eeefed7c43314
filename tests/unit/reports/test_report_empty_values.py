"""No search-space row of the report prints a key with nothing after it (QA round 36:
"target: framework: megatron, version: , source: training.runtime").

Oracle: the report's search-space table of a real solve, whose plan.json records the
target's version as an empty string (no version stated).
"""

from __future__ import annotations

import json
import re

from autopar_opt.reports.render import render_html
from support import paths
from support.cli import run_cli


def test_an_unstated_value_is_said(tmp_path):
    code, text = run_cli("solve", paths.REPO / "examples" / "quickstart.yaml", "--out", tmp_path,
                         "--quiet")
    assert code == 0, text
    doc = json.loads((tmp_path / "plan.json").read_text())
    assert doc["search_space"]["target"]["version"] == ""
    html = render_html(doc)
    space = re.search(r'<section id="space">(.*?)</section>', html, re.S).group(1)
    assert not re.search(r"\w: ,|\w: </td>", space)
    assert "version: not stated" in space
