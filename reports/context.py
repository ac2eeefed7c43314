"""The report's plain, JSON-able context, built from the ``plan.json`` document only.

The context carries every number and sentence the template shows, so the
template stays free of logic and the context can be golden-tested.

The headline claim (docs/DESIGN.md §4). With ``T`` the plan's predicted iteration
time (``certificate.primal``) and ``L`` the global lower bound
(``certificate.lower_bound``, the minimum of the per-configuration bounds):

* ``X = (T − L) / L`` is how much faster the best plan of the search space can
  possibly be: every plan's iteration time is ≥ ``L``, so its throughput is at
  most ``T/L = 1 + X`` times this plan's. The report says "No plan in this
  search space is more than X% faster under this cost model" with ``X`` rounded
  **up**.
* The certificate gap ``g = (T − L) / T`` (:func:`relative_gap`, the project's
  one gap function) is how much lower any plan's iteration time can be;
  ``X = g / (1 − g)``.
* Without an exact certificate (``certificate.exact`` false), without a plan,
  or with an infinite gap there is NO optimality claim, and the report says so.
"""

from __future__ import annotations

import math
from typing import Any

from autopar_opt.core.result import status_words
from autopar_opt.ir.training import schedule_text
from autopar_opt.reports.document import ReportInputError, is_finite, to_float, validate_document
from autopar_opt.reports.launch import launch_section
from autopar_opt.reports.methods import method_rows
from autopar_opt.reports.formatting import (causal_mfu_note, idle_gpus_mfu_note, fmt_gib, fmt_pct,
                                            fmt_pct_up, fmt_rate, fmt_time, fmt_time_range, fmt_value,
                                            has_sequence, NCCL_BUFFERS_WORDS,
                                            tight_note, tokens_rate)
from autopar_opt.reports.communication import communication_section
from autopar_opt.reports.runnability import runnability_section
from autopar_opt.reports.sections import (plan_degree_lines, baselines_section, breakdown_section,
                                          infeasibility_section, memory_section,
                                          plan_section, solver_section, space_section,
                                          timeline_left_out, timeline_section)
from autopar_opt.core.result import bound_above, relative_gap

GAP_TOLERANCE = 1e-6


def build_context(plan_doc: dict, draw_timeline: bool = True) -> dict:
    """Every value the template shows, from the plan document alone.

    ``draw_timeline`` false leaves the timeline out (with a note saying why):
    ``autopar solve`` passes it when the time left cannot pay for drawing it
    (:mod:`autopar_opt.reports.cost`).

    Raises :class:`ReportInputError` listing every missing key or bad value.
    """
    problems = validate_document(plan_doc)
    if problems:
        raise ReportInputError(problems)
    doc = plan_doc
    warnings: list[str] = []
    cert = certificate_section(doc, warnings)
    ctx: dict[str, Any] = {
        "schema_version": doc["schema_version"],
        "tool": doc.get("tool") or {"name": "autopar-opt", "version": "unknown"},
        "created_utc": doc.get("created_utc") or "unknown",
        "status": status_words(doc["status"], doc["certificate"].get("gap")),
        "spec": spec_section(doc),
        "answer": answer_section(doc),
        "runnability": runnability_section(doc),
        "launch": launch_section(doc) if doc["plan"] is not None else None,
        "claim": claim_section(doc, cert),
        "certificate": cert,
        "search_space": space_section(doc),
        "cost_model": {"assumptions": [str(a) for a in doc["cost_model"]["assumptions"]],
                       "case": [str(a) for a in doc["cost_model"].get("case") or []],
                       "params": [{"name": k, "value": fmt_value(v)}
                                  for k, v in (doc["cost_model"].get("params") or {}).items()]},
        "plan": plan_section(doc),
        "timeline": timeline_section(doc, draw_timeline),
        "timeline_left_out": timeline_left_out(doc, draw_timeline),
        "memory": memory_section(doc),
        "breakdown": breakdown_section(doc),
        "communication": communication_section(doc),
        "baselines": baselines_section(doc),
        "solver": solver_section(doc),
        "infeasibility": infeasibility_section(doc),
        "notices": [str(n) for n in doc.get("notices") or []],
    }
    _check_primal_matches_metrics(doc, cert, warnings)
    _check_physical_metrics(doc, warnings)
    ctx["warnings"] = warnings
    return ctx


def spec_section(doc: dict) -> dict:
    """Model, cluster and training summary."""
    spec = doc["spec"]
    model, cluster, training = spec["model"], spec["cluster"], spec.get("training") or {}
    return {
        "path": str(spec.get("path", "")),
        "model_name": str(model["name"]),
        "model_layers": model.get("num_layers"),
        "model_params": _params(model),
        "model_is_chain": model.get("is_chain"),
        "model_source": str(model.get("source", "")),
        "model_architecture": str(model.get("architecture") or ""),
        "model_measured": str(model.get("measured") or ""),
        "cluster_name": str(cluster["name"]),
        "cluster_shape": f"{cluster['nodes']} node(s) × {cluster['gpus_per_node']} GPUs = "
                         f"{cluster['num_devices']} devices",
        # the catalog part with the memory the spec set on it (cluster.device_memory_gib)
        "device": str(cluster["device"]) + (
            f" (memory set to {cluster['device_memory_gib']:g} GiB by cluster.device_memory_gib)"
            if cluster.get("device_memory_gib") else ""),
        "hbm_gib": fmt_gib(to_float(cluster["hbm_gib"], "spec.cluster.hbm_gib")),
        "peak_tflops": cluster.get("peak_tflops"),
        "links": [_link(cluster.get(k), label) for k, label in
                  (("intra_node", "intra-node"), ("inter_node", "inter-node")) if cluster.get(k)],
        "training": [{"name": k, "value": fmt_value(v)} for k, v in training.items()],
    }


def _params(model: dict) -> str:
    """The built parameter count, with the active count where an MoE's differs
    (``spec.model.params_active``, absent in documents written before it), and the
    layers with a sliding attention window (``spec.model.attention_windows``)."""
    if not model.get("params"):
        return "—"
    text = fmt_rate(model["params"], "parameters")
    active = model.get("params_active")
    if active is not None and active != model["params"]:
        text += f" ({fmt_rate(active, 'active per token')})"
    if model.get("attention_windows"):          # absent in documents written before it
        text += f" · {model['attention_windows']}"
    return text


def _link(link: dict, label: str) -> str:
    return (f"{label}: {link.get('name', '?')}, {link.get('bandwidth_gb_per_s', '?')} GB/s, "
            f"{link.get('latency_us', '?')} µs")


def answer_section(doc: dict) -> dict | None:
    """Headline numbers of the chosen plan (None without a plan)."""
    m = doc["metrics"]
    if doc["plan"] is None or m is None:
        return None
    peaks = [to_float(s["peak_memory_gib"], f"metrics.stages[{i}].peak_memory_gib")
             for i, s in enumerate(m["stages"])]
    cap = to_float(m["memory_capacity_gib"], "metrics.memory_capacity_gib")
    peak = max(peaks) if peaks else 0.0
    return {
        "iteration_time": fmt_time(to_float(m["iteration_time_s"], "metrics.iteration_time_s")),
        "samples_per_s": fmt_rate(to_float(m["samples_per_s"], "metrics.samples_per_s"), "samples/s"),
        "tokens_per_s": tokens_rate(to_float(m["tokens_per_s"], "metrics.tokens_per_s"),
                                    has_sequence(doc)),
        "mfu": fmt_pct(to_float(m["mfu"], "metrics.mfu"), 1),
        "hfu": fmt_pct(to_float(m.get("hfu"), "metrics.hfu"), 1),
        "mfu_causal": causal_mfu_note(m.get("mfu"), m.get("mfu_causal")).strip(" ()"),
        "mfu_definition": mfu_definition(doc),
        "bubble": fmt_time(to_float(m.get("bubble_s"), "metrics.bubble_s")),
        "peak_memory": fmt_gib(peak),
        "capacity": fmt_gib(cap),
        # a device not full never reads 100%: 75.80 of 76.00 GiB did (QA round 10)
        "memory_share": (">99%" if peak < cap and fmt_pct(peak / cap, 0) == "100%"
                         else fmt_pct(peak / cap, 0)) if cap else "—",
        "fits": bool(m.get("feasible", peak <= cap + 1e-9)),
        "tight": bool(tight_note(peak, cap)),
        "tight_words": NCCL_BUFFERS_WORDS,
        "layout": f"pp={doc['plan']['pp']}"
                  + (f" (stage devices {'+'.join(map(str, doc['plan']['stage_devices']))})"
                     if doc["plan"].get("stage_devices") else "")
                  + f", {doc['plan']['microbatches']} micro-batches, {doc['plan']['schedule']}",
        "interval": _interval(m.get("interval")),
        "degrees": plan_degree_lines(doc["plan"]),
        "recompute": str(doc["plan"].get("recompute") or ""),
    }


def mfu_definition(doc: dict) -> str:
    """What the MFU card divides by, with the figures of this document (QA round 36: the
    report printed "MFU 54.3%" with no definition; README and ``cost.evaluate.evaluate``:
    model FLOPs of one iteration over the iteration time times the datasheet dense peak of
    the training dtype of every GPU of the cluster, idle ones included), and the plan's
    own utilisation when it leaves GPUs idle (:func:`idle_gpus_mfu_note`, as the terminal)."""
    cluster = doc["spec"].get("cluster") or {}
    peak, n = cluster.get("peak_tflops"), cluster.get("num_devices")
    dtype = (doc["spec"].get("training") or {}).get("dtype", "the training dtype")
    of = (f"{peak:g} TFLOP/s (the {cluster.get('device', 'device')}'s datasheet dense {dtype} peak)"
          f" × {n} GPUs" if isinstance(peak, (int, float)) and isinstance(n, int)
          else f"the datasheet dense {dtype} peak of every GPU")
    idle = idle_gpus_mfu_note(doc["metrics"].get("mfu"), doc["plan"].get("stage_devices"), n)
    return ("MFU = the model's FLOPs of one iteration (forward and backward of every layer, a "
            "causal attention core counted whole, recomputation not counted) ÷ (iteration time × "
            f"{of}, every GPU of the cluster); HFU also counts the recomputed FLOPs.{idle}")


def _interval(iv: dict | None) -> dict | None:
    """The error bar of the iteration time (``metrics.interval``, written by
    ``autopar_opt.cost.interval``; None in documents written before it)."""
    if not iv:
        return None
    return {"range": fmt_time_range(to_float(iv['low'], 'metrics.interval.low'),
                                    to_float(iv['high'], 'metrics.interval.high')),
            "level": fmt_pct(to_float(iv["level"], "metrics.interval.level"), 0),
            "text": str(iv.get("text", "")), "wide": bool(iv.get("wide"))}


def _config_rows(cert: dict, global_lb: float) -> list[dict]:
    rows = []
    for i, row in enumerate(cert["configurations"]):
        where = f"certificate.configurations[{i}]"
        lb = to_float(row["lower_bound"], f"{where}.lower_bound")
        primal = to_float(row["primal"], f"{where}.primal")
        gap = to_float(row["gap"], f"{where}.gap")
        rows.append({
            "pp": (f"{row['pp']} ({'+'.join(map(str, row['stage_devices']))})"
                   if row.get("stage_devices") else row["pp"]),
            "microbatches": row["microbatches"],
            "schedule": schedule_text(str(row["schedule"]), row.get("vp_chunks")),
            "status": str(row["status"]), "primal": fmt_time(primal), "lower_bound": fmt_time(lb),
            "gap": fmt_pct(gap), "time": fmt_time(to_float(row["time_s"], f"{where}.time_s")),
            "pruned_by": str(row["pruned_by"]) if row["pruned_by"] is not None else "",
            "model_hash": str(row.get("model_hash") or ""),
            "is_min_bound": lb is not None and _same(lb, global_lb),
            "lower_bound_s": lb, "pp_degree": row["pp"],
        })
    return rows


def _same(a: float, b: float) -> bool:
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def certificate_section(doc: dict, warnings: list[str]) -> dict:
    """Global bound, gap and the per-configuration table; flags inconsistencies."""
    cert = doc["certificate"]
    primal = to_float(cert["primal"], "certificate.primal")
    lb = to_float(cert["lower_bound"], "certificate.lower_bound")
    if lb is None:
        raise ReportInputError(["'certificate.lower_bound' must be a number or \"-inf\", got null"])
    if is_finite(lb) and bound_above(lb, primal):
        # a bound above the plan's own time proves nothing (QA round 9: rendered as a
        # certificate with a -78% possible speed-up)
        raise ReportInputError([f"'certificate.lower_bound' = {lb:g} is above 'certificate.primal'"
                                f" = {primal:g}: no plan is faster than the bound, the plan "
                                "included, so the file was edited or corrupted"])
    gap = relative_gap(primal, lb)
    doc_gap = to_float(cert["gap"], "certificate.gap")
    if doc_gap is not None and not _close_or_both_inf(gap, doc_gap):
        warnings.append(f"certificate.gap = {fmt_pct(doc_gap)} differs from (primal − lower bound)"
                        f" / primal = {fmt_pct(gap)}; the report uses the latter.")
    rows = _config_rows(cert, lb)
    bounds = [r["lower_bound_s"] for r in rows if r["lower_bound_s"] is not None]
    if bounds and not _same(min(bounds), lb):
        warnings.append(f"the global lower bound {fmt_time(lb)} is not the minimum of the "
                        f"per-configuration bounds ({fmt_time(min(bounds))}).")
    shown, groups = compact_rows(rows, primal)
    for r in rows:
        del r["lower_bound_s"], r["pp_degree"]
    speedup = (primal - lb) / lb if primal is not None and is_finite(lb) and lb > 0 else math.inf
    return {"primal": fmt_time(primal), "lower_bound": fmt_time(lb), "gap": fmt_pct(gap),
            "gap_value": gap if math.isfinite(gap) else "inf",
            "speedup_bound": fmt_pct_up(speedup) if math.isfinite(speedup) else "∞",
            "speedup_value": speedup if math.isfinite(speedup) else "inf",
            "exact": bool(cert["exact"]), "configurations": shown, "groups": groups,
            "total": len(rows), "min_bound_count": sum(r["is_min_bound"] for r in rows),
            "listed_at_most": LISTED_AT_MOST,
            "methods": method_rows(cert.get("methods"), "certificate.methods", fmt_time)}


#: Above this many configurations the report's table shows the ones that decide the
#: certificate and groups the rest (issue 29: a 300-configuration search stays readable).
COMPACT_ABOVE = 40

#: At most this many configurations are listed one by one in a compacted table (issue 33:
#: a time-limited search of 15,000 configurations, most of them left open, gave a 15,000-row
#: table); the rest, open ones included, are grouped.
LISTED_AT_MOST = 40

#: At most this many groups are listed by status and pipeline degree; beyond it, by status
#: alone (the pipeline degrees as a range).
GROUPS_AT_MOST = 40

_OPEN = ("not_solved", "feasible", "error", "heuristic")


def compact_rows(rows: list[dict], primal: float | None) -> tuple[list[dict], list[dict]]:
    """``(rows shown one by one, groups of the rest)``; every row when there are at most
    :data:`COMPACT_ABOVE`. Otherwise the rows listed are the ones that decide the
    certificate: the winner (its primal is the answer), then the rows at the global
    bound, at most :data:`LISTED_AT_MOST` in all. The rest are grouped by status and
    pipeline degree (by status alone above :data:`GROUPS_AT_MOST` groups) with their count
    and the range of their bounds: closed ones (each bound at or above the answer, or
    proven infeasible) and open ones (not solved, feasible, error, heuristic: their bounds
    are what the global bound is the minimum of) alike; plan.json keeps every row."""
    if len(rows) <= COMPACT_ABOVE:
        return rows, []
    answer = fmt_time(primal) if primal is not None else None
    winners = [r for r in rows if answer is not None and r["primal"] == answer]
    at_bound = [r for r in rows if r["is_min_bound"] and not (answer is not None
                                                               and r["primal"] == answer)]
    shown = (winners + at_bound)[:LISTED_AT_MOST]
    listed = {id(r) for r in shown}
    rest = [r for r in rows if id(r) not in listed]
    groups = _groups(rest, by_pp=True)
    if len(groups) > GROUPS_AT_MOST:
        groups = _groups(rest, by_pp=False)
    out = []
    for g in sorted(groups.values(), key=lambda g: (g["status"], g["lo"] is None, g["lo"] or 0.0,
                                                  _first_degree(g["pp"]), str(g["pp"]))):
        if g["lo"] is None:
            bound = "none"
        else:
            bound = fmt_time(g["lo"]) if _same(g["lo"], g["hi"]) else \
                f"{fmt_time(g['lo'])} – {fmt_time(g['hi'])}"
        out.append({"status": g["status"], "pp": g["pp"], "count": g["count"], "bounds": bound})
    return shown, out


def _first_degree(pp: object) -> int:
    """The (first) pipeline degree of a group, for ordering ("4", 4 or "2–32": 4, 4, 2)."""
    head = str(pp).split("–")[0]
    return int(head) if head.isdigit() else 1 << 30


def _groups(rows: list[dict], by_pp: bool) -> dict[tuple, dict]:
    """Rows grouped by status (and pipeline degree): count, bound range (``lo`` None when
    no row of the group has a bound), the pipeline degrees (a range when not ``by_pp``)."""
    groups: dict[tuple, dict] = {}
    for r in rows:
        degree = r.get("pp_degree", r["pp"])
        if not isinstance(degree, (int, str)):     # a hand-edited document: keep it hashable
            degree = str(degree)
        key = (r["status"], str(degree)) if by_pp else (r["status"],)
        g = groups.setdefault(key, {"status": r["status"], "count": 0, "lo": None, "hi": None,
                                    "degrees": set()})
        g["count"] += 1
        g["degrees"].add(degree)
        mine = r["lower_bound_s"]
        if mine is not None:
            g["lo"] = mine if g["lo"] is None else min(g["lo"], mine)
            g["hi"] = mine if g["hi"] is None else max(g["hi"], mine)
    for g in groups.values():
        degrees = g.pop("degrees")
        numbers = sorted(d for d in degrees if isinstance(d, int) and not isinstance(d, bool))
        if len(degrees) == 1:
            g["pp"] = next(iter(degrees))
        elif len(numbers) == len(degrees):
            g["pp"] = f"{numbers[0]}–{numbers[-1]}"
        else:
            g["pp"] = ", ".join(sorted(map(str, degrees)))[:60]
    return groups


def _close_or_both_inf(a: float, b: float) -> bool:
    if math.isinf(a) or math.isinf(b):
        return math.isinf(a) and math.isinf(b)
    return abs(a - b) <= GAP_TOLERANCE


def claim_section(doc: dict, cert: dict) -> dict:
    """The headline sentence and whether it is a proof (``kind``: proof/no_proof/infeasible/no_plan)."""
    status, exact = doc["status"], cert["exact"]
    if status == "infeasible":
        text = ("Proven infeasible. No plan in this search space fits in device memory under "
                "this cost model."
                if exact else "The search found no plan that fits in memory, but infeasibility "
                              "is NOT proven: a plan may exist.")
        return {"kind": "infeasible", "proven": bool(exact), "headline": text, "detail": ""}
    if doc["plan"] is None or doc["certificate"]["primal"] is None:
        return {"kind": "no_plan", "proven": False,
                "headline": "The search stopped without a plan: there is no answer and NO "
                            "optimality proof.", "detail": ""}
    speedup = cert["speedup_value"]
    if not exact or speedup == "inf":
        why = ("the certificate is not exact (heuristic or incomplete search)" if not exact
               else "no finite positive lower bound was proven")
        return {"kind": "no_proof", "proven": False,
                "headline": "There is NO optimality proof for this plan: a faster plan may exist "
                            "in this search space.",
                "detail": f"Reason: {why}. The numbers below are this plan's predicted cost, "
                          "not a claim of optimality."}
    where = (f"T = {cert['primal']} (this plan's iteration time) and L = {cert['lower_bound']} "
             "(the global lower bound, the minimum of the proven per-configuration bounds below)")
    if speedup <= 1e-12:
        headline = ("No plan in this search space is faster under this cost model: the global "
                    "lower bound equals this plan's iteration time.")
        detail = f"{where}: L = T, so the certificate gap (T − L) / T is {cert['gap']}."
    else:
        headline = (f"No plan in this search space is more than {cert['speedup_bound']} faster "
                    "under this cost model.")
        detail = (f"X = (T − L) / L, rounded up, with {where}. Equivalently the certificate gap "
                  f"(T − L) / T = {cert['gap']}: no plan's iteration time is below L.")
    return {"kind": "proof", "proven": True, "headline": headline, "detail": detail}


def _check_physical_metrics(doc: dict, warnings: list[str]) -> None:
    """Figures no plan can have (a plan.json edited by hand, or a bug): an MFU outside
    [0, 100%], a time that is not a positive finite number, a stage said to fit with a
    peak above its capacity."""
    m = doc["metrics"]
    if m is None:
        return
    for key in ("mfu", "hfu"):
        v = to_float(m.get(key), f"metrics.{key}")
        if v is not None and not 0.0 <= v <= 1.0:
            warnings.append(f"metrics.{key} = {v:g} is outside 0-100% of the peak: no plan "
                            "runs at that rate.")
    t = to_float(m.get("iteration_time_s"), "metrics.iteration_time_s")
    if t is not None and not (math.isfinite(t) and t > 0):
        warnings.append(f"metrics.iteration_time_s = {t} is not a positive finite time.")
    for i, st in enumerate(m.get("stages") or []):
        peak = to_float(st.get("peak_memory_gib"), f"metrics.stages[{i}].peak_memory_gib")
        cap = to_float(st.get("capacity_gib"), f"metrics.stages[{i}].capacity_gib")
        if st.get("fits") and peak is not None and cap is not None and peak > cap * (1 + 1e-9):
            warnings.append(f"stage {i} is said to fit with {peak:.2f} GiB of {cap:.2f} GiB.")


def _check_primal_matches_metrics(doc: dict, cert: dict, warnings: list[str]) -> None:
    m = doc["metrics"]
    primal = to_float(doc["certificate"]["primal"], "certificate.primal")
    if m is None or primal is None:
        return
    t = to_float(m["iteration_time_s"], "metrics.iteration_time_s")
    if t is not None and abs(t - primal) > 1e-6 * max(1.0, abs(t)):
        warnings.append(f"the certificate's primal ({fmt_time(primal)}) differs from the "
                        f"evaluated iteration time ({fmt_time(t)}).")
