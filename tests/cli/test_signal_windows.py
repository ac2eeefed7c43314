"""A stop signal outside the search's own handling (QA round 34).

SIGTERM or SIGHUP in the second a command spends before its ``InterruptGuard`` is installed
(imports, the spec, cost tables: after the output lock was taken) ended the process by the
signal's default action: exit status -15, not a word, and ``OUT/.autopar.lock`` left in an
output folder the run had just created. The oracle: the shell's code (128 + the signal), one
line naming the signal, and the output folder as it was before the run (absent).
"""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from support import paths

#: A process that runs ``autopar solve`` whose command, once its output lock is held, sends
#: itself the signal and sleeps (a long start-up, deterministically): the stub stands in for
#: solve_command, which runs inside the lock and before any guard.
_SCRIPT = """
import os, signal, sys, time
import autopar_opt.cli.solve as solve
from autopar_opt.cli import main

SIG = int(sys.argv[1])

def stub(*args, **kwargs):
    os.kill(os.getpid(), SIG)
    time.sleep(30)
    raise SystemExit(99)              # the signal went unanswered

solve.solve_command = stub
sys.argv = ["autopar", "solve", sys.argv[2], "--out", sys.argv[3]]
main()
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_before_the_search_leaves_no_lock_and_says_so(tmp_path, sig):
    out = tmp_path / "new" / "out"
    spec = paths.REPO / "examples" / "quickstart.yaml"
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, str(int(sig)), str(spec), str(out)],
                          capture_output=True, text=True, timeout=120, cwd=paths.REPO)
    assert proc.returncode == 128 + int(sig), (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    assert f"stopped by {sig.name}" in proc.stderr
    assert not (tmp_path / "new").exists()     # the folders the run created, lock and all
