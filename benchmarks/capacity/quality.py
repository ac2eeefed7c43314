"""Plan quality against experts: our plan vs the published configuration, both under our model.

For every record of the vendored calibration file (``tests/data/published_runs.yaml``,
a copy of the shared calibration records) that the model can express, the
search solves the space that contains the published configuration on that
cluster: the published pipeline degree and micro-batch count (so the
published plan is one point of the space), every tensor-parallel degree
inside a node plus the published one, sequence parallelism on/off, ZeRO 0, 1, 3
(and the published level),
recomputation none/selective/full, the published context-parallel degree,
free per-layer strategies and free contiguous stage boundaries. Both plans
are priced by :func:`autopar_opt.cost.evaluate.evaluate` with the calibrated
parameters (cost model v2: one parameter set; the record's runtime, e.g. Megatron-LM,
lives in its training section).

Reported: ``ratio = throughput(our plan) / throughput(published plan)``
(same global batch, so the inverse ratio of iteration times). It must be
>= 1.0 wherever the published plan lies in the space and fits in memory
under the model. A record is left out, with its reason, when the model
cannot express it (calibration's reasons; interleaved 1F1B, which the search
does not cover; a published strategy outside the enumerated strategies).

Usage: ``nice -n 5 .venv/bin/python benchmarks/capacity/quality.py [--time-limit S] [--only ID...]``;
writes ``benchmarks/capacity/QUALITY.md`` and ``quality.json``.
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ProcessPoolExecutor
import os
import statistics
import subprocess
import time
from pathlib import Path

from autopar_opt.calibration.calibrate import model_records
from autopar_opt.calibration.reading import load_run_file
from autopar_opt.cost.params import default_params
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.search import SearchOptions, run_search
from autopar_opt.ir.strategies import divisors, enumerate_strategies
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace

HERE = Path(__file__).resolve().parent
RUNS = HERE.parent.parent / "tests" / "data" / "published_runs.yaml"


def space_for(run) -> SearchSpace:
    """The space around the published configuration (contains it by construction)."""
    s, gpn = run.strategy, run.cluster.gpus_per_node
    tps = sorted(set(divisors(gpn)) | {s.tp})
    return SearchSpace(pp_degrees=(run.plan.pp,), tp_degrees=tuple(tps),
                       cp_degrees=tuple(sorted({1, s.cp})), sequence_parallel=(False, True),
                       zero_levels=tuple(sorted({0, 1, 3, s.zero})),
                       recompute=(Recompute.none, Recompute.selective, Recompute.full),
                       schedules=(Schedule.one_f_one_b,), microbatches=(run.plan.microbatches,),
                       max_microbatches=max(64, run.plan.microbatches), tp_within_node=s.tp <= gpn)


def outside_space(run, space: SearchSpace) -> str | None:
    """Why the published plan is not a point of ``space`` (None when it is)."""
    if run.plan.schedule is not Schedule.one_f_one_b or run.plan.vp_chunks > 1:
        return f"schedule {run.plan.schedule.value} with {run.plan.vp_chunks} chunks is not searched"
    d = run.cluster.num_devices // run.plan.pp
    b = run.training.global_batch_size // run.plan.microbatches
    layers = {layer.name: layer for layer in run.graph.layers}
    for stage in run.plan.stages:
        for name, strat in zip(stage.layers, stage.strategies):
            options = enumerate_strategies(layers[name], d, b, space, run.cluster.gpus_per_node,
                                           run.training.seq_len, autocast=run.training.autocast)
            if strat not in options:
                return f"layer {name}: published strategy {strat.label()} is not enumerated"
    return None


def compare_record(run, params, time_limit_s: float) -> dict:
    """Solve the record's space; our plan vs the published plan under the same model."""
    space = space_for(run)
    why = outside_space(run, space)
    if why:
        return {"id": run.id, "skipped": why}
    pub = evaluate(run.plan, run.graph, run.cluster, run.training, params)
    result = run_search(run.graph, run.cluster, run.training, space, params,
                        SearchOptions(time_limit_s=time_limit_s, rel_gap=1e-4))
    out = {"id": run.id, "gpus": run.cluster.num_devices, "device": run.cluster.device.name,
           "published": {"label": f"pp{run.plan.pp} c{run.plan.microbatches} "
                                  f"{run.strategy.label()}", "iteration_s": pub.iteration_time_s,
                         "fits": pub.feasible, "peak_gib": max(pub.peak_memory_gib)},
           "search_s": round(result.wall_time_s, 2), "gap": result.certificate.gap,
           "status": result.status(1e-4)}
    if result.plan is None:
        out["ours"] = None
        out["note"] = "; ".join(result.infeasible_reasons[:2]) or "no plan within the time limit"
        return out
    ours = result.metrics
    strategies: dict[str, int] = {}
    for stage in result.plan.stages:
        for strat in stage.strategies:
            strategies[strat.label()] = strategies.get(strat.label(), 0) + 1
    out["ours"] = {"iteration_s": ours.iteration_time_s, "mfu": ours.mfu,
                   "peak_gib": max(ours.peak_memory_gib),
                   "stage_layers": [len(st.layers) for st in result.plan.stages],
                   "strategies": strategies}
    out["ratio"] = pub.iteration_time_s / ours.iteration_time_s
    return out


def _fit_stat(compared: list[dict], stat) -> str:
    """``stat`` of the ratios whose published plan fits in memory under the model."""
    fit = [r["ratio"] for r in compared if r["published"]["fits"]]
    return f"{stat(fit):.4f}" if fit else "-"


def _row(r: dict) -> str:
    ours = r["ours"]
    mix = ", ".join(f"{k} x{v}" for k, v in sorted(ours["strategies"].items(), key=lambda kv: -kv[1]))
    fits = "" if r["published"]["fits"] else " (does not fit)"
    return (f"| {r['id']} | {r['gpus']} x {r['device']} | {r['published']['label']}{fits} | "
            f"{r['ratio']:.4f} | {100 * r['gap']:.3f}% | {r['status']} | "
            f"stages {ours['stage_layers']}; {mix} |")


def _commit() -> str:
    """The repository's commit (the cost model the ratios were priced under)."""
    root = HERE.parent.parent
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return (head or "unknown") + (" (with local changes)" if dirty else "")


def write_markdown(results: list[dict], elapsed: float, path: Path,
                   load: tuple[float, float]) -> None:
    compared = [r for r in results if r.get("ratio") is not None]
    skipped = [r for r in results if "skipped" in r]
    no_plan = [r for r in results if "skipped" not in r and r.get("ours") is None]
    ratios = sorted(r["ratio"] for r in compared)
    below = [r for r in compared if r["ratio"] < 1.0 - 1e-9 and r["published"]["fits"]]
    unfit = [r for r in compared if not r["published"]["fits"]]
    unfit_below = [r for r in unfit if r["ratio"] < 1.0 - 1e-9]
    lines = ["# Plan quality against experts (published configurations)", "",
             f"Records: `tests/data/published_runs.yaml`; {len(compared)} compared, "
             f"{len(skipped)} outside what the search expresses, {len(no_plan)} without a plan. "
             f"Generated by `nice -n 5 .venv/bin/python benchmarks/capacity/quality.py` in {elapsed:.0f} s on a shared "
             f"2-core machine (load average at the start / end: {load[0]:.1f} / {load[1]:.1f}), "
             f"at commit {_commit()} (cost model as of that commit).", "",
             "ratio = predicted throughput of our plan / predicted throughput of the published "
             "configuration, both under our calibrated cost model, same cluster, same global batch, "
             "same pipeline degree and micro-batch count (the space contains the published plan).", ""]
    if ratios:
        q = statistics.quantiles(ratios, n=10) if len(ratios) > 1 else ratios
        lines += [f"**min {ratios[0]:.4f}**, median {statistics.median(ratios):.4f}, p10 {q[0]:.4f}, "
                  f"p90 {q[-1]:.4f}, max {ratios[-1]:.4f}; below 1.0: **{len(below)}** "
                  f"among the {len(compared) - len(unfit)} whose published plan fits in memory under "
                  f"the model (their min {_fit_stat(compared, min)}, median "
                  f"{_fit_stat(compared, statistics.median)}; "
                  f"{', '.join(r['id'] for r in below) or 'none'}). The target (>= 1.0) "
                  f"holds only there: {len(unfit)} published plans exceed the memory the model "
                  f"allows (marked 'does not fit'), so our plan, which must fit, may be slower; "
                  f"{len(unfit_below)} of them are ({', '.join(r['id'] for r in unfit_below) or 'none'}).",
                  ""]
    lines += ["## Largest gains", "", "| record | cluster | published | ratio | gap | status | our plan |",
              "|---|---|---|---|---|---|---|"]
    lines += [_row(r) for r in sorted(compared, key=lambda r: -r["ratio"])[:10]]
    lines += ["", "## All compared records", "", "| record | cluster | published | ratio | gap | status | our plan |",
              "|---|---|---|---|---|---|---|"]
    lines += [_row(r) for r in compared]
    if no_plan:
        lines += ["", "## No plan", ""] + [f"- {r['id']}: {r.get('note')}" for r in no_plan]
    lines += ["", "## Not compared", ""] + [f"- {r['id']}: {r['skipped']}" for r in skipped]
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--time-limit", type=float, default=30.0, help="search time limit per record, s")
    ap.add_argument("--workers", type=int, default=2, help="records solved in parallel")
    ap.add_argument("--only", nargs="*", default=None, help="record ids to run")
    args = ap.parse_args()
    t0, load_start = time.perf_counter(), os.getloadavg()[0]
    runs, unmodelable = model_records(load_run_file(RUNS))
    params = default_params()      # cost model v2: one calibrated set; runtimes live in training
    results = [{"id": rid, "skipped": f"not modelled: {why}"} for rid, why in unmodelable]
    todo = []
    for run in runs:
        if args.only and run.id not in args.only:
            continue
        if run.kind != "end_to_end" or run.plan is None:
            results.append({"id": run.id, "skipped": "per-layer measurement (no whole plan)"})
            continue
        todo.append(run)
    with ProcessPoolExecutor(args.workers) as pool:
        futures = [pool.submit(compare_record, run, params, args.time_limit)
                   for run in todo]
        for future in futures:
            r = future.result()
            results.append(r)
            print(r["id"], r.get("ratio", r.get("skipped", r.get("note"))), flush=True)
    elapsed = time.perf_counter() - t0
    (HERE / "quality.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    write_markdown(results, elapsed, HERE / "QUALITY.md", (load_start, os.getloadavg()[0]))


if __name__ == "__main__":
    main()
