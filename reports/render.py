"""Render the self-contained HTML optimality report from a ``plan.json`` document.

Jinja2 with autoescape on and ``StrictUndefined`` (a template typo fails
loudly instead of printing nothing); every string from user files (model,
layer and cluster names) is escaped. Charts are inline SVG from matplotlib;
the file has no scripts, no external URLs and no network fetches, so it can
be mailed as an attachment.
"""

from __future__ import annotations

import functools

from jinja2 import Environment, PackageLoader, StrictUndefined, Template, select_autoescape
from autopar_opt.core import files as outputs
from autopar_opt.reports import print_style
from autopar_opt.reports.charts import memory_svg, timeline_svg
from autopar_opt.reports.context import build_context
from autopar_opt.reports.svg_inline import inline_svg

TEMPLATE = "report.html.j2"


@functools.lru_cache(maxsize=1)
def template() -> Template:
    """The compiled report template (compiled once per process: about 50 ms,
    paid before ``autopar solve`` splits its time limit)."""
    return _environment().get_template(TEMPLATE)


def _environment() -> Environment:
    env = Environment(loader=PackageLoader("autopar_opt.reports", "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True,
                                                   enabled_extensions=("html", "j2")),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                      keep_trailing_newline=True)
    return print_style.install(env)


def render_charts(context: dict) -> dict:
    """Inline SVG charts (as :class:`Markup`, they are generated, not user text)."""
    charts = {"timeline": None, "memory": None}
    if context["timeline"]:
        charts["timeline"] = inline_svg(timeline_svg(context["timeline"]), "timeline",
                                        "Pipeline timeline of one iteration: each stage's forward and "
                                        "backward passes per micro-batch (the caption below says how)")
    if context["memory"]:
        charts["memory"] = inline_svg(memory_svg(context["memory"]), "memory",
                                      "Peak memory of one device per stage, part by part, against the "
                                      "usable capacity (the table below lists every figure)")
    return charts


def render_html(plan_doc: dict, draw_timeline: bool = True) -> str:
    """The report as one HTML string. Raises ReportInputError for a bad document.
    ``draw_timeline`` false leaves the timeline out with a note (:func:`build_context`)."""
    context = build_context(plan_doc, draw_timeline)
    from autopar_opt.reports.searcher import searcher_context

    return template().render(ctx=context, charts=render_charts(context),
                             searcher=searcher_context(plan_doc.get("searcher")))


def write_atomic(text: str, path: str) -> None:
    """Write ``text`` to ``path`` atomically (temporary file + rename), with the
    umask-respecting permissions every output gets (:func:`autopar_opt.core.files.write_atomic`)."""
    outputs.write_atomic(path, text)


def write_report(plan_doc: dict, path: str) -> None:
    """Render ``plan_doc`` and write the HTML report to ``path`` atomically."""
    write_atomic(render_html(plan_doc), path)
