"""The report's charts as a reader sees them in headless Chromium (issue 33).

Each chart (the plan report's memory chart, the capacity report's Pareto and scaling
charts on a narrow and a wide sweep) is rendered from the inputs in
``tests/data/report/charts/inputs.json`` into a bare page and checked in the browser:

* every legend entry lies inside the chart (before: "time-co", "deadlin", "A100-8"
  were cut at the figure's right edge);
* both axes carry at least three labelled ticks (a log axis spanning less than a
  decade showed one label or none);
* every data marker sits inside the axes, clear of the frame (points sat on it);
* the screenshot of the chart looks like its golden image
  (``tests/data/report/charts/*.png``), compared by :mod:`support.images` with a
  tolerance for anti-aliasing, not byte for byte.

After an intended change of a chart, rewrite the goldens with
``AUTOPAR_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/reports/test_chart_browser.py``
and look at them before committing.
"""

from __future__ import annotations

import json
import os

import pytest

from autopar_opt.reports.capacity_charts import pareto_svg, scaling_svg
from autopar_opt.reports.charts import memory_svg
from support import paths
from support.browser import driver  # noqa: F401 - fixture
from support.images import compare

pytestmark = pytest.mark.browser

CHARTS = paths.DATA / "report" / "charts"
INPUTS = json.loads((CHARTS / "inputs.json").read_text())


def _pareto(key: str) -> str:
    c = INPUTS[key]
    return pareto_svg(c["scenarios"], c["frontier"], c["deadline_days"], c["currency"])


CASES = {
    "memory": lambda: memory_svg(INPUTS["memory"]),
    "pareto_narrow": lambda: _pareto("capacity"),
    "scaling_narrow": lambda: scaling_svg(INPUTS["capacity"]["scenarios"]),
    "pareto_wide": lambda: _pareto("capacity_wide"),
    "scaling_wide": lambda: scaling_svg(INPUTS["capacity_wide"]["scenarios"]),
}

#: What the page measures: the chart's box, the axes' box, the legend's text boxes,
#: the labelled ticks of each axis inside the axes' span, and the data markers.
_MEASURE = """
const svg = document.querySelector('svg');
const rect = r => { const b = r.getBoundingClientRect();
                    return [b.left, b.top, b.right, b.bottom]; };
const axes = svg.querySelector('g[id^="axes"] > g[id^="patch"]');
const ticks = axis => [...svg.querySelectorAll('g[id^="' + axis + 'tick"]')]
    .filter(g => g.querySelector('text') && g.querySelector('text').textContent.trim())
    .map(g => rect(g.querySelector('text')));
const markers = [...svg.querySelectorAll('g[id^="line2d"] use')]
    .filter(u => !u.closest('g[id^="legend"], g[id^="xtick"], g[id^="ytick"]')).map(rect);
return {svg: rect(svg), axes: rect(axes),
        legend: [...svg.querySelectorAll('g[id^="legend"] text')].map(rect),
        xticks: ticks('x'), yticks: ticks('y'), markers: markers};
"""


def _page(tmp_path, name: str, svg: str) -> str:
    page = tmp_path / f"{name}.html"
    page.write_text("<!doctype html><html><head><meta charset='utf-8'></head>"
                    "<body style='margin:0;background:#fff'>" + svg + "</body></html>")
    return page.as_uri()


@pytest.mark.parametrize("name", list(CASES))
def test_chart_reads_at_a_glance_and_matches_its_golden(driver, tmp_path, name):  # noqa: F811
    driver.get(_page(tmp_path, name, CASES[name]()))
    got = driver.execute_script(_MEASURE)
    left, top, right, bottom = got["svg"]
    assert got["legend"], "the chart has a legend"
    for box in got["legend"]:                      # every legend entry inside the chart
        assert box[0] >= left - 0.5 and box[2] <= right + 0.5, (box, got["svg"])
        assert box[1] >= top - 0.5 and box[3] <= bottom + 0.5, (box, got["svg"])
    ax_left, ax_top, ax_right, ax_bottom = got["axes"]
    xs = [b for b in got["xticks"] if ax_left - 2 <= (b[0] + b[2]) / 2 <= ax_right + 2]
    ys = [b for b in got["yticks"] if ax_top - 2 <= (b[1] + b[3]) / 2 <= ax_bottom + 2]
    assert len(ys) >= 3, f"{len(ys)} labelled y ticks"
    assert len(xs) >= (2 if name == "memory" else 3), f"{len(xs)} labelled x ticks"
    for box in got["markers"]:                     # data markers clear of the frame
        cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
        assert ax_left + 2 < cx < ax_right - 2 and ax_top + 2 < cy < ax_bottom - 2, (box, got["axes"])
    shot = driver.find_element("css selector", "svg").screenshot_as_png
    golden = CHARTS / f"{name}.png"
    if os.environ.get("AUTOPAR_UPDATE_GOLDEN") == "1":
        golden.write_bytes(shot)
        pytest.skip(f"wrote {golden}")
    likeness = compare(shot, golden.read_bytes())
    if not likeness.alike:
        (tmp_path / f"{name}.png").write_bytes(shot)
    assert likeness.alike, f"{name}: {likeness} (screenshot kept in {tmp_path})"


def test_the_comparison_tells_a_cut_legend_from_anti_aliasing():
    """The tolerance admits rendering noise and refuses what a reader would see: the
    golden against itself moved by one pixel passes; with its legend row blanked (a
    legend cut below the axes) or one legend word blanked, it fails."""
    import io

    from PIL import Image, ImageChops

    golden = (CHARTS / "pareto_narrow.png").read_bytes()
    img = Image.open(io.BytesIO(golden)).convert("RGB")
    shifted = ImageChops.offset(img, 1, 0)
    no_legend = img.copy()
    no_legend.paste((255, 255, 255), (0, int(img.height * 0.88), img.width, img.height))
    no_word = img.copy()
    no_word.paste((255, 255, 255), (600, 460, 700, 480))

    def png(im):
        buf = io.BytesIO()
        im.save(buf, format="PNG")
        return buf.getvalue()
    assert compare(golden, golden).changed_cells == 0
    assert compare(png(shifted), golden).alike
    assert not compare(png(no_legend), golden).alike
    assert not compare(png(no_word), golden).alike
