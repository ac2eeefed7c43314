"""Limits on the operator-sharding route (issue 35), as on the peer route: the memory
budget (the MILP counted, refused past ``--memory-limit``, nothing built), a stop
signal (the document with everything proven, status interrupted, exit 128 + signal),
solver output off stdout (``--json`` is one JSON document), and ``certificate.methods``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli import run_cli

ALEX = """problem:
  format: operator_sharding
  graph: {zoo: alexnet, batch: 32}
  cluster: {nodes: 1, gpus_per_node: 4, device: A100-80GB}
"""


def _spec(tmp_path) -> Path:
    path = tmp_path / "alex.yaml"
    path.write_text(ALEX)
    return path


def test_a_tiny_memory_limit_refuses_every_milp_with_its_reason(tmp_path, monkeypatch):
    import autopar_opt.formulations.opspace as fo

    def never(*args, **kwargs):
        raise AssertionError("a MILP was built past the memory budget")
    monkeypatch.setattr(fo, "build_matrix", never)
    code, out = run_cli("solve", _spec(tmp_path), "--solver", "highs", "--memory-limit", "0.00001",
                        "--out", tmp_path / "out", "--quiet")
    doc = json.loads((tmp_path / "out" / "plan.json").read_text())
    solved = [m for m in doc["certificate"]["methods"] if m["status"] != "skipped"]
    assert solved and all(m["status"] == "refused" for m in solved)
    assert all("not built" in m["message"] and "--memory-limit 1e-05 GiB" in m["message"]
               for m in solved)
    assert "--memory-limit 1e-05 GiB" in doc["solver"]["memory_budget"]
    # the baselines are plans of the space: one is the answer, the bound is the meshes' Σ min A
    assert code == 0 and doc["status"] == "feasible" and doc["plan_source"].startswith("baseline")


def test_the_methods_record_says_which_method_proved_the_optimum(tmp_path):
    code, out = run_cli("solve", _spec(tmp_path), "--json")
    doc = json.loads(out[out.index("{"):])
    assert code == 0 and doc["status"] == "optimal"
    proved = [m for m in doc["certificate"]["methods"] if m["status"] == "optimal"]
    assert proved and min(m["primal"] for m in proved) == pytest.approx(doc["certificate"]["primal"])
    assert all(m["method"].startswith("dp") for m in proved)


def test_a_stop_signal_writes_the_document_and_exits_128_plus_signal(tmp_path, monkeypatch):
    """SIGTERM arrives while the first mesh is solved: the meshes left keep their Σ min A
    bound (the certificate stays valid), the document is written, exit 143."""
    import autopar_opt.opspace.solve as solve

    real = solve.solve_tables

    def signalled(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)     # the guard raises inside this frame
        return real(*args, **kwargs)
    monkeypatch.setattr(solve, "solve_tables", signalled)
    code, out = run_cli("solve", _spec(tmp_path), "--out", tmp_path / "out", "--quiet")
    assert code == 143, out
    doc = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert doc["status"] == doc["certificate"]["status"] == "interrupted"
    stopped = [m for m in doc["certificate"]["methods"] if "stopped by signal 15" in m["message"]]
    assert stopped and all(m["lower_bound"] > 0 for m in stopped)
    assert doc["certificate"]["lower_bound"] > 0


def test_json_is_the_only_thing_on_stdout_with_a_milp_backend(tmp_path):
    autopar = Path(sys.executable).with_name("autopar")
    proc = subprocess.run([str(autopar), "solve", str(_spec(tmp_path)), "--json", "--solver", "highs"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)               # fails on any solver line before or after it
    assert doc["status"] == "optimal" and "Traceback" not in proc.stderr
