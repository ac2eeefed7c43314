"""A small self-contained HTML report of a peer solve: certificate, then stages or vertices."""

from __future__ import annotations

import math
from pathlib import Path

from jinja2 import Environment, StrictUndefined

from autopar_opt.reports.formatting import doc_table_env
from autopar_opt.reports import print_style
from autopar_opt.reports.methods import method_rows

_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>autopar-opt: {{ p.format }} {{ p.name }}</title>
<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}
  {{ print_css() }}
</style></head><body>
<h1>{{ p.format | capitalize }} instance {{ p.name }}: {{ doc.status }}</h1>
<h2>Certificate</h2>
<p>Objective: {{ objective_unit(doc) }}.</p>
<table><tr><th>primal</th><td>{{ c.primal | show }}</td></tr>
<tr><th>proven lower bound</th><td>{{ c.lower_bound | show }}</td></tr>
<tr><th>gap</th><td>{{ c.gap | show }}</td></tr><tr><th>exact</th><td>{{ c.exact | show }}</td></tr>
<tr><th>method</th><td>{{ method_text(c) }}</td></tr>
<tr><th>wall time</th><td>{{ doc.wall_time_s | show }} s</td></tr></table>
{% if methods %}<h3>What each method proved</h3>
<p>certificate.methods, in the order they ran (−∞: no bound proven).</p>
<table><tr><th>method</th><th>status</th><th>primal</th><th>lower bound</th><th>time</th>
<th>what it did</th></tr>
{% for m in methods %}<tr><td>{{ m.method }}</td><td>{{ m.status }}</td><td>{{ m.primal }}</td>
<td>{{ m.lower_bound }}</td><td>{{ m.time }}</td><td>{{ m.what }}</td></tr>{% endfor %}</table>{% endif %}
<h2>Problem</h2><table>{% for k, v in p.items() %}
<tr><th>{{ k | label }}</th><td>{{ v | show }}</td></tr>{% endfor %}</table>
{% if doc.given_plan %}<h2>Given plan</h2><table>{% for k, v in given_rows(doc.given_plan) %}
<tr><th>{{ k }}</th><td>{{ v }}</td></tr>{% endfor %}</table>{% endif %}
{% if doc.plan and doc.plan.stages is defined %}<h2>Stages ({{ doc.plan.devices_used }} devices used,
TPS {{ doc.plan.tps | show }})</h2>
<table><tr><th>#</th><th>d</th><th>t</th><th>y</th><th>TPS</th><th>memory bytes</th><th>nodes (TMPC)</th></tr>
{% for s in doc.plan.stages %}<tr><td>{{ loop.index0 }}</td><td>{{ s.d }}</td><td>{{ s.t }}</td><td>{{ s.y }}</td>
<td>{{ s.tps | show }}</td><td>{{ s.memory_bytes | show }}</td>
<td>{% for n, k in zip(s.nodes, s.tmpcs) %}{{ n }} ({{ k }}){% if not loop.last %}, {% endif %}{% endfor %}</td></tr>
{% endfor %}</table>{% elif doc.plan %}<h2>Configuration per vertex</h2>
<table><tr><th>id</th><th>name</th><th>config</th><th>split</th></tr>
{% for v in doc.plan.vertices %}<tr><td>{{ v.id }}</td><td>{{ v.name }}</td><td>{{ v.config }}</td>
<td>{{ v.split }}</td></tr>{% endfor %}</table>{% endif %}
</body></html>
"""


def method_text(cert: dict) -> str:
    """``method: message``, the method named once (a message may begin with it)."""
    method, message = str(cert.get("method") or "—"), str(cert.get("message") or "")
    if not message:
        return method
    return message if message.startswith(method + ":") else f"{method}: {message}"


#: The unit of each peer format's objective (the instance files' own definitions).
OBJECTIVE_UNITS = {
    "piper": ("time per sample (Piper's TPS: the pipeline's slowest stage per sample, in the "
              "instance's time unit)"),
    "pase": ("PaSE cost units (FLOPs of the vertices' computations plus the words moved "
             "times the file's words_to_flops)"),
}


def objective_unit(doc: dict) -> str:
    """What a peer document's primal and bound measure (empty for an unknown format)."""
    fmt = ((doc.get("spec") or {}).get("problem") or {}).get("format")
    return OBJECTIVE_UNITS.get(str(fmt), "")


def above_optimum_text(fraction: float | None) -> str:
    """A given plan's distance from the optimum: the JSON's ``above_optimum`` is the
    fraction ``(value - optimum) / optimum``, which printed raw (0.99999) read as "at the
    optimum" for a plan twice as slow; shown as a percentage and a ratio."""
    if fraction is None:
        return "—"
    return f"{100 * fraction:+.1f}% ({1 + fraction:.2f}x the optimum)"


def given_rows(given: dict) -> list[tuple[str, str]]:
    """(label, text) rows of a priced given plan (``given_plan``)."""
    if not given.get("valid"):
        return [("valid", "no"), ("reason", str(given.get("reason", "—")))]
    rows = [("value (the objective's units)", f"{given['value']:.6g}"),
            ("fits memory", "yes" if given.get("fits_memory") else "no")]
    if "above_optimum" in given:
        rows.append(("above the optimum", above_optimum_text(given["above_optimum"])))
    return rows


def given_plan_line(given: dict) -> str:
    """One console line for a priced given plan."""
    return "; ".join(f"{k} {v}" for k, v in given_rows(given))


def render_peer_report(doc: dict) -> str:
    """HTML of a peer solve document (autoescaped, strict undefined)."""
    env = print_style.install(doc_table_env(Environment(autoescape=True, undefined=StrictUndefined)))
    env.globals.update(zip=zip, method_text=method_text, given_rows=given_rows,
                       objective_unit=objective_unit)
    return env.from_string(_TEMPLATE).render(
        doc=doc, p=doc["spec"]["problem"], c=doc["certificate"],
        methods=method_rows(doc["certificate"].get("methods"), "certificate.methods", _value))


def _value(x: float | None) -> str:
    """A method record's figure in the objective's unit (6 significant digits, as the
    certificate above), an infinite bound as ∞ / −∞."""
    if x is None:
        return "—"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    return f"{x:.6g}"


def write_peer_report(doc: dict, path: Path) -> None:
    """Write the report atomically."""
    from autopar_opt.core.files import write_atomic    # not reports.render: no matplotlib here
    write_atomic(path, render_peer_report(doc))
