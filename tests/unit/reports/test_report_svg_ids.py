"""Inlined charts keep the page's ids unique and name themselves (QA round 36).

Two matplotlib SVGs in one page repeated ``figure_1``, ``axes_1``, ``patch_1`` and their
marker ids (the solve report's timeline and memory chart; capacity.html's two charts).
Oracle: the HTML standard (an id is unique in its document) and WAI-ARIA (an ``img`` has
a name), checked with the standard library's parser on real reports; every ``url(#…)``
and ``href="#…"`` must resolve to an id defined inside the same chart.
"""

from __future__ import annotations

import re
from collections import Counter
from html.parser import HTMLParser

import pytest

from autopar_opt.reports.render import render_html
from autopar_opt.reports.svg_inline import inline_svg


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: Counter[str] = Counter()
        self.svgs: list[dict] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids[a["id"]] += 1
        if tag == "svg":
            self.svgs.append(a)


@pytest.fixture(scope="module")
def report(quickstart_plan_json):
    return render_html(quickstart_plan_json)


def test_ids_are_unique_and_every_reference_resolves_inside_its_chart(report):
    parser = _Ids()
    parser.feed(report)
    assert len(parser.svgs) == 2                       # the timeline and the memory chart
    assert [i for i, n in parser.ids.items() if n > 1] == []
    for svg in re.findall(r"<svg\b.*?</svg>", report, re.S):
        defined = set(re.findall(r'\bid="([^"]+)"', svg))
        used = set(re.findall(r"url\(#([^)]+)\)", svg)) | set(re.findall(r'href="#([^"]+)"', svg))
        assert used and used <= defined


def test_every_chart_is_one_named_image(report):
    parser = _Ids()
    parser.feed(report)
    assert all(a.get("role") == "img" and a.get("aria-label") for a in parser.svgs)


def test_a_reference_to_an_id_defined_elsewhere_is_left_alone():
    svg = '<svg><path id="m1"/><use href="#m1"/><use href="#other"/><g clip-path="url(#m1)"/></svg>'
    out = str(inline_svg(svg, "c", 'a "chart"'))
    assert 'id="c-m1"' in out and 'href="#c-m1"' in out and 'url(#c-m1)' in out
    assert 'href="#other"' in out
    assert 'aria-label="a &#34;chart&#34;"' in out
