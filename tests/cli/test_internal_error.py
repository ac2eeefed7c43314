"""A bug in the tool reaching the top of a command is one message and exit 70, never a
traceback (autopar_opt/cli/guard.py); ``AUTOPAR_TRACEBACK=1`` gives the traceback back.

Oracle: the bug is injected (solve's writer raises), so what the user
sees is known: the exception's type and text, where it was raised, exit 70, nothing
written under ``--out``, and with ``--json`` one error object on stdout."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from autopar_opt.cli.commands import app
from support import paths

QUICKSTART = paths.REPO / "examples" / "quickstart.yaml"


@pytest.fixture
def broken_estimate(monkeypatch):
    """The solve command's writer raises what json.dumps raised on a numpy.bool_ (the
    bug this handler was written for). Patched on the module that looks it up per call,
    so nothing imported meanwhile keeps the broken function."""
    import autopar_opt.cli.solve as solve_cli

    def broken(*args, **kwargs):
        raise TypeError("Object of type bool is not JSON serializable")

    monkeypatch.setattr(solve_cli, "_emit", broken)


def test_a_bug_is_one_message_and_exit_70(tmp_path, broken_estimate, monkeypatch):
    monkeypatch.delenv("AUTOPAR_TRACEBACK", raising=False)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["solve", str(QUICKSTART), "--out", str(out),
                                      "--time-limit", "20"])
    assert result.exit_code == 70, result.output
    assert isinstance(result.exception, SystemExit)
    text = result.stderr
    assert "Traceback" not in text + result.stdout
    assert "internal error" in text and "TypeError: Object of type bool" in text
    assert "a bug in the tool, not in the input" in text and "AUTOPAR_TRACEBACK=1" in text
    assert "raised in" in text
    assert not out.exists() or not any(out.iterdir())


def test_json_gets_the_error_object(broken_estimate, monkeypatch):
    monkeypatch.delenv("AUTOPAR_TRACEBACK", raising=False)
    result = CliRunner().invoke(app, ["solve", str(QUICKSTART), "--json", "--time-limit", "20"])
    assert result.exit_code == 70
    doc = json.loads(result.stdout)
    assert set(doc) == {"error"}
    assert "TypeError" in json.dumps(doc) and "report it" in json.dumps(doc)


def test_autopar_traceback_re_raises(broken_estimate, monkeypatch):
    monkeypatch.setenv("AUTOPAR_TRACEBACK", "1")
    result = CliRunner().invoke(app, ["solve", str(QUICKSTART), "--time-limit", "20"])
    assert isinstance(result.exception, TypeError)


def test_a_commands_own_exit_code_is_not_an_internal_error(tmp_path):
    """A command that ends itself with typer.Exit (an unknown --runnable-by framework,
    exit 2) keeps its code and message."""
    spec = tmp_path / "spec.yaml"
    spec.write_text("model: {zoo: debug-moe, overrides: {num_layers: 2}}\n"
                    "cluster: {zoo: debug-2x4}\ntraining: {global_batch_size: 8}\n")
    res = CliRunner().invoke(app, ["solve", str(spec), "--runnable-by", "alpa"])
    assert res.exit_code == 2 and "unknown framework" in res.output
    assert "internal error" not in res.output
