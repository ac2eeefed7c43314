"""The report of a large plan.json (issue 33, row 9: a 20 MB plan.json gave a 21 MB HTML
report), the whole ``autopar report`` command timed.

Inputs (``tests/support/big_plan.py``): a real plan.json whose certificate holds 15,000
configurations as a time-limited search writes them (one answer, 3 open rows at the
global bound, most open above it, some infeasible and pruned), each with a 1,100-
character solver message and an exported sub-model's hash (about 20 MB); the same with
a 5 MB solver log; and 60,000 configurations (about 80 MB: refused by the 64 MiB
limit of a plan document, exit 2). Target: the HTML under 1 MB (the bound
``tests/unit/reports/test_report_compact.py`` enforces).

Writes ``report_size.json`` and ``REPORT_SIZE.md`` here.
Usage: python benchmarks/robustness/report_size.py
"""

from __future__ import annotations

import datetime as _dt
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(ROOT / "tests"))

from clitime import commit, load_average, run_cli  # noqa: E402
from support.big_plan import big_certificate_plan  # noqa: E402

HTML_BYTES_AT_MOST = 1_000_000


def cases(tmp: Path) -> list[tuple[str, Path]]:
    out = []
    for name, rows, log in (("15,000 configurations", 15_000, 0),
                            ("15,000 configurations + 5 MB solver log", 15_000, 5_000_000),
                            ("60,000 configurations", 60_000, 0)):
        doc = big_certificate_plan(rows=rows)
        if log:
            doc["solver"]["log_tail"] = "solver log line\n" * (log // 16)
        path = tmp / f"plan_{rows}_{log}.json"
        path.write_text(json.dumps(doc))
        out.append((name, path))
    return out


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--write":      # the inputs, in a child process
        print(json.dumps([[name, str(path)] for name, path in cases(Path(sys.argv[2]))]))
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        # written by a child process: a child's peak memory (ru_maxrss) counts its parent's
        # memory at fork time, so the inputs must not be built in this process
        made = subprocess.run([sys.executable, __file__, "--write", tmp], check=True,
                              capture_output=True, text=True).stdout
        for name, plan in ((n, Path(p)) for n, p in json.loads(made)):
            html = Path(tmp) / f"{plan.stem}.html"
            r = run_cli(["report", plan, "--out", html, "--json"], timeout_s=300)
            size = html.stat().st_size if html.exists() else None
            rows.append({"input": name, "plan_json_bytes": plan.stat().st_size,
                         "html_bytes": size, "exit_code": r["exit_code"], "wall_s": r["wall_s"],
                         "cpu_s": r["cpu_s"], "peak_rss_mib": r["peak_rss_mib"],
                         "load_before": r["load_before"],
                         "command": f"autopar report {plan.name} --out {html.name} --json",
                         "within_target": size is None or size < HTML_BYTES_AT_MOST,
                         "stderr_tail": r["stderr_tail"]})
    result = {"date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "commit": commit(), "load_after": load_average(), "runs": rows}
    (HERE / "report_size.json").write_text(json.dumps(result, indent=2) + "\n")
    (HERE / "REPORT_SIZE.md").write_text(markdown(result))
    print(markdown(result))


def markdown(result: dict) -> str:
    lines = ["# Report size of a large plan.json (issue 33, row 9)", "",
             f"Recorded {result['date']} on the shared 2-core development machine, commit "
             f"{result['commit']}; load average after: {result['load_after']}. "
             "`python benchmarks/robustness/report_size.py`; inputs from "
             "`tests/support/big_plan.py`. Target: HTML under 1 MB (before: 21 MB from 20 MB).",
             "", "| input | plan.json | exit | HTML | within 1 MB | wall s | CPU s | peak MiB "
             "| load before |", "|---|---:|---:|---:|---|---:|---:|---:|---|"]
    for r in result["runs"]:
        html = "—" if r["html_bytes"] is None else f"{r['html_bytes'] / 1e3:,.1f} kB"
        lines.append(f"| {r['input']} | {r['plan_json_bytes'] / 1e6:.1f} MB | {r['exit_code']} "
                     f"| {html} | {'yes' if r['within_target'] else 'NO'} | {r['wall_s']:.2f} "
                     f"| {r['cpu_s']:.2f} | {r['peak_rss_mib']:.0f} | {r['load_before']} |")
    lines += ["", "Commands: " + "; ".join(f"`{r['command']}`" for r in result["runs"]), "",
              "The 60,000-configuration file is over the 64 MiB limit of a plan document "
              "(`autopar_opt/core/reading.py`) and is refused with exit 2 before it is parsed."
              if any(r["exit_code"] == 2 for r in result["runs"]) else "", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
