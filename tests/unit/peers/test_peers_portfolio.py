"""The peers through the portfolio (issue 35): the command as shipped, with no flags.

Oracles: the DP's optimum (tied to brute force and the MILP in
test_peers_solvers.py); the MILP's size counted before the build equals the
built matrix; infeasibility proven by the DP; every stop (time limit, memory
budget, SIGTERM) still prints one JSON document on stdout.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from autopar_opt.core.interrupts import SearchInterrupted
from autopar_opt.core.memory_budget import MemoryBudget
from autopar_opt.peers.pase.format import load_pase
from autopar_opt.peers.pase.solve import build_pase_matrix, pase_milp_size
from autopar_opt.peers.piper.format import load_piper
from autopar_opt.peers.piper.milp import build_piper_milp, piper_milp_size
from autopar_opt.peers.piper.model import reduce_instance
from autopar_opt.peers.portfolio import solve_peer
from autopar_opt.peers.spec import build_peer_spec
from support import paths
from support.cli import run_cli

DATA = paths.DATA / "peers"


def _spec_file(tmp_path: Path, problem: dict, solver: dict | None = None) -> Path:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"problem": problem, **({"solver": solver} if solver else {})}))
    return spec


def _piper(name: str, k: int, mem: float, **extra) -> dict:
    return {"format": "piper", "file": str(DATA / "piper" / f"{name}.json"), "devices": k,
            "memory_per_device_gib": mem, "bandwidth_gib_per_s": 25, **extra}


@pytest.mark.parametrize("name,k,mem,n", [("gnmt", 2, 8, None), ("bert32a100", 2, 80, 1920),
                                          ("bert32a100", 8, 8, 1920), ("resnet", 4, 8, None)])
def test_piper_milp_size_is_counted_exactly_before_the_build(name, k, mem, n):
    inst = load_piper(DATA / "piper" / f"{name}.json")
    inst.devices, inst.memory_bytes, inst.bandwidth = k, mem * 2**30, 25 * 2**30
    if n:
        inst.microbatches = n
    prep = reduce_instance(inst)
    size = piper_milp_size(prep)
    form, _ = build_piper_milp(prep)
    assert (size.rows, size.cols, size.nonzeros) == (form.num_rows, form.num_cols, form.A.nnz)


@pytest.mark.parametrize("table", ["alexnet_p4", "transformer_p4", "inception3_p8"])
def test_pase_milp_size_is_counted_exactly_before_the_build(table):
    inst = load_pase(DATA / "pase" / f"pase_{table}.json.gz")
    size = pase_milp_size(inst)
    form, _ = build_pase_matrix(inst, 1.0)
    assert (size.rows, size.cols, size.nonzeros) == (form.num_rows, form.num_cols, form.A.nnz)


def test_no_flags_runs_the_dp_first_and_skips_the_milp(tmp_path):
    spec = _spec_file(tmp_path, _piper("gnmt", 8, 8))
    code, out = run_cli("solve", spec, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["status"] == "optimal" and doc["solver"]["name"] == "auto"
    methods = doc["certificate"]["methods"]
    assert [(m["method"], m["status"]) for m in methods] == [("dp", "optimal"), ("milp", "skipped")]
    assert doc["certificate"]["primal"] == pytest.approx(65.05719078515098, rel=1e-12)


def test_the_dp_proves_infeasibility_and_the_command_says_so(tmp_path):
    """Piper ResNet on 16 devices of 1.5 GiB: no split fits (issue 35 asked for this proof)."""
    spec = _spec_file(tmp_path, _piper("resnet", 16, 1.5))
    code, out = run_cli("solve", spec)
    assert code == 3 and "proven infeasible" in out
    code, out = run_cli("solve", spec, "--json")
    doc = json.loads(out)
    assert code == 3 and doc["status"] == "infeasible" and doc["certificate"]["lower_bound"] == "inf"


def test_a_model_past_the_memory_budget_is_refused_with_its_size(tmp_path):
    spec = _spec_file(tmp_path, _piper("bert32a100", 8, 8, microbatches=1920))
    code, out = run_cli("solve", spec, "--json", "--solver", "highs", "--memory-limit", "0.001")
    doc = json.loads(out)
    assert code == 4 and doc["status"] == "no_plan"
    (m,) = doc["certificate"]["methods"]
    assert m["status"] == "refused" and "--memory-limit 0.001 GiB" in m["message"]
    assert "non-zeros" in m["message"]


def test_forced_methods(tmp_path):
    """``--solver dp`` and ``--solver highs`` each run one method, with the same optimum."""
    spec = _spec_file(tmp_path, _piper("gnmt", 2, 8))
    values = {}
    for solver in ("dp", "highs"):
        code, out = run_cli("solve", spec, "--json", "--solver", solver)
        doc = json.loads(out)
        assert code == 0 and len(doc["certificate"]["methods"]) == 1
        values[solver] = doc["certificate"]["primal"]
    assert values["dp"] == pytest.approx(values["highs"], rel=1e-9)


def test_pase_portfolio_checks_every_method_against_the_budget(tmp_path):
    """The elimination's tables (12 bytes per entry of every table it creates, plus one
    block of its widest step: 4,548 bytes here) and the MILP are both sized before
    anything is built: under a 1000-byte budget both are refused (no table, no matrix),
    and the same portfolio with room proves the optimum with the DP alone."""
    spec_path = _spec_file(tmp_path, {"format": "pase", "file": str(DATA / "pase" /
                                                                    "pase_alexnet_p4.json.gz")})
    from autopar_opt.spec.loader import read_mapping
    spec = build_peer_spec(read_mapping(spec_path), spec_path)
    free = solve_peer(spec, "auto", deadline=None, rel_gap=1e-9, budget=MemoryBudget.of(8))
    tight = solve_peer(spec, "auto", deadline=None, rel_gap=1e-9,
                       budget=MemoryBudget(1000.0, "test: 1000 bytes"))
    assert [r.status for r in free.records] == ["optimal", "skipped"]
    assert free.primal == pytest.approx(148215719552.0, rel=1e-12)
    assert [r.status for r in tight.records] == ["refused", "refused"] and tight.primal is None
    message = tight.records[0].message
    assert "the elimination's tables (widest step 132 entries)" in message
    assert "would take about 0.00434 MiB, over the memory budget" in message
    assert "test: 1000 bytes" in message      # the budget's own words: its source and the fix


def test_a_stop_signal_keeps_the_dp_first_pass_plan(monkeypatch, tmp_path):
    """SIGTERM in the Piper DP's exact pass: the plan of its first pass (offered to the
    portfolio) and its bound are written, status interrupted, exit 143, pure JSON."""
    import autopar_opt.peers.piper.dp as piper_dp

    original = piper_dp.PassTable.run

    def run(self):
        if self.exact:
            raise SearchInterrupted(signal.SIGTERM)
        original(self)
    monkeypatch.setattr(piper_dp.PassTable, "run", run)
    spec = _spec_file(tmp_path, _piper("bert32a100", 8, 8, microbatches=1920))
    code, out = run_cli("solve", spec, "--json")
    doc = json.loads(out)
    assert code == 143 and doc["status"] == "interrupted"
    assert doc["certificate"]["primal"] >= 0.16585575000000002 * (1 - 1e-12)
    assert doc["certificate"]["methods"][0]["status"] == "interrupted"
    assert doc["plan"] is not None


def _cpu_s(pid: int) -> float:
    """CPU seconds a running process has used (``/proc/PID/stat`` utime + stime)."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_sigterm_to_the_real_command_prints_its_json(tmp_path):
    """The real process, stopped by SIGTERM while the DP runs (once it has used 2.5 s of
    CPU: start-up takes about 1 s, the DP on ResNet k = 1024 about 8 s): one JSON
    document on stdout, status interrupted, exit 143."""
    import time

    spec = _spec_file(tmp_path, _piper("resnet", 1024, 8))
    autopar = Path(sys.executable).with_name("autopar")
    proc = subprocess.Popen([str(autopar), "solve", str(spec), "--json", "--time-limit", "600"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while proc.poll() is None and _cpu_s(proc.pid) < 2.5:
            time.sleep(0.05)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err[-2000:]
    doc = json.loads(out)
    assert doc["status"] == "interrupted" and "Traceback" not in err


def test_the_milp_takes_over_with_the_dp_plan_as_cutoff(monkeypatch, tmp_path):
    """The DP stopped after its first pass (its plan and work bound shared); the MILP
    runs with that plan's value as cutoff and closes the gap at the DP's optimum."""
    import autopar_opt.peers.piper.dp as piper_dp

    spec_path = _spec_file(tmp_path, _piper("gnmt", 2, 8))
    from autopar_opt.spec.loader import read_mapping
    spec = build_peer_spec(read_mapping(spec_path), spec_path)
    exact = piper_dp.solve_piper_dp(spec.instance)
    original = piper_dp.PassTable.run

    def run(self):
        if self.exact:
            raise piper_dp._Timeout
        original(self)
    monkeypatch.setattr(piper_dp.PassTable, "run", run)
    shared = solve_peer(spec, "auto", deadline=None, rel_gap=1e-9, budget=MemoryBudget.of(8))
    assert [r.status for r in shared.records][0] == "feasible"
    assert shared.records[1].method == "milp" and shared.closed()
    assert shared.primal == pytest.approx(exact.primal, rel=1e-9)
