"""Under ``--json``, a mistake the option parser finds (a value of the wrong type, a
missing required option) is the error object on stdout too, as every other input error
(README "Common flags"; QA round 9: `--gap abc --json` printed only the usage box).
Run as the console script runs (``main``), in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from support import paths


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autopar_opt.cli.commands", *args],
                          capture_output=True, text=True, cwd=paths.REPO, timeout=120)


@pytest.mark.parametrize("args, key", [
    (("solve", "examples/quickstart.yaml", "--gap", "abc", "--json"), "--gap"),
    (("export", "examples/quickstart.yaml", "--json"), "--to")])
def test_option_parser_errors_are_the_json_error_object(args, key):
    proc = _run(*args)
    assert proc.returncode == 2
    err = json.loads(proc.stdout)["error"]
    assert err["kind"] == "invalid option" and err["exit_code"] == 2
    assert err["problems"][0]["key"] == key and err["problems"][0]["file"] == "command line"
    assert key in proc.stderr            # the usual message stays on stderr


def test_a_json_run_keeps_its_exit_code():
    proc = _run("solve", "examples/quickstart.yaml", "--json", "--time-limit", "0.05")
    assert proc.returncode == 4 and json.loads(proc.stdout)["status"] in ("no_plan", "feasible")
