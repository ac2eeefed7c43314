"""``autopar solve SPEC`` on a mixed fleet (a cluster of several groups; issue 34).

Runs :func:`~autopar_opt.search.mixed.run_fleet_search` inside the command's
time limit, writes ``plan.json`` (:mod:`autopar_opt.search.fleet_document`)
and the fleet report, and prints the summary: the plan's shape, where each
stage or class runs, every group alone, the certificate. Same exit codes as
``autopar solve``.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from autopar_opt.core.ranges import point_text
from autopar_opt.core.result import status_words
from autopar_opt.reports.formatting import (INTERVAL_GLOSS, alone_words, causal_mfu_note,
                                           fleet_idle_mfu_note, fmt_pct, has_sequence,
                                           tight_note, usable_note)
from autopar_opt.cli.budget import Budget
from autopar_opt.core.interrupts import InterruptGuard, SearchInterrupted, exit_code
from autopar_opt.core.streams import stdout_to_stderr
from autopar_opt.search.engine import SearchOptions

EXIT_CODES = {"optimal": 0, "feasible": 0, "infeasible": 3, "no_plan": 4}

#: Seconds kept from the search for writing plan.json and the report.
OUTPUT_RESERVE_S = 1.0


def unused_fleet_options(searcher, runnable_by: str | None, export_models: bool) -> list:
    """Options a fleet search does not take: refused with the fix, never dropped."""
    from autopar_opt.core.errors import SpecProblem
    from autopar_opt.core.files import COMMAND_LINE

    given = [("--searcher", getattr(searcher, "name", searcher), searcher is not None),
             # none asks for the free space, which is the one a fleet searches (QA round 10)
             ("--runnable-by", runnable_by,
              runnable_by is not None and runnable_by.strip().lower() != "none"),
             ("--export-models", True, export_models)]
    return [SpecProblem(COMMAND_LINE, option, value, "is not available for a cluster of several "
                        "groups (cluster.groups)", f"drop {option}, or solve one group's cluster")
            for option, value, on in given if on]


def fleet_solve_command(spec, spec_path: str, options: SearchOptions, budget: Budget,
                        out_dir: str | None, json_output: bool, quiet: bool) -> int:
    """Search the fleet of ``spec`` (``spec.fleet``), emit, return the exit code."""
    from autopar_opt.search.fleet_document import build_fleet_document
    from autopar_opt.search.mixed import run_fleet_search
    from autopar_opt.search.replicas import DEFAULT_SPLIT_PARTS, batch_quantum

    parts = DEFAULT_SPLIT_PARTS
    with InterruptGuard() as guard:
        options.should_stop, options.stop_signal = guard.should_stop, lambda: guard.signum
        options.time_limit_s = max(budget.remaining() - OUTPUT_RESERVE_S, 0.0)
        try:
            with stdout_to_stderr():      # solver chatter never on stdout (--json)
                result = run_fleet_search(spec.graph, spec.fleet, spec.training, spec.space,
                                          spec.cost_params, options, split_parts=parts)
        except SearchInterrupted as exc:  # outside the parts that return their incumbent
            from autopar_opt.cli.solve import stopped_before_a_result

            stopped_before_a_result(exc.signum)
        guard.defer()
        options.time_limit_s = budget.total_s
        doc = build_fleet_document(str(spec_path), spec.graph, spec.fleet, spec.training, spec.space,
                                   spec.cost_params, options, result,
                                   batch_quantum(spec.training.global_batch_size, parts))
        # the spec's own notices (the free per-layer space a fleet searches: target none),
        # as a plain solve says them (QA round 9: a fleet switched to it silently)
        doc["notices"] = list(spec.notices) + doc["notices"] + _why_no_plan(doc)
        doc["solver"]["timings"] = {"command_s": round(budget.elapsed(), 3)}
        if options.memory_budget is not None:
            doc["solver"]["memory_budget"] = options.memory_budget.describe()
        if guard.interrupted:
            doc["status"] = "interrupted"
        code = _emit(doc, out_dir, json_output, quiet)
        if not guard.interrupted:
            return code
        if quiet or json_output:     # no summary says it (QA round 36: exit 130, silent)
            from autopar_opt.cli.stopped import search_stopped_line

            print(search_stopped_line(guard.signum, doc["status"],
                                      Path(out_dir) / "plan.json" if out_dir else None,
                                      json_output), file=sys.stderr)
        return exit_code(guard.signum)


def _emit(doc: dict, out_dir: str | None, json_output: bool, quiet: bool) -> int:
    text = json.dumps(doc, indent=2)
    if out_dir:
        from autopar_opt.cli.errors import write_outputs
        from autopar_opt.reports.fleet import render_fleet_html

        write_outputs(out_dir, [("plan.json", text + "\n"), ("report.html", render_fleet_html(doc))])
    if json_output:
        sys.stdout.write(text + "\n")
    elif not quiet:
        print(summary(doc))
        if out_dir:
            print(f"  wrote {Path(out_dir) / 'plan.json'} and {Path(out_dir) / 'report.html'}")
    return EXIT_CODES.get(doc["status"], 0)


def _why_no_plan(doc: dict) -> list[str]:
    """Why a fleet search has no plan, from its configurations' own reasons (the least
    memory they need against what a device holds, a batch no split divides), as the plain
    solve's ``infeasibility`` says it (QA round 9: the summary said only "infeasible")."""
    if doc.get("plan") is not None:
        return []
    rows = (doc.get("certificate") or {}).get("configurations") or []
    reasons = list(dict.fromkeys(r.get("message") for r in rows if r.get("message")))
    if not reasons:
        return []
    status = doc.get("status")
    head = ("every configuration is proven infeasible" if status == "infeasible"
            else "no configuration found a plan")
    more = f" (and {len(reasons) - 2} other reasons in plan.json)" if len(reasons) > 2 else ""
    return [f"no plan: {head}; e.g. {'; '.join(reasons[:2])}{more}"]


def _fmt(x) -> str:
    return "-" if x is None else (x if isinstance(x, str) else f"{x:.6g}")


def summary(doc: dict) -> str:
    """The terminal summary of a fleet plan.json."""
    fl, cert, m = doc["fleet"], doc["certificate"], doc["metrics"]
    groups = " + ".join(f"{g['name']} {g['nodes']}x{g['gpus_per_node']} {g['device']}"
                        + (f" (memory set to {g['device_memory_gib']:g} GiB by its device_memory_gib)"
                           if g.get("device_memory_gib") else "") for g in fl["groups"])
    lines = [f"{doc['spec']['model']['name']} on {fl['name']} ({groups}): "
             f"{status_words(doc['status'], cert.get('gap'))}"]
    if m:
        lines.append(f"  iteration {point_text(m['iteration_time_s'])} s | "
                     f"{m['samples_per_s']:.2f} samples/s | "
                     + (f"{m['tokens_per_s']:.0f} tokens/s | " if has_sequence(doc) else "")
                     + f"MFU {fmt_pct(m['mfu'], 1)}"
                     f"{causal_mfu_note(m['mfu'], m.get('mfu_causal'))}"
                     f"{fleet_idle_mfu_note(m['mfu'], fl['groups'], doc['placement'])}")
        if m.get("interval"):
            lines.append(f"  {m['interval']['text']} {INTERVAL_GLOSS}")
        lines.append(f"  shape: {doc['shape']} ({doc['best_configuration']})")
        hbm = {g["name"]: g.get("hbm_gib") for g in fl["groups"]}
        for row in doc["placement"]:
            who = f"class {row['class']} (batch {row['batch']}) " if row["class"] is not None else ""
            lines.append(f"    {who}stage {row['index']} on {row['group']} ranks {row['first_rank']}-"
                         f"{row['last_rank']}: {row['layers']} layers {row['first_layer']}..{row['last_layer']}"
                         f" [{', '.join(row['strategies'])}]")
            # every layout, as the report lists them (the first 3 alone were listed: the
            # example fleet's h100 class runs 4, its one tp8 rc-full layer went unsaid)
            # each stage's memory, as a plain solve's summary says it (QA round 9: a class at
            # 79.7 of 80 GiB was said nowhere)
            if row.get("peak_memory_gib") is not None and row.get("capacity_gib"):
                lines.append(f"      peak memory {row['peak_memory_gib']:.1f}/"
                             f"{row['capacity_gib']:.1f} GiB"
                             f"{usable_note(row['capacity_gib'], hbm.get(row['group']))}"
                             f"{tight_note(row['peak_memory_gib'], row['capacity_gib'])}")
        if any("@g" in st for row in doc["placement"] for st in row["strategies"]):
            # QA round 9: the suffix was never explained
            legend = ", ".join(f"g{i} {g['name']}" for i, g in enumerate(fl["groups"]) if i)
            lines.append(f"    (@gK in a strategy: its layout is on fleet group K: {legend}; "
                         f"no suffix: {fl['groups'][0]['name']})")
        if doc["shape"] == "replicas":
            tier = (m.get("sync") or {}).get("tier") or {}
            # the bandwidth in effect, not the link's stated one (QA round 9: a 100 GB/s
            # link was drawn where the groups' NICs capped the traffic at 25)
            at = (f" at {tier['bandwidth_gb_per_s']:g} GB/s per GPU ({tier.get('name', 'path')}:"
                  " the slowest of the link and each group's NICs)"
                  if tier.get("bandwidth_gb_per_s") else "")
            lines.append(f"  cross-group gradient all-reduce: {m['sync_s']:.4f} s{at}")
    for h in doc["homogeneous"]:
        primal = _fmt(h["primal"]) if h["primal"] is not None else None
        lines.append(f"  {h['group']} alone: "
                     f"{alone_words(primal, h.get('statuses'), _fmt(h['lower_bound']))}")
    gap = cert["gap"]
    if isinstance(gap, float) and math.isfinite(gap):
        lines.append(f"  certificate: primal {_fmt(cert['primal'])} s, lower bound "
                     f"{_fmt(cert['lower_bound'])} s, gap {100 * gap:.3f}%")
    elif cert.get("primal") is not None:      # a plan without a finite bound (time limit)
        lines.append(f"  certificate: primal {_fmt(cert['primal'])} s, no lower bound proven "
                     f"({_fmt(cert['lower_bound'])} s): no optimality claim")
    elif _fmt(cert["lower_bound"]) == "-inf":    # no bound either (QA round 9: "-inf s")
        lines.append("  certificate: no plan, no lower bound proven")
    else:
        lines.append(f"  certificate: no plan, lower bound {_fmt(cert['lower_bound'])} s")
    rows = cert["configurations"]
    from collections import Counter
    counts = Counter(r["status"] for r in rows)
    lines.append(f"  {len(rows)} configurations ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))})")
    lines += [f"  note: {n}" for n in doc["notices"]]
    return "\n".join(lines)
