"""A/B timing of the completion bound's rounding margin (review finding F3).

Solves the growth chains of ``run.py`` (pp=4, c=8, 1F1B; slack and tight families,
128/256/512 layers) with the chain DP twice per variant, alternating: ``margin`` (the
code as it is: the margin of ``completion.rounding_margin`` in the completion bounds and
the partition test) and ``none`` (the margin patched to 0, as before F3; the partition
reach test then keeps its old relative 1e-12). Prints one JSON row per solve (wall, CPU, termination, primal)
and the per-instance CPU ratio; writes ``benchmarks/dp/rounding_ab.json``.

Run: ``.venv/bin/python benchmarks/dp/rounding_ab.py`` (about 2 min on 2 shared cores).
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))

from run import chain_tables  # noqa: E402

from autopar_opt.solvers.dp import completion, partition, solve_dp  # noqa: E402
from autopar_opt.ir.training import SearchSpace  # noqa: E402

REAL = completion.rounding_margin


def solve(tables, variant: str) -> dict:
    margin = REAL if variant == "margin" else (lambda n, pp: 0.0)
    completion.rounding_margin = partition.rounding_margin = margin
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        res = solve_dp(tables, 60.0)
        return {"variant": variant, "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                "termination": res.termination.value, "primal_s": res.primal, "lower_bound_s": res.lower_bound}
    finally:
        completion.rounding_margin = partition.rounding_margin = REAL


def main() -> None:
    rows = []
    load = os.getloadavg()[0]
    for family in ("slack", "tight"):
        for layers in (128, 256, 512):
            tables = chain_tables(layers, family, SearchSpace())
            for variant in ("none", "margin", "none", "margin"):
                row = {"family": family, "layers": layers, **solve(tables, variant)}
                print(json.dumps(row), flush=True)
                rows.append(row)
    summary = []
    for family in ("slack", "tight"):
        for layers in (128, 256, 512):
            mine = [r for r in rows if r["family"] == family and r["layers"] == layers]
            cpu = {v: min(r["cpu_s"] for r in mine if r["variant"] == v) for v in ("none", "margin")}
            same = len({(r["termination"], r["primal_s"]) for r in mine}) == 1
            summary.append({"family": family, "layers": layers, "cpu_none_s": cpu["none"],
                            "cpu_margin_s": cpu["margin"], "ratio": cpu["margin"] / cpu["none"],
                            "same_answer": same})
            print(json.dumps(summary[-1]), flush=True)
    out = {"load_start": load, "load_end": os.getloadavg()[0], "rows": rows, "summary": summary,
           "when_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime())}
    pathlib.Path(__file__).with_name("rounding_ab.json").write_text(json.dumps(out, indent=1) + "\n")
    print(f"load average {out['load_start']:.2f} -> {out['load_end']:.2f}")


if __name__ == "__main__":
    main()
