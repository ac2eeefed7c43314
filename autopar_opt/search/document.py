"""The ``plan.json`` document: everything a report or a reviewer needs.

Plain JSON types only (infinite bounds as the strings "inf"/"-inf"), so the
HTML report is rendered from this document alone, never from solver objects.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
import signal
from pathlib import Path

from autopar_opt import __version__
from autopar_opt.cost.assumptions import cost_assumptions
from autopar_opt.cost.context import StageContext
from autopar_opt.cost.interval import metrics_dict
from autopar_opt.cost.params import CostParams, calibration_provenance
from autopar_opt.ir.graph import LayerGraph
from autopar_opt.ir.hardware import Cluster, memory_override
from autopar_opt.ir.pipeline import plan_stage_devices, stage_offsets
from autopar_opt.search.baselines import Baseline
from autopar_opt.core.bounds import Status
from autopar_opt.search.certificate import json_float, not_built
from autopar_opt.search.engine import SearchOptions, SearchResult
from autopar_opt.ir.training import SearchSpace, Training
from autopar_opt.ir.arch import describe
from autopar_opt.ir.plan import Plan
from autopar_opt.ir.recompute_pattern import recompute_text
from autopar_opt.ir.window import windows_text

COST_MODEL_ASSUMPTIONS = [
    "Compute: GEMM FLOPs / (dense peak of the dtype x achieved efficiency; FP8 linear layers at "
    "the FP8 peak), attention core at its kernel's published efficiency by sequence length, "
    "head dim, mask, kernel generation and GPU (cost/data/attention_kernels.yaml), element-wise "
    "kernels at HBM bandwidth; physical parameters fitted on published runs within documented "
    "ranges (benchmarks/calibration/RESULTS.md, leave-one-family-out validated).",
    "Communication: NCCL's ring/tree cost model per collective and message (cost/nccl.py), on "
    "the group's own NVLink and NICs. Overlap: exposed = max(0, comm - window); data-parallel "
    "reduction behind the last micro-batch's backward, ZeRO-3 gathers behind neighbouring "
    "compute, TP collectives per collective-GEMM pair of the runtime's mechanism "
    "(cost/overlap.py), context-parallel ring steps behind each step's attention, pipeline "
    "sends exposed. What this case assumed: cost_model.case.",
    "Memory: weights + gradients (fp32 buffers where the runtime keeps them) + optimizer state "
    "after ZeRO sharding, activations per in-flight micro-batch (Korthikanti et al. 2022), fp32 "
    "logits, a calibrated runtime reserve and allocator fragmentation, plus the stated reserve.",
    "Pipeline: T = sum(stage) + sum(transfer) + (c-1) x max(stage, transfer) + max(sync) "
    "+ T0, T0 the fixed per-iteration overhead (cost_model.params.iteration_overhead_s); "
    "edges that skip stages are relayed across every boundary they cross.",
    "Stages are contiguous in topological order and congruent (devices per stage divide, or "
    "are a multiple of, the GPUs per node); ranks are ordered tp, cp, dp (innermost first).",
]


def _space_dict(space: SearchSpace) -> dict:
    data = dataclasses.asdict(space)
    return {k: ([getattr(x, "value", x) for x in v] if isinstance(v, (list, tuple)) else v)
            for k, v in data.items()}


def _cluster_dict(cluster: Cluster, dtype: str) -> dict:
    tier = lambda t: {"name": t.name, "bandwidth_gb_per_s": t.bandwidth_gb_per_s,
                      "latency_us": t.latency_us}
    return {"name": cluster.name, "nodes": cluster.nodes, "gpus_per_node": cluster.gpus_per_node,
            "num_devices": cluster.num_devices, "device": cluster.device.name,
            "hbm_gib": cluster.device.hbm_gib,
            "device_memory_gib": memory_override(cluster.device),
            "peak_tflops": cluster.device.peak_tflops.get(dtype),
            "intra_node": tier(cluster.intra_node), "inter_node": tier(cluster.inter_node),
            "intra_node_topology": "mesh" if cluster.nvlink_mesh else "switch",
            "nvlink_board_gpus": cluster.nvlink_board or None}


def _plan_dict(result: SearchResult, cluster: Cluster, graph: LayerGraph) -> dict | None:
    if result.plan is None:
        return None
    data = result.plan.to_dict()
    sizes = plan_stage_devices(result.plan, cluster.num_devices)
    for st, d, at in zip(data["stages"], sizes, stage_offsets(sizes)):
        st["first_rank"], st["last_rank"], st["devices"] = at, at + d - 1, d
    data["recompute"] = recompute_text(result.plan, graph)
    return data


def _baseline_dict(baseline: Baseline, graph: LayerGraph) -> dict:
    """A baseline as plan.json lists it, its plan's recomputation said in words."""
    data = baseline.to_dict()
    if baseline.plan is not None:
        data["plan"]["recompute"] = recompute_text(baseline.plan, graph)
    return data


def memory_advice(space: SearchSpace, cluster: Cluster, training: Training) -> list[str]:
    """What to change when no plan fits: only what the space does not already offer
    (QA round 12: a space holding ZeRO-3, full recomputation, every pipeline and tensor
    degree and every micro-batch count was still told to "allow" them), then more or larger
    devices (always: the first line is the fix ``export`` quotes), then the user's reserve
    when there is one."""
    out = []
    missing = [what for what, offered in (("ZeRO-3 sharding", 3 in space.zero_levels),
                                          ("full recomputation",
                                           any(r.value == "full" for r in space.recompute)))
               if not offered]
    if missing:
        out.append(f"allow {' and '.join(missing)} (search.zero_levels, search.recompute)")
    n = cluster.num_devices
    tp_cap = cluster.gpus_per_node if space.tp_within_node else n
    more = [key for key, listed, cap in (("search.pp_degrees", space.pp_degrees, n),
                                         ("search.tp_degrees", space.tp_degrees, tp_cap))
            if listed is not None and max(listed) < cap]
    if more:
        out.append(f"allow more pipeline stages or tensor parallelism ({', '.join(more)})")
    batch = training.global_batch_size
    if space.microbatches is not None and max(space.microbatches) < batch:
        out.append("use more micro-batches to shrink activations (search.microbatches)")
    elif space.microbatches is None and space.max_microbatches < batch:
        out.append("use more micro-batches to shrink activations (search.max_microbatches)")
    out.append("use more or larger devices (cluster.nodes, cluster.device)")
    if training.memory_reserve_gib > 0:
        out.append("lower training.memory_reserve_gib if the reserve is too conservative")
    return out


def _infeasibility(result: SearchResult, cluster: Cluster, training: Training,
                   params: CostParams, space: SearchSpace) -> dict | None:
    if result.plan is not None:
        return None
    # on the scale of a plan's peak memory (QA round 11: the reason compared modelled bytes
    # with HBM less both reserves over the allocator overhead, beside plans' peaks held
    # against HBM less the user's reserve, so 163.9 'against 69.55 GiB usable' sat beside
    # a plan peaking at 74.5 of 76): the floor with the runtime reserve and fragmentation
    ctx = StageContext(cluster, training, params, 1, 1)
    cap = ctx.usable_gib
    least = ctx.peak_gib(result.least_memory_bytes) if math.isfinite(
        result.least_memory_bytes) else result.least_memory_bytes
    refusals: list[str] = []
    if result.certificate.infeasible and math.isfinite(least) and least > cap:
        reason = (f"every configuration of the search space is proven infeasible; the least memory "
                  f"any plan needs is at least {least:.2f} GiB per device against {cap:.2f} GiB usable"
                  " (peak memory as a plan's is counted: with the runtime reserve and allocator "
                  "overhead, against the device less training.memory_reserve_gib)")
    elif result.certificate.infeasible and math.isfinite(least):
        # the floor bound is weaker than the proof: each configuration's own search proved
        # that none of its plans fits (the details name them)
        reason = (f"every configuration of the search space is proven infeasible: its search "
                  f"found no plan that fits in the {cap:.2f} GiB usable per device (the simple "
                  f"per-device floor, {least:.2f} GiB, is below it: the proof is each "
                  "configuration's, in the details)")
    elif result.certificate.infeasible:
        first = result.infeasible_reasons[0] if result.infeasible_reasons else "see the certificate"
        reason = ("every configuration of the search space is proven infeasible whatever the "
                  f"memory: some layer has no valid strategy in each ({first})")
    else:
        reason = "no plan was found within the time limit; feasibility is not decided"
        # a solver model over the --memory-limit budget was never built: that, not the
        # time, stopped the search (QA round 9: it was reported as the time limit)
        refusals = [why for r in result.certificate.configurations
                    if (why := not_built(r.message)) is not None]
        if refusals:
            reason = (f"no plan was found: the solver's model of {len(refusals)} "
                      f"configuration(s) was not built ({refusals[0]}); feasibility is not "
                      "decided")
    advice = memory_advice(space, cluster, training)
    if result.certificate.infeasible and not math.isfinite(least):
        # no layout exists whatever the memory (the reason names the rule): more or larger
        # devices do not help, the batch split or the stages do (QA round 12)
        advice = ["change the global batch, the micro-batch counts or the devices per stage as "
                  "the reason says (more memory does not help)",
                  *[a for a in advice if a.startswith("allow more pipeline")]]
    if not result.certificate.infeasible and refusals:
        advice = ["raise --memory-limit (the models' memory budget, GiB) if the machine has the "
                  "memory, or use --solver dp, which builds no model"] + advice
    elif not result.certificate.infeasible:
        advice.insert(0, "raise --time-limit")
        if math.isfinite(least) and least < cap:       # memory did not stop this search
            advice = [advice[0], "or narrow the search space (fewer degrees, schedules or "
                      "micro-batch counts) so that it is searched within the limit"]
    return {"reason": reason, "details": result.infeasible_reasons[:10],
            "least_memory_gib": json_float(least), "capacity_gib": cap, "advice": advice}


def resolved_path(path: str) -> str | None:
    """``path`` made absolute (None where it cannot be: export falls back to ``path``)."""
    try:
        return str(Path(path).resolve())
    except (OSError, ValueError, RuntimeError):
        return None


def measured_text(graph: LayerGraph) -> str | None:
    """Which layers the spec's measured times price (``model.measured``): ``b0, b1 at tp 1;
    b2 at tp 1, 2``; None without measurements."""
    rows = [f"{layer.name} at tp {', '.join(str(m.tp) for m in layer.measured)}"
            for layer in graph.layers if layer.measured]
    if not rows:
        return None
    shown = "; ".join(rows[:8]) + (f"; and {len(rows) - 8} more" if len(rows) > 8 else "")
    return (f"{len(rows)} of {len(graph.layers)} layers' compute times are measured "
            f"(model.measured: {shown}); other layers and tp degrees are modelled")


def build_document(spec_path: str, graph: LayerGraph, cluster: Cluster, training: Training,
                   space: SearchSpace, params: CostParams, options: SearchOptions,
                   result: SearchResult, baselines: list[Baseline]) -> dict:
    """Assemble the plan.json document (schema_version 1)."""
    return {
        "schema_version": 1,
        "tool": {"name": "autopar-opt", "version": __version__},
        "created_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "spec": {"path": spec_path, "resolved_path": resolved_path(spec_path),
                 "model": {"name": graph.name, "num_layers": len(graph.layers),
                           "params": graph.total_params(), "params_active": graph.active_params(),
                           "is_chain": graph.is_chain(), "source": graph.source,
                           "attention_windows": windows_text(graph.attention_windows()),
                           "architecture": describe(graph.arch) if graph.arch else None,
                           "measured": measured_text(graph),
                           "assumed": list(graph.assumed)},
                 "cluster": _cluster_dict(cluster, training.dtype),
                 "training": dataclasses.asdict(training)},
        "search_space": _space_dict(space),
        "cost_model": {"params": params.to_dict(), "assumptions": COST_MODEL_ASSUMPTIONS,
                       "case": cost_assumptions(graph, cluster, training, params),
                       "runtime": {"name": training.runtime.name,
                                   **training.runtime.capabilities()},
                       "calibration": calibration_provenance(params)},
        "status": result.status(options.rel_gap).value,
        "plan": _plan_dict(result, cluster, graph),
        "metrics": metrics_dict(result.metrics, graph, cluster, training, result.plan,
                                params=params),
        "certificate": result.certificate.to_dict(),
        "solver": {"name": result.solver_name, "version": result.solver_version,
                   "form": result.form, "time_limit_s": options.time_limit_s,
                   "rel_gap": options.rel_gap, "wall_time_s": round(result.wall_time_s, 3),
                   "log_tail": result.log_tail},
        "baselines": [{**_baseline_dict(b, graph), "metrics": metrics_dict(b.metrics, graph, cluster, training,
                                                              b.plan, params=params),
                       **_comparison(result, b, options, space)} for b in baselines],
        "infeasibility": _infeasibility(result, cluster, training, params, space),
        "notices": notices(result, options),
    }


def _comparison(result: SearchResult, baseline: Baseline, options: SearchOptions,
                space: SearchSpace | None = None) -> dict:
    """The spec's own plan (a published recipe, say) against the optimum, term by
    term from the two cost breakdowns (:mod:`autopar_opt.search.compare`); empty
    for the other baselines or when either plan has no feasible price. A spec plan
    outside the searched space (a degree the space does not offer, or faster than the
    proven bound) is said so: "the optimum" is the space's (QA round 9)."""
    if baseline.name != "user plan" or baseline.metrics is None or result.metrics is None \
            or not baseline.metrics.feasible or not result.metrics.feasible:
        return {}
    from autopar_opt.search.compare import compare

    cmp = compare(result.metrics, baseline.metrics)
    best = "the optimum" if result.status(options.rel_gap).value == "optimal" else "the plan found"
    text = cmp.text("the spec's plan", best)
    outside = outside_space(baseline.plan, space) if space is not None else []
    bound = result.certificate.lower_bound
    if not outside and math.isfinite(bound) and \
            baseline.metrics.iteration_time_s < bound * (1 - 1e-9):
        outside = [f"faster than the space's proven bound {bound:.4g} s"]
    if outside:
        text += (f"; the spec's plan lies outside the search space ({'; '.join(outside)}): "
                 f"{best} is the best within the space")
    return {"comparison": {**cmp.to_dict(), "text": text}}


def outside_space(plan: Plan | None, space: SearchSpace) -> list[str]:
    """How ``plan`` leaves ``space``: a pipeline, tensor-, context-parallel degree or
    ZeRO level the space does not offer (empty: none of these)."""
    if plan is None:
        return []
    out = []
    if space.pp_degrees is not None and plan.pp not in space.pp_degrees:
        out.append(f"pp={plan.pp}, not among search.pp_degrees "
                   f"{list(space.pp_degrees)}")
    strategies = [s for st in plan.stages for s in st.strategies]
    for name, have, offered in (("tp", {s.tp for s in strategies}, space.tp_degrees),
                                ("cp", {s.cp for s in strategies}, space.cp_degrees),
                                ("ZeRO", {s.zero for s in strategies}, space.zero_levels)):
        extra = sorted(have - set(offered)) if offered is not None else []
        if extra:
            out.append(f"{name}={'/'.join(map(str, extra))}, not among the space's "
                       f"{list(offered)}")
    return out


def notices(result: SearchResult, options: SearchOptions) -> list[str]:
    """Why the run is not a certified answer at the requested gap, one sentence
    each: an interrupt, a gap above the target (with its cause), backends that
    failed and were replaced, configurations the time limit left without a
    bound. Shown in the CLI summary and under the report's headline."""
    out: list[str] = []
    if result.interrupted_by is not None:
        out.append(f"The search was interrupted by signal {result.interrupted_by} "
                   f"({_signal_name(result.interrupted_by)}); the plan is the best found so far and "
                   "the bound is the one proven so far.")
    cert = result.certificate
    if result.plan is not None and not (cert.exact and cert.gap <= options.rel_gap + 1e-12):
        gap = f"{100 * cert.gap:.3g}%" if cert.exact else "unknown (no proven bound)"
        causes = sorted({r.status for r in cert.configurations
                         if r.status in ("not_solved", "feasible", "error", "heuristic")})
        refused = [r for r in cert.configurations if not_built(r.message)]
        if refused:
            # the memory budget, not the clock, left them open (QA round 10: the notes said
            # "raise --time-limit" and "more time would close the gap")
            out.append(f"Not certified to the requested gap of {100 * options.rel_gap:.3g}%: the "
                       f"certificate gap is {gap}; {len(refused)} configuration(s) were not "
                       f"built ({not_built(refused[0].message)}): more time does not build "
                       "them; raise --memory-limit, or use --gap to accept a larger gap.")
        elif causes or not cert.exact:
            out.append(f"Not certified to the requested gap of {100 * options.rel_gap:.3g}%: the "
                       f"certificate gap is {gap} (configurations {', '.join(causes) or 'open'}); "
                       "raise --time-limit, or use --gap to accept a larger gap.")
        else:     # every configuration closed, some at its solver's own (larger) tolerance
            out.append(f"Not certified to the requested gap of {100 * options.rel_gap:.3g}%: the "
                       f"certificate gap is {gap}, though every configuration is closed: a "
                       "solver stopped at its own tolerance, above the requested gap (QA round "
                       "5: Gurobi's MIQP at 1.66e-6 against 1e-6); more time does not close "
                       "it: use --gap to accept it, or another solver.")
        more = more_time(result, options)
        if more:
            out.append(more)
    errors = [r for r in cert.configurations if r.status == "error"]
    if errors:
        out.append(f"{len(errors)} configuration(s) ended in a solver error: {errors[0].message}")
    out.extend(f"Fallback: {line}" for line in result.fallbacks[:5])
    if len(result.fallbacks) > 5:
        out.append(f"... and {len(result.fallbacks) - 5} more configurations solved by the fallback")
    late = [r for r in cert.configurations if r.status == "not_solved" and r.lower_bound == -math.inf]
    if late and result.interrupted_by is None:
        out.append(f"{len(late)} configuration(s) got no bound: the time limit was reached before "
                   "their cost tables were built; raise --time-limit.")
    return out


def more_time(result: SearchResult, options: SearchOptions) -> str | None:
    """When the time limit ended the search above the requested gap (configurations
    left open, no interrupt: the engine stops with open ones only at its limit): which
    configurations keep the gap open and about how much more time would close it,
    estimated from this run's own solve rates (None otherwise).

    Open: the configurations whose proven bound is below the incumbent by more
    than the gap (the certificate's bound is their least). Closed: those the
    search proved (optimal, infeasible) with a solve of their own. The estimate
    gives each open configuration at least as much time again as it has had,
    and no less than the median time a closed configuration took:
    ``Σ_open max(t_i, median closed)`` (each open one stayed open in ``t_i``; a
    configuration needing at most twice its time, the engine's doubling, closes
    in that). An estimate from rates, not a bound: the text says so."""
    cert = result.certificate
    if result.interrupted_by is not None or result.plan is None or cert.primal is None:
        return None
    cutoff = cert.primal * (1.0 - options.rel_gap)
    open_ = [r for r in cert.configurations if r.lower_bound < cutoff * (1 - 1e-12)
             and r.status in (Status.feasible, Status.not_solved, Status.heuristic, Status.error)
             and not not_built(r.message)]        # the memory budget's, not the clock's
    if not open_:
        return None
    closed = sorted(r.time_s for r in cert.configurations
                    if r.status in (Status.optimal, Status.infeasible) and r.time_s > 0)
    median = closed[len(closed) // 2] if closed else 0.0
    need = sum(max(r.time_s, median) for r in open_)
    bound = [r for r in open_ if math.isfinite(r.lower_bound)]
    worst = min(bound, key=lambda r: r.lower_bound) if bound else None
    least = (f", the least {_fmt_s(worst.lower_bound)} at {worst.config.label()}"
             if worst is not None else "")
    rate = (f"the {len(closed)} configuration(s) proven here took a median of {median:.3g} s each"
            if closed else "no configuration was proven by a solve of its own")
    if need < 0.05:
        # no solve time to estimate from (the limit ended before the solves: QA round 9,
        # "about 0 s more search time, i.e. --time-limit 2 or more", the limit that failed)
        more = max(2.0 * options.time_limit_s, options.time_limit_s + 10.0)
        return (f"More time would close the gap: {len(open_)} configuration(s) keep it open "
                f"({len(bound)} with a proven bound{least}), and the limit ended before their "
                "solves ran, so this "
                f"run gives no rate to estimate from; try --time-limit {math.ceil(more)} or more.")
    return (f"More time would close the gap: {len(open_)} configuration(s) keep it open "
            f"({len(bound)} with a proven bound{least}); they had "
            f"{sum(r.time_s for r in open_):.3g} s in all, and "
            f"{rate}. Estimate from these rates (each open configuration given at least its "
            f"time again; harder ones may need more): about {need:.3g} s more search time, "
            f"i.e. --time-limit {math.ceil(options.time_limit_s + need)} or more.")


def _fmt_s(x: float) -> str:
    return f"{x:.4g} s" if math.isfinite(x) else "none"


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return "unknown"


