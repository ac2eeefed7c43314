"""Render benchmarks/placement/RESULTS.md from results.json (no measurement here)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
#: published single-threaded C++ DP times (data README)
PUBLISHED_DP_S = {"LayerGraphs_bert24_inference": 0.01, "OperatorGraphs_bert_l-6_training": 12.5}


def f(x, nd: int = 6) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    return f"{x:.{nd}g}"


def pct(x) -> str:
    return "—" if x is None else f"{100 * x:.3g}%"


def head(sec: dict) -> str:
    load = max(sec["loadavg_before"][0], sec["loadavg_after"][0])
    busy = load > 1.5 * sec["cpus"] / 2   # above ~1.5 runnable tasks per 2 cores: contended
    note = ("other sessions were running: wall times are inflated accordingly" if busy
            else "nothing else was running")
    return (f"Recorded {sec['recorded_utc']} UTC on a shared {sec['cpus']}-core machine; load "
            f"average {sec['loadavg_before'][0]:.1f} before, {sec['loadavg_after'][0]:.1f} after "
            f"({note}).\n")


def main() -> None:
    res = json.loads((HERE / "results.json").read_text())
    out = ["# Placement benchmarks", "",
           "Each row times the whole `autopar place ... --json` command as a subprocess "
           "(`process s`: wall clock including Python start-up and imports; `peak MiB`: peak "
           "RSS of the child, `benchmarks/clitime.py`; the start-up table uses /usr/bin/time) "
           "beside the solver's own `wall_time_s`. Modules are byte-compiled, as in a normal "
           "install (the runner unsets PYTHONDONTWRITEBYTECODE). Run: "
           "`.venv/bin/python benchmarks/placement/run.py startup shared latency inception && "
           ".venv/bin/python benchmarks/placement/report.py` (about 10 min at load 6: start-up "
           "7 s, shared 2.7 min, latency 4.4 min, Inception 2 min); `run.py` with no section "
           "also runs milp, scale and growth (about 60 min).", ""]
    if "startup" in res:
        sec = res["startup"]
        out += ["## Process start-up (fixed cost of every command)", "", head(sec),
                "| command | min wall s | median wall s | peak MiB |", "|---|---|---|---|"]
        for r in sec["rows"]:
            out.append(f"| `{r['command']}` | {f(r['min_wall_s'], 3)} | {f(r['median_wall_s'], 3)} | "
                       f"{f(r['peak_rss_mib'], 4)} |")
        out.append("")
    if "shared" in res:
        sec = res["shared"]
        out += ["## Shared throughput instances (contiguous max-load, `--solver auto` = DP)", "",
                head(sec), "`C++ s`: the published single-threaded C++ DP (data README: 0.01 s on "
                "bert24 … 12.5 s on bert_l-6 training; only these two end points are published). "
                "`solver s`: the command's own `wall_time_s` (first call in a fresh process, best "
                "of the repeats); `warm s`: the solver alone in-process, best of 5 after one call "
                "(the figure comparable with a compiled DP's running time); `process s` / `CPU s`: "
                "the whole `autopar place FILE --json` command (best of the repeats); `+report s`: "
                "one run with `--expert --out` (baselines, expert split, HTML report). `units`: "
                "after condensation (and chain coarsening, where the small-lattice path does not "
                "skip it).", "",
                "| instance | optimum (ours) | known optimum | rel. diff | gap | status | units | "
                "solver s | warm s | process s | CPU s | +report s | peak MiB | C++ s | "
                "warm / C++ | solver / C++ | process / C++ | expert split | expert / ours |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in sec["rows"]:
            diff = abs(r["value"] - r["known_optimum"]) / r["known_optimum"] if r.get("value") else None
            exp = r.get("expert")
            cpp = PUBLISHED_DP_S.get(r["instance"])
            det = r.get("details", {})
            co = det.get("coarsening", {})
            units = (f"{co['units_before']} → {det.get('units', '?')}" if co
                     else f"{det.get('units', '?')}") if det else "—"
            ratio = lambda x: f(x / cpp, 3) if cpp and x else "—"  # noqa: E731
            out.append(f"| {r['instance']} | {f(r.get('value'))} | {r['known_optimum']} | "
                       f"{f(diff, 2)} | {pct(r.get('gap'))} | {r.get('status')} | {units} | "
                       f"{f(r.get('wall_time_s'), 3)} | {f(r.get('solver_warm_s'), 3)} | "
                       f"{f(r['process_wall_s'], 3)} | {f(r.get('process_cpu_s'), 3)} | "
                       f"{f(r.get('process_with_report_s'), 3)} | "
                       f"{f(r['peak_rss_mib'], 4)} | {cpp if cpp else '—'} | "
                       f"{ratio(r.get('solver_warm_s'))} | {ratio(r.get('wall_time_s'))} | "
                       f"{ratio(r['process_wall_s'])} | {f(exp)} | "
                       f"{f(exp / r['value'], 4) if exp and r.get('value') else '—'} |")
        out.append("")
    if "milp" in res:
        sec = res["milp"]
        out += ["## The same instances with the MILP (`--solver highs`)", "", head(sec),
                "`start`: the MIP start handed to HiGHS (`contiguous DP`: the DP's placement, "
                "given when it beats the heuristics; primal side only). `MILP bound`: the dual "
                "bound HiGHS proves for the formulation, whose floor on `L` includes the "
                "communication-aware pigeonhole bound (`cut_bounds.py`); no DP value enters it.",
                "", "| instance | MILP value | MILP bound | gap | status | start | known optimum | "
                "time limit s | solver s | process s |", "|---|---|---|---|---|---|---|---|---|---|"]
        for r in sec["rows"]:
            det = r.get("details", {})
            out.append(f"| {r['instance']} | {f(r.get('value'))} | {f(det.get('milp_bound'))} | "
                       f"{pct(r.get('gap'))} | {r.get('status')} | {det.get('milp_start', '—')} | "
                       f"{r['known_optimum']} | {r['time_limit_s']:g} | "
                       f"{f(r.get('wall_time_s'), 4)} | {f(r['process_wall_s'], 4)} |")
        hs = [r for r in sec["rows"] if "heuristic_start" in r]
        if hs:
            out += ["", "The transfer-dominated instances from the greedy topological split "
                    "alone (in-process `run_milp`, no DP anywhere):", "",
                    "| instance | value | MILP bound | floor | floor s | status | total s |",
                    "|---|---|---|---|---|---|---|"]
            for r in hs:
                h = r["heuristic_start"]
                out.append(f"| {r['instance']} | {f(h['value'])} | {f(h['milp_bound'])} | "
                           f"{f(h['floor'])} | {f(h['floor_s'], 3)} | {h['status']} | "
                           f"{f(h['total_s'], 3)} |")
        out.append("")
    if "latency" in res:
        sec = res["latency"]
        out += ["## Latency instances (`--objective latency`)", "", head(sec),
                "`critical path`: cheapest times, free transfers; `path DP`: the best "
                "path-segmentation bound (`latency_bounds.py`); `sum DP`: the latency of the "
                "placement of the DP over ideals that minimises the sum of the block loads (the "
                "incumbent handed to the MILP as its start).", "",
                "| instance | latency | lower bound | gap | status | method | critical path | "
                "path DP | sum DP | solver s | process s |",
                "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in sec["rows"]:
            det = r.get("details", {})
            lb = det.get("latency_bounds") or {}
            paths = [v for k, v in lb.items() if k.startswith("path_") and v is not None]
            out.append(f"| {r['instance']} | {f(r.get('value'))} | {f(r.get('lower_bound'))} | "
                       f"{pct(r.get('gap'))} | {r.get('status')} | {r.get('method')} | "
                       f"{f(lb.get('critical_path'))} | {f(max(paths) if paths else None)} | "
                       f"{f(det.get('serial_dp'))} | "
                       f"{f(r.get('wall_time_s'), 4)} | {f(r['process_wall_s'], 4)} |")
        out.append("")
    if "scale" in res:
        sec = res["scale"]
        out += ["## Scale: synthetic transformer op graphs, time to a 1% gap (`--gap 0.01`)", "",
                head(sec), "| nodes | devices | value (ms) | lower bound | gap | status | method | "
                "solver s | process s | peak MiB |", "|---|---|---|---|---|---|---|---|---|---|"]
        for r in sec["rows"]:
            out.append(f"| {r['nodes']:,} | {r['devices']} | {f(r.get('value'))} | "
                       f"{f(r.get('lower_bound'))} | {pct(r.get('gap'))} | {r.get('status')} | "
                       f"{r.get('method')} | {f(r.get('wall_time_s'), 4)} | "
                       f"{f(r['process_wall_s'], 4)} | {f(r['peak_rss_mib'], 4)} |")
        out.append("")
    if "growth" in res:
        sec = res["growth"]
        rows = [r for r in sec["rows"] if r.get("exit_code") == 0]
        n = np.array([r["nodes"] for r in rows], float)
        t = np.array([r["process_wall_s"] for r in rows], float)
        ts = np.array([r["wall_time_s"] for r in rows], float)
        slope = np.polyfit(np.log(n), np.log(t), 1)[0] if len(rows) > 1 else float("nan")
        slope_s = np.polyfit(np.log(n), np.log(ts), 1)[0] if len(rows) > 1 else float("nan")
        out += ["## Growth: time against node count (8 devices, `--gap 0.01`)", "", head(sec),
                "| nodes | process s | solver s | gap | method |", "|---|---|---|---|---|"]
        for r in rows:
            out.append(f"| {r['nodes']:,} | {f(r['process_wall_s'], 4)} | {f(r['wall_time_s'], 4)} | "
                       f"{pct(r.get('gap'))} | {r.get('method')} |")
        out += ["", f"Fitted exponent (least squares on log-log): process time ∝ n^{slope:.2f}, "
                    f"solver time ∝ n^{slope_s:.2f}.", ""]
    if "inception" in res:
        sec = res["inception"]
        out += ["## Inception-v3 (zoo graph, 8 x A100-80GB, exact)", "", head(sec),
                "| granularity | nodes | units (coarsened) | ideals | value (ms) | lower bound | gap | "
                "status | method | solver s | process s | peak MiB |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in sec["rows"]:
            det = r.get("details", {})
            out.append(f"| {r['granularity']} | {r.get('num_nodes', '—')} | {det.get('units', '—')} | "
                       f"{det.get('ideals', '—')} | {f(r.get('value'))} | {f(r.get('lower_bound'))} | "
                       f"{pct(r.get('gap'))} | {r.get('status')} | {r.get('method')} | "
                       f"{f(r.get('wall_time_s'), 4)} | {f(r['process_wall_s'], 4)} | "
                       f"{f(r.get('peak_rss_mib'), 4)} |")
        out.append("")
    notes = HERE / "NOTES.md"
    if notes.exists():
        out += [notes.read_text()]
    (HERE / "RESULTS.md").write_text("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
