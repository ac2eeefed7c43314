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
SIG, DISPOSITION, WAIT = int(sys.argv[1]), sys.argv[4], float(sys.argv[5])
# the disposition the command starts with: a terminal's default, or the SIG_IGN that nohup
# sets and every child inherits (set before the package is imported, as a shell would)
signal.signal(SIG, signal.SIG_IGN if DISPOSITION == "ignored" else signal.SIG_DFL)
import autopar_opt.cli.solve as solve
from autopar_opt.cli import main

def stub(*args, **kwargs):
    os.kill(os.getpid(), SIG)
    time.sleep(WAIT)
    raise SystemExit(99)              # the signal went unanswered

solve.solve_command = stub
sys.argv = ["autopar", "solve", sys.argv[2], "--out", sys.argv[3]]
main()
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_before_the_search_leaves_no_lock_and_says_so(tmp_path, sig):
    out = tmp_path / "new" / "out"
    spec = paths.REPO / "examples" / "quickstart.yaml"
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, str(int(sig)), str(spec), str(out),
                           "default", "30"],
                          capture_output=True, text=True, timeout=120, cwd=paths.REPO)
    assert proc.returncode == 128 + int(sig), (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    assert f"stopped by {sig.name}" in proc.stderr
    assert not (tmp_path / "new").exists()     # the folders the run created, lock and all


def test_a_hangup_ignored_by_nohup_stays_ignored(tmp_path):
    """Under ``nohup`` SIGHUP starts ignored, and the command keeps it so (``core/interrupts``
    installs its handler only over the default disposition): the hang-up is not a stop, the
    command runs on (here the stub's own exit, 99). Found when the test suite itself ran
    under nohup (session 37): the test above assumed a terminal's default disposition, which
    it now sets."""
    out = tmp_path / "new" / "out"
    spec = paths.REPO / "examples" / "quickstart.yaml"
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, str(int(signal.SIGHUP)), str(spec),
                           str(out), "ignored", "0.2"],
                          capture_output=True, text=True, timeout=120, cwd=paths.REPO)
    assert proc.returncode == 99, (proc.returncode, proc.stderr[-2000:])
    assert "stopped by" not in proc.stderr and "Traceback" not in proc.stderr


def test_a_signal_while_the_search_starts_is_an_exit_code_not_a_traceback(tmp_path, monkeypatch):
    """A signal the guard turns into ``SearchInterrupted`` where the search does not catch it
    (here: as ``run_search`` is entered; in the field, while the progress display's imports
    ran) was an uncaught exception: a traceback and exit 1. Now the shell's code and the
    usual message, and no output folder (there is no result to write)."""
    import autopar_opt.search.runnable  # noqa: F401 - binds the real run_search before the patch
    from autopar_opt.search import engine
    from support.cli import run_cli
    from support.signals import signalling_stub

    monkeypatch.setattr(engine, "run_search", signalling_stub(signal.SIGTERM, "run_search"))
    out = tmp_path / "out"
    code, text = run_cli("solve", paths.REPO / "examples" / "quickstart.yaml", "--out", out)
    assert code == 143, text
    assert "stopped by SIGTERM before the search had a result to write" in text
    assert not out.exists()


def test_the_same_on_a_fleet(tmp_path, monkeypatch):
    """A cluster of several groups runs its own search (cli/fleet.py): the same answer."""
    from autopar_opt.search import mixed
    from support.cli import run_cli
    from support.signals import signalling_stub

    monkeypatch.setattr(mixed, "run_fleet_search", signalling_stub(signal.SIGHUP, "the fleet search"))
    out = tmp_path / "out"
    code, text = run_cli("solve", paths.REPO / "examples" / "fleet_llama3_70b_a100_h100.yaml",
                         "--out", out, "--time-limit", "60")
    assert code == 129, text
    assert "stopped by SIGHUP before the search had a result to write" in text
    assert not out.exists()


#: The console script's two lines, after an import hook that sends SIGINT to the process
#: as the application's first third-party import (typer) starts: a Ctrl-C while it loads.
_IMPORT_SCRIPT = """
import importlib.abc, os, signal, sys

class CtrlC(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "typer":
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, CtrlC())
sys.argv = ["autopar", "--version"]
from autopar_opt.cli import main
sys.exit(main())
"""


def test_ctrl_c_while_the_application_loads_is_exit_130_not_a_traceback():
    """QA round 34: SIGINT 0.08 s after start, inside the script's ``from autopar_opt.cli
    import main`` (which imported typer, rich and every command), printed a
    ``KeyboardInterrupt`` traceback and ended with -2; a moment later it is exit 130."""
    proc = subprocess.run([sys.executable, "-c", _IMPORT_SCRIPT], capture_output=True, text=True,
                          timeout=120, cwd=paths.REPO)
    assert proc.returncode == 130, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr and "KeyboardInterrupt" not in proc.stderr


def test_an_operator_sharding_solve_stopped_in_its_baselines_keeps_its_answer(tmp_path,
                                                                             monkeypatch):
    """QA round 34: a signal while an operator-sharding solve priced its baselines (the
    Megatron template's tables, after the exact solve) was an uncaught SearchInterrupted: a
    traceback, exit 1, nothing written (10 of 40 random timings of
    examples/operator_sharding/gpt_blocks.yaml). Now the solve's answer is written, status
    interrupted, exit 143; a signal outside the solve and its baselines ends as in a
    layer search (no result: the message, nothing written)."""
    import json

    from autopar_opt.opspace import baselines
    from autopar_opt.opspace import solve as opspace_solve
    from support.cli import run_cli
    from support.signals import signalling_stub

    spec = paths.REPO / "examples" / "operator_sharding" / "alexnet.yaml"
    with monkeypatch.context() as patch:
        patch.setattr(baselines, "megatron", signalling_stub(signal.SIGTERM, "the baselines"))
        code, text = run_cli("solve", spec, "--out", tmp_path / "a", "--quiet")
    assert code == 143, text
    doc = json.loads((tmp_path / "a" / "plan.json").read_text())
    assert doc["status"] == "interrupted" and doc["certificate"]["primal"] is not None
    monkeypatch.setattr(opspace_solve, "solve_operator_space",
                        signalling_stub(signal.SIGHUP, "the operator-space solve"))
    code, text = run_cli("solve", spec, "--out", tmp_path / "b", "--quiet")
    assert code == 129, text
    assert "stopped by SIGHUP before the search had a result to write" in text
    assert not (tmp_path / "b").exists()
