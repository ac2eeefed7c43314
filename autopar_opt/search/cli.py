"""``autopar solve``: search, certify, write plan.json (+ report.html), summarise.

Exit codes: 0 plan found, 2 bad input, 3 proven infeasible, 4 no plan within
the limits. Output files are written atomically (temporary file + rename) and
only after the search succeeded, so an error never leaves half-written output.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from autopar_opt.search.baselines import all_baselines
from autopar_opt.search.document import build_document
from autopar_opt.search.engine import SearchOptions, run_search

EXIT_CODES = {"optimal": 0, "feasible": 0, "infeasible": 3, "no_plan": 4}


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _fmt(x) -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    return f"{x:.6g}"


def _summary(doc: dict, console: Console) -> None:
    cert, m = doc["certificate"], doc["metrics"]
    console.print(f"[bold]{doc['spec']['model']['name']}[/] on {doc['spec']['cluster']['name']} "
                  f"({doc['spec']['cluster']['num_devices']} x {doc['spec']['cluster']['device']}): "
                  f"[bold]{doc['status']}[/]")
    if m:
        console.print(f"  iteration {m['iteration_time_s']:.4f} s | {m['samples_per_s']:.2f} samples/s | "
                      f"{m['tokens_per_s']:.0f} tokens/s | MFU {100 * m['mfu']:.1f}% | peak memory "
                      f"{max(m['peak_memory_gib']):.1f}/{m['memory_capacity_gib']:.1f} GiB")
        plan = doc["plan"]
        console.print(f"  plan: pp={plan['pp']} micro-batches={plan['microbatches']} "
                      f"schedule={plan['schedule']}")
    gap = cert["gap"]
    gap_text = f"{100 * gap:.3f}%" if isinstance(gap, float) else str(gap)
    if doc["status"] == "infeasible":
        console.print("  certificate: proven infeasible (every configuration; lower bound inf)")
    else:
        console.print(f"  certificate: primal {_fmt(cert['primal'])} s, lower bound "
                      f"{_fmt(cert['lower_bound'])} s, gap {gap_text}"
                      + ("" if cert["exact"] else " (no proof: bound missing)"))
    table = Table("pp", "c", "schedule", "status", "primal s", "bound s", "time s", box=None)
    for r in cert["configurations"][:12]:
        table.add_row(str(r["pp"]), str(r["microbatches"]), r["schedule"], r["status"],
                      _fmt(r["primal"]), _fmt(r["lower_bound"]), f"{r['time_s']:.2f}")
    console.print(table)
    if len(cert["configurations"]) > 12:
        console.print(f"  ... {len(cert['configurations']) - 12} more configurations in plan.json")
    if doc.get("infeasibility"):
        console.print(f"[red]{doc['infeasibility']['reason']}[/]")


def _peer_spec(spec_path: str):
    """The loaded peer spec when the file holds ``problem:`` (Piper/PaSE instance), else None."""
    from autopar_opt.spec.loader import read_mapping
    data = read_mapping(spec_path)
    if "problem" not in data:
        return None
    from autopar_opt.peers.spec import build_peer_spec
    return build_peer_spec(data, Path(spec_path))


def solve_command(spec_path: str, solver: str | None = None, time_limit_s: float | None = None,
                  gap: float | None = None, out_dir: str | None = None, json_output: bool = False,
                  quiet: bool = False, export_models: bool = False, warm_start: bool = True,
                  searcher=None, runnable_by: str | None = None) -> int:
    """Run the whole job for one spec file; returns the process exit code.

    ``runnable_by`` (megatron | torchtitan | deepspeed) restricts the search to
    the plans that framework can run (:mod:`autopar_opt.search.runnable`); a
    searcher's plan then does not warm-start it (it may not be runnable).

    ``searcher`` (an :class:`autopar_opt.learn.harness.SearcherHook`, passed
    in by the CLI so that the search never imports the searchers) runs first;
    its plan warm-starts the exact search, and the document gains a
    ``searcher`` entry (its value, the proven bound, its gap, the optimum when
    proven)."""
    from autopar_opt.spec import SpecError, load_spec
    from autopar_opt.solvers.base import SolverMismatch, SolverUnavailable

    err = Console(stderr=True)
    try:
        peer = _peer_spec(spec_path)
        if peer is not None:
            from autopar_opt.peers.cli import peer_solve_command
            return peer_solve_command(peer, solver, time_limit_s, gap, out_dir, json_output, quiet)
        spec = load_spec(spec_path)
    except SpecError as exc:
        err.print(str(exc), markup=False, highlight=False)
        return 2
    found = None
    if searcher is not None:
        found = searcher.run(spec, err)
        if found is None:
            return 2
    so = spec.solver
    options = SearchOptions(
        solver=solver or so.name, form=getattr(so, "form", "auto") or "auto",
        time_limit_s=time_limit_s if time_limit_s is not None else so.time_limit_s,
        rel_gap=gap if gap is not None else so.rel_gap, warm_start=warm_start,
        export_dir=Path(out_dir) / "models" if (out_dir and export_models) else None)
    show = not (quiet or json_output)
    try:
        with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                      TimeElapsedColumn(), console=err, disable=not show, transient=True) as bar:
            task = bar.add_task("searching", total=None)

            def progress(k, n, record, incumbent, bound):
                bar.update(task, total=n, completed=k,
                           description=f"config {k}/{n} ({record.config.label()}: {record.status}) "
                                       f"incumbent {_fmt(incumbent)} s bound {_fmt(bound)} s")

            if runnable_by:
                from autopar_opt.search.runnable import run_runnable_search

                result = run_runnable_search(runnable_by, spec.graph, spec.cluster, spec.training,
                                             spec.space, spec.cost_params, options, progress)
            else:
                result = run_search(spec.graph, spec.cluster, spec.training, spec.space,
                                    spec.cost_params, options, progress,
                                    incumbent=found.plan if found is not None and found.feasible
                                    else None)
    except (SolverUnavailable, SolverMismatch) as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        return 2
    baselines = all_baselines(spec.graph, spec.cluster, spec.training, spec.space,
                              spec.cost_params, spec.plan)
    doc = build_document(str(spec_path), spec.graph, spec.cluster, spec.training, spec.space,
                         spec.cost_params, options, result, baselines)
    if runnable_by:
        doc["search_space"]["runnable_by"] = runnable_by
    if found is not None:
        cert = result.certificate
        optimum = cert.primal if doc["status"] == "optimal" else None
        doc["searcher"] = searcher.block(found, cert.lower_bound, optimum)
    text = json.dumps(doc, indent=2)
    if out_dir:
        out = Path(out_dir)
        write_atomic(out / "plan.json", text + "\n")
        _write_report(doc, out / "report.html", err)
    if json_output:
        sys.stdout.write(text + "\n")
    elif not quiet:
        _summary(doc, Console())
        if "searcher" in doc:
            searcher.summary(doc["searcher"], Console())
        if out_dir:
            Console().print(f"  wrote {Path(out_dir) / 'plan.json'} and {Path(out_dir) / 'report.html'}")
    return EXIT_CODES[doc["status"]]


def _write_report(doc: dict, path: Path, err: Console) -> None:
    try:
        from autopar_opt.reports.render import write_report
    except ImportError as exc:  # reports are optional only while they are being built
        err.print(f"warning: HTML report not written ({exc})")
        return
    write_report(doc, str(path))
