"""Build the report test fixtures (plan.json documents) from the core API.

Run ``.venv/bin/python tests/data/report/build_fixtures.py`` to rewrite
``plan_feasible.json``, ``plan_infeasible.json`` and ``capacity_tiny.json`` (a real sweep:
:func:`capacity_document`) next to this file.

The feasible document is hand-assembled: a tiny decoder LM (``decoder_lm``),
a 2-node x 4 A100-40GB cluster (``make_cluster``), ``evaluate()`` of a
2-stage plan for the metrics and of the baselines, and a fake but
consistent certificate table (bounds below primals, the global bound the
minimum of the per-configuration bounds, the incumbent's row = the metrics).
"""

from __future__ import annotations

import json
import math
import pathlib

from autopar_opt.cost.params import default_params
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.ir.hardware import LinkTier, make_cluster
from autopar_opt.model_zoo.transformer import decoder_lm
from autopar_opt.ir.plan import Plan, StagePlan, uniform_plan
from autopar_opt.core.result import relative_gap
from autopar_opt.ir.strategies import Strategy
from autopar_opt.ir.training import Recompute, Schedule, Training

HERE = pathlib.Path(__file__).parent
ASSUMPTIONS = [
    "Compute time = FLOPs / (peak × GEMM efficiency) with latency-bound small kernels "
    "(roofline saturation); no measured layer times.",
    "Collectives are ring all-reduce / all-gather / reduce-scatter under the α–β model; a group "
    "spanning nodes runs at the inter-node tier.",
    "Mixed-precision Adam keeps 16 bytes per parameter before ZeRO sharding; activations follow "
    "Korthikanti et al. 2022.",
    "Iteration time T = Σp + Σo + (c−1)·max(max p, max o) + max g (GPipe/1F1B).",
]


def _model_and_cluster():
    graph = decoder_lm("debug-lm", num_layers=16, seq_len=2048, hidden=4096, heads=32,
                       ffn_hidden=16384, vocab=50304, source="tests: tiny decoder LM")
    cluster = make_cluster("debug-2x4-a100", 2, 4, "A100-40GB",
                           inter_node=LinkTier("eth-100g", 12.5, 15.0))
    training = Training(global_batch_size=64, seq_len=2048)
    return graph, cluster, training


def _plan_dict(plan: Plan, d: int) -> dict:
    data = plan.to_dict()
    for i, st in enumerate(data["stages"]):
        st["first_rank"], st["last_rank"] = i * d, (i + 1) * d - 1
    return data


def _metrics_dict(plan, graph, cluster, training) -> dict:
    return evaluate(plan, graph, cluster, training).to_dict()


def _spec(graph, cluster, training) -> dict:
    link = lambda t: {"name": t.name, "bandwidth_gb_per_s": t.bandwidth_gb_per_s,
                      "latency_us": t.latency_us}
    return {"path": "specs/debug.yaml",
            "model": {"name": graph.name, "num_layers": len(graph.layers),
                      "params": sum(l.params for l in graph.layers), "is_chain": True,
                      "source": graph.source},
            "cluster": {"name": cluster.name, "nodes": cluster.nodes,
                        "gpus_per_node": cluster.gpus_per_node, "num_devices": cluster.num_devices,
                        "device": cluster.device.name, "hbm_gib": cluster.device.hbm_gib,
                        "peak_tflops": cluster.device.peak_tflops["bf16"],
                        "intra_node": link(cluster.intra_node), "inter_node": link(cluster.inter_node)},
            "training": {"global_batch_size": training.global_batch_size, "seq_len": training.seq_len,
                         "dtype": training.dtype, "optimizer": training.optimizer,
                         "memory_reserve_gib": training.memory_reserve_gib}}


SPACE = {"pp_degrees": [2, 4], "tp_degrees": None, "cp_degrees": [1],
         "sequence_parallel": [False, True], "zero_levels": [0], "recompute": ["none", "selective", "full"],
         "schedules": ["1f1b", "gpipe"], "microbatches": [4, 8], "max_microbatches": 64,
         "tp_within_node": True}


def _best_plan(graph) -> Plan:
    """A hand-picked 2-stage plan (the certificate around it is fake; the builder
    checks that no evaluated baseline beats it, so the fake claim stays plausible)."""
    names = [l.name for l in graph.layers]
    ends = Strategy(dp=4, tp=1)
    block = Strategy(dp=4, tp=1, recompute=Recompute.selective)
    stage0 = StagePlan(names[:9], [ends] + [block] * 8)
    stage1 = StagePlan(names[9:], [block] * 8 + [ends])
    return Plan([stage0, stage1], microbatches=8, schedule=Schedule.one_f_one_b)


def _best_uniform(graph, cluster, training) -> tuple[Plan, dict]:
    """Best feasible uniform pp=2 plan over dp·tp splits, recomputation and micro-batches."""
    names = [l.name for l in graph.layers]
    best = None
    for tp in (1, 2, 4):
        for rc in Recompute:
            for mb in SPACE["microbatches"]:
                plan = uniform_plan(names, 2, Strategy(4 // tp, tp, sp=tp > 1, recompute=rc), mb)
                m = _metrics_dict(plan, graph, cluster, training)
                if m["feasible"] and (best is None or m["iteration_time_s"] < best[1]["iteration_time_s"]):
                    best = (plan, m)
    return best

def _row(pp, c, sched, status, primal, lb, time_s, pruned=None, hash_=None) -> dict:
    gap = relative_gap(primal, lb)
    enc = lambda x: x if x is None or math.isfinite(x) else ("inf" if x > 0 else "-inf")
    return {"pp": pp, "microbatches": c, "schedule": sched, "status": status, "primal": enc(primal),
            "lower_bound": enc(lb), "gap": enc(gap), "time_s": time_s, "pruned_by": pruned,
            "model_hash": hash_}


def _certificate(t: float) -> dict:
    rows = [
        _row(2, 8, "1f1b", "optimal", t, t * 0.996, 2.4, hash_="sha256:3c0ffee3"),
        _row(2, 4, "1f1b", "feasible", t * 1.021, t * 0.988, 4.2, hash_="sha256:2c0ffee2"),
        _row(2, 8, "gpipe", "infeasible", None, math.inf, 0.4, hash_="sha256:4c0ffee4"),
        _row(2, 4, "gpipe", "optimal", t * 1.04, t * 1.035, 1.9, hash_="sha256:1c0ffee1"),
        _row(4, 8, "1f1b", "pruned", None, t * 1.07, 0.3, pruned="lower bound ≥ incumbent"),
        _row(4, 4, "1f1b", "pruned", None, t * 1.12, 0.2, pruned="lower bound ≥ incumbent"),
        _row(4, 8, "gpipe", "infeasible", None, math.inf, 0.2),
        _row(4, 4, "gpipe", "infeasible", None, math.inf, 0.2),
    ]
    lb = min(r["lower_bound"] for r in rows if r["lower_bound"] != "inf")
    return {"primal": t, "lower_bound": lb, "gap": relative_gap(t, lb), "exact": True,
            "configurations": rows}


def _baselines(graph, cluster, training) -> list[dict]:
    names = [l.name for l in graph.layers]
    dp_plan = uniform_plan(names, 1, Strategy(dp=8, tp=1), 8)
    dp_metrics = _metrics_dict(dp_plan, graph, cluster, training)
    assert not dp_metrics["feasible"], "fixture expects pure DP not to fit"
    uni_plan, uni_metrics = _best_uniform(graph, cluster, training)
    return [{"name": "pure data parallelism", "plan": _plan_dict(dp_plan, 8), "metrics": None,
             "note": f"does not fit in memory ({max(dp_metrics['peak_memory_gib']):.1f} GiB "
                     f"> {dp_metrics['memory_capacity_gib']:.1f} GiB)"},
            {"name": "best uniform Megatron-style", "plan": _plan_dict(uni_plan, 4),
             "metrics": uni_metrics, "note": "same strategy for every layer, pp=2, best of the space"},
            {"name": "user plan", "plan": None, "metrics": None,
             "note": "no user plan given in the spec"}]


def _common(graph, cluster, training) -> dict:
    return {"schema_version": 1, "tool": {"name": "autopar-opt", "version": "0.1.0"},
            "created_utc": "2026-11-22T05:00:00Z", "spec": _spec(graph, cluster, training),
            "search_space": SPACE,
            "cost_model": {"params": default_params().to_dict(), "assumptions": ASSUMPTIONS}}


def feasible_document() -> dict:
    graph, cluster, training = _model_and_cluster()
    plan = _best_plan(graph)
    metrics = _metrics_dict(plan, graph, cluster, training)
    doc = _common(graph, cluster, training)
    doc.update({
        "status": "optimal", "plan": _plan_dict(plan, 4), "metrics": metrics,
        "certificate": _certificate(metrics["iteration_time_s"]),
        "solver": {"name": "highs", "version": "1.15.1", "form": "milp", "time_limit_s": 60.0,
                   "rel_gap": 0.01, "log_tail": "Solving report\n  Status Optimal\n  Gap 0.4%\n"},
        "baselines": _baselines(graph, cluster, training), "infeasibility": None})
    for b in doc["baselines"]:
        assert b["metrics"] is None or b["metrics"]["iteration_time_s"] >= metrics["iteration_time_s"] - 1e-12, \
            f"baseline {b['name']} beats the fixture's plan; pick a better plan"
    return doc


def infeasible_document() -> dict:
    graph, cluster, training = _model_and_cluster()
    doc = _common(graph, cluster, training)
    doc["spec"]["model"]["name"] = "debug-lm-too-big"
    rows = [_row(pp, c, sched, "infeasible", None, math.inf, 0.1)
            for pp in SPACE["pp_degrees"] for c in SPACE["microbatches"] for sched in SPACE["schedules"]]
    doc.update({
        "status": "infeasible", "plan": None, "metrics": None,
        "certificate": {"primal": None, "lower_bound": "inf", "gap": "inf", "exact": True,
                        "configurations": rows},
        "solver": {"name": "highs", "version": "1.15.1", "form": "milp", "time_limit_s": 60.0,
                   "rel_gap": 0.01, "log_tail": "Model status: Infeasible\n"},
        "baselines": [{"name": "pure data parallelism", "plan": None, "metrics": None,
                       "note": "does not fit in memory"}],
        "infeasibility": {"reason": "Even the most memory-frugal plan of the search space (pp=4, "
                                    "tp=4, full recomputation, no ZeRO) needs more memory per "
                                    "device than the usable capacity.",
                          "least_memory_gib": 51.3, "capacity_gib": 38.0,
                          "advice": ["Allow ZeRO levels 1-3 (zero_levels) to shard optimizer state and weights.",
                                     "Use devices with more memory (e.g. A100-80GB).",
                                     "Reduce memory_reserve_gib if the reserve is conservative."]}})
    return doc


def capacity_document() -> dict:
    """``capacity_tiny.json``: what ``autopar capacity tests/data/capacity/tiny.yaml
    --workers 1`` writes (a real sweep of 6 scenarios, a few seconds), run from the
    repository root with a fresh store; the store's path is written as ``capacity.sqlite``
    (the run's own is a temporary file). tests/unit/capacity/test_capacity_fixture_current.py
    fails when the code writes another layout: run this script again then."""
    import subprocess
    import sys
    import tempfile

    root = HERE.parents[2]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "autopar_opt.cli.commands", "capacity",
                        "tests/data/capacity/tiny.yaml", "--workers", "1", "--quiet",
                        "--store", f"{tmp}/capacity.sqlite", "--out", f"{tmp}/out"],
                       cwd=root, check=True)
        doc = json.loads(pathlib.Path(tmp, "out", "capacity.json").read_text())
    doc["run"]["store"] = "capacity.sqlite"
    return doc


def main() -> None:
    for name, doc in (("plan_feasible.json", feasible_document()),
                      ("plan_infeasible.json", infeasible_document())):
        (HERE / name).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        print("wrote", HERE / name)
    (HERE / "capacity_tiny.json").write_text(json.dumps(capacity_document(), indent=2) + "\n")
    print("wrote", HERE / "capacity_tiny.json")


if __name__ == "__main__":
    main()
