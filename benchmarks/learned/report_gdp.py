"""RESULTS_gdp.md from exact_gdp.json, pretrain_gdp.json and runs_gdp.json (run_gdp.py).

Every ratio is a plan's max-load (priced by evaluate_placement) over the instance's proven
optimum, or over its proven lower bound where the exact side did not close the gap (then
marked "≥": the ratio to the optimum is at most that). GDP's per-node decoder can emit
every feasible placement, so its ceiling is the optimum and its ratio to its ceiling is
its ratio to the optimum; the block decoder's ceiling is given beside it for contrast.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

BUDGETS = ["10.0", "60.0", "300.0"]


def _ratio_text(values: list[float | None]) -> str:
    ok = [v for v in values if v is not None]
    if not ok:
        return "none"
    mean = statistics.fmean(ok)
    sd = statistics.stdev(ok) if len(ok) > 1 else 0.0
    miss = len(values) - len(ok)
    text = f"{mean:.4f}" + (f" ± {sd:.4f}" if len(ok) > 1 else "")
    return text + (f" ({miss} none)" if miss else "") + (f" [n={len(ok)}]" if len(ok) != 3 else "")


def _ref(row: dict) -> tuple[float, str]:
    """The reference (optimum when proven, else the lower bound) and its label."""
    if row["status"] == "optimal":
        return row["value"], "optimum"
    return row["lower_bound"], "lower bound"


def longest(runs: list[dict]) -> list[dict]:
    """One run per (instance, mode, seed): the longest. Its trace gives the shorter budgets'
    values, so a seed run at both 60 s and 300 s is counted once, not twice."""
    best: dict[tuple, dict] = {}
    for r in runs:
        k = (r["instance"], r["mode"], r["seed"])
        if k not in best or r["budget_s"] > best[k]["budget_s"]:
            best[k] = r
    return list(best.values())


def write_report(here: Path) -> None:
    from run_gdp import LARGE, PUBLIC, TEST, TRAIN, ZOO_TRAIN

    ex = json.loads((here / "exact_gdp.json").read_text())
    rows = ex["rows"]
    pre = json.loads((here / "pretrain_gdp.json").read_text()) if \
        (here / "pretrain_gdp.json").exists() else {"seeds": {}}
    runs = json.loads((here / "runs_gdp.json").read_text())["runs"] if \
        (here / "runs_gdp.json").exists() else []

    kept = longest(runs)

    def sel(name: str, mode: str) -> list[dict]:
        return [r for r in kept if r["instance"] == name and r["mode"] == mode]

    def at(rs: list[dict], budget: str, ref: float) -> list[float | None]:
        return [(r["at"].get(budget) / ref) if r["at"].get(budget) else None
                for r in rs if budget in r["at"]]

    hp_runs = [r for r in json.loads((here / "runs_hp.json").read_text())["runs"]
               if r["variant"] == "hp"] if (here / "runs_hp.json").exists() else []

    def hp_text(name: str, ref: float) -> str:
        """The hierarchical planner (run_hp.py, as published) at its longest budget."""
        rs = [r for r in hp_runs if r["instance"] == name]
        if not rs:
            return "-"
        vals = [r["value"] / ref if r["feasible"] else None for r in rs]
        if all(v is None for v in vals):
            return (f"none feasible ({sum(r['samples'] for r in rs):,} samples, "
                    f"{len(rs)} seeds x {rs[0]['budget_s']:.0f} s)")
        return _ratio_text(vals)

    runs_doc = json.loads((here / "runs_gdp.json").read_text()) if runs else {}
    machines = runs_doc.get("machines", [])
    clock = ("CPU seconds of the run's process (one compute thread), which are wall seconds on "
             "an idle core: on this shared machine each run gets the compute of an idle core"
             if runs_doc.get("clock") == "cpu" else "wall clock, under the load above")
    lines = ["# GDP as published: per-node decoder, pre-training, zero-shot, fine-tuning "
             "(issue 32)", "",
             f"Exact side and baselines: {ex['machine']}.", ""]
    for m in machines:
        lines.append(f"Searcher runs: {m}.")
    lines += ["", "Ratios: max-load (priced by evaluate_placement) over the proven optimum, or "
              "over the proven lower bound where marked ≥ (the exact side did not close the gap; "
              "the ratio to the optimum is then at most the figure). GDP's per-node decoder can "
              "emit every feasible placement (tests/unit/learn/test_node_decoder.py), so its "
              "ceiling is the optimum: its ratio to its ceiling is its ratio to the optimum. "
              "Mean ± sd over seeds 0, 1, 2 unless [n=...] says otherwise; the values at "
              f"10/60/300 s are read from one run's trace ({clock}). HP: the hierarchical "
              "planner of Mirhoseini et al. 2018 as published (learn/hp.py: a fixed penalty "
              "for every infeasible placement; its runs, traces and the graded-penalty option: "
              "run_hp.py, RESULTS_hp.md).", "",
              "## Exact side and baselines", "",
              "| instance | nodes | reference (status, s) | block-decoder ceiling | METIS best "
              "(first partition) | greedy split | single device | experts | hierarchical "
              "planner (HP) |",
              "|---|---|---|---|---|---|---|---|---|"]
    for name in PUBLIC + list(LARGE):
        if name not in rows:
            continue
        r = rows[name]
        ref, label = _ref(r)
        ge = "≥ " if label != "optimum" else ""

        def rat(v):
            return "-" if v is None else f"{ge}{v / ref:.4f}"
        metis = r["metis"]
        first = f"{metis['first'] / ref:.4f}" + ("" if metis["first_feasible"] else " infeasible")
        exp = "; ".join(f"{k}: {rat(v['value'])}" + ("" if v["contiguous"] else " (not contiguous)")
                        for k, v in r["experts"].items()) or "-"
        lines.append(f"| {name} | {r['nodes']:,} | {ref:.6g} {label} ({r['status']}, "
                     f"{r['wall_s']:.1f} s) | {rat(r['block_ceiling'])} | {rat(metis['best'])} "
                     f"({first}) | {rat(r['greedy_split'])} | {rat(r['single_device'])} | {exp} | "
                     f"{hp_text(name, ref)} |")
    lines += ["", "## GDP from scratch, and annealing, at 10 / 60 / 300 s", "",
              "| instance | split | GDP @10 s | GDP @60 s | GDP @300 s | anneal @10 s | "
              "anneal @60 s | GDP iterations in 60 s |", "|---|---|---|---|---|---|---|---|"]
    for name in PUBLIC + list(LARGE):
        if name not in rows:
            continue
        ref, _ = _ref(rows[name])
        sc, an = sel(name, "scratch"), sel(name, "anneal")
        its = [r["info"].get("iterations") for r in runs if r["instance"] == name
               and r["mode"] == "scratch" and r["budget_s"] == 60.0]
        lines.append(f"| {name} | {'train' if name in TRAIN else 'test'} | "
                     + " | ".join(_ratio_text(at(sc, b, ref)) for b in BUDGETS) + " | "
                     + " | ".join(_ratio_text(at(an, b, ref)) for b in BUDGETS[:2])
                     + f" | {f'{statistics.fmean(its):.0f}' if its else '-'} |")
    lines += ["", "## Generalisation: pre-trained on TRAIN, placed on unseen graphs", "",
              f"TRAIN (pre-training set): {', '.join(TRAIN)}, and the zoo graphs "
              f"{', '.join(ZOO_TRAIN)}. TEST (never seen in training): {', '.join(TEST)}, "
              f"and {', '.join(LARGE)}.", ""]
    for seed, s in sorted(pre["seeds"].items()):
        lines.append(f"- policy seed {seed}: {s['iterations']} PPO iterations (3 graphs per "
                     f"batch, 16 samples each) in {s['wall_s']:.0f} s, peak RSS "
                     f"{s.get('peak_rss_mib', 0):.0f} MiB")
    lines += ["", "| test graph | zero-shot | fine-tuned @10 s | @60 s | @300 s | from scratch "
              "@60 s |", "|---|---|---|---|---|---|"]
    for name in TEST + list(LARGE):
        if name not in rows:
            continue
        ref, _ = _ref(rows[name])
        ft, sc = sel(name, "finetune"), sel(name, "scratch")
        zero = [r["info"].get("zero_shot_value") / ref if r["info"].get("zero_shot_value") else None
                for r in ft]
        lines.append(f"| {name} | {_ratio_text(zero)} | "
                     + " | ".join(_ratio_text(at(ft, b, ref)) for b in BUDGETS) + " | "
                     + _ratio_text(at(sc, "60.0", ref)) + " |")
    lines += ["", "## Large graphs: time to a feasible plan, cost per iteration", "",
              "Build s: the graph and its placement problem; first feasible s: from the "
              "searcher's start (unit graph, features, the first decode) to its first feasible "
              "plan. Memory per size: the scaling table below (one process per size).", "",
              "| graph | nodes | units | mode | build s | first feasible s | iterations | "
              "s per iteration | s per iteration per 1k units | load |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for name in PUBLIC + list(LARGE):
        for r in sel(name, "scratch") + sel(name, "finetune"):
            if r["seed"] != 0 or (name in PUBLIC and name not in ("OperatorGraphs_bert_l-6_training",)):
                continue
            it = r["info"].get("iterations") or 0
            units = r["info"].get("units") or 0
            per = r["wall_s"] / it if it else None
            lines.append(f"| {name} | {rows[name]['nodes']:,} | {units:,} | {r['mode']} | "
                         f"{r['build_s']:.1f} | {r['first_feasible_s'] or float('nan'):.1f} | {it} | "
                         + (f"{per:.2f} | {1000 * per / max(units, 1):.3f}" if per else "- | -")
                         + f" | {r['load']:.1f} |")
    if (here / "scaling_gdp.json").exists():
        sc = json.loads((here / "scaling_gdp.json").read_text())
        lines += ["", "## Cost per iteration against graph size (GNMT unrolled over 12-100 steps)",
                  "", f"{sc['machine']}. One PPO iteration = 8 sampled placements, pricing, 2 "
                  "epochs; each size in a fresh process.", "",
                  "| steps | nodes | units | prepare s | forward s | iteration s | "
                  "iteration ms per 1k units | peak RSS MiB | load |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in sc["rows"]:
            lines.append(f"| {r['seq']} | {r['nodes']:,} | {r['units']:,} | {r['prepare_s']:.1f} | "
                         f"{r['forward_s']:.2f} | {r['iteration_s']:.1f} | "
                         f"{1e6 * r['iteration_s'] / r['units']:.0f} | {r['peak_rss_mib']:.0f} | "
                         f"{r['load']:.1f} |")
    lines[4:4] = _targets(rows, runs, TEST, LARGE) + [""]
    (here / "RESULTS_gdp.md").write_text("\n".join(lines) + "\n")


def _targets(rows: dict, runs: list[dict], test: list[str], large: dict) -> list[str]:
    """The issue's targets against the recorded runs, and what the record does not cover."""
    seeds = sorted({r["seed"] for r in runs})
    budgets = sorted({r["budget_s"] for r in runs})
    by_budget = {b: sorted({r["seed"] for r in runs if r["budget_s"] == b}) for b in budgets}
    scope = "; ".join(
        f"{b:g} s: " + ", ".join(
            f"seed {k} {sum(r['budget_s'] == b and r['seed'] == k for r in runs)} runs"
            for k in by_budget[b])
        + (" (" + ", ".join(sorted({f"{r['instance']} {r['mode']}" for r in runs
                                    if r["budget_s"] == b})) + ")" if b > 60.0 else "")
        for b in budgets)
    covered = len(seeds) >= 3 and all(
        {r["seed"] for r in runs if r["budget_s"] >= 300.0 and r["instance"] == i
         and r["mode"] == m} >= set(seeds)
        for i, m in {(r["instance"], r["mode"]) for r in runs if r["mode"] != "anneal"})
    zero, fine = [], []
    for name in test:
        if name not in rows:
            continue
        ref, _ = _ref(rows[name])
        for r in longest(runs):
            if r["instance"] == name and r["mode"] == "finetune":
                if r["info"].get("zero_shot_value"):
                    zero.append(r["info"]["zero_shot_value"] / ref)
                if r["at"].get("60.0"):
                    fine.append(r["at"]["60.0"] / ref)
    first = [r["first_feasible_s"] for r in runs if r["instance"] == "gnmt8_52k"
             and r["first_feasible_s"] is not None]

    def met(vals: list[float], limit: float) -> str:
        if not vals:
            return "not recorded"
        return (f"{sum(v <= limit for v in vals)} of {len(vals)} runs within {limit}x "
                f"(range {min(vals):.3f}-{max(vals):.3f})")

    return ["## Targets (issue 32) and the scope of this record", "",
            f"- zero-shot on the unseen public graphs within 1.2x of the optimum: {met(zero, 1.2)};",
            f"- fine-tuned within 1.05x in 60 s: {met(fine, 1.05)};",
            "- a feasible placement of the 52k-node GNMT in <= 60 s: "
            + (f"first feasible plan after {max(first):.1f} s ({len(first)} runs)" if first
               else "not recorded") + ".",
            f"- Scope: seeds {', '.join(map(str, seeds)) or 'none'}; runs by budget: "
            f"{scope or 'none'}. The issue asks for 3 seeds at 10 / 60 / 300 s: "
            + ("covered." if covered else "not fully covered by this record (the [n=...] "
               "counts say how many seeds each figure holds; 'none': not run)."),
            f"- Large graphs: {', '.join(large)} (exact side: lower bounds only where marked >=)."]
