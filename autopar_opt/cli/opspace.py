"""``autopar solve SPEC`` for a spec with ``problem: {format: operator_sharding}``.

Loads the spec (:mod:`autopar_opt.opspace.spec`), solves the operator space exactly
(:func:`~autopar_opt.opspace.solve.solve_operator_space`; with ``pipeline:`` the joint
stage search of :mod:`autopar_opt.opspace.pipeline`), prices the plan and the baselines
with the independent evaluator, writes ``plan.json`` and ``report.html`` under ``--out``,
prints a summary or the JSON. Exit codes as every solve: 0 plan found, 2 bad input,
3 proven infeasible, 4 no plan within the limits, 128 + signal when a stop signal
(SIGINT, SIGTERM, SIGHUP) ended the solve (the document is still written, status
``interrupted``, with everything proven before the signal).

Limits as on every route (issue 35): ``--time-limit`` counts from process start
(:class:`~autopar_opt.cli.budget.Budget`), solver output on file descriptor 1 goes to
stderr while the solve runs (``--json`` stays pure JSON), and every MILP is counted
before it is built against ``--memory-limit`` (default: half the RAM).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

EXIT = {"optimal": 0, "feasible": 0, "infeasible": 3, "no_plan": 4}


#: The options an operator-sharding solve takes (QA round 12: the refusal's list left out
#: --searcher, --budget-s and --seed, which run a searcher on the operator space first).
OPSPACE_OPTIONS = ("--solver, --time-limit, --gap, --memory-limit, --searcher, --budget-s, "
                   "--seed, --out, --json, --quiet")


def unused_options(form, runnable_by, export_models: bool, warm_start: bool) -> list:
    """Options of the layer search an operator-sharding solve has no use for: refused."""
    from autopar_opt.core.errors import SpecProblem
    from autopar_opt.core.files import COMMAND_LINE

    given = [("--form", form, form is not None), ("--runnable-by", runnable_by, runnable_by is not None),
             ("--export-models", True, export_models), ("--no-warm-start", True, not warm_start)]
    return [SpecProblem(COMMAND_LINE, option, value, "applies to the layer search; an operator-sharding "
                        "problem is solved by its own DP or MILP without it",
                        f"drop {option} (an operator-sharding solve takes {OPSPACE_OPTIONS})")
            for option, value, on in given if on]


#: Seconds kept back from the time limit for the outputs, and the share of what is left
#: kept for the baselines (the Megatron template search stops at the limit).
OUTPUT_RESERVE_S, BASELINE_SHARE = 0.5, 0.2


def opspace_solve_command(spec, solver: str | None, time_limit_s: float | None, gap: float | None,
                          out_dir: str | None, json_output: bool, quiet: bool, searcher=None,
                          started_at: float | None = None,
                          memory_limit_gib: float | None = None) -> int:
    """The whole job for a loaded :class:`~autopar_opt.opspace.spec.OpSpec`; the exit code.

    ``searcher`` (a :class:`~autopar_opt.cli.searcher.SearcherHook`) runs first on the same
    space (:class:`~autopar_opt.learn.op_space.OpSearchSpace`, within its budget); the
    document gains its ``searcher`` entry against the exact side's bound and optimum."""
    import time

    from autopar_opt.cli.budget import Budget
    from autopar_opt.core.interrupts import InterruptGuard, SearchInterrupted, exit_code
    from autopar_opt.core.memory_budget import MemoryBudget
    from autopar_opt.core.streams import stdout_to_stderr

    name = (solver or spec.solver.name).strip().lower()
    if name not in ("auto", "dp", "highs", "gurobi", "scip"):
        from autopar_opt.cli.options import OptionError
        raise OptionError(f"--solver {name!r}: an operator-sharding problem takes auto, dp, highs, "
                          "gurobi or scip")
    limit = time_limit_s if time_limit_s is not None else spec.solver.time_limit_s
    budget = Budget(limit, started_at if started_at is not None else time.perf_counter())
    memory = MemoryBudget.of(memory_limit_gib)
    with InterruptGuard() as guard:
        try:
            with stdout_to_stderr():      # solver chatter never on stdout (--json)
                doc, found = _solve(spec, name, gap, searcher, budget, memory, guard)
        except _SearcherFailed:
            return 2
        except SearchInterrupted as exc:  # outside the parts that keep what they have
            from autopar_opt.cli.solve import stopped_before_a_result

            stopped_before_a_result(exc.signum)
        guard.defer()                     # a second signal must not cut the outputs short
        signum = guard.signum or doc.pop("_interrupted", None)
        if signum is not None:
            doc["status"] = doc["certificate"]["status"] = "interrupted"
        _emit(doc, found, searcher, out_dir, json_output, quiet)
    if signum is not None:
        return exit_code(signum)
    return EXIT[doc["status"]]


def _solve(spec, name: str, gap: float | None, searcher, budget, memory, guard) -> tuple[dict, object]:
    """The solve and its document (:func:`opspace_solve_command`); a stop signal inside the
    searcher or the exact solve ends it with what is proven."""
    from autopar_opt import __version__
    from autopar_opt.core.interrupts import SearchInterrupted
    from autopar_opt.cost.operators.evaluate import OpPlan, evaluate_plan
    from autopar_opt.opspace import baselines as bl
    from autopar_opt.opspace.document import build_document

    limit = budget.total_s
    rel = gap if gap is not None else spec.solver.rel_gap
    graph, ctx = spec.graph, spec.context
    found, source = None, "solver"
    if searcher is not None:
        from autopar_opt.cli.rich_console import Console
        try:
            found = searcher.run_operator(spec, Console(stderr=True))
        except SearchInterrupted:
            found = None
        if found is None and not guard.interrupted:
            raise _SearcherFailed()
    left = budget.remaining() - OUTPUT_RESERVE_S
    left = max(0.1, left - BASELINE_SHARE * max(left, 0.0))
    pipeline_part = None
    if spec.pipeline is not None and (spec.pipeline.pp != [1] or spec.pipeline.microbatches != [1]):
        from autopar_opt.opspace.pipeline import pipeline_document, solve_pipeline
        from autopar_opt.opspace.spec import schedule_of

        mip = "auto" if name in ("auto", "dp") else name     # the backend by its features
        result = solve_pipeline(spec.graph_for, ctx, spec.pipeline.pp, spec.pipeline.microbatches,
                                schedule_of(spec.pipeline), spec.rule, spec.reduce_scatter, mip,
                                0.0 if guard.interrupted else left, memory_budget=memory)
        pipeline_part, metrics = pipeline_document(result, rel, ctx)
        plan = metrics and pipeline_part["plan"]
        base, template = [], None
    else:
        from autopar_opt.opspace.solve import solve_operator_space

        result = solve_operator_space(graph, ctx, ctx.cluster.num_devices, spec.rule, spec.reduce_scatter,
                                      name, 0.0 if guard.interrupted else left, rel,
                                      memory_budget=memory)
        plan = metrics = None
        if result.best is not None:
            b = result.best
            plan = OpPlan(b.mesh, [b.tables.configs[v][k] for v, k in enumerate(b.choice)])
            metrics = evaluate_plan(graph, ctx, plan)
        base, template = [], None
        try:                   # a signal here keeps the solve's answer, as solve's baselines do
            base.append(bl.data_parallel(graph, ctx))
            trick = bl.one_weird_trick(graph, ctx)
            template = bl.megatron(graph, ctx, spec.rule, spec.reduce_scatter,
                                   budget.deadline - OUTPUT_RESERVE_S)
            base += [b for b in (trick, template) if b is not None]
        except SearchInterrupted:   # QA round 34: an uncaught traceback, exit 1, nothing written
            pass
        # the baselines are plans of the space: one that beats what the solver found within
        # its limits (or finds a plan where it found none) is the answer, bound unchanged
        fitting = [b for b in base if b.metrics.fits]
        better = min(fitting, key=lambda b: b.metrics.time_s, default=None)
        if better is not None and (metrics is None or better.metrics.time_s < metrics.time_s * (1 - 1e-12)):
            plan, metrics, source = better.plan, better.metrics, f"baseline: {better.name}"
    doc = build_document(spec, result, plan, metrics, base, template, name, limit, rel, __version__,
                         pipeline_part, source)
    doc["solver"]["memory_budget"] = memory.describe()
    if pipeline_part is not None and name == "dp":
        # QA round 35: plan.json said solver "dp" and the certificate "milp", no word why
        doc["solver"]["note"] = ("--solver dp: the pipeline search solves every configuration by the "
                                 "MILP (first MILP backend installed): with several stages or "
                                 "micro-batches the objective has max terms (bubble, slowest stage) "
                                 "that the DP's min-sum cannot express")
    doc["certificate"]["methods"] = methods_of(result)
    if found is not None:
        cert = doc["certificate"]
        bound = cert["lower_bound"] if isinstance(cert["lower_bound"], float) else None
        doc["searcher"] = searcher.block(found, bound, cert["primal"] if cert["exact"] else None)
    if result.interrupted is not None:
        doc["_interrupted"] = result.interrupted
    return doc, found


class _SearcherFailed(Exception):
    """The searcher reported its own error (exit 2)."""


def methods_of(result) -> list[dict]:
    """``certificate.methods``: which method proved what, one record per logical mesh (or
    pipeline configuration), in the certificate's order (:class:`~autopar_opt.core.portfolio.MethodRecord`;
    this route keeps its own order: the DP, its Pareto form, the MILP)."""
    from autopar_opt.core.portfolio import MethodRecord

    out = []
    for o in result.outcomes:
        if hasattr(o, "mesh"):
            where, method = f"mesh {'x'.join(map(str, o.mesh.shape))}", o.method
        else:
            s = o.tables.split
            where, method = f"pp {s.pp}, c {s.microbatches}, mesh {'x'.join(map(str, o.tables.shape))}", "milp"
        status = "skipped" if o.status == "pruned" else o.status
        if (getattr(o, "stats", None) or {}).get("milp_refused") or o.message.startswith("not built:"):
            status = "refused"
        out.append(MethodRecord(f"{method} ({where})", status, o.value, o.lower_bound,
                                o.wall_time_s, o.message,
                                dict(getattr(o, "stats", {}) or {})).to_dict())
    return out


def _emit(doc: dict, found, searcher, out_dir: str | None, json_output: bool, quiet: bool) -> None:
    """Write plan.json and the report (``--out``), print the JSON or the summary."""
    text = json.dumps(doc, indent=2)
    if out_dir:
        from autopar_opt.core.files import write_atomic
        from autopar_opt.reports.opspace import write_opspace_report

        Path(out_dir).mkdir(parents=True, exist_ok=True)
        write_atomic(Path(out_dir) / "plan.json", text + "\n")
        write_opspace_report(doc, Path(out_dir) / "report.html")
    if json_output:
        sys.stdout.write(text + "\n")
    elif not quiet:
        _summary(doc)
        if found is not None:
            from autopar_opt.cli.rich_console import Console
            searcher.summary(doc["searcher"], Console())


def _summary(doc: dict) -> None:
    from autopar_opt.core.result import status_words
    p, c = doc["spec"]["problem"], doc["certificate"]
    print(f"operator sharding {p['graph']} ({p['operators']} operators) on {p['devices']} x {p['device']}, "
          f"split rule {p['split']}: {status_words(doc['status'], c.get('gap'))}")
    if doc["metrics"]:
        m = doc["metrics"]
        print(f"  iteration {m['time_s']:.6g} s ({m['samples_per_s'] or 0:.4g} samples/s), memory "
              f"{m['memory_bytes'] / 2**30:.3g} of {m['capacity_bytes'] / 2**30:.3g} GiB usable per "
              "device (its memory less the user's and the runtime's reserve and the allocator's "
              "fragmentation allowance, as solve's capacity)")
        from autopar_opt.reports.opspace import NO_INTERVAL_WORDS
        print(f"  {NO_INTERVAL_WORDS}")
    if doc["status"] == "infeasible":
        why = sorted({m["message"] for m in c.get("methods", []) if m.get("message")})
        print(f"  certificate: proven infeasible ({doc['wall_time_s']:.2f} s): "
              + ("; ".join(why) if why else "no plan of the space fits")
              + " (every configuration searched); more devices or more memory per device")
    else:
        fmt = lambda x: "-" if x is None else (f"{x:.6g}" if isinstance(x, float) else str(x))  # noqa: E731
        gap = c["gap"]
        print(f"  certificate: primal {fmt(c['primal'])} s, lower bound {fmt(c['lower_bound'])} s, "
              f"gap {f'{100 * gap:.3g}%' if isinstance(gap, (int, float)) else fmt(gap)} "
              f"({c['method']}, {doc['wall_time_s']:.2f} s)")
    if doc["solver"].get("note"):
        print(f"  note: {doc['solver']['note']}")
    for m in c.get("methods", []):
        if m["status"] in ("refused", "no_plan", "interrupted"):
            print(f"  {m['method']}: {m['status']} ({m['message']})")
    if doc.get("plan_source", "solver") != "solver":
        print(f"  plan: the {doc['plan_source']} (better than what the solver found within its limits)")
    for b in doc["baselines"]:
        r, proven = b.get("ratio_to_plan"), b["ratio_to_optimum"] is not None
        what = "the optimum" if proven else "the plan above, not proven optimal"
        print(f"  {b['name']}: {b['metrics']['time_s']:.6g} s" + (f" ({r:.3f}x {what})" if r else "")
              + ("" if b["metrics"]["fits_memory"] else " (does not fit the memory)"))
