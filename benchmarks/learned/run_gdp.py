"""GDP as published (issue 32): the per-node decoder from scratch, pre-trained zero-shot and
fine-tuned, against the exact optimum, its bound, METIS, the experts, the greedy split and
annealing, on the ten public instances and two large operator graphs; one machine, one
clock, one cost model (evaluate_placement prices every reported plan).

Steps (each resumable; results in this folder):

* ``--exact``: ``solve_placement`` (contiguous max-load) per instance, the baselines
  (METIS best-of-24 and its first partition, greedy topological split, single device,
  experts where published) and the block decoder's ceiling -> ``exact_gdp.json``;
* ``--pretrain``: one policy per seed, batch-trained on the TRAIN graphs for
  ``--pretrain-s`` seconds -> ``policies/`` (not committed) and ``pretrain_gdp.json``;
* ``--runs``: every (instance, mode, seed) job, one run at the largest budget of its
  tier (values at 10/60/300 s read from its trace): ``scratch`` (gdp, fresh policy),
  ``finetune`` (the seed's pre-trained policy: zero-shot plans, then PPO on the graph),
  ``anneal`` -> ``runs_gdp.json`` (appended after every job);
* ``--report`` -> ``RESULTS_gdp.md``.

Generalisation split: the policy is pre-trained on TRAIN (five public instances and seven
zoo graphs) and placed on TEST (the other five public instances) and the two large graphs,
none of which it saw.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import ROOT, machine_line, peak_rss_mib, worker_init  # noqa: E402

PUBLIC_DIR = ROOT / "tests" / "data" / "placement" / "throughput"
EXPERT_DIR = ROOT / "tests" / "data" / "placement" / "experts"
TRAIN = ["LayerGraphs_bert24_inference", "LayerGraphs_resnet50_inference",
         "OperatorGraphs_bert_l-3_inference", "OperatorGraphs_resnet50_inference",
         "LayerGraphs_bert24_training"]
TEST = ["OperatorGraphs_bert_l-6_inference", "OperatorGraphs_bert_l-3_training",
        "LayerGraphs_resnet50_training", "OperatorGraphs_resnet50_training",
        "OperatorGraphs_bert_l-6_training"]
PUBLIC = TRAIN + TEST
A100 = [{"type": "A100-40GB", "count": 8}]
#: the large unseen graphs (zoo builders; published shapes)
LARGE = {
    "gnmt8_52k": ("gnmt", {}, A100),
    "transformer_xl_10k": ("transformer_xl", dict(layers=18, hidden=1024, seq=384, mem_len=384,
                                                  segments=16, batch=8, training=True), A100),
}
#: zoo graphs in the pre-training set (none of them is placed in the benchmark)
ZOO_TRAIN = {
    "inception_v3_layer_training": ("inception_v3", dict(granularity="layer"), 4, True),
    "inception_v3_op": ("inception_v3", {}, 6, False),
    "transformer6_training": ("transformer", dict(layers=6, hidden=512, seq=256, training=True), 3, None),
    "transformer12": ("transformer", dict(layers=12), 4, None),
    "transformer_xl4_training": ("transformer_xl", dict(layers=4, hidden=512, mem_len=128, seq=128,
                                                        segments=2, training=True), 2, None),
    "gnmt2_training": ("gnmt", dict(layers=2, seq=6, hidden=512), 3, None),
    "gnmt4": ("gnmt", dict(layers=4, seq=4, training=False), 4, None),
}
SEEDS = [0, 1, 2]
BUDGETS = [10.0, 60.0, 300.0]


def problem(name: str):
    """A public instance or a large zoo graph as a PlacementProblem."""
    if name in LARGE:
        from autopar_opt.placement.importers.zoo import build_op_graph

        zoo, kw, devices = LARGE[name]
        p = build_op_graph(zoo, devices, **kw)
        p.name = name
        return p
    from autopar_opt.placement import load_public

    return load_public(PUBLIC_DIR / f"{name}.json")


def train_problems() -> list:
    from autopar_opt.model_zoo.op_graphs import OP_GRAPHS
    from autopar_opt.placement.importers.zoo import op_problem

    out = [problem(n) for n in TRAIN]
    for name, (zoo, kw, count, backward) in ZOO_TRAIN.items():
        g = OP_GRAPHS[zoo](**kw)
        if backward:
            g = g.with_backward()
        out.append(op_problem(g, [{"type": "A100-40GB", "count": count}], name))
    return out


# ------------------------------------------------------------------ experts
def gnmt_expert(p) -> "object":
    """GNMT's published model parallelism (Wu et al. 2016, §3 and Fig. 1): encoder layer i
    and decoder layer i on GPU i, the bottom layer's two directions on GPUs 0 and 1 ("the
    bottom bi-directional encoder layers compute in parallel"), the attention with the
    bottom decoder layer that queries it (GPU 0), the softmax "partitioned and placed on
    multiple GPUs" (here: step t's softmax on GPU t mod 8, the op graph having one softmax
    op per step); backward ops with their forward op."""
    import numpy as np

    def gpu(name: str) -> int:
        base = name[:-5] if name.endswith(".grad") else name
        part = base.split(".")
        if part[0] in ("enc", "dec") and part[1].startswith("l") and part[1][1:].isdigit():
            layer = int(part[1][1:])
            if part[0] == "enc" and layer == 0 and part[2] == "bw":
                return 1
            return layer
        if part[0] == "softmax" and part[1] != "kernel":
            return int(part[-1][1:]) % 8
        if part[0] == "softmax":
            return 7
        return 0                                   # embeddings, attention

    return np.array([gpu(n) for n in p.node_names], dtype=np.int64)


def experts(name: str, p) -> dict:
    """name -> assignment of the published expert placements available for ``name``."""
    out = {}
    short = name.replace("LayerGraphs_", "")
    path = EXPERT_DIR / f"{short}.json"
    if name.startswith("LayerGraphs_") and path.exists():
        from autopar_opt.placement.importers.public_json import load_expert_split

        out["human expert (Tarnawski et al. 2020 data)"] = load_expert_split(path, p)
    if name.startswith("gnmt"):
        out["human expert (GNMT, Wu et al. 2016: layer per GPU)"] = gnmt_expert(p)
    return out


# ------------------------------------------------------------------ steps
def greedy_baselines(p) -> dict:
    """The greedy topological split and everything on one device (placement.heuristics),
    priced by the evaluator (None when infeasible)."""
    from autopar_opt.placement import evaluate_placement
    from autopar_opt.placement.condense import condense
    from autopar_opt.placement.heuristics import single_device, topo_split

    cond = condense(p, fuse_cycles=True)
    out = {}
    for key, fn in (("greedy_split", topo_split), ("single_device", single_device)):
        unit_dev = fn(cond)[1]
        m = None if unit_dev is None else evaluate_placement(p, cond.expand(unit_dev),
                                                             contiguous=True)
        out[key] = m.value if m is not None and m.feasible else None
    return out


def refresh_baselines(out: Path) -> None:
    """Recompute the greedy baselines of every row of ``exact_gdp.json`` (solve_placement's
    small-lattice path skips them, so its details do not always carry them)."""
    doc = json.loads(out.read_text())
    for name, row in doc["rows"].items():
        row.update(greedy_baselines(problem(name)))
        print(name, row["greedy_split"], row["single_device"], flush=True)
    out.write_text(json.dumps(doc, indent=1, default=float))


def exact_step(out: Path, time_limit: float) -> None:
    from autopar_opt.learn.block_ceiling import block_ceiling
    from autopar_opt.learn.partition_baseline import metis_placement
    from autopar_opt.learn.placement_space import PlacementSpace
    from autopar_opt.placement import evaluate_placement, solve_placement

    doc = json.loads(out.read_text()) if out.exists() else {"rows": {}}
    doc["machine"] = machine_line()
    for name in PUBLIC + list(LARGE):
        if name in doc["rows"]:
            continue
        t0 = time.perf_counter()
        p = problem(name)
        build_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        r = solve_placement(p, objective="max-load", contiguous=True, time_limit_s=time_limit)
        row = {"nodes": p.num_nodes, "devices": p.num_devices, "build_s": build_s,
               "value": r.value, "lower_bound": r.lower_bound, "status": r.status,
               "method": r.method, "wall_s": time.perf_counter() - t0,
               "units": r.details.get("units"), **greedy_baselines(p)}
        t0 = time.perf_counter()
        mr = metis_placement(p, contiguous=True)
        row["metis"] = {"best": mr.value, "first": mr.first_value,
                        "first_feasible": mr.first_feasible,
                        "first_violations": mr.first_violations[:2],
                        "feasible_tries": mr.feasible_tries, "tries": mr.tries,
                        "wall_s": time.perf_counter() - t0}
        try:
            row["block_ceiling"] = block_ceiling(PlacementSpace(p, True))
        except ValueError as exc:
            row["block_ceiling"], row["block_ceiling_note"] = None, str(exc)
        row["experts"] = {}
        for label, assign in experts(name, p).items():
            m = evaluate_placement(p, assign, objective="max-load", contiguous=True)
            row["experts"][label] = {"value": m.value, "contiguous": m.contiguous,
                                     "violations": m.violations[:2]}
        doc["rows"][name] = row
        print(name, {k: row[k] for k in ("value", "lower_bound", "status", "wall_s")}, flush=True)
        out.write_text(json.dumps(doc, indent=1, default=float))


def pretrain_step(out: Path, seconds: float, seeds: list[int] = SEEDS,
                  cpu_clock: bool = False) -> None:
    from autopar_opt.learn.gdp_place import pretrain
    from autopar_opt.learn.policy_file import save_policy

    doc = json.loads(out.read_text()) if out.exists() else {"seeds": {}}
    doc["machine"] = machine_line()
    doc["clock"] = "cpu" if cpu_clock else "wall"
    (HERE / "policies").mkdir(exist_ok=True)
    probs = train_problems()
    for seed in seeds:
        if str(seed) in doc["seeds"]:
            continue
        agent, summary = pretrain(probs, budget_s=seconds, seed=seed)
        save_policy(agent.policy, HERE / "policies" / f"gdp_seed{seed}.pt", meta=summary)
        summary["peak_rss_mib"] = peak_rss_mib()
        doc["seeds"][str(seed)] = summary
        out.write_text(json.dumps(doc, indent=1))
        print("pretrained", seed, summary["iterations"], summary["wall_s"], flush=True)


def placement_run(name: str, searcher: str, seed: int, budget: float, marks, **opts) -> dict:
    """One searcher run on instance ``name`` (its contiguous placement space), as a record:
    build time, the searcher's value and trace, its values at the ``marks`` (seconds), the
    time of its first feasible plan, peak memory and load. run_hp.py records its runs so too."""
    from autopar_opt.learn.base import run_searcher
    from autopar_opt.learn.placement_space import PlacementSpace

    t0 = time.perf_counter()
    space = PlacementSpace(problem(name), True)
    build_s = time.perf_counter() - t0
    res = run_searcher(searcher, space, budget, seed=seed, **opts)
    first = next((pt for pt in res.trace if pt.best < float("inf")), None)
    return {"instance": name, "seed": seed, "budget_s": budget,
            "build_s": build_s, "wall_s": res.wall_time_s, "samples": res.samples,
            "value": res.value, "feasible": res.feasible,
            "at": {str(b): res.value_at(b) for b in marks},
            "first_feasible_s": first.wall_s if first else None,
            "trace": [pt.to_dict() for pt in res.trace], "info": res.info,
            "peak_rss_mib": peak_rss_mib(), "load": os.getloadavg()[0]}


def _job(job: tuple) -> dict:
    name, mode, seed, budget = job
    opts = {}
    if mode == "finetune":
        from autopar_opt.learn.policy_file import load_policy

        opts["policy"] = load_policy(HERE / "policies" / f"gdp_seed{seed}.pt")[0]
    return {"mode": mode, **placement_run(name, "anneal" if mode == "anneal" else "gdp", seed,
                                          budget, [b for b in BUDGETS if b <= budget], **opts)}


def jobs(full: bool, seeds: list[int] = SEEDS, large_budget: float = 300.0,
         large_long_seeds: tuple[int, ...] | None = None,
         long_seeds: tuple[int, ...] = tuple(SEEDS)) -> list[tuple]:
    """Every (instance, mode, seed, budget) run the record holds.

    Each run's trace gives its value at 10 and 60 s, so the 300 s tier (``full``) replaces the
    60 s run of a (public instance, mode, seed) instead of adding one, for the seeds in
    ``long_seeds`` (the others keep 60 s runs): GDP from scratch on all ten public instances
    (the five it pre-trains on too: from scratch it has never seen them), fine-tuned on the
    five TEST ones. The large graphs run at ``large_budget`` for the seeds in
    ``large_long_seeds`` (default: ``long_seeds`` when ``full``) and at 60 s for the others (a
    300 s run of each costs 5 CPU-minutes per graph and mode); annealing, the baseline, runs
    60 s on them as on the public graphs."""
    long_b, short_b = (300.0, 60.0)
    if large_long_seeds is None:
        large_long_seeds = long_seeds if full else ()
    out = []
    for seed in seeds:
        for name in PUBLIC:
            long = full and seed in long_seeds
            out.append((name, "scratch", seed, long_b if long else short_b))
            out.append((name, "anneal", seed, short_b))
        for name in TEST:
            out.append((name, "finetune", seed, long_b if long else short_b))
        for name in LARGE:
            for mode in ("scratch", "finetune"):
                out.append((name, mode, seed,
                            large_budget if seed in large_long_seeds else short_b))
            out.append((name, "anneal", seed, short_b))
    return out


def _init(cpu_clock: bool) -> None:
    worker_init()
    if cpu_clock:
        from autopar_opt.learn.base import use_cpu_clock

        use_cpu_clock()


def runs_step(out: Path, workers: int, full: bool, seeds: list[int] = SEEDS,
              large_budget: float = 300.0, cpu_clock: bool = False,
              long_seeds: tuple[int, ...] = tuple(SEEDS)) -> None:
    doc = json.loads(out.read_text()) if out.exists() else {"runs": []}
    doc.setdefault("machines", []).append(machine_line())
    clock = "cpu" if cpu_clock else "wall"
    if doc.setdefault("clock", clock) != clock:
        raise SystemExit(f"{out} holds runs on the {doc['clock']} clock; this run asks for {clock}")
    done = {(r["instance"], r["mode"], r["seed"], r["budget_s"]) for r in doc["runs"]}
    todo = [j for j in jobs(full, seeds, large_budget, long_seeds=long_seeds) if j not in done]
    todo.sort(key=lambda j: -j[3])                 # long jobs first
    # one process per job: peak memory is per run, not the worker's history
    with ProcessPoolExecutor(workers, initializer=_init, initargs=(cpu_clock,),
                             max_tasks_per_child=1) as pool:
        futures = [pool.submit(_job, j) for j in todo]
        for f in as_completed(futures):
            doc["runs"].append(f.result())
            out.write_text(json.dumps(doc, indent=1))
            r = doc["runs"][-1]
            print(r["instance"], r["mode"], r["seed"], r["value"], flush=True)


def _scaling_job(seq: int) -> dict:
    """One GDP iteration on GNMT unrolled over ``seq`` steps: time and memory per phase."""
    import resource

    import torch

    from autopar_opt.learn.gdp_place import PlaceAgent, PlacePPO, PlaceTask
    from autopar_opt.placement.importers.zoo import build_op_graph

    p = build_op_graph("gnmt", A100, seq=seq)
    t0 = time.perf_counter()
    task = PlaceTask(p, True)
    prep = time.perf_counter() - t0
    agent = PlaceAgent(seed=0, ppo=PlacePPO(samples=8, epochs=2))
    t0 = time.perf_counter()
    with torch.no_grad():
        agent.policy(task.inputs)
    forward = time.perf_counter() - t0
    t0 = time.perf_counter()
    agent.iteration([task])
    return {"seq": seq, "nodes": p.num_nodes, "units": task.graph.num_units, "prepare_s": prep,
            "forward_s": forward, "iteration_s": time.perf_counter() - t0,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "load": os.getloadavg()[0]}


def scaling_step(out: Path) -> None:
    """Per-iteration cost against graph size (GNMT, 12-100 steps), one process per size."""
    rows = []
    for seq in (12, 25, 50, 100):
        with ProcessPoolExecutor(1, initializer=worker_init) as pool:
            rows.append(pool.submit(_scaling_job, seq).result())
        print(rows[-1], flush=True)
    out.write_text(json.dumps({"machine": machine_line(), "rows": rows}, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--exact", action="store_true")
    ap.add_argument("--pretrain", action="store_true")
    ap.add_argument("--runs", action="store_true")
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--scaling", action="store_true")
    ap.add_argument("--baselines", action="store_true", help="recompute the greedy baselines")
    ap.add_argument("--full", action="store_true", help="300 s runs on TEST (every seed)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--pretrain-s", type=float, default=300.0)
    ap.add_argument("--time-limit", type=float, default=120.0)
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated seeds of the runs and policies")
    ap.add_argument("--long-seeds", default="0,1,2",
                    help="comma-separated seeds whose TEST runs get the 300 s tier with --full")
    ap.add_argument("--large-budget", type=float, default=300.0,
                    help="seconds per run on the two large graphs")
    ap.add_argument("--cpu-clock", action="store_true",
                    help="budgets (runs and pre-training) in the process's CPU seconds, so a "
                         "shared machine gives each run an idle core's compute")
    args = ap.parse_args()
    seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    if args.cpu_clock:
        from autopar_opt.learn.base import use_cpu_clock

        use_cpu_clock()
    if args.exact:
        exact_step(HERE / "exact_gdp.json", args.time_limit)
    if args.pretrain:
        pretrain_step(HERE / "pretrain_gdp.json", args.pretrain_s, seeds, args.cpu_clock)
    if args.runs:
        runs_step(HERE / "runs_gdp.json", args.workers, args.full, seeds, args.large_budget,
                  args.cpu_clock, tuple(int(x) for x in args.long_seeds.split(",") if x.strip()))
    if args.baselines:
        refresh_baselines(HERE / "exact_gdp.json")
    if args.scaling:
        scaling_step(HERE / "scaling_gdp.json")
    if args.report:
        from report_gdp import write_report

        write_report(HERE)


if __name__ == "__main__":
    main()
