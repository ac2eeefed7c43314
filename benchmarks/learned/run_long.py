"""The 600 s budget of issue 14's benchmark, on the subset that fits (PARTIAL coverage).

Measured result (RESULTS_long.md): at ``nice -n 19`` on the shared 2-core machine a
600 s wall-clock run got only 7-48 CPU seconds, so this records what the searchers
find with that little compute, not the 600 s budget; read ``CPU s`` beside every row.

One run of ``--budget`` seconds (600 by default) per (searcher, instance, seed); the
value at 10 s, 60 s and 600 s is read from that run's best-so-far trace (the
searchers' schedules count samples, so a trace prefix is what a shorter budget
finds, up to timing noise). Full coverage (every searcher x the 6 UniAP and 10
placement instances x 3 seeds) is about 12 CPU-hours and does not fit the session;
this runner covers the instances named below and records its coverage.

* placement: ``OperatorGraphs_resnet50_inference`` (604 nodes; no searcher reached
  the optimum at 60 s, and the only instance where GDP beat annealing) x random,
  anneal, gdp x seeds 0, 1, 2 (the DQN acts on layer strategies only);
* layer strategies: ``llama-7b`` on ``2x8-a100-40`` (the UniAP instance with the
  largest 60 s gaps of the learned searchers) x random, anneal, dqn, gdp x seeds 0, 1, 2.

Every run also records the CPU seconds its worker got (``cpu_s``): on a shared
machine run at ``nice -n 19`` a 600 s wall budget can be much less CPU, and the
value at a wall budget must be read with that figure.

Usage (about 75 min wall with 3 workers; 21 runs of 600 s)::

    nice -n 19 .venv/bin/python benchmarks/learned/run_long.py --run --workers 3
    .venv/bin/python benchmarks/learned/run_long.py --exact --report

``--report`` re-prices every placement's best assignment with ``evaluate_placement``
(final layer plans are already priced by ``evaluate()`` in the worker) and writes
RESULTS_long.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import fmt_ratio, importable_without_install, machine_line, worker_init  # noqa: E402

PLACE = ["OperatorGraphs_resnet50_inference"]
LAYER = [("llama-7b", "2x8-a100-40")]
PLACE_SEARCHERS = ["random", "anneal", "gdp"]
LAYER_SEARCHERS = ["random", "anneal", "dqn", "gdp"]
SEEDS = [0, 1, 2]
BUDGETS = [10.0, 60.0, 600.0]
OUT = HERE / "runs_long.json"


def _timed(job: tuple) -> dict:
    """One run in a worker: the runner's own job function, plus CPU seconds and values
    at every budget of BUDGETS read from the trace."""
    importable_without_install()
    import run_layer
    import run_place

    cpu0, t0 = time.process_time(), time.perf_counter()
    if job[0] == "place":
        _, name, searcher, seed, budget = job
        r = run_place._searcher_job((name, searcher, seed, budget))
    else:
        _, model, cluster, searcher, seed, budget = job
        r = run_layer._one((model, cluster, searcher, seed, budget))
        r["instance"] = f"{model}/{cluster}"
    r["side"] = job[0]
    r["cpu_s"] = time.process_time() - cpu0
    r["job_wall_s"] = time.perf_counter() - t0
    r["at"] = {str(b): _value_at(r["trace"], b) for b in BUDGETS}
    return r


def _value_at(trace: list[dict], seconds: float) -> float | None:
    best = None
    for p in trace:
        if p["wall_s"] <= seconds and p["best"] is not None and p["best"] != float("inf"):
            best = p["best"]
    return best


def jobs(budget: float) -> list[tuple]:
    """Seed-major order: a run cut short still covers every searcher for the first seeds."""
    out: list[tuple] = []
    for seed in SEEDS:
        out += [("place", n, s, seed, budget) for n in PLACE for s in PLACE_SEARCHERS]
        out += [("layer", m, c, s, seed, budget) for m, c in LAYER for s in LAYER_SEARCHERS]
    return out


def run(workers: int, budget: float, limit: int | None = None) -> None:
    start = time.perf_counter()
    header = machine_line()
    todo = jobs(budget)[:limit]
    runs: list[dict] = []

    def write() -> None:       # after every finished job: a cut-off run keeps its results
        import os

        load = os.getloadavg()
        OUT.write_text(json.dumps({"machine": header, "workers": workers, "budget_s": budget,
                                   "planned": len(todo), "load_at_last_write": load,
                                   "total_wall_s": time.perf_counter() - start, "runs": runs},
                                  indent=1))

    with ProcessPoolExecutor(workers, initializer=worker_init) as pool:
        futures = [pool.submit(_timed, j) for j in todo]
        for f in as_completed(futures):
            runs.append(f.result())
            write()


def exact() -> None:
    """The proven optima with the CURRENT code (the cost model changed since
    exact_layer_highs.json was recorded, so that file's layer optima are stale)."""
    from autopar_opt.placement import load_public, solve_placement
    from autopar_opt.search.engine import SearchOptions, run_search

    import run_layer
    import run_place

    rows = []
    for name in PLACE:
        t0 = time.perf_counter()
        r = solve_placement(load_public(run_place.DATA / f"{name}.json"), objective="max-load",
                            contiguous=True)
        rows.append({"instance": name, "optimum": r.value, "lower_bound": r.lower_bound,
                     "status": r.status, "wall_s": time.perf_counter() - t0})
    for model, cluster in LAYER:
        t0 = time.perf_counter()
        res = run_search(*run_layer._space(model, cluster), SearchOptions(solver="highs", time_limit_s=120))
        rows.append({"instance": f"{model}/{cluster}", "optimum": res.certificate.primal,
                     "lower_bound": res.certificate.lower_bound,
                     "status": str(res.status(1e-3).value), "wall_s": time.perf_counter() - t0})
    (HERE / "exact_long.json").write_text(json.dumps({"machine": machine_line(), "rows": rows}, indent=2))


def _optima() -> dict:
    rows = json.loads((HERE / "exact_long.json").read_text())["rows"]
    assert all(r["status"] == "optimal" for r in rows), rows
    return {r["instance"]: r["optimum"] for r in rows}


def _reprice(runs: list[dict]) -> None:
    from autopar_opt.placement import evaluate_placement, load_public

    import run_place

    for r in runs:
        if r["side"] != "place" or r.get("assignment") is None:
            continue
        p = load_public(run_place.DATA / f"{r['instance']}.json")
        m = evaluate_placement(p, r["assignment"], contiguous=True)
        assert m.feasible and abs(m.value - r["table_value"]) <= 1e-9 * max(1.0, m.value), r["instance"]
        r["evaluated"] = m.value


def report() -> None:
    rn = json.loads(OUT.read_text())
    opt = _optima()
    _reprice(rn["runs"])
    planned = {(j[0], j[1] if j[0] == "place" else f"{j[1]}/{j[2]}", j[-3]) for j in jobs(rn["budget_s"])}
    cpu = [r["cpu_s"] for r in rn["runs"]]
    lines = ["# Learned searchers with a 600 s wall-clock budget: PARTIAL, CPU-starved", "",
             f"Machine: {rn['machine']}; {rn['workers']} runs in parallel at `nice -n 19`, one thread "
             f"each, sharing the 2 cores with other sessions (load average at the last write "
             f"{' '.join(f'{x:.2f}' for x in rn['load_at_last_write'])}). One {rn['budget_s']:.0f} s "
             "(wall clock) run per (searcher, instance, seed); the value at 10 s and 60 s is read "
             f"from its trace. {len(rn['runs'])} of {rn['planned']} planned runs finished.", "",
             f"**Read this first.** At `nice -n 19` on a machine at load 10-14 a run got only "
             f"{min(cpu):.0f}-{max(cpu):.0f} CPU seconds in its 600 s of wall clock (column "
             "`CPU s`), i.e. less compute than the 60 s runs of RESULTS_place.md / "
             "RESULTS_layer.md (one full core each on a 16-core machine). These rows are therefore "
             "NOT the 600 s budget of the issue: they are what a searcher finds with that "
             "little CPU (12-29 s on average per row). The 600 s column (about 12 CPU-hours "
             "for every searcher x 6 + 10 instances x 3 seeds) still needs a dedicated "
             "machine.", "",
             "Coverage: 1 of 10 placement instances x 3 searchers and 1 of 6 UniAP instances x 4 "
             "searchers, 3 seeds each. Optima proven with the current code (exact_long.json: the "
             "cost model changed after exact_layer_highs.json was recorded).", "",
             "Ratio = value / proven optimum, mean ± sd over the seeds that finished.", "",
             "| side | instance | searcher | seeds | ratio @10 s | ratio @60 s | ratio @600 s | "
             "samples | CPU s |", "|---|---|---|---|---|---|---|---|---|"]
    for side, inst, searcher in sorted(planned, key=lambda k: (k[0] != "place", k[1], k[2])):
        runs = [r for r in rn["runs"] if (r["side"], r["instance"], r["searcher"]) == (side, inst, searcher)]
        o = opt[inst]
        ratio = {b: [r["at"][str(b)] / o if r["at"][str(b)] else None for r in runs] for b in BUDGETS}
        samples = sum(r["samples"] for r in runs) / max(len(runs), 1)
        cpu = sum(r["cpu_s"] for r in runs) / max(len(runs), 1)
        lines.append(f"| {side} | {inst} | {searcher} | {len(runs)} | {fmt_ratio(ratio[10.0])} | "
                     f"{fmt_ratio(ratio[60.0])} | {fmt_ratio(ratio[600.0])} | {samples:.0f} | {cpu:.0f} |")
    (HERE / "RESULTS_long.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", action="store_true")
    ap.add_argument("--exact", action="store_true", help="proven optima with the current code")
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--budget", type=float, default=600.0)
    ap.add_argument("--limit", type=int, default=None, help="first N runs only (smoke test)")
    args = ap.parse_args()
    if args.run:
        importable_without_install()
        run(args.workers, args.budget, args.limit)
    if args.exact:
        exact()
    if args.report:
        report()


if __name__ == "__main__":
    main()
