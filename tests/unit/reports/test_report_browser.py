"""Open a rendered report in headless Chromium (selenium) and check what a reader sees.

Checks: the page loads from a file:// URL with networking disabled, both SVG
charts are laid out with non-zero size, the screenshot is a PNG that is not a
blank page, and the browser console has no SEVERE entry (a blocked fetch or a
broken resource would be one).

Skips only when Chromium is absent locally; with ``CI=true`` a missing
Chromium is a failure (CI installs it with .ci/install_chromium.sh).
"""

from __future__ import annotations

import json

import pytest

from autopar_opt.reports.render import write_report
from support import paths
from support import browser
from support.browser import driver, png_pixels_vary  # noqa: F401 - fixture

DATA = paths.DATA / "report"

pytestmark = pytest.mark.browser


def test_report_renders_in_chromium(driver, tmp_path):
    doc = json.loads((DATA / "plan_feasible.json").read_text())
    report = tmp_path / "report.html"
    write_report(doc, str(report))
    driver.get(report.as_uri())
    assert "debug-lm" in driver.title
    svgs = driver.find_elements("css selector", "figure.chart svg")
    assert len(svgs) == 2
    for svg in svgs:
        size = svg.size
        assert size["width"] > 100 and size["height"] > 100, size
        assert svg.find_elements("css selector", "path, rect, use")   # drew something
    highlighted = driver.find_elements("css selector", "tr.min-bound")
    assert len(highlighted) == 1 and highlighted[0].size["height"] > 0
    shot = tmp_path / "report.png"
    assert driver.save_screenshot(str(shot))
    assert png_pixels_vary(shot.read_bytes())
    severe = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    assert severe == [], severe


@pytest.mark.parametrize("ci,outcome", [("true", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_missing_chromium_fails_in_ci_and_skips_locally(monkeypatch, ci, outcome):
    monkeypatch.setattr(browser, "CHROMIUM", "/nonexistent/chromium")
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="headless Chromium needed"):
        browser.require_chromium()
