"""Limits on the fleet route (issue 35): ``--memory-limit`` reaches the fleet search (every
MILP counted before it is built and refused past it; before, the option was dropped
silently), and ``--json`` is one JSON document with a MILP backend (solver output on
stderr)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import yaml

from support.cli import run_cli
from support.fleets import TINY_MIX_CLUSTER

BASE = {"model": {"zoo": "debug"},
        "cluster": copy.deepcopy(TINY_MIX_CLUSTER),
        "training": {"global_batch_size": 16},
        "search": {"zero_levels": [0], "recompute": ["none"]},
        "solver": {"name": "highs", "time_limit_s": 60, "rel_gap": 0.001}}


def _write(tmp_path: Path, **solver) -> Path:
    path = tmp_path / "fleet.yaml"
    spec = copy.deepcopy(BASE)
    spec["solver"].update(solver)
    path.write_text(yaml.safe_dump(spec))
    return path


def test_a_tiny_memory_limit_refuses_the_fleet_milps_with_its_reason(tmp_path, monkeypatch):
    """The debug model is a chain of identical blocks: the block MILP is refused (counted
    from its row lists, before the matrix); the per-layer structure is never built."""
    import autopar_opt.formulations.direct as direct

    def never(key):
        raise AssertionError("a MILP structure was built past the memory budget")
    monkeypatch.setattr(direct, "build_structure", never)
    # rel_gap 1e-6: the heuristic plan is within 0.1% of its configuration's analytic floor,
    # which at the base 0.1% gap would (rightly) prove it optimal without any MILP
    code, text = run_cli("solve", _write(tmp_path, rel_gap=1e-6), "--no-warm-start",
                         "--memory-limit", "0.00001",
                         "--out", tmp_path / "out", "--quiet")
    doc = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert "--memory-limit 1e-05 GiB" in doc["solver"]["memory_budget"]
    rows = [r for r in doc["certificate"]["configurations"] if "not built" in (r.get("message") or "")]
    assert rows and all("--memory-limit 1e-05 GiB" in r["message"] for r in rows)
    # the block model's own split plan is kept, with no proven bound: a plan, not a proof
    assert code == 0 and doc["status"] == "feasible" and doc["certificate"]["gap"] > 1e-6


def test_json_is_the_only_thing_on_stdout(tmp_path):
    autopar = Path(sys.executable).with_name("autopar")
    proc = subprocess.run([str(autopar), "solve", str(_write(tmp_path)), "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["status"] == "optimal" and "Traceback" not in proc.stderr
