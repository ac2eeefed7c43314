"""Deadlines of ``place``, ``capacity`` and ``calibrate`` (issue 33), the whole command timed.

``place``: graphs of 10^5, 3·10^5 and 10^6 operators with ``--time-limit 10`` (and the
10^5 chain without a limit): a public-format chain written here, the zoo's synthetic
transformer small enough to fit 8 A100-80GB, and the issue's own 10^6-node transformer
(which needs 13 TB: proven infeasible). ``capacity --time-limit``: the shipped
84-scenario sweep. ``calibrate --time-limit``: ``--fit`` and ``--cross-validate`` on the
published runs. Target: every run within 1.1·T + 1 s, answering 0 (a plan), 3 (proven
infeasible) or 4 (none within the limit, with its bound).

Each run is the command a user types (``benchmarks/clitime.py``: wall clock, CPU time,
peak memory of the child). Writes ``deadlines.json`` and ``DEADLINES.md`` here.

Usage: python benchmarks/robustness/deadlines.py [--only place|capacity|calibrate]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))

from clitime import commit, load_average, run_cli  # noqa: E402


def _chain(path: Path, n: int) -> Path:
    """A public-format chain of ``n`` operators, one colour class each, 8 accelerators."""
    with open(path, "w") as f:
        f.write('{"maxSizePerFPGA": 1e12, "maxFPGAs": 8, "maxCPUs": 1, "nodes": [')
        f.write(",".join(f'{{"name": "n{i}", "id": {i}, "supportedOnFpga": 1, "cpuLatency": 10.0, '
                         f'"fpgaLatency": {1.0 + i % 7}, "isBackwardNode": 0, "colorClass": {i}, '
                         f'"size": 1000.0}}' for i in range(n)))
        f.write('], "edges": [')
        f.write(",".join(f'{{"sourceId": {i}, "destId": {i + 1}, "cost": 0.5}}' for i in range(n - 1)))
        f.write("]}")
    return path


def _zoo(path: Path, nodes: int, small: bool) -> Path:
    graph = {"zoo": "synthetic_transformer", "nodes": nodes}
    if small:
        graph.update(hidden=256, seq=128, batch=1)
    path.write_text(json.dumps({"placement": {"graph": graph, "devices": [
        {"type": "A100-80GB", "count": 8}]}}))
    return path


def place_runs(tmp: Path) -> list[dict]:
    cases = [("chain 1e5 (public format)", _chain(tmp / "chain_1e5.json", 100_000), 10.0),
             ("chain 1e5 (public format)", tmp / "chain_1e5.json", None)]
    for n in (100_000, 300_000, 1_000_000):
        cases.append((f"synthetic transformer {n:.0e}, h=256", _zoo(tmp / f"z{n}.json", n, True), 10.0))
    cases.append(("synthetic transformer 1e6, h=1024 (13 TB)", _zoo(tmp / "big.json", 1_000_000, False),
                  10.0))
    rows = []
    for name, path, limit in cases:
        args = ["place", path, "--json", "--out", tmp / "out"]
        if limit is not None:
            args += ["--time-limit", limit]
        r = run_cli(args, timeout_s=600)
        doc = r.pop("json") or {}
        rows.append({"command": "place", "case": name, "limit_s": limit, **_verdict(r, limit),
                     "status": doc.get("status"), "value": doc.get("value"),
                     "lower_bound": doc.get("lower_bound"), "gap": doc.get("gap")})
        print(rows[-1], flush=True)
    return rows


def capacity_runs(tmp: Path) -> list[dict]:
    rows = []
    for limit in (20.0, 60.0):
        r = run_cli(["capacity", ROOT / "examples" / "capacity_llama3_70b.yaml", "--json",
                     "--time-limit", limit, "--store", tmp / f"store{limit:g}.sqlite"],
                    timeout_s=900)
        doc = r.pop("json") or {}
        run = doc.get("run") or {}
        rows.append({"command": "capacity", "case": "capacity_llama3_70b.yaml (84 scenarios)",
                     "limit_s": limit, **_verdict(r, limit),
                     "status": f"{run.get('computed', '?')} solved, "
                               f"{len(run.get('not_run', []))} not run"})
        print(rows[-1], flush=True)
    return rows


def calibrate_runs(tmp: Path) -> list[dict]:
    runs = ROOT / "tests" / "data" / "published_runs.yaml"
    rows = []
    for name, extra, limit in (("--fit", ["--fit", "--output", tmp / "fit.yaml"], 5.0),
                               ("--cross-validate family", ["--cross-validate", "family"], 10.0),
                               ("--cross-validate family", ["--cross-validate", "family"], 30.0)):
        r = run_cli(["calibrate", runs, *extra, "--json", "--time-limit", limit], timeout_s=900)
        doc = r.pop("json") or {}
        rows.append({"command": "calibrate", "case": name, "limit_s": limit, **_verdict(r, limit),
                     "status": ("families left out: " + str(len(doc.get("families_left_out", []))))
                     if "cross" in name else f"fit written: {bool(doc.get('written'))}"})
        print(rows[-1], flush=True)
    return rows


def _verdict(r: dict, limit: float | None) -> dict:
    target = None if limit is None else 1.1 * limit + 1.0
    return {"exit_code": r["exit_code"], "wall_s": r["wall_s"], "cpu_s": r["cpu_s"],
            "peak_rss_mib": r["peak_rss_mib"], "load_before": r["load_before"],
            "target_s": None if target is None else round(target, 2),
            "within": None if target is None else r["wall_s"] <= target,
            "stderr_tail": r["stderr_tail"][-200:] if r["exit_code"] not in (0, 3, 4) else ""}


def markdown(result: dict) -> str:
    lines = ["# Deadlines of place, capacity and calibrate (issue 33)", "",
             f"Recorded {result['date']} on the shared 2-core development machine, commit "
             f"{result['commit']}; the load average before each run is in its row (other "
             "sessions' test suites share the two cores: wall clock / CPU time shows the "
             f"contention). Command: `{result['command_line']}`.", "",
             "Each run is the whole command as a subprocess (interpreter start-up, reading, the "
             "solve, the baselines, writing the outputs). Target: wall ≤ 1.1·T + 1 s.", "",
             "| command | case | T s | target s | wall s | CPU s | within | exit | status | "
             "peak MiB | load before |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["runs"]:
        lines.append(f"| {r['command']} | {r['case']} | {r['limit_s'] or '-'} | "
                     f"{r['target_s'] or '-'} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | "
                     f"{'-' if r['within'] is None else ('yes' if r['within'] else 'NO')} | "
                     f"{r['exit_code']} | {r['status']} | {r['peak_rss_mib']:.0f} | "
                     f"{r['load_before']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=["place", "capacity", "calibrate"])
    a = ap.parse_args()
    runs: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, fn in (("place", place_runs), ("capacity", capacity_runs),
                         ("calibrate", calibrate_runs)):
            if a.only in (None, name):
                runs += fn(Path(tmp))
    result = {"date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "commit": commit(), "load_after": load_average(),
              "command_line": "python benchmarks/robustness/deadlines.py " + " ".join(sys.argv[1:]),
              "runs": runs}
    (HERE / "deadlines.json").write_text(json.dumps(result, indent=1) + "\n")
    (HERE / "DEADLINES.md").write_text(markdown(result))


if __name__ == "__main__":
    main()
