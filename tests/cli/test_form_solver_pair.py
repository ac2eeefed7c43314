"""A formulation the chosen backend cannot solve is refused before any work when the
command line makes the pair (QA round 12): ``--solver highs --form miqp``, or one of the
two flags with the spec's ``solver.name`` / ``solver.form``. Before, the search built its
cost tables first and then printed one plain line on stderr ("HiGHS cannot solve integer
problems with quadratic terms"), with nothing on stdout under ``--json``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from support import paths

SPEC = """model: {zoo: debug, overrides: {num_layers: 2}}
cluster: {nodes: 1, gpus_per_node: 4, device: A100-80GB}
training: {global_batch_size: 16, seq_len: 128, dtype: bf16}
target: {framework: none}
search: {pp_degrees: [1], tp_degrees: [1], zero_levels: [0], recompute: [none],
         microbatches: [2], sequence_parallel: [false]}
"""


def _run(tmp_path, solver_section: str, *args: str) -> subprocess.CompletedProcess:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC + solver_section)
    out = tmp_path / "out"
    out.mkdir()
    return subprocess.run([sys.executable, "-m", "autopar_opt.cli.commands", "solve", str(spec),
                           "--json", "--out", str(out), *args],
                          capture_output=True, text=True, cwd=paths.REPO, timeout=120)


@pytest.mark.parametrize("section, args, where, key, value", [
    ("", ("--solver", "highs", "--form", "miqp"), "command line", "--form", "miqp"),
    # the spec's own form is the one the backend cannot take: named in the spec
    ("solver: {form: miqp}\n", ("--solver", "highs"), "spec", "solver.form", "miqp"),
    ("solver: {name: highs}\n", ("--form", "miqp"), "command line", "--form", "miqp")])
def test_highs_with_miqp_is_an_error_before_any_work(tmp_path, section, args, where, key, value):
    proc = _run(tmp_path, section, *args)
    assert proc.returncode == 2
    err = json.loads(proc.stdout)["error"]
    problem = err["problems"][0]
    file = "command line" if where == "command line" else str(tmp_path / "spec.yaml")
    assert (problem["file"], problem["key"], problem["value"]) == (file, key, value)
    assert "MIQP" in problem["rule"] and "--form milp" in problem["fix"]
    assert not any((tmp_path / "out").iterdir())          # nothing written


def test_a_pair_the_backend_accepts_still_solves(tmp_path):
    proc = _run(tmp_path, "", "--solver", "highs", "--form", "milp", "--time-limit", "20")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["solver"]["form"] == "milp"
