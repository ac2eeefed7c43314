"""Issue 15: user mistakes found by trying every subcommand as a hostile user
give exit code 2 and a message naming the option, never a traceback.

Each case here was a traceback, a hang or a silent acceptance before its fix:
a negative ``--seed``; a directory as a placement spec or ``--expert`` file
(read after the search); ``--budget-s nan`` for ``place`` (a hang) or a
negative one (accepted); an output folder where files cannot be created
although ``access()`` says yes (root on ``/proc``); ``--store`` naming a
directory or a file that is not an SQLite database; ``capacity --out`` naming
a file. Oracle: the exit code, the option named in the message, no
``Traceback``, and (for the checks made before any work) no search started.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from autopar_opt.cli.commands import app
from autopar_opt.core.files import check_output_dir, check_output_file
from support import paths

ROOT = paths.REPO
QUICKSTART = ROOT / "examples" / "quickstart.yaml"
PLACE = ROOT / "tests" / "data" / "placement" / "throughput" / "LayerGraphs_bert24_inference.json"
TINY = ROOT / "tests" / "data" / "capacity" / "tiny.yaml"


def _run(*args: str):
    result = CliRunner().invoke(app, [str(a) for a in args])
    text = result.output + (result.stderr if result.stderr_bytes is not None else "")
    assert "Traceback" not in text
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), \
        repr(result.exception)
    return result.exit_code, text


@pytest.fixture
def no_search(monkeypatch):
    """Fail the test if a placement search starts (the check must come first)."""
    from autopar_opt.cli import place as place_cli

    def refuse(*args, **kwargs):
        raise AssertionError("the search started before the bad option was reported")

    monkeypatch.setattr(place_cli, "solve_placement", refuse)


@pytest.mark.parametrize("command", [["solve", QUICKSTART], ["place", PLACE]])
def test_negative_seed_is_refused(command):
    code, text = _run(*command, "--searcher", "random", "--seed", "-1")
    assert code == 2 and "--seed" in text


@pytest.mark.parametrize("command", [["solve", QUICKSTART], ["place", PLACE]])
@pytest.mark.parametrize("seed", ["0", "3"])
def test_a_seed_without_a_searcher_is_refused_as_the_budget_is(command, seed, no_search):
    """QA round 34: ``--seed 3`` with no ``--searcher`` was accepted and did nothing (the
    exact search draws no random numbers), while ``--budget-s`` alone was refused. Oracle:
    the same refusal as --budget-s's, before any search; with a searcher it is taken."""
    code, text = _run(*command, "--seed", seed)
    assert code == 2, text
    assert f"--seed = {seed}: is the seed of a searcher, and no --searcher is given" in text
    code, budget = _run(*command, "--budget-s", "1")
    assert code == 2 and "no --searcher is given" in budget


def test_a_seed_with_a_searcher_is_taken(tmp_path):
    code, text = _run("solve", QUICKSTART, "--searcher", "random", "--seed", "3", "--budget-s",
                      "1", "--time-limit", "20", "--json", "--quiet")
    assert code == 0, text
    assert '"seed": 3' in text


@pytest.mark.parametrize("budget", ["nan", "-1", "inf"])
def test_place_searcher_budget_is_checked(budget, no_search):
    code, text = _run("place", PLACE, "--searcher", "random", "--budget-s", budget)
    assert code == 2 and "--budget-s" in text and "positive, finite" in text


def test_place_spec_that_is_a_directory(tmp_path, no_search):
    code, text = _run("place", tmp_path)
    assert code == 2 and "is a directory" in text and str(tmp_path) in text


def test_place_expert_that_is_a_directory_is_reported_before_the_search(tmp_path, no_search):
    code, text = _run("place", PLACE, "--expert", tmp_path)
    assert code == 2 and "is a directory" in text and str(tmp_path) in text


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
def test_folder_where_files_cannot_be_created():
    """``/proc`` exists and, for root, passes ``access(W_OK)``, yet no file can
    be created there: the check tries it (a probe file, removed)."""
    for problems in (check_output_dir("/proc/autopar-nope"),
                     check_output_file("/proc/autopar-nope/plan.yaml")):
        assert problems and "cannot create files in /proc" in problems[0].format()


def test_output_checks_leave_nothing_behind(tmp_path):
    assert check_output_dir(tmp_path / "new" / "out") == []
    assert check_output_file(tmp_path / "x.json") == []
    assert list(tmp_path.iterdir()) == []           # the probe file is removed


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
def test_export_to_an_unwritable_place(tmp_path):
    code, text = _run("export", PLACE, "--to",
                      "megatron", "-o", "/proc/autopar-nope")
    assert code == 2 and "--out = " in text


def test_capacity_store_that_is_a_directory(tmp_path):
    code, text = _run("capacity", TINY, "--store", tmp_path, "--json")
    assert code == 2 and "--store" in text and "is a directory" in text


def test_capacity_store_that_is_not_a_database(tmp_path):
    bad = tmp_path / "store.sqlite"
    bad.write_text("not a database\n" * 100)
    code, text = _run("capacity", TINY, "--store", bad, "--json")
    assert code == 2 and "cannot use the results store" in text and str(bad) in text
    assert bad.read_text() == "not a database\n" * 100          # left as it was


def test_capacity_out_that_is_a_file(tmp_path):
    target = tmp_path / "afile"
    target.write_text("x")
    code, text = _run("capacity", TINY, "--out", target)
    assert code == 2 and "--out" in text and "exists and is not a directory" in text
