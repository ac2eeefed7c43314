"""Turn ``benchmarks/peers/*_results.json`` into the Markdown tables of RESULTS.md."""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).parent


def _fmt(x) -> str:
    if isinstance(x, float):
        return f"{x:.6g}"
    return "-" if x is None else str(x)


def table(path: Path) -> str:
    data = json.loads(path.read_text())
    rows = data["rows"]
    key = ["table"] if data["which"] == "pase" else ["instance", "k", "memory_gib"]
    cols = key + ["status", "optimum", "lower_bound", "gap", "solve_wall_s", "cpu_s", "cli_wall_s",
                  "peak_rss_mib"] + ([] if data["which"] == "pase" else ["stages", "devices_used"])
    out = [f"`{path.name}`: solver {data['solver']}, time limit {data['time_limit_s']} s, "
           f"load average at the end {[round(x, 1) for x in data['uptime_load']]} on {data['cpus']} CPUs", "",
           "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        out.append("| " + " | ".join(_fmt(r.get(c, r.get("error", "")[:40] if c == "status" else None))
                                     for c in cols) + " |")
    return "\n".join(out)


if __name__ == "__main__":
    print("\n\n".join(table(Path(p)) for p in sys.argv[1:]))
