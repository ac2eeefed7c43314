"""Which search optima moved with cost model v3 (issue 28), and why.

Two parts, written to ``COST_MODEL_V3.md``:

1. **The search benchmark's instances** (``run.py``'s 46): the v2 figures are
   ``results.json`` as committed at :data:`V2_RESULTS_REV` (recorded 2026-11-24 under cost
   model v2), the v3 figures the file ``run.py`` has just re-recorded. Per instance: the
   chosen pipeline degree and micro-batch count, the iteration time, and whether the optimum
   moved (another plan, or the same plan priced more than 1% differently).
2. **The regimes the issue names** (long context with context parallelism, FSDP at scale):
   the specs in ``regimes/`` solved by the command as shipped under v2 (a checkout of
   :data:`V2_REV`, the last commit before the v3 physics, installed in its own venv: pass its
   ``autopar`` with ``--v2``) and under v3 (this tree), each plan described by its degrees
   (pp, micro-batches and per block tp / cp / dp / ZeRO / recomputation), its time, its
   critical-path breakdown and peak memory.

Usage::

    git worktree add --detach /tmp/v2tree 48125a7
    python3 -m venv /tmp/v2venv   # with the deps of this tree's venv on its path, then
    /tmp/v2venv/bin/pip install --no-deps -e /tmp/v2tree
    python benchmarks/search/cost_model_v3.py --v2 /tmp/v2venv/bin/autopar
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
from clitime import commit, load_average, run_process  # noqa: E402

#: the commit whose results.json holds the v2 figures (unchanged there since 2026-11-24)
V2_RESULTS_REV = "0bae97b"
#: the v2 code the regime instances are solved with (the search benchmark's v2 record)
V2_REV = "48125a7"
#: a plan priced more than this apart under the two models counts as moved
MOVED = 0.01
#: everything below this line of COST_MODEL_V3.md is the hand-written reading of the
#: figures; a re-run keeps it (and must be read against the new figures)
READING_MARK = "<!-- reading: kept by cost_model_v3.py -->"


def _v2_rows() -> dict[str, dict]:
    text = subprocess.run(["git", "show", f"{V2_RESULTS_REV}:benchmarks/search/results.json"],
                          cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return {r["name"]: r for r in json.loads(text)}


def benchmark_table() -> tuple[list[str], int, int]:
    """Markdown rows comparing the committed v2 figures with the re-recorded v3 ones."""
    v2 = _v2_rows()
    v3 = {r["name"]: r for r in json.loads((HERE / "results.json").read_text())}
    lines = ["| instance | group | v2 plan | v2 iteration s | v3 plan | v3 iteration s | v3 / v2 "
             "| moved |", "|---|---|---|---|---|---|---|---|"]
    moved = same = 0
    for name, b in v3.items():
        a = v2.get(name)
        if a is None or a.get("primal_s") is None or b.get("primal_s") is None:
            lines.append(f"| {name} | {b.get('group')} | {a and a.get('plan')} | - | "
                         f"{b.get('plan')} | {b.get('primal_s')} | - | not comparable |")
            continue
        ratio = b["primal_s"] / a["primal_s"]
        plan_moved = a["plan"] != b["plan"]
        is_moved = plan_moved or abs(ratio - 1) > MOVED
        moved += is_moved
        same += not is_moved
        why = ("plan" if plan_moved else "price") if is_moved else "no"
        lines.append(f"| {name} | {b['group']} | {a['plan']} | {a['primal_s']:.4g} | {b['plan']} | "
                     f"{b['primal_s']:.4g} | {ratio:.3f} | {why} |")
    return lines, moved, same


def describe(doc: dict) -> dict:
    """A plan.json reduced to what the comparison shows."""
    plan, metrics = doc.get("plan") or {}, doc.get("metrics") or {}
    mix: collections.Counter = collections.Counter()
    for stage in plan.get("stages", []):
        for layer, s in zip(stage["layers"], stage["strategies"]):
            if not layer.startswith("block"):
                continue
            mix[f"tp{s.get('tp')}·cp{s.get('cp', 1)}·dp{s.get('dp')}·z{s.get('zero')}·"
                f"{s.get('recompute')}"] += 1
    cert = doc.get("certificate") or {}
    br = metrics.get("breakdown") or {}
    peak = metrics.get("peak_memory_gib")
    if isinstance(peak, list):                  # one figure per stage: the largest
        peak = max(peak) if peak else None
    return {"status": doc.get("status"), "pp": plan.get("pp"), "mb": plan.get("microbatches"),
            "mix": ", ".join(f"{n}x {k}" for k, n in mix.most_common()),
            "time_s": metrics.get("iteration_time_s"), "gap": cert.get("gap"),
            "peak_gib": peak,
            "capacity_gib": metrics.get("memory_capacity_gib"),
            "breakdown": {k: v for k, v in br.items() if isinstance(v, (int, float))}}


def solve(autopar: str, spec: Path) -> tuple[dict, dict]:
    """``autopar solve SPEC --json`` as shipped; returns the timing and the plan described."""
    with tempfile.TemporaryDirectory() as out:
        timing = run_process([autopar, "solve", str(spec), "--json", "--out", out], timeout_s=900)
        plan = Path(out) / "plan.json"
        doc = json.loads(plan.read_text()) if plan.exists() else {}
    return timing, describe(doc)


def _fmt(x, spec: str = ".4g") -> str:
    return "-" if x is None else format(x, spec) if isinstance(x, (int, float)) else str(x)


def regime_table(v2: str, v3: str) -> list[str]:
    lines = ["| instance | model | status | pp | micro-batches | block strategies | iteration s "
             "| peak / capacity GiB | gap | command wall s / CPU s |", "|---|---|---|---|---|---|---|---|---|---|"]
    details = []
    for spec in sorted((HERE / "regimes").glob("*.yaml")):
        for label, exe in (("v2", v2), ("v3", v3)):
            timing, d = solve(exe, spec)
            lines.append(f"| {spec.stem} | {label} | {d['status']} | {_fmt(d['pp'])} | {_fmt(d['mb'])} | "
                         f"{d['mix'] or '-'} | {_fmt(d['time_s'])} | {_fmt(d['peak_gib'], '.1f')} / "
                         f"{_fmt(d['capacity_gib'], '.1f')} | {_fmt(d['gap'], '.2e')} | "
                         f"{timing['wall_s']:.1f} / {timing['cpu_s']:.1f} |")
            if d["breakdown"]:
                details.append(f"- {spec.stem} ({label}): " + ", ".join(
                    f"{k} {v:.4g}" for k, v in d["breakdown"].items()))
            print(spec.stem, label, d["status"], d["pp"], d["mb"], d["mix"], d["time_s"], flush=True)
    return lines + ["", "Critical-path breakdown of each plan (seconds, plan.json `metrics.breakdown`):", ""] \
        + details


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--v2", required=True, help="the autopar executable of the v2 checkout")
    ap.add_argument("--v3", default=str(Path(sys.executable).parent / "autopar"))
    args = ap.parse_args()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load0 = load_average()
    bench, moved, same = benchmark_table()
    regimes = regime_table(args.v2, args.v3)
    out = ["# Search optima under cost model v3 (issue 28)", "",
           f"Run {started} at commit {commit()} on a shared 2-core machine (load {load0} before, "
           f"{load_average()} after). v2 figures: `results.json` at {V2_RESULTS_REV} (recorded "
           "2026-11-24 under cost model v2); v3: `results.json` as `run.py` re-recorded it. A "
           f"plan is 'moved' when its pp / micro-batch count changed ('plan') or its time moved by "
           f"more than {MOVED:.0%} ('price').", "",
           f"## The search benchmark's instances: {moved} moved, {same} kept", ""] + bench + [
           "", "## Regime instances: long context with CP, FSDP at 512 GPUs", "",
           f"Solved by `autopar solve SPEC --json` (as shipped, the spec's own limit) with the v2 "
           f"code of {V2_REV} and with this tree (v3).", ""] + regimes
    path = HERE / "COST_MODEL_V3.md"
    old = path.read_text() if path.exists() else ""
    reading = old[old.index(READING_MARK):] if READING_MARK in old else READING_MARK + "\n"
    path.write_text("\n".join(out) + "\n\n" + reading)
    print("wrote", HERE / "COST_MODEL_V3.md")


if __name__ == "__main__":
    main()
