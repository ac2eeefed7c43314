"""Pool workers leave SIGINT to the command's own process (QA round 35: a terminal's
Ctrl-C reaches the whole process group; an idle worker printed "Process
ForkServerProcess-2:" into the command's stderr as the parent terminated it, and a worker
that raises KeyboardInterrupt itself breaks the sweep it is part of)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import paths

TINY = paths.DATA / "capacity" / "tiny.yaml"


def _grandchildren(pid: int) -> set[int]:
    """The processes two levels below ``pid`` (from /proc): the pool's workers, which the
    fork server (a child, beside the resource tracker) forks."""
    parent = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:                     # ended meanwhile
                continue
            parent[int(entry.name)] = int(fields[1])
    children = {p for p, pp in parent.items() if pp == pid}
    return {p for p, pp in parent.items() if pp in children}


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_sigint_to_the_workers_alone_does_not_stop_the_sweep(tmp_path):
    """SIGINT to the pool's 2 workers alone while the tiny sweep runs (the fork server and
    the resource tracker ignore it already; the workers did not). Oracle: the command's
    contract for a sweep nobody stopped: exit 0, every scenario solved, stderr empty."""
    cmd = [sys.executable, "-m", "autopar_opt.cli.commands", "capacity", str(TINY), "--store",
           str(tmp_path / "store.sqlite"), "--workers", "2", "--json"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline, workers, sent = time.monotonic() + 120, set(), set()
    while proc.poll() is None and time.monotonic() < deadline and len(workers) < 2:
        workers = _grandchildren(proc.pid)
        time.sleep(0.01)
    time.sleep(0.3)           # past their start-up (a signal in it kills any new process)
    for pid in workers:
        try:
            os.kill(pid, signal.SIGINT)
        except ProcessLookupError:
            continue
        sent.add(pid)
    out, err = proc.communicate(timeout=180)
    if len(sent) < 2:
        pytest.skip(f"the sweep ended before its workers were signalled ({len(sent)} signalled)")
    assert proc.returncode == 0, err
    assert err.strip() == "", err
    assert '"computed": 6' in out
