"""Benchmark: Piper's instances solved in-process by the exact DP, without a time limit.

Complements ``run.py`` (the whole CLI command under a wall-clock limit): here
every run goes to its proven end, and both the wall clock and the process CPU
time of the solve are recorded (on a shared machine the CPU time is the
honest figure; the file read and the imports are excluded). Grid as in
``run.py``: every instance × k ∈ {2, …, 512} at 8 GiB, 25 GiB/s, and ResNet at
the ``runResnet()`` (k, M) pairs.

Usage: ``python benchmarks/peers/inprocess.py [--only NAME] [--grid]`` (``--grid``: the
8 GiB k-grid only, without ResNet's (k, M) pairs); writes
``benchmarks/peers/piper_inprocess[_NAME][_grid].json`` and prints one JSON row per run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from run import DATA, PIPER_K, RESNET_PAIRS  # noqa: E402

from autopar_opt.peers.piper.dp import solve_piper_dp  # noqa: E402
from autopar_opt.peers.piper.format import load_piper  # noqa: E402


def main() -> None:
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    runs = [(name, k, 8.0) for name in ("gnmt", "bert32a100", "resnet") for k in PIPER_K]
    grid = "--grid" in sys.argv
    if not grid:
        runs += [("resnet", k, m) for k, m in RESNET_PAIRS]
    rows = []
    for name, k, mem in runs:
        if only is not None and name != only:
            continue
        inst = load_piper(DATA / "piper" / f"{name}.json")
        inst = dataclasses.replace(inst, devices=k, memory_bytes=mem * 2**30, bandwidth=25 * 2**30,
                                   microbatches=1920 if name == "bert32a100" else inst.microbatches)
        wall, cpu = time.perf_counter(), time.process_time()
        out = solve_piper_dp(inst)
        row = {"instance": name, "k": k, "memory_gib": mem, "status": out.termination.value,
               "optimum": out.primal, "lower_bound": out.lower_bound,
               "solve_wall_s": round(time.perf_counter() - wall, 3),
               "solve_cpu_s": round(time.process_time() - cpu, 3),
               "stages": len(out.solution.stages) if out.solution else None,
               "knapsacks": out.stats.get("knapsacks"), "load": os.getloadavg()[0]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    name = "piper_inprocess" + (f"_{only}" if only else "") + ("_grid" if grid else "") + ".json"
    (HERE / name).write_text(json.dumps({"cpus": os.cpu_count(), "uptime_load": os.getloadavg(),
                                         "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
