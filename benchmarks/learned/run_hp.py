"""The Hierarchical Planner (Mirhoseini et al. 2018; ``learn/hp.py``) on GDP's benchmark
(issue 32): the same instances as run_gdp.py (the ten public ones and the two large zoo
graphs), one cost model (evaluate_placement prices every reported plan), one clock.

* ``--runs``: one process per (instance, variant, seed) run of ``--budget`` seconds
  (default 60, on the CPU clock with ``--cpu-clock``, as run_gdp.py's), values at 10 and
  60 s read from its trace -> ``runs_hp.json`` (appended after every run; a run already
  recorded is skipped);
* ``--report`` -> ``RESULTS_hp.md``: HP at 10/60 s as a ratio to the proven optimum (or
  ≥ the ratio to the lower bound where exact_gdp.json holds only a bound), beside GDP from
  scratch at the same budgets (runs_gdp.json, mean over seeds).

Variants: ``hp`` is the planner as published (a fixed penalty for every infeasible
placement); ``hp-graded`` (``--variants hp,hp-graded``) its graded-penalty option, which is
not the paper's. ``--out-dir`` writes elsewhere (smoke runs).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import ROOT, machine_line, worker_init  # noqa: E402
from run_gdp import LARGE, PUBLIC, TEST, TRAIN, placement_run  # noqa: E402

SEEDS = [0, 1, 2]
BUDGETS = [10.0, 60.0]
VARIANTS = {"hp": "fixed", "hp-graded": "graded"}


def _job(job: tuple) -> dict:
    name, variant, seed, budget = job
    marks = sorted({*(b for b in BUDGETS if b <= budget), budget})
    rec = placement_run(name, "hp", seed, budget, marks, infeasible=VARIANTS[variant])
    return {"variant": variant, **rec, "iterations": rec["info"].get("iterations")}


def _init(cpu_clock: bool) -> None:
    worker_init()
    if cpu_clock:
        from autopar_opt.learn.base import use_cpu_clock

        use_cpu_clock()


def runs_step(out: Path, instances: list[str], variants: list[str], seeds: list[int],
              budget: float, workers: int, cpu_clock: bool) -> None:
    doc = json.loads(out.read_text()) if out.exists() else {"runs": []}
    clock = "cpu" if cpu_clock else "wall"
    if doc.setdefault("clock", clock) != clock:
        raise SystemExit(f"{out} holds runs on the {doc['clock']} clock; this run asks for {clock}")
    doc.setdefault("machines", []).append(machine_line())
    doc.setdefault("commands", []).append(" ".join(sys.argv))
    done = {(r["instance"], r["variant"], r["seed"], r["budget_s"]) for r in doc["runs"]}
    todo = [(n, v, s, budget) for s in seeds for n in instances for v in variants
            if (n, v, s, budget) not in done]
    todo.sort(key=lambda j: j[0] not in LARGE)          # the large graphs first
    # one process per run: peak memory is the run's, not the worker's history
    with ProcessPoolExecutor(workers, initializer=_init, initargs=(cpu_clock,),
                             max_tasks_per_child=1) as pool:
        futures = [pool.submit(_job, j) for j in todo]
        for f in as_completed(futures):
            r = f.result()
            doc["runs"].append(r)
            out.write_text(json.dumps(doc, indent=1))
            print(r["instance"], r["variant"], r["seed"], r["value"], r["samples"],
                  f"{r['peak_rss_mib']:.0f} MiB", flush=True)


# ------------------------------------------------------------------ report
def write_report(out_dir: Path, gdp_dir: Path = HERE) -> Path:
    """RESULTS_hp.md from runs_hp.json in ``out_dir`` and exact_gdp.json / runs_gdp.json in
    ``gdp_dir``."""
    from report_gdp import _ratio_text, _ref, longest

    rows = json.loads((gdp_dir / "exact_gdp.json").read_text())["rows"]
    doc = json.loads((out_dir / "runs_hp.json").read_text())
    gdp_path = gdp_dir / "runs_gdp.json"
    gdp_doc = json.loads(gdp_path.read_text()) if gdp_path.exists() else {"runs": []}
    gdp = [r for r in longest(gdp_doc["runs"]) if r["mode"] == "scratch"]
    runs = doc["runs"]
    variants = [v for v in VARIANTS if any(r["variant"] == v for r in runs)]
    budgets = sorted({float(b) for r in runs for b in r["at"]})
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                                capture_output=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"

    def ratios(rs: list[dict], b: float, ref: float) -> list[float | None]:
        return [(r["at"][str(b)] / ref) if r["at"].get(str(b)) else None
                for r in rs if str(b) in r["at"]]

    clock = ("CPU seconds of the run's process (one compute thread): each run gets the compute "
             "of an idle core" if doc.get("clock") == "cpu" else "wall clock, under the load above")
    lines = ["# The Hierarchical Planner (Mirhoseini et al. 2018) beside GDP (issue 32)", "",
             f"Written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at commit {commit}.",
             ""]
    lines += [f"Runs: {m}." for m in doc.get("machines", [])]
    lines += [f"Command: `{c}`" for c in doc.get("commands", [])]
    lines += ["", "`hp` is `autopar_opt/learn/hp.py` as published: a feed-forward Grouper "
              "(hidden 64) puts each unit (the units GDP's per-node decoder places) into one "
              "of min(256, units) groups, a seq2seq Placer (bidirectional LSTM encoder, "
              "attentional LSTM decoder, hidden 256) gives each group a device; joint REINFORCE, "
              "reward −sqrt(max-load / fair share), EMA baseline, and every infeasible placement "
              "(memory, device support, cyclic device quotient) the same fixed penalty. "
              "`hp-graded` (if present) replaces the fixed penalty by a graded one (not the "
              "paper's). The module docstring lists every difference from the paper.", "",
              "Ratios: max-load of the best feasible plan found (priced by evaluate_placement) "
              "over the proven optimum, or over the proven lower bound where marked ≥ (the "
              "ratio to the optimum is then at most the figure). Mean ± sd over the seeds run "
              "([n=...] where fewer than 3 found a plan; \"(k none)\": k runs found no feasible "
              f"plan by then). Values at each budget are read from one run's trace ({clock}). "
              "GDP: from scratch (runs_gdp.json, the longest run per seed), same clock.", ""]
    head = ["instance", "split", "units", "reference"]
    for v in variants:
        head += [f"{v} @{b:g} s" for b in budgets]
        head += [f"{v} first feasible, s", f"{v} iterations", f"{v} feasible samples",
                 f"{v} peak MiB"]
    head += [f"GDP @{b:g} s" for b in budgets]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    names = [n for n in PUBLIC + list(LARGE) if any(r["instance"] == n for r in runs)]
    for name in names:
        ref, label = _ref(rows[name])
        ge = "≥ " if label != "optimum" else ""
        rs_any = [r for r in runs if r["instance"] == name]
        units = rs_any[0]["info"].get("units", "-")
        cells = [name, "train" if name in TRAIN else "test" if name in TEST else "large",
                 f"{units:,}" if isinstance(units, int) else str(units),
                 f"{ref:.6g} {label}"]
        for v in variants:
            rs = [r for r in rs_any if r["variant"] == v]
            texts = [_ratio_text(ratios(rs, b, ref)) if any(str(b) in r["at"] for r in rs)
                     else "-" for b in budgets]
            cells += [t if t in ("-", "none") else ge + t for t in texts]
            ff = [r["first_feasible_s"] for r in rs if r["first_feasible_s"] is not None]
            none = len(rs) - len(ff)
            cells.append(("-" if not rs else ", ".join(f"{x:.1f}" for x in ff) if not none
                          else ", ".join([*(f"{x:.1f}" for x in ff), f"{none} none"])))
            cells.append(", ".join(str(r["iterations"]) for r in rs) or "-")
            fs = [(r["info"].get("feasible_samples", 0), r["samples"]) for r in rs]
            cells.append(", ".join(f"{a}/{b}" for a, b in fs) or "-")
            cells.append(f"{max(r['peak_rss_mib'] for r in rs):.0f}" if rs else "-")
        g = [r for r in gdp if r["instance"] == name]
        cells += [ge + _ratio_text(ratios(g, b, ref)) if any(str(b) in r["at"] for r in g)
                  else "-" for b in budgets]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    path = out_dir / "RESULTS_hp.md"
    path.write_text("\n".join(lines))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", action="store_true")
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--instances", default=",".join(PUBLIC + list(LARGE)),
                    help="comma-separated (default: the ten public ones and the large graphs)")
    ap.add_argument("--variants", default="hp", help="comma-separated: hp, hp-graded")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--budget", type=float, default=60.0, help="seconds per run")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--cpu-clock", action="store_true",
                    help="measure budgets in each run's CPU seconds (learn.base.use_cpu_clock)")
    ap.add_argument("--out-dir", default=str(HERE), help="where runs_hp.json and RESULTS_hp.md go")
    a = ap.parse_args()
    out_dir = Path(a.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    instances = [s for s in a.instances.split(",") if s]
    variants = [s for s in a.variants.split(",") if s]
    bad = [n for n in instances if n not in PUBLIC and n not in LARGE] + \
        [v for v in variants if v not in VARIANTS]
    if bad:
        raise SystemExit(f"unknown instance or variant: {', '.join(bad)}")
    if a.runs:
        runs_step(out_dir / "runs_hp.json", instances, variants,
                  [int(s) for s in a.seeds.split(",")], a.budget, a.workers, a.cpu_clock)
    if a.report:
        print(write_report(out_dir))


if __name__ == "__main__":
    main()
