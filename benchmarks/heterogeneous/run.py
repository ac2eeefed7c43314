"""Mixed fleets (issue 34): A100 + H100 pods, the whole ``autopar solve`` command timed.

For every instance (Llama-3-70B and GPT-3 175B on 64 + 64 and 128 + 256 nodes of
A100-80GB and H100-SXM-80GB, joined by a 25 GB/s-per-GPU link) this writes the
spec under ``specs/``, then records:

* the fleet solve as a user types it (``autopar solve SPEC --json``, wall clock,
  CPU and peak memory of the child: benchmarks/clitime.py), its status, gap,
  chosen shape and split, iteration time;
* each group alone (its own spec, the same search space: ``target: none``, the
  fleet's free per-layer space, 1F1B): the better
  homogeneous sub-cluster, and how much faster the fleet's plan is;
* the Metis-style heuristic (autopar_opt/search/metis_baseline.py: Um et al.,
  ATC'24, reimplemented under our cost model), its plan's iteration time and
  how long it took, in this process.

Writes RESULTS.md (date, load, commit, command lines) and results.json.
Usage: ``python benchmarks/heterogeneous/run.py [--only NAME] [--time-limit S] [--metis-limit S]
[--solver NAME]`` (the specs name no solver unless ``--solver`` forces one: the default route).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from clitime import commit, load_average, run_cli  # noqa: E402

LINK = {"bandwidth_gb_per_s": 25.0, "latency_us": 20.0}

MODELS = {
    "llama3-70b": {"model": {"zoo": "llama3-70b"},
                   "training": {"global_batch_size": 512, "seq_len": 8192, "dtype": "bf16"},
                   "search": {"pp_degrees": [1, 2, 4, 8, 16], "tp_degrees": [1, 2, 4, 8],
                              "cp_degrees": [1, 2], "sequence_parallel": [True],
                              "zero_levels": [0, 1, 3], "recompute": ["none", "selective", "full"],
                              "max_microbatches": 128}},
    "gpt3-175b": {"model": {"zoo": "gpt3-175b"},
                  "training": {"global_batch_size": 1536, "seq_len": 2048, "dtype": "bf16"},
                  "search": {"pp_degrees": [4, 8, 12, 16, 24, 32], "tp_degrees": [4, 8],
                             "sequence_parallel": [True], "zero_levels": [0, 1],
                             "recompute": ["none", "selective", "full"], "max_microbatches": 128}},
}
MODELS["llama3-70b-b2048"] = {**MODELS["llama3-70b"],
                              "training": {**MODELS["llama3-70b"]["training"], "global_batch_size": 2048}}
MIXES = {"64+64": (64, 64), "128+256": (128, 256)}
#: Mixes per model (default: all); Llama-3's own 16M-token batch (2048 x 8192) only on the large mix.
MODEL_MIXES = {"llama3-70b-b2048": ("128+256",)}


def group(name: str, device: str, nodes: int) -> dict:
    return {"name": name, "device": device, "nodes": nodes, "gpus_per_node": 8}


def specs(limit: float, solver_name: str | None = None) -> list[tuple[str, Path, list[Path]]]:
    """(instance, fleet spec, one spec per group alone), written under specs/. The specs
    name no solver (the default route, ``auto``, as a user who writes none gets) unless
    ``solver_name`` forces one."""
    out = []
    (HERE / "specs").mkdir(exist_ok=True)
    for model, base in MODELS.items():
        for mix, (na, nh) in MIXES.items():
            if mix not in MODEL_MIXES.get(model, tuple(MIXES)):
                continue
            name = f"{model}_a100x{na}_h100x{nh}"
            groups = [group("a100", "A100-80GB", na), group("h100", "H100-SXM-80GB", nh)]
            solver = {**({"name": solver_name} if solver_name else {}), "time_limit_s": limit,
                      "rel_gap": 0.01}
            fleet = {"description": f"{model} on {na} A100 + {nh} H100 nodes (issue 34 benchmark)",
                     **base, "cluster": {"name": f"a100x{na}+h100x{nh}", "groups": groups,
                                         "links": [{"between": ["a100", "h100"], **LINK}]},
                     "solver": solver}
            path = HERE / "specs" / f"{name}.yaml"
            path.write_text(yaml.safe_dump(fleet, sort_keys=False))
            alone = []
            for g in groups:
                gpus = g["nodes"] * 8       # the fleet's one-group space: pp dividing the group
                search = {**base["search"], "pp_degrees": [p for p in base["search"]["pp_degrees"]
                                                           if gpus % p == 0]}
                # target none: the fleet's free per-layer space (1F1B); without it the group
                # alone would search its runtime's target default (megatron: interleaved too),
                # a larger space than the fleet's one-group shapes
                one = {**base, "search": search, "target": "none",
                       "cluster": {"name": f"{g['name']}x{g['nodes']}", "device": g["device"],
                                   "nodes": g["nodes"], "gpus_per_node": 8}, "solver": solver}
                p = HERE / "specs" / f"{model}_{g['name']}x{g['nodes']}.yaml"
                p.write_text(yaml.safe_dump(one, sort_keys=False))
                alone.append(p)
            out.append((name, path, alone))
    return out


def metis(path: Path, limit: float) -> dict:
    from autopar_opt.search.metis_baseline import metis_plan
    from autopar_opt.search.replicas import DEFAULT_SPLIT_PARTS
    from autopar_opt.spec import load_spec

    spec = load_spec(path)
    began = time.perf_counter()
    res = metis_plan(spec.graph, spec.fleet, spec.training, spec.space, spec.cost_params,
                     DEFAULT_SPLIT_PARTS, time_limit_s=limit)
    shape = "replicas " + "+".join(str(c.batch) for c in res.plan.classes) if hasattr(res.plan, "classes") \
        else ("pipeline groups=" + "+".join(map(str, res.plan.stage_groups)) if res.plan else "-")
    return {"value": res.value if res.plan else None, "evaluated": res.evaluated,
            "wall_s": round(time.perf_counter() - began, 2), "shape": shape,
            "hit_limit": res.wall_time_s >= limit}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=None)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--metis-limit", type=float, default=300.0)
    ap.add_argument("--solver", default=None, help="force a backend in the specs (default: none "
                    "named, the default route auto)")
    args = ap.parse_args()
    rows = []
    started = dt.datetime.now(dt.timezone.utc)
    for name, path, alone in specs(args.time_limit, args.solver):
        if args.only and args.only not in name:
            continue
        rel = path.relative_to(HERE.parents[1])
        run = run_cli(["solve", rel, "--json"], timeout_s=args.time_limit * 3 + 60)
        doc = run["json"] or {}
        cert = doc.get("certificate", {})
        solo = []
        for p in alone:
            r = run_cli(["solve", p.relative_to(HERE.parents[1]), "--json"], timeout_s=args.time_limit * 3 + 60)
            d = r["json"] or {}
            solo.append({"spec": p.name, "status": d.get("status"),
                         "primal": (d.get("certificate") or {}).get("primal"),
                         "lower_bound": (d.get("certificate") or {}).get("lower_bound"),
                         "wall_s": round(r["wall_s"], 2)})
        closure = None
        if not (doc.get("status") == "optimal" and isinstance(cert.get("gap"), float)
                and cert["gap"] <= 0.01 and run["wall_s"] <= 60):
            long = run_cli(["solve", rel, "--json", "--time-limit", "900"], timeout_s=1200)
            d = long["json"] or {}
            closure = {"status": d.get("status"), "gap": (d.get("certificate") or {}).get("gap"),
                       "primal": (d.get("certificate") or {}).get("primal"),
                       "wall_s": round(long["wall_s"], 2), "cpu_s": round(long["cpu_s"], 2),
                       "load_before": long["load_before"]}
        m = metis(path, args.metis_limit)
        rows.append({"instance": name, "command": f"autopar solve {rel} --json",
                     "status": doc.get("status"), "gap": cert.get("gap"), "primal": cert.get("primal"),
                     "lower_bound": cert.get("lower_bound"), "shape": doc.get("shape"),
                     "best": describe(doc), "wall_s": round(run["wall_s"], 2),
                     "cpu_s": round(run["cpu_s"], 2), "peak_rss_mib": run["peak_rss_mib"],
                     "load_before": run["load_before"], "exit_code": run["exit_code"],
                     "alone": solo, "metis": m, "closure": closure})
        print(json.dumps(rows[-1]), flush=True)
    if args.only and (HERE / "results.json").exists():     # keep the other instances' rows
        old = json.loads((HERE / "results.json").read_text())
        mine = {r["instance"] for r in rows}
        rows = [r for r in old if r["instance"] not in mine] + rows
        order = [n for n, _, _ in specs(args.time_limit, args.solver)]
        rows.sort(key=lambda r: order.index(r["instance"]) if r["instance"] in order else len(order))
    write(rows, started, args)


def describe(doc: dict) -> str:
    """The chosen plan in words: each class's groups and batch, or the pipeline's stages per group."""
    plan = doc.get("plan")
    if not plan:
        return "-"
    if doc.get("shape") == "replicas":
        return " + ".join(f"{'+'.join(c['groups'])} batch {c['batch']} "
                          f"(pp={c['plan']['pp']} c={c['plan']['microbatches']})" for c in plan["classes"])
    groups = plan["stage_groups"]
    runs = []
    for g in groups:
        if runs and runs[-1][0] == g:
            runs[-1][1] += 1
        else:
            runs.append([g, 1])
    return (" then ".join(f"{n} stage{'s' if n > 1 else ''} on {g}" for g, n in runs)
            + f", c={plan['microbatches']}")


def _f(x, fmt="{:.4g}") -> str:
    return "-" if x is None or isinstance(x, str) else fmt.format(x)


def write(rows: list[dict], started, args) -> None:
    head = commit()             # before results.json changes the tree (else always "-dirty")
    (HERE / "results.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = [
        "# Mixed fleets (issue 34): A100 + H100, the whole command", "",
        f"Machine: 2 cores shared with other sessions; run started {started:%Y-%m-%d %H:%M} UTC, "
        f"finished {dt.datetime.now(dt.timezone.utc):%H:%M} UTC at commit {head}; load average after: "
        f"{load_average()}. Each row's load before its fleet command is in its last column.", "",
        f"Command per instance: `autopar solve benchmarks/heterogeneous/specs/NAME.yaml --json` "
        f"(time limit {args.time_limit:g} s and gap 1% from the spec; solver: "
        f"{'`' + args.solver + '`, forced in the spec' if args.solver else 'none named, so the default route `auto`'})"
        "; each group alone: the same "
        "search space on that group's cluster (`specs/MODEL_GROUPxNODES.yaml`, `target: none`: the "
        "fleet's free per-layer space with 1F1B, not the megatron default's interleaved schedule "
        "too); Metis-style: "
        "`autopar_opt.search.metis_baseline.metis_plan` in this process, capped at "
        f"{args.metis_limit:g} s. Link between the pods: 25 GB/s per GPU, 20 µs.", "",
        "Target: proven within 1% in <= 60 s (wall clock of the whole command).", "",
        "| instance | status | gap | **command wall s** | CPU s | peak RSS MiB | shape (split) | iteration s "
        "| better group alone s | fleet speed-up | Metis-style s (its time s) | ours vs Metis | load before |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        alone = [a for a in r["alone"] if isinstance(a["primal"], (int, float))]
        best = min(alone, key=lambda a: a["primal"]) if alone else None
        speed = best["primal"] / r["primal"] if best and isinstance(r["primal"], float) else None
        m = r["metis"]
        vs = m["value"] / r["primal"] if m["value"] and isinstance(r["primal"], float) else None
        met = (r["status"] == "optimal" and isinstance(r["gap"], float) and r["gap"] <= 0.01
               and r["wall_s"] <= 60)
        lines.append(
            f"| {r['instance']} | {r['status']} | {_f(r['gap'], '{:.2%}')} | **{r['wall_s']}** "
            f"{'(met)' if met else '(missed)'} | {r['cpu_s']} | {_f(r['peak_rss_mib'], '{:.0f}')} | "
            f"{r['shape']}: {r['best']} | {_f(r['primal'])} | "
            f"{_f(best['primal']) if best else '-'} ({best['spec'] if best else '-'}) | "
            f"{_f(speed, '{:.3f}x')} | {_f(m['value'])} ({m['wall_s']}{', cap hit' if m['hit_limit'] else ''}) | "
            f"{_f(vs, '{:.3f}x')} | {r['load_before']} |")
    missed = [r for r in rows if r.get("closure")]
    if missed:
        lines += ["", "Instances that missed the target, solved again with `--time-limit 900` (what "
                  "the certificate needs; compare its CPU seconds with the 60 s target):", ""]
        for r in missed:
            c = r["closure"]
            lines.append(f"- {r['instance']}: {c['status']}, gap {_f(c['gap'], '{:.2%}')}, iteration "
                         f"{_f(c['primal'])} s, command wall {c['wall_s']} s, CPU {c['cpu_s']} s "
                         f"(load before {c['load_before']})")
    lines += ["", "Each group alone (status, primal, bound, command wall s):", ""]
    for r in rows:
        for a in r["alone"]:
            lines.append(f"- {r['instance']} / {a['spec']}: {a['status']}, {_f(a['primal'])} s, "
                         f"bound {_f(a['lower_bound'])} s, {a['wall_s']} s")
    lines += ["", "Wall clock on this shared machine is the user's wait; compare it with the CPU "
              "column: wall far above CPU means the command waited for a core.", ""]
    (HERE / "RESULTS.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
