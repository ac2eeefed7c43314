"""A Ctrl-C as the capacity sweep's interrupt guard is being entered (QA round 34).

``except KeyboardInterrupt`` read ``guard.signum`` where ``guard`` was not yet bound: an
UnboundLocalError, exit 70 "a bug in the tool", instead of the interrupted sweep's answer
(no scenario finished). Oracle: the answer a Ctrl-C before the first scenario gives, exit
130, every scenario "not run", the outputs written.
"""

from __future__ import annotations

import json

from autopar_opt.cli import capacity as capacity_cli
from autopar_opt.core.interrupts import InterruptGuard
from support import paths
from support.cli import run_cli


class _CtrlCAsEntered(InterruptGuard):
    """The sweep's guard (the one raising KeyboardInterrupt) is hit by Ctrl-C on entry."""

    def __init__(self, raise_as=None) -> None:
        super().__init__(raise_as)
        self.sweep_guard = raise_as is KeyboardInterrupt

    def __enter__(self):
        if self.sweep_guard:
            raise KeyboardInterrupt
        return super().__enter__()


def test_a_ctrl_c_as_the_sweep_starts_is_an_interrupted_sweep(tmp_path, monkeypatch):
    monkeypatch.setattr(capacity_cli, "InterruptGuard", _CtrlCAsEntered)
    out = tmp_path / "out"
    code, text = run_cli("capacity", paths.DATA / "capacity" / "tiny.yaml", "--out", out,
                         "--workers", "1", "--quiet")
    assert code == 130, text
    assert "interrupted: 0 scenario results are stored" in text
    doc = json.loads((out / "capacity.json").read_text())
    assert {s["status"] for s in doc["scenarios"]} == {"no_plan"}
