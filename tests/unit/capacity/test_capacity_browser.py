"""Open ``capacity.html`` in headless Chromium and check what a reader sees.

Same harness as the plan report's browser test: a file:// URL, both SVG
charts laid out with a real size and drawing something, one table row per
scenario whose link opens that scenario's own plan report, a non-blank
screenshot, and no SEVERE console entry.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from autopar_opt.cli.commands import app
from support.browser import driver, png_pixels_vary  # noqa: F401 - fixture
from support import paths

pytestmark = pytest.mark.browser

TWO = paths.DATA / "capacity" / "two.yaml"


def test_capacity_report_renders_in_chromium(driver, tmp_path):  # noqa: F811
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["capacity", str(TWO), "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    driver.get((out / "capacity.html").as_uri())
    assert "capacity plan" in driver.title
    svgs = driver.find_elements("css selector", "figure.chart svg")
    assert len(svgs) == 2
    for svg in svgs:
        assert svg.size["width"] > 100 and svg.size["height"] > 100, svg.size
        assert svg.find_elements("css selector", "path, rect, use")
    links = driver.find_elements("css selector", "#scenario-table a")
    assert [a.text for a in links] == [e["id"] for e in doc["scenarios"]]
    shot = tmp_path / "capacity.png"
    assert driver.save_screenshot(str(shot)) and png_pixels_vary(shot.read_bytes())
    assert [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"] == []
    links[0].click()                               # the scenario's own plan report opens
    assert driver.current_url.endswith(f"scenarios/{doc['scenarios'][0]['id']}/report.html")
    assert driver.find_elements("css selector", "figure.chart svg")
    assert [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"] == []
