"""Do the symmetry-breaking cuts speed up HiGHS? (issue: symmetry of identical layers)

For one model x cluster of the search benchmark, solves every outer
configuration that the search would solve (analytic bound below the best
uniform plan of all configurations, so a superset of what the search solves)
on the direct MILP matrix, warm-started from the configuration's best
uniform plan as in the search, with and without the cuts of
``families.symmetry_order``, and prints the HiGHS time, status and
objective of each (minimum over ``--repeats`` runs; the machine is shared,
so only large differences mean anything).

Usage: python benchmarks/symmetry_cuts.py [--model llama-7b] [--cluster 2x8-a100-40]
       [--gap 1e-3] [--repeats 2] [--time-limit 60] [--max-configs 6]
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import time
from pathlib import Path

from autopar_opt.cost.params import default_params
from autopar_opt.cost.tables import build_cost_tables
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.formulations.direct import DirectBuilder
from autopar_opt.search.baselines import best_uniform_for_config
from autopar_opt.search.bounds import analytic_lower_bound
from autopar_opt.search.configs import outer_configs
from autopar_opt.solvers.registry import get_backend



def _search_benchmark():
    """benchmarks/search/run.py (same instances and search space)."""
    spec = importlib.util.spec_from_file_location(
        "search_run", Path(__file__).resolve().parent / "search" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def solve(builder: DirectBuilder, tables, warm, limit: float, gap: float) -> tuple[float, str, float]:
    form = builder.build(tables)
    if warm is not None:
        form.set_warm_start(warm)
    t0 = time.perf_counter()
    res = get_backend("highs").solve_model(form.matrix, form.problem_class, time_limit_s=limit,
                                           rel_gap=gap, warm_start=warm is not None)
    wall = time.perf_counter() - t0
    return res.timings.get("solve", wall), res.termination.value, res.primal or math.nan


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama-7b")
    ap.add_argument("--cluster", default="2x8-a100-40")
    ap.add_argument("--gap", type=float, default=1e-3)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--max-configs", type=int, default=6)
    ap.add_argument("--all", action="store_true",
                    help="also configurations whose bound reaches the best uniform plan")
    args = ap.parse_args()
    search_run = _search_benchmark()
    graph, cluster, training = search_run.instance(args.model, args.cluster, search_run.UNIAP_BATCH)
    space = search_run.SPACE
    params = default_params()
    rows = []
    for cfg in outer_configs(graph, cluster, training, space):
        t = build_cost_tables(graph, cluster, training, space, params, cfg.pp, cfg.microbatches,
                              cfg.schedule)
        bound = analytic_lower_bound(t)
        if math.isinf(bound.value) or any(not s for s in t.strategies) or t.pp > t.num_layers:
            continue
        warm = best_uniform_for_config(t)
        value = evaluate(warm, graph, cluster, training, params).iteration_time_s if warm else math.inf
        rows.append((bound.value, cfg, t, warm, value))
    incumbent = min((r[4] for r in rows), default=math.inf)
    rows.sort(key=lambda r: r[0])
    rows = [r for r in rows if args.all or r[0] < incumbent][:args.max_configs]
    print(f"{args.model} on {args.cluster}, rel_gap {args.gap}, {len(rows)} configurations")
    print("| config | cuts | HiGHS s (min) | status | objective s |")
    print("|---|---|---|---|---|")
    total = {True: 0.0, False: 0.0}
    for _, cfg, t, warm, _ in rows:
        for sym in (False, True):
            runs = [solve(DirectBuilder(symmetry=sym), t, warm, args.time_limit, args.gap)
                    for _ in range(args.repeats)]
            best = min(runs, key=lambda r: r[0])
            total[sym] += best[0]
            print(f"| {cfg.label()} | {'on' if sym else 'off'} | {best[0]:.2f} | {best[1]} | "
                  f"{best[2]:.6g} |", flush=True)
    print(f"\ntotal HiGHS time: cuts off {total[False]:.2f} s, cuts on {total[True]:.2f} s")


if __name__ == "__main__":
    main()
