"""MoE examples benchmark (issue 13): the whole `autopar` CLI as a user runs it.

For each run: wall time and peak memory of the subprocess (resource.getrusage
of the children), the solve's status, iteration time, proven lower bound and
gap, and the baseline plan (the spec's `plan:`) priced by evaluate().
Instances: Mixtral-8x7B on 2x8 H100, DeepSeek-V3 on 2,048 H800 (the published
configuration as baseline), each free and with --runnable-by megatron, plus
the export of every plan to Megatron-LM arguments.

Usage: python benchmarks/moe/run.py [--limit S]   (writes RESULTS.md and results.json here)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
AUTOPAR = str(Path(sys.executable).with_name("autopar"))
RUNS = [("mixtral-8x7b", "examples/mixtral_8x7b_2x8_h100.yaml", None),
        ("mixtral-8x7b", "examples/mixtral_8x7b_2x8_h100.yaml", "megatron"),
        ("deepseek-v3", "examples/deepseek_v3_2048_h800.yaml", None),
        ("deepseek-v3", "examples/deepseek_v3_2048_h800.yaml", "megatron")]


def run_cli(args: list[str], out: Path) -> tuple[float, float, int]:
    """(wall s, peak RSS MiB of this child, exit code)."""
    t0 = time.perf_counter()
    with open(out / "stderr.txt", "w") as err:
        proc = subprocess.Popen([AUTOPAR, *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)     # this child's own rusage
    wall = time.perf_counter() - t0
    return wall, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=float, default=120.0)
    opts = ap.parse_args()
    load = os.getloadavg()
    rows = []
    for model, spec, runnable in RUNS:
        out = HERE / "out" / f"{model}{'-' + runnable if runnable else ''}"
        out.mkdir(parents=True, exist_ok=True)
        args = ["solve", spec, "--time-limit", str(opts.limit), "--out", str(out), "--quiet"]
        if runnable:
            args += ["--runnable-by", runnable]
        wall, peak, code = run_cli(args, out)
        doc = json.loads((out / "plan.json").read_text())
        base = next((b for b in doc["baselines"] if b["name"] == "user plan"), None)
        exp = subprocess.run([AUTOPAR, "export", str(out / "plan.json"), "--to", "megatron"],
                             cwd=ROOT, capture_output=True, text=True)
        rows.append({
            "model": model, "spec": spec, "runnable_by": runnable, "exit_code": code,
            "wall_s": round(wall, 2), "peak_rss_mib": round(peak, 1), "status": doc["status"],
            "iteration_time_s": doc["metrics"]["iteration_time_s"] if doc["metrics"] else None,
            "lower_bound_s": doc["certificate"]["lower_bound"],
            "gap": doc["certificate"]["gap"],
            "configurations": len(doc["certificate"]["configurations"]),
            "baseline_s": base["metrics"]["iteration_time_s"] if base and base["metrics"] else None,
            "plan": {k: doc["plan"][k] for k in ("pp", "microbatches")} if doc["plan"] else None,
            "export_megatron": exp.returncode == 0 and exp.stdout or exp.stderr.strip()})
        print(rows[-1]["model"], runnable, rows[-1]["status"], rows[-1]["wall_s"], flush=True)
    (HERE / "results.json").write_text(json.dumps({"load_avg": load, "rows": rows}, indent=2))
    lines = ["# MoE examples: whole CLI runs", "",
             f"Machine shared with other work (load average at start {load[0]:.2f}, "
             f"{load[1]:.2f}, {load[2]:.2f}; 2 cores). Solver HiGHS, time limit "
             f"{opts.limit:.0f} s. Wall and peak RSS of the `autopar solve` subprocess.", "",
             "| model | runnable-by | status | wall s | peak MiB | iteration s | lower bound s "
             "| gap | configs | baseline s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['runnable_by'] or '-'} | {r['status']} | {r['wall_s']} "
                     f"| {r['peak_rss_mib']} | {r['iteration_time_s']:.4g} | "
                     f"{r['lower_bound_s']:.4g} | {r['gap']:.2%} | {r['configurations']} | "
                     f"{r['baseline_s']:.4g} |")
    lines += ["", "Megatron-LM arguments of each plan (`autopar export --to megatron`):", ""]
    for r in rows:
        lines += [f"{r['model']} ({r['runnable_by'] or 'free search'}):", "", "```",
                  str(r["export_megatron"]).strip(), "```", ""]
    (HERE / "RESULTS.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
