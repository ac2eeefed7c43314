"""Search benchmark (issue 3): UniAP suite and two large instances.

For each instance: wall time of the whole search (cost tables, bounds, model
building, translation, solving), the split of that time, the global gap, the
plan's throughput and its ratio to the best uniform Megatron-style plan and
to pure data parallelism (all priced by evaluate()). Writes RESULTS.md and
results.json next to this file.

Time split keys: ``tables+bounds`` (cost tables and analytic bound of every
configuration), ``dp_warm`` (the DP warm start), ``build`` (the MILP matrix),
``translate`` (passing it to HiGHS), ``solve`` (HiGHS); the rest of the wall
time is re-pricing plans with evaluate() and bookkeeping.

Usage: python benchmarks/search/run.py [--solver highs] [--only NAME] [--large]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import time
from pathlib import Path

from autopar_opt.cost.params import default_params
from autopar_opt.model_zoo.registry import build_model, get_cluster
from autopar_opt.search.baselines import best_uniform, pure_data_parallel
from autopar_opt.search.engine import SearchOptions, run_search
from autopar_opt.training import Recompute, Schedule, SearchSpace, Training

HERE = Path(__file__).resolve().parent
UNIAP_MODELS = ["bert-huge-32", "t5-large-32", "vit-huge-32", "swin-huge-32", "llama-7b"]
UNIAP_CLUSTERS = ["1x8-a100-40", "2x8-a100-40", "4x8-a100-40", "1x8-v100-32", "2x8-v100-32", "4x8-v100-32"]
#: UniAP-like setting: global batch 32 (UniAP Sec. 5 uses mini-batches of this order),
#: the models' default sequence lengths, mixed precision (fp16 on V100, bf16 on A100).
UNIAP_BATCH = 32
SPACE = SearchSpace(zero_levels=(0, 1, 2, 3), recompute=(Recompute.none, Recompute.full),
                    schedules=(Schedule.one_f_one_b,), max_microbatches=32)
LARGE = [("llama3-70b", "h100-1024", 512, 8192), ("gpt3-175b", "a100-80-3072", 1536, 2048)]


def instance(model: str, cluster_name: str, batch: int, seq_len: int | None = None):
    cluster = get_cluster(cluster_name)
    dtype = "fp16" if "V100" in cluster.device.name else "bf16"
    graph = build_model(model, seq_len=seq_len) if seq_len else build_model(model)
    training = Training(global_batch_size=batch, seq_len=graph.seq_len, dtype=dtype)
    return graph, cluster, training


def run_one(model: str, cluster_name: str, batch: int, seq_len, solver: str, limit: float) -> dict:
    graph, cluster, training = instance(model, cluster_name, batch, seq_len)
    params = default_params()
    options = SearchOptions(solver=solver, time_limit_s=limit, rel_gap=1e-3)
    t0 = time.perf_counter()
    result = run_search(graph, cluster, training, SPACE, params, options)
    wall = time.perf_counter() - t0
    split: dict[str, float] = {"tables+bounds": result.prepare_s}
    for rec in result.certificate.configurations:
        for k, v in rec.timings.items():
            split[k] = split.get(k, 0.0) + v
    per_config = [rec.timings.get("build", 0.0) + rec.timings.get("translate", 0.0)
                  for rec in result.certificate.configurations if "build" in rec.timings]
    dp = pure_data_parallel(graph, cluster, training, SPACE, params)
    uni = best_uniform(graph, cluster, training, SPACE, params)
    tput = result.metrics.samples_per_s if result.metrics else None
    ratio = lambda b: (tput / b.metrics.samples_per_s) if (tput and b.metrics) else None
    cert = result.certificate
    statuses: dict[str, int] = {}
    for rec in cert.configurations:
        statuses[rec.status] = statuses.get(rec.status, 0) + 1
    return {"model": model, "cluster": cluster_name, "batch": batch, "wall_s": wall,
            "status": result.status(1e-3), "gap": cert.gap, "primal_s": cert.primal,
            "lower_bound_s": cert.lower_bound, "configs": len(cert.configurations),
            "statuses": statuses, "time_split_s": split, "build_translate_s": per_config,
            "samples_per_s": tput, "vs_uniform": ratio(uni), "vs_pure_dp": ratio(dp),
            "uniform_note": uni.note, "pure_dp_note": dp.note,
            "plan": (f"pp={result.plan.pp} c={result.plan.microbatches}" if result.plan else None)}


def fmt(x, spec=".3g"):
    return "-" if x is None else format(x, spec)


def write_results(rows: list[dict], solver: str, path: Path, run: dict) -> None:
    lines = [f"# Search benchmark ({solver})", "",
             f"Machine: {platform.processor() or platform.machine()}, {platform.python_version()}; "
             f"run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
             f"`{run['command']}`: {run['wall_s']:.1f} s wall, peak RSS {run['peak_rss_mib']:.0f} MiB; "
             f"load average (1 min) {run['load_start']:.2f} at start, {run['load_end']:.2f} at end "
             "(2 cores, shared with other work when above ~1).", "",
             "`build+translate` is the MILP's construction (the cached structure refilled, or built "
             "on a cache miss) plus its hand-over to HiGHS, per configuration the MIP solved "
             "(mean / max).", "",
             "| model | cluster | status | gap | wall s | configs (status counts) | time split s | "
             "build+translate s per solved config | plan | samples/s | vs uniform | vs pure DP |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        split = ", ".join(f"{k} {v:.2f}" for k, v in sorted(r["time_split_s"].items()))
        counts = ", ".join(f"{k} {v}" for k, v in sorted(r["statuses"].items()))
        bt = r["build_translate_s"]
        per = f"{statistics.mean(bt):.4f} / {max(bt):.4f}" if bt else "-"
        lines.append(f"| {r['model']} | {r['cluster']} | {r['status']} | {fmt(r['gap'], '.2e')} | "
                     f"{r['wall_s']:.2f} | {r['configs']} ({counts}) | {split} | {per} | {r['plan']} | "
                     f"{fmt(r['samples_per_s'])} | {fmt(r['vs_uniform'], '.3f')} | "
                     f"{fmt(r['vs_pure_dp'], '.3f')} |")
    every = [x for r in rows for x in r["build_translate_s"]]
    if every:
        lines += ["", f"build+translate per solved configuration, all instances: {len(every)} solves, "
                  f"median {statistics.median(every):.4f} s, max {max(every):.4f} s "
                  f"(target <= 0.05 s)."]
    uniap = [r for r in rows if r["cluster"] in UNIAP_CLUSTERS]
    if uniap:
        walls = [r["wall_s"] for r in uniap]
        lines += ["", f"UniAP suite: {len(uniap)} instances; median wall {statistics.median(walls):.2f} s, "
                  f"max {max(walls):.2f} s; max gap {max(r['gap'] for r in uniap):.2e}; "
                  f"instances with gap <= 0.1%: {sum(r['gap'] <= 1e-3 for r in uniap)}/{len(uniap)}; "
                  f"min ratio vs uniform {min((r['vs_uniform'] or 0) for r in uniap):.3f}"]
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--solver", default="highs")
    ap.add_argument("--only", default=None)
    ap.add_argument("--large", action="store_true", help="also the 1024/3072-GPU instances")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--out", default=None, help="file name under benchmarks/search/ "
                    "(default RESULTS.md, RESULTS_<solver>.md for another solver)")
    args = ap.parse_args()
    started, load_start = time.perf_counter(), os.getloadavg()[0]
    jobs = [(m, c, UNIAP_BATCH, None) for m in UNIAP_MODELS for c in UNIAP_CLUSTERS]
    if args.large:
        jobs += LARGE
    rows = []
    for model, cl, batch, seq in jobs:
        if args.only and args.only not in model:
            continue
        row = run_one(model, cl, batch, seq, args.solver, args.time_limit)
        print(json.dumps({k: row[k] for k in ("model", "cluster", "status", "gap", "wall_s", "plan",
                                               "vs_uniform", "vs_pure_dp")}), flush=True)
        rows.append(row)
    suffix = "" if args.solver == "highs" else f"_{args.solver}"
    out = HERE / (args.out or f"RESULTS{suffix}.md")
    out.with_name(out.stem.replace("RESULTS", "results") + ".json").write_text(
        json.dumps(rows, indent=1, default=str) + "\n")
    run = {"command": "python " + " ".join(["benchmarks/search/run.py"] + sys.argv[1:]),
           "wall_s": time.perf_counter() - started, "load_start": load_start,
           "load_end": os.getloadavg()[0],
           "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    write_results(rows, args.solver, out, run)


if __name__ == "__main__":
    main()
