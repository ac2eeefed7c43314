"""``autopar place FILE --json`` (no other flag) beside Tarnawski et al.'s C++ DP, in one loop
(issue 35).

The peer: ``throughput-dp/dp.cpp`` of github.com/msr-fiddle/dnn-partitioning (Tarnawski,
Phanishayee, Devanur, Mahajan, Nogueira Nobre, "Efficient Algorithms for Device Placement
of DNN Graph Operators", NeurIPS 2020; MIT), compiled here at run time with ``g++ -O3``
from ``--dp-src DIR`` (a checkout of that repository; nothing of it is stored here), run
as its README says (``dp.exe < FILE``). Both are timed as whole processes (wall clock,
CPU, peak memory), alternating row by row.

Instances: the public throughput instances (``tests/data/placement/``) and, with
``--dp-src``, the repository's inputs that are not shipped here (held out: GNMT and
Inception-v3 layer graphs, BERT-12 operator graphs).

Target (issue 35): every instance proven optimal by the default ``place``, within the C++
DP's time on the same machine and at most 60 s.

Usage: python benchmarks/placement/versus_cpp.py --dp-src DIR [--only NAME] [--peer-limit S]
(``--report``: rewrite the Markdown from the recorded JSON)
Writes VERSUS_CPP.md and versus_cpp.json next to this file.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
from clitime import commit, load_average, run_cli, run_process  # noqa: E402

SHIPPED = ROOT / "tests" / "data" / "placement"


def timed(cmd: list[str], stdin: Path, limit_s: float) -> dict:
    """The C++ DP on ``stdin`` (:func:`clitime.run_process`) and the max load it prints."""
    r = run_process(cmd, limit_s, stdin=stdin)
    text = r.pop("stdout").decode(errors="replace")
    del r["stderr"]
    value = re.findall(r'"maxLoad"\s*:\s*([0-9.eE+-]+)', text)
    return {**r, "max_load": float(value[0]) if value else None}


def instances(dp_src: Path | None) -> list[tuple[Path, bool]]:
    """The shipped throughput instances, then the repository's others (held out)."""
    shipped = sorted((SHIPPED / "throughput").glob("*.json"))
    names = {p.name for p in shipped}
    rows = [(p, False) for p in shipped]
    if dp_src is not None:
        rows += [(p, True) for p in sorted((dp_src / "throughput-inputs").glob("*/*.json"))
                 if f"{p.parent.name}_{p.name}" not in names]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dp-src", type=Path)
    ap.add_argument("--only")
    ap.add_argument("--peer-limit", type=float, default=600.0)
    ap.add_argument("--report", action="store_true",
                    help="rewrite VERSUS_CPP.md from versus_cpp.json without running anything")
    args = ap.parse_args()
    if args.report:
        print(write_report(json.loads((HERE / "versus_cpp.json").read_text())))
        return
    began, load0 = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), load_average()
    rows = []
    with tempfile.TemporaryDirectory() as work:
        exe = None
        if args.dp_src is not None:
            exe = Path(work) / "dp"
            subprocess.run(["g++", "-O3", "-w", "-o", str(exe),
                            str(args.dp_src / "throughput-dp" / "dp.cpp")], check=True)
        for n, (path, held_out) in enumerate(instances(args.dp_src)):
            if args.only and args.only not in path.name:
                continue
            row = {"instance": f"{path.parent.name}/{path.name}", "held_out": held_out,
                   "load_before": load_average()}
            for who in (("peer", "ours") if n % 2 else ("ours", "peer")):
                if who == "ours":
                    got = run_cli(["place", path, "--json"], timeout_s=900)
                    doc = got.pop("json") or {}
                    row["ours"] = {**{k: got[k] for k in ("wall_s", "cpu_s", "peak_rss_mib",
                                                          "exit_code")},
                                   "status": doc.get("status"), "value": doc.get("value"),
                                   "lower_bound": doc.get("lower_bound"), "method": doc.get("method")}
                elif exe is not None:
                    row["peer"] = timed([str(exe)], path, args.peer_limit)
            o, p = row["ours"], row.get("peer") or {}
            row["targets"] = {"proven": o["status"] == "optimal",
                              "within_cpp": bool(p) and (o["wall_s"] <= p["wall_s"]),
                              "within_60_s": o["wall_s"] <= 60.0}
            rows.append(row)
            print(json.dumps(row), flush=True)
    doc = {"started": began, "load_before": load0, "load_after": load_average(),
           "commit": commit(), "rows": rows}
    (HERE / "versus_cpp.json").write_text(json.dumps(doc, indent=1))
    print(write_report(doc))


def _summary(rows: list[dict]) -> list[str]:
    """The targets over the rows: wall clock (the target's own terms) and CPU time (what a
    shared machine's load inflates least)."""
    n = len(rows)
    both = [r for r in rows if r.get("peer")]
    cpu_le = sum(r["ours"]["cpu_s"] <= r["peer"]["cpu_s"] or r["peer"].get("timed_out")
                 for r in both)

    def count(key: str) -> int:
        return sum(bool(r["targets"][key]) for r in rows)
    return [f"- proven optimal by the default command: {count('proven')} of {n};",
            f"- within the C++ DP's time (wall clock, the peer timed out counts as slower): "
            f"{count('within_cpp')} of {len(both)}; by CPU time: {cpu_le} of {len(both)};",
            f"- at most 60 s: {count('within_60_s')} of {n} by wall clock, "
            f"{sum(r['ours']['cpu_s'] <= 60.0 for r in rows)} of {n} by CPU time.", ""]


def write_report(doc: dict) -> str:
    """VERSUS_CPP.md from the recorded rows (also ``--report``: no re-run)."""
    rows = doc["rows"]
    lines = ["# Placement: the default `place` beside Tarnawski et al.'s C++ DP (issue 35)", "",
             f"Recorded {doc['started']} (commit {doc['commit']}) on a shared 2-core machine, load "
             f"{doc['load_before']} before, {doc['load_after']} after. Ours: `autopar place FILE "
             "--json`; peer: `dp.exe < FILE` (dp.cpp compiled with g++ -O3 at run time). Whole "
             "processes, alternating. The load column is the 1/5/15-minute load average before "
             "the row: above 2 the wall clocks of both sides are inflated (the CPU columns less).",
             "", "Targets (issue 35: every instance proven, within the C++ DP's time, <= 60 s):",
             ""] + _summary(rows) + [
             "| instance | held out | status | value | C++ max load | ours s | ours CPU s | C++ s | "
             "C++ CPU s | ours/C++ | proven | <= C++ | <= 60 s | load |", "|" + "---|" * 14]
    for r in rows:
        o, p, t = r["ours"], r.get("peer") or {}, r["targets"]
        ratio = round(o["wall_s"] / p["wall_s"], 3) if p.get("wall_s") else "-"
        lines.append(f"| {r['instance']} | {'yes' if r['held_out'] else 'no'} | {o['status']} | "
                     f"{o['value']} | {p.get('max_load', '-')} | {o['wall_s']} | {o['cpu_s']} | "
                     f"{('> ' if p.get('timed_out') else '') + str(p.get('wall_s', '-'))} | "
                     f"{p.get('cpu_s', '-')} | {ratio} | "
                     + " | ".join("yes" if t[k] else "**no**" for k in ("proven", "within_cpp",
                                                                        "within_60_s"))
                     + f" | {r['load_before']} |")
    text = "\n".join(lines) + "\n"
    (HERE / "VERSUS_CPP.md").write_text(text)
    return text


if __name__ == "__main__":
    main()
