"""Run a sweep: reuse stored rows, solve the rest on an engine, assemble the document.

Data flows one way: :class:`Sweep` → tasks → rows (store) → priced entries →
answers → the capacity document (plain JSON), from which the CSV, the console
summary and ``capacity.html`` are all produced.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from autopar_opt import __version__
from autopar_opt.capacity.answers import answers, invalid_entry, price_scenario
from autopar_opt.capacity.engines import run_engine
from autopar_opt.capacity.store import ResultStore
from autopar_opt.capacity.sweep import Sweep
from autopar_opt.capacity.worker import empty_row, restamp

#: progress(done, total, rows so far by scenario id)
ProgressFn = Callable[[int, int, dict[str, dict[str, Any]]], None]


@dataclass
class SweepRun:
    """Rows of every scenario (by id) and how they were obtained."""

    rows: dict[str, dict[str, Any]]
    reused: list[str] = field(default_factory=list)
    computed: list[str] = field(default_factory=list)
    #: scenarios whose search raised (not stored: the next run retries them)
    errors: list[str] = field(default_factory=list)
    #: scenarios the sweep's time limit did not reach (not stored either)
    not_run: list[str] = field(default_factory=list)
    wall_time_s: float = 0.0


def run_sweep(sweep: Sweep, store: ResultStore, engine: str = "local", workers: int | None = None,
              progress: ProgressFn | None = None, deadline: float | None = None,
              run: SweepRun | None = None) -> SweepRun:
    """Every scenario's row: from the store when its key is there, else solved and stored.

    Rows are stored one by one as they finish, so an interrupted run keeps
    what it finished (the interrupt propagates after the engine stopped).
    ``deadline`` (``time.time()``): scenarios it does not reach are ``not_run``, and
    one whose search it cut is stored only when still proven (optimal or infeasible):
    a later run with more time solves the others again. A scenario whose search ended
    with no plan and nothing proven (``no_plan``: its own time limit came first) is not
    stored either: nothing was decided, so the next run searches it again.
    ``run``: filled in place when given, so a caller stopped by an interrupt still holds
    the rows that finished (:func:`mark_interrupted`).
    """
    start = time.perf_counter()
    stored = store.get_many(s.key for s in sweep.scenarios)
    run = run if run is not None else SweepRun({})
    rows = run.rows
    todo = []
    for s in sweep.scenarios:
        if s.key in stored:
            rows[s.id] = restamp(stored[s.key], s.id, str(sweep.path))
            run.reused.append(s.id)
        else:
            todo.append({"id": s.id, "key": s.key, "data": s.data, "path": str(sweep.path),
                         "deadline": deadline})
    total = len(sweep.scenarios)
    if progress:
        progress(len(rows), total, rows)
    for row in run_engine(engine, todo, workers):
        if row["status"] == "error":
            run.errors.append(row["id"])
        elif row.get("not_run"):
            run.not_run.append(row["id"])
        elif row["status"] == "no_plan":
            # undecided (its time limit came first, under whatever load the machine had):
            # not a result to serve to later runs (QA round 35: stored, a sweep resumed on
            # an idle machine answered "no plan" again without searching)
            row = {**row, "reason": f"{row['reason']} (not stored: the next run of the sweep "
                                    "searches it again)"}
        elif not row.get("time_limited") or row["status"] in ("optimal", "infeasible"):
            store.put(row["key"], row)
        rows[row["id"]] = row
        if not row.get("not_run"):
            run.computed.append(row["id"])
        if progress:
            progress(len(rows), total, rows)
    run.wall_time_s = time.perf_counter() - start
    return run


def mark_interrupted(sweep: Sweep, run: SweepRun, signal_name: str) -> None:
    """Give every scenario of ``sweep`` that has no row in ``run`` (a sweep stopped by a
    signal) a not-run row saying so, listed in ``run.not_run``: the capacity document
    of the scenarios that finished is then written as after a ``--time-limit``, its
    answers calling the others "not solved" (nothing proven of them)."""
    for s in sweep.scenarios:
        if s.id not in run.rows:
            row = empty_row({"id": s.id, "key": s.key}, "no_plan",
                            f"not run: the sweep was stopped by {signal_name} before this "
                            "scenario finished; run the same command again to resume "
                            "(finished scenarios are stored)")
            row["not_run"] = True
            run.rows[s.id] = row
            run.not_run.append(s.id)


def entries_of(sweep: Sweep, rows: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Priced entries of the scenarios that have a row, and the rows of the combinations
    the spec's rules reject (status ``invalid``: :func:`invalid_entry`), in the axes' order."""
    by_id = {s.id: price_scenario(s, rows[s.id], sweep.planning)
             for s in sweep.scenarios if s.id in rows}
    by_id.update((s.id, invalid_entry(s, sweep.planning)) for s in sweep.invalid)
    order = sweep.order or [s.id for s in sweep.scenarios]
    return [by_id[sid] for sid in order if sid in by_id]


def build_capacity_document(sweep: Sweep, run: SweepRun, engine: str, workers: int | None,
                            store_path: str) -> dict[str, Any]:
    """The ``--json`` document: scenarios with intervals, answers with proofs, run facts."""
    entries = entries_of(sweep, run.rows)
    p = sweep.planning
    return {
        "schema_version": 1,
        "tool": {"name": "autopar-opt", "version": __version__},
        "created_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "sweep": {"path": str(sweep.path), "description": sweep.description,
                  "axes": sweep.axis_names, "scenarios": len(sweep.scenarios) + len(sweep.invalid),
                  "invalid": len(sweep.invalid)},
        "planning": {"token_budget": p.token_budget, "deadline_days": p.deadline_days,
                     "target_tokens_per_s": p.target_tokens_per_s,
                     "prices": {"currency": p.prices.currency,
                                "per_gpu_hour": dict(p.prices.per_gpu_hour),
                                "source": p.prices.source}},
        "scenarios": entries,
        "answers": answers(entries, p),
        "run": {"engine": engine, "workers": workers, "store": store_path,
                "reused": len(run.reused), "computed": len(run.computed),
                "not_run": list(run.not_run)},
        "wall_time_s": round(run.wall_time_s, 3),
    }


CSV_COLUMNS = ["id", "device", "gpus", "nodes", "global_batch_size", "seq_len", "status", "primal",
               "lower_bound", "gap", "time_to_train_days_lo", "time_to_train_days_hi", "cost_lo",
               "cost_hi", "throughput_tokens_per_s_lo", "throughput_tokens_per_s_hi", "meets",
               "mfu", "peak_memory_gib", "pp", "microbatches", "strategies", "reason", "notes",
               "model_error_days_lo", "model_error_days_hi", "key"]


def csv_text(doc: dict[str, Any]) -> str:
    """All scenarios of ``doc`` as CSV (one row each, intervals as lo/hi columns;
    ``model_error_days_*``: the 80% interval of the plan's time to train from
    comparable published runs, :func:`autopar_opt.capacity.answers.model_error`;
    ``notes``: what the sweep changed or assumed for the scenario, joined by "; ", as the
    terminal and capacity.html say it: QA round 35, a partial node's wiring, a sequence
    past the model's positions, the degrees left out, were in no column)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for e in doc["scenarios"]:
        plan = e["plan"] or {}
        row = {k: e.get(k) for k in CSV_COLUMNS if k in e}
        for name, short in (("time_to_train_days", "time_to_train_days"), ("cost", "cost"),
                            ("throughput_tokens_per_s", "throughput_tokens_per_s")):
            row[f"{short}_lo"], row[f"{short}_hi"] = e[name]
        row.update(pp=plan.get("pp"), microbatches=plan.get("microbatches"),
                   strategies=plan.get("strategies"), notes="; ".join(e.get("notes") or []))
        err = e.get("model_error") or {}
        row["model_error_days_lo"], row["model_error_days_hi"] = \
            err.get("time_to_train_days", (None, None))
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return buf.getvalue()
