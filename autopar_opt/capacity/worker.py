"""Solve one scenario: the function every engine runs (process pool or Ray task).

It receives the scenario's spec mapping (plain data, so it travels to any
process or machine), builds the spec, runs the certified search through the
search's public API and returns a plain-JSON row: the summary the capacity
answers need and the scenario's full ``plan.json`` document (for its own
plan report). Both engines call this same function, so they give the same
rows for the same scenario.
"""

from __future__ import annotations

import functools
import math
import time
from pathlib import Path
from typing import Any

from autopar_opt.capacity.sweep import spec_notices
from autopar_opt.search import SearchOptions, run_search
from autopar_opt.search.inner import InnerSolver
from autopar_opt.search.document import build_document, resolved_path
from autopar_opt.spec import build_spec
from autopar_opt.ir.strategies import Strategy


def _finite(x: float | None) -> float | None:
    return None if x is None or math.isinf(x) or math.isnan(x) else float(x)


@functools.lru_cache(maxsize=None)
def warm_up(solver: str = "highs", form: str = "auto") -> None:
    """Import the solver stack once per process (Pyomo, the backend) before a search
    starts its clock: a fresh worker would otherwise spend seconds of the first
    scenario's time limit on imports."""
    InnerSolver(SearchOptions(solver=solver, form=form))


#: A scenario is not started with less of the sweep's time limit left than this (s).
MIN_SCENARIO_S = 1.0


def empty_row(task: dict[str, Any], status: str, reason: str) -> dict[str, Any]:
    """The row of a scenario with no search result (not run, or its search raised)."""
    return {"id": task["id"], "key": task["key"], "status": status, "primal": None,
            "lower_bound": None, "gap": None, "exact": False, "plan": None, "mfu": None,
            "peak_memory_gib": None, "reason": reason, "document": None, "report_html": None}


def solve_scenario(task: dict[str, Any]) -> dict[str, Any]:
    """:func:`search_scenario`, or an ``error`` row naming the exception (a solver that
    is not installed, a bug): one broken scenario does not stop the sweep, and the
    caller does not store the row, so a later run retries it.

    ``task["deadline"]`` (a ``time.time()`` value, shared by every process of the
    sweep; absent: none): the scenario's search gets at most the time left, and a
    scenario started with less than :data:`MIN_SCENARIO_S` left is not run at all
    (a ``no_plan`` row with ``not_run``; not stored, so a later run solves it)."""
    limit = None
    if task.get("deadline") is not None:
        limit = task["deadline"] - time.time()
        if limit < MIN_SCENARIO_S:
            row = empty_row(task, "no_plan", "not run: the sweep's --time-limit ran out before "
                             "this scenario started; run the sweep again (finished scenarios "
                             "are stored) or give it more time")
            row["not_run"] = True
            return row
    try:
        return search_scenario(task, limit)
    except Exception as exc:  # noqa: BLE001 - reported as data, per scenario
        return empty_row(task, "error", f"{type(exc).__name__}: {exc}")


def search_scenario(task: dict[str, Any], limit_s: float | None = None) -> dict[str, Any]:
    """Search one scenario; ``task`` holds ``id``, ``key``, ``data`` (spec mapping), ``path``;
    ``limit_s``: the most time the sweep leaves it (its spec's own limit when larger;
    the row then says ``time_limited`` and is stored only when it is still proven).

    Returns the row stored for the scenario: status (optimal | feasible |
    infeasible | no_plan), primal and lower bound of the iteration time (s),
    gap, the plan summary and metrics, the reason when there is no plan, and
    ``document`` (the plan.json of ``autopar solve``, without baselines: the
    capacity report compares scenarios, not plans within one) with its HTML
    plan report ``report_html`` (rendered here, in parallel, not by the caller).
    """
    from autopar_opt.reports.render import render_html   # matplotlib: only when a scenario is solved

    start = time.perf_counter()
    spec = build_spec(task["data"], Path(task["path"]))
    so = spec.solver
    cut = limit_s is not None and limit_s < so.time_limit_s
    options = SearchOptions(solver=so.name, form=getattr(so, "form", "auto") or "auto",
                            time_limit_s=limit_s if cut else so.time_limit_s, rel_gap=so.rel_gap)
    warm_up(options.solver, options.form)
    if spec.fleet is not None:
        return _fleet_row(task, spec, options, start, cut)
    result = run_search(spec.graph, spec.cluster, spec.training, spec.space, spec.cost_params,
                        options)
    doc = build_document(str(task["path"]), spec.graph, spec.cluster, spec.training, spec.space,
                         spec.cost_params, options, result, [])
    doc["spec"]["scenario"] = str(task["id"])     # export rebuilds the spec from the sweep
    doc["notices"] = spec_notices(spec) + doc["notices"]    # as `autopar solve` says them
    cert = result.certificate
    metrics = doc["metrics"]
    plan = doc["plan"]
    row = {**_row_head(task, doc, cert),
           "plan": None if plan is None else {"pp": plan["pp"], "microbatches": plan["microbatches"],
                                              "schedule": plan["schedule"],
                                              "strategies": _strategy_mix(plan)},
           "mfu": metrics["mfu"] if metrics else None,
           "interval": metrics.get("interval") if metrics else None,
           "peak_memory_gib": max(metrics["peak_memory_gib"]) if metrics else None,
           "reason": _reason(doc, result.least_memory_bytes)
           or unproven_reason(doc["status"], cert, options, cut),
           # on the peak's scale, as the document's reason states it (search/document.py)
           "least_memory_gib": ((doc.get("infeasibility") or {}).get("least_memory_gib")
                                if math.isfinite(result.least_memory_bytes) else None),
           "capacity_gib": spec.cluster.device.hbm_gib - spec.training.memory_reserve_gib}
    return _row_tail(row, result, start, doc, render_html(doc), cut)


def _row_head(task: dict[str, Any], doc: dict[str, Any], cert) -> dict[str, Any]:
    """The fields a scenario row starts with, plain or fleet: its id, key, status and
    certificate (infinite or NaN figures as None: JSON has no such numbers)."""
    return {"id": task["id"], "key": task["key"], "status": doc["status"],
            "primal": _finite(cert.primal),
            "lower_bound": _finite(cert.lower_bound) if cert.lower_bound > 0 else 0.0,
            "gap": _finite(cert.gap) if cert.primal is not None else None, "exact": cert.exact}


def _row_tail(row: dict[str, Any], result, start: float, doc: dict[str, Any], html: str,
              cut: bool) -> dict[str, Any]:
    """``row`` finished, plain or fleet: the search's and the whole solve's wall time, the
    document and its report, and ``time_limited`` where the sweep's --time-limit shortened
    the search (so that an unproven row is not stored)."""
    row.update(search_wall_s=round(result.wall_time_s, 3),
               solve_wall_s=round(time.perf_counter() - start, 3), document=doc, report_html=html)
    if cut:
        row["time_limited"] = True
    return row


def _fleet_row(task: dict[str, Any], spec, options: SearchOptions, start: float,
               cut: bool = False) -> dict[str, Any]:
    """The row of a scenario on a fleet of several groups (issue 34): the fleet search
    (:mod:`autopar_opt.search.mixed`), its plan.json and its fleet report. ``cut``: the
    sweep's --time-limit shortened its search, said by ``time_limited`` as for a plain
    scenario, so that an unproven row is not stored (QA round 35: a fleet scenario cut
    short was stored as "no plan was found within the time limit" and served to every
    later run, however much time that one had)."""
    from autopar_opt.reports.fleet import render_fleet_html
    from autopar_opt.search.fleet_document import build_fleet_document
    from autopar_opt.search.mixed import run_fleet_search
    from autopar_opt.search.replicas import DEFAULT_SPLIT_PARTS, batch_quantum

    result = run_fleet_search(spec.graph, spec.fleet, spec.training, spec.space, spec.cost_params,
                              options)
    doc = build_fleet_document(str(task["path"]), spec.graph, spec.fleet, spec.training, spec.space,
                               spec.cost_params, options, result,
                               batch_quantum(spec.training.global_batch_size, DEFAULT_SPLIT_PARTS))
    doc["notices"] = spec_notices(spec) + doc["notices"]    # as `autopar solve` says them
    cert = result.certificate
    metrics, placement = doc["metrics"], doc["placement"]
    row = {**_row_head(task, doc, cert),
           "plan": None if doc["plan"] is None else {"shape": doc["shape"],
                                                     "configuration": doc["best_configuration"]},
           "mfu": metrics["mfu"] if metrics else None,
           "interval": metrics.get("interval") if metrics else None,
           "peak_memory_gib": max((p["peak_memory_gib"] for p in placement), default=None),
           "reason": unproven_reason(doc["status"], cert, options, cut)
           if doc["plan"] is not None else
           ("every configuration of every shape is proven infeasible" if cert.infeasible
            else "no plan was found within the time limit"),
           "least_memory_gib": 0.0,
           "capacity_gib": max(g.device.hbm_gib for g in spec.fleet.groups) - spec.training.memory_reserve_gib}
    return _row_tail(row, result, start, doc, render_fleet_html(doc), cut)


def restamp(row: dict[str, Any], scenario_id: str, sweep_path: str) -> dict[str, Any]:
    """A stored row as this sweep's scenario ``scenario_id``: the store is keyed by the built
    scenario, so a row may come from another sweep file (or another id), and its plan.json
    named that sweep and id, from which ``autopar export`` rebuilds the spec, and its report
    that sweep as the spec file (QA round 11). The row as it is when they already match;
    else a copy with both set and the report rendered again."""
    doc = row.get("document")
    spec = doc.get("spec") if isinstance(doc, dict) else None
    named = isinstance(spec, dict) and "scenario" in spec   # a fleet's names none (no export)
    here = resolved_path(sweep_path)              # export reads the absolute path first
    if not isinstance(spec, dict) or (spec.get("resolved_path", spec.get("path")) in (here, sweep_path)
                                      and (not named or spec["scenario"] == scenario_id)):
        return row
    from autopar_opt.spec.doc_kinds import is_fleet

    doc = {**doc, "spec": {**spec, "path": sweep_path, "resolved_path": here,
                           **({"scenario": scenario_id} if named else {})}}
    if is_fleet(doc):
        from autopar_opt.reports.fleet import render_fleet_html as render
    else:
        from autopar_opt.reports.render import render_html as render
    return {**row, "id": scenario_id, "document": doc, "report_html": render(doc)}


def unproven_reason(status: str, cert, options: SearchOptions, cut: bool) -> str | None:
    """Why a scenario with a plan is not proven (status ``feasible``), for its row: the gap
    column alone said "feasible 28.05%" (QA round 35), while its plan.json advised
    ``autopar solve``'s --time-limit, which in a sweep is the whole sweep's budget. The
    configurations left open (a bound below the incumbent by more than the requested gap,
    with no proof of their own: :class:`~autopar_opt.core.bounds.Status`) say whether the
    time limit ended it; None for any other status."""
    from autopar_opt.core.bounds import Status

    if status != "feasible" or cert.primal is None:
        return None
    cutoff = cert.primal * (1.0 - options.rel_gap)
    open_ = [r for r in cert.configurations if r.lower_bound < cutoff * (1 - 1e-12)
             and r.status in (Status.feasible, Status.not_solved, Status.heuristic, Status.error)]
    words = (f"not proven to the requested gap (solver.rel_gap {options.rel_gap:g}): the best "
             "plan's time to train and cost may lie anywhere in their intervals (the plan held "
             "is the upper end); ")
    if not open_:
        return words + ("a configuration's plan was found by a method that proves no bound "
                        "(its plan report names it)")
    limit = (f"{options.time_limit_s:g} s, what the sweep's --time-limit had left" if cut
             else f"{options.time_limit_s:g} s (base solver.time_limit_s)")
    errors = sum(r.status is Status.error for r in open_)
    return words + (f"the search ended at its time limit of {limit} with {len(open_)} "
                    "configuration(s) open" + (f" ({errors} of them a solver error)" if errors
                                               else "")
                    + ("; give the sweep more --time-limit" if cut else
                       "; raise base.solver.time_limit_s (or solver.rel_gap) to close it"))


def _reason(doc: dict, least_memory_bytes: float) -> str | None:
    """Why there is no plan: the document's reason (least memory against capacity), or,
    when no strategy applies at all (nothing to weigh memory on), the first configuration's
    own reason (e.g. no data-parallel degree divides the micro-batch)."""
    info = doc["infeasibility"]
    if not info:
        return None
    if doc["certificate"]["lower_bound"] == "inf" and not math.isfinite(least_memory_bytes) \
            and info["details"]:
        return (f"every configuration of the search space is proven infeasible; no strategy applies: "
                f"{info['details'][0]}")
    return info["reason"]


def _strategy_mix(plan: dict) -> str:
    """The distinct per-layer strategies of a plan, most used first (e.g. 'dp4·tp8·sp·z1 x80')."""
    counts: dict[str, int] = {}
    for stage in plan["stages"]:
        for s in stage["strategies"]:
            label = Strategy.from_dict(s).label()
            counts[label] = counts.get(label, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{label} x{n}" for label, n in ranked[:3]) + (" ..." if len(ranked) > 3 else "")

