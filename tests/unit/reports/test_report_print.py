"""What a printed report keeps (QA round 36).

A browser prints neither a closed ``<details>`` nor the part of a ``max-height`` box that
needs scrolling: the cost-model parameters (closed) and the log tail (320 px box) did not
print. Oracles: the HTML's structure read with the standard library's parser (no closed
``<details>`` but the per-layer lists, a print rule lifting the log's height), and the
plan itself: the strategy runs printed in the stage table, expanded, give every layer's
strategy as plan.json states it, so hiding the closed per-layer lists loses nothing.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

from autopar_opt.reports.render import render_html
from autopar_opt.reports.sections import strategy_label
from support import paths


class _Printed(HTMLParser):
    """Text outside closed ``<details>``, and the classes of closed ones."""

    def __init__(self) -> None:
        super().__init__()
        self.closed_classes: list[str] = []
        self.text: list[str] = []
        self._depth = 0                       # nesting inside a closed details

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "details" and (self._depth or "open" not in a):
            if not self._depth:
                self.closed_classes.append(a.get("class") or "")
            self._depth += 1

    def handle_endtag(self, tag):
        if tag == "details" and self._depth:
            self._depth -= 1

    def handle_data(self, data):
        if not self._depth:
            self.text.append(data)


def _doc() -> dict:
    return json.loads((paths.DATA / "report" / "plan_feasible.json").read_text())


def test_only_the_per_layer_lists_are_closed_and_the_log_prints_whole():
    html = render_html(_doc())
    parser = _Printed()
    parser.feed(html)
    assert parser.closed_classes and set(parser.closed_classes) == {"layers"}
    printed = "".join(parser.text)
    assert "iteration_overhead_s" in printed          # a cost-model parameter
    media = re.search(r"@media print\s*{(.*?)\n  }", html, re.S)
    assert media and re.search(r"pre\s*{[^}]*max-height:\s*none", media.group(1))
    assert re.search(r"details\.layers\s*{[^}]*display:\s*none", media.group(1))


def test_the_printed_runs_give_every_layers_strategy():
    doc = _doc()
    html = render_html(doc)
    html = re.sub(r'<details class="layers">.*?</details>', "", html, flags=re.S)
    body = re.search(r'<section id="plan">(.*?)</section>', html, re.S).group(1)
    rows = re.findall(r"<tr><td>\d+</td>(.*?)</tr>", body, re.S)
    assert len(rows) == len(doc["plan"]["stages"])
    for row, stage in zip(rows, doc["plan"]["stages"]):
        expanded = []
        for label, count in re.findall(r"</code>: ([^<]+?)(?: <span class=\"muted\">\((\d+) layers\)"
                                       r"</span>)?</div>", row):
            expanded += [label.strip()] * int(count or 1)
        want = [strategy_label(s, "s") for s in stage["strategies"]]
        assert expanded == want
