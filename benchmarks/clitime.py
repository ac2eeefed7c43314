"""Time what users run: one ``autopar`` command as a subprocess (issue 18).

:func:`run_cli` starts the command, reaps it with ``os.wait4`` and returns its
wall clock, its CPU time and the peak resident memory of that child alone
(``ru_maxrss`` of the reaped process), its exit code and, with ``--json``, the
parsed JSON it printed. Interpreter start-up, imports, spec loading, the
search, the baselines and writing the outputs are all inside the figure: it
is what a user waits for.

Reusable by every benchmark::

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # benchmarks/
    from clitime import run_cli, load_average

Used by ``benchmarks/search/run.py`` and ``benchmarks/commands/run.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the ``autopar`` entry point of the running interpreter's environment
AUTOPAR = Path(os.environ.get("AUTOPAR_BIN") or Path(sys.executable).parent / "autopar")


def load_average() -> str:
    """The 1/5/15-minute load averages ("?" where /proc is missing)."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def commit() -> str:
    """The short hash of the checked-out commit (``-dirty`` with local changes), for records."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=ROOT, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, cwd=ROOT).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return head + ("-dirty" if dirty else "")


def run_process(cmd: list, timeout_s: float, cwd: Path | None = None,
                stdin: Path | None = None) -> dict:
    """Run ``cmd`` (its input read from the file ``stdin``, if given) and measure it:
    ``{"exit_code", "timed_out", "wall_s", "cpu_s", "peak_rss_mib", "stdout",
    "stderr"}`` (the two outputs as bytes). The child's own CPU and peak memory
    (``os.wait4``); a process still running after ``timeout_s`` is killed."""
    with open(stdin, "rb") if stdin is not None else open(os.devnull, "rb") as inp, \
            tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen([str(c) for c in cmd], stdin=inp, stdout=out, stderr=err,
                                cwd=None if cwd is None else str(cwd))
        killer = threading.Timer(timeout_s, proc.kill)
        killer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            killer.cancel()
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    return {"exit_code": os.waitstatus_to_exitcode(status), "timed_out": wall >= timeout_s,
            "wall_s": round(wall, 3), "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
            "peak_rss_mib": round(usage.ru_maxrss / 1024, 1), "stdout": stdout, "stderr": stderr}


def run_cli(args: list, timeout_s: float = 900.0, cwd: Path | None = None) -> dict:
    """Run ``autopar ARGS`` and measure it (:func:`run_process`).

    Returns ``{"command", "exit_code", "timed_out", "wall_s", "cpu_s",
    "peak_rss_mib", "load_before", "json", "stderr_tail"}``; ``json`` is the
    parsed stdout when it is one JSON document (``--json``), else None. A
    command still running after ``timeout_s`` is killed (``timed_out`` true).
    """
    load = load_average()
    r = run_process([AUTOPAR, *args], timeout_s, cwd or ROOT)
    stdout, stderr = r.pop("stdout"), r.pop("stderr")
    try:
        doc = json.loads(stdout.decode()) if stdout.lstrip().startswith(b"{") else None
    except ValueError:
        doc = None
    return {"command": "autopar " + " ".join(map(str, args)), **r, "load_before": load,
            "json": doc, "stderr_tail": stderr.decode(errors="replace")[-400:]}
