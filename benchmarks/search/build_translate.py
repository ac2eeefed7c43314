"""Build + translate of the MILP per configuration, timed robustly (min of repeats).

``python benchmarks/search/build_translate.py [--code DIR] [--repeats 5]`` runs the
HiGHS search on every UniAP instance of ``run.py`` once, keeps the configurations
the MIP solved, and for each one times, as the minimum of ``--repeats`` runs of
the process's CPU time (single-threaded work: on an idle machine it is the wall
time, and on a shared one it is not inflated by other processes): the matrix built on a structure-cache miss
(a fresh ``DirectBuilder``), refilled on a hit (the same builder again), and the
hand-over to HiGHS (``highs._load``: options, ``passModel``). ``--code DIR``
imports autopar_opt from another checkout (an A/B of two versions on the same
machine). Prints one JSON line per instance, then a summary line; about 3 min
on an idle 2-core machine.
"""
import argparse
import json
import os
import statistics
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--code", default=None, help="a checkout to import autopar_opt from")
ap.add_argument("--repeats", type=int, default=5)
ap.add_argument("--only", default=None)
args = ap.parse_args()
if args.code:
    sys.path.insert(0, args.code)

from autopar_opt.cost.params import default_params  # noqa: E402
from autopar_opt.cost.tables import build_cost_tables  # noqa: E402
from autopar_opt.formulations.direct import DirectBuilder  # noqa: E402
from autopar_opt.search.engine import SearchOptions, run_search  # noqa: E402
from autopar_opt.model_zoo.registry import build_model, get_cluster  # noqa: E402
from autopar_opt.solvers import highs  # noqa: E402
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training  # noqa: E402

#: The UniAP suite of run.py (its specs: global batch 32, the models' sequence lengths).
UNIAP_MODELS = ["bert-huge-32", "t5-large-32", "vit-huge-32", "swin-huge-32", "llama-7b"]
UNIAP_CLUSTERS = ["1x8-a100-40", "2x8-a100-40", "4x8-a100-40", "1x8-v100-32", "2x8-v100-32",
                  "4x8-v100-32"]
UNIAP_BATCH = 32
SPACE = SearchSpace(zero_levels=(0, 1, 2, 3), recompute=(Recompute.none, Recompute.full),
                    schedules=(Schedule.one_f_one_b,), max_microbatches=32)


def instance(model: str, cluster_name: str, batch: int):
    cluster = get_cluster(cluster_name)
    dtype = "fp16" if "V100" in cluster.device.name else "bf16"
    graph = build_model(model)
    return graph, cluster, Training(global_batch_size=batch, seq_len=graph.seq_len, dtype=dtype)


def best(fn, repeats: int) -> float:
    out = []
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        out.append(time.process_time() - t0)
    return min(out)


def main() -> None:
    import autopar_opt
    params, load0, rows = default_params(), os.getloadavg()[0], []
    for model in UNIAP_MODELS:
        for cl in UNIAP_CLUSTERS:
            if args.only and args.only not in model:
                continue
            graph, cluster, training = instance(model, cl, UNIAP_BATCH)
            res = run_search(graph, cluster, training, SPACE, params,
                             SearchOptions(solver="highs", time_limit_s=60, rel_gap=1e-3))
            for rec in res.certificate.configurations:
                if "build" not in rec.timings:
                    continue
                cfg = rec.config
                tables = build_cost_tables(graph, cluster, training, SPACE, params, cfg.pp,
                                           cfg.microbatches, cfg.schedule)
                builder = DirectBuilder(symmetry=False)
                matrix = builder.build(tables).matrix
                miss = best(lambda: DirectBuilder(symmetry=False).build(tables), args.repeats)
                hit = best(lambda: builder.build(tables), args.repeats)
                translate = best(lambda: highs._load(matrix, 60.0, 1e-3, False, {}), args.repeats)
                rows.append({"model": model, "cluster": cl, "pp": cfg.pp, "c": cfg.microbatches,
                             "rows": matrix.num_rows, "cols": matrix.num_cols, "nnz": int(matrix.A.nnz),
                             "miss_s": round(miss, 5), "hit_s": round(hit, 5),
                             "translate_s": round(translate, 5),
                             "miss+translate_s": round(miss + translate, 5)})
                print(json.dumps(rows[-1]), flush=True)
    worst = max(r["miss+translate_s"] for r in rows)
    print(json.dumps({"code": os.path.dirname(os.path.dirname(autopar_opt.__file__)),
                      "configs": len(rows), "repeats": args.repeats,
                      "median_miss+translate_s": round(statistics.median(r["miss+translate_s"] for r in rows), 5),
                      "max_miss+translate_s": round(worst, 5),
                      "median_hit_s": round(statistics.median(r["hit_s"] for r in rows), 5),
                      "load_avg_start": load0, "load_avg_end": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
