"""Render ``capacity.html``: the capacity document as one self-contained page.

Same rules as the plan report (:mod:`autopar_opt.reports.render`): Jinja2
with autoescape and ``StrictUndefined``, inline SVG charts, no scripts, no
external URLs. Links to the scenarios' own plan reports are relative
(``scenarios/<id>/report.html``), so the output folder can be moved or
zipped as a whole.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any


from autopar_opt.reports.capacity_charts import pareto_svg, scaling_svg
from autopar_opt.reports.svg_inline import inline_svg
from autopar_opt.reports.render import _environment, write_atomic
from autopar_opt.reports.document import ReportInputError
from autopar_opt.reports.formatting import (fmt_beside, fmt_money, fmt_pct_up, runs_behind, scenario_notes,
                                            some_ids)

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
    """Table rows: display strings only (the template does no arithmetic); days and
    tokens/s are never rounded across the deadline and the throughput target they are
    judged against (:func:`~autopar_opt.reports.formatting.fmt_beside`)."""
    planning = doc.get("planning") or {}
    days = functools.partial(fmt_beside, threshold=planning.get("deadline_days"))
    rate = functools.partial(fmt_beside, threshold=planning.get("target_tokens_per_s"))
    front = {m["id"] for m in doc["answers"]["pareto_time_cost"]["frontier"]}
    rows = []
    for e in doc["scenarios"]:
        plan = e["plan"] or {}
        rows.append({"id": e["id"], "device": e["device"], "gpus": e["gpus"],
                     "batch": e["global_batch_size"], "status": e["status"],
                     "gap": "-" if e["gap"] is None else fmt_pct_up(e["gap"]),
                     "days": _interval(e["time_to_train_days"], days),
                     "days_measured": (_interval(e["model_error"]["time_to_train_days"], ".3g")
                                       + f" (from {runs_behind(e['model_error'])})"
                                       if e.get("model_error") else "-"),
                     "cost": _interval(e["cost"], fmt_money),
                     "tokens": _interval(e["throughput_tokens_per_s"], rate),
                     "meets": e["meets"], "frontier": e["id"] in front,
                     "plan": (f"{plan['shape']}: {plan['configuration']}" if "shape" in plan else
                              f"pp={plan['pp']} c={plan['microbatches']}; {plan['strategies']}"
                              if plan else (e["reason"] or "")),
                     "report": e.get("report")})
    return rows


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _shown(x: Any) -> str:
    """A value as the JSON file writes it (null, not None), cut to 60 characters."""
    text = json.dumps(x, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def capacity_problems(doc: dict[str, Any]) -> list[str]:
    """What a capacity.json lacks, or holds of the wrong kind, among the values the report
    computes with, each by its key: a hand-edited file was refused naming a Python
    exception ("IndexError: list index out of range"; QA round 11). At most 20."""
    out: list[str] = []
    scenarios = doc.get("scenarios")
    if not isinstance(scenarios, list):
        return [f"scenarios = {_shown(scenarios)}: must be a list of scenario entries"]
    for i, e in enumerate(scenarios):
        if not isinstance(e, dict):
            out.append(f"scenarios[{i}]: must be a mapping (one scenario)")
            continue
        for name in ("id", "device", "gpus", "global_batch_size", "status", "gap",
                     "time_to_train_days", "cost", "throughput_tokens_per_s", "meets"):
            if name not in e:
                out.append(f"scenarios[{i}].{name}: missing")
        for name in ("time_to_train_days", "cost", "throughput_tokens_per_s"):
            pair = e.get(name, [None, None])
            if not (isinstance(pair, list) and len(pair) == 2
                    and all(x is None or _number(x) for x in pair)):
                out.append(f"scenarios[{i}].{name} = {_shown(pair)}: must be [low, high], numbers or null")
        if e.get("gap") is not None and not _number(e.get("gap")):
            out.append(f"scenarios[{i}].gap = {_shown(e.get('gap'))}: must be a number or null")
        for name in ("plan", "model_error"):
            if e.get(name) is not None and not isinstance(e.get(name), dict):
                out.append(f"scenarios[{i}].{name} = {_shown(e.get(name))}: must be a mapping or null")
    frontier = ((doc.get("answers") or {}).get("pareto_time_cost") or {}).get("frontier")
    if not (isinstance(frontier, list) and all(isinstance(m, dict) and "id" in m for m in frontier)):
        out.append(f"answers.pareto_time_cost.frontier = {_shown(frontier)}: must be a list of {{id: ...}}")
    return out[:20]


def _reasons(doc: dict[str, Any]) -> list[dict[str, str]]:
    """Why scenarios have no plan, or a plan that is not proven, each reason once with its
    scenarios, as the terminal says them (QA round 35: the report showed "feasible" and a
    gap, the reason, e.g. the scenario's time limit, in capacity.json only)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for e in doc["scenarios"]:
        if e.get("reason"):
            label = "Invalid" if e.get("status") == "invalid" else \
                "No plan" if e.get("primal") is None else "Not proven"
            groups.setdefault((label, e["reason"]), []).append(e["id"])
    return [{"label": label, "text": text, "ids": some_ids(ids, 12)}
            for (label, text), ids in groups.items()]


def render_capacity_html(doc: dict[str, Any]) -> str:
    """The capacity report as one HTML string; :class:`ReportInputError` naming every key
    of :func:`capacity_problems`."""
    problems = capacity_problems(doc)
    if problems:
        raise ReportInputError(problems)
    cur = doc["planning"]["prices"]["currency"]
    frontier = [m["id"] for m in doc["answers"]["pareto_time_cost"]["frontier"]]
    pareto = pareto_svg(doc["scenarios"], frontier, doc["planning"]["deadline_days"], cur)
    scaling = scaling_svg(doc["scenarios"])
    charts = {"pareto": inline_svg(pareto, "pareto-svg", "Time to train against cost, one point per "
                                   "scenario, with the proven bounds (the table below lists each)")
              if pareto else None,
              "scaling": inline_svg(scaling, "scaling-svg", "Throughput against GPU count per device "
                                    "type and batch size (the table below lists each scenario)")
              if scaling else None}
    gaps = [e["gap"] for e in doc["scenarios"] if e["gap"] is not None]
    facts = {"n": len(doc["scenarios"]), "max_gap": fmt_pct_up(max(gaps)) if gaps else "-",
             "no_plan": sum(1 for e in doc["scenarios"] if e["primal"] is None)}
    return _environment().get_template(TEMPLATE).render(doc=doc, rows=_rows(doc), charts=charts,
                                                        facts=facts, currency=cur,
                                                        notes=scenario_notes(doc),
                                                        reasons=_reasons(doc))


def write_capacity_report(doc: dict[str, Any], path: str | Path) -> None:
    """Render ``doc`` and write it to ``path`` atomically."""
    write_atomic(render_capacity_html(doc), str(path))
