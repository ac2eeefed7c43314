"""``autopar place SPEC``: solve, print (text or ``--json``), write placement.json + report."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import typer

from autopar_opt.placement.evaluate import evaluate_placement
from autopar_opt.core.result import PROOF_GAP
from autopar_opt.placement.solve import PlacementResult, solve_placement


#: The baselines, by name, and the key of the same heuristic in a solve's details.
BASELINES = (("everything on one device", "single_device"),
             ("greedy topological split", "topological_split"))


def placement_baselines(result: PlacementResult, expert_path: str | None,
               deadline: float | None = None) -> list[dict]:
    """The baselines priced by the evaluator; each stops at ``deadline`` (a row it could
    not finish says so, with no value).

    When the solve already priced them on the same units (max-load, contiguous, and
    coarsening merged nothing: its condensed graph is the baselines' own) their values are
    taken from it instead of being worked out a second time (on 10^6 nodes that was
    half the command's time)."""
    from autopar_opt.core.deadline import PhaseDeadline, deadline_check
    from autopar_opt.placement.condense import condense
    from autopar_opt.placement.heuristics import single_device, topo_split
    p = result.problem
    det = result.details
    if "infeasible" in det:
        return [{"name": name, "value": None, "note": "no placement exists"}
                for name, _ in BASELINES] + _expert_row(result, expert_path)
    if (result.objective == "max-load" and result.contiguous
            and (det.get("coarsening") or {}).get("contracted") == 0
            and all(key in det for _, key in BASELINES)):
        return [{"name": name, "value": det[key]} for name, key in BASELINES] + \
            _expert_row(result, expert_path)
    check = deadline_check(deadline)
    try:
        cond = condense(p, fuse_cycles=True, check=check)
    except PhaseDeadline:
        cond = None
    rows = []
    makers = {"single_device": lambda: single_device(cond)[1],
              "topological_split": lambda: topo_split(cond, check=check)[1]}
    for name, key in BASELINES:
        val, note = None, None
        unit_dev = makers[key]() if cond is not None else None
        if unit_dev is not None:
            m = evaluate_placement(p, cond.expand(unit_dev), objective=result.objective)
            val = m.value if m.feasible and np.isfinite(m.value) else None
        elif isinstance(det.get(key), (int, float)):
            # no time left to work it out on the whole graph: the solve's own run of the
            # same heuristic (on the units it searched, whose placements are the graph's)
            val = det[key]
        elif deadline is not None and time.perf_counter() > deadline:
            note = "not computed within the time limit"
        rows.append({"name": name, "value": val, **({"note": note} if note else {})})
    return rows + _expert_row(result, expert_path)


def _expert_row(result: PlacementResult, expert_path: str | None) -> list[dict]:
    """The human expert's split, priced (none without ``--expert``)."""
    p = result.problem
    rows = []
    if expert_path:
        from autopar_opt.placement.importers.public_json import load_expert_split
        placed: dict = {}
        m = evaluate_placement(p, load_expert_split(expert_path, p, placed),
                               objective=result.objective, contiguous=result.contiguous)
        row = {"name": f"human expert ({Path(expert_path).name})",
               "value": m.value if np.isfinite(m.value) else None, "violations": m.violations}
        if placed.get("by_colour"):
            row["note"] = (f"{placed['by_colour']} of {p.num_nodes} nodes are not in the split: "
                           "each placed on the device of a node of its colour class (a backward "
                           "node with its forward node)")
        rows.append(row)
    return rows


#: The time unit of a graph whose importer does not state one: the public format's files
#: carry bare numbers (Tarnawski et al.'s instances), priced as given.
FILE_UNIT = "the input file's time unit"


def time_unit(problem) -> str:
    """The unit of every time and load of a placement (QA round 12: never said; the zoo,
    ONNX and torch.fx importers price nodes in ms, a public-format file in its own unit)."""
    return str(problem.meta.get("units") or FILE_UNIT)


def placement_document(result: PlacementResult, expert_path: str | None,
                       deadline: float | None = None) -> dict:
    """Everything placement.json holds (the report renders from it); the baselines stop
    at ``deadline``."""
    p = result.problem
    doc = result.to_dict()
    caps = [dt.memory_bytes for dt in p.devices()]
    for row, cap in zip(doc["devices"], caps):
        row["capacity_bytes"] = cap if np.isfinite(cap) else None
    doc.update(num_nodes=p.num_nodes, num_edges=int(len(p.edges)),
               time_unit=time_unit(p),
               **({"transfers": p.meta["transfers"]} if p.meta.get("transfers") else {}),
               devices_text=", ".join(f"{dt.count} x {dt.name}" for dt in p.device_types),
               baselines=placement_baselines(result, expert_path, deadline),
               bound_source=_bound_source(result))
    if result.metrics is not None and result.assignment is not None:
        doc["metrics"] = result.metrics.to_dict()
        # the input's node ids, as devices[].nodes and cut_edges[] give them (not positions)
        doc["metrics"]["cut_nodes"] = [p.node_ids[i] for i in doc["metrics"]["cut_nodes"]]
        doc["cut_edges"] = _cut_edges(p, result.assignment)
    return doc


def _cut_edges(p, assign: np.ndarray) -> list[dict]:
    """Every node whose output is read on another device: its device and the readers'
    (one pass over the edges, not one list of consumers per node)."""
    from autopar_opt.core.ideals import unique_rows

    labels = p.device_labels()
    e = p.edges
    cross = assign[e[:, 0]] != assign[e[:, 1]]
    if not np.any(cross):
        return []
    rows = unique_rows(np.stack([e[cross, 0], assign[e[cross, 1]]], axis=1))
    starts = np.flatnonzero(np.r_[True, rows[1:, 0] != rows[:-1, 0]])
    ends = np.r_[starts[1:], len(rows)]
    cuts = []
    for a, b in zip(starts.tolist(), ends.tolist()):
        u = int(rows[a, 0])
        readers = sorted({labels[d] for d in rows[a:b, 1].tolist()})
        cuts.append({"name": p.node_names[u], "id": p.node_ids[u],
                     "device": labels[int(assign[u])], "readers": ", ".join(readers),
                     "cost": float(p.comm[u])})
    return cuts


def _bound_source(result: PlacementResult) -> str:
    if "infeasible" in result.details:
        return f"Proven infeasible: {result.details['infeasible']}."
    if result.method == "none":
        return ("Lower bound from the nodes alone (the largest fastest-type time of a node, and "
                "the fastest-type work spread over every device): "
                f"{result.details.get('stopped', 'the time limit ran out')}; a longer "
                "--time-limit finds a placement.")
    if result.objective == "latency":
        milp = (" and the MILP dual bound (branch and bound)" if result.method.startswith("milp")
                else "")
        return ("Latency lower bound: the best of the critical path (cheapest times, free "
                "transfers) and a DP that segments long paths into blocks (memory forces cuts, "
                "each cut pays its transfer on both sides)" + milp + ". Incumbent: the best of "
                "the baselines and the DP over ideals that minimises the sum of the block loads.")
    if result.method == "dp":
        return ("Exact DP over the ideals of the condensed graph (colour classes, backward nodes "
                "with their forward class, and chain edges whose cut is provably dominated "
                "merged): the value is the optimum over contiguous placements, i.e. chains of "
                "ideals: every device's node set, the CPU's included, is contiguous and the "
                "devices can be ordered so that every edge runs forward (the device graph is "
                "acyclic; Tarnawski et al.'s DP space, whose published optima it reproduces).")
    if result.method.startswith("milp"):
        return ("MILP dual bound (branch and bound), combined with the LP bound that drops "
                "communication and divides work freely.")
    return ("Lower bound from the relaxation (communication dropped, work divisible); the "
            "value is the best heuristic placement.")


def _json_summary(doc: dict) -> dict:
    keys = ("objective", "value", "lower_bound", "gap", "status", "wall_time_s", "method",
            "instance", "contiguous", "num_nodes", "time_unit", "transfers", "cycles")
    out = {k: doc[k] for k in keys if k in doc}
    out["devices"] = [{k: d[k] for k in ("device", "nodes", "load", "memory_bytes")}
                      for d in doc["devices"]]
    det = doc.get("details", {})
    out["details"] = {k: det[k] for k in ("units", "coarsening", "ideals", "ideal_pairs", "dp_time_s",
                                          "lp_bound", "dp_skipped", "path", "latency_bounds",
                                          "serial_dp_value", "serial_dp", "milp_start",
                                          "milp_status", "milp_bound", "milp_time_s",
                                          "contiguous_optimum", "infeasible", "stopped",
                                          "milp_skipped", "milp_refused") if k in det}
    out["methods"] = det.get("methods", [])
    # what placement.json holds beside them (QA round 9: --json left out the baselines, the
    # expert split's result and violations, the metrics and the cut edges)
    for key in ("baselines", "metrics", "cut_edges", "bound_source"):
        if key in doc:
            out[key] = doc[key]
    return out


def keep_better(result: PlacementResult, found) -> PlacementResult:
    """The searcher's plan (already priced by evaluate_placement) replaces the exact
    side's when strictly better (the exact side ran out of time); the proven
    lower bound stays, the status follows the new gap."""
    import dataclasses

    from autopar_opt.core.result import relative_gap
    from autopar_opt.placement.evaluate import evaluate_placement

    if not (found is not None and found.feasible and found.value < result.value * (1 - 1e-12)):
        return result
    assign = np.asarray(found.plan["assignment"], dtype=np.int64)
    metrics = evaluate_placement(result.problem, assign, objective=result.objective,
                                 contiguous=result.contiguous)
    gap = relative_gap(metrics.value, result.lower_bound)
    return dataclasses.replace(result, value=metrics.value, assignment=assign, metrics=metrics,
                               status="optimal" if gap <= 1e-6 else "feasible",
                               method=f"{result.method} + {found.name} plan (warm start)")


#: Exit code per placement status: a placement found, proven infeasible, none within the limit.
EXIT_CODES = {"optimal": 0, "feasible": 0, "infeasible": 3, "no_solution": 4}
#: Time kept for the outputs after the solve (s): a fixed part and a part per node
#: (placement.json lists every node; measured: about 1.5 µs per node to build and write
#: the document of a 10^6-node chain, plus the report).
OUTPUT_RESERVE_S, OUTPUT_RESERVE_PER_NODE_S = 0.3, 3e-6


def output_reserve_s(num_nodes: int) -> float:
    """Seconds kept for the document, the baselines and the report."""
    return OUTPUT_RESERVE_S + OUTPUT_RESERVE_PER_NODE_S * num_nodes


def input_cycle(problem) -> str | None:
    """One directed cycle of the input graph, ``"0 -> 1 -> 2 -> 0"`` in the input's node ids
    (at most six shown), or None when the graph is acyclic."""
    from autopar_opt.placement.condense import is_acyclic

    if is_acyclic(problem.num_nodes, problem.edges):
        return None
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_edges_from(np.asarray(problem.edges, dtype=np.int64).reshape(-1, 2).tolist())
    cycle = [problem.node_ids[u] for u, _ in nx.find_cycle(graph)]
    return " -> ".join(map(str, cycle[:6])) + (" -> ..." if len(cycle) > 6 else "") + f" -> {cycle[0]}"


def cycles_note(cycle: str, contiguous: bool) -> str:
    """What max-load did with a cyclic input graph, for the outputs (QA round 35: a graph
    with a cycle, often a reversed edge, was placed without a word): a contiguous placement
    keeps every cycle on one device (``condense``), a non-contiguous one prices its edges
    like any other."""
    what = ("a contiguous placement keeps every cycle on one device" if contiguous
            else "the non-contiguous placement prices its edges like any others")
    return (f"the input graph has directed cycles, e.g. {cycle}: {what}; if an edge is "
            "reversed, fix the graph")


def _refuse_cycle_for_latency(problem, spec_path: str) -> None:
    """The latency objective is the longest path of the placed graph: a graph with a
    cycle has none (max-load places it, fusing each cycle where parts are contiguous).
    Refused naming the cycle's nodes by the ids of the input."""
    cycle = input_cycle(problem)
    if cycle is None:
        return
    from autopar_opt.cli import options as opt
    from autopar_opt.core.errors import SpecProblem

    raise opt.OptionError([SpecProblem(spec_path, "edges", None,
                                       "the latency objective needs an acyclic graph (a "
                                       f"cycle has no longest path); this one has the cycle {cycle}",
                                       "use --objective max-load (it places cycles), or "
                                       "remove the edge that closes the cycle")])


def _refuse_dp_out_of_reach(exc: ValueError, solver: str) -> None:
    """``--solver dp`` on a graph past the DP's guards (too many ideals, pairs or units):
    solve_placement re-raises the guard's error for a forced DP, which ended in an internal
    error, exit 70 (QA round 35); it is a refused option (exit 2) naming the guard."""
    from autopar_opt.core.ideals import TooManyIdeals
    from autopar_opt.placement.exact.dp import DPTooLarge

    if solver != "dp" or not isinstance(exc, (TooManyIdeals, DPTooLarge)):
        return
    from autopar_opt.cli import options as opt
    from autopar_opt.core.errors import SpecProblem
    from autopar_opt.core.files import COMMAND_LINE

    rule, _, _ = str(exc).partition(": coarsen the graph")
    raise opt.OptionError([SpecProblem(COMMAND_LINE, "--solver", solver, rule,
                                       "use --solver auto (the MILP where the DP is out of "
                                       "reach) or --solver highs")]) from None


def place_command(spec_path: str, solver: str | None, objective: str | None,
                  contiguous: bool | None, time_limit_s: float | None, out_dir: str | None,
                  json_output: bool, expert: str | None, gap: float | None = None,
                  searcher=None, quiet: bool = False, started_at: float | None = None,
                  memory_limit_gib: float | None = None) -> int:
    """The body of ``autopar place`` (errors become exit code 2 in the caller).

    ``--time-limit`` is a wall-clock budget for the whole command, counted from
    ``started_at`` (process start): reading, every phase of the solve, the baselines
    and the outputs. Exit code 0 with a placement, 3 when none exists, 4 when none
    was found within the limit (the document still says the proven bound).

    ``searcher`` (an :class:`autopar_opt.learn.harness.SearcherHook`, passed in
    by the CLI) runs first on the max-load problem; its plan is kept when the
    exact side ends worse, and the document gains a ``searcher`` entry (value,
    proven bound, gap, optimum when proven)."""
    from autopar_opt.cli import options as opt
    from autopar_opt.core.files import COMMAND_LINE, check_output_dir
    from autopar_opt.placement.importers.spec import load_placement
    from autopar_opt.core.errors import SpecError, SpecProblem
    limit = time_limit_s if time_limit_s is not None and math.isfinite(time_limit_s) else math.inf
    opt.raise_if_any([*opt.check_time_limit(time_limit_s), *opt.check_memory_limit(memory_limit_gib),
                      *(opt.check_budget(searcher.budget_s, limit) if searcher else []),
                      *(searcher.problems() if searcher else []),
                      *(check_output_dir(out_dir, "--out", ("placement.json", "report.html"))
                        if out_dir is not None else [])])           # before any work (issue 15)
    if searcher is not None:      # inside the time limit, as solve's (before: 100 s under 5)
        import dataclasses
        searcher = dataclasses.replace(searcher, budget_s=opt.searcher_budget(searcher.budget_s,
                                                                             limit))
    problem, options = load_placement(spec_path)
    if expert:                          # read (and checked) before the search, not after it
        from autopar_opt.placement.importers.public_json import load_expert_split
        load_expert_split(expert, problem)
    objective = objective or options.get("objective", "max-load")
    if objective not in ("max-load", "latency"):
        raise opt.OptionError([SpecProblem(COMMAND_LINE, "--objective", objective,
                                     "must be max-load or latency", "use --objective max-load")])
    cont = contiguous if contiguous is not None else bool(options.get("contiguous", True))
    if objective == "latency" and not cont:
        rule = "the latency model runs each device's nodes as one block, which needs contiguous parts"
        if contiguous is not None:
            raise opt.OptionError([SpecProblem(COMMAND_LINE, "--no-contiguous", True, rule,
                                               "use --contiguous")])
        # the spec asked for it: name the spec's key, not an option nobody gave (QA round 12)
        raise SpecError([SpecProblem(spec_path, "placement.contiguous", False, rule,
                                     "write contiguous: true (or drop it), or pass --contiguous"
                                     + ("" if "objective" not in options
                                        else ", or write objective: max-load"))])
    if objective == "latency":
        _refuse_cycle_for_latency(problem, spec_path)
    cycle = input_cycle(problem) if objective == "max-load" else None
    from autopar_opt.solvers.registry import BACKENDS
    name = (solver or "auto").lower()
    if name not in ("auto", *BACKENDS):
        raise opt.OptionError([SpecProblem(COMMAND_LINE, "--solver", solver,
                                     f"unknown solver; choose auto, {', '.join(BACKENDS)}",
                                     "use --solver highs")])
    opt.raise_if_any(opt.check_solver_available(name))     # before the search, not mid-run
    if gap is not None and not 0 <= gap < 1:
        raise opt.OptionError([SpecProblem(COMMAND_LINE, "--gap", gap, "must be in [0, 1)",
                                     "use e.g. --gap 0.01 for 1%")])
    found = None
    if searcher is not None:
        if objective != "max-load":
            raise opt.OptionError([SpecProblem(COMMAND_LINE, "--searcher", searcher.name,
                                         "the searchers optimise max-load only",
                                         "use --objective max-load, or drop --searcher")])
        from autopar_opt.cli.rich_console import Console

        found = searcher.run_placement(problem, cont, Console(stderr=True))
        if found is None:
            return 2
    from autopar_opt.cli.budget import Budget

    budget = None if time_limit_s is None else Budget(
        time_limit_s, started_at if started_at is not None else time.perf_counter())
    reserve = output_reserve_s(problem.num_nodes)
    from autopar_opt.core.interrupts import InterruptGuard, SearchInterrupted, exit_code
    from autopar_opt.core.memory_budget import MemoryBudget
    from autopar_opt.core.streams import stdout_to_stderr

    began = time.perf_counter()
    with InterruptGuard() as guard:       # Ctrl-C, SIGTERM, SIGHUP: the document is still written
        try:
            with stdout_to_stderr():      # solver chatter never on stdout (--json)
                result = solve_placement(problem, objective=objective, contiguous=cont,
                                         solver=name, time_limit_s=None if budget is None
                                         else max(0.0, budget.remaining() - reserve),
                                         rel_gap=1e-6 if gap is None else gap,
                                         memory_budget=MemoryBudget.of(memory_limit_gib))
        except SearchInterrupted:
            result = interrupted_result(problem, objective, cont, guard.signum,
                                        time.perf_counter() - began)
        except ValueError as exc:
            _refuse_dp_out_of_reach(exc, name)
            raise
        guard.defer()                     # a second signal must not cut the outputs short
        if guard.interrupted and "stopped" not in result.details:
            # the search returned what it held when the signal came (a MIP's incumbent)
            result.details["stopped"] = (f"interrupted by signal {guard.signum}: the placement "
                                         "and bound are what the search held then")
        result = keep_better(result, found)
        doc = placement_document(result, expert, None if budget is None
                                 else budget.deadline - 0.5 * reserve)
        if cycle is not None:
            doc["cycles"] = cycles_note(cycle, cont)
        if found is not None:
            optimum = result.value if result.status == "optimal" else None
            doc["searcher"] = searcher.block(found, result.lower_bound, optimum)
        if out_dir:
            _write_outputs(doc, Path(out_dir))
        if json_output:
            summary = _json_summary(doc)
            if "searcher" in doc:
                summary["searcher"] = doc["searcher"]
            typer.echo(json.dumps(summary, indent=2))
        elif not quiet:
            typer.echo(_text(doc))
            if "searcher" in doc:
                from autopar_opt.cli.rich_console import Console

                searcher.summary(doc["searcher"], Console())
    if guard.interrupted:
        if quiet or json_output:     # no summary says it (QA round 36: exit 130, silent)
            from autopar_opt.cli.stopped import search_stopped_line

            typer.echo(search_stopped_line(guard.signum, doc["status"],
                                           Path(out_dir) / "placement.json" if out_dir else None,
                                           json_output, "placement"), err=True)
        return exit_code(guard.signum)
    return EXIT_CODES.get(result.status, 4)


def interrupted_result(problem, objective: str, contiguous: bool, signum: int | None,
                       wall_time_s: float) -> PlacementResult:
    """The answer of a placement a stop signal cut before it returned: no placement
    from the exact side (a searcher's, if any, is kept by :func:`keep_better`) and the
    bound every placement has (0: loads and latencies are non-negative)."""
    return PlacementResult(problem, objective, contiguous, math.inf, 0.0, "no_solution",
                           "interrupted", None, None, wall_time_s,
                           {"stopped": f"interrupted by signal {signum} before the placement "
                                       "search answered; run it again (with --time-limit to "
                                       "get its best placement within a budget)"})


def _write_outputs(doc: dict, out: Path) -> None:
    from autopar_opt.reports.placement import render_placement_html
    html = render_placement_html(doc)                 # render first: no half-written output
    from autopar_opt.cli.errors import write_outputs  # each temp + rename; a failure named

    write_outputs(out, [("placement.json", json.dumps(doc, indent=2)), ("report.html", html)])


def _within(doc: dict) -> str:
    """`` within the requested gap`` for an ``optimal`` whose gap is not a proof (--gap)."""
    gap = doc.get("gap")
    return " within the requested gap" if doc["status"] == "optimal" and gap is not None \
        and gap > PROOF_GAP else ""


#: Empty devices the text summary lists one by one; past it, one line counts them.
SHOWN_IDLE = 16


def _text(doc: dict) -> str:
    fmt = lambda x: "-" if x is None else f"{x:.6g}"  # noqa: E731
    gap = "-" if doc["gap"] is None else f"{100 * doc['gap']:.4g} %"
    lines = [f"instance:     {doc['instance']} ({doc['num_nodes']} nodes; {doc['devices_text']})",
             f"objective:    {doc['objective']} ({'contiguous' if doc['contiguous'] else 'non-contiguous'})",
             f"time unit:    {doc.get('time_unit', FILE_UNIT)} (value, bound, loads, baselines)",
             *([f"transfers:    {doc['transfers']}"] if doc.get("transfers") else []),
             *([f"cycles:       {doc['cycles']}"] if doc.get("cycles") else []),
             f"value:        {fmt(doc['value'])}",
             f"lower bound:  {fmt(doc['lower_bound'])}",
             f"gap:          {gap}",
             f"status:       {doc['status']}{_within(doc)} ({doc['method']}, "
             f"{doc['wall_time_s']:.3f} s)"]
    why = {k: v for k, v in doc.get("details", {}).items()
           if k in ("infeasible", "stopped", "milp_skipped", "milp_refused")}
    lines += [f"why:          {k.replace('_', ' ')}: {v}" for k, v in why.items()]
    idle = [d for d in doc["devices"] if not d["nodes"]]
    # past SHOWN_IDLE empty devices, one line says how many (65,536 devices on 3 nodes
    # printed 65,533 lines of "0 nodes"; QA round 12); placement.json keeps every device
    fold = len(idle) > SHOWN_IDLE
    for d in doc["devices"]:
        if d["nodes"] or not fold:
            lines.append(f"  {d['device']:>14}: {len(d['nodes']):6d} nodes  load {d['load']:.6g}  "
                         f"memory {d['memory_bytes']:.4g} B")
    if fold:
        lines.append(f"  ({len(idle):,} more devices hold no node: {idle[0]['device']} ... "
                     f"{idle[-1]['device']}; placement.json lists every device)")
    for b in doc["baselines"]:
        lines.append(f"baseline {b['name']}: {fmt(b['value'])}")
        if b.get("note") and b["name"].startswith("human expert"):
            lines.append(f"  {b['note']}")
        if b.get("violations"):
            lines.append(f"  infeasible for this problem: {'; '.join(b['violations'])}")
    return "\n".join(lines)
