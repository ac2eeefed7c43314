"""A stop signal whose exception the code running at that moment replaced (QA round 34).

The interrupt guard raises its exception on whatever line runs when the signal comes. C code
on that line may catch it and raise its own: numpy comparing structured arrays (operator
sharding's ``np.unique(..., axis=0)``) turned it into "TypeError: Cannot compare structured
arrays", so a Ctrl-C during ``solve examples/operator_sharding/pipeline.yaml`` ended with
exit 70, "a bug in the tool, not in the input" (2 of 40 random timings). Oracle: the signal
sent; the exit code a shell gives for it; no exit 70. Without a signal, the same exception
is still exit 70 (a bug).
"""

from __future__ import annotations

import os
import signal
import time

import autopar_opt.search.runnable  # noqa: F401 - binds the real run_search before any patch
from autopar_opt.core.interrupts import SearchInterrupted
from autopar_opt.search import engine
from support import paths
from support.cli import run_cli

SPEC = paths.REPO / "examples" / "quickstart.yaml"


def _numpy_like(sig):
    """Sends ``sig``, then does what numpy did with the guard's exception."""
    def run_search(*args, **kwargs):
        try:
            os.kill(os.getpid(), sig)
            time.sleep(30)
        except SearchInterrupted as exc:
            raise TypeError("Cannot compare structured arrays unless they have a common "
                            "dtype") from exc
        raise AssertionError("the signal went unanswered")
    return run_search


def test_an_exception_that_replaced_the_signals_is_read_as_the_signal(tmp_path, monkeypatch):
    monkeypatch.setattr(engine, "run_search", _numpy_like(signal.SIGINT))
    code, text = run_cli("solve", SPEC, "--out", tmp_path / "out", "--quiet")
    assert code == 130, text
    assert "stopped by SIGINT; the signal broke the step in progress (TypeError" in text
    assert "a bug in the tool" not in text
    assert not (tmp_path / "out").exists()


def test_without_a_signal_the_same_exception_is_still_a_bug(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise TypeError("Cannot compare structured arrays unless they have a common dtype")

    monkeypatch.setattr(engine, "run_search", _numpy_like(signal.SIGINT))
    run_cli("solve", SPEC, "--quiet")                  # a command that received a signal ...
    monkeypatch.setattr(engine, "run_search", broken)
    code, text = run_cli("solve", SPEC, "--quiet")     # ... does not excuse the next one
    assert code == 70 and "a bug in the tool" in text, text
