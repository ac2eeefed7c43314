"""How the optima changed with cost model v2 (issue 10): a short re-record.

Re-runs the two large search instances and a few UniAP instances with the v2
model (``autopar_opt/cost``, shipped ``calibrated.yaml``) and compares them
with the v1 figures recorded in ``results.json`` at c796a1f (:data:`V1`; kept as
recorded). For each: the chosen plan (pp, micro-batches, per-layer strategy
mix), iteration time and its critical-path breakdown, peak memory against
capacity, and the search's wall time (whole search, shared machine: the load
average is written with the figures). Writes ``COST_MODEL_V2.md``.

Usage: ``python benchmarks/search/cost_model_v2.py``
"""

from __future__ import annotations

import collections
import json
import os
import time
from pathlib import Path

from autopar_opt.cost.params import default_params
from autopar_opt.model_zoo.registry import build_model, get_cluster
from autopar_opt.search.engine import SearchOptions, run_search
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training

#: The search space and large instances of ``run.py`` as recorded in ``results.json``
#: (kept here: ``run.py`` now drives the CLI through spec files, issue 18).
SPACE = SearchSpace(zero_levels=(0, 1, 2, 3), recompute=(Recompute.none, Recompute.full),
                    schedules=(Schedule.one_f_one_b,), max_microbatches=32)
LARGE = [("llama3-70b", "h100-1024", 512, 8192), ("gpt3-175b", "a100-80-3072", 1536, 2048)]


#: v1 figures (cost model v1) of these instances as recorded in ``results.json`` on
#: 2026-11-22 (git show c796a1f:benchmarks/search/results.json); issue 18 has since
#: re-recorded that file through the CLI under v2.
V1 = {("llama3-70b", "h100-1024"): ("pp=1 c=2", 88.8),
      ("gpt3-175b", "a100-80-3072"): ("pp=1 c=4", 237.0),
      ("llama-7b", "2x8-a100-40"): ("pp=1 c=1", 27.7),
      ("bert-huge-32", "4x8-v100-32"): ("pp=1 c=1", 152.0),
      ("t5-large-32", "2x8-a100-40"): ("pp=1 c=1", 155.0)}


def instance(model: str, cluster_name: str, batch: int, seq_len: int | None = None):
    """Zoo model, zoo cluster and training of one benchmark instance (fp16 on V100)."""
    cluster = get_cluster(cluster_name)
    dtype = "fp16" if "V100" in cluster.device.name else "bf16"
    graph = build_model(model, seq_len=seq_len) if seq_len else build_model(model)
    return graph, cluster, Training(global_batch_size=batch, seq_len=graph.seq_len, dtype=dtype)

HERE = Path(__file__).resolve().parent
UNIAP_SAMPLE = [("llama-7b", "2x8-a100-40", 32, None), ("bert-huge-32", "4x8-v100-32", 32, None),
                ("t5-large-32", "2x8-a100-40", 32, None)]


def _strategy_mix(plan) -> str:
    mix = collections.Counter(s.label() for st in plan.stages for s in st.strategies)
    return ", ".join(f"{n}x {lab}" for lab, n in mix.most_common(3))


def run(model: str, cluster: str, batch: int, seq) -> dict:
    graph, cl, training = instance(model, cluster, batch, seq)
    t0 = time.perf_counter()
    res = run_search(graph, cl, training, SPACE, default_params(),
                     SearchOptions(solver="highs", time_limit_s=120, rel_gap=1e-3))
    wall = time.perf_counter() - t0
    m = res.metrics
    return {"model": model, "cluster": cluster, "wall_s": wall, "gap": res.certificate.gap,
            "plan": f"pp={res.plan.pp} c={res.plan.microbatches}", "mix": _strategy_mix(res.plan),
            "samples_per_s": m.samples_per_s, "iteration_s": m.iteration_time_s, "mfu": m.mfu,
            "breakdown": m.breakdown, "peak_gib": max(m.peak_memory_gib),
            "capacity_gib": m.memory_capacity_gib,
            "memory_status": max(m.stages, key=lambda s: s.peak_memory_gib).memory_status}


def main() -> None:
    old = {k: {"plan": plan, "samples_per_s": tput} for k, (plan, tput) in V1.items()}
    load0 = os.getloadavg()[0]
    rows = [run(*job) for job in LARGE + UNIAP_SAMPLE]
    load1 = os.getloadavg()[0]
    lines = ["# Search optima under cost model v2 (issue 10)", "",
             f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on a shared 2-core machine "
             f"(load average {load0:.1f} before, {load1:.1f} after: wall times are inflated by "
             "other jobs). v1 figures: `results.json` as recorded on 2026-11-22 (at c796a1f).", "",
             "| instance | v1 plan | v1 samples/s | v2 plan | v2 strategy mix | v2 samples/s | v2 "
             "iteration s | exposed DP s | bubble s | peak / capacity GiB | gap | v2 search wall s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        o = old.get((r["model"], r["cluster"]), {})
        b = r["breakdown"]
        lines.append(
            f"| {r['model']} / {r['cluster']} | {o.get('plan', '-')} | "
            f"{o.get('samples_per_s', float('nan')):.3g} | {r['plan']} | {r['mix']} | "
            f"{r['samples_per_s']:.3g} | {r['iteration_s']:.4g} | {b['dp_comm_s']:.3g} | "
            f"{b['pipeline_bubble_s']:.3g} | {r['peak_gib']:.1f} / {r['capacity_gib']:.1f} "
            f"({r['memory_status']}) | {r['gap']:.1e} | {r['wall_s']:.1f} |")
    (HERE / "COST_MODEL_V2.json").write_text(json.dumps(rows, indent=1, default=float) + "\n")
    (HERE / "COST_MODEL_V2.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
