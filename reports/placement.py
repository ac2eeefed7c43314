"""HTML report of a placement (``placement.json`` document -> one self-contained page).

Same conventions as the plan report (:mod:`autopar_opt.reports.render`):
Jinja2 with autoescape and ``StrictUndefined``, no scripts, atomic write.
"""

from __future__ import annotations

import math

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from autopar_opt import __version__
from autopar_opt.core.result import bound_above
from autopar_opt.reports import print_style
from autopar_opt.reports.methods import method_rows

MAX_CUT_ROWS = 200
#: Devices holding no node that the device table lists one by one; past it one row
#: counts them, as the terminal summary of ``autopar place`` does (its ``SHOWN_IDLE``):
#: one row per device made an 11 MB report for 65,536 devices on a 3-node graph.
SHOWN_IDLE = 16


def _fmt(x: float | None) -> str:
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.6g}"


def _bound_fmt(x: float | None) -> str:
    """A method record's figure: an infinite bound is a proof (∞: infeasible), not a blank."""
    if x is not None and math.isinf(x):
        return "∞" if x > 0 else "−∞"
    return _fmt(x)


#: The statuses a placement.json can have (:func:`autopar_opt.placement.solve._status`).
STATUSES = ("optimal", "feasible", "infeasible", "no_solution")


def _check(doc: dict) -> None:
    """Refuse figures no placement has (a placement.json edited by hand): loads, bounds
    and gaps are non-negative numbers, the status is one the search writes, ``devices`` a
    list of device entries whose ``nodes`` are lists and ``details`` a mapping (QA round 34:
    ``devices: "x"``, a device's ``nodes: "x"``, ``details: []`` were rendered, exit 0)."""
    if doc["status"] not in STATUSES:
        raise ValueError(f"status {doc['status']!r} is not one of {', '.join(STATUSES)}")
    devices = doc.get("devices")
    if not isinstance(devices, list) or not all(
            isinstance(d, dict) and isinstance(d.get("nodes", []), list) for d in devices):
        raise ValueError("devices must be a list of {device, nodes: [ids], load, ...}, one "
                         "entry per device")
    if not isinstance(doc.get("details", {}), dict):
        raise ValueError(f"details = {doc['details']!r:.60} must be a mapping")
    for key in ("value", "lower_bound", "gap"):
        v = doc[key]
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or v < 0:
            raise ValueError(f"{key} = {v!r} is not a non-negative number (loads, latencies "
                             "and gaps are)")
    value, bound = doc["value"], doc["lower_bound"]
    if bound_above(bound, value):
        raise ValueError(f"lower_bound = {bound!r} is above value = {value!r}: no placement "
                         "beats the bound, this one included, so the file was edited")


def build_context(doc: dict) -> dict:
    """The template's context from a placement.json document."""
    from autopar_opt.core.result import PROOF_GAP, above_bound_text    # what "optimal" proves

    _check(doc)
    value, bound, gap = doc["value"], doc["lower_bound"], doc["gap"]
    proven = doc["status"] == "optimal"
    if doc["status"] == "infeasible":
        kind, headline = "infeasible", "No placement satisfies the constraints (proven)."
    elif proven and (gap is None or gap > PROOF_GAP):
        # "optimal" up to the gap the run asked for (--gap), as a MIP solver's status
        kind, headline = "proof", (f"Within the requested gap: {doc['objective']} {_fmt(value)} "
                                   f"is {above_bound_text(gap or 0)} above the proven bound "
                                   f"{_fmt(bound)} (gap {100 * (gap or 0):.3g}%); a better "
                                   "placement may exist within it.")
    elif proven:
        kind, headline = "proof", f"Optimal: {doc['objective']} {_fmt(value)} is proven minimal."
    else:
        kind = "no_proof"
        headline = (f"Best found {doc['objective']} {_fmt(value)}, "
                    f"{above_bound_text(gap)} above the proven bound (gap {100 * gap:.3g}%)."
                    if gap is not None else "No solution found within the limits.")
    stopped = (doc.get("details") or {}).get("stopped")
    if stopped and str(stopped).startswith("interrupted"):
        headline += f" The run was {stopped}."
    crit = doc.get("metrics", {}).get("critical_device")
    devices = [{"device": d["device"], "count": len(d["nodes"]), "compute": d["compute"],
                "comm": d["comm"], "load": d["load"], "memory_bytes": d["memory_bytes"],
                "capacity": _fmt(d.get("capacity_bytes")), "critical": i == crit}
               for i, d in enumerate(doc["devices"])]
    devices, idle_text = fold_idle(devices)
    cuts = doc.get("cut_edges", [])
    baselines = []
    for b in doc.get("baselines", []):
        v = b["value"]
        ratio = (v / value) if v is not None and value else None
        baselines.append({"name": b["name"], "value_text": _fmt(v),
                          "ratio_text": "—" if ratio is None else f"{ratio:.3f}x",
                          "violations": list(b.get("violations") or []),
                          "note": b.get("note") or ""})
    return {"instance": doc["instance"], "num_nodes": doc["num_nodes"],
            "num_edges": doc["num_edges"], "devices_text": doc["devices_text"],
            "objective": doc["objective"], "contiguous": doc["contiguous"],
            "method": doc["method"], "wall_time_s": doc["wall_time_s"], "version": __version__,
            "claim_kind": kind, "headline": headline, "value_text": _fmt(value),
            "bound_text": _fmt(bound), "gap_text": "—" if gap is None else f"{100 * gap:.4g}%",
            "status": doc["status"], "bound_source": doc.get("bound_source", ""),
            "time_unit": doc.get("time_unit", "the input file's time unit"),
            "transfers": doc.get("transfers"), "cycles": doc.get("cycles"),
            "devices": devices, "idle_text": idle_text, "cuts": cuts[:MAX_CUT_ROWS], "cut_count": len(cuts),
            "cuts_truncated": len(cuts) > MAX_CUT_ROWS, "baselines": baselines,
            "methods": method_rows((doc.get("details") or {}).get("methods"), "details.methods",
                                   _bound_fmt)}


def fold_idle(devices: list[dict]) -> tuple[list[dict], str | None]:
    """The device rows to list and, past :data:`SHOWN_IDLE` devices that hold no node,
    the one line that counts those instead (their compute, communication, load and
    memory are 0: a device without nodes sends and receives nothing); the critical
    device is always listed."""
    idle = [d for d in devices if d["count"] == 0 and not d["critical"]]
    if len(idle) <= SHOWN_IDLE:
        return devices, None
    kept = [d for d in devices if d["count"] or d["critical"]]
    return kept, (f"{len(idle):,} more devices hold no node ({idle[0]['device']} ... "
                  f"{idle[-1]['device']}; compute, communication, load and memory 0); "
                  "placement.json lists every device")


def render_placement_html(doc: dict) -> str:
    env = Environment(loader=PackageLoader("autopar_opt.reports", "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True,
                                                   enabled_extensions=("html", "j2")),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    print_style.install(env)
    from autopar_opt.reports.searcher import searcher_context

    return env.get_template("placement.html.j2").render(ctx=build_context(doc),
                                                        searcher=searcher_context(doc.get("searcher")))
