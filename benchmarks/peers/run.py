"""Benchmark: the peers' own instances, solved by the command exactly as the README shows it,
beside the peer's own code in the same loop (issue 35).

Ours: ``autopar solve SPEC --json`` with no other flag (the spec holds only ``problem:``;
its solver is the default ``auto``), as a subprocess (``benchmarks/clitime.py``: wall
clock, CPU and peak memory of the child, start-up included).

The peer, where it builds here, in the same loop (the order alternates row by row):

- **Piper** (Tarnawski, Narayanan, Phanishayee, NeurIPS 2021; github.com/msr-fiddle/piper,
  MIT): ``--piper-src DIR`` is a checkout of that repository; this script writes a
  20-line driver that includes its ``algo.cpp`` (its ``main`` renamed), reads the same
  JSON file, sets k, M, B (and N) as our spec does and times ``Graph::runDP``; it is
  compiled with ``g++ -O3`` into a temporary folder at run time (nothing of Piper's is
  stored here). The row times the whole driver process (JSON read included).
- **PaSE** (Elango, IPDPS 2021; github.com/baidu-research/PaSE, Apache 2.0):
  ``--pase-src DIR --pase-python PY`` runs its own ``scheduler.py -p P -b B -g MODEL``
  (which builds its tables and runs its DP) with a Python that has numpy, pandas < 2 and
  networkx; without them the row says "not run".
- A peer run is stopped after ``--peer-limit`` seconds (default 300; recorded as ">").

Settings (``tests/data/peers/*/README.md``): Piper BERT-32 (N = 1920), GNMT and ResNet-50
at 8 GiB, 25 GiB/s for k in 2 ... 1024, and ResNet at the (k, memory) pairs of Piper's
``runResnet()``; PaSE: every shipped table and, with ``--pase-tables DIR``, the tables
``make_pase_tables.py`` writes there (held out: 32 and 64 devices).

Targets (issue 35): every run proven optimal (or infeasible), whole command within
max(peer's time, 1 s) and at most 10 s, peak memory at most 2 GiB.

Usage: python benchmarks/peers/run.py piper|pase [--piper-src DIR] [--pase-src DIR
--pase-python PY] [--pase-tables DIR] [--only NAME] [--peer-limit S]
Writes benchmarks/peers/<which>_results.json; ``report.py`` renders RESULTS.md tables.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
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

DATA = ROOT / "tests" / "data" / "peers"
PIPER_K = [2, 4, 8, 16, 32, 64, 128, 512, 1024]
#: Piper's runResnet() pairs (k, GiB)
RESNET_PAIRS = [(8, 4.0), (8, 16.0), (16, 1.5), (16, 2.0), (16, 4.0), (16, 16.0), (32, 1.5),
                (32, 2.0), (32, 4.0), (32, 16.0), (64, 1.0), (64, 1.5), (64, 2.0), (64, 4.0),
                (64, 16.0), (128, 1.0), (128, 1.5), (128, 2.0), (128, 4.0), (128, 16.0)]

DRIVER = r"""// Benchmark driver for Piper's algo.cpp: one instance at the given settings.
#define main piper_experiments_main
#include "algo.cpp"
#undef main
int main(int argc, char **argv) {
    json j; std::ifstream f(argv[1]); f >> j;
    Instance ins = j.get<Instance>();
    ins.maxDevices = atoi(argv[2]);
    ins.maxMemoryPerDevice = atof(argv[3]) * (1 << 30);
    ins.bandwidth = atof(argv[4]) * (1LL << 30);
    if (argc > 5) ins.mbsInBatch = atoi(argv[5]);
    clock_t start = clock();
    Graph g(ins);
    Result r = g.runDP();
    double cpu = (clock() - start) * 1.0 / CLOCKS_PER_SEC;
    if (r.stages.empty()) std::cout << "{\"tps\": null, \"dp_cpu_s\": " << cpu << "}\n";
    else std::cout << std::setprecision(17) << "{\"tps\": " << g.getTPSForResult(r)
                   << ", \"dp_cpu_s\": " << cpu << "}\n";
    return 0;
}
"""


def timed(cmd: list[str], limit_s: float, cwd: Path | None = None) -> dict:
    """Wall clock, CPU and peak memory of one process (killed after ``limit_s``)."""
    r = run_process(cmd, limit_s, cwd)
    r["stdout"] = r["stdout"].decode(errors="replace")[-2000:]
    del r["stderr"]
    return r


def build_piper(src: Path, work: Path) -> Path:
    """Compile the driver against ``src/algo.cpp`` (g++ -O3); returns the executable."""
    if not (src / "algo.cpp").is_file():
        raise SystemExit(f"--piper-src {src}: no algo.cpp there (a checkout of msr-fiddle/piper)")
    (work / "piper_driver.cpp").write_text(DRIVER)
    exe = work / "piper_run"
    subprocess.run(["g++", "-O3", "-w", f"-I{src}", "-o", str(exe), str(work / "piper_driver.cpp")],
                   check=True)
    return exe


def ours(problem: dict, tmp: Path) -> dict:
    """The command as the README shows it: ``autopar solve SPEC --json``, no other flag."""
    spec = tmp / "spec.json"
    spec.write_text(json.dumps({"problem": problem}))
    got = run_cli(["solve", spec, "--json"], timeout_s=900)
    doc, row = got.pop("json"), got
    row["command"] = "autopar solve SPEC --json"
    if doc is None:
        return row
    cert = doc["certificate"]
    row.update(status=doc["status"], primal=cert["primal"], lower_bound=cert["lower_bound"],
               gap=cert["gap"], method=cert["method"],
               methods=[(m["method"], m["status"]) for m in cert.get("methods", [])])
    return row


def verdict(row: dict) -> dict:
    """The issue's targets for one row."""
    mine = row["ours"]
    peer = row.get("peer") or {}
    proven = mine.get("status") in ("optimal", "infeasible") and mine.get("exit_code") in (0, 3)
    # a peer stopped at --peer-limit took at least that long
    allowed = max(peer.get("wall_s", 0.0) if (peer.get("ran") or peer.get("timed_out")) else 0.0, 1.0)
    return {"proven": proven, "within_peer_or_1s": mine["wall_s"] <= allowed,
            "within_10s": mine["wall_s"] <= 10.0, "within_2gib": mine["peak_rss_mib"] <= 2048,
            "ratio_to_peer": (round(mine["wall_s"] / peer["wall_s"], 3)
                              if peer.get("ran") and peer["wall_s"] > 0 else None)}


def piper_rows(args, exe: Path | None) -> list[dict]:
    runs = [(name, k, 8.0) for name in ("bert32a100", "gnmt", "resnet") for k in PIPER_K]
    runs += [("resnet", k, m) for k, m in RESNET_PAIRS]
    runs = [r for r in runs if args.only is None or r[0] == args.only]
    rows = []
    for n, (name, k, mem) in enumerate(runs):
        path = DATA / "piper" / f"{name}.json"
        problem = {"format": "piper", "file": str(path), "devices": k, "memory_per_device_gib": mem,
                   "bandwidth_gib_per_s": 25.0}
        cmd = None
        if exe is not None:
            cmd = [str(exe), str(path), str(k), str(mem), "25"]
            if name == "bert32a100":
                cmd.append("1920")
        if name == "bert32a100":
            problem["microbatches"] = 1920
        row = {"instance": name, "k": k, "memory_gib": mem, "load_before": load_average()}
        with tempfile.TemporaryDirectory() as tmp:
            order = ("peer", "ours") if n % 2 else ("ours", "peer")
            for who in order:
                if who == "ours":
                    row["ours"] = ours(problem, Path(tmp))
                elif cmd is not None:
                    got = timed(cmd, args.peer_limit)
                    try:
                        res = json.loads(got["stdout"].strip().splitlines()[-1])
                    except (ValueError, IndexError):
                        res = {}
                    row["peer"] = {"ran": not got["timed_out"] and got["exit_code"] == 0,
                                   **{k2: got[k2] for k2 in ("wall_s", "cpu_s", "peak_rss_mib",
                                                              "timed_out")},
                                   "tps": res.get("tps"), "dp_cpu_s": res.get("dp_cpu_s")}
        row["targets"] = verdict(row)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def pase_rows(args) -> list[dict]:
    tables = sorted((DATA / "pase").glob("*.json.gz"))
    if args.pase_tables:
        tables += sorted(Path(args.pase_tables).glob("*.json.gz"))
    tables = [t for t in tables if args.only is None or args.only in t.name]
    rows = []
    for n, path in enumerate(tables):
        head = gzip.open(path, "rt").read(4096)        # the metadata keys come first
        meta = {k: (v if k == "model" else int(v)) for k in ("model", "p", "batch")
                for v in re.findall(rf'"{k}":\s*"?(\w+)"?', head)[:1]}
        row = {"table": path.name, "held_out": path.parent != DATA / "pase", "p": meta.get("p"),
               "model": meta.get("model"), "load_before": load_average()}
        with tempfile.TemporaryDirectory() as tmp:
            order = ("peer", "ours") if n % 2 else ("ours", "peer")
            for who in order:
                if who == "ours":
                    row["ours"] = ours({"format": "pase", "file": str(path)}, Path(tmp))
                elif args.pase_src and args.pase_python:
                    got = timed([args.pase_python, "scheduler.py", "-p", str(meta["p"]), "-b",
                                 str(meta["batch"]), "-g", meta["model"]], args.peer_limit,
                                cwd=Path(args.pase_src))
                    total = re.findall(r"Total cost: ([0-9.eE+]+)", got["stdout"])
                    row["peer"] = {"ran": not got["timed_out"] and got["exit_code"] == 0,
                                   **{k: got[k] for k in ("wall_s", "cpu_s", "peak_rss_mib",
                                                          "timed_out")},
                                   "total_cost": float(total[-1]) if total else None}
        row["targets"] = verdict(row)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("which", choices=["piper", "pase"])
    ap.add_argument("--piper-src", type=Path)
    ap.add_argument("--pase-src", type=Path)
    ap.add_argument("--pase-python")
    ap.add_argument("--pase-tables")
    ap.add_argument("--only")
    ap.add_argument("--peer-limit", type=float, default=300.0)
    args = ap.parse_args()
    began = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    load0 = load_average()
    with tempfile.TemporaryDirectory() as work:
        exe = build_piper(args.piper_src, Path(work)) if args.which == "piper" and args.piper_src \
            else None
        rows = piper_rows(args, exe) if args.which == "piper" else pase_rows(args)
    out = {"which": args.which, "started": began, "load_before": load0, "load_after": load_average(),
           "cpus": os.cpu_count(), "commit": commit(), "command": "autopar solve SPEC --json",
           "peer": ("Piper algo.cpp (g++ -O3) via benchmarks/peers/run.py's driver"
                    if args.which == "piper" and args.piper_src else
                    "PaSE scheduler.py" if args.pase_src else "not run"),
           # the peers' source folders are machine paths: recorded by their option name only
           "argv": [a if not os.path.isabs(a) else "DIR" for a in sys.argv[1:]], "rows": rows}
    name = f"{args.which}{'_' + args.only if args.only else ''}_results.json"
    (HERE / name).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
