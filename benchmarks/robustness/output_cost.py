"""What writing plan.json and the report costs against the plan's size (issue 15).

The command's time limit keeps a reserve for its outputs
(:mod:`autopar_opt.reports.cost`): the report's cost is priced before the
search from the largest plan the search space allows, in units of a probe
(one small matplotlib chart, rendered and timed in the same process before
the search). This script measures, in one process, the probe and the whole
output (``plan.json`` text + ``render_html``) for synthetic plans of growing
size, made from the report's test fixture by repeating its stages, layers and
configurations, and prints each measured cost in probe units (each output
timed right after its own probe, as the command does; median and max of
``--repeat`` pairs) next to the model's
(:func:`autopar_opt.reports.cost.report_units`): the model must not be below
the median ratio.

Usage: python benchmarks/robustness/output_cost.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path

from autopar_opt.reports import cost
from autopar_opt.reports.render import render_html

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "data" / "report" / "plan_feasible.json"
SIZES = [(1, 1, 4, 1), (2, 8, 26, 4), (4, 16, 34, 21), (8, 16, 128, 27), (8, 64, 98, 84),
         (16, 32, 128, 40), (16, 120, 63, 4), (32, 64, 128, 27), (32, 128, 128, 84),
         (64, 64, 98, 49), (8, 8, 2000, 84), (8, 8, 5000, 300)]


def scaled(doc: dict, stages: int, microbatches: int, layers: int, configs: int) -> dict:
    """``doc`` with ``stages`` stages, ``microbatches`` micro-batches, about
    ``layers`` layers spread over the stages and ``configs`` configuration rows."""
    out = copy.deepcopy(doc)
    per_stage = max(1, layers // stages)
    plan_stage, metric = out["plan"]["stages"][0], out["metrics"]["stages"]
    out["plan"]["stages"] = []
    for i in range(stages):
        st = copy.deepcopy(plan_stage)
        st["layers"] = [f"layer{i}_{k}" for k in range(per_stage)]
        st["strategies"] = [copy.deepcopy(plan_stage["strategies"][0]) for _ in range(per_stage)]
        out["plan"]["stages"].append(st)
    out["metrics"]["stages"] = [dict(copy.deepcopy(metric[i % len(metric)]), index=i)
                                for i in range(stages)]
    out["plan"]["pp"], out["plan"]["microbatches"] = stages, microbatches
    rows = out["certificate"]["configurations"]
    out["certificate"]["configurations"] = [copy.deepcopy(rows[k % len(rows)]) for k in range(configs)]
    return out


def measure(doc: dict) -> float:
    """Wall seconds of what the command does after the document: its JSON text and the report."""
    began = time.perf_counter()
    json.dumps(doc, indent=2)
    render_html(doc)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    base = json.loads(FIXTURE.read_text())
    cost.probe_s()                                  # fonts and caches, as the command's warm-up
    print(f"load average before: {open('/proc/loadavg').read().split()[:3]}")
    print("| stages | micro-batches | layers | configurations | probe ms | output s "
          "| units (median) | units (max) | model units |")
    print("|---|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for stages, mb, layers, configs in SIZES:
        doc = scaled(base, stages, mb, layers, configs)
        pairs = []
        for _ in range(args.repeat):      # as in the command: a probe, then the outputs
            unit = cost.probe_s()
            pairs.append((unit, measure(doc)))
        ratios = sorted(spent / unit for unit, spent in pairs)
        model = cost.report_units(stages, stages * mb, layers, configs)
        worst = max(worst, ratios[len(ratios) // 2] / model)
        print(f"| {stages} | {mb} | {layers} | {configs} | {1e3 * min(u for u, _ in pairs):.0f} "
              f"| {min(o for _, o in pairs):.3f} | {ratios[len(ratios) // 2]:.1f} | {ratios[-1]:.1f} "
              f"| {model:.1f} |")
    print(f"load average after: {open('/proc/loadavg').read().split()[:3]}")
    print(f"largest median measured / model: {worst:.2f} (must stay below 1)")


if __name__ == "__main__":
    main()
