"""Keep a profile of the largest instance (issue 18) so the next regression is visible.

Runs ``autopar solve examples/llama31_405b_16384_h100.yaml --json --gap 0.01
--time-limit 60`` under cProfile in this process (the CLI's own ``main``), and
writes the top 40 functions by cumulative and by own time to
``PROFILE_llama31_405b.txt`` next to this file, with the command's wall clock,
the load average and the commit.

Usage: python benchmarks/search/profile_largest.py [--spec examples/X.yaml] [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", default="examples/llama31_405b_16384_h100.yaml")
    ap.add_argument("--out", default=str(HERE / "PROFILE_llama31_405b.txt"))
    ap.add_argument("--args", default="--json --gap 0.01 --time-limit 60")
    args = ap.parse_args()
    from autopar_opt.cli.commands import app

    argv = ["solve", args.spec, *args.args.split()]
    load_before = _load()
    prof = cProfile.Profile()
    start = time.perf_counter()
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink):
        prof.enable()
        try:
            app(argv, standalone_mode=False)
        except SystemExit:
            pass
        prof.disable()
    wall = time.perf_counter() - start
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=ROOT).stdout.strip()
    text = io.StringIO()
    text.write(f"# cProfile of `autopar {' '.join(argv)}`\n"
               f"# commit {commit}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
               f"wall {wall:.1f} s under the profiler (in-process, imports not included); "
               f"load average before {load_before}, after {_load()} (2 shared cores)\n"
               f"# re-create: python benchmarks/search/profile_largest.py\n\n")
    for key in ("cumulative", "tottime"):
        text.write(f"## top 40 by {key}\n")
        stats = pstats.Stats(prof, stream=text)
        stats.strip_dirs().sort_stats(key).print_stats(40)
    Path(args.out).write_text(text.getvalue())
    print(f"wrote {args.out} ({wall:.1f} s)", file=sys.stderr)
    os._exit(0)


if __name__ == "__main__":
    main()
