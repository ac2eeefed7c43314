"""Headless Chromium for the browser tests: the ``driver`` fixture and a blank-page check.

A test module uses the fixture by importing it (``from support.browser import driver``).
Skips only when Chromium is absent locally; with ``CI=true`` a missing Chromium is a
failure (CI installs it with .ci/install_chromium.sh).
"""

from __future__ import annotations

import os
import struct
import zlib

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1200,900"]


def require_chromium() -> None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(p)]
    if not missing:
        return
    message = f"headless Chromium needed for the browser test; missing {', '.join(missing)}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message + " (CI must run .ci/install_chromium.sh first)")
    pytest.skip(message + " (install: apt-get install -y chromium chromium-driver)")


@pytest.fixture
def driver(tmp_path):
    require_chromium()
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


def png_pixels_vary(png: bytes) -> bool:
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
