"""Robustness benchmark (issue 15): the time limit as a wall-clock budget, and
the long fuzz profile.

``--limits``: every bundled example (``examples/*.yaml``) is solved with
``autopar solve EX --time-limit T --out DIR --quiet`` for T = 2, 5 and 10 s,
each as a subprocess (what the user runs, interpreter start-up included). The
target: wall clock <= 1.1 T + 1 s. Recorded per run: wall clock, CPU time and
peak memory (``os.wait4`` rusage of the child), exit code, status,
configurations solved, and the load average before the run (on a shared
machine, wall clock / CPU time shows the contention).

``--fuzz N``: runs the long fuzz profile (``pytest -m fuzz --fuzz-examples N
--fuzz-report FILE``) and records its counts: runs, exit-code distribution,
tracebacks (target 0), runs over 10 s (target 0).

Writes ``limits.json`` / ``fuzz.json`` next to this file; RESULTS.md is
written by hand from them, with the machine's load average.

Usage: python benchmarks/robustness/run.py --limits [--only NAME] | --fuzz 10000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
AUTOPAR = Path(os.environ.get("AUTOPAR_BIN") or Path(sys.executable).parent / "autopar")
LIMITS_S = (2.0, 5.0, 10.0)


def _load() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3]) if os.path.exists("/proc/loadavg") else "?"


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=ROOT, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def run_once(spec: Path, limit: float) -> dict:
    """One ``autopar solve`` subprocess: wall clock, peak RSS, exit code, status."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        load_before = _load()
        start = time.perf_counter()
        proc = subprocess.Popen([str(AUTOPAR), "solve", str(spec), "--time-limit", str(limit),
                                 "--out", str(out), "--quiet"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        doc = json.loads((out / "plan.json").read_text()) if (out / "plan.json").exists() else None
    configs = doc["certificate"]["configurations"] if doc else []
    return {"spec": spec.name, "limit_s": limit, "wall_s": round(wall, 3),
            "target_s": round(1.1 * limit + 1.0, 3), "within_target": wall <= 1.1 * limit + 1.0,
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
            "peak_rss_mib": round(usage.ru_maxrss / 1024, 1), "exit_code": code,
            "status": doc["status"] if doc else None,
            "configurations": len(configs),
            "solved": sum(1 for r in configs if r["status"] not in ("not_solved",)),
            "search_wall_s": doc["solver"]["wall_time_s"] if doc else None,
            # when plan.json's document was complete (s from process start): wall_s minus
            # this is writing plan.json and the report
            "document_at_s": (doc["solver"].get("timings") or {}).get("command_s") if doc else None,
            "load_before": load_before, "stderr_tail": proc.stderr.read().decode()[-300:]}


def limits(only: str | None) -> list[dict]:
    specs = [p for p in sorted((ROOT / "examples").glob("*.yaml"))
             if not p.name.startswith("capacity_")]     # capacity sweeps are not solve specs
    rows = []
    for spec in specs:
        if only and only not in spec.name:
            continue
        for limit in LIMITS_S:
            row = run_once(spec, limit)
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "stderr_tail"}), flush=True)
    return rows


def fuzz(examples: int) -> dict:
    report = HERE / f"fuzz_{examples}.json"
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "fuzz", "-p",
                           "no:cacheprovider", "--fuzz-examples", str(examples), "--fuzz-report",
                           str(report), str(ROOT / "tests" / "test_fuzz.py")],
                          capture_output=True, text=True, cwd=ROOT)
    summary = json.loads(report.read_text())
    summary.update({"pytest_exit_code": proc.returncode, "wall_s": round(time.perf_counter() - start, 1),
                    "load_after": _load()})
    report.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limits", action="store_true")
    parser.add_argument("--only", default=None)
    parser.add_argument("--fuzz", type=int, default=0)
    args = parser.parse_args()
    if args.limits:
        load_at_start = _load()
        rows = limits(args.only)
        name = "limits.json" if not args.only else f"limits_{args.only}.json"
        (HERE / name).write_text(json.dumps({"commit": _commit(), "load_at_start": load_at_start,
                                             "load_at_end": _load(), "within_target": sum(
                                                 r["within_target"] for r in rows),
                                             "runs_total": len(rows), "runs": rows}, indent=2) + "\n")
        print(f"{sum(r['within_target'] for r in rows)} of {len(rows)} runs within 1.1 T + 1 s; "
              f"load average at start {load_at_start}, at end {_load()}")
    if args.fuzz:
        print(json.dumps(fuzz(args.fuzz), indent=2))


if __name__ == "__main__":
    main()
