"""Runnable plans on the zoo's frontier and MoE examples, for every target (issue 29).

For each example and target (``--runnable-by megatron | torchtitan | deepspeed |
none``) the command a user types, ``autopar solve SPEC --runnable-by T --json``,
runs as a subprocess (benchmarks/clitime.py: wall clock from start-up to exit,
CPU time, peak memory) under its default time limit (the spec's). Recorded:
status, certified gap, whole-command time, the runnable optimum, the free
space's certified bound and the price of runnability (plan.json's
``runnability``), and the plan's degrees. Target: proven within 1% in <= 60 s.

Then plan quality: each example's published recipe (its spec ``plan:``) priced
by ``autopar estimate --json`` beside the runnable optimum of the recipe's own
framework, on the same cluster and batch, with the comparison ``solve`` itself
writes (plan.json ``baselines[].comparison``, generated from the two cost
breakdowns by autopar_opt/search/compare.py: which terms differ).

    python benchmarks/runnable/run.py            # writes benchmarks/runnable/RESULTS.md
    python benchmarks/runnable/run.py mixtral_8x22b_128_h100.yaml   # only these rows
                                                 # (the other rows are kept from RESULTS.md)
"""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from clitime import commit, load_average, run_cli  # noqa: E402

ROOT = HERE.parents[1]
#: (example, the framework of its published recipe, where the recipe comes from)
EXAMPLES = [
    ("llama31_405b_16384_h100.yaml", "megatron", "Llama 3 paper, Table 4 (TP8 CP1 PP16 DP128)"),
    ("deepseek_v3_2048_h800.yaml", "megatron", "DeepSeek-V3 report Sec. 3.2 (PP16 EP64 ZeRO-1)"),
    ("mixtral_8x22b_128_h100.yaml", "megatron", "NeMo 2.0 recipe mixtral_8x22b (TP2 PP4 VP14 CP2 EP8)"),
    ("qwen3_235b_256_h100.yaml", "megatron",
     "Megatron-Bridge qwen3_235b_a22b_pretrain_config (TP4 PP16 CP2 EP8 ETP1)"),
    ("mixtral_8x7b_2x8_h100.yaml", "megatron",
     "hand-chosen MoE starting point in the spec (TP2 PP2 EP4 SP ZeRO-1 full recompute)"),
]
TARGETS = ["megatron", "torchtitan", "deepspeed", "none"]


def _degrees(plan: dict | None) -> str:
    if not plan:
        return "-"
    from autopar_opt.reports.sections import plan_degree_lines

    lines = plan_degree_lines(plan)
    vp = plan.get("vp_chunks") or 1
    sched = f" interleaved vp{vp}" if plan.get("schedule") == "interleaved" and vp > 1 else ""
    return f"pp{plan['pp']} c{plan['microbatches']}{sched}: " + " / ".join(
        line.split(": ", 1)[1] for line in lines[:2]) + (" ..." if len(lines) > 2 else "")


def _f(x, fmt="{:.4g}") -> str:
    return fmt.format(x) if isinstance(x, (int, float)) else str(x)


def main(only: list[str]) -> int:
    started = dt.datetime.now(dt.timezone.utc)
    rows, quality = [], []
    for example, recipe_fw, recipe_src in EXAMPLES:
        if only and example not in only:
            continue
        spec = ROOT / "examples" / example
        best: dict[str, dict] = {}
        for target in TARGETS:
            load = load_average()
            r = run_cli(["solve", str(spec), "--runnable-by", target, "--json"], timeout_s=900)
            doc = r["json"] or {}
            cert = doc.get("certificate") or {}
            run = doc.get("runnability") or {}
            best[target] = doc
            rows.append({
                "example": example, "target": target, "exit": r["exit_code"],
                "status": doc.get("status", "?"), "gap": cert.get("gap"),
                "wall_s": r["wall_s"], "cpu_s": r["cpu_s"], "rss": r["peak_rss_mib"],
                "primal": cert.get("primal"), "free_lb": run.get("free_lower_bound"),
                "free_status": run.get("free_status", "-"),
                "price": (run.get("price_low"), run.get("price_high")),
                "plan": _degrees(doc.get("plan")), "load": load,
                "command": r["command"].replace(f"{ROOT}/", ""),   # no machine path in the record
                "configs": len(cert.get("configurations") or []),
            })
            print(rows[-1]["example"], target, rows[-1]["status"], _f(rows[-1]["gap"]),
                  f"{r['wall_s']:.1f}s", flush=True)
        est = run_cli(["estimate", str(spec), "--json"], timeout_s=600)
        m = (est["json"] or {}).get("metrics") or {}
        opt = best[recipe_fw]
        value = (opt.get("certificate") or {}).get("primal")
        user = next((b for b in opt.get("baselines") or [] if b.get("name") == "user plan"), {})
        why = (user.get("comparison") or {}).get("text", "-")
        quality.append({"example": example, "recipe": recipe_src, "framework": recipe_fw,
                        "recipe_s": m.get("iteration_time_s"), "recipe_fits": m.get("feasible"),
                        "recipe_peak": max(m.get("peak_memory_gib") or [0.0]),
                        "optimum_s": value, "optimum_plan": _degrees(opt.get("plan")),
                        "status": opt.get("status"), "why": why, "load": load_average()})
    _write(rows, quality, started, only)
    return 0


def _kept(only: list[str]) -> tuple[list[str], list[str], list[str]]:
    """The previous record's result rows, plan-quality rows and commands of the
    examples not re-run (``only``), so a partial run keeps them (their own
    date and commit are in the record's header list)."""
    path = HERE / "RESULTS.md"
    if not only or not path.exists():
        return [], [], []
    text = path.read_text().splitlines()
    keep = lambda line: line.startswith("| ") and not any(f"| {ex} |" in line for ex in only) \
        and not line.startswith("| example")
    quality_at = next((i for i, line in enumerate(text) if line.startswith("## Plan quality")),
                      len(text))
    rows = [line for line in text[:quality_at] if keep(line)]
    qual = [line for line in text[quality_at:] if keep(line)]
    cmds = [line for line in text if line.startswith("    autopar ")
            and not any(ex in line for ex in only)]
    return rows, qual, cmds


def _write(rows: list[dict], quality: list[dict], started: dt.datetime, only: list[str]) -> None:
    old_rows, old_quality, old_cmds = _kept(only)
    history = []
    path = HERE / "RESULTS.md"
    if only and path.exists():
        history = [line for line in path.read_text().splitlines() if line.startswith("Recorded ")]
    this = (f"Recorded {started:%Y-%m-%d %H:%M} UTC, commit {commit()}, by "
            f"`python benchmarks/runnable/run.py{' ' + ' '.join(only) if only else ''}` on a 2-core "
            "machine shared with other jobs (load average before each command in the table: "
            "timings are noisy)" + (f"; rows of {', '.join(only)} only, the others kept from the "
                                    "earlier record(s) below." if only else "."))
    out = [f"# Runnable plans: targets on the frontier and MoE examples (issue 29)", "",
           this, ""] + [x for h in history if h != this for x in (h, "")] + [
           "Each row is the command a user types, timed from start-up to exit as a subprocess "
           "(benchmarks/clitime.py), under the spec's own time limit: "
           "`autopar solve examples/X.yaml --runnable-by T --json`. `none` is the free per-layer "
           "space. Price of runnability: the runnable optimum against the free space's "
           "certified bound (an interval from the two certificates: runnable bound / free plan - 1 "
           "to runnable plan / free bound - 1). Target: proven within 1% in <= 60 s.", "",
           "Schedules: none of these examples states `search.schedules`, so each target searches "
           "its default (`Target.default_schedules`): megatron 1f1b + interleaved (its virtual "
           "pipeline on the even split), torchtitan and DeepSpeed 1f1b; `none` keeps the spec's "
           "(the free space as a bound on megatron's). Llama-3.1-405B (126 layers), "
           "DeepSeek-V3 (61) and Qwen3-235B (94) split evenly over none of their pp degrees, so "
           "interleaving adds no configuration there; Mixtral-8x22B listed both before they were "
           "the default. A plan column without a schedule is 1F1B.", "",
           "| example | target | status | gap | wall s | CPU s | peak MiB | configs | runnable optimum s | free bound s | price of runnability | plan | load |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"] + old_rows
    for r in rows:
        lo, hi = r["price"]
        price = "-" if r["target"] == "none" or not isinstance(lo, float) else \
            (f"{100 * lo:.3g}%" if isinstance(hi, float) and abs(hi - lo) < 1e-9 + 1e-3 * abs(hi)
             else f"{100 * lo:.3g}% - {100 * hi:.3g}%" if isinstance(hi, float) else f">= {100 * lo:.3g}%")
        gap = f"{100 * r['gap']:.3g}%" if isinstance(r["gap"], float) else str(r["gap"])
        out.append(f"| {r['example']} | {r['target']} | {r['status']} | {gap} | {r['wall_s']:.1f} | "
                   f"{r['cpu_s']:.1f} | {r['rss']:.0f} | {r['configs']} | {_f(r['primal'])} | "
                   f"{_f(r['free_lb'])} ({r['free_status']}) | {price} | {r['plan']} | {r['load']} |")
    out += ["", "## Plan quality: the published recipes priced by the model", "",
            "`autopar estimate examples/X.yaml --json` prices the example's `plan:` (the published "
            "recipe, as written in the spec's description) on the same cluster and batch as the "
            "search; beside it the certified runnable optimum of the recipe's framework.", "",
            "Why: `solve`'s own comparison of the spec's plan with its answer (plan.json "
            "`baselines[].comparison.text`), generated from the two cost breakdowns: above 5% it "
            "names the three terms that differ most (recipe vs optimum) and the least memory "
            "headroom of each.", "",
            "| example | recipe | recipe s/iter | fits | recipe peak GiB | runnable optimum s/iter | optimum / recipe | optimum plan | why (generated) |",
            "|---|---|---|---|---|---|---|---|---|"] + old_quality
    for q in quality:
        ratio = (q["optimum_s"] / q["recipe_s"]) if isinstance(q["optimum_s"], float) and \
            isinstance(q["recipe_s"], float) and q["recipe_s"] > 0 else None
        out.append(f"| {q['example']} | {q['recipe']} | {_f(q['recipe_s'])} | {q['recipe_fits']} | "
                   f"{_f(q['recipe_peak'], '{:.1f}')} | {_f(q['optimum_s'])} ({q['status']}) | "
                   f"{_f(ratio, '{:.3f}')} | {q['optimum_plan']} | {q.get('why', '-')} |")
    out += ["", "Commands:", ""] + old_cmds + [f"    {r['command']}" for r in rows] + [""]
    (HERE / "RESULTS.md").write_text("\n".join(out))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
