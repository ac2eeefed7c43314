"""The print rules every HTML report the tool writes shares (``@media print``).

A report is read on screen and forwarded as a printout or a PDF. On paper a browser
prints neither the part of a ``max-height`` box that needs scrolling nor a page margin
meant for a wide screen, and it may cut a table row, a chart or a headline box over two
pages. The plan report had these rules (QA round 36); the capacity, placement, fleet,
operator-sharding and peer reports had none. They all take them from here, so the rules
cannot drift apart: each template writes ``{{ print_css() }}`` inside its ``<style>``
(:func:`install` makes it a global of the template's environment), the plan report
adding its one rule of its own (its closed per-layer lists, which the runs above them
already name).
"""

from __future__ import annotations

from markupsafe import Markup

#: The rules every report prints with, one per line (selectors a report lacks match nothing).
PRINT_RULES = (
    "/* printed, the page shows what the screen can scroll: the whole log tail, no clipped boxes */",
    "pre { max-height: none; overflow: visible; }",
    "main { max-width: none; padding: 0; }",
    "figure, tr, .card, .claim { break-inside: avoid; }",
    "h2, h3 { break-after: avoid; }",
)


def print_css(*extra_rules: str) -> Markup:
    """The ``@media print`` block: :data:`PRINT_RULES` then ``extra_rules`` (a report's
    own), indented to sit two spaces deep inside a ``<style>`` element. Markup: these are
    the tool's constant rules, never user text, so they are not escaped."""
    body = "".join(f"    {rule}\n" for rule in (*PRINT_RULES, *extra_rules))
    return Markup("@media print {\n" + body + "  }")


def install(env):
    """``env`` with :func:`print_css` as a global (every report's template calls it)."""
    env.globals["print_css"] = print_css
    return env
