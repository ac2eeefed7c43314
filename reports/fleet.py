"""HTML report of a search on a mixed fleet (the fleet ``plan.json`` -> one self-contained page).

Draws the groups of the fleet as boxes scaled to their devices, each with what
runs on it (its pipeline stages with their layers, or the data-parallel class
and its batch share) and the links between them; then the answer with its
certificate, every group alone, the per-stage table and the configurations.
Same conventions as the plan report (:mod:`autopar_opt.reports.render`):
Jinja2 with autoescape and ``StrictUndefined``, no scripts, inline SVG.
"""

from __future__ import annotations

import math
from html import escape

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from autopar_opt import __version__
from autopar_opt.core.result import above_bound_text, bound_above
from autopar_opt.reports import print_style
from autopar_opt.reports.communication import fleet_communication
from autopar_opt.reports.formatting import (NO_TOKENS, alone_words, fleet_idle_mfu_note, fmt_pct,
                                           has_sequence)

#: Configuration rows shown in the report (all are in plan.json).
MAX_ROWS = 60
_COLOURS = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d"]


def _num(x) -> float | None:
    if x is None:
        return None
    if isinstance(x, str):
        return float(x.replace("infinity", "inf"))
    return float(x)


def _fmt(x) -> str:
    v = _num(x)
    return "—" if v is None or not math.isfinite(v) else f"{v:.6g}"


def fleet_svg(doc: dict) -> str:
    """The groups as rows of boxes (width by devices), the stages or classes on them,
    the links between the groups at the left. Generated markup only (names escaped)."""
    groups = doc["fleet"]["groups"]
    width, row_h, gap, left = 900.0, 54.0, 26.0, 150.0
    most = max(g["num_devices"] for g in groups)
    scale = (width - left - 10) / most
    height = len(groups) * (row_h + gap) + 10
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
             f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="Arial, sans-serif" font-size="11">']
    y_of = {}
    for k, g in enumerate(groups):
        y = 5 + k * (row_h + gap)
        y_of[g["name"]] = y
        w = g["num_devices"] * scale
        parts.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{row_h}" fill="#eef1f5" '
                     f'stroke="#8a94a3"/>')
        parts.append(f'<text x="4" y="{y + 18}" font-weight="bold">{escape(g["name"])}</text>')
        parts.append(f'<text x="4" y="{y + 33}">{g["nodes"]}x{g["gpus_per_node"]} {escape(g["device"])}</text>')
        parts.append(f'<text x="4" y="{y + 47}" fill="#5f6b7a">{g["num_devices"]} GPUs</text>')
    for row in doc["placement"]:
        y = y_of[row["group"]]
        x = left + row["first_rank"] * scale
        w = max(row["devices"] * scale, 1.0)
        colour = _COLOURS[(row["class"] if row["class"] is not None else row["index"]) % len(_COLOURS)]
        label = f"s{row['index']}: {row['layers']} layers"
        if row["class"] is not None:
            label = f"class {row['class']} (batch {row['batch']}) " + label
        parts.append(f'<rect x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="{row_h - 6}" fill="{colour}" '
                     f'fill-opacity="0.8" stroke="#ffffff"><title>{escape(label)}: '
                     f'{escape(row["first_layer"])}..{escape(row["last_layer"])}</title></rect>')
        if w > 60:
            parts.append(f'<text x="{x + 4:.1f}" y="{y + 30}" fill="#ffffff">{escape(label[:max(int(w / 6), 4)])}</text>')
    used = {row["group"] for row in doc["placement"]}
    for g in groups:
        if g["name"] not in used:
            y = y_of[g["name"]]
            parts.append(f'<text x="{left + 8}" y="{y + 30}" fill="#5f6b7a">not used by the plan</text>')
    for link in doc["fleet"]["links"]:
        a, b = link["between"]
        ya, yb = y_of[a] + row_h / 2, y_of[b] + row_h / 2
        x = left - 14
        parts.append(f'<path d="M{x} {ya} C{x - 20} {ya} {x - 20} {yb} {x} {yb}" fill="none" '
                     f'stroke="#b42318" stroke-width="1.5"/>')
        parts.append(f'<text x="{x - 60}" y="{(ya + yb) / 2 + 4:.1f}" fill="#b42318">'
                     f'{link["bandwidth_gb_per_s"]:g} GB/s</text>')
    parts.append("</svg>")
    return "".join(parts)


def _ratio(alone: dict, primal: float | None) -> str:
    """How much slower a group alone is than the fleet's plan: its plan's ratio, or, when
    no plan of it was searched, at least its bound's ratio."""
    if not primal:
        return "—"
    if alone["primal"] is not None:
        return f"{_num(alone['primal']) / primal:.3f}x"
    bound = _num(alone["lower_bound"])
    return f"≥ {bound / primal:.3f}x" if bound is not None and math.isfinite(bound) else "—"


#: The statuses a fleet search writes (``autopar_opt.core.bounds.Status``).
FLEET_STATUSES = ("optimal", "feasible", "infeasible", "no_plan", "interrupted", "not_solved")


def check_fleet_document(doc: dict) -> None:
    """Refuse what no fleet solve writes (a plan.json edited by hand), naming the key, as
    the plan and placement reports do (QA round 9: a bound above the plan, an unknown
    status, an empty group list, a stage on a group the fleet lacks, a negative batch
    were rendered, two of them as Python errors naming no key). Raises ValueError."""
    status = doc.get("status")
    if status not in FLEET_STATUSES:
        raise ValueError(f"status = {status!r} is not one of {', '.join(FLEET_STATUSES)}")
    cert = doc.get("certificate") or {}
    primal, bound = _num(cert.get("primal")), _num(cert.get("lower_bound"))
    if bound_above(bound, primal):
        raise ValueError(f"certificate.lower_bound = {bound:g} is above certificate.primal = "
                         f"{primal:g}: no plan beats the bound, this one included")
    groups = (doc.get("fleet") or {}).get("groups") or []
    if not groups:
        raise ValueError("fleet.groups is empty: a fleet has at least one group")
    names = set()
    for i, g in enumerate(groups):
        if not isinstance(g, dict) or not all(k in g for k in ("name", "nodes", "num_devices")):
            raise ValueError(f"fleet.groups[{i}] lacks name, nodes or num_devices")
        if not isinstance(g["num_devices"], int) or g["num_devices"] < 1 \
                or not isinstance(g["nodes"], int) or g["nodes"] < 1:
            raise ValueError(f"fleet.groups[{i}] ({g['name']!r}) has {g['nodes']} nodes and "
                             f"{g['num_devices']} devices: a group has at least one of each")
        names.add(g["name"])
    for i, row in enumerate(doc.get("placement") or []):
        if row.get("group") not in names:
            raise ValueError(f"placement[{i}].group = {row.get('group')!r} is no group of "
                             f"fleet.groups ({', '.join(sorted(map(str, names)))})")
        batch = row.get("batch")
        if batch is not None and (not isinstance(batch, int) or batch < 1):
            raise ValueError(f"placement[{i}].batch = {batch!r} is not a positive whole "
                             "number of samples")
    plan = doc.get("plan") if isinstance(doc.get("plan"), dict) else {}
    for i, cls in enumerate(plan.get("classes") or []):
        batch = cls.get("batch")
        if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
            raise ValueError(f"plan.classes[{i}].batch = {batch!r} is not a positive whole "
                             "number of samples")
        unknown = [n for n in cls.get("groups") or [] if n not in names]
        if unknown:
            raise ValueError(f"plan.classes[{i}].groups: {unknown[0]!r} is no group of "
                             f"fleet.groups ({', '.join(sorted(map(str, names)))})")
    for link in (doc.get("fleet") or {}).get("links") or []:
        unknown = [n for n in link.get("between", []) if n not in names]
        if unknown:
            raise ValueError(f"fleet.links: {unknown[0]!r} is no group of fleet.groups")


def build_context(doc: dict) -> dict:
    """The template's context from a fleet plan.json."""
    check_fleet_document(doc)
    cert = doc["certificate"]
    status = doc["status"]
    primal, bound, gap = _num(cert["primal"]), _num(cert["lower_bound"]), _num(cert["gap"])
    if status == "optimal":
        kind = "proof"
        headline = (f"Optimal within {100 * doc['solver']['rel_gap']:.3g}%: iteration {_fmt(primal)} s, "
                    f"no plan in the space is faster than {_fmt(bound)} s.")
    elif status == "infeasible":
        kind, headline = "infeasible", "No plan fits on this fleet (proven)."
    elif primal is not None:
        kind = "no_proof"
        headline = (f"Best found {_fmt(primal)} s, {above_bound_text(gap)} above the proven "
                    f"bound {_fmt(bound)} s (gap {100 * gap:.3g}%)."
                    if gap is not None and math.isfinite(gap)
                    else f"Best found {_fmt(primal)} s; no bound proven.")
    else:
        kind, headline = "no_proof", "No plan found within the limits."
    rows = []
    for r in cert["configurations"][:MAX_ROWS]:
        if "classes" in r:
            what = "classes " + " | ".join("+".join(c) for c in r["classes"]) + \
                   " batch " + "+".join(map(str, r["batches"]))
        else:
            what = (f"pp={r['pp']} c={r['microbatches']} {r['schedule']} groups "
                    + "+".join(r.get("stage_groups", [])))
        rows.append({"what": what, "status": r["status"], "primal": _fmt(r["primal"]),
                     "bound": _fmt(r["lower_bound"]), "time": f"{r['time_s']:.2f}"})
    homo = [{"group": h["group"], "devices": h["devices"],
             "primal": _fmt(h["primal"]) if h["primal"] is not None else
             "— (" + alone_words(None, h.get("statuses"), _fmt(h["lower_bound"])) + ")",
             "bound": _fmt(h["lower_bound"]), "ratio": _ratio(h, primal)}
            for h in doc["homogeneous"]]
    m = doc["metrics"] or {}
    return {"model": doc["spec"]["model"]["name"], "fleet": doc["fleet"], "status": status,
            "claim_kind": kind, "headline": headline, "shape": doc["shape"] or "—",
            "best": doc["best_configuration"] or "—", "primal": _fmt(primal), "bound": _fmt(bound),
            "gap": "—" if gap is None or not math.isfinite(gap) else f"{100 * gap:.4g}%",
            "metrics": {"samples_per_s": _fmt(m.get("samples_per_s")),
                        "tokens_per_s": f"{_fmt(m.get('tokens_per_s'))} tokens/s"
                        if has_sequence(doc) else NO_TOKENS,
                        "mfu": "—" if m.get("mfu") is None else f"{fmt_pct(m['mfu'], 1)}"
                        f"{fleet_idle_mfu_note(m['mfu'], doc['fleet']['groups'], doc['placement'])}",
                        "sync_s": _fmt(m.get("sync_s")),
                        "interval": str((m.get("interval") or {}).get("text") or "")},
            "communication": fleet_communication(doc),
            "placement": [{**p, "time": _fmt(p["time_s"]), "memory": _fmt(p["peak_memory_gib"]),
                           "capacity": _fmt(p["capacity_gib"]), "strategies": ", ".join(p["strategies"])}
                          for p in doc["placement"]],
            "homogeneous": homo, "rows": rows, "row_count": len(cert["configurations"]),
            "notices": doc["notices"], "assumptions": doc["cost_model"]["assumptions"],
            "case": [str(a) for a in doc["cost_model"].get("case") or []],
            "quantum": doc["search_space"].get("batch_split_quantum"),
            "wall_time_s": doc["solver"]["wall_time_s"], "version": __version__}


def render_fleet_html(doc: dict) -> str:
    """The fleet report as one HTML string."""
    env = Environment(loader=PackageLoader("autopar_opt.reports", "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True,
                                                   enabled_extensions=("html", "j2")),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    print_style.install(env)
    return env.get_template("fleet.html.j2").render(ctx=build_context(doc), svg=Markup(fleet_svg(doc)))
