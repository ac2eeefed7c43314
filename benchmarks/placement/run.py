"""Placement benchmarks: every shared instance, scale (10k/50k nodes on 8/64 devices),
growth with node count, Inception-v3. Times what the user runs: the whole
``autopar place ... --json`` command as a subprocess (wall clock, CPU time and peak
memory of the child: ``benchmarks/clitime.py``), next to the solver's own split.

Usage: ``.venv/bin/python benchmarks/placement/run.py [section ...]`` (sections:
startup, shared, milp, latency, scale, growth, inception); writes ``results.json`` here,
then ``report.py`` renders RESULTS.md. Expected run time on the idle 2-core machine:
startup + shared + latency + inception about 10 minutes; milp 10 minutes; scale +
growth about 40 minutes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))                      # benchmarks/: clitime
from clitime import run_cli  # noqa: E402
DATA = ROOT / "tests" / "data" / "placement"
AUTOPAR = str(Path(sys.executable).parent / "autopar")
KNOWN = {"LayerGraphs_bert24_inference": 17.7899, "LayerGraphs_bert24_training": 41.7458,
         "LayerGraphs_resnet50_inference": 33.7747, "LayerGraphs_resnet50_training": 78.6318,
         "OperatorGraphs_bert_l-3_inference": 27.9186, "OperatorGraphs_bert_l-3_training": 65.3031,
         "OperatorGraphs_bert_l-6_inference": 29.5795, "OperatorGraphs_bert_l-6_training": 72.865,
         "OperatorGraphs_resnet50_inference": 124.349, "OperatorGraphs_resnet50_training": 255.194}
#: published single-threaded C++ DP times (data README / issue: 0.01 s bert24 ... 12.5 s bert_l-6 training)
PUBLISHED_DP_S = {"LayerGraphs_bert24_inference": 0.01, "OperatorGraphs_bert_l-6_training": 12.5}
EXPERTS = {"LayerGraphs_bert24_inference": "bert24_inference.json",
           "LayerGraphs_bert24_training": "bert24_training.json",
           "LayerGraphs_resnet50_inference": "resnet50_inference.json"}


def place(args: list[str], timeout: float = 900) -> dict:
    """Run ``autopar place ARGS --json``: JSON result + wall time, CPU time and peak RSS of
    the process (``benchmarks/clitime.py``)."""
    r = run_cli(["place", *args, "--json"], timeout_s=timeout)
    out = {"command": r["command"], "exit_code": r["exit_code"], "process_wall_s": r["wall_s"],
           "process_cpu_s": r["cpu_s"], "peak_rss_mib": r["peak_rss_mib"]}
    if r["exit_code"] == 0 and r["json"] is not None:
        doc = dict(r["json"])
        doc.pop("devices", None)
        out.update(doc)
    else:
        out["stderr"] = r["stderr_tail"]
    return out


def spec_file(folder: Path, name: str, graph: dict, devices: list[dict]) -> str:
    path = folder / f"{name}.yaml"
    import yaml
    path.write_text(yaml.safe_dump({"placement": {"graph": graph, "devices": devices,
                                                  "objective": "max-load", "contiguous": True}}))
    return str(path)


def _warm_solver_s(path: Path, repeats: int = 5) -> float:
    """The solver alone in this process, best of ``repeats`` after one call (imports done,
    instance loaded): the figure to set beside a compiled DP's own running time."""
    from autopar_opt.placement.importers.public_json import load_public
    from autopar_opt.placement.solve import solve_placement

    problem = load_public(path)
    solve_placement(problem)
    return min(solve_placement(problem).wall_time_s for _ in range(repeats))


def shared(repeats: int = 3) -> list[dict]:
    """Each instance: the plain command ``repeats`` times (best wall, CPU and solver time
    kept), the solver warm in-process, and (where an expert split exists) one run with
    ``--expert --out`` for the expert's value and the report's cost."""
    rows = []
    for name in sorted(KNOWN):
        path = DATA / "throughput" / f"{name}.json"
        runs = [place([str(path)]) for _ in range(repeats)]
        r = min(runs, key=lambda x: x["process_wall_s"])
        r.update(instance=name, known_optimum=KNOWN[name], repeats=repeats,
                 process_cpu_s=min(x["process_cpu_s"] for x in runs),
                 wall_time_s=min(x.get("wall_time_s", float("inf")) for x in runs),
                 solver_warm_s=_warm_solver_s(path))
        if name in EXPERTS:
            out = Path(tempfile.mkdtemp())
            full = place([str(path), "--expert", str(DATA / "experts" / EXPERTS[name]),
                          "--out", str(out)])
            doc = json.loads((out / "placement.json").read_text())
            r["expert"] = next(b["value"] for b in doc["baselines"] if b["name"].startswith("human"))
            r["baselines"] = doc["baselines"]
            r["process_with_report_s"] = full["process_wall_s"]
        rows.append(r)
        print(name, r.get("value"), r.get("process_wall_s"), r["solver_warm_s"], flush=True)
    return rows


#: Transfer-dominated instances: also solved in-process from the heuristic start alone.
HEURISTIC_START = ("OperatorGraphs_resnet50_inference", "OperatorGraphs_resnet50_training")


def _milp_from_heuristic(name: str, limit: float) -> dict:
    """The MILP alone from the greedy topological split (no DP anywhere): value, the
    MILP's bound, the communication-aware floor and the seconds each took."""
    from autopar_opt.placement.condense import condense
    from autopar_opt.placement.heuristics import topo_split
    from autopar_opt.placement.exact.milp import load_floor
    from autopar_opt.placement.importers.public_json import load_public
    from autopar_opt.placement.exact.solve_milp import run_milp

    p = load_public(DATA / "throughput" / f"{name}.json")
    cond = condense(p)
    t0 = time.perf_counter()
    floor = load_floor(cond, contiguous=True)
    floor_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    value, _, bound, info = run_milp(p, cond, "max-load", True, "highs", limit, 1e-6,
                                     cond.expand(topo_split(cond)[1]))
    return {"value": value, "milp_bound": bound, "status": info["milp_status"],
            "floor": floor, "floor_s": floor_s, "total_s": time.perf_counter() - t0 + floor_s}


def milp(limit: float = 60.0) -> list[dict]:
    """``autopar place FILE --solver highs``: the MILP with the DP's placement as its start
    when the DP is within its guards (primal side only), its own bound; plus, for the
    transfer-dominated instances, the MILP from the heuristic start alone."""
    rows = []
    for name in sorted(KNOWN):
        r = place([str(DATA / "throughput" / f"{name}.json"), "--solver", "highs",
                   "--time-limit", str(limit)])
        r.update(instance=name, known_optimum=KNOWN[name], time_limit_s=limit)
        if name in HEURISTIC_START:
            r["heuristic_start"] = _milp_from_heuristic(name, limit)
        rows.append(r)
        print("milp", name, r.get("value"), r.get("lower_bound"), r.get("heuristic_start"),
              flush=True)
    return rows


def latency(limit: float = 60.0) -> list[dict]:
    rows = []
    for path in sorted((DATA / "latency").glob("*.json")):
        r = place([str(path), "--objective", "latency", "--time-limit", str(limit)])
        r.update(instance=path.stem, time_limit_s=limit)
        rows.append(r)
        print("latency", path.stem, r.get("value"), r.get("gap"), flush=True)
    return rows


def scale(folder: Path) -> list[dict]:
    rows = []
    for n in (10_000, 50_000):
        for k in (8, 64):
            spec = spec_file(folder, f"synthetic_{n}_{k}", {"zoo": "synthetic_transformer", "nodes": n},
                             [{"type": "A100-80GB", "count": k}])
            r = place([spec, "--gap", "0.01", "--time-limit", "280"])
            r.update(nodes=n, devices=k)
            rows.append(r)
            print("scale", n, k, r.get("value"), r.get("gap"), r.get("process_wall_s"), flush=True)
    return rows


def growth(folder: Path) -> list[dict]:
    rows = []
    for n in (500, 1000, 2000, 5000, 10_000, 20_000, 50_000):
        spec = spec_file(folder, f"growth_{n}", {"zoo": "synthetic_transformer", "nodes": n},
                         [{"type": "A100-80GB", "count": 8}])
        r = place([spec, "--gap", "0.01", "--time-limit", "280"])
        r.update(nodes=n, devices=8)
        rows.append(r)
        print("growth", n, r.get("process_wall_s"), r.get("gap"), flush=True)
    return rows


def inception(folder: Path) -> list[dict]:
    rows = []
    for gran in ("layer", "op"):
        spec = spec_file(folder, f"inception_{gran}", {"zoo": "inception_v3", "granularity": gran},
                         [{"type": "A100-80GB", "count": 8}])
        r = place([spec, "--time-limit", "300"])
        r.update(granularity=gran, devices=8)
        rows.append(r)
        print("inception", gran, r.get("value"), r.get("gap"), r.get("process_wall_s"), flush=True)
    return rows


def startup(repeats: int = 5) -> list[dict]:
    """Process start-up alone: ``autopar --version`` and the import of the place command,
    the fixed cost every ``autopar place`` pays before it reads its input."""
    rows = []
    py = str(Path(sys.executable))
    for name, cmd in (("autopar --version", [AUTOPAR, "--version"]),
                      ("python -c 'import autopar_opt.cli.place'",
                       [py, "-c", "import autopar_opt.cli.place"]),
                      ("python -c pass", [py, "-c", "pass"])):
        walls, rss = [], []
        for _ in range(repeats):
            with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
                start = time.perf_counter()
                subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", tf.name, *cmd],
                               capture_output=True, check=True)
                walls.append(time.perf_counter() - start)
                rss.append(float(tf.read().split()[-1]) / 1024)
        rows.append({"command": name, "min_wall_s": min(walls), "median_wall_s": sorted(walls)[len(walls) // 2],
                     "peak_rss_mib": max(rss), "repeats": repeats})
        print("startup", name, min(walls), flush=True)
    return rows


def main(argv: list[str]) -> None:
    # byte-compiled modules, as a normal install has them (pip compiles them): a developer
    # shell with PYTHONDONTWRITEBYTECODE=1 would re-compile every module on every command
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sections = argv or ["startup", "shared", "milp", "latency", "scale", "growth", "inception"]
    path = HERE / "results.json"
    results = json.loads(path.read_text()) if path.exists() else {}
    folder = Path(tempfile.mkdtemp())
    fns = {"startup": startup, "shared": shared, "milp": milp, "latency": latency, "scale": lambda: scale(folder),
           "growth": lambda: growth(folder), "inception": lambda: inception(folder)}
    for s in sections:
        load = os.getloadavg()
        results[s] = {"rows": fns[s](), "loadavg_before": load, "loadavg_after": os.getloadavg(),
                      "recorded_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
                      "cpus": os.cpu_count()}
        path.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
