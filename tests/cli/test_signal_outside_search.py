"""A stop signal outside any search (QA round 35): estimate, export, report, calibrate,
reading a spec. Before, SIGINT there was exit 130 without a word (typer turns
``KeyboardInterrupt`` into that), ``--json`` printed nothing, a Ctrl-C that C code replaced
with its own exception read as "a bug in the tool" (exit 70), and a signal while a large
``--json`` document was written into a full pipe cut it in the middle (exit 130 after
131,072 of its 222,219 characters). Oracles: the shell's code (128 + the signal), one
line on stderr naming the signal, no traceback, and stdout one whole JSON document (the
command's own, or the error object of kind ``interrupted``)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import paths

#: ``autopar ARGS`` whose step ``TARGET`` (module:function) sends the process ``SIG`` and
#: waits; with REPLACE, the step's C code is mimicked: the interrupt becomes another error.
_SCRIPT = """
import importlib, os, sys, time
from autopar_opt.cli import main

SIG, TARGET, REPLACE = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
module, name = TARGET.split(":")

def stub(*args, **kwargs):
    try:
        os.kill(os.getpid(), SIG)
        time.sleep(30)
    except BaseException as exc:
        if REPLACE:
            raise RuntimeError(f"replaced by C code: {type(exc).__name__}") from None
        raise
    raise SystemExit(99)              # the signal went unanswered

setattr(importlib.import_module(module), name, stub)
sys.argv = ["autopar", *sys.argv[4:]]
main()
"""

QUICKSTART = str(paths.REPO / "examples" / "quickstart.yaml")


def _run(sig: int, target: str, *args: str, replace: bool = False):
    return subprocess.run([sys.executable, "-c", _SCRIPT, str(int(sig)), target,
                           "1" if replace else "0", *args],
                          capture_output=True, text=True, timeout=120, cwd=paths.REPO)


def _said(proc, sig) -> None:
    assert proc.returncode == 128 + int(sig), (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"stopped by {sig.name}" in lines[0], proc.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_estimate_json_says_it_was_interrupted(sig):
    proc = _run(sig, "autopar_opt.cost.evaluate:evaluate", "estimate", QUICKSTART, "--json")
    _said(proc, sig)
    error = json.loads(proc.stdout)["error"]
    assert error["kind"] == "interrupted" and error["exit_code"] == 128 + int(sig)
    assert error["problems"][0]["value"] == int(sig)


def test_a_ctrl_c_while_the_spec_is_read_is_said_in_text_mode_too():
    proc = _run(signal.SIGINT, "autopar_opt.spec:load_spec", "estimate", QUICKSTART)
    _said(proc, signal.SIGINT)
    assert proc.stdout == ""


def test_a_ctrl_c_that_c_code_replaced_is_an_interrupt_not_a_bug():
    """Outside any guard as well (pydantic building a schema: "SchemaError: ...
    KeyboardInterrupt", exit 70)."""
    proc = _run(signal.SIGINT, "autopar_opt.spec:load_spec", "estimate", QUICKSTART, "--json",
                replace=True)
    assert proc.returncode == 130, proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert error["kind"] == "interrupted" and "a bug in the tool" not in proc.stderr


def test_export_and_report_write_nothing_when_stopped(tmp_path):
    plan = tmp_path / "est.json"
    done = subprocess.run([sys.executable, "-m", "autopar_opt.cli.commands", "estimate",
                           QUICKSTART, "--json"], capture_output=True, text=True, cwd=paths.REPO)
    plan.write_text(done.stdout)
    proc = _run(signal.SIGTERM, "autopar_opt.export:export_plan", "export", str(plan), "--to",
                "megatron", "--out", str(tmp_path / "args.txt"), "--json")
    _said(proc, signal.SIGTERM)
    assert json.loads(proc.stdout)["error"]["kind"] == "interrupted"
    proc = _run(signal.SIGINT, "autopar_opt.reports.render:render_html", "report",
                str(paths.DATA / "report" / "plan_feasible.json"), "--out",
                str(tmp_path / "r.html"))
    _said(proc, signal.SIGINT)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["est.json"]    # no file, no temp


def _blocked_on_its_pipe(pid: int, timeout_s: float = 60.0) -> bool:
    """Whether the process went from running to sleeping and stayed there (it computes
    without sleeping, then blocks writing into the pipe no one reads yet)."""
    ran, asleep, end = False, 0, time.monotonic() + timeout_s
    while time.monotonic() < end:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        ran = ran or state == "R"
        asleep = asleep + 1 if (ran and state == "S") else 0
        if asleep >= 5:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_a_large_json_document_is_written_leaves_it_whole(sig):
    proc = subprocess.Popen([sys.executable, "-m", "autopar_opt.cli.commands", "calibrate",
                             str(paths.DATA / "published_runs.yaml"), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=paths.REPO)
    try:
        assert _blocked_on_its_pipe(proc.pid)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 128 + int(sig) and "Traceback" not in err, err
    doc = json.loads(out)                               # whole: one valid document
    assert "error" in doc or len(out) > 131_072, err    # the result, or the interruption said
    assert f"{sig.name}" in err


@pytest.mark.parametrize("flags", [("--quiet",), ("--json",)])
def test_a_search_stopped_without_a_summary_still_says_so(tmp_path, monkeypatch, flags):
    """A signal once the search had its answer (here: while the baselines are priced) wrote
    the result and exited 130 with nothing on stderr under --quiet or --json (QA round 35)."""
    from autopar_opt.cli import solve
    from support.cli import run_cli
    from support.signals import signalling_stub

    monkeypatch.setattr(solve, "_baselines", signalling_stub(signal.SIGINT, "the baselines"))
    code, text = run_cli("solve", QUICKSTART, "--solver", "dp", "--out", tmp_path / "out",
                         *flags)
    assert code == 130, text
    line = f"autopar: stopped by SIGINT (exit 130); the search's result, status optimal, is in " \
           f"{tmp_path / 'out' / 'plan.json'}"
    assert line in text
    assert json.loads((tmp_path / "out" / "plan.json").read_text())["status"] == "optimal"
