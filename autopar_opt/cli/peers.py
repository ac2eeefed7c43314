"""``autopar solve SPEC`` for a spec with ``problem:``: solve, certify, write, print.

The document has the keys of our own ``plan.json`` that describe a result
(``status``, ``plan``, ``certificate`` with ``primal``, ``lower_bound``,
``gap``, ``exact``, ``status``; ``solver`` with ``wall_time_s``), with the
plan in the peer's terms. Exit codes as for every solve: 0 plan found,
2 bad input, 3 proven infeasible, 4 no plan within the limits.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import sys
from pathlib import Path
from typing import Any

from autopar_opt import __version__
from autopar_opt.core.result import status_words
from autopar_opt.peers.outcome import PeerOutcome
from autopar_opt.peers.pase.format import pase_objective
from autopar_opt.peers.spec import PeerSpec
from autopar_opt.core.result import Termination, json_float, relative_gap

EXIT = {"optimal": 0, "feasible": 0, "infeasible": 3, "no_plan": 4}


def _status(res: PeerOutcome, rel_gap: float) -> str:
    if res.termination is Termination.infeasible or res.lower_bound == math.inf:
        return "infeasible"
    if res.primal is None:
        return "no_plan"
    return "optimal" if res.gap <= rel_gap + 1e-12 else "feasible"


def plan_dict(spec: PeerSpec, solution: Any) -> dict | None:
    """The plan in the peer's terms (file ids and TMPC ids for Piper; indices and splits for PaSE)."""
    if solution is None:
        return None
    inst = spec.instance
    if spec.format == "pase":
        return {"vertices": [{"id": v, "name": inst.names[v], "config": int(c), "split": inst.configs[v][c]}
                             for v, c in enumerate(solution)]}
    from autopar_opt.peers.piper.evaluate import evaluate_piper
    metrics = evaluate_piper(inst, solution)
    stages = []
    for st, m in zip(solution.stages, metrics.stages):
        stages.append({"nodes": [inst.ids[v] for v in st.nodes], "d": st.d, "t": st.t,
                       "tmpcs": [inst.tmpcs[st.t][v][k].name for v, k in zip(st.nodes, st.tmpc)],
                       "tps": m.tps, "y": m.y, "memory_bytes": m.memory_bytes})
    return {"stages": stages, "devices_used": metrics.devices, "tps": metrics.tps}


def _price_given(spec: PeerSpec, optimum: float | None) -> dict | None:
    if spec.plan is None:
        return None
    if spec.format == "pase":
        value, feasible = pase_objective(spec.instance, spec.plan), True
    else:
        from autopar_opt.peers.piper.evaluate import PiperPlanError, evaluate_piper
        try:
            m = evaluate_piper(spec.instance, spec.plan)
        except PiperPlanError as exc:
            return {"valid": False, "reason": str(exc)}
        value, feasible = m.tps, m.feasible
    out = {"valid": True, "value": value, "fits_memory": feasible}
    if optimum is not None and feasible:
        out["above_optimum"] = json_float((value - optimum) / optimum if optimum else 0.0)
    return out


def build_peer_document(spec: PeerSpec, res: PeerOutcome, solver: str, time_limit_s: float,
                        rel_gap: float, methods: list[dict] | None = None,
                        memory_budget: str | None = None) -> dict:
    """The JSON document of a peer solve (see module docstring). ``methods``: what each
    method of the portfolio did (``certificate.methods``)."""
    status = _status(res, rel_gap)
    inst = spec.instance
    size = ({"vertices": inst.n, "edges": len(inst.edges)} if spec.format == "pase"
            else {"nodes": inst.n, "edges": len(inst.edges), "tensor_degrees": inst.degrees})
    return {
        "schema_version": 1,
        "tool": {"name": "autopar-opt", "version": __version__},
        "created_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "spec": {"path": str(spec.path), "problem": {"format": spec.format, "name": inst.name,
                                                      **spec.settings, **size}},
        "status": status,
        "plan": plan_dict(spec, res.solution),
        "certificate": {"primal": json_float(res.primal), "lower_bound": json_float(res.lower_bound),
                        "gap": json_float(relative_gap(res.primal, res.lower_bound)),
                        "exact": res.primal is not None and math.isfinite(res.lower_bound)
                        and res.lower_bound <= res.primal * (1 + 1e-9),
                        "status": status, "method": res.method, "message": res.message,
                        **({"methods": methods} if methods is not None else {})},
        "solver": {"name": solver, "version": res.solver_version or f"autopar-dp {__version__}",
                   "time_limit_s": time_limit_s, "rel_gap": rel_gap,
                   **({"memory_budget": memory_budget} if memory_budget else {}),
                   "wall_time_s": round(res.wall_time_s, 4), "stats": res.stats},
        "wall_time_s": round(res.wall_time_s, 4),
        "given_plan": _price_given(spec, res.primal),
    }


#: Seconds kept back from the time limit for writing the outputs (the JSON, and the
#: report when --out asks for one): the most measured on the shipped instances
#: (report of a 256-edge PaSE table, 0.3 s at load 1) with room for a loaded machine.
OUTPUT_RESERVE_S, REPORT_RESERVE_S = 0.2, 1.0


def peer_solve_command(spec: PeerSpec, solver: str | None, time_limit_s: float | None,
                       gap: float | None, out_dir: str | None, json_output: bool, quiet: bool,
                       started_at: float | None = None, memory_limit_gib: float | None = None) -> int:
    """The whole ``solve`` job for a peer spec; returns the exit code.

    ``auto`` (the default) runs the portfolio of :mod:`autopar_opt.peers.portfolio`
    (the exact DP first, the MILP only while the gap is open); a backend name or
    ``dp`` forces one method. The time limit is the whole command's, counted
    from ``started_at`` (process start); a stop signal (SIGINT/SIGTERM) ends the
    solve with what it proved, and the document is still written (and printed
    with ``--json``), status ``interrupted``, exit 128 + signal. Solver output on
    file descriptor 1 goes to stderr (:func:`~autopar_opt.core.streams.stdout_to_stderr`).

    The report renderer (jinja2) is imported only when ``--out`` asks for a
    report: it is not needed for the JSON or the summary (start-up, issue 18;
    importing the full report module for ``write_atomic`` loaded matplotlib)."""
    import time

    from autopar_opt.cli.budget import Budget
    from autopar_opt.core.files import write_atomic
    from autopar_opt.core.interrupts import InterruptGuard, SearchInterrupted, exit_code
    from autopar_opt.core.memory_budget import MemoryBudget
    from autopar_opt.core.portfolio import Shared
    from autopar_opt.core.streams import stdout_to_stderr
    from autopar_opt.peers.portfolio import outcome_of, solve_peer

    name = (solver or spec.solver.name).strip().lower()
    limit = time_limit_s if time_limit_s is not None else spec.solver.time_limit_s
    rel = gap if gap is not None else spec.solver.rel_gap
    budget = Budget(limit, started_at if started_at is not None else time.perf_counter())
    reserve = OUTPUT_RESERVE_S + (REPORT_RESERVE_S if out_dir else 0.0)
    deadline = budget.deadline - min(reserve, 0.25 * limit)
    memory = MemoryBudget.of(memory_limit_gib)
    shared = Shared(rel)
    began = time.perf_counter()
    stopped_by: int | None = None
    with InterruptGuard() as guard:
        try:
            with stdout_to_stderr():
                solve_peer(spec, name, deadline=deadline, rel_gap=rel, budget=memory, shared=shared)
        except SearchInterrupted as exc:
            stopped_by = exc.signum
        guard.defer()                 # a second signal must not cut the outputs short
        stopped_by = guard.signum or stopped_by
        res = outcome_of(shared, time.perf_counter() - began)
        last = next((r for r in reversed(shared.records) if r.version or r.stats), None)
        if last is not None:
            res.solver_version, res.stats = last.version, last.stats
        doc = build_peer_document(spec, res, name, limit, rel, shared.methods(), memory.describe())
        if stopped_by is not None:
            doc["status"] = doc["certificate"]["status"] = "interrupted"
        text = json.dumps(doc, indent=2)
        if out_dir:
            Path(out_dir).mkdir(parents=True, exist_ok=True)
            from autopar_opt.reports.peer import write_peer_report

            write_atomic(Path(out_dir) / "plan.json", text + "\n")
            write_peer_report(doc, Path(out_dir) / "report.html")
        if json_output:
            sys.stdout.write(text + "\n")
        elif not quiet:
            _print_summary(doc, res)
        if stopped_by is not None:
            return exit_code(stopped_by)
    return EXIT[doc["status"]]


def _print_summary(doc: dict, res: PeerOutcome) -> None:
    cert = doc["certificate"]
    head = f"{doc['spec']['problem']['format']} {doc['spec']['problem']['name']}"
    if doc["status"] == "infeasible":
        print(f"{head}: proven infeasible (lower bound inf: no plan fits the memory per "
              f"device and the devices; {res.method}, {res.wall_time_s:.2f} s)")
    else:
        from autopar_opt.reports.peer import objective_unit
        num = lambda x: f"{x:.6g}" if isinstance(x, (int, float)) else str(x)  # noqa: E731
        print(f"{head}: {status_words(doc['status'], cert.get('gap'))} primal "
              f"{num(cert['primal'])} lower bound "
              f"{num(cert['lower_bound'])} gap {num(cert['gap'])} ({res.method}, "
              f"{res.wall_time_s:.2f} s)")
        print(f"  objective: {objective_unit(doc)}")
    for m in cert.get("methods", []):
        print(f"  {m['method']}: {m['status']}" + (f" ({m['message']})" if m["message"] else ""))
    for line in plan_lines(doc.get("plan")):
        print("  " + line)
    if doc["given_plan"]:
        from autopar_opt.reports.peer import given_plan_line
        print(f"  given plan: {given_plan_line(doc['given_plan'])}")


def _ranges(ids: list) -> str:
    """Node ids as runs (``0-77``, ``3, 5-9``)."""
    out, run = [], []
    for i in ids:
        if run and isinstance(i, int) and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [i] if isinstance(i, int) else []
        if not isinstance(i, int):
            out.append(str(i))
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ", ".join(out)


def plan_lines(plan: dict | None) -> list[str]:
    """The plan in the peer's terms: Piper's stages (nodes, d, t, the TMPCs used) or
    PaSE's configuration per vertex (the first 20)."""
    if not plan:
        return []
    if "stages" in plan:
        lines = []
        for k, st in enumerate(plan["stages"]):
            tmpcs = sorted(set(st.get("tmpcs", [])))
            lines.append(f"stage {k}: nodes {_ranges(st['nodes'])}, d={st['d']}, t={st['t']}, "
                         f"TMPC {', '.join(map(str, tmpcs))}")
        return lines
    rows = plan.get("vertices") or []
    def split(v: dict) -> str:
        return "x".join(map(str, v["split"])) if v.get("split") else str(v.get("config"))
    shown = [f"{v.get('name', v.get('id'))} {split(v)}" for v in rows[:20]]
    return (["configurations: " + "; ".join(shown) + (f"; ... ({len(rows)} vertices)"
                                                       if len(rows) > 20 else "")]
            if shown else [])
