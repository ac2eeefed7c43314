"""``autopar calibrate RUNS.yaml [--json] [--fit --out FILE] [--cross-validate family]``.

Prints one row per record (predicted vs measured samples/s, relative error,
memory) and summary statistics, the leave-one-family-out table with
``--cross-validate family``, or exactly one JSON object with ``--json``.
A bad file or option gives a message on stderr naming file, record and key,
and exit status 2.
"""

from __future__ import annotations

import json
import math
import sys

from autopar_opt.cli.rich_console import Console
from rich.markup import escape
from rich.table import Table

from autopar_opt.calibration.calibrate import CalibrationReport, calibrate_file, write_params
from autopar_opt.calibration.compare import params_text
from autopar_opt.calibration.reading import RunFileError


def _fmt(x: float | None, spec: str = ".3g") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def render_table(report: CalibrationReport, console: Console) -> None:
    """Per-record table (with the built model's parameters, total and active,
    and the architecture facts assumed), skipped records with reasons, summary."""
    # the records' own texts are escaped: rich reads "[formula not stated: assumed]" as a
    # style tag and drops it (QA round 11)
    table = Table(title=f"Cost model vs published runs ({escape(report.path)})")
    for col in ("id", "kind", "params B", "arch assumed", "predicted samples/s",
                "measured samples/s", "rel. error", "mem pred GiB", "mem meas GiB"):
        table.add_column(col, overflow="fold")
    for c in report.comparisons:
        table.add_row(escape(c.id), c.kind, params_text(c.params_total, c.params_active),
                      ", ".join(c.architecture_assumed) or "none", _fmt(c.predicted, ".4g"),
                      _fmt(c.measured, ".4g"), f"{c.rel_error:+.1%}",
                      _fmt(c.predicted_memory_gib, ".1f"), _fmt(c.measured_memory_gib, ".1f"))
    console.print(table)
    for c in report.comparisons:
        if c.assumptions:
            console.print(f"[dim]assumed[/dim] {escape(c.id)}: "
                          + escape("; ".join(c.assumptions)), highlight=False)
    if report.memory_only:
        mem = Table(title="Memory only (no published throughput; not in the throughput statistics)")
        for col in ("id", "params B", "arch assumed", "measure", "GPU", "mem pred GiB",
                    "mem meas GiB", "rel. error"):
            mem.add_column(col, overflow="fold")
        for m in report.memory_only:
            mem.add_row(escape(m.id), params_text(m.params_total, m.params_active),
                        ", ".join(m.architecture_assumed) or "none", m.measure, m.rank,
                        _fmt(m.predicted_memory_gib, ".1f"), _fmt(m.measured_memory_gib, ".1f"),
                        f"{m.memory_rel_error:+.1%}")
        console.print(mem)
        for m in report.memory_only:        # QA round 11: only --json carried these
            if m.assumptions:
                console.print(f"[dim]assumed[/dim] {escape(m.id)}: "
                              + escape("; ".join(m.assumptions)), highlight=False)
    for rid, why in report.skipped:
        console.print(f"[yellow]skipped[/yellow] {escape(str(rid))}: {escape(why)}",
                      highlight=False)
    s = report.summary()
    console.print(
        f"modeled {s['modeled']}/{s['total']} ({s['throughput_compared']} on throughput, "
        f"{s['memory_only']} on memory only); |rel. error| median {_fmt(s['median_abs_rel_error'], '.1%')}, "
        f"p90 {_fmt(s['p90_abs_rel_error'], '.1%')}, max {_fmt(s['max_abs_rel_error'], '.1%')}; "
        f"memory compared on {s['memory_compared']} (median |rel. error| "
        f"{_fmt(s['memory_median_abs_rel_error'], '.1%')})")


def render_cross_validation(report: CalibrationReport, console: Console) -> None:
    """Per-family leave-one-family-out table and the overall figures."""
    table = Table(title="Leave-one-family-out: fit on the other families, predict this one")
    for col in ("held-out family", "records", "trained on", "median |err|", "p90 |err|",
                "max |err|", "params at a bound"):
        table.add_column(col, overflow="fold")
    for fam in report.cross_validation:
        s = fam.summary()
        table.add_row(escape(fam.family), str(s["modeled"]), str(fam.trained_on),
                      _fmt(s["median_abs_rel_error"], ".1%"), _fmt(s["p90_abs_rel_error"], ".1%"),
                      _fmt(s["max_abs_rel_error"], ".1%"), ", ".join(fam.at_bound) or "-")
    console.print(table)
    s = report.summary()
    console.print(f"leave-one-family-out over {len(report.lofo_comparisons())} records: median "
                  f"|rel. error| {_fmt(s['lofo_median_abs_rel_error'], '.1%')}, p90 "
                  f"{_fmt(s['lofo_p90_abs_rel_error'], '.1%')}, max "
                  f"{_fmt(s['lofo_max_abs_rel_error'], '.1%')}")


#: Exit code when the time limit stopped the fit or the cross-validation.
EXIT_INCOMPLETE = 4


def render_ranking(report: CalibrationReport, console: Console) -> None:
    """Jobs of the file run with two or more layouts: the model's order against the
    measured one (:mod:`autopar_opt.calibration.ranking`), one line per job."""
    from autopar_opt.calibration.ranking import TIE, summary

    for label, groups in (("with these parameters", report.ranking),
                          ("out of sample (each family's fit without it)",
                           report.ranking_out_of_sample)):
        if not groups:
            continue
        s = summary(groups)
        console.print(f"Layout ranking, {label}: {s['groups']} job(s) with several layouts; the "
                      f"model's first choice is the measured fastest in {s['top1']}; mean regret "
                      f"{s['mean_regret']:.1%} (measured throughput lost by running it); "
                      f"{s['pairs_agree']} of {s['pairs']} pairs measured more than {TIE:.0%} "
                      "apart ordered as measured")
        for g in groups:
            first, best = g.predicted_order()[0], g.measured_order()[0]
            n, agree = g.decisive_pairs()
            verdict = ("the measured fastest" if g.top1 else
                       f"measured fastest {best.layout}, regret {g.regret:.1%}")
            console.print(f"  {g.key}: {len(g.entries)} layouts; model's first {first.layout} "
                          f"({verdict}); {agree} of {n} decisive pairs ordered as measured",
                          markup=False, highlight=False)


#: The suffixes of the file ``--fit --out`` writes: :func:`write_params` writes YAML, and a
#: spec's ``cost_model:`` reads a file by its suffix (YAML, TOML or JSON).
FIT_SUFFIXES = (".yaml", ".yml")


def _check_fit_suffix(output: str) -> list:
    """A problem when ``output`` is not named as the YAML file the fit writes (QA round 12:
    ``--fit --out fit.json`` wrote YAML into fit.json, which a spec's ``cost_model: fit.json``
    then refused with a JSON syntax error; ``fit.txt``: an unsupported extension)."""
    from pathlib import Path

    from autopar_opt.core.errors import SpecProblem
    from autopar_opt.core.files import COMMAND_LINE

    path = Path(output)
    if path.suffix.lower() in FIT_SUFFIXES:
        return []
    return [SpecProblem(COMMAND_LINE, "--out", output,
                        f"the fitted parameters are written as YAML, and a spec's cost_model: "
                        f"reads a file by its extension ({path.suffix or 'none'} here)",
                        f"name the file {path.stem or 'fit'}.yaml")]


def _fit_side_effects(report) -> list[str]:
    """What a fit changes beyond the records it saw (QA round 9: a one-record A100 fit moved
    the V100's GEMM efficiency 0.783 -> 0.628 without a word): dies no record of the file
    covers and no microbenchmark pins take the median of the fitted ones; and a fit of as
    many parameters as records is under-determined."""
    from autopar_opt.cost.chips import chip_of
    from autopar_opt.cost.params import default_params

    shipped, fitted = default_params().gemm_efficiency, report.fit.params.gemm_efficiency
    free = {k.split(":", 1)[1] for k in report.fit.free if k.startswith("eff:")}
    moved = [f"{dev} {shipped[dev]:.3f} -> {fitted[dev]:.3f}" for dev in sorted(fitted)
             if dev in shipped and abs(fitted[dev] - shipped[dev]) > 5e-4
             and chip_of(dev) not in free]
    out = []
    if moved:
        out.append("devices no record of this file fits take the median of the fitted dies' "
                   "GEMM efficiency (calibration.fit): " + ", ".join(moved[:8])
                   + (f" and {len(moved) - 8} more" if len(moved) > 8 else ""))
    n = len([c for c in report.comparisons if c.kind != "memory_only"])
    if n <= len(report.fit.free):
        out.append(f"{len(report.fit.free)} parameters fitted on {n} record(s): under-determined "
                   "(any error can be fitted away); fit on more records")
    return out


def calibrate_command(runs_path: str, json_output: bool, fit: bool = False,
                      output: str | None = None, cross_validate: str | None = None,
                      time_limit_s: float | None = None, started_at: float | None = None,
                      quiet: bool = False) -> int:
    """Compare (with ``fit`` refit and write to ``output``; with ``cross_validate``
    validate out of sample) the cost model; returns the exit status.

    ``time_limit_s``: a wall-clock budget for the whole command from ``started_at``
    (``time.perf_counter()``; process start). A fit the limit stops writes nothing
    and a cross-validation it cuts lists the families it did not reach: exit 4."""
    from autopar_opt.cli.errors import refuse
    from autopar_opt.core.files import COMMAND_LINE

    if fit and not output:
        refuse("autopar calibrate: --fit writes the fitted parameters to a file you name: add "
               "--out FILE (then point a spec's `cost_model:` at it)", COMMAND_LINE,
               "--fit writes the fitted parameters to a file you name",
               "add --out FILE (then point a spec's `cost_model:` at it)", key="--fit",
               value=True, kind="invalid option")
    if output and not fit:
        refuse(f"autopar calibrate: --out {output}: only --fit writes a file (the fitted "
               "parameters); add --fit, or drop --out to compare only", COMMAND_LINE,
               "only --fit writes a file (the fitted parameters)",
               "add --fit, or drop --out to compare only", key="--out", value=output,
               kind="invalid option")
    if fit:                                      # before the fit, not after it (issue 15)
        from autopar_opt.cli import options as opt
        from autopar_opt.core.files import check_output_file

        opt.raise_if_any(check_output_file(output, "--out", (runs_path,)))
        opt.raise_if_any(_check_fit_suffix(output))
    if cross_validate is not None and cross_validate != "family":
        refuse(f"autopar calibrate: --cross-validate {cross_validate!r} is not supported; the "
               "only grouping is 'family' (leave one source family out)", COMMAND_LINE,
               "is not supported; the only grouping is 'family' (leave one source family out)",
               "use --cross-validate family", key="--cross-validate", value=cross_validate,
               kind="invalid option")
    from autopar_opt.cli import options as opt

    opt.raise_if_any(opt.check_time_limit(time_limit_s))
    deadline = None
    if time_limit_s is not None:
        import time

        from autopar_opt.cli.budget import Budget

        # the table and the file take well under a second; keep 5% and 0.2 s for them
        budget = Budget(time_limit_s, started_at if started_at is not None else time.perf_counter())
        deadline = budget.deadline - max(0.2, 0.05 * time_limit_s)
    try:
        report = calibrate_file(runs_path, do_fit=fit, cross_validate=cross_validate is not None,
                                deadline=deadline)
    except RunFileError as exc:
        text = str(exc)
        rule = text[len(str(runs_path)) + 2:] if text.startswith(f"{runs_path}: ") else text
        fix = exc.fix or "give a run file as tests/data/published_runs.yaml is written"
        refuse(f"autopar calibrate: {text}" + (f"; {exc.fix}" if exc.fix else ""),
               str(runs_path), rule, fix, key=exc.key, value=exc.value,
               kind="invalid run file")
    written = None
    if fit and report.fit is not None and not report.fit.converged:
        print(f"autopar calibrate: --time-limit {time_limit_s:g}: {report.fit.message}; nothing "
              f"was written to {output} (a fit cut short is not a fit); the table below prices "
              "the records with the shipped parameters; a longer --time-limit finishes it",
              file=sys.stderr)
        fit = False
    if fit and report.fit is not None and report.not_reached:
        # QA round 11: the fit converged, the time limit then cut the pricing of its records,
        # and the file was written with "modeled: 0" statistics and an "under-determined: fitted
        # on 0 record(s)" note; a fit file carries its statistics, so none is written
        print(f"autopar calibrate: --time-limit {time_limit_s:g}: the fit converged but the time "
              f"ran out before {len(report.not_reached)} of its record(s) were priced with it; "
              f"nothing was written to {output} (its statistics would be incomplete); a longer "
              "--time-limit writes it", file=sys.stderr)
        fit = False
    if fit:
        if report.fit is None and report.not_reached:
            print(f"autopar calibrate: --time-limit {time_limit_s:g} ran out before any record "
                  f"was modeled; nothing was written to {output}; a longer --time-limit fits",
                  file=sys.stderr)
            if json_output:        # --json prints its document whatever the outcome
                print(json.dumps(report.to_dict(), default=float))
            return EXIT_INCOMPLETE
        if report.fit is None:
            refuse(f"autopar calibrate: {runs_path}: no record could be modeled, nothing to fit",
                   str(runs_path), "no record could be modeled, nothing to fit",
                   "see the skipped records and their reasons (run without --fit)",
                   kind="invalid run file")
        try:
            written = write_params(report, output)
        except OSError as exc:
            refuse(f"autopar calibrate: --out {output}: cannot write ({exc.strerror or exc})",
                   COMMAND_LINE, f"cannot write ({exc.strerror or exc})",
                   "choose a file in a directory you can write to", key="--out", value=output)
    code = 0 if report.complete else EXIT_INCOMPLETE
    if report.complete and not report.comparisons and not report.memory_only and report.skipped:
        # nothing compared: the file's records all failed to read (QA round 9: exit 0)
        print(f"autopar calibrate: {runs_path}: none of its {len(report.skipped)} record(s) "
              "could be modeled (each skip below says why); nothing was compared",
              file=sys.stderr)
        code = 2
    if report.families_left_out:
        print(f"autopar calibrate: --time-limit {time_limit_s:g} ran out before the "
              f"cross-validation of {len(report.families_left_out)} famil"
              f"{'y' if len(report.families_left_out) == 1 else 'ies'} "
              f"({', '.join(report.families_left_out)}); the table holds the others; a longer "
              "--time-limit validates them all", file=sys.stderr)
    if cross_validate is not None and not report.cross_validation and not report.families_left_out:
        print(f"autopar calibrate: --cross-validate family: {runs_path} has throughput records of "
              "one source family only; leaving it out leaves nothing to fit on, so nothing was "
              "cross-validated (add runs of another family)", file=sys.stderr)
    if report.families_left_out and report.ranking:
        print("autopar calibrate: the layout ranking out of sample needs every family's "
              "cross-validation; it is not reported (the ranking with these parameters is)",
              file=sys.stderr)
    if report.not_reached:
        print(f"autopar calibrate: --time-limit {time_limit_s:g} ran out before "
              f"{len(report.not_reached)} record(s) were priced (listed as skipped); a longer "
              "--time-limit prices them all"
              + ("; the layout ranking covers only the records priced" if report.ranking
                 else ""), file=sys.stderr)
    if json_output:
        data = report.to_dict()
        if written is not None:
            data["written"] = str(written)
            data["fit_notes"] = _fit_side_effects(report)
        if code == 2:
            # an input error carries the "error" object every --json command prints (README,
            # "With --json, an input error is also one JSON object"; QA round 11: only the
            # report came, with exit 2), one problem per record with its reason
            data["error"] = {
                "kind": "invalid run file", "exit_code": 2,
                "message": f"{runs_path}: none of its {len(report.skipped)} record(s) could be "
                           "modeled; nothing was compared",
                "problems": [{"file": str(runs_path), "key": f"record {rid}", "value": None,
                              "rule": why, "fix": "correct the record as its rule says"}
                             for rid, why in report.skipped]}
        print(json.dumps(data, default=float))
        return code
    if quiet:
        return code
    console = Console(width=160)
    render_table(report, console)
    if report.cross_validation:
        render_cross_validation(report, console)
    render_ranking(report, console)
    if written is not None:
        console.print(f"fitted {len(report.fit.free)} parameters; wrote {written}")
        for line in _fit_side_effects(report):
            console.print(f"[yellow]note[/yellow]: {escape(line)}", highlight=False)
        if report.fit.at_bound:
            console.print(f"[yellow]at a bound of their physical range[/yellow]: "
                          f"{', '.join(report.fit.at_bound)} (the model misses something there)")
    return code
