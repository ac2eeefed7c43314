"""DP fallback benchmark: wall time vs layers and strategy-set size; zoo suites.

Run: ``.venv/bin/python benchmarks/dp/run.py [--quick] > benchmarks/dp/RESULTS.md``.
Prints a Markdown report: per-instance DP wall time (tables build excluded),
termination, max strategies per layer ``K`` and labels created; the log-log
slope of time vs layers per series and vs ``K`` between the two strategy
sets; then the UniAP suite and llama3-70b on h100-1024 if the zoo has them.
"""

from __future__ import annotations

import argparse
import math
import platform
import sys
import time

import numpy as np

from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import build_cost_tables
from autopar_opt.dp import solve_dp
from autopar_opt.model_zoo.transformer import decoder_lm
from autopar_opt.synthetic import random_chain
from autopar_opt.training import Recompute, Schedule, SearchSpace, Training

SMALL = SearchSpace(zero_levels=(0,), sequence_parallel=(False,), recompute=(Recompute.none,))
FULL = SearchSpace()
LIMIT_S = 20.0


def cluster(name: str):
    from autopar_opt.model_zoo.registry import get_cluster
    return get_cluster(name)


def run_one(graph, cl, training, space, pp, c, schedule=Schedule.one_f_one_b):
    tables = build_cost_tables(graph, cl, training, space, default_params(), pp, c, schedule)
    t0 = time.perf_counter()
    res = solve_dp(tables, LIMIT_S)
    wall = time.perf_counter() - t0
    k = max(len(s) for s in tables.strategies)
    return wall, res, k


def slope(xs, ys) -> float:
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def chain_series(sizes) -> None:
    print("## Chains: DP time vs layers (2x8-a100-40, pp=4, c=8, 1F1B, batch 64)\n")
    print("| series | space | layers | K | DP s | termination | primal s |")
    print("|---|---|---:|---:|---:|---|---:|")
    cl = cluster("2x8-a100-40")
    times: dict[tuple[str, str], list[float]] = {}
    ks: dict[tuple[str, str], int] = {}
    for series in ("decoder_lm", "random_chain"):
        for sname, space in (("small", SMALL), ("full", FULL)):
            for n in sizes:
                if series == "decoder_lm":
                    g = decoder_lm(f"gpt{n}", n - 2, 2048, 2048, 16, 8192, 50257)
                    tr = Training(global_batch_size=64, seq_len=2048)
                else:
                    g, tr = random_chain(n, n), Training(global_batch_size=64, seq_len=1024)
                wall, res, k = run_one(g, cl, tr, space, 4, 8)
                times.setdefault((series, sname), []).append(wall)
                ks[(series, sname)] = k
                print(f"| {series} | {sname} | {n} | {k} | {wall:.3f} | {res.termination.value} | "
                      f"{res.primal if res.primal is None else f'{res.primal:.5f}'} |")
                sys.stdout.flush()
    print("\n### Growth exponents (log-log slope)\n")
    for key, ts in times.items():
        print(f"- time vs layers, {key[0]} / {key[1]} space (K={ks[key]}): **{slope(sizes, ts):.2f}**")
    for series in ("decoder_lm", "random_chain"):
        ka, kb = ks[(series, "small")], ks[(series, "full")]
        ex = [math.log(b / a) / math.log(kb / ka)
              for a, b in zip(times[(series, "small")], times[(series, "full")])]
        print(f"- time vs strategies, {series} (K {ka} -> {kb}), per size: "
              f"{', '.join(f'{e:.2f}' for e in ex)}; median **{float(np.median(ex)):.2f}**")
    print()


def zoo_suite() -> None:
    try:
        from autopar_opt.model_zoo.registry import build_model, list_models
    except ImportError:
        print("(zoo registry missing: suite skipped)\n")
        return
    names = {m.name for m in list_models()}
    print("## UniAP suite (full space, 1F1B, batch 64, c=8)\n")
    print("| model | cluster | pp | layers | K | DP s | termination | primal s |")
    print("|---|---|---:|---:|---:|---:|---|---:|")
    for model in ("bert-huge-32", "t5-large-32", "vit-huge-32", "swin-huge-32", "llama-7b"):
        if model not in names:
            print(f"| {model} | - | - | - | - | - | not in zoo | - |")
            continue
        g = build_model(model)
        for cname in ("1x8-a100-40", "4x8-v100-32"):
            cl = cluster(cname)
            pps = (1,) if not g.is_chain() else (1, 4)
            for pp in pps:
                tr = Training(global_batch_size=64, seq_len=g.seq_len)
                wall, res, k = run_one(g, cl, tr, FULL, pp, 8)
                print(f"| {model} | {cname} | {pp} | {len(g.layers)} | {k} | {wall:.3f} | "
                      f"{res.termination.value} | {res.primal if res.primal is None else f'{res.primal:.4f}'} |")
                sys.stdout.flush()
    print()


def large_suite() -> None:
    try:
        from autopar_opt.model_zoo.registry import build_model
        g = build_model("llama3-70b")
        cl = cluster("h100-1024")
    except Exception as exc:  # noqa: BLE001 - report what is missing and go on
        print(f"(llama3-70b / h100-1024 unavailable: {exc})\n")
        return
    print("## llama3-70b on h100-1024 (full space, 1F1B, batch 1024)\n")
    print("| pp | c | layers | K | DP s | termination | primal s |")
    print("|---:|---:|---:|---:|---:|---|---:|")
    for pp, c in ((8, 32), (16, 64)):
        tr = Training(global_batch_size=1024, seq_len=g.seq_len)
        wall, res, k = run_one(g, cl, tr, FULL, pp, c)
        print(f"| {pp} | {c} | {len(g.layers)} | {k} | {wall:.3f} | {res.termination.value} | "
              f"{res.primal if res.primal is None else f'{res.primal:.4f}'} |")
        sys.stdout.flush()
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="sizes 32..128 only, no zoo suites")
    args = ap.parse_args()
    sizes = [32, 64, 128] if args.quick else [32, 64, 128, 256, 512]
    print("# DP fallback benchmark\n")
    print(f"Machine: {platform.machine()}, Python {platform.python_version()}, "
          f"time limit {LIMIT_S:.0f} s per solve; DP wall time excludes building the tables.\n")
    chain_series(sizes)
    if not args.quick:
        zoo_suite()
        large_suite()


if __name__ == "__main__":
    main()
