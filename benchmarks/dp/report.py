"""Render benchmarks/dp/{growth,uniap,large}.json as Markdown (RESULTS.md).

Usage: python benchmarks/dp/report.py > benchmarks/dp/RESULTS.md
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _f(x, spec=".3f") -> str:
    return "-" if x is None else format(x, spec)


def growth(doc: dict) -> list[str]:
    load = doc.get("load_average_at_start")
    out = ["## Growth of one configuration (pp=4, c=8, 1F1B, batch 64, seq 2048): DP, MILP, whole command", "",
           f"{doc['machine']}; {doc['run_utc']}; time limit {doc['limit_s']:.0f} s per solve; "
           f"load average at start {_f(load and load[0], '.1f')}, at end "
           f"{_f(doc.get('load_average_at_end') and doc['load_average_at_end'][0], '.1f')} "
           "(2 shared cores). `DP s` = the DP on the tables (tables excluded), wall clock, and `DP CPU s` its "
           "own CPU time (the machine is shared: wall clock runs above CPU time under load); `MILP s` = HiGHS alone "
           "(no DP start or bound) on the MILP that `autopar solve --solver highs` builds for the same tables "
           "(`form`: `blocks` = the aggregated block MILP of formulations/blocks.py, `direct` = the per-layer "
           "matrix), build included; `CLI s` / `CLI MiB` = the whole "
           "`autopar solve --solver dp` command on a generated spec of the same model and configuration, "
           "wall clock and peak RSS of the subprocess, with its status, gap and inner "
           "(`solver.wall_time_s`) time; `highs CLI` = the same command with `--solver highs` (DP warm start, "
           "then the MILP), wall clock, status and gap.", "",
           "| series | family | layers | K | DP s | DP CPU s | DP termination | DP gap | primal s | MILP s | "
           "form | MILP termination | MILP gap | CLI s | CLI inner s | CLI MiB | CLI status | CLI gap | "
           "highs CLI s | highs CLI status | highs CLI gap |",
           "|---|---|---:|---:|---:|---:|---|---:|---:|---:|---|---|---:|---:|---:|---:|---|---:|---:|---|---:|"]
    for r in doc["rows"]:
        out.append(f"| {r['series']} | {r['family']} | {r['layers']} | {r['K']} | "
                   f"{r['dp_s']:.2f} | {_f(r.get('dp_cpu_s'), '.2f')} | {r['termination']} | {_f(r['gap'], '.2e')} | "
                   f"{_f(r['primal_s'], '.5f')} | {_f(r.get('milp_s'), '.2f')} | {r.get('milp_form', '-')} | "
                   f"{r.get('milp_termination', '-')} | {_f(r.get('milp_gap'), '.2e')} | "
                   f"{_f(r.get('cli_s'), '.2f')} | {_f(r.get('cli_inner_s'), '.2f')} | "
                   f"{_f(r.get('cli_peak_mib'), '.0f')} | {r.get('cli_status', '-')} | "
                   f"{_f(r.get('cli_gap'), '.2e')} | {_f(r.get('cli_highs_s'), '.2f')} | "
                   f"{r.get('cli_highs_status', '-')} | {_f(r.get('cli_highs_gap'), '.2e')} |")
    out += ["", "Growth exponents (least-squares slope of log time vs log layers or log K, "
            "rows solved to optimality only):", ""]
    for k, v in doc["exponents"].items():
        out.append(f"- {k}: **{_f(v, '.2f')}**")
    return out + [""]


def inception(doc: dict) -> list[str]:
    out = ["## Inception-v3 DAG, one stage: PaSE-style DP vs MILP (same tables)", "",
           f"{doc['machine']}; {doc['run_utc']}; time limit {doc['limit_s']:.0f} s.", "",
           "| devices | layers | K | DP s | DP termination | DP primal s | MILP s | MILP termination | "
           "MILP primal s |", "|---|---:|---:|---:|---|---:|---:|---|---:|"]
    for r in doc["rows"]:
        out.append(f"| {r['family']} | {r['layers']} | {r['K']} | {r['dp_s']:.2f} | {r['termination']} | "
                   f"{_f(r['primal_s'], '.6f')} | {r['milp_s']:.2f} | {r['milp_termination']} | "
                   f"{_f(r['milp_primal_s'], '.6f')} |")
    return out + [""]


def search(doc: dict, title: str) -> list[str]:
    out = [f"## {title}", "",
           f"{doc['machine']}; {doc['run_utc']}; time limit {doc['limit_s']:.0f} s per search. "
           "`dp` = `--solver dp`; `highs` = `--solver highs --no-warm-start` (the MILP alone). "
           "wall = the whole search (tables, bounds, every configuration, re-pricing).", "",
           "| model | cluster | solver | status | gap | wall s | inner s | plan | primal s | "
           "DP/MILP primal |", "|---|---|---|---|---:|---:|---:|---|---:|---:|"]
    rows = doc["rows"]
    pairs = {}
    for r in rows:
        pairs.setdefault((r["model"], r["cluster"]), {})[r["solver"]] = r
    for (model, cluster), by in pairs.items():
        dp, mip = by.get("dp"), by.get("highs")
        ratio = (dp["primal_s"] / mip["primal_s"]) if dp and mip and dp["primal_s"] and mip["primal_s"] else None
        for r in (dp, mip):
            if r is None:
                continue
            out.append(f"| {model} | {cluster} | {r['solver']} | {r['status']} | {_f(r['gap'], '.2e')} | "
                       f"{r['wall_s']:.2f} | {r['inner_s']:.2f} | {r['plan']} | {_f(r['primal_s'], '.5f')} | "
                       f"{_f(ratio, '.6f') if r is dp else ''} |")
    dps = [p["dp"] for p in pairs.values() if "dp" in p]
    mips = [p["highs"] for p in pairs.values() if "highs" in p]
    if dps and mips:
        out += ["", f"Median wall: DP {statistics.median(r['wall_s'] for r in dps):.2f} s, "
                f"MILP {statistics.median(r['wall_s'] for r in mips):.2f} s; max wall: DP "
                f"{max(r['wall_s'] for r in dps):.2f} s, MILP {max(r['wall_s'] for r in mips):.2f} s; "
                f"median inner (solver) time: DP {statistics.median(r['inner_s'] for r in dps):.2f} s, "
                f"MILP {statistics.median(r['inner_s'] for r in mips):.2f} s; "
                f"instances at gap <= 0.1%: DP {sum(r['gap'] <= 1e-3 for r in dps)}/{len(dps)}, "
                f"MILP {sum(r['gap'] <= 1e-3 for r in mips)}/{len(mips)}."]
    return out + [""]


def main() -> None:
    lines = ["# DP fallback benchmark (issue 4)", "",
             "Recorded by `benchmarks/dp/run.py --part growth|uniap|large`, rendered by "
             "`benchmarks/dp/report.py`. Shared 2-core machine: times are noisy; compare ratios "
             "within one run.", ""]
    for part, title in (("growth", None), ("inception", None),
                        ("uniap", "UniAP suite: whole search, DP vs MILP"),
                        ("large", "Llama-3-70B on 1024 H100: whole search, DP vs MILP")):
        path = HERE / f"{part}.json"
        if not path.exists():
            lines += [f"## {part}: not recorded", ""]
            continue
        doc = json.loads(path.read_text())
        lines += (growth(doc) if part == "growth" else inception(doc) if part == "inception"
                  else search(doc, title))
    notes = HERE / "NOTES.md"
    if notes.exists():
        lines += [notes.read_text()]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
