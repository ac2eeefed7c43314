"""Command benchmark (issue 18): ``estimate``, ``place`` and ``capacity`` timed as
the user runs them, one subprocess each (:mod:`benchmarks.clitime`: wall
clock, CPU time, peak RSS of the child, interpreter start-up included).

* ``autopar estimate EX --json`` on every bundled example that holds a plan
  (target: <= 1 s each);
* ``autopar place G --json`` on the ten public placement instances
  (``tests/data/placement/throughput``, the default exact method);
* ``autopar capacity SWEEP --json --workers 1`` on the small test sweep
  (``tests/data/capacity/tiny.yaml``), into a results store of its own: once
  solving every scenario, once reusing them all; the 84-scenario sweep has its
  own benchmark (``benchmarks/capacity``).

Writes results.json and RESULTS.md next to this file.

Usage: python benchmarks/commands/run.py [--only estimate|place|capacity]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: the commit the run measured (read when it starts)
COMMIT = ["?"]
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
from clitime import commit, load_average, run_cli  # noqa: E402

ESTIMATE_TARGET_S = 1.0


def estimate_jobs() -> list[list[str]]:
    """Every example spec with a ``plan:`` section (estimate prices that plan)."""
    out = []
    for path in sorted((ROOT / "examples").rglob("*.yaml")):
        text = path.read_text()
        if path.name.startswith("capacity_") or "\nplan:" not in "\n" + text:
            continue
        out.append(["estimate", str(path.relative_to(ROOT)), "--json"])
    return out


def place_jobs() -> list[list[str]]:
    return [["place", str(p.relative_to(ROOT)), "--json"]
            for p in sorted((ROOT / "tests" / "data" / "placement" / "throughput").glob("*.json"))]


#: a results store of this run's own (the default one under ~/.cache may already hold the
#: sweep's rows, and then nothing would be solved)
STORE = Path(tempfile.mkdtemp(prefix="autopar-bench-")) / "store.sqlite"


def capacity_jobs() -> list[list[str]]:
    """The sweep solved (an empty store), then again from the store it filled (every row reused)."""
    cmd = ["capacity", "tests/data/capacity/tiny.yaml", "--json", "--workers", "1", "--store", str(STORE)]
    return [cmd, cmd]


def measure(args: list[str], kind: str) -> dict:
    run = run_cli(args, timeout_s=900)
    doc = run.pop("json") or {}
    row = {"kind": kind, **run}
    if kind == "estimate":
        row["iteration_time_s"] = (doc.get("metrics") or {}).get("iteration_time_s")
    elif kind == "place":
        row["status"], row["gap"] = doc.get("status"), doc.get("gap")
    elif kind == "capacity":
        row["computed"], row["reused"] = (doc.get("run") or {}).get("computed"), (doc.get("run") or {}).get("reused")
        row["command"] = row["command"].replace(str(STORE), "TMP/store.sqlite") + (
            f"  ({row['computed']} solved, {row['reused']} reused)")
    return row


def write_results(rows: list[dict], path: Path, started: str) -> None:
    lines = ["# Command benchmark: estimate, place, capacity as the user runs them", "",
             f"Machine: {platform.processor() or platform.machine()}, 2 cores shared with other "
             f"sessions, Python {platform.python_version()}; started {started}, finished "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at commit {COMMIT[0]}; "
             "load average after: "
             f"{load_average()}. Each row is one subprocess (`benchmarks/clitime.py`): wall clock, "
             "the child's CPU time and peak RSS; wall far above CPU means the command waited for "
             "the processor (shared machine).", ""]
    for kind, title in (("estimate", f"estimate (target <= {ESTIMATE_TARGET_S:g} s each)"),
                        ("place", "place (exact, default method)"),
                        ("capacity", "capacity (small sweep, 1 worker: solved into an empty store, then all reused)")):
        sel = [r for r in rows if r["kind"] == kind]
        if not sel:
            continue
        lines += [f"## {title}", "", "| command | exit | wall s | CPU s | peak RSS MiB | load before |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| `{r['command']}` | {r['exit_code']} | **{r['wall_s']:.2f}** | {r['cpu_s']:.2f} | "
                  f"{r['peak_rss_mib']:.0f} | {r['load_before']} |" for r in sel]
        walls, cpus = [r["wall_s"] for r in sel], [r["cpu_s"] for r in sel]
        lines += ["", f"{len(sel)} runs; wall median {statistics.median(walls):.2f} s, max "
                  f"{max(walls):.2f} s; CPU median {statistics.median(cpus):.2f} s, max "
                  f"{max(cpus):.2f} s."]
        if kind == "estimate":
            lines.append(f"Within {ESTIMATE_TARGET_S:g} s wall: "
                         f"{sum(w <= ESTIMATE_TARGET_S for w in walls)}/{len(sel)}; CPU within "
                         f"{ESTIMATE_TARGET_S:g} s: {sum(c <= ESTIMATE_TARGET_S for c in cpus)}/{len(sel)}.")
        lines.append("")
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=None, help="estimate | place | capacity")
    args = ap.parse_args()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    COMMIT[0] = commit()        # before this run writes its own records
    groups = {"estimate": estimate_jobs, "place": place_jobs, "capacity": capacity_jobs}
    rows = []
    for kind, jobs in groups.items():
        if args.only and args.only != kind:
            continue
        for cmd in jobs():
            row = measure(cmd, kind)
            print(json.dumps({k: row[k] for k in ("command", "exit_code", "wall_s", "cpu_s",
                                                   "peak_rss_mib")}), flush=True)
            rows.append(row)
    (HERE / "results.json").write_text(json.dumps(rows, indent=1) + "\n")
    write_results(rows, HERE / "RESULTS.md", started)


if __name__ == "__main__":
    main()
