"""Inline SVG charts that keep an HTML page valid and give each chart an accessible name.

matplotlib numbers the ids of every figure from 1 (``figure_1``, ``axes_1``, ``patch_1``)
and names shared markers by a hash of their path, so two charts inlined in one page
repeated some forty ids (QA round 36: every solve report with a timeline and a memory
chart, and capacity.html with its two charts). HTML requires ids unique in the document
(WHATWG HTML, "The id attribute"), and a ``url(#id)`` or ``href="#id"`` reference resolves
to the first element with the id, so a chart could draw another's marker or clip path.
:func:`inline_svg` prefixes every id a chart defines, and every reference to one, with a
per-chart prefix; it also marks the root ``<svg>`` as one image with a text alternative
(``role="img"``, ``aria-label``: WAI-ARIA 1.2, "img" role), so a screen reader announces
the chart by its label instead of reading out tick numbers.
"""

from __future__ import annotations

import re

from markupsafe import Markup, escape

_ID = re.compile(r'\bid="([^"]+)"')


def inline_svg(svg: str, prefix: str, label: str) -> Markup:
    """``svg`` (generated, not user text) with its ids and their references prefixed by
    ``prefix-`` and ``role="img" aria-label="label"`` on its root element."""
    ids = set(_ID.findall(svg))

    def ref(match: re.Match) -> str:
        name = match.group(2)
        return f"{match.group(1)}{prefix}-{name}" if name in ids else match.group(0)

    out = _ID.sub(lambda m: f'id="{prefix}-{m.group(1)}"', svg)
    out = re.sub(r'(url\(#)([^)]+)(?=\))', ref, out)
    out = re.sub(r'((?:xlink:)?href="#)([^"]+)(?=")', ref, out)
    out = re.sub(r"<svg\b", f'<svg role="img" aria-label="{escape(label)}"', out, count=1)
    return Markup(out)
