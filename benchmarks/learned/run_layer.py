"""Learned searchers on the UniAP suite (layer strategies) against the proven optimum.

Two steps, because the exact side and the searchers may run on different machines:

* ``--exact``: for each instance the exact search (HiGHS, DP warm start) proves
  the optimum; its value and wall time go to ``exact_layer.json``;
* ``--searchers``: every searcher x seed runs once with the largest budget in
  a process pool; the value it had reached at each budget (from its trace,
  priced by the same cost model; the final plan re-priced by evaluate()) goes
  to ``runs_layer.json``;
* ``--report``: RESULTS_layer.md from both files.

Usage: python benchmarks/learned/run_layer.py --exact | --searchers [--workers N]
       [--budget 60] [--seeds 0 1 2] [--cpu-clock] | --report

``--cpu-clock``: budgets in CPU seconds of the run's process (one compute thread), so
that a loaded machine gives each run the compute of an idle core (as run_gdp.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import fmt_ratio, importable_without_install, machine_line, peak_rss_mib, worker_init  # noqa: E402

#: a subset of benchmarks/search's UniAP suite: every model once, both device
#: kinds, 8-32 GPUs; llama-7b on 1x8 V100 is the one whose optimum is not uniform
INSTANCES = [("bert-huge-32", "2x8-a100-40"), ("t5-large-32", "1x8-a100-40"),
             ("vit-huge-32", "4x8-v100-32"), ("swin-huge-32", "2x8-v100-32"),
             ("llama-7b", "1x8-v100-32"), ("llama-7b", "2x8-a100-40")]
SEARCHERS = ["random", "anneal", "dqn", "gdp"]
SEEDS = [0, 1, 2]
BUDGETS = [10.0, 60.0]


def _space(model: str, cluster: str):
    from autopar_opt.cost.params import default_params
    from autopar_opt.model_zoo.registry import build_model, get_cluster
    from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training

    # the same setting as benchmarks/search/run.py (UniAP suite)
    space = SearchSpace(zero_levels=(0, 1, 2, 3), recompute=(Recompute.none, Recompute.full),
                        schedules=(Schedule.one_f_one_b,), max_microbatches=32)
    cl = get_cluster(cluster)
    graph = build_model(model)
    training = Training(global_batch_size=32, seq_len=graph.seq_len,
                        dtype="fp16" if "V100" in cl.device.name else "bf16")
    return graph, cl, training, space, default_params()


def exact(out: Path, solver: str) -> None:
    from autopar_opt.search.engine import SearchOptions, run_search

    rows = []
    for model, cluster in INSTANCES:
        t0 = time.perf_counter()
        res = run_search(*_space(model, cluster), SearchOptions(solver=solver, time_limit_s=120))
        rows.append({"model": model, "cluster": cluster, "optimum": res.certificate.primal,
                     "lower_bound": res.certificate.lower_bound, "status": str(res.status(1e-3).value),
                     "solver": solver, "wall_s": time.perf_counter() - t0})
        print(rows[-1], flush=True)
    out.write_text(json.dumps({"machine": machine_line(), "rows": rows}, indent=2))


def _one(job: tuple) -> dict:
    importable_without_install()
    from autopar_opt.learn.base import run_searcher
    from autopar_opt.learn.space import LayerSpace

    model, cluster, name, seed, budget = job
    t0 = time.perf_counter()
    space = LayerSpace(*_space(model, cluster))
    prep = time.perf_counter() - t0
    res = run_searcher(name, space, budget, seed=seed)
    return {"model": model, "cluster": cluster, "searcher": name, "seed": seed,
            "prepare_s": prep, "wall_s": res.wall_time_s, "samples": res.samples,
            "value": res.value, "feasible": res.feasible,
            "at": {str(b): res.value_at(b) for b in BUDGETS},
            "trace": [p.to_dict() for p in res.trace], "info": res.info,
            "peak_rss_mib": peak_rss_mib()}


def _init(cpu_clock: bool) -> None:
    worker_init()
    if cpu_clock:
        from autopar_opt.learn.base import use_cpu_clock

        use_cpu_clock()


def searchers(out: Path, workers: int, budget: float, limit: int | None = None,
              seeds: list[int] = SEEDS, cpu_clock: bool = False) -> None:
    jobs = [(m, c, s, seed, budget) for m, c in INSTANCES[:limit] for s in SEARCHERS
            for seed in seeds]
    start = time.perf_counter()
    header = machine_line()
    with ProcessPoolExecutor(workers, initializer=_init, initargs=(cpu_clock,)) as pool:
        runs = list(pool.map(_one, jobs))
    out.write_text(json.dumps({"machine": header, "workers": workers, "budget_s": budget,
                               "seeds": seeds, "clock": "cpu" if cpu_clock else "wall",
                               "total_wall_s": time.perf_counter() - start, "runs": runs}, indent=1))


def report(exact_path: Path, runs_path: Path, out: Path) -> None:
    ex = json.loads(exact_path.read_text())
    rn = json.loads(runs_path.read_text())
    opt = {(r["model"], r["cluster"]): r for r in ex["rows"]}
    clock = ("budgets in CPU seconds of the run's process: each run gets an idle core's "
             "compute whatever the load" if rn.get("clock") == "cpu" else "wall-clock budgets")
    lines = ["# Learned searchers vs the proven optimum: UniAP suite (layer strategies)", "",
             f"Exact side (HiGHS with the DP warm start, whole search): {ex['machine']}.", "",
             "The instances are built through the Python API (`build_model`, the default "
             "runtime), as the searchers see them, not through a spec file as "
             "benchmarks/search builds them: a V100 instance there is priced with the scores its "
             "unfused attention keeps (spec/attention_rule.py), so its optimum differs.", "",
             f"Searchers: {rn['machine']}; {rn['workers']} runs in parallel, one thread each, "
             f"one {rn['budget_s']:.0f} s run per searcher and seed (values at 10 s read from "
             f"its trace; {clock}); 600 s budgets were not run.", "",
             "Ratio = value found / proven optimum (1.0000 = optimal), mean ± sd over seeds "
             f"{rn.get('seeds', SEEDS)} (one seed: its value). Every value is priced by the cost "
             "model; final plans re-priced by evaluate().",
             "Peak RSS is the largest of the worker processes that ran that searcher (a worker "
             "runs several jobs in turn, so it is an upper bound per run).",
             "", "| model | cluster | optimum s (time to prove) | searcher | ratio @10 s | "
             "ratio @60 s | samples in 60 s | peak RSS MiB |", "|---|---|---|---|---|---|---|---|"]
    for model, cluster in INSTANCES:
        e = opt[(model, cluster)]
        for name in SEARCHERS:
            runs = [r for r in rn["runs"] if (r["model"], r["cluster"], r["searcher"]) ==
                    (model, cluster, name)]
            ratio = {b: [r["at"][str(b)] / e["optimum"] if r["at"][str(b)] else None for r in runs]
                     for b in BUDGETS}
            samples = sum(r["samples"] for r in runs) / max(len(runs), 1)
            rss = max(r["peak_rss_mib"] for r in runs)
            lines.append(f"| {model} | {cluster} | {e['optimum']:.5g} ({e['wall_s']:.2f} s "
                         f"{e['status']}) | {name} | {fmt_ratio(ratio[10.0])} | "
                         f"{fmt_ratio(ratio[60.0])} | {samples:.0f} | {rss:.0f} |")
    out.write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--exact", action="store_true")
    ap.add_argument("--searchers", action="store_true")
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--solver", default="highs", help="exact step's backend (dp needs no MIP solver)")
    ap.add_argument("--budget", type=float, default=max(BUDGETS))
    ap.add_argument("--out", type=Path, default=HERE)
    ap.add_argument("--limit", type=int, default=None, help="first N instances only (smoke test)")
    ap.add_argument("--seeds", type=int, nargs="+", default=SEEDS)
    ap.add_argument("--cpu-clock", action="store_true", help="budgets in CPU seconds (see above)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.exact:
        if args.solver != "highs":
            importable_without_install()
        exact(args.out / f"exact_layer_{args.solver}.json", args.solver)
    if args.searchers:
        importable_without_install()
        searchers(args.out / "runs_layer.json", args.workers, args.budget, args.limit,
                  args.seeds, args.cpu_clock)
    if args.report:
        report(HERE / "exact_layer_highs.json", HERE / "runs_layer.json", HERE / "RESULTS_layer.md")


if __name__ == "__main__":
    main()
