"""``autopar solve``: search, certify, write plan.json (+ report.html), summarise.

Exit codes: 0 plan found, 2 bad input, 3 proven infeasible, 4 no plan within
the limits, 129/130/143 stopped by SIGHUP/SIGINT/SIGTERM (plan.json and the report are
still written, with the incumbent, its bound and status ``interrupted``).

Every option is checked before any work (:mod:`autopar_opt.cli.options`,
:mod:`autopar_opt.core.files`); the time limit is a wall-clock budget for the
whole command (:mod:`autopar_opt.cli.budget`): the search gets what is left after
reading the spec, minus a share for the baselines and a reserve for writing
the outputs, priced for the largest plan the search space allows
(:mod:`autopar_opt.reports.cost`). Outputs are written atomically (temporary file + rename), with
the same umask-respecting permissions.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from typing import TYPE_CHECKING, Any, NoReturn

from autopar_opt.core.memory_budget import MemoryBudget
from autopar_opt.core.ranges import point_text, range_text
from autopar_opt.core.streams import stdout_to_stderr
from autopar_opt.cli.budget import Budget
from autopar_opt.core.interrupts import InterruptGuard, SearchInterrupted, exit_code
from autopar_opt.core.files import COMMAND_LINE
from autopar_opt.ir.graph import params_summary
from autopar_opt.ir.hardware import devices_text
from autopar_opt.core.result import status_words
from autopar_opt.reports.formatting import (INTERVAL_GLOSS, causal_mfu_note, has_sequence,
                                           fmt_pct, idle_gpus_mfu_note, tight_note, usable_note)

if TYPE_CHECKING:   # rich is imported where something is printed (start-up, issue 18)
    from autopar_opt.cli.rich_console import Console

    from autopar_opt.search.engine import SearchOptions

EXIT_CODES = {"optimal": 0, "feasible": 0, "infeasible": 3, "no_plan": 4}

#: The most of the time left after loading that the outputs' reserve may take
#: (:func:`output_reserve_s`): the search always keeps the rest.
OUTPUT_SHARE = 0.5
#: Share of the time left after loading given to the baselines (they stop at their deadline).
BASELINE_SHARE = 0.08


def console(stderr: bool = False) -> Console:
    """A rich Console that never hard-wraps when its stream is not a terminal
    (piped output keeps paths and lines whole); the terminal's width otherwise."""
    from autopar_opt.cli.rich_console import Console

    stream = sys.stderr if stderr else sys.stdout
    if hasattr(stream, "isatty") and stream.isatty():
        return Console(stderr=stderr)
    return Console(stderr=stderr, soft_wrap=True, width=1000)


class LazyConsole:
    """Stands for :func:`console` and makes it on first use: a ``--json`` run
    that prints nothing on stderr never imports rich (start-up, issue 18)."""

    def __init__(self, stderr: bool = False) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    @property
    def console(self) -> Console:
        """The rich Console itself (made now if it was not yet)."""
        if self._console is None:
            self._console = console(self._stderr)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.console, name)


def pp_label(row: dict) -> str:
    """``pp`` of a configuration row, with its stage device counts when free (``2 (4+8)``)."""
    sizes = row.get("stage_devices")
    return f"{row['pp']} ({'+'.join(map(str, sizes))})" if sizes else str(row["pp"])


def schedule_label(row: dict) -> str:
    """``interleaved vp=7`` for an interleaved plan or configuration row, else the schedule
    (:func:`autopar_opt.ir.training.schedule_text`)."""
    from autopar_opt.ir.training import schedule_text
    return schedule_text(row["schedule"], row.get("vp_chunks"))


def _fmt(x) -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    return f"{x:.6g}"


def _summary(doc: dict, console: Console) -> None:
    cert, m = doc["certificate"], doc["metrics"]
    model, cluster = doc["spec"]["model"], doc["spec"]["cluster"]
    memory = cluster.get("device_memory_gib")      # absent in documents written before it
    console.print(f"[bold]{model['name']}[/] on {cluster['name']} "
                  f"({devices_text(cluster['num_devices'], cluster['device'], memory)}): "
                  f"[bold]{status_words(doc['status'], (doc.get('certificate') or {}).get('gap'))}[/]")
    windows = model.get("attention_windows")
    console.print(f"  model: {params_summary(model['params'], model.get('params_active'))}"
                  + (f"; {windows}" if windows else ""), highlight=False)
    if model.get("architecture"):              # absent in documents written before it
        console.print(f"  architecture: {model['architecture']}", highlight=False)
    if model.get("measured"):
        console.print(f"  measured: {model['measured']}", highlight=False)
    # what the model's import took by default or left out (a config's absent keys, a class
    # default, DeepSeek-V3's multi-token prediction): QA round 34, said by autopar model,
    # estimate and the report, not by this summary (absent in older documents)
    for said in model.get("assumed") or []:
        console.print(f"  assumed: {said}", markup=False, highlight=False)
    if m:
        idle = idle_gpus_mfu_note(m['mfu'], doc['plan'].get('stage_devices'), cluster['num_devices'])
        console.print(f"  iteration {point_text(m['iteration_time_s'])} s | "
                      f"{m['samples_per_s']:.2f} samples/s | "
                      + (f"{m['tokens_per_s']:.0f} tokens/s | " if has_sequence(doc) else "")
                      + f"MFU {fmt_pct(m['mfu'], 1)}"
                      f"{causal_mfu_note(m['mfu'], m.get('mfu_causal'))}{idle}"
                      " | peak memory "
                      f"{max(m['peak_memory_gib']):.1f}/{m['memory_capacity_gib']:.1f} GiB"
                      f"{usable_note(m['memory_capacity_gib'], cluster.get('hbm_gib'))}"
                      f"{tight_note(max(m['peak_memory_gib']), m['memory_capacity_gib'])}")
        if m.get("interval"):
            console.print(f"  {m['interval']['text']} {INTERVAL_GLOSS}", highlight=False)
        plan = doc["plan"]
        sizes = plan.get("stage_devices")
        console.print(f"  plan: pp={plan['pp']} micro-batches={plan['microbatches']} "
                      f"schedule={schedule_label(plan)}"
                      + (f" stage devices={'+'.join(map(str, sizes))}" if sizes else ""),
                      markup=False, highlight=False)
        from autopar_opt.reports.sections import plan_degree_lines

        for line in plan_degree_lines(plan):
            console.print(f"    {line}", markup=False, highlight=False)
        if plan.get("recompute") not in (None, "none"):      # absent in older documents
            console.print(f"    recomputation: {plan['recompute']}", markup=False, highlight=False)
    run = doc.get("runnability")
    if run:
        console.print("  " + runnability_line(run), markup=False, highlight=False)
    line = schedules_line(doc.get("search_space") or {})
    if line:
        console.print("  " + line, markup=False, highlight=False)
    for b in doc.get("baselines") or []:
        if b.get("comparison"):
            iv = (b.get("metrics") or {}).get("interval") or {}
            said = (f" (the spec's plan: {100 * iv.get('level', 0.8):.0f}% interval "
                    f"{range_text(iv['low'], iv['high'], 's')})") if iv.get("low") is not None \
                else ""
            console.print("  " + b["comparison"]["text"] + said, markup=False, highlight=False)
    gap = cert["gap"]
    gap_text = f"{100 * gap:.3f}%" if isinstance(gap, float) else str(gap)
    if doc["status"] == "infeasible":
        console.print("  certificate: proven infeasible (every configuration; lower bound inf)")
    elif cert["primal"] is None:    # a bound, no plan: no gap to state (QA round 10:
        # "primal - s ... gap inf (no proof: bound missing)" beside a finite bound)
        console.print(f"  certificate: no plan found; lower bound {_fmt(cert['lower_bound'])} s "
                      "(no plan is faster)")
    else:
        missing = isinstance(cert["lower_bound"], str) or cert["lower_bound"] is None
        console.print(f"  certificate: primal {_fmt(cert['primal'])} s, lower bound "
                      f"{_fmt(cert['lower_bound'])} s, gap {gap_text}"
                      + ("" if cert["exact"] else
                         " (no proof: bound missing)" if missing else " (no proof)"))
    from rich.table import Table

    table = Table("pp", "c", "schedule", "status", "primal s", "bound s", "time s", box=None)
    rows = cert["configurations"]
    shown = summary_rows(rows, cert["primal"], cert["lower_bound"])
    for r in shown:
        table.add_row(pp_label(r), str(r["microbatches"]), schedule_label(r), r["status"],
                      _fmt(r["primal"]), _fmt(r["lower_bound"]), f"{r['time_s']:.2f}")
    console.print(table)
    if len(rows) > len(shown):
        console.print(f"  ... {len(rows) - len(shown)} more configurations in plan.json (the "
                      "answer's and the global bound's rows are among those listed)")
    if doc.get("infeasibility"):
        console.print(f"[red]{doc['infeasibility']['reason']}[/]")
    for notice in doc.get("notices") or []:
        console.print(f"  note: {notice}", style="yellow", markup=False, highlight=False)


#: Configuration rows the terminal summary lists (plan.json keeps every one).
SUMMARY_ROWS = 12


def summary_rows(rows: list[dict], primal: object, bound: object,
                 limit: int = SUMMARY_ROWS) -> list[dict]:
    """The certificate rows the summary lists, in solve order: the answer's row (its
    primal is the plan's) and the rows at the global bound first, then the others up to
    ``limit``. The first ``limit`` rows in solve order could leave out both (QA round 10:
    the free-stage example's optimum was row 30 of 70)."""
    if len(rows) <= limit:
        return rows
    decisive = {i for i, r in enumerate(rows)
                if (primal is not None and r.get("primal") == primal)
                or (bound is not None and r.get("lower_bound") == bound)}
    keep = sorted(decisive)[:limit]
    keep += [i for i in range(len(rows)) if i not in decisive][:limit - len(keep)]
    return [rows[i] for i in sorted(keep)]


def schedules_line(space: dict) -> str:
    """``schedules searched: 1f1b, interleaved (search.schedules not stated: the default
    of target megatron, from training.runtime)``; empty without schedules (a fleet)."""
    names = space.get("schedules")
    if not names:
        return ""
    source = space.get("schedules_source") or "search.schedules"
    # search/configs.outer_configs: a one-stage configuration is 1F1B's, whatever is listed
    one = ("; one stage (pp 1) has no pipeline schedule: its rows read 1f1b"
           if "interleaved" in names and "1f1b" not in names and 1 in (space.get("pp_degrees") or [1])
           else "")
    if source == "search.schedules":
        return f"schedules searched: {', '.join(names)} (search.schedules{one})"
    return (f"schedules searched: {', '.join(names)} (search.schedules not stated: the "
            f"{source}; state search.schedules to choose{one})")


def runnability_line(run: dict) -> str:
    """``runnable by megatron: price of runnability 0.00% to 0.01% (free optimum ...)``,
    and what the target's space leaves out (``unsearched``; absent in older documents)."""
    unsearched = f"; {run['unsearched']}" if run.get("unsearched") else ""
    t = run["target"]
    lo, hi = run.get("price_low"), run.get("price_high")
    if isinstance(lo, float) and isinstance(hi, float):
        pct = lambda x: f"{100 * x:.3g}%"
        price = pct(lo) if abs(hi - lo) <= 1e-3 * max(abs(hi), 1e-12) else f"{pct(lo)} to {pct(hi)}"
        return (f"runnable by {t['framework']}{' ' + t['version'] if t['version'] else ''}: price "
                f"of runnability {price} against the free per-layer space (its plan "
                f"{_fmt(run['free_primal'])} s, bound {_fmt(run['free_lower_bound'])} s, "
                f"{run['free_status']}){unsearched}")
    return (f"runnable by {t['framework']}: price of runnability not priced"
            + (f" ({run['note']})" if run.get("note") else "") + unsearched)
def _opspace_spec(spec_path: str):
    """The loaded operator-sharding spec when the file holds ``problem: {format:
    operator_sharding}``, else None."""
    from autopar_opt.spec.loader import read_mapping
    data = read_mapping(spec_path)
    problem = data.get("problem") if isinstance(data, dict) else None
    if not (isinstance(problem, dict) and problem.get("format") == "operator_sharding"):
        return None                       # opspace is imported only for its own specs
    from autopar_opt.opspace.spec import build_op_spec
    return build_op_spec(data, Path(spec_path))


def _opspace_command(spec_path: str, solver, time_limit_s, gap, out_dir, json_output, quiet, form,
                     runnable_by, searcher, export_models, warm_start, started_at=None,
                     memory_limit_gib=None) -> int | None:
    """Solve an operator-sharding spec (None: the spec is not one). Its solver names
    include ``auto`` (the default: the DP, the MILP where memory binds on large tables)."""
    from autopar_opt.cli import options as opt

    spec = _opspace_spec(spec_path)
    if spec is None:
        return None
    from autopar_opt.cli.opspace import opspace_solve_command, unused_options
    given = None if solver is None else solver.strip().lower()
    opt.raise_if_any(unused_options(form, runnable_by, export_models, warm_start))
    opt.raise_if_any(opt.check_solver_available(given))
    if searcher is not None:
        searcher = _searcher_within_limit(searcher, time_limit_s, spec.solver.time_limit_s)
    return opspace_solve_command(spec, solver, time_limit_s, gap, out_dir, json_output, quiet, searcher,
                                 started_at, memory_limit_gib)


def _peer_spec(spec_path: str):
    """The loaded peer spec when the file holds ``problem:`` (Piper/PaSE instance), else None."""
    from autopar_opt.spec.loader import read_mapping
    data = read_mapping(spec_path)
    if "problem" not in data:
        return None
    from autopar_opt.peers.spec import build_peer_spec
    return build_peer_spec(data, Path(spec_path))


#: The options a peer problem's solve takes (QA round 12: the refusal's list left out
#: --memory-limit, which the peer portfolio applies to its MILP and elimination tables).
PEER_OPTIONS = "--solver, --time-limit, --gap, --memory-limit, --out, --json, --quiet"


def _peer_unused_options(fmt: str, form: str | None, runnable_by: str | None, searcher,
                         export_models: bool, warm_start: bool) -> list:
    """Options of a model search that a peer problem (Piper, PaSE) has no use for:
    refused, not dropped without a word (its solve takes --solver, --time-limit,
    --gap, --memory-limit, --out, --json and --quiet: :data:`PEER_OPTIONS`)."""
    from autopar_opt.core.files import COMMAND_LINE
    from autopar_opt.core.errors import SpecProblem

    given = [("--form", form, form is not None), ("--runnable-by", runnable_by, runnable_by is not None),
             ("--searcher", getattr(searcher, "name", searcher), searcher is not None),
             ("--export-models", True, export_models), ("--no-warm-start", True, not warm_start)]
    return [SpecProblem(COMMAND_LINE, option, value, f"applies to a model search; a {fmt} peer "
                        "problem (problem: in the spec) is solved by its own DP or MILP without it",
                        f"drop {option} (a peer solve takes {PEER_OPTIONS})")
            for option, value, on in given if on]


#: Methods of ``certificate.methods`` that are a MIP solve (the independent check that
#: ``--no-warm-start`` asks for).
_MIP_METHODS = ("milp", "miqp", "block-milp", "block-miqp")


def _no_mip_notice(doc: dict, warm_start: bool) -> list[str]:
    """What ``--no-warm-start`` did when no MIP ran at all (the route's bound already met
    the gap, or the DP answered): the help promises "the MIP alone, an independent check",
    which then did not happen (QA round 9: said nowhere)."""
    if warm_start:
        return []
    methods = [m.get("method", "") for m in (doc.get("certificate") or {}).get("methods") or []]
    if any(m.split(":")[0] in _MIP_METHODS for m in methods):
        return []
    return [f"--no-warm-start: no MIP was solved ({', '.join(methods) or 'no method'}): this "
            "run is no independent MIP check of the plan; use --solver highs (or scip, "
            "gurobi) for one"]


def solve_command(spec_path: str, solver: str | None = None, time_limit_s: float | None = None,
                  gap: float | None = None, out_dir: str | None = None, json_output: bool = False,
                  quiet: bool = False, export_models: bool = False, warm_start: bool = True,
                  form: str | None = None, started_at: float | None = None,
                  searcher=None, runnable_by: str | None = None,
                  memory_limit_gib: float | None = None) -> int:
    """Run the whole job for one spec file; returns the process exit code.

    Raises :class:`~autopar_opt.cli.options.OptionError` or :class:`SpecError`
    (exit code 2 through the CLI) before any work when an option or the spec
    is wrong. ``started_at`` (``time.perf_counter()``) is when the command
    started; the time limit counts from there.

    ``runnable_by`` (megatron | torchtitan | deepspeed) restricts the search to
    the plans that framework can run (:mod:`autopar_opt.search.runnable`); a
    searcher's plan then does not warm-start it (it may not be runnable).

    ``searcher`` (an :class:`autopar_opt.learn.harness.SearcherHook`, passed
    in by the CLI so that the search never imports the searchers) runs first,
    inside the time limit; its plan warm-starts the exact search, and the
    document gains a ``searcher`` entry (its value, the proven bound, its gap,
    the optimum when proven).
    """
    from autopar_opt.cli import options as opt
    from autopar_opt.core.files import check_output_dir

    # every option is checked before the spec is read; ``--solver auto`` only exists for an
    # operator-sharding spec, so its check waits until the spec's kind is known
    auto = solver is not None and solver.strip().lower() == "auto"
    opt.raise_if_any([*([] if auto else opt.check_solver(solver)), *opt.check_form(form),
                      *opt.check_time_limit(time_limit_s), *opt.check_gap(gap),
                      *opt.check_memory_limit(memory_limit_gib),
                      *(check_output_dir(out_dir, "--out") if out_dir is not None else [])])
    code = _opspace_command(spec_path, solver, time_limit_s, gap, out_dir, json_output, quiet, form,
                            runnable_by, searcher, export_models, warm_start, started_at,
                            memory_limit_gib)
    if code is not None:          # problem: {format: operator_sharding}: solved by opspace/
        return code
    opt.raise_if_any(opt.check_solver(solver) if auto else [])
    peer = _peer_spec(spec_path)
    if peer is not None:          # a Piper/PaSE instance (problem:): solved by peers/
        from autopar_opt.cli.peers import peer_solve_command
        from autopar_opt.core.errors import SpecError, SpecProblem
        opt.raise_if_any(_peer_unused_options(peer.format, form, runnable_by, searcher,
                                              export_models, warm_start))
        opt.raise_if_any(opt.check_solver_available(solver))      # before the solve, not in it
        in_spec = [] if solver is not None else \
            opt.check_solver_available(peer.solver.name, "solver.name")
        if in_spec:
            raise SpecError([SpecProblem(str(spec_path), p.key, p.value, p.rule, p.fix)
                             for p in in_spec])
        return peer_solve_command(peer, solver, time_limit_s, gap, out_dir, json_output, quiet,
                                  started_at, memory_limit_gib)
    from autopar_opt.spec import load_spec      # after the peer route: it needs none of it

    spec = load_spec(spec_path)
    if runnable_by:
        from autopar_opt.search.runnable import runnable_problems, runnable_space
        listed = spec.space.schedules
        spec.space = runnable_space(spec.space, runnable_by)
        gone = [x.value for x in listed if x not in spec.space.schedules
                and spec.space.schedules_source == "search.schedules"]
        if gone:
            spec.notices = [*spec.notices, f"--runnable-by {runnable_by}: {runnable_by} does not "
                            f"run the {', '.join(gone)} schedule the spec lists; searched without it"]
        from autopar_opt.ir.target import pricing_notice
        # torchtitan-0.2 is torchtitan's rules at that version: the same framework, runtime
        # and model flavours (QA round 9: neither notice was said for it)
        framework = "torchtitan" if runnable_by.startswith("torchtitan") else runnable_by
        priced = pricing_notice(framework, spec.training.runtime.name, "--runnable-by")
        if priced:
            spec.notices = [*spec.notices, priced]
        if framework == "torchtitan":
            from autopar_opt.export.torchtitan import flavour_notice
            said = flavour_notice(spec.graph, f"--runnable-by {runnable_by}")
            if said:
                spec.notices = [*spec.notices, said]
        if spec.fleet is None:       # a fleet refuses --runnable-by itself (cli/fleet.py)
            opt.raise_if_any(runnable_problems(spec.space, spec.graph, value=runnable_by))
    if spec.fleet is None:
        from autopar_opt.search.configs import empty_space_problem, target_dropped, vp_dropped

        for said in (target_dropped(spec.graph, spec.cluster, spec.space),
                     vp_dropped(spec.graph, spec.cluster, spec.space)):
            if said:
                spec.notices = [*spec.notices, said]
        empty = empty_space_problem(spec.graph, spec.cluster, spec.training, spec.space)
        if empty is not None:       # a spec error, not a search out of time (QA round 10)
            from autopar_opt.core.errors import SpecError, SpecProblem
            raise SpecError([SpecProblem(str(spec_path), *empty)])
    if export_models and (solver or spec.solver.name).strip().lower() == "dp":
        from autopar_opt.core.files import COMMAND_LINE
        from autopar_opt.core.errors import SpecProblem
        opt.raise_if_any([SpecProblem(COMMAND_LINE, "--export-models", True, "writes the MIP "
                                      "models the search solves, and the dp solver builds none",
                                      "use --solver highs (or scip, gurobi), or drop "
                                      "--export-models")])
    if (form or "auto") != "auto" and (solver or spec.solver.name).strip().lower() == "dp":
        from autopar_opt.core.files import COMMAND_LINE
        from autopar_opt.core.errors import SpecProblem
        opt.raise_if_any([SpecProblem(COMMAND_LINE, "--form", form, "chooses the MIP "
                                      "formulation, and the dp solver builds none (it solves the "
                                      "tables exactly)", "drop --form, or use --solver highs (or "
                                      "scip, gurobi)")])
    opt.raise_if_any(_form_backend_problems(solver, form, spec, spec_path))
    if spec.fleet is not None:       # a cluster of several groups (cluster.groups): cli/fleet.py
        return _fleet_solve(spec, spec_path, solver, time_limit_s, gap, out_dir, json_output, quiet,
                            warm_start, form, started_at, searcher, runnable_by, export_models,
                            memory_limit_gib)
    err = LazyConsole(stderr=True)
    found = None
    if searcher is not None:
        searcher = _searcher_within_limit(searcher, time_limit_s, spec.solver.time_limit_s)
        found = searcher.run(spec, err)
        if found is None:
            return 2
    unit_s = _import_heavy_modules(bool(out_dir))
    so = spec.solver
    budget = Budget(time_limit_s if time_limit_s is not None else so.time_limit_s,
                    started_at if started_at is not None else _now())
    left = budget.remaining()
    reserve = output_reserve_s(spec, left, unit_s)
    from autopar_opt.search.document import build_document
    from autopar_opt.search.engine import SearchOptions

    options = SearchOptions(
        solver=(solver or so.name).strip().lower(), form=form or getattr(so, "form", "auto") or "auto",
        time_limit_s=max(left - reserve - BASELINE_SHARE * max(left, 0.0), 0.0),
        rel_gap=gap if gap is not None else so.rel_gap, warm_start=warm_start,
        export_dir=Path(out_dir) / "models" if (out_dir and export_models) else None,
        memory_budget=MemoryBudget.of(memory_limit_gib))
    with InterruptGuard() as guard:
        options.should_stop, options.stop_signal = guard.should_stop, lambda: guard.signum
        seed = found.plan if found is not None and found.feasible else None
        cpu_began = time.process_time()
        if spec.space.runs_on is not None:
            seed = None      # a searcher searches the free space: its plan may not be runnable
        try:
            with stdout_to_stderr():      # solver chatter never on stdout (--json)
                result = _search(spec, options, err, show=not (quiet or json_output),
                                 incumbent=seed)
        except SearchInterrupted as exc:
            stopped_before_a_result(exc.signum)
        if result is None:
            return 2
        result, runnability = result
        search_cpu_s = time.process_time() - cpu_began
        began = _now()
        try:
            baselines = [] if guard.interrupted else _baselines(spec, result,
                                                                budget.deadline - reserve)
        except SearchInterrupted:      # the search's answer stands: the outputs are written
            baselines = []             # (QA round 10: a signal here lost the whole run)
        baselines_s = _now() - began
        guard.defer()      # a second signal must not cut the outputs short
        options.time_limit_s = budget.total_s
        doc = build_document(str(spec_path), spec.graph, spec.cluster, spec.training, spec.space,
                             spec.cost_params, options, result, baselines)
        doc["solver"]["timings"] = {"tables_s": round(result.prepare_s, 3),
                                    "search_cpu_s": round(search_cpu_s, 3),
                                    "baselines_s": round(baselines_s, 3),
                                    "command_s": round(budget.elapsed(), 3)}
        late = guard.interrupted and result.interrupted_by is None
        if guard.interrupted and doc["status"] != "interrupted" and not late:
            doc["status"] = "interrupted"
        if late:
            # the signal came once the search had finished: its certificate stands; what the
            # signal cut is said (QA round 10: "interrupted", no notice, beside a gap of 0)
            doc["notices"] = [f"The signal {guard.signum} arrived after the search had "
                              "finished: the certificate is complete; the baselines and the "
                              "free-space search of the price of runnability were cut short."
                              ] + doc["notices"]
        if runnable_by:
            doc["search_space"]["runnable_by"] = runnable_by
        doc["runnability"] = runnability.to_dict() if runnability is not None else None
        doc["notices"] = list(spec.notices) + doc["notices"] + _no_mip_notice(doc, warm_start)
        if found is not None:
            doc["searcher"] = _searcher_against_its_space(searcher, found, result, doc, runnability)
        code = _emit(doc, out_dir, json_output, quiet, err, searcher,
                     timeline_fits(doc, budget.deadline - _now(), unit_s))
        if guard.interrupted:
            if quiet or json_output:       # no summary said it (QA round 35: exit 130, silent)
                from autopar_opt.cli.stopped import search_stopped_line

                err.print(search_stopped_line(guard.signum, doc["status"],
                                              Path(out_dir) / "plan.json" if out_dir else None,
                                              json_output), markup=False, highlight=False)
            return exit_code(guard.signum)
        return code


def _fleet_solve(spec, spec_path, solver, time_limit_s, gap, out_dir, json_output, quiet, warm_start,
                 form, started_at, searcher, runnable_by, export_models,
                 memory_limit_gib: float | None = None) -> int:
    """The fleet search (:mod:`autopar_opt.cli.fleet`) with the options, time budget and
    memory budget (``--memory-limit``: every MILP counted before it is built) of this command."""
    from autopar_opt.cli import options as opt
    from autopar_opt.cli.fleet import fleet_solve_command, unused_fleet_options
    from autopar_opt.search.engine import SearchOptions

    opt.raise_if_any(unused_fleet_options(searcher, runnable_by, export_models))
    so = spec.solver
    budget = Budget(time_limit_s if time_limit_s is not None else so.time_limit_s,
                    started_at if started_at is not None else _now())
    options = SearchOptions(solver=(solver or so.name).strip().lower(),
                            form=form or getattr(so, "form", "auto") or "auto",
                            time_limit_s=budget.remaining(),
                            rel_gap=gap if gap is not None else so.rel_gap, warm_start=warm_start,
                            memory_budget=MemoryBudget.of(memory_limit_gib))
    return fleet_solve_command(spec, spec_path, options, budget, out_dir, json_output, quiet)


def _searcher_against_its_space(searcher, found, result, doc: dict, runnability) -> dict:
    """The searcher's block against the certificate of the space it searched: the
    searchers search the free per-layer space, so under a framework target they are
    measured against the free space's bound and optimum (``runnability``), never the
    runnable certificate (a free plan may beat the runnable optimum)."""
    import math

    if runnability is None:
        cert = result.certificate
        optimum = cert.primal if doc["status"] == "optimal" else None
        return searcher.block(found, cert.lower_bound, optimum)
    lower = runnability.free_lower if math.isfinite(runnability.free_lower) else None
    optimum = runnability.free_primal if runnability.free_status == "optimal" else None
    block = searcher.block(found, lower, optimum)
    block["measured_against"] = "the free per-layer space (target: none)"
    return block


def _searcher_within_limit(searcher, time_limit_s: float | None, spec_limit_s: float):
    """The searcher hook with its budget inside the command's time limit
    (issue 15): an explicit ``--budget-s`` above the limit is refused (exit 2),
    the default is capped (:func:`autopar_opt.cli.options.searcher_budget`)."""
    import dataclasses

    from autopar_opt.cli import options as opt

    limit = time_limit_s if time_limit_s is not None else spec_limit_s
    source = "--time-limit" if time_limit_s is not None else "the spec's solver.time_limit_s"
    opt.raise_if_any(opt.check_budget(searcher.budget_s, limit, source))
    return dataclasses.replace(searcher, budget_s=opt.searcher_budget(searcher.budget_s, limit))


def _baselines(spec, result, deadline: float):
    """The baselines, from the cost tables the search built (issue 18); by
    evaluate() enumeration only for searches that built none (DeepSpeed's)."""
    from autopar_opt.search.baselines import all_baselines, table_baselines

    if result.tables:
        return table_baselines(result.tables, spec.graph, spec.cluster, spec.training,
                               spec.cost_params, spec.plan, deadline=deadline)
    return all_baselines(spec.graph, spec.cluster, spec.training, spec.space, spec.cost_params,
                         spec.plan, deadline=deadline)


def _import_heavy_modules(report: bool) -> float | None:
    """Import the report renderer (with ``--out``) before the time left is split
    between search, baselines and outputs: on a busy machine imports take
    seconds, and paid here they are measured, not guessed. Then compile the
    report's template and time the probe chart (:func:`autopar_opt.reports.cost.probe_s`),
    the unit the outputs' reserve is priced in; returns it (None without a
    report). The formulations are not imported here: only a search that builds
    a MIP needs them, and it imports them inside its own clock
    (:func:`autopar_opt.search.inner._load_mip_modules`)."""
    if not report:
        return None
    try:
        from autopar_opt.reports import cost, render
    except ImportError:       # reported (and skipped) when the report is written
        return None
    render.template()
    return cost.probe_s()


def output_reserve_s(spec, left: float, unit_s: float | None) -> float:
    """Seconds kept back from the search for plan.json, the report and leaving
    the interpreter: the outputs of the most expensive plan the search space
    allows (:func:`autopar_opt.reports.cost.largest_report`), priced in the
    probe's measured ``unit_s`` (the reference probe when no report is written),
    at most :data:`OUTPUT_SHARE` of the ``left`` seconds."""
    from autopar_opt.reports import cost
    from autopar_opt.search.configs import outer_configs

    layers = len(spec.graph.layers)
    if unit_s is None:          # no report: the document's text, the summary, the exit
        need = cost.FIXED_UNITS * cost.REFERENCE_PROBE_S
    else:
        configs = outer_configs(spec.graph, spec.cluster, spec.training, spec.space)
        need = cost.seconds(cost.largest_report(configs, layers), unit_s)
    return min(need, OUTPUT_SHARE * max(left, 0.0))


def timeline_fits(doc: dict, left_s: float, unit_s: float | None) -> bool:
    """Whether the report can still draw the plan's timeline in the ``left_s``
    seconds left: the rest of the outputs are priced first (the reserve may have
    been capped at :data:`OUTPUT_SHARE`, or the search overran). Always true
    without a probe (no report, or no time limit to price it against)."""
    if unit_s is None or not doc.get("plan") or not (doc.get("metrics") or {}).get("stages"):
        return True
    from autopar_opt.reports import cost

    stages = len(doc["metrics"]["stages"])
    cells = stages * int(doc["plan"]["microbatches"])
    layers = doc["spec"]["model"]["num_layers"]
    rest = cost.report_units(stages, 0, layers, len(doc["certificate"]["configurations"]))
    return cost.seconds(rest + cost.timeline_units(stages, cells), unit_s) <= left_s


def _now() -> float:
    import time
    return time.perf_counter()


def _form_backend_problems(solver: str | None, form: str | None, spec, spec_path) -> list:
    """The formulation asked for (``--form`` or the spec's ``solver.form``) against the
    problem classes the backend asked for (``--solver`` or ``solver.name``) declares (QA round
    12: ``--form miqp --solver highs`` ran until the backend refused, then printed "error:
    ..." without the --json error object). ``auto`` picks a backend that accepts it. The
    backend's module is imported only for an MIQP (start-up: tests/cli/test_startup.py)."""
    name = (solver or spec.solver.name or "auto").strip().lower()
    chosen = (form or getattr(spec.solver, "form", None) or "auto").strip().lower()
    if chosen != "miqp":
        return []
    from autopar_opt.core.errors import SpecProblem
    from autopar_opt.core.files import COMMAND_LINE
    from autopar_opt.core.result import ProblemClass
    from autopar_opt.solvers.registry import BACKENDS

    accepts = _accepts(name) if name in BACKENDS else None
    if accepts is None or ProblemClass.miqp in accepts:
        return []
    takers = [n for n in BACKENDS if n != name and ProblemClass.miqp in (_accepts(n) or ())]
    where, key = (COMMAND_LINE, "--form") if form else (str(spec_path), "solver.form")
    return [SpecProblem(where, key, chosen, f"solver {name!r} does not solve MIQP problems "
                        f"(it takes {', '.join(sorted(p.value for p in accepts))})",
                        "use --form milp (the exact linearisation)"
                        + (f", or --solver {' or '.join(takers)}" if takers else ""))]


def _accepts(name: str):
    """The problem classes backend ``name`` declares (None when it cannot be loaded)."""
    from autopar_opt.solvers.registry import backend_class

    try:
        return backend_class(name).accepts
    except ValueError:
        return None


def stopped_before_a_result(signum: int) -> NoReturn:
    """A stop signal reached the command outside the parts of its search that catch it and
    return their incumbent (the progress display, the configurations' list, the first
    uniform plans; an operator-sharding solve's document): there is no result to write.
    Exit ``128 + signum`` with the usual error message, not the traceback of an uncaught
    ``SearchInterrupted`` (exit 1; QA round 34, SIGTERM 1.06 s into ``solve
    examples/llama3_70b_1024_h100.yaml``)."""
    import signal

    from autopar_opt.cli.errors import fail

    fail(COMMAND_LINE, f"stopped by {signal.Signals(signum).name} before the search had a "
         "result to write (a plan or a bound); nothing was written",
         "run the command again and let the search start (a signal once it runs writes the "
         "best plan found so far)", key="signal", value=signum, kind="interrupted",
         exit_code=exit_code(signum))


def _search(spec, options: SearchOptions, err: Console, show: bool, incumbent=None):
    """Run the search with a progress bar: ``(result, runnability)``, the second
    None without a target (:func:`~autopar_opt.search.runnable.price_of_runnability`:
    under a target the free space is searched on the time the target's search
    hands back, at most ``max(FREE_MIN_S, FREE_FACTOR x`` the target search's time)); None (after a
    message) when the backend is unusable."""
    from dataclasses import replace as _replace

    from autopar_opt.search.engine import run_search
    from autopar_opt.solvers.base import SolverMismatch, SolverUnavailable

    def run(progress):
        if spec.space.runs_on is None:
            return run_search(spec.graph, spec.cluster, spec.training, spec.space,
                              spec.cost_params, options, progress, incumbent=incumbent), None
        from autopar_opt.search.runnable import TARGET_SHARE, price_of_runnability

        began = _now()
        result = run_search(spec.graph, spec.cluster, spec.training, spec.space, spec.cost_params,
                            _replace(options, time_limit_s=TARGET_SHARE * options.time_limit_s),
                            progress, incumbent=incumbent)
        took = _now() - began
        left = options.time_limit_s - took
        if result.interrupted_by is not None:
            left = 0.0
        return result, price_of_runnability(result, spec.graph, spec.cluster, spec.training,
                                            spec.space, spec.cost_params, options, left,
                                            target_time_s=took)

    try:
        if not show:          # --json / --quiet: no bar to draw, rich is not imported for one
            return run(None)
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("{task.description}"), BarColumn(),
                      TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(),
                      console=getattr(err, "console", err), transient=True) as bar:
            task = bar.add_task("searching", total=None)

            def progress(k, n, record, incumbent, bound):
                bar.update(task, total=n, completed=k,
                           description=f"config {k}/{n} ({record.config.label()}: {record.status}) "
                                       f"incumbent {_fmt(incumbent)} s bound {_fmt(bound)} s")

            return run(progress)
    except (SolverUnavailable, SolverMismatch) as exc:
        # QA round 12: printed "error: ..." and exit 2 without the --json error object
        from autopar_opt.cli.errors import fail
        from autopar_opt.core.files import COMMAND_LINE

        rule, _, fix = str(exc).partition("; ")
        fail(COMMAND_LINE, rule, fix or "choose another --solver", key="--solver",
             value=options.solver, kind="invalid option")


def _emit(doc: dict, out_dir: str | None, json_output: bool, quiet: bool, err: Console,
          searcher=None, draw_timeline: bool = True) -> int:
    """Write plan.json and the report (atomically), print the JSON or the summary."""
    text = json.dumps(doc, indent=2)
    if out_dir:
        from autopar_opt.cli.errors import write_outputs

        html = _report_html(doc, err, draw_timeline)        # rendered before anything is written
        write_outputs(out_dir, [("plan.json", text + "\n")]
                      + ([("report.html", html)] if html is not None else []))
    if json_output:
        sys.stdout.write(text + "\n")
    elif not quiet:
        out_console = console()
        _summary(doc, out_console)
        if "searcher" in doc and searcher is not None:
            searcher.summary(doc["searcher"], out_console)
        if out_dir:
            out_console.print(f"  wrote {Path(out_dir) / 'plan.json'} and "
                              f"{Path(out_dir) / 'report.html'}", markup=False, highlight=False)
    return EXIT_CODES.get(doc["status"], 0)


def _report_html(doc: dict, err: Console, draw_timeline: bool = True) -> str | None:
    try:
        from autopar_opt.reports.render import render_html
    except ImportError as exc:  # reports are optional only while they are being built
        err.print(f"warning: HTML report not written ({exc})")
        return None
    return render_html(doc, draw_timeline)
