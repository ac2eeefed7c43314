"""Render ``capacity.html``: the capacity document as one self-contained page.

Same rules as the plan report (:mod:`autopar_opt.reports.render`): Jinja2
with autoescape and ``StrictUndefined``, inline SVG charts, no scripts, no
external URLs. Links to the scenarios' own plan reports are relative
(``scenarios/<id>/report.html``), so the output folder can be moved or
zipped as a whole.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from markupsafe import Markup

from autopar_opt.reports.capacity_charts import pareto_svg, scaling_svg
from autopar_opt.reports.render import _environment, write_atomic
from autopar_opt.reports.formatting import fmt_money, runs_behind

TEMPLATE = "capacity.html.j2"


def _fmt(x: float | None, spec) -> str:
    """``x`` by a format spec, or by a function of one number (money)."""
    return "-" if x is None else (spec(x) if callable(spec) else format(x, spec))


def _interval(pair: list, spec) -> str:
    lo, hi = pair
    if lo is None and hi is None:
        return "-"
    return f"{_fmt(lo, spec)} – {_fmt(hi, spec) if hi is not None else '?'}"


def _rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Table rows: display strings only (the template does no arithmetic)."""
    front = {m["id"] for m in doc["answers"]["pareto_time_cost"]["frontier"]}
    rows = []
    for e in doc["scenarios"]:
        plan = e["plan"] or {}
        rows.append({"id": e["id"], "device": e["device"], "gpus": e["gpus"],
                     "batch": e["global_batch_size"], "status": e["status"],
                     "gap": "-" if e["gap"] is None else f"{100 * e['gap']:.2f}%",
                     "days": _interval(e["time_to_train_days"], ".3g"),
                     "days_measured": (_interval(e["model_error"]["time_to_train_days"], ".3g")
                                       + f" (from {runs_behind(e['model_error'])})"
                                       if e.get("model_error") else "-"),
                     "cost": _interval(e["cost"], fmt_money),
                     "tokens": _interval(e["throughput_tokens_per_s"], ".3g"),
                     "meets": e["meets"], "frontier": e["id"] in front,
                     "plan": (f"{plan['shape']}: {plan['configuration']}" if "shape" in plan else
                              f"pp={plan['pp']} c={plan['microbatches']}; {plan['strategies']}"
                              if plan else (e["reason"] or "")),
                     "report": e.get("report")})
    return rows


def scenario_notes(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """What the sweep changed or kept for some scenarios (a search degree left out where it
    does not fit, a fleet group not swept, a sweep of the base alone), each note once with
    the scenarios it concerns: the terminal summary prints them, and the report a person
    forwards must say them too (QA round 31: capacity.html left them out)."""
    said: dict[str, list[str]] = {}
    for e in doc["scenarios"]:
        for note in e.get("notes") or []:
            said.setdefault(note, []).append(e["id"])
    return [{"text": note, "ids": ", ".join(ids[:12]) + (f" and {len(ids) - 12} more"
                                                         if len(ids) > 12 else "")}
            for note, ids in said.items()]


def render_capacity_html(doc: dict[str, Any]) -> str:
    """The capacity report as one HTML string."""
    cur = doc["planning"]["prices"]["currency"]
    frontier = [m["id"] for m in doc["answers"]["pareto_time_cost"]["frontier"]]
    pareto = pareto_svg(doc["scenarios"], frontier, doc["planning"]["deadline_days"], cur)
    scaling = scaling_svg(doc["scenarios"])
    charts = {"pareto": Markup(pareto) if pareto else None,
              "scaling": Markup(scaling) if scaling else None}
    gaps = [e["gap"] for e in doc["scenarios"] if e["gap"] is not None]
    facts = {"n": len(doc["scenarios"]), "max_gap": f"{100 * max(gaps):.2f}%" if gaps else "-",
             "no_plan": sum(1 for e in doc["scenarios"] if e["primal"] is None)}
    return _environment().get_template(TEMPLATE).render(doc=doc, rows=_rows(doc), charts=charts,
                                                        facts=facts, currency=cur,
                                                        notes=scenario_notes(doc))


def write_capacity_report(doc: dict[str, Any], path: str | Path) -> None:
    """Render ``doc`` and write it to ``path`` atomically."""
    write_atomic(render_capacity_html(doc), str(path))
