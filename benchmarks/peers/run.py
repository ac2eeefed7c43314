"""Benchmark: the peers' own instances solved through the CLI, as a user runs them.

Every run is the whole command ``autopar solve SPEC --json --solver S
--time-limit L`` in a subprocess: wall clock and peak memory (``ru_maxrss`` of
the child) are measured around it; optimum, bound, gap, status and the
plan's shape come from its JSON. Settings follow tests/data/peers/*/README:

- PaSE: every shipped table (``--solver dp``; ``--mip`` adds HiGHS);
- Piper: every instance × k ∈ {2, 4, 8, 16, 32, 64, 128, 512} at 8 GiB and
  25 GiB/s (N = 1920 for BERT as in ``single()``, the file's for GNMT and
  ResNet), and ResNet at the (k, memory) pairs of ``runResnet()``.

Usage: ``python benchmarks/peers/run.py pase|piper [--time-limit S] [--solver dp] [--only NAME]``;
writes ``benchmarks/peers/<which>_results.json`` and prints a Markdown table.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "peers"
CLI = [sys.executable, "-m", "autopar_opt.cli.commands"]
PIPER_K = [2, 4, 8, 16, 32, 64, 128, 512]
RESNET_PAIRS = ([(8, m) for m in (4, 8, 16)] + [(k, m) for k in (16, 32) for m in (1.5, 2, 4, 8, 16)]
                + [(k, m) for k in (64, 128) for m in (1, 1.5, 2, 4, 8, 16)])


def run_one(problem: dict, solver: str, limit: float) -> dict:
    """Run the CLI on one problem; returns the measured row."""
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "spec.json"
        spec.write_text(json.dumps({"problem": problem, "solver": {"name": solver}}))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(CLI + ["solve", str(spec), "--json", "--time-limit", str(limit)],
                              capture_output=True, text=True, cwd=ROOT)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    row = {"exit_code": proc.returncode, "cli_wall_s": round(wall, 3),
           "peak_rss_mib": round(after.ru_maxrss / 1024, 1),
           "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 3)}
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        row["error"] = proc.stderr[-500:]
        return row
    cert, plan = doc["certificate"], doc["plan"]
    row.update(status=doc["status"], optimum=cert["primal"], lower_bound=cert["lower_bound"],
               gap=cert["gap"], solve_wall_s=doc["wall_time_s"], message=cert["message"])
    if plan and "stages" in plan:
        row.update(stages=len(plan["stages"]), devices_used=plan["devices_used"],
                   stage_shapes=[[len(s["nodes"]), s["t"], s["d"]] for s in plan["stages"]])
    return row


def pase_rows(solver: str, limit: float) -> list[dict]:
    rows = []
    for path in sorted((DATA / "pase").glob("*.json.gz")):
        row = {"table": path.name, "solver": solver, **run_one({"format": "pase", "file": str(path)}, solver, limit)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def piper_rows(solver: str, limit: float, only: str | None = None) -> list[dict]:
    runs = [(name, k, 8.0) for name in ("bert32a100", "gnmt", "resnet") for k in PIPER_K]
    runs += [("resnet", k, m) for k, m in RESNET_PAIRS]
    runs = [r for r in runs if only is None or r[0] == only]
    rows = []
    for name, k, mem in runs:
        problem = {"format": "piper", "file": str(DATA / "piper" / f"{name}.json"), "devices": k,
                   "memory_per_device_gib": mem, "bandwidth_gib_per_s": 25.0}
        if name == "bert32a100":
            problem["microbatches"] = 1920
        row = {"instance": name, "k": k, "memory_gib": mem, "solver": solver, **run_one(problem, solver, limit)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    which = sys.argv[1]
    limit = float(sys.argv[sys.argv.index("--time-limit") + 1]) if "--time-limit" in sys.argv else 60.0
    solver = sys.argv[sys.argv.index("--solver") + 1] if "--solver" in sys.argv else "dp"
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    rows = pase_rows(solver, limit) if which == "pase" else piper_rows(solver, limit, only)
    out = {"which": which, "solver": solver, "time_limit_s": limit, "uptime_load": os.getloadavg(),
           "cpus": os.cpu_count(), "rows": rows}
    (Path(__file__).parent / f"{which}{'_' + only if only else ''}_{solver}_results.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
