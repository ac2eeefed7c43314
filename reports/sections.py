"""Context sections of the report other than the answer and the certificate."""

from __future__ import annotations

import numpy as np

from autopar_opt.ir.training import schedule_text
from autopar_opt.core.result import recomputed_share
from autopar_opt.reports.document import ReportInputError, to_float
from autopar_opt.reports.formatting import fmt_gib, fmt_pct, fmt_rate, fmt_time, fmt_time_range, fmt_value
from autopar_opt.reports.timeline import idle_times, makespan, simulate
from autopar_opt.ir.strategies import Strategy

#: Search-space keys, their labels, and what ``null`` means for each.
SPACE_LABELS = {
    "pp_degrees": ("pipeline degrees (pp)", "every divisor of the device count"),
    "tp_degrees": ("tensor-parallel degrees (tp)", "every valid divisor of the stage size"),
    "cp_degrees": ("context-parallel degrees (cp)", "1"),
    "sequence_parallel": ("sequence parallelism", "off"),
    "zero_levels": ("ZeRO levels", "0"),
    "hybrid_sharding": ("hybrid sharding (ZeRO inside shard groups, replicas across them)", "off"),
    "hybrid_zero_levels": ("ZeRO levels with hybrid sharding", "3"),
    "hybrid_shard_nodes": ("nodes per hybrid shard group", "1"),
    "recompute": ("activation recomputation", "none"),
    "schedules": ("pipeline schedules", "1f1b"),
    "schedules_source": ("schedules from", "search.schedules"),
    "microbatches": ("micro-batch counts", "every divisor of the global batch up to the maximum"),
    "max_microbatches": ("maximum micro-batches", "unbounded"),
    "tp_within_node": ("tensor parallelism kept inside a node", "no"),
}


def space_section(doc: dict) -> list[dict]:
    """One row per search-space key, known keys first in a fixed order."""
    space = doc["search_space"] or {}
    rows = []
    for key in list(SPACE_LABELS) + sorted(k for k in space if k not in SPACE_LABELS):
        if key not in space:
            continue
        label, null_text = SPACE_LABELS.get(key, (key, "any"))
        value = space[key]
        rows.append({"name": label, "key": key,
                     "value": null_text if value is None else fmt_value(value)})
    return rows


def strategy_label(data: dict, where: str) -> str:
    """``dp2·tp4·sp·z1·rc-full`` from a strategy dict (the core's :meth:`Strategy.label`)."""
    try:
        return Strategy.from_dict(data).label()
    except (KeyError, TypeError, ValueError) as exc:
        raise ReportInputError([f"'{where}' is not a valid strategy ({exc})"]) from None


def collapse_runs(layers: list[str], labels: list[str]) -> list[dict]:
    """Runs of consecutive layers with the same strategy label.

    ``[a, b, c], [x, x, y]`` -> ``[{first: a, last: b, count: 2, label: x}, {first: c, ...}]``.
    """
    runs: list[dict] = []
    for name, label in zip(layers, labels):
        if runs and runs[-1]["label"] == label:
            runs[-1]["last"] = name
            runs[-1]["count"] += 1
        else:
            runs.append({"first": name, "last": name, "count": 1, "label": label})
    return runs


def plan_section(doc: dict) -> dict | None:
    """Stages with their rank ranges, collapsed strategy runs and per-layer strategies."""
    plan = doc["plan"]
    if plan is None:
        return None
    gpn = int(doc["spec"]["cluster"]["gpus_per_node"])
    metrics = (doc["metrics"] or {}).get("stages") or []
    stages = []
    for i, st in enumerate(plan["stages"]):
        if len(st["layers"]) != len(st["strategies"]):
            raise ReportInputError([f"'plan.stages[{i}]' has {len(st['layers'])} layers but "
                                    f"{len(st['strategies'])} strategies"])
        labels = [strategy_label(s, f"plan.stages[{i}].strategies[{j}]")
                  for j, s in enumerate(st["strategies"])]
        first, last = int(st["first_rank"]), int(st["last_rank"])
        nodes = sorted({first // gpn, last // gpn})
        m = metrics[i] if i < len(metrics) else {}
        stages.append({
            "index": i, "ranks": f"{first}–{last}", "devices": last - first + 1,
            "nodes": "–".join(str(n) for n in nodes),
            "runs": collapse_runs([str(x) for x in st["layers"]], labels),
            "layers": [{"name": str(n), "strategy": lab} for n, lab in zip(st["layers"], labels)],
            "time": fmt_time(to_float(m.get("time_s"), f"metrics.stages[{i}].time_s")),
            "transfer": (fmt_time(to_float(m.get("transfer_s"), f"metrics.stages[{i}].transfer_s"))
                         if i < len(plan["stages"]) - 1 else "—"),
            "sync": fmt_time(to_float(m.get("sync_s"), f"metrics.stages[{i}].sync_s")),
        })
    return {"pp": plan["pp"], "microbatches": plan["microbatches"],
            # interleaved with one chunk is said as 1F1B; more chunks: the template adds them
            "schedule": (schedule_text(str(plan["schedule"]), 1) if (plan.get("vp_chunks") or 1) <= 1
                         else str(plan["schedule"])), "vp_chunks": plan.get("vp_chunks", 1),
            "stages": stages}


def _stage_floats(doc: dict, key: str) -> list[float]:
    return [to_float(s[key], f"metrics.stages[{i}].{key}") or 0.0
            for i, s in enumerate(doc["metrics"]["stages"])]


#: Above this many (stage, micro-batch) pairs the timeline is not simulated nor drawn: its
#: cost grows with them (about four bars each, 2.5 ms per 10 pairs on the 2-core
#: development machine: :mod:`autopar_opt.reports.cost`), and the report is written inside
#: the command's time limit (issue 15), whose reserve is priced for the largest plan the
#: space allows. At 4,096 (32 stages × 128 micro-batches) a row of the 10.5-inch chart
#: holds 256 bars of about 4 pixels; the bundled examples' plans have at most 2,048.
MAX_TIMELINE_CELLS = 4_096


def timeline_cells(doc: dict) -> int:
    """(stage, micro-batch) pairs of the document's plan; 0 without a plan."""
    plan, m = doc["plan"], doc["metrics"]
    if plan is None or m is None or not m["stages"]:
        return 0
    return len(m["stages"]) * int(plan["microbatches"])


def timeline_section(doc: dict, draw: bool = True) -> dict | None:
    """Simulated schedule of one iteration (see :mod:`autopar_opt.reports.timeline`);
    None without a plan, above :data:`MAX_TIMELINE_CELLS` or when ``draw`` is
    false (the command's time limit left too little time to draw it)."""
    plan, m = doc["plan"], doc["metrics"]
    cells = timeline_cells(doc)
    if not draw or cells == 0 or cells > MAX_TIMELINE_CELLS:
        return None
    p = _stage_floats(doc, "time_s")
    o = _stage_floats(doc, "transfer_s")[:-1]
    g = _stage_floats(doc, "sync_s")
    schedule = str(plan["schedule"])
    drawn = "gpipe" if schedule == "gpipe" else "1f1b"
    try:
        ops = simulate(p, o, g, int(plan["microbatches"]), drawn)
    except ValueError as exc:
        raise ReportInputError([f"cannot draw the timeline: {exc}"]) from None
    span = makespan(ops)
    pipeline_end = max(op.end for op in ops if op.kind in ("F", "B"))
    idle = idle_times(ops, len(p))
    return {
        "pp": len(p), "microbatches": int(plan["microbatches"]), "schedule": schedule,
        "drawn_as": drawn,
        "ops": _op_rows(ops),
        "makespan_ms": round(span * 1e3, 9),
        "simulated": fmt_time(span),
        "overhead": fmt_time(_iteration_overhead(doc)),
        "model": fmt_time(to_float(m["iteration_time_s"], "metrics.iteration_time_s")),
        "bubble_share": fmt_pct(sum(idle) / (pipeline_end * len(p)) if pipeline_end > 0 else None, 1),
    }


def _op_rows(ops: list) -> list[dict]:
    """The ops as JSON rows, times in ms rounded to 9 decimals (deterministic
    goldens), rounded as one numpy array: ``round()`` per value was a fifth of a
    32 × 128 report."""
    ms = np.round(np.array([[op.start, op.end] for op in ops], dtype=float).reshape(-1, 2) * 1e3,
                  9).tolist()
    return [{"kind": op.kind, "stage": op.stage, "microbatch": op.microbatch,
             "start_ms": start, "end_ms": end} for op, (start, end) in zip(ops, ms)]


def timeline_left_out(doc: dict, draw: bool) -> str | None:
    """Why the plan's timeline is not in the report (None when it is, or without a plan)."""
    cells = timeline_cells(doc)
    if cells == 0:
        return None
    if cells > MAX_TIMELINE_CELLS:
        return (f"The timeline of this plan ({cells:,} stage × micro-batch pairs) is left out: "
                f"above {MAX_TIMELINE_CELLS:,} pairs its cost grows past what a report is "
                "given inside the time limit; plan.json holds every stage's times.")
    if not draw:
        return ("The timeline is left out: the time limit left too little time to draw it "
                f"({cells:,} stage × micro-batch pairs); a longer --time-limit draws it.")
    return None


def _iteration_overhead(doc: dict) -> float:
    """The cost model's fixed per-iteration time (added to T, not drawn)."""
    params = doc["cost_model"].get("params") or {}
    return to_float(params.get("iteration_overhead_s", 0.0), "cost_model.params.iteration_overhead_s") or 0.0


#: The memory chart's stacked parts, bottom to top (keys of :func:`chart_parts`).
CHART_PARTS = ("state", "activations", "working", "reserve", "other")


def chart_parts(stage: dict, weight: float, activation: float, peak: float, i: int
                ) -> dict[str, float]:
    """The GiB of each stacked part of one stage's bar, summing to its peak (the card and
    the table show the same peak; issue 33: the bars left out the reserve, 67.7 against
    73.5 GiB): weights + gradients + optimizer state, activations + logits, the working
    set, the runtime reserve and fragmentation, and whatever an older plan.json does not
    split ("other", the peak less the parts it states)."""
    def part(key: str) -> float:
        value = stage.get(key)
        return max(0.0, to_float(value, f"metrics.stages[{i}].{key}") or 0.0) if value is not None else 0.0

    out = {"state": max(0.0, weight), "activations": max(0.0, activation) + part("logits_gib"),
           "working": part("working_gib"), "reserve": part("reserve_gib")}
    out["other"] = max(0.0, peak - sum(out.values()))
    if out["other"] <= 1e-9 * max(peak, 1.0):
        out["other"] = 0.0
    return out


def memory_section(doc: dict) -> dict | None:
    """Per-stage weights and activations per device against capacity."""
    m = doc["metrics"]
    if m is None or not m["stages"]:
        return None
    w, a = _stage_floats(doc, "weight_gib"), _stage_floats(doc, "activation_gib")
    peak, cap = _stage_floats(doc, "peak_memory_gib"), _stage_floats(doc, "capacity_gib")
    raw = doc["metrics"]["stages"]
    parts = ("weights_gib", "grads_gib", "optimizer_gib", "activation_gib", "logits_gib",
             "working_gib", "reserve_gib")
    stages = [{"index": i, "weight_gib": w[i], "activation_gib": a[i],
               "bars": chart_parts(raw[i], w[i], a[i], peak[i], i), "peak_gib": peak[i],
               "peak": fmt_gib(peak[i]), "capacity": fmt_gib(cap[i]),
               "headroom": headroom_text(peak[i], cap[i]),
               "inflight": raw[i].get("inflight_microbatches"),
               "fits": peak[i] <= cap[i] + 1e-9,
               "tight": peak[i] <= cap[i] + 1e-9 and cap[i] > 0
               and (cap[i] - peak[i]) / cap[i] < 0.05,
               "parts": [fmt_gib(to_float(raw[i].get(k), f"metrics.stages[{i}].{k}"))
                         if raw[i].get(k) is not None else "—" for k in parts]}
              for i in range(len(w))]
    return {"stages": stages,
            "capacity_gib": to_float(m["memory_capacity_gib"], "metrics.memory_capacity_gib"),
            "hbm_gib": to_float(doc["spec"]["cluster"]["hbm_gib"], "spec.cluster.hbm_gib")}


def headroom_text(peak: float, cap: float) -> str:
    """``30.15 GiB (38%)``: usable capacity left above a stage's peak, and its share of the
    capacity (plan.json ``metrics.stages[].headroom_fraction``); ``1.20 GiB over`` when the
    peak exceeds it (QA round 36: the table showed peak and capacity, not what is left)."""
    if peak > cap + 1e-9:
        return f"{fmt_gib(peak - cap)} over"
    return f"{fmt_gib(cap - peak)} ({fmt_pct((cap - peak) / cap, 0) if cap > 0 else '—'})"


#: Critical-path parts of the iteration time (``PlanMetrics.breakdown``).
BREAKDOWN_LABELS = {"compute_s": "compute", "tp_comm_s": "exposed tensor-parallel communication",
                    "cp_comm_s": "exposed context-parallel communication",
                    "zero_comm_s": "exposed ZeRO-3 gathers, ZeRO-2 reductions", "ep_comm_s": "MoE all-to-all",
                    "offload_comm_s": "exposed CPU activation offload copies",
                    "reshard_s": "resharding",
                    "dp_comm_s": "exposed data-parallel gradient reduction",
                    "optimizer_s": "optimizer step", "fixed_s": "fixed per iteration",
                    "pipeline_bubble_s": "pipeline fill/drain and stage sends"}


def breakdown_section(doc: dict) -> list[dict] | None:
    """Iteration time along its critical path, part by part (None for documents
    written before the breakdown existed)."""
    m = doc["metrics"]
    if m is None or not m.get("breakdown"):
        return None
    total = to_float(m["iteration_time_s"], "metrics.iteration_time_s") or 0.0
    rows = []
    mfu, hfu = to_float(m.get("mfu"), "metrics.mfu"), to_float(m.get("hfu"), "metrics.hfu")
    for key, label in BREAKDOWN_LABELS.items():
        val = to_float(m["breakdown"].get(key, 0.0), f"metrics.breakdown.{key}") or 0.0
        if key == "compute_s":
            label = "compute (recomputation included)"
        rows.append({"part": label, "time": fmt_time(val),
                     "share": fmt_pct(val / total if total else None, 1)})
        share = recomputed_share(mfu, hfu)
        if key == "compute_s" and mfu and share > 0:
            part = val * share          # the part the user-plan comparison lists apart
            rows.append({"part": "of which recomputation", "time": fmt_time(part),
                         "share": fmt_pct(part / total if total else None, 1)})
    return rows


def _plan_summary(plan: dict | None) -> str:
    if not plan:
        return ""
    labels = []
    for i, st in enumerate(plan.get("stages") or []):
        for j, s in enumerate(st.get("strategies") or []):
            label = strategy_label(s, f"baselines.plan.stages[{i}].strategies[{j}]")
            if label not in labels:
                labels.append(label)
    said = plan.get("recompute")        # absent in documents written before it
    return (f"pp={plan.get('pp', '?')}, {plan.get('microbatches', '?')} micro-batches, "
            f"{plan.get('schedule', '?')}; " + ", ".join(labels)
            + (f"; recomputation: {said}" if said and said != "none" else ""))


def baselines_section(doc: dict) -> list[dict]:
    """Baselines with their throughput and this plan's throughput ratio over them."""
    ours = None
    if doc["metrics"] is not None:
        ours = to_float(doc["metrics"]["samples_per_s"], "metrics.samples_per_s")
    rows = []
    for i, b in enumerate(doc["baselines"]):
        m = b["metrics"]
        why = (b.get("comparison") or {}).get("text")
        note = "; ".join(x for x in (str(b["note"] or ""), str(why or "")) if x)
        row = {"name": str(b["name"]), "note": note, "plan": _plan_summary(b.get("plan")),
               "has_metrics": m is not None, "iteration_time": "—", "samples_per_s": "—",
               "mfu": "—", "ratio": "—", "fits": None, "interval": ""}
        if m is not None:
            iv = m.get("interval") or {}
            if iv.get("low") is not None and iv.get("high") is not None:
                where = f"baselines[{i}].metrics.interval"
                span = fmt_time_range(to_float(iv["low"], where + ".low"),
                                      to_float(iv["high"], where + ".high"))
                level = fmt_pct(to_float(iv.get("level", 0.8), where + ".level"), 0)
                row["interval"] = f"{level} interval {span}"
            sps = to_float(m.get("samples_per_s"), f"baselines[{i}].metrics.samples_per_s")
            row.update(iteration_time=fmt_time(to_float(m.get("iteration_time_s"),
                                                        f"baselines[{i}].metrics.iteration_time_s")),
                       samples_per_s=fmt_rate(sps, "samples/s"),
                       mfu=fmt_pct(to_float(m.get("mfu"), f"baselines[{i}].metrics.mfu"), 1),
                       fits=bool(m.get("feasible", True)))
            if ours and sps:
                row["ratio"] = f"{ours / sps:.2f}×"
        rows.append(row)
    return rows


#: At most this many sub-model hashes are listed in the report (plan.json keeps every one):
#: a search of 15,000 configurations with --export-models gave a 15,000-row table (issue 33).
HASHES_LISTED = 40

#: The report shows at most this many characters of the end of the solver log.
LOG_TAIL_CHARS = 4_000


def solver_section(doc: dict) -> dict:
    """Solver identity, settings, the end of its log and the hashes of exported sub-models
    (those of the configurations with a plan first; at most :data:`HASHES_LISTED`, the
    number left out said)."""
    s = doc["solver"]
    rows = [r for r in doc["certificate"]["configurations"] if r.get("model_hash")]
    if len(rows) > HASHES_LISTED:               # those with a plan first (a stable sort)
        rows.sort(key=lambda r: r.get("primal") is None)
    hashes = [{"config": f"pp={r['pp']}"
               + (f" (stage devices {'+'.join(map(str, r['stage_devices']))})" if r.get("stage_devices") else "")
               + f", c={r['microbatches']}, {r['schedule']}",
               "hash": str(r["model_hash"])}
              for r in rows[:HASHES_LISTED]]
    limit = to_float(s["time_limit_s"], "solver.time_limit_s")
    rel_gap = to_float(s["rel_gap"], "solver.rel_gap")
    log = str(s.get("log_tail") or "")
    if len(log) > LOG_TAIL_CHARS:
        log = f"[{len(log) - LOG_TAIL_CHARS:,} earlier characters in plan.json]\n" + log[-LOG_TAIL_CHARS:]
    return {"name": str(s["name"]), "version": str(s["version"]), "form": str(s["form"]),
            "time_limit": "none" if limit is None or limit == float("inf") else f"{limit:g} s",
            "rel_gap": fmt_pct(rel_gap), "log_tail": log,
            "hashes": hashes, "hashes_left_out": max(0, len(rows) - HASHES_LISTED)}


def infeasibility_section(doc: dict) -> dict | None:
    """Why no plan fits and what to change (None when there is a plan or no explanation)."""
    inf = doc.get("infeasibility")
    if not inf:
        return None
    least = to_float(inf["least_memory_gib"], "infeasibility.least_memory_gib")
    cap = to_float(inf["capacity_gib"], "infeasibility.capacity_gib")
    decided = doc.get("status") == "infeasible"
    # a search the time limit stopped, with a memory floor below the capacity: memory is
    # not why there is no plan (QA round 5: "Shortfall factor 0.12x" and memory advice)
    memory = decided or least is None or not cap or least >= cap
    # proven infeasible with the per-device floor below the capacity: the floor is a weaker
    # bound than each configuration's proof, not the least memory a plan needs (QA round 12:
    # "Least memory any plan needs 1.46 GiB", "Shortfall factor 0.92x" on a space whose plans
    # all need 1.68 GiB or more of 1.60); the proofs (plan.json's details) are listed instead
    floor_only = decided and least is not None and bool(cap) and least < cap
    return {"title": "Why no plan fits" if decided else "Why there is no plan",
            "memory": memory, "floor_only": floor_only,
            "details": [str(d) for d in inf.get("details") or []] if floor_only else [],
            "reason": str(inf["reason"]), "least_memory": fmt_gib(least), "capacity": fmt_gib(cap),
            "ratio": f"{least / cap:.2f}×" if least is not None and cap else "—",
            "advice": [str(a) for a in inf["advice"]]}


def plan_degree_lines(plan: dict) -> list[str]:
    """The parallel degrees of a plan, one line per run of stages with the same
    settings: ``stages 0-15 (126 layers): dp8 tp4 cp2 ep8 etp1 sp ZeRO-1 recompute full``;
    a stage whose layers differ lists each distinct strategy with its layer count."""
    rows = []
    for i, st in enumerate(plan.get("stages") or []):
        seen: dict[str, int] = {}
        for data in st["strategies"]:
            s = Strategy.from_dict(data)
            text = f"dp{s.dp} tp{s.tp} cp{s.cp}" + (f" ep{s.ep}" if s.ep > 1 else "") + \
                (f" etp{s.expert_tp}" if s.etp else "") + (" sp" if s.sp else "") + \
                f" ZeRO-{s.zero}" + (f" shard {s.zero_group} (hybrid x{s.replicas})" if s.zero_group else "") + \
                f" recompute {s.recompute.value}"
            seen[text] = seen.get(text, 0) + 1
        label = "; ".join(t if len(seen) == 1 else f"{n} x {t}" for t, n in seen.items())
        rows.append((i, len(st["layers"]), label))
    out, k = [], 0
    while k < len(rows):
        j = k
        while j + 1 < len(rows) and rows[j + 1][2] == rows[k][2]:
            j += 1
        stages = f"stage {k}" if j == k else f"stages {k}-{j}"
        n = sum(r[1] for r in rows[k:j + 1])
        out.append(f"{stages} ({n} layer{'' if n == 1 else 's'}): {rows[k][2]}")
        k = j + 1
    return out
