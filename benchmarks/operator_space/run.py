"""Operator-level sharding benchmark (issue 31): PaSE's four graphs and the zoo's BERT/GPT blocks.

For every instance (graph × devices) it writes an ``operator_sharding`` spec and times
the whole ``autopar solve SPEC --json`` command as a subprocess (benchmarks/clitime.py:
wall clock, CPU, peak RSS), then records the optimum, the bound and gap, the method,
the data-parallel plan's cost and the expert strategy's (one weird trick for AlexNet,
the best Megatron template plan for transformers) under the same model. ``--dqn`` runs
Auto-MAP's DQN (learn/dqn.py on learn/op_space.py) in-process, one separate run per budget
(10 s, 60 s) and seed, and records each run's final plan against the proven optimum.

    python benchmarks/operator_space/run.py --solve [--only NAME] [--rule alpa|pase]
    python benchmarks/operator_space/run.py --dqn [--budgets 10,60] [--seeds 0,1,2] [--dqn-devices 8,64]
    python benchmarks/operator_space/run.py --report          # RESULTS.md from the JSON files
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from clitime import commit, load_average, run_cli  # noqa: E402

DEVICES = (4, 8, 16, 32, 64)
#: name -> (graph section, extra problem keys)
GRAPHS = {
    "alexnet": ({"zoo": "alexnet", "batch": 128}, {}),
    "inception3": ({"zoo": "inception3", "batch": 128}, {}),
    "rnnlm": ({"zoo": "rnnlm", "batch": 64}, {}),
    "transformer": ({"zoo": "transformer", "batch": 64}, {}),
    "bert-huge-32 x4 blocks": ({"model": "bert-huge-32", "layers": 4, "batch": 64, "embeddings": False}, {}),
    "gpt-1.7b x4 blocks, 6 GiB": ({"model": "gpt-1.7b", "layers": 4, "batch": 16, "embeddings": False},
                                 {"memory_gib": 6}),
}
PASE_DEVICES = DEVICES


def cluster(devices: int) -> dict:
    return {"nodes": max(1, devices // 8), "gpus_per_node": min(8, devices), "device": "A100-80GB"}


def spec_text(graph: dict, extra: dict, devices: int, rule: str) -> str:
    problem = {"format": "operator_sharding", "graph": graph, "cluster": cluster(devices),
               "space": {"split": rule}, **extra}
    return json.dumps({"problem": problem, "solver": {"name": "auto", "time_limit_s": 120}}, indent=1)


def instances(rule: str, only: str | None):
    for name, (graph, extra) in GRAPHS.items():
        if only and only not in name:
            continue
        if rule == "pase" and "model" in graph:
            continue
        for n in (PASE_DEVICES if rule == "pase" else DEVICES):
            yield name, graph, extra, n


def solve(rule: str, only: str | None, timeout_s: float = 600.0, devices: tuple[int, ...] | None = None) -> None:
    out_path = HERE / f"solve_{rule}.json"
    rows = json.loads(out_path.read_text()) if (only and out_path.exists()) else []
    rows = [r for r in rows if not (only and only in r["instance"] and (devices is None or r["devices"] in devices))]
    with tempfile.TemporaryDirectory() as tmp:
        for name, graph, extra, n in instances(rule, only):
            if devices is not None and n not in devices:
                continue
            spec = Path(tmp) / "spec.json"
            spec.write_text(spec_text(graph, extra, n, rule))
            res = run_cli(["solve", str(spec), "--json"], timeout_s=timeout_s)
            doc = res["json"] or {}
            cert = doc.get("certificate", {})
            base = {b["name"]: b for b in doc.get("baselines", [])}
            expert = base.get("one weird trick") or base.get("Megatron")
            row = {"instance": name, "devices": n, "rule": rule, "exit_code": res["exit_code"],
                   "status": doc.get("status") or ("killed at the time limit" if res["timed_out"] else None),
                   "timed_out": res["timed_out"], "optimum": cert.get("primal"), "lower_bound": cert.get("lower_bound"),
                   "gap": cert.get("gap"), "method": cert.get("method"),
                   "meshes": [(c["mesh"], c["status"]) for c in cert.get("configurations", [])],
                   "plan_mesh": (doc.get("plan") or {}).get("mesh"),
                   "wall_s": res["wall_s"], "cpu_s": res["cpu_s"], "peak_rss_mib": res["peak_rss_mib"],
                   "load_before": res["load_before"],
                   "data_parallel": base.get("data parallel", {}).get("metrics", {}).get("time_s"),
                   "data_parallel_fits": base.get("data parallel", {}).get("metrics", {}).get("fits_memory"),
                   "expert": expert and expert["name"], "expert_value": expert and expert["metrics"]["time_s"],
                   "expert_fits": expert and expert["metrics"]["fits_memory"],
                   "templates": doc.get("templates"), "samples_per_s": (doc.get("metrics") or {}).get("samples_per_s"),
                   "operators": doc.get("spec", {}).get("problem", {}).get("operators")}
            rows.append(row)
            rows.sort(key=lambda r: (list(GRAPHS).index(r["instance"]), r["devices"]))
            print(f"{name:28s} {n:3d} {row['status']} {row['optimum']} gap {row['gap']} "
                  f"wall {res['wall_s']:.2f}s cpu {res['cpu_s']:.2f}s load {res['load_before']}", flush=True)
            out_path.write_text(json.dumps(rows, indent=1))


def dqn(budgets: tuple[float, ...], seeds: tuple[int, ...], only: str | None, devices: tuple[int, ...]) -> None:
    """One separate run per (instance, budget, seed): the value at 10 s is a 10-s run's
    final plan, not read from a longer run's trace."""
    from autopar_opt.learn.base import run_searcher
    from autopar_opt.learn.op_space import OpSearchSpace
    from autopar_opt.opspace.spec import build_op_spec

    solved = {(r["instance"], r["devices"]): r for r in json.loads((HERE / "solve_alpa.json").read_text())}
    out_path = HERE / "dqn.json"
    rows = json.loads(out_path.read_text()) if out_path.exists() else []
    rows = [r for r in rows if "seed" in r]          # rows of the one-seed format are replaced
    with tempfile.TemporaryDirectory() as tmp:
        for name, graph, extra, n in instances("alpa", only):
            if n not in devices:
                continue
            spec = Path(tmp) / "spec.json"
            spec.write_text(spec_text(graph, extra, n, "alpa"))
            s = build_op_spec(json.loads(spec.read_text()), spec)
            space = OpSearchSpace(s.graph_for, s.context, s.rule, s.reduce_scatter)
            opt = solved[(name, n)]["optimum"]
            for budget in budgets:
                for seed in seeds:
                    load = load_average()
                    t0 = time.perf_counter()
                    res = run_searcher("dqn", space, budget, seed=seed)
                    row = {"instance": name, "devices": n, "budget_s": budget, "seed": seed, "optimum": opt,
                           "value": res.value, "ratio": res.value / opt if res.value else None,
                           "episodes": res.info.get("episodes"), "wall_s": round(time.perf_counter() - t0, 2),
                           "load": load, "commit": commit()}
                    rows = [r for r in rows if (r["instance"], r["devices"], r["budget_s"], r["seed"])
                            != (name, n, budget, seed)] + [row]
                    out_path.write_text(json.dumps(rows, indent=1))
                    print(f"{name:28s} {n:3d} dqn {budget:g}s seed {seed}: ratio {row['ratio']} "
                          f"({row['episodes']} episodes, load {load})", flush=True)


def _f(x, fmt="{:.4g}") -> str:
    if x is None:
        return "-"
    return x if isinstance(x, str) else fmt.format(x)


def _mesh(r: dict) -> str:
    """The optimum's logical mesh (with its replicas) from the certificate rows."""
    m = r.get("plan_mesh")
    return "-" if not m else f"{m[0]}x{m[1]}"


def report() -> None:
    lines = ["# Operator-level sharding: PaSE's graphs and the zoo's BERT/GPT blocks (issue 31)", "",
             f"Report written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at commit {commit()} from the "
             "JSON files; the rows were measured on the shared 2-core development machine at the times and "
             "commits listed in README.md (provenance). The load average before each command is in the "
             "tables; wall clocks are inflated by the load, `cpu_s` is the honest cost of the command.", "",
             "Commands: `python benchmarks/operator_space/run.py --solve` (each row: `autopar solve SPEC "
             "--json` as a subprocess, specs written by the runner: A100-80GB, 8 per node; `--only transformer` "
             "re-records one graph), `--solve --rule pase --timeout 300`, `--dqn --dqn-devices 8` and "
             "`--dqn-devices 64` (budgets 10 and 60 s, seeds 0-2), `--report`.", ""]
    for rule in ("alpa", "pase"):
        path = HERE / f"solve_{rule}.json"
        if not path.exists():
            continue
        rows = json.loads(path.read_text())
        lines += [f"## Exact solve, {rule} rule", "",
                  "| instance | devices | status | optimum s | gap | method | wall s | cpu s | peak MiB | load | "
                  "data parallel s (× opt) | expert s (× opt) | mesh |", "|" + "---|" * 13]
        for r in rows:
            opt = r["optimum"]
            dp = r["data_parallel"]
            ex = r["expert_value"]
            lines.append(f"| {r['instance']} | {r['devices']} | {r['status']} | {_f(opt)} | {_f(r['gap'], '{:.1e}')} | "
                         f"{r['method']} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | {r['peak_rss_mib']:.0f} | "
                         f"{r['load_before']} | {_f(dp)} ({_f(dp / opt if dp and opt else None, '{:.3f}')}"
                         f"{'' if r['data_parallel_fits'] in (True, None) else ', OOM'}) | "
                         + (f"{r['expert']}: {_f(ex)} ({_f(ex / opt if ex and opt else None, '{:.3f}')}"
                            f"{'' if r['expert_fits'] in (True, None) else ', OOM'})" if ex else "-")
                         + f" | {_mesh(r)} |")
        lines.append("")
    path = HERE / "dqn.json"
    if path.exists():
        rows = json.loads(path.read_text())
        seeds = sorted({r["seed"] for r in rows})
        lines += [f"## Auto-MAP's DQN (seeds {', '.join(map(str, seeds))}; one separate in-process run per "
                  "budget and seed, wall-clock budgets)", "",
                  "Each cell: the ratio of the DQN's plan to the proven optimum (alpa rule), per seed, then "
                  "the median (\"no plan\": no plan that fits the memory found in the budget; the median "
                  "is then not given); episodes per run; the load average when each run started.", "",
                  "| instance | devices | optimum s | at 10 s: per seed (median) | episodes | at 60 s: per seed "
                  "(median) | episodes | load |", "|---|---|---|---|---|---|---|---|"]
        keys = list(dict.fromkeys((r["instance"], r["devices"]) for r in rows))
        for name, n in keys:
            cells = []
            for b in (10.0, 60.0):
                rs = sorted((r for r in rows if (r["instance"], r["devices"], r["budget_s"]) == (name, n, b)),
                            key=lambda r: r["seed"])
                ratios = [r["ratio"] for r in rs if r["ratio"] is not None]
                med = sorted(ratios)[(len(ratios) - 1) // 2] if len(ratios) == len(rs) and ratios else None
                cells.append((" / ".join("no plan" if r["ratio"] is None else _f(r["ratio"], "{:.4f}") for r in rs)
                              + f" ({_f(med, '{:.4f}')})"
                              if rs else "not run",
                              " / ".join(str(r["episodes"]) for r in rs) or "-",
                              [r["load"].split()[0] for r in rs]))
            opt = next(r["optimum"] for r in rows if (r["instance"], r["devices"]) == (name, n))
            loads = [float(x) for c in cells for x in c[2]]
            lines.append(f"| {name} | {n} | {_f(opt)} | {cells[0][0]} | {cells[0][1]} | {cells[1][0]} | "
                         f"{cells[1][1]} | {min(loads):.1f}-{max(loads):.1f} |")
        lines.append("")
    (HERE / "RESULTS.md").write_text("\n".join(lines) + "\n")
    print((HERE / "RESULTS.md").read_text())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--solve", action="store_true")
    ap.add_argument("--dqn", action="store_true")
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--rule", default="alpa", choices=("alpa", "pase"))
    ap.add_argument("--only")
    ap.add_argument("--devices", help="--solve: only these device counts (comma-separated)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds before a solve command is killed")
    ap.add_argument("--budgets", default="10,60", help="DQN budgets in seconds, one run each")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--dqn-devices", default="8,64")
    a = ap.parse_args()
    if a.solve:
        solve(a.rule, a.only, a.timeout, tuple(int(x) for x in a.devices.split(",")) if a.devices else None)
    if a.dqn:
        dqn(tuple(float(x) for x in a.budgets.split(",")), tuple(int(x) for x in a.seeds.split(",")), a.only,
            tuple(int(x) for x in a.dqn_devices.split(",")))
    if a.report:
        report()


if __name__ == "__main__":
    main()
