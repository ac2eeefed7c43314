"""A/B of the search on the same machine, interleaved: ``python benchmarks/search/ab.py CODE_DIR``
imports autopar_opt from CODE_DIR (a checkout, or a ``pip install --target`` of an older
commit) and prints one JSON line: wall time, split and result of four UniAP instances."""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from autopar_opt.cost.params import default_params
from autopar_opt.model_zoo.registry import build_model, get_cluster
from autopar_opt.search.engine import SearchOptions, run_search
from autopar_opt.ir.training import Recompute, Schedule, SearchSpace, Training
import autopar_opt.formulations.direct  # noqa: F401  (import cost outside the timing)
SPACE = SearchSpace(zero_levels=(0, 1, 2, 3), recompute=(Recompute.none, Recompute.full),
                    schedules=(Schedule.one_f_one_b,), max_microbatches=32)
out = []
for model, cl in [("llama-7b", "2x8-a100-40"), ("t5-large-32", "1x8-a100-40"), ("llama-7b", "1x8-v100-32"), ("vit-huge-32", "4x8-a100-40")]:
    cluster = get_cluster(cl)
    graph = build_model(model)
    training = Training(global_batch_size=32, seq_len=graph.seq_len, dtype="fp16" if "V100" in cluster.device.name else "bf16")
    t0 = time.perf_counter()
    r = run_search(graph, cluster, training, SPACE, default_params(), SearchOptions(time_limit_s=60, rel_gap=1e-3))
    wall = time.perf_counter() - t0
    split = {}
    for rec in r.certificate.configurations:
        for k, v in rec.timings.items():
            split[k] = split.get(k, 0.0) + v
    solved = sum(1 for rec in r.certificate.configurations if rec.timings)
    out.append({"model": model, "cluster": cl, "wall_s": round(wall, 3), "prepare_s": round(r.prepare_s, 3),
                "status": str(getattr(r.status(1e-3), "value", r.status(1e-3))), "primal": r.certificate.primal,
                "gap": r.certificate.gap, "solved_configs": solved,
                "build+translate_per_solved_config_s": round((split.get("build", 0) + split.get("translate", 0)) / max(solved, 1), 4),
                **{k: round(v, 3) for k, v in split.items()}})
print(json.dumps({"code": sys.argv[1], "rows": out}))
