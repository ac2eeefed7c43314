"""Issue 15: options checked before work, interrupts keep the incumbent, atomic
outputs with one set of permissions, backend fallback, --version, no wrapping.

Oracles: the interrupted run's plan is the incumbent the search had when the
signal arrived (its value is re-derived by ``evaluate``), the fallback run's
optimum equals the HiGHS run's optimum on the same spec, the file modes equal
``0o666 & ~umask``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from autopar_opt.cli.commands import app
from autopar_opt.cost.evaluate import evaluate
from autopar_opt.core.interrupts import InterruptGuard, SearchInterrupted
from autopar_opt.cli.options import OptionError
from autopar_opt.core.files import check_output_dir, write_atomic
from autopar_opt.search import engine
from autopar_opt.cli.solve import solve_command
from autopar_opt.search.engine import SearchOptions, run_search
from autopar_opt.spec import load_spec
from support import paths

ROOT = paths.REPO
GOOD = ROOT / "tests" / "data" / "specs" / "good" / "spec.yaml"
AUTOPAR = Path(sys.executable).parent / "autopar"


def _cli(*args: str):
    return CliRunner().invoke(app, list(args))


def _small_spec(tmp_path: Path, solver: str = "highs", **search) -> Path:
    """The debug model (4 layers) on 4 A100s: a search of a few configurations."""
    spec = {"model": {"zoo": "debug"},
            "cluster": {"name": "c4", "nodes": 1, "gpus_per_node": 4, "device": "A100-40GB"},
            "training": {"global_batch_size": 16},
            "search": {"pp_degrees": [1, 2], "zero_levels": [0, 1], "recompute": ["none"],
                       "microbatches": [2, 4], **search},
            "solver": {"name": solver, "time_limit_s": 60, "rel_gap": 0.0}}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


# ------------------------------------------------------------------ options
@pytest.mark.parametrize("args,pattern", [
    (["--solver", "cplex"], r"--solver = 'cplex': unknown solver; use one of 'auto', 'highs', 'dp', "
                            r"'gurobi' or 'scip'"),
    (["--solver", "gurobbi"], r"unknown solver.*\(did you mean 'gurobi'\?\)"),
    (["--time-limit", "-5"], r"--time-limit = -5\.0: must be a positive, finite number"),
    (["--time-limit", "0"], r"--time-limit = 0\.0: must be a positive"),
    (["--time-limit", "nan"], r"--time-limit = nan: must be a positive, finite"),
    (["--gap", "2"], r"--gap = 2\.0: must be a relative gap in \[0, 1\)"),
    (["--gap", "1"], r"--gap = 1\.0: must be a relative gap in \[0, 1\)"),
    (["--gap", "-0.1"], r"--gap = -0\.1: must be a relative gap"),
    (["--form", "mil"], r"--form = 'mil': unknown formulation.*\(did you mean 'milp'\?\)"),
])
def test_bad_options_exit_2_before_reading_the_spec(args, pattern):
    result = _cli("solve", "no_such_spec.yaml", *args)    # the spec is never read
    assert result.exit_code == 2, result.output
    assert re.search(pattern, result.stderr), result.stderr
    assert "Traceback" not in result.output and "no_such_spec" not in result.stderr


def test_all_option_problems_are_reported_in_one_pass():
    with pytest.raises(OptionError) as info:
        solve_command("x.yaml", solver="cplex", time_limit_s=-1, gap=3)
    assert str(info.value).startswith("invalid options: 3 problems")


def test_out_naming_a_file_is_refused_before_the_search(tmp_path):
    target = tmp_path / "plan"
    target.write_text("keep me")
    result = _cli("solve", str(GOOD), "--out", str(target))
    assert result.exit_code == 2
    assert "--out" in result.stderr and "exists and is not a directory" in result.stderr
    assert target.read_text() == "keep me"


def test_output_dir_checks(tmp_path):
    (tmp_path / "f").write_text("x")
    assert check_output_dir(tmp_path / "new" / "dir") == []
    assert "is a file, not a directory" in check_output_dir(tmp_path / "f" / "sub")[0].rule
    (tmp_path / "d" / "plan.json").mkdir(parents=True)
    assert "is a directory" in check_output_dir(tmp_path / "d")[0].rule
    assert "NUL" in check_output_dir("a\x00b")[0].rule
    assert "cannot be used" in check_output_dir(tmp_path / ("x" * 5000))[0].rule


def test_version_matches_the_package_metadata():
    from importlib.metadata import version
    result = _cli("--version")
    assert result.exit_code == 0 and result.stdout.strip() == f"autopar-opt {version('autopar-opt')}"


# ------------------------------------------------------------- file outputs
@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_plan_and_report_get_the_same_umask_respecting_mode(tmp_path, mask):
    old = os.umask(mask)
    try:
        out = tmp_path / "out"
        assert _cli("solve", str(GOOD), "--out", str(out), "--quiet", "--time-limit", "300"
                    ).exit_code == 0
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in out.iterdir()}
    assert modes == {"plan.json": 0o666 & ~mask, "report.html": 0o666 & ~mask}


def test_atomic_write_leaves_the_old_file_when_interrupted(tmp_path, monkeypatch):
    path = tmp_path / "plan.json"
    path.write_text("old")

    def boom(*args):
        raise SearchInterrupted(signal.SIGTERM)
    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(SearchInterrupted):
        write_atomic(path, "new")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["plan.json"]


def test_piped_output_is_not_wrapped(tmp_path):
    out = tmp_path / ("a-rather-long-output-directory-name-" * 3) / "run"
    proc = subprocess.run([str(AUTOPAR), "solve", str(GOOD), "--out", str(out), "--time-limit", "300"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {out / 'plan.json'} and {out / 'report.html'}" in proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) > 100


# ---------------------------------------------------------------- interrupts
def test_sigint_during_the_search_keeps_the_incumbent_and_writes_outputs(tmp_path, monkeypatch):
    """A real SIGINT, sent to this process while the second configuration is
    being handled: the first configuration's plan must survive as the answer."""
    calls = []
    real = engine._handle_config

    def handle(*args, **kwargs):
        calls.append(args[0])
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)     # handled at the next bytecode
        return real(*args, **kwargs)
    monkeypatch.setattr(engine, "_handle_config", handle)
    out = tmp_path / "out"
    before = signal.getsignal(signal.SIGINT)   # default, or SIG_IGN in a background job
    code = solve_command(str(_small_spec(tmp_path)), out_dir=str(out), quiet=True)
    assert code == 130
    doc = json.loads((out / "plan.json").read_text())
    assert doc["status"] == "interrupted" and "signal 2 (SIGINT)" in doc["notices"][0]
    first = [r for r in doc["certificate"]["configurations"] if r["status"] == "optimal"]
    assert len(first) == 1 and doc["plan"] is not None
    assert doc["certificate"]["primal"] == pytest.approx(first[0]["primal"])
    assert doc["metrics"]["iteration_time_s"] == pytest.approx(first[0]["primal"], rel=1e-9)
    assert "interrupted" in (out / "report.html").read_text()
    rest = [r for r in doc["certificate"]["configurations"] if r["status"] == "not_solved"]
    assert rest and all("interrupted" in r["message"] for r in rest)
    assert signal.getsignal(signal.SIGINT) is before   # restored


def test_stop_request_between_configurations_is_a_clean_stop(tmp_path):
    spec = load_spec(_small_spec(tmp_path))
    polls = []

    def should_stop() -> bool:
        polls.append(1)
        return len(polls) >= 1
    result = run_search(spec.graph, spec.cluster, spec.training, spec.space, spec.cost_params,
                        SearchOptions(solver="highs", time_limit_s=60, rel_gap=0.0,
                                      should_stop=should_stop, stop_signal=lambda: 15))
    assert result.interrupted_by == 15 and result.status(0.0) == "interrupted"
    solved = [r for r in result.certificate.configurations if r.status not in ("not_solved",)]
    assert len(solved) == 1 and result.plan is not None
    metrics = evaluate(result.plan, spec.graph, spec.cluster, spec.training, spec.cost_params)
    assert metrics.iteration_time_s == pytest.approx(result.certificate.primal, rel=1e-9)
    assert result.certificate.lower_bound <= result.certificate.primal


def test_highs_stops_on_a_signal_and_returns_its_incumbent():
    """A MIP that takes seconds is interrupted after 0.3 s by a real SIGINT."""
    from autopar_opt.cost.tables import build_cost_tables
    from autopar_opt.formulations.direct import DirectBuilder
    from autopar_opt.search.baselines import best_uniform_assignment
    from autopar_opt.solvers.highs import HighsBackend

    spec = load_spec(ROOT / "examples" / "llama7b_2x8_a100.yaml")
    tables = build_cost_tables(spec.graph, spec.cluster, spec.training, spec.space,
                               spec.cost_params, 2, 16, spec.space.schedules[0])
    form = DirectBuilder(symmetry=False).build(tables)
    form.set_warm_start(best_uniform_assignment(tables)[0])
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    with InterruptGuard() as guard:
        timer.start()
        res = HighsBackend().solve_model(form.matrix, form.problem_class, time_limit_s=120,
                                         rel_gap=0.0, warm_start=True)
    timer.join()
    assert guard.signum == signal.SIGINT
    assert "interrupted by a stop signal" in res.message
    assert res.primal is not None and res.lower_bound <= res.primal
    assert res.wall_time_s < 60      # stopped long before its 120 s limit, not a timing target


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_to_a_running_cli_writes_an_interrupted_plan(tmp_path, sig, code):
    """The real command, stopped once it has started solving (the first exported
    sub-model appears): exit 143 (SIGTERM) or 129 (SIGHUP, a closed terminal: it
    killed the run with no output before issue 33), plan.json and the report written."""
    out = tmp_path / "out"
    spec = ROOT / "examples" / "gpt3_175b_3072_a100.yaml"
    proc = subprocess.Popen([str(AUTOPAR), "solve", str(spec), "--out", str(out), "--gap", "0",
                             "--time-limit", "300", "--export-models", "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(1200):
            if (out / "models").is_dir() and any((out / "models").iterdir()):
                break
            if proc.poll() is not None:
                break
            threading.Event().wait(0.1)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err[-2000:]
    doc = json.loads((out / "plan.json").read_text())
    assert doc["status"] == "interrupted" and signal.Signals(sig).name in doc["notices"][0]
    assert (out / "report.html").stat().st_size > 0
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


# ------------------------------------------------------------ backend errors
def test_backend_errors_fall_back_to_highs_with_the_same_optimum(tmp_path):
    """Gurobi's size-limited licence refuses the MIQP (over 200 variables); each
    configuration falls back to HiGHS, and the answer is HiGHS's optimum."""
    pytest.importorskip("gurobipy", reason="gurobipy is in the test extra")
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump({
        "model": {"zoo": "debug", "overrides": {"num_layers": 16}},
        "cluster": {"name": "c8", "nodes": 1, "gpus_per_node": 8, "device": "A100-40GB"},
        "training": {"global_batch_size": 16},
        "search": {"pp_degrees": [1, 2], "zero_levels": [0, 1, 2, 3], "recompute": ["none", "full"],
                   "microbatches": [4]}}))
    spec = load_spec(path)
    args = (spec.graph, spec.cluster, spec.training, spec.space, spec.cost_params)
    ref = run_search(*args, SearchOptions(solver="highs", time_limit_s=60, rel_gap=0.0))
    res = run_search(*args, SearchOptions(solver="gurobi", form="miqp", time_limit_s=60,
                                          rel_gap=0.0, warm_start=False))
    if not res.fallbacks:
        pytest.skip("this Gurobi licence solves the model: no fallback to test")
    assert "size-limited licence" in res.fallbacks[0] and "solved with highs" in res.fallbacks[0]
    assert res.certificate.primal == pytest.approx(ref.certificate.primal, rel=1e-6)
    assert res.status(0.0) == "optimal"


def test_remedies_name_real_flags():
    from autopar_opt.solvers.gurobi import LICENCE_MESSAGE
    from autopar_opt.solvers.highs import mismatch_message
    from autopar_opt.core.result import ProblemClass
    import typer.main

    command = typer.main.get_command(app).commands["solve"]
    flags = {opt for p in command.params for opt in p.opts}
    text = LICENCE_MESSAGE + mismatch_message("highs", ProblemClass.miqp)
    named = set(re.findall(r"--[a-z][a-z-]+", text))
    assert named and named <= flags, named - flags


def test_notices_say_why_a_run_is_not_certified(tmp_path):
    result = _cli("solve", str(_small_spec(tmp_path)), "--time-limit", "0.001", "--json")
    assert result.exit_code == 4, result.output
    doc = json.loads(result.stdout)
    assert doc["status"] == "no_plan"
    assert any("raise --time-limit" in n for n in doc["notices"])
    assert all(r["status"] == "not_solved" for r in doc["certificate"]["configurations"])
    assert doc["plan"] is None and doc["certificate"]["exact"] is False


def test_a_signal_after_the_search_keeps_its_certificate_and_says_what_it_cut(tmp_path, monkeypatch):
    """SIGINT while the baselines are priced, the search finished: the status stays the
    search's, a notice says the certificate is complete and what was cut, and the exit code
    still says the run was stopped (QA round 10: "interrupted", no notice, beside gap 0)."""
    import autopar_opt.cli.solve as cli_solve

    real = cli_solve._baselines

    def baselines(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)     # handled at the next bytecode
        return real(*args, **kwargs)
    monkeypatch.setattr(cli_solve, "_baselines", baselines)
    out = tmp_path / "out"
    code = solve_command(str(_small_spec(tmp_path)), out_dir=str(out), quiet=True)
    assert code == 130
    doc = json.loads((out / "plan.json").read_text())
    assert doc["status"] in ("optimal", "feasible") and doc["status"] != "interrupted"
    assert "arrived after the search had finished: the certificate is complete" in doc["notices"][0]
