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
import os
import pathlib
import struct
import sys
import zlib

import pytest

from autopar_opt.reports.render import write_report

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
DATA = pathlib.Path(__file__).parent / "data" / "report"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1200,900"]

pytestmark = pytest.mark.browser


def _require_chromium() -> None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(p)]
    if not missing:
        return
    message = f"headless Chromium needed for the browser test; missing {', '.join(missing)}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message + " (CI must run .ci/install_chromium.sh first)")
    pytest.skip(message + " (install: apt-get install -y chromium chromium-driver)")


@pytest.fixture
def driver(tmp_path):
    _require_chromium()
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS + [f"--user-data-dir={tmp_path / 'profile'}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield drv
    finally:
        drv.quit()


def _png_pixels_vary(png: bytes) -> bool:
    """True when the decoded PNG has more than one distinct pixel value (not blank)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height, bpp = 8, b"", 0, 0, 4
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos:pos + 8])
        body = png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            bpp = {2: 3, 6: 4, 0: 1, 4: 2}[color] * depth // 8
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp + 1
    # filter bytes aside, a blank page compresses to identical scanlines after row 0;
    # count distinct scanline payloads of unfiltered/sub-filtered rows as a proxy
    rows = {raw[r * stride + 1:(r + 1) * stride] for r in range(height)}
    return width > 0 and height > 0 and len(rows) > 3


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
    assert _png_pixels_vary(shot.read_bytes())
    severe = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    assert severe == [], severe


@pytest.mark.parametrize("ci,outcome", [("true", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_missing_chromium_fails_in_ci_and_skips_locally(monkeypatch, ci, outcome):
    monkeypatch.setattr(sys.modules[__name__], "CHROMIUM", "/nonexistent/chromium")
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="headless Chromium needed"):
        _require_chromium()
