"""``autopar capacity SWEEP.yaml``: run a sweep, print or write the answers.

Exit codes: 0 every scenario has a row (whatever its status), 2 bad input
(sweep file, engine not installed), 4 some scenario's search raised (its
message is printed; the others are stored), 129/130/143 interrupted by SIGHUP/SIGINT/SIGTERM
(:class:`~autopar_opt.core.interrupts.InterruptGuard`: a signal whose exception
was swallowed, e.g. inside a weakref callback, still stops the sweep at the
next finished scenario; finished scenarios are stored; running the same
command again resumes). Output files are written
atomically once the sweep finished, or was stopped by a signal: then over the scenarios
that finished, the others listed as not run (a second signal does not cut them short).
"""

from __future__ import annotations

import functools
import json
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

from autopar_opt.cli.rich_console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)
from rich.table import Table

from autopar_opt.capacity.answers import cheapest
from autopar_opt.capacity.engines import ENGINES, EngineUnavailable
from autopar_opt.capacity.run import (SweepRun, build_capacity_document, csv_text, entries_of,
                                      mark_interrupted, run_sweep)
from autopar_opt.capacity.store import ResultStore, default_store_path
from autopar_opt.capacity.sweep import Sweep, load_sweep
from autopar_opt.core.interrupts import InterruptGuard, exit_code
from autopar_opt.core.files import write_atomic
from autopar_opt.reports.formatting import (fmt_beside, fmt_money, fmt_pct_up, runs_behind,
                                            scenario_notes, some_ids)

#: Some scenario's search raised (e.g. its solver is not installed); the others are stored.
EXIT_ERRORS = 4


def _error(message: str) -> None:
    """One unwrapped line on stderr (a message to act on, not a display)."""
    sys.stderr.write(message + "\n")


def cap_workers(workers: int | None, engine: str) -> int | None:
    """``--workers`` at most the cores this process may use (a local pool of 10^9
    processes would fork until the machine gives out); said on stderr when capped.
    Ray's workers may live on other machines, so its count is not capped here."""
    from autopar_opt.capacity.engines import available_cores

    cores = available_cores()
    if workers is None or engine != "local" or workers <= cores:
        return workers
    _error(f"note: --workers {workers:,} capped at the {cores} core(s) this process may use")
    return cores


def _interval(pair: list, fmt, threshold: float | None = None) -> str:
    """``lo - hi``; ``fmt``: a format spec, or a function of one number (money). With
    ``.3g``, both ends at one precision (:func:`~autopar_opt.core.ranges.range_text`:
    ``59.0 - 61.9``), unless that rounding puts an end on the other side of ``threshold``
    (the deadline the row is judged against) than it is: then each end as
    :func:`~autopar_opt.reports.formatting.fmt_beside` writes it."""
    lo, hi = pair
    if lo is None and hi is None:
        return "-"
    if fmt == ".3g" and lo is not None and hi is not None:
        from autopar_opt.core.ranges import range_text

        text = range_text(lo, hi, sep=" - ")    # one precision for both ends (59.0 - 61.9)
        shown = [float(x.replace(",", "")) for x in text.split(" - ")]
        if threshold is None or all((v > threshold) == (x > threshold) and (v == threshold) ==
                                    (x == threshold) for v, x in zip(shown, (lo, hi))):
            return text
        fmt = functools.partial(fmt_beside, threshold=threshold)
    show = lambda x: "?" if x is None else (fmt(x) if callable(fmt) else format(x, fmt))
    return f"{show(lo)} - {show(hi)}"


def print_summary(doc: dict[str, Any], console: Console) -> None:
    """The sweep as a table and its answers. Statements are printed as text, not Rich
    markup: their ``[... 80% interval ...]`` brackets were swallowed as tags (QA round 9);
    scenario ids fold instead of being cut to an ellipsis, and each row shows the 80%
    model-error interval of its days, the days never rounded across the deadline
    (:func:`~autopar_opt.reports.formatting.fmt_beside`), and with a throughput target its
    tokens/s (never rounded across the target)."""
    from rich.markup import escape

    from autopar_opt.core.result import PROOF_GAP

    cur = doc["planning"]["prices"]["currency"]
    deadline = doc["planning"].get("deadline_days")
    table = Table(box=None)
    table.add_column("scenario", overflow="fold")
    # with a throughput target, the tokens/s it is judged on (QA round 35: "no" for a
    # scenario within the deadline, the figure that decided it shown nowhere)
    target = doc["planning"].get("target_tokens_per_s")
    rate = functools.partial(fmt_beside, threshold=target)
    for name in ("status", "gap", "days", "80% interval, days", f"cost ({cur})",
                 *(["tokens/s"] if target is not None else []), "meets"):
        table.add_column(name)
    for e in doc["scenarios"]:
        # rounded up: the gap bounds how far the plan may be from the best (QA round 35:
        # 3e-5 read "0.00%" beside "optimal (within the gap)")
        gap = "-" if e["gap"] is None else fmt_pct_up(e["gap"])
        status = e["status"] + (" (within the gap)" if e["status"] == "optimal" and e["gap"]
                                and e["gap"] > PROOF_GAP else "")
        model_err = e.get("model_error") or {}
        err = model_err.get("time_to_train_days")
        # with the count of comparable runs it stands on (QA round 10: capacity.json only)
        said = f"{_interval(err, '.3g')} ({runs_behind(model_err)})" if err else "-"
        tokens = [_interval(e["throughput_tokens_per_s"], rate)] if target is not None else []
        table.add_row(escape(e["id"]), status, gap,
                      _interval(e["time_to_train_days"], ".3g", deadline),
                      said, _interval(e["cost"], fmt_money), *tokens, e["meets"])
    console.print(table)
    ans = doc["answers"]

    def say(label: str, text: str) -> None:
        console.print(f"[bold]{escape(label)}:[/] {escape(text)}", highlight=False)

    say("requirement", ans["requirement"])
    say("cheapest", ans["cheapest_meeting_requirement"]["statement"])
    for device, a in ans["fewest_gpus_per_device"].items():
        say(f"fewest {device}", a["statement"])
    say("Pareto", ans["pareto_time_cost"]["statement"])
    if ans.get("invalid"):
        say("invalid", ans["invalid"]["statement"])
    for m in ans.get("group_matches", []):
        say("match", m["statement"])
    run = doc["run"]
    for note in scenario_notes(doc, shown=6):
        console.print(f"[bold]note:[/] {note['text']}: {note['ids']}", highlight=False)
    # why a scenario has no plan (least memory against capacity, no divisor, not run), as
    # capacity.json and the HTML say it (the table showed "infeasible" without a reason)
    # and why one with a plan is not proven (its time limit: QA round 35, the gap column alone)
    why: dict[tuple[str, str], list[str]] = {}
    for e in doc["scenarios"]:
        if e.get("reason"):
            label = "invalid" if e["status"] == "invalid" else \
                "no plan" if e.get("primal") is None else "not proven"
            why.setdefault((label, e["reason"]), []).append(e["id"])
    for (label, reason), ids in why.items():
        console.print(f"[bold]{label}:[/] {escape(some_ids(ids, 6))}: {escape(reason)}",
                      highlight=False)
    n = len(doc["scenarios"])
    bad = sum(e.get("status") == "invalid" for e in doc["scenarios"])   # rules reject them
    # "searched", not "solved": a time-limited search may end without a plan (its row says)
    console.print(f"{n} scenario{'' if n == 1 else 's'} ({run['computed']} searched, {run['reused']} "
                  f"from the store {run['store']}"
                  + (f", {bad} invalid, not searched" if bad else "")
                  + f") in {doc['wall_time_s']:.1f} s")


def _progress_text(sweep: Sweep, rows: dict) -> str:
    entries = entries_of(sweep, rows)
    best = cheapest(entries, sweep.planning) if entries else None
    if not best or best["scenario"] is None:
        return "no scenario proven to meet the requirement yet"
    cost = best["cost"][1]
    return f"cheapest so far: {best['scenario']} ({fmt_money(cost)} {sweep.planning.prices.currency})"


def _write_outputs(doc: dict[str, Any], rows: dict, out: Path, written: list[str]) -> None:
    """capacity.json, capacity.csv, every scenario's plan.json + report.html, capacity.html;
    ``written`` receives each file's path under ``out`` once it is whole, then the one being
    written (said when it cannot be: :func:`_cannot_write`)."""
    from autopar_opt.reports.capacity import render_capacity_html

    def put(rel: str, text: str) -> None:
        written.append(rel)                    # the last entry: the file being written
        write_atomic(out / rel, text)

    for entry in doc["scenarios"]:
        row = rows.get(entry["id"])            # none: a combination the rules reject
        if row is None or row["document"] is None:    # or the search raised: nothing to report
            entry["report"] = None
            continue
        put(f"scenarios/{entry['id']}/plan.json", json.dumps(row["document"], indent=2) + "\n")
        put(f"scenarios/{entry['id']}/report.html", row["report_html"])
        entry["report"] = f"scenarios/{entry['id']}/report.html"
    put("capacity.json", json.dumps(doc, indent=2) + "\n")
    put("capacity.csv", csv_text(doc))
    put("capacity.html", render_capacity_html(doc))
    _drop_stale_scenarios(out / "scenarios", {e["id"] for e in doc["scenarios"]})


def _cannot_write(out: Path, exc: OSError, written: list[str], store_file: Path) -> NoReturn:
    """The sweep's outputs stopped at a file that cannot be written: name it, what was
    written whole before it and that the results are in the store (QA round 34: "error:
    cannot write to OUT (...)" left the reader to guess which of the files were this run's)."""
    from autopar_opt.cli.errors import refuse
    from autopar_opt.core.files import COMMAND_LINE

    failed, written = (written[-1], written[:-1]) if written else ("a file", written)
    plans = sum("/" in w for w in written)     # scenarios/ID/plan.json, report.html
    parts = [w for w in written if "/" not in w] + ([f"{plans} file(s) under scenarios/"]
                                                    if plans else [])
    done = f"written whole: {', '.join(parts)}; " if parts else ""
    rule = (f"cannot write {failed} ({exc.strerror or exc}); {done}it and the files after it "
            f"were not written (a file of that name already in {out} is from an earlier run); every "
            f"scenario's result is kept in the store {store_file}")
    refuse(f"error: {rule}", COMMAND_LINE, rule, f"free space or permissions in {out}, or "
           "choose another --out, and run the command again (the stored scenarios are not "
           "solved again)", key="--out", value=str(out), kind="cannot write")


#: What a scenario folder of an earlier sweep holds (the only files removed from it).
_SCENARIO_FILES = frozenset(("plan.json", "report.html"))


def _drop_stale_scenarios(folder: Path, current: set[str]) -> None:
    """Remove the scenario folders an earlier sweep wrote into the same ``--out`` that this
    sweep has not (QA round 9: they stayed beside the new ones, linked from nothing): only
    folders holding nothing but a scenario's plan.json and report.html."""
    import shutil

    if not folder.is_dir():
        return
    for sub in folder.iterdir():
        if sub.name in current or not sub.is_dir() or sub.is_symlink():
            continue
        names = {f.name for f in sub.iterdir()}
        if names and names <= _SCENARIO_FILES and all((sub / n).is_file() for n in names):
            shutil.rmtree(sub, ignore_errors=True)


#: Time kept for the outputs after the last scenario (s): a fixed part, and a part per
#: scenario (its plan.json and report written, its row in the table and the charts).
OUTPUT_RESERVE_S, OUTPUT_RESERVE_PER_SCENARIO_S = 1.0, 0.02


def capacity_command(sweep_path: str, engine: str = "local", workers: int | None = None,
                     out_dir: str | None = None, json_output: bool = False, quiet: bool = False,
                     store_path: str | None = None, time_limit_s: float | None = None,
                     started_at: float | None = None) -> int:
    """Run the whole job for one sweep file; returns the process exit code.

    ``time_limit_s``: a wall-clock budget for the whole command from ``started_at``
    (``time.perf_counter()``, process start): every scenario's search gets at most
    what is left, scenarios it does not reach are listed as not run, and the command
    exits 4 with the answers over the scenarios it solved."""
    err = Console(stderr=True)
    from autopar_opt.cli.errors import refuse
    from autopar_opt.core.files import COMMAND_LINE

    if engine not in ENGINES:
        refuse(f"error: --engine {engine!r} is not one of {', '.join(ENGINES)}; use --engine local "
               "(default) or --engine ray", COMMAND_LINE, f"is not one of {', '.join(ENGINES)}",
               "use --engine local (default) or --engine ray", key="--engine", value=engine,
               kind="invalid option")
    if workers is not None and workers < 1:
        refuse(f"error: --workers {workers} must be at least 1; omit it to use every available "
               "core", COMMAND_LINE, "must be at least 1", "omit it to use every available core",
               key="--workers", value=workers, kind="invalid option")
    workers = cap_workers(workers, engine)
    t0 = time.perf_counter()
    out = Path(out_dir) if out_dir else None
    store_file = Path(store_path) if store_path else (out / "capacity.sqlite" if out
                                                      else default_store_path())
    from autopar_opt.cli import options as opt
    from autopar_opt.core.files import check_output_dir, check_output_file

    store_problems = check_output_file(store_file if store_path is None else store_path,
                                       "the store" if store_path is None else "--store")
    if store_path is None and out is None:
        # QA round 12: the default store's problem said "choose a directory you can write
        # to" without naming the option that chooses it
        import dataclasses

        store_problems = [dataclasses.replace(
            p, fix=f"the results store defaults to {store_file} ($XDG_CACHE_HOME, else "
                   "~/.cache); give --store FILE (or --out DIR) in a directory you can "
                   "write to") for p in store_problems]
    opt.raise_if_any([*(check_output_dir(out_dir, "--out", ("capacity.json", "capacity.csv",
                                                             "capacity.html"))
                        if out_dir is not None else []),
                      *store_problems])
    opt.raise_if_any(opt.check_time_limit(time_limit_s))
    sweep = load_sweep(sweep_path)          # SpecError: exit 2 through the CLI's guard
    deadline, spent, reserve = None, 0.0, 0.0
    if time_limit_s is not None:          # the workers share the wall clock, not perf_counter
        spent = time.perf_counter() - (started_at if started_at is not None else t0)
        reserve = OUTPUT_RESERVE_S + OUTPUT_RESERVE_PER_SCENARIO_S * len(sweep.scenarios)
        deadline = time.time() + time_limit_s - spent - reserve
    show = not (quiet or json_output)
    stopped: int | None = None          # the signal that stopped the sweep
    try:
        ResultStore(store_file).close()
    except (OSError, sqlite3.Error) as exc:     # not an SQLite file, unwritable, ...
        refuse(f"error: cannot use the results store {store_file} ({exc}); name another file "
               "with --store", str(store_file), f"cannot be used as the results store ({exc})",
               "name another file with --store", key="--store")
    with ResultStore(store_file) as store, Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("ETA"), TimeRemainingColumn(), console=err, disable=not show, transient=True) as bar:
        task = bar.add_task("capacity sweep", total=len(sweep.scenarios))

        def progress(done: int, total: int, rows: dict) -> None:
            bar.update(task, completed=done, description=_progress_text(sweep, rows))
            if guard is not None and guard.interrupted:   # the raise was lost (e.g. inside
                # a weakref callback)
                raise KeyboardInterrupt
        run = SweepRun({})              # filled as scenarios finish, kept when interrupted
        guard = None                    # a Ctrl-C as the guard is entered finds it unset
        try:
            with InterruptGuard(raise_as=KeyboardInterrupt) as guard:
                run_sweep(sweep, store, engine, workers, progress, deadline, run=run)
        except EngineUnavailable as exc:
            refuse(f"error: {exc}", COMMAND_LINE, str(exc), "install it, or use --engine local",
                   key="--engine", value=engine)
        except KeyboardInterrupt:
            bar.stop()
            stopped = guard.signum if guard is not None and guard.signum is not None \
                else signal.SIGINT
            _error(f"interrupted: {store.count()} scenario results are stored in {store_file}; "
                   f"the answers cover the {len(run.rows)} of {len(sweep.scenarios)} scenarios "
                   "that finished; run the same command again to resume (finished scenarios "
                   "are not recomputed)")
    run.wall_time_s = time.perf_counter() - t0
    if stopped is not None:
        # the answers over the scenarios that finished, written as after a --time-limit
        # (QA round 11: a Ctrl-C after hours of a sweep wrote no capacity.json, no report)
        mark_interrupted(sweep, run, signal.Signals(stopped).name)
    with InterruptGuard() as late:      # a second signal does not cut the outputs short
        late.defer()
        doc = build_capacity_document(sweep, run, engine, workers, str(store_file))
        if out is not None:
            written: list[str] = []
            try:
                _write_outputs(doc, run.rows, out, written)
            except OSError as exc:
                _cannot_write(out, exc, written, store_file)
        if json_output:
            sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        elif not quiet:
            print_summary(doc, Console())
            if out is not None:
                # the plan reports only where a scenario was solved (QA round 9: named a folder
                # that a sweep with every scenario not run never wrote)
                reports = (f" and the plan reports under {out / 'scenarios'}"
                           if (out / "scenarios").is_dir() else " (no scenario solved: no plan reports)")
                Console().print(f"wrote {out / 'capacity.html'}, capacity.csv, capacity.json{reports}")
    stopped = stopped if stopped is not None else late.signum
    if stopped is not None:
        return exit_code(stopped)
    if run.not_run:
        from autopar_opt.capacity.engines import available_cores
        from autopar_opt.capacity.worker import MIN_SCENARIO_S

        _error(f"note: --time-limit {time_limit_s:g} ran out before {len(run.not_run)} of "
               f"{len(sweep.scenarios)} scenarios ran ({', '.join(run.not_run[:5])}"
               f"{', ...' if len(run.not_run) > 5 else ''}): of the limit, {spent:.2g} s went "
               f"to start-up and {reserve:.2g} s are kept for writing the outputs, and a "
               f"scenario starts only with at least {MIN_SCENARIO_S:g} s left"
               # QA round 11: with a pool, the workers' imports of the solver stack (about
               # 1.2 s each on 2 cores) ate a short limit and the note did not say so
               + ("; each worker process first imports the solver stack (about a second, not "
                  "counted above) before its first scenario: --workers 1 runs in this process"
                  if engine == "local" and min(workers or available_cores(),
                                               len(sweep.scenarios)) > 1 else "")
               + "; the answers cover the others; run the same command again to solve them "
               "(finished scenarios are stored), or give it more time")
    if run.errors:
        first = run.rows[run.errors[0]]["reason"]
        _error(f"error: {len(run.errors)} scenario(s) failed and were not stored (first: "
               f"{run.errors[0]}: {first}); fix the cause and run again")
        return EXIT_ERRORS
    return EXIT_ERRORS if run.not_run else 0
