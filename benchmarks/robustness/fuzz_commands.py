"""Long fuzz profile over every input kind and every command (issue 33), as subprocesses.

Each case of ``tests/support/fuzz_inputs.py`` (Piper, PaSE, placement graphs and
specs, expert splits, run files, capacity sweeps, plan.json, Hugging Face configs,
fleet and operator-sharding specs, torch.fx graphs, capacity.json and placement.json)
is written to a fresh folder and its command run as ``autopar ...`` in a child
process, reaped with ``os.wait4``: wall clock, CPU time, peak resident memory of the
child. Counted: runs, tracebacks, bad exit codes (not in the command's set),
runs over their bound (1.1 T + 1 s for a command given ``--time-limit T``; 10 s for
the others), and runs above 2 GiB on inputs under 10 MB. Target: 0 / 0 / 0 / 0.

Writes ``fuzz_commands.json`` and ``FUZZ_COMMANDS.md`` next to this file, with the
date, the load average and the command line.

Usage: python benchmarks/robustness/fuzz_commands.py --examples 200 [--kinds piper,pase]
"""

from __future__ import annotations

import argparse
import collections
import datetime as _dt
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(HERE.parent))

from clitime import AUTOPAR, commit, load_average  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from support.fuzz_inputs import KINDS, STRATEGIES  # noqa: E402

#: Bound of a command given no --time-limit (s).
UNBOUNDED_S = 10.0
GIB = 1 << 30


#: Runs the commands from a process of its own, started without site packages: a child
#: forked from this process (hypothesis, the strategies, their base files: ~180 MiB)
#: would carry this process's resident memory in its peak (Linux keeps ``ru_maxrss``
#: across exec), so every run read 179 MiB.
RUNNER = """
import json, os, subprocess, sys, time
for line in sys.stdin:
    job = json.loads(line)
    start = time.perf_counter()
    proc = subprocess.Popen(job["argv"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            cwd=job["cwd"])
    err = proc.stderr.read().decode("utf-8", "replace")
    _, status, usage = os.wait4(proc.pid, 0)
    print(json.dumps({"wall_s": time.perf_counter() - start,
                      "code": os.waitstatus_to_exitcode(status),
                      "cpu_s": usage.ru_utime + usage.ru_stime,
                      "maxrss_kib": usage.ru_maxrss, "stderr": err[-2000:]}), flush=True)
"""


def run_cases(cases: list, workdir: Path) -> list[dict]:
    """Every case as a subprocess of a small runner: exit code, wall, CPU, peak RSS, verdicts."""
    jobs, folders = [], []
    for case in cases:
        folder = Path(tempfile.mkdtemp(dir=workdir))
        folders.append(folder)
        jobs.append({"argv": [str(AUTOPAR), *case.write(folder)], "cwd": str(folder)})
    runner = subprocess.run([sys.executable, "-I", "-S", "-c", RUNNER], input="\n".join(
        json.dumps(j) for j in jobs) + "\n", capture_output=True, text=True, check=True)
    rows = []
    for case, folder, job, line in zip(cases, folders, jobs, runner.stdout.splitlines()):
        got = json.loads(line)
        size = sum(len(v) for v in case.files.values())
        bound = 1.1 * case.time_limit_s + 1.0 if case.time_limit_s else UNBOUNDED_S
        code, err, rss = got["code"], got["stderr"], got["maxrss_kib"] * 1024
        rows.append({"kind": case.kind, "command": case.command, "exit_code": code,
                     "wall_s": round(got["wall_s"], 3), "cpu_s": round(got["cpu_s"], 3),
                     "peak_rss_mib": round(rss / (1 << 20), 1), "input_bytes": size,
                     "bound_s": round(bound, 2), "traceback": "Traceback" in err,
                     "bad_exit": code not in case.allowed, "over_bound": got["wall_s"] > bound,
                     "over_memory": rss > 2 * GIB and size < 10 * (1 << 20),
                     "args": " ".join(a.replace(str(folder), "DIR") for a in job["argv"][1:])[:300],
                     "stderr_tail": err[-300:] if ("Traceback" in err or code not in case.allowed)
                     else ""})
        shutil.rmtree(folder, ignore_errors=True)
    return rows


def run(kinds: list[str], examples: int, workdir: Path) -> list[dict]:
    rows: list[dict] = []
    for kind in kinds:
        cases: list = []

        @settings(max_examples=examples, derandomize=True, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=STRATEGIES[kind]())
        def each(case):
            cases.append(case)
        each()
        done = run_cases(cases, workdir)
        rows += done
        print(f"{kind}: {len(done)} runs, {sum(r['traceback'] for r in done)} tracebacks, "
              f"{sum(r['bad_exit'] for r in done)} bad exit codes, "
              f"{sum(r['over_bound'] for r in done)} over their bound, max "
              f"{max(r['peak_rss_mib'] for r in done):.0f} MiB", flush=True)
    return rows


def summary(rows: list[dict]) -> dict:
    by = collections.defaultdict(list)
    for r in rows:
        by[r["kind"]].append(r)
    def counts(rs):
        return {"runs": len(rs), "tracebacks": sum(r["traceback"] for r in rs),
                "bad_exit_codes": sum(r["bad_exit"] for r in rs),
                "over_bound": sum(r["over_bound"] for r in rs),
                "over_2gib": sum(r["over_memory"] for r in rs),
                "max_wall_s": max((r["wall_s"] for r in rs), default=0.0),
                "max_peak_rss_mib": max((r["peak_rss_mib"] for r in rs), default=0.0),
                "exit_codes": dict(collections.Counter(r["exit_code"] for r in rs))}
    return {"total": counts(rows), "by_kind": {k: counts(v) for k, v in by.items()}}


def markdown(result: dict) -> str:
    s = result["summary"]
    lines = [f"# Fuzzing every input kind through its command (issue 33)", "",
             f"Recorded {result['date']} on the shared 2-core development machine, commit "
             f"{result['commit']}; load average before {result['load_before']}, after "
             f"{result['load_after']}. Command: `{result['command_line']}`.", "",
             "Each run is the command a user types, as a subprocess (interpreter start-up "
             "included): wall clock, CPU and the child's peak resident memory (`os.wait4`). "
             "Bound: 1.1 T + 1 s with `--time-limit T`, else 10 s. Target: 0 tracebacks, 0 bad "
             "exit codes, 0 runs over their bound, no run above 2 GiB on inputs under 10 MB.", "",
             "| kind | runs | tracebacks | bad exit codes | over bound | over 2 GiB | max wall s | "
             "max peak MiB | exit codes |", "|---|---|---|---|---|---|---|---|---|"]
    for kind, c in list(s["by_kind"].items()) + [("**all**", s["total"])]:
        lines.append(f"| {kind} | {c['runs']} | {c['tracebacks']} | {c['bad_exit_codes']} | "
                     f"{c['over_bound']} | {c['over_2gib']} | {c['max_wall_s']:.2f} | "
                     f"{c['max_peak_rss_mib']:.0f} | {c['exit_codes']} |")
    bad = [r for r in result["runs"] if r["traceback"] or r["bad_exit"] or r["over_bound"]
           or r["over_memory"]]
    if bad:
        lines += ["", "Runs that missed a target (first 20):", ""]
        lines += [f"- {r['kind']} `{r['args']}`: exit {r['exit_code']}, {r['wall_s']} s "
                  f"(bound {r['bound_s']}), {r['peak_rss_mib']} MiB; {r['stderr_tail']!r}"
                  for r in bad[:20]]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", type=int, default=100, help="cases per kind")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--out", default=str(HERE))
    a = ap.parse_args()
    kinds = [k for k in a.kinds.split(",") if k]
    load_before = load_average()
    with tempfile.TemporaryDirectory() as tmp:
        rows = run(kinds, a.examples, Path(tmp))
    result = {"date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "commit": commit(), "load_before": load_before, "load_after": load_average(),
              "command_line": "python benchmarks/robustness/fuzz_commands.py " + " ".join(sys.argv[1:]),
              "summary": summary(rows), "runs": rows}
    out = Path(a.out)
    (out / "fuzz_commands.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "FUZZ_COMMANDS.md").write_text(markdown(result))
    print(json.dumps(result["summary"]["total"]))


if __name__ == "__main__":
    main()
