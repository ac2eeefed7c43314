"""One entry point: ``solve_placement(problem, ...)`` -> :class:`PlacementResult` with a gap.

Method choice (``solver="auto"``): contiguous max-load goes to the exact DP
over ideals when the lattice is within its guards; otherwise (or when a MILP
backend is named: ``highs``, ``gurobi``, ``scip``) the MILP of
:mod:`autopar_opt.placement.exact.milp` is solved with a time limit, warm-started
from the best heuristic placement or, where better, the contiguous DP's optimum
(the DP within its guards: ``details["milp_start"]``). Whatever the method, the answer carries a
proven lower bound: the DP's optimum, the MILP's dual bound, and always the
LP bound of :func:`~autopar_opt.placement.heuristics.compute_lower_bound`
(the larger is kept), so ``gap = (value − bound) / value`` (the project's one
gap function, :func:`autopar_opt.core.result.relative_gap`).

A stop signal (:class:`~autopar_opt.core.interrupts.SearchInterrupted`, raised by the
command's guard) during the latency bounds, the DP or the MILP ends the solve with the
best placement and bound held then (the baselines' at least) and ``details["stopped"]``
saying where it came; before the baselines exist it propagates (no placement).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from autopar_opt.core.deadline import PhaseDeadline, deadline_check
from autopar_opt.core.ideals import TooManyIdeals
from autopar_opt.core.interrupts import SearchInterrupted
from autopar_opt.core.portfolio import MethodRecord
from autopar_opt.placement.coarsen import coarsen_chains
from autopar_opt.placement.condense import Condensed, condense, is_acyclic
from autopar_opt.placement.evaluate import PlacementMetrics, evaluate_placement
from autopar_opt.placement.heuristics import compute_lower_bound, single_device, topo_split
from autopar_opt.placement.problem import PlacementProblem
from autopar_opt.core.result import PROOF_GAP, relative_gap

OBJECTIVES = ("max-load", "latency")
#: A MILP is not started with less time than this left (it could not return within the limit).
MILP_MIN_S = 0.5
#: Above this many units × devices the MILP is not attempted under "auto".
MILP_AUTO_LIMIT = 60_000
#: Contiguous max-load lattices up to this many ideals go straight to the exact DP.
LEAN_DP_IDEALS = 400


@dataclass
class PlacementResult:
    """A placement with its certificate (JSON-able via :meth:`to_dict`)."""

    problem: PlacementProblem
    objective: str
    contiguous: bool
    value: float
    lower_bound: float
    status: str                       # optimal | feasible | infeasible | no_solution
    method: str
    assignment: np.ndarray | None
    metrics: PlacementMetrics | None
    wall_time_s: float
    details: dict = field(default_factory=dict)

    @property
    def gap(self) -> float:
        return relative_gap(self.value if np.isfinite(self.value) else None, self.lower_bound)

    def device_rows(self) -> list[dict]:
        """Per device: node ids, load, memory."""
        if self.assignment is None or self.metrics is None:
            return []
        p = self.problem
        labels = p.device_labels()
        order = np.argsort(self.assignment, kind="stable")      # nodes grouped by device
        bounds = np.searchsorted(self.assignment[order], np.arange(len(labels) + 1)).tolist()
        ids = [p.node_ids[v] for v in order.tolist()]
        return [{"device": label, "nodes": ids[bounds[d]:bounds[d + 1]],
                 "load": self.metrics.loads[d], "compute": self.metrics.compute[d],
                 "comm": self.metrics.comm[d], "memory_bytes": self.metrics.memory_bytes[d]}
                for d, label in enumerate(labels)]

    def to_dict(self) -> dict:
        gap = self.gap
        return {"instance": self.problem.name, "objective": self.objective,
                "contiguous": self.contiguous, "value": _num(self.value),
                "lower_bound": _num(self.lower_bound), "gap": _num(gap), "status": self.status,
                "method": self.method, "devices": self.device_rows(),
                "wall_time_s": self.wall_time_s, "details": self.details}


def _num(x: float) -> float | None:
    return float(x) if x is not None and np.isfinite(x) else None


def _candidate(problem: PlacementProblem, cond: Condensed, unit_dev: np.ndarray | None,
               objective: str, contiguous: bool) -> tuple[float, np.ndarray | None]:
    if unit_dev is None:
        return np.inf, None
    a = cond.expand(unit_dev)
    m = evaluate_placement(problem, a, objective=objective, contiguous=contiguous)
    return (m.value, a) if m.feasible else (np.inf, None)


def _heuristics(problem: PlacementProblem, cond: Condensed, objective: str, contiguous: bool,
                check: Callable[[], None] | None = None, lower: float = 0.0
                ) -> tuple[float, np.ndarray | None, dict]:
    best, best_a, info = np.inf, None, {}
    # the split runs over a topological order: where the units keep a cycle (a
    # non-contiguous search condenses without fusing them) it splits the condensation
    # whose cycles are fused, whose placements are valid here too
    split = cond if is_acyclic(cond.num_units, cond.prec) else \
        condense(problem, fuse_cycles=True, check=check)
    for name, c, fn in (("single_device", cond, lambda: single_device(cond)[1]),
                        ("topological_split", split,
                         lambda: topo_split(split, check=check, lower=lower)[1])):
        val, a = _candidate(problem, c, fn(), objective, contiguous)
        info[name] = _num(val)
        if val < best:
            best, best_a = val, a
    return best, best_a, info


def solve_placement(problem: PlacementProblem, *, objective: str = "max-load",
                    contiguous: bool = True, solver: str = "auto",
                    time_limit_s: float | None = None, rel_gap: float = 1e-6,
                    coarsen: bool = True, memory_budget=None) -> PlacementResult:
    """Place ``problem``'s nodes; see the module docstring for the method choice.

    ``rel_gap``: stop as soon as the proven gap is at most this (status
    ``optimal`` then means "within the requested gap", as for the MIP solvers).
    ``coarsen``: for max-load, contract the dominated chain edges first
    (:mod:`autopar_opt.placement.coarsen`; keeps the optimum, so every method and
    bound below stays exact/valid for the original problem).
    ``memory_budget`` (a :class:`~autopar_opt.core.memory_budget.MemoryBudget`; default
    half the RAM): the MILP is counted before it is built and refused past it.

    ``details["methods"]`` records which method proved what, in order (the records of
    :class:`autopar_opt.core.portfolio.MethodRecord`: the route keeps its own order, the
    heuristics and the LP bound, the DP over ideals, the MILP).
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, not {objective!r}")
    start = time.perf_counter()
    deadline = None if time_limit_s is None else start + time_limit_s
    check = deadline_check(deadline)
    too_big, by = memory_shortfall(problem), "memory bound"
    if too_big is None:
        too_big, by = unplaceable(problem), "device support"
    if too_big is not None:
        return PlacementResult(problem=problem, objective=objective, contiguous=contiguous,
                               value=np.inf, lower_bound=np.inf, status="infeasible",
                               method=by, assignment=None, metrics=None,
                               wall_time_s=time.perf_counter() - start,
                               details={"infeasible": too_big})
    try:
        cond = condense(problem, fuse_cycles=contiguous, check=check)
    except PhaseDeadline:
        return _out_of_time(problem, objective, contiguous, start, "condensing the graph")
    if objective == "max-load" and contiguous and solver in ("auto", "dp"):
        lean = _small_dp(problem, cond, start)
        if lean is not None:
            return lean
    coarse_info = None
    if coarsen and objective == "max-load":
        cond, rep = coarsen_chains(cond, contiguous=contiguous, check=check)
        coarse_info = {"units_before": rep.units_before, "contracted": rep.contracted}
        if rep.stopped_early:
            coarse_info["stopped"] = f"at the time limit after {rep.passes} pass(es)"
    lower = compute_lower_bound(cond, deadline) if objective == "max-load" else 0.0
    value, assign, details = _heuristics(problem, cond, objective, contiguous, check,
                                         lower if deadline is not None else 0.0)
    if coarse_info is not None:
        details["coarsening"] = coarse_info
    if objective == "max-load":
        details["lp_bound"] = _num(lower)
    else:
        try:
            lower, value, assign = _latency_start(problem, cond, contiguous, deadline, value,
                                                  assign, details)
        except SearchInterrupted as exc:       # the baselines' placement is kept
            details["stopped"] = interrupted_note(exc.signum, "the latency bounds")
    details["units"] = cond.num_units
    records = [MethodRecord("heuristics+bound", "feasible" if np.isfinite(value) else "no_plan",
                            _num(value), lower, time.perf_counter() - start,
                            "the best baseline placement; the bound: "
                            + ("the LP relaxation" if objective == "max-load"
                               else "critical path and path segmentation"))]
    method = "heuristic"
    if relative_gap(value if np.isfinite(value) else None, lower) <= rel_gap:
        solver = "none"                # the heuristic is already within the requested gap
    elif "stopped" in details:
        solver = "none"                # a stop signal came while bounding: no exact method
    if objective == "max-load" and solver not in ("auto", "dp", "none"):
        details["milp_start"] = "heuristic"
    phase = ("dp (MILP start)", "the contiguous DP that gives the MILP its start")
    try:                  # a stop signal keeps the best placement so far (QA round 13)
        if objective == "max-load" and solver != "none" and (
                not contiguous or solver not in ("auto", "dp")):
            _contiguous_start(problem, details)
            if details.get("_dp_assign") is not None:
                a = details.pop("_dp_assign")
                v = evaluate_placement(problem, a, objective=objective,
                                       contiguous=contiguous).value
                if v < value:
                    value, assign = v, a
                    details["milp_start"] = "contiguous DP"
            details.pop("_dp_assign", None)
        if objective == "max-load" and contiguous and solver in ("auto", "dp"):
            from autopar_opt.placement.exact.dp import DPTooLarge, solve_dp
            phase = ("dp", "the DP over ideals")
            began = time.perf_counter()
            try:
                res = solve_dp(cond, deadline=deadline, upper_bound=value)
                details.update(ideals=res.num_ideals, ideal_pairs=res.num_pairs,
                               dp_time_s=res.wall_time_s)
                if not res.deadline_hit:
                    method = "dp"
                    v, a = _candidate(problem, cond, res.unit_device, objective, contiguous)
                    # the pruned DP is exact below the incumbent: its value (or the incumbent,
                    # when nothing beats it) is the optimum
                    lower = max(lower, min(res.value, value))
                    if v < value:
                        value, assign = v, a
                records.append(MethodRecord(
                    "dp", "feasible" if res.deadline_hit else "optimal",
                    None if res.deadline_hit else _num(min(res.value, value)),
                    -np.inf if res.deadline_hit else lower, time.perf_counter() - began,
                    "stopped at the time limit" if res.deadline_hit else
                    "exact DP over the ideals (pruned at the incumbent)",
                    {"ideals": res.num_ideals, "ideal_pairs": res.num_pairs}))
            except (DPTooLarge, TooManyIdeals) as exc:
                details["dp_skipped"] = str(exc)
                records.append(MethodRecord("dp", "refused", message=str(exc),
                                            time_s=time.perf_counter() - began))
                if solver == "dp":
                    raise
        remaining = None if deadline is None else deadline - time.perf_counter()
        milp_wanted = method == "heuristic" and solver not in ("dp", "none") and (
            solver != "auto" or cond.num_units * problem.num_devices <= MILP_AUTO_LIMIT)
        if milp_wanted and (remaining is None or remaining >= MILP_MIN_S):
            from autopar_opt.placement.exact.solve_milp import run_milp
            phase = ("milp", "the MILP")
            began = time.perf_counter()
            v, a, lb, info = run_milp(problem, cond, objective, contiguous, solver, remaining,
                                      rel_gap, assign, memory_budget)
            details.update(info)
            records.append(_milp_record(info, v, lb, time.perf_counter() - began))
            if "milp_refused" not in info:          # a refused MILP answered nothing
                method = f"milp:{info.get('milp_solver', solver)}"
            lower = max(lower, lb)
            if v < value:
                value, assign = v, a
        elif milp_wanted:
            details["milp_skipped"] = f"{max(remaining, 0.0):.2f} s left of the time limit"
            records.append(MethodRecord("milp", "skipped", message=details["milp_skipped"]))
        elif method == "heuristic" and solver not in ("dp", "none"):
            records.append(MethodRecord("milp", "skipped", message=(
                f"units x devices = {cond.num_units * problem.num_devices:,} is over the auto "
                f"route's MILP limit {MILP_AUTO_LIMIT:,}; name a MILP solver to try it")))
        elif solver == "none":
            records.append(MethodRecord("exact methods", "skipped", message=(
                "a stop signal came first" if "stopped" in details
                else "the heuristic is already within the requested gap")))
    except SearchInterrupted as exc:
        details.pop("_dp_assign", None)
        details["stopped"] = interrupted_note(exc.signum, phase[1])
        records.append(MethodRecord(phase[0], "interrupted", message=details["stopped"]))
    details["methods"] = [r.to_dict() for r in records]
    lower = min(lower, value) if np.isfinite(value) else lower
    if np.isfinite(value) and value - lower <= 1e-9 * abs(value):
        lower = value                 # round-off between the DP's sums and evaluate's
    status = _status(value, lower, rel_gap)
    if status == "infeasible":
        details["infeasible"] = infeasible_reason(cond, contiguous, method)
    metrics = (evaluate_placement(problem, assign, objective=objective, contiguous=contiguous)
               if assign is not None else None)
    return PlacementResult(problem=problem, objective=objective, contiguous=contiguous,
                           value=value, lower_bound=lower, status=status, method=method,
                           assignment=assign, metrics=metrics,
                           wall_time_s=time.perf_counter() - start, details=details)


def interrupted_note(signum: int, phase: str) -> str:
    """``details["stopped"]`` of a solve a stop signal cut during ``phase``: the answer
    is the best placement found before it and the best bound proven then (the CLI's
    "interrupted by signal N" wording, which the report's headline repeats)."""
    return (f"interrupted by signal {signum} during {phase}: the placement is the best "
            "found before it (the baselines' or an earlier method's) and the bound the "
            "best proven then")


def infeasible_reason(cond: Condensed, contiguous: bool, method: str) -> str:
    """Why an exact method found no placement, for the answer's ``infeasible`` entry
    (QA round 12: an exit 3 from the DP or the MILP said nothing). A unit (a colour
    class, with the cycles a contiguous placement must keep on one device) that fits
    no device is named; otherwise the method's proof is."""
    p = cond.problem
    cond = condense(p, fuse_cycles=contiguous)    # the forced units only (no coarsening)
    types = [t for t in p.device_types if t.count > 0]
    fits_any = np.zeros(cond.num_units, dtype=bool)
    for t in types:
        fits_any |= np.isfinite(cond.time[t.name]) & \
            (cond.size_bytes <= t.memory_bytes * (1 + 1e-9))
    stuck = np.flatnonzero(~fits_any)
    if stuck.size:                                  # the largest unit that fits no device
        u = int(stuck[np.argmax(cond.size_bytes[stuck])])
        ids = [str(p.node_ids[v]) for v in cond.members[u][:6]]
        more = ", ..." if len(cond.members[u]) > 6 else ""
        cap = max((t.memory_bytes for t in types if np.isfinite(cond.time[t.name][u])),
                  default=0.0)
        if len(cond.members[u]) == 1:
            who = f"node {ids[0]} needs"
        else:
            why = "colour classes" + (" and the cycles a contiguous placement keeps on "
                                      "one device" if contiguous else "")
            who = f"nodes {', '.join(ids)}{more} must share one device ({why}) and need"
        return (f"{who} {cond.size_bytes[u]:.4g} bytes, more than the {cap:.4g} bytes of "
                "any device that runs them")
    return (f"no {'contiguous ' if contiguous else ''}placement meets the memory limits, "
            f"colour classes and device support (proven by {method})")


def unplaceable(problem: PlacementProblem) -> str | None:
    """Why no placement can exist when some node runs on none of the devices there are
    (its time is infinite on every type with devices: unsupported on the accelerators
    and no CPU), else None."""
    types = [t for t in problem.device_types if t.count > 0]
    runs = np.zeros(problem.num_nodes, dtype=bool)
    for t in types:
        runs |= np.isfinite(np.asarray(problem.time[t.name], dtype=float))
    bad = np.flatnonzero(~runs)
    if bad.size == 0:
        return None
    ids = [str(problem.node_ids[i]) for i in bad[:5]] + (["..."] if bad.size > 5 else [])
    have = ", ".join(f"{t.count} x {t.name}" for t in types) or "no devices"
    return (f"{bad.size} node(s) run on none of the devices there are ({have}): node(s) "
            f"{', '.join(ids)}")


def memory_shortfall(problem: PlacementProblem) -> str | None:
    """Why no placement can exist when the nodes need more memory than all devices hold
    together (every node sits on one device, so the sizes add up somewhere), else None."""
    total = float(problem.size_bytes.sum())
    cap = sum(dt.count * dt.memory_bytes for dt in problem.device_types if dt.count > 0)
    if total <= cap * (1 + 1e-9):
        return None
    return (f"the nodes need {total:.4g} bytes, more than the {cap:.4g} bytes of all "
            f"{problem.num_devices} devices together")


def node_lower_bound(problem: PlacementProblem) -> float:
    """A valid max-load bound from the nodes alone (no condensing): the largest
    fastest-type time of a node, and the fastest-type work spread over every device
    (the LP bound of :func:`compute_lower_bound` with units split finer, so weaker)."""
    types = [t for t in problem.device_types if t.count > 0]
    if not types or problem.num_nodes == 0:
        return 0.0
    tmin = np.min(np.array([problem.time[t.name] for t in types]), axis=0)
    return max(float(tmin.max()), float(tmin.sum()) / sum(t.count for t in types))


def _out_of_time(problem: PlacementProblem, objective: str, contiguous: bool, start: float,
                 phase: str) -> PlacementResult:
    """No placement: the time limit ran out while ``phase`` (the bound from the nodes)."""
    lower = node_lower_bound(problem) if objective == "max-load" else 0.0
    return PlacementResult(problem=problem, objective=objective, contiguous=contiguous,
                           value=np.inf, lower_bound=lower, status="no_solution",
                           method="none", assignment=None, metrics=None,
                           wall_time_s=time.perf_counter() - start,
                           details={"stopped": f"the time limit ran out while {phase}"})


def _latency_start(problem: PlacementProblem, cond: Condensed, contiguous: bool,
                   deadline: float | None, value: float, assign: np.ndarray | None,
                   details: dict) -> tuple[float, float, np.ndarray | None]:
    """Latency: the sound lower bound (critical path, path segmentation DP) and the
    incumbent (best of the baselines, everything on the host, and the sum-of-loads DP
    over ideals); :mod:`autopar_opt.placement.bounds.latency`."""
    from autopar_opt.placement.bounds.latency import latency_lower_bound, serial_incumbent

    try:
        lower, info = latency_lower_bound(problem, deadline_check(deadline))
        details["latency_bounds"] = {k: _num(v) if v is not None else None for k, v in info.items()}
    except PhaseDeadline:       # some node runs somewhere: its fastest time is a bound
        types = [t for t in problem.device_types if t.count > 0]
        lower = float(np.max(np.min([problem.time[t.name] for t in types], axis=0))) \
            if types and problem.num_nodes else 0.0
        details["latency_bounds"] = {"stopped": "the time limit ran out while bounding; the "
                                     "bound is the slowest node's fastest time"}
    host = next((d for d, t in enumerate(problem.devices()) if not t.pays_comm), None)
    cands = [("everything_on_host", None if host is None else np.full(problem.num_nodes, host))]
    if contiguous:
        a, dp_value = serial_incumbent(cond, deadline, upper_bound=value)
        cands.append(("serial_dp", a))
        details["serial_dp_value"] = _num(dp_value)
    for name, a in cands:
        val = np.inf
        if deadline is not None and time.perf_counter() > deadline:
            details[f"{name}_skipped"] = "the time limit ran out first"
            continue
        if a is not None:
            m = evaluate_placement(problem, a, objective="latency", contiguous=contiguous)
            val = m.value if m.feasible else np.inf
        details[name] = _num(val)
        if val < value:
            value, assign = val, a
    return lower, value, assign


def _small_dp(problem: PlacementProblem, cond: Condensed, start: float
              ) -> PlacementResult | None:
    """Contiguous max-load on a small lattice: the exact DP alone.

    At most :data:`LEAN_DP_IDEALS` ideals the unpruned DP takes milliseconds and its
    optimum is its own certificate, so the work that only serves larger instances
    (chain coarsening, the baselines that prune the DP, the LP bound that could stop
    early at a requested gap) is skipped. None (the caller takes the full path) for
    a larger lattice or when the DP finds no feasible placement."""
    from autopar_opt.core.ideals import enumerate_ideals
    from autopar_opt.placement.exact.dp import solve_dp

    if cond.num_units >= LEAN_DP_IDEALS:   # a DAG of k units has at least k + 1 ideals
        return None
    try:
        lat = enumerate_ideals(cond.num_units, [tuple(e) for e in cond.prec.tolist()],
                               limit=LEAN_DP_IDEALS)
    except TooManyIdeals:
        return None
    res = solve_dp(cond, lattice=lat)
    if res.unit_device is None or not np.isfinite(res.value):
        return None
    assign = cond.expand(res.unit_device)
    metrics = evaluate_placement(problem, assign, objective="max-load", contiguous=True)
    if not metrics.feasible:
        return None
    value = metrics.value
    lower = min(res.value, value)
    if value - lower <= 1e-9 * abs(value):
        lower = value                 # round-off between the DP's sums and evaluate's
    details = {"units": cond.num_units, "ideals": res.num_ideals, "ideal_pairs": res.num_pairs,
               "dp_time_s": res.wall_time_s, "path": "small lattice: exact DP only",
               "methods": [MethodRecord("dp", "optimal", value, lower, res.wall_time_s,
                                        "exact DP over the ideals of a small lattice",
                                        {"ideals": res.num_ideals}).to_dict()]}
    return PlacementResult(problem=problem, objective="max-load", contiguous=True, value=value,
                           lower_bound=lower, status=_status(value, lower, 1e-6), method="dp",
                           assignment=assign, metrics=metrics,
                           wall_time_s=time.perf_counter() - start, details=details)


def _contiguous_start(problem: PlacementProblem, details: dict) -> None:
    """The contiguous optimum (when the DP is within its guards): feasible for both
    variants, the MIP start of the MILP when a MILP solver is named (primal side only:
    the reported bound is the MILP's own, never the DP's value)."""
    from autopar_opt.placement.exact.dp import DPTooLarge, solve_dp
    cond, _ = coarsen_chains(condense(problem, fuse_cycles=True), contiguous=True)
    try:
        res = solve_dp(cond, max_pairs=5_000_000)
    except (DPTooLarge, TooManyIdeals):
        return
    if res.unit_device is not None:
        details["contiguous_optimum"] = _num(res.value)
        details["_dp_assign"] = cond.expand(res.unit_device)


def _milp_record(info: dict, value: float, bound: float, wall_s: float) -> MethodRecord:
    """The MILP's part (``info`` from :func:`~.exact.solve_milp.run_milp`)."""
    name = f"milp:{info.get('milp_solver', '?')}"
    size = {k: info[k] for k in ("milp_rows", "milp_columns", "milp_nonzeros") if k in info}
    if "milp_refused" in info:
        return MethodRecord(name, "refused", message=info["milp_refused"], time_s=wall_s,
                            stats=size)
    status = info.get("milp_status", "error")
    status = {"heuristic": "feasible", "time_limit_no_solution": "no_plan"}.get(status, status)
    if status == "optimal" and not np.isfinite(value):
        status = "no_plan"
    return MethodRecord(name, status, _num(value), bound, wall_s,
                        str(info.get("milp_message") or ""), size)


def _status(value: float, lower: float, rel_gap: float) -> str:
    if not np.isfinite(value):
        return "infeasible" if lower == np.inf else "no_solution"
    # PROOF_GAP: the MILP solvers' feasibility tolerances (big-M rows) make their bounds
    # exact only to about that relative accuracy; above it "optimal" is within --gap
    return "optimal" if relative_gap(value, lower) <= max(rel_gap, PROOF_GAP) else "feasible"
